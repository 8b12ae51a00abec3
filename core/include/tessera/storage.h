#pragma once
// Storage: a block of device memory, owned by the allocator of its device type. Views of a
// tensor share one Storage; the version counter lives here so that every view sees a write.
#include <tessera/device.h>
#include <tessera/intrusive_ptr.h>

#include <atomic>
#include <cstddef>
#include <functional>

namespace tessera {

struct DeviceTypeEntry;

class StorageImpl : public RefCounted {
 public:
  // Allocates nbytes on `device` with its plugin's allocator; raises OutOfMemoryError.
  StorageImpl(Device device, size_t nbytes);
  // Wraps memory owned by someone else (a NumPy array, a DLPack producer): `release` is called
  // instead of the device's deallocate when the last tensor lets go.
  StorageImpl(Device device, void* data, size_t nbytes, std::function<void()> release);
  ~StorageImpl();

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }

 private:
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  const DeviceTypeEntry* device_type_;
  std::function<void()> external_release_;
  std::atomic<uint64_t> version_{0};
};
using Storage = IntrusivePtr<StorageImpl>;

}  // namespace tessera

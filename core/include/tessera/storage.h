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

  // Moves the bytes into `data` (host memory of at least nbytes(), owned by the caller's
  // `release`) and frees the old block: every view of this storage then reads and writes there.
  // Host-accessible devices only (Tensor.share_memory_ moves CPU storage into shared memory).
  void move_to(void* data, std::function<void()> release);

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }
  // Host memory that a device plugin allocated page-locked (pin_memory): that device type's id,
  // else -1. Copies between it and that device may be asynchronous.
  int32_t pinned_by() const { return pinned_by_; }
  void set_pinned_by(int32_t device_type) { pinned_by_ = device_type; }

 private:
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  const DeviceTypeEntry* device_type_;
  std::function<void()> external_release_;
  std::atomic<uint64_t> version_{0};
  int32_t pinned_by_ = -1;
};
using Storage = IntrusivePtr<StorageImpl>;

}  // namespace tessera

#pragma once
// The simulated device's memory. Each device index owns an Arena; what it hands out are
// *handles*, not addresses: (tag << 48) | offset. The tag makes every handle a non-canonical
// x86-64 address, so host code that dereferences device memory faults at once instead of
// silently reading it. Only the plugin turns a handle into bytes, through map().
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

namespace simdev {

class Arena {
 public:
  Arena(uint16_t tag, size_t capacity) : tag_(tag), capacity_(capacity) {}

  // A handle to nbytes of fresh memory, or nullptr when the device is full.
  void* allocate(size_t nbytes);
  void release(const void* handle);
  // The bytes [handle, handle + nbytes) of one live allocation. Throws sdk::Error naming the
  // handle when it is foreign, freed, or the range runs past its allocation.
  char* map(const void* handle, size_t nbytes) const;
  bool owns(const void* handle) const { return (reinterpret_cast<uintptr_t>(handle) >> 48) == tag_; }

  size_t bytes_in_use() const;
  size_t live_allocations() const;

 private:
  struct Block {
    std::unique_ptr<char[]> bytes;
    size_t size;
  };
  static constexpr uint64_t kOffsetMask = (uint64_t(1) << 48) - 1;

  uint16_t tag_;
  size_t capacity_;
  mutable std::mutex mutex_;
  std::map<uint64_t, Block> blocks_;  // by start offset
  uint64_t next_offset_ = 4096;       // offsets only grow: a stale handle never aliases new memory
  size_t in_use_ = 0;
};

}  // namespace simdev

#pragma once
// A caching device allocator in the spirit of PyTorch's: device memory is expensive to get
// (cudaMalloc synchronises and takes ~ms), so freed blocks stay cached and are reused.
//   - sizes are rounded: small requests (<= 1 MiB) to 512 B, large ones to 2 MiB;
//   - pools per (device, stream): a block is reused only on the stream it was last used on,
//     so reuse never races with work still queued on another stream;
//   - best fit, bounded waste (a block at most 2x a small request, request + 1/4 + 2 MiB for
//     large ones); no block splitting (simpler, at the cost of some fragmentation);
//   - on a failed device allocation the device's cache is released and the allocation retried;
//   - statistics: allocated, reserved (held from the device), their peaks, and counters.
// It knows nothing of CUDA: the raw allocation functions are given, so it is testable on a
// machine without a GPU (tests/cpp/test_cuda_allocator.cpp) and shared with the HIP build.
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace tessera::gpu {

struct RawAllocator {
  // Returns nullptr on failure and writes the reason to *error.
  void* (*allocate)(void* context, int32_t device, size_t nbytes, std::string* error) = nullptr;
  void (*release)(void* context, int32_t device, void* ptr) = nullptr;
  void* context = nullptr;
};

struct AllocatorStats {
  int64_t allocated = 0;       // bytes in blocks handed out (rounded sizes)
  int64_t reserved = 0;        // bytes held from the device (handed out + cached)
  int64_t peak_allocated = 0;
  int64_t peak_reserved = 0;
  int64_t num_allocations = 0; // calls to allocate
  int64_t num_cache_hits = 0;  // allocations served from the cache
  int64_t num_device_allocations = 0;
  int64_t num_ooms = 0;        // allocations that failed even after releasing the cache
  // The order memory_stats returns them in.
  std::vector<int64_t> to_vector() const {
    return {allocated, reserved, peak_allocated, peak_reserved, num_allocations, num_cache_hits,
            num_device_allocations, num_ooms};
  }
};

class CachingAllocator {
 public:
  static constexpr size_t kSmallSize = size_t(1) << 20;     // 1 MiB
  static constexpr size_t kSmallRound = 512;
  static constexpr size_t kLargeRound = size_t(2) << 20;   // 2 MiB

  explicit CachingAllocator(RawAllocator raw) : raw_(raw) {}
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  static size_t round_size(size_t nbytes);
  // nullptr on failure; last_error() then says why. `stream` identifies the pool.
  void* allocate(int32_t device, size_t nbytes, uintptr_t stream);
  // Returns the block to its pool (unknown pointers are ignored: false).
  bool deallocate(void* ptr);
  // Releases every cached (free) block of `device` (-1: every device) back to the device.
  void empty_cache(int32_t device);
  AllocatorStats stats(int32_t device) const;
  void reset_peaks(int32_t device);
  std::string last_error() const;

 private:
  struct Block {
    void* ptr;
    size_t size;
    int32_t device;
    uintptr_t stream;
  };
  using PoolKey = std::pair<int32_t, uintptr_t>;  // (device, stream)
  void* take_cached(int32_t device, uintptr_t stream, size_t size);
  void release_cached(int32_t device);
  AllocatorStats& stats_of(int32_t device);

  RawAllocator raw_;
  mutable std::mutex mutex_;
  std::map<PoolKey, std::multimap<size_t, void*>> free_;  // size -> ptr of cached blocks
  std::unordered_map<void*, Block> blocks_;                // every block held, by pointer
  std::unordered_map<void*, bool> in_use_;
  std::map<int32_t, AllocatorStats> stats_;
  std::string last_error_;
};

}  // namespace tessera::gpu

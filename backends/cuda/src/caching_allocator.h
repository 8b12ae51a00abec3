#pragma once
// A caching device allocator in the spirit of PyTorch's: device memory is expensive to get
// (cudaMalloc synchronises and takes ~ms), so freed blocks stay cached and are reused.
//   - sizes are rounded: small requests (<= 1 MiB) to 512 B, large ones to 2 MiB;
//   - pools per (device, stream): a block is reused only on the stream it was last used on,
//     so reuse never races with work still queued on another stream;
//   - best fit, bounded waste (a block at most 2x a small request, request + 1/4 + 2 MiB for
//     large ones); no block splitting (simpler, at the cost of some fragmentation);
//   - stream-ordered frees (PyTorch's record_stream): a block also used on other streams goes
//     back to its pool only once an event recorded on each of them at free time has completed;
//     pending frees are checked on every allocation, waited for by empty_cache and before the
//     out-of-memory retry;
//   - on a failed device allocation the device's cache is released and the allocation retried;
//   - statistics: allocated, reserved (held from the device), their peaks, and counters;
//   - private pools for CUDA graphs: while a stream captures into pool P, its allocations come
//     from P and their blocks go back to P when freed, never to the shared cache, because every
//     replay of the graph writes them. Nothing is released to the device and no event is queried
//     while a capture is underway (both are illegal during capture); frees that would need an
//     event wait until the last capture ends.
// It knows nothing of CUDA: the raw allocation and event functions are given, so it is testable
// on a machine without a GPU (tests/cpp/test_cuda_allocator.cpp) and shared with the HIP build.
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace tessera::gpu {

struct RawAllocator {
  // Returns nullptr on failure and writes the reason to *error.
  void* (*allocate)(void* context, int32_t device, size_t nbytes, std::string* error) = nullptr;
  void (*release)(void* context, int32_t device, void* ptr) = nullptr;
  void* context = nullptr;
  // Events for stream-ordered frees. record_event: an event that completes when the work queued
  // on `stream` so far has (nullptr on failure, reason in *error); event_done: has it (an error
  // counts as done: nothing more will run); event_wait: blocks until it has; event_release: gives
  // it back. All four or none: without them (or when recording fails) such a block is released
  // to the device, which waits for its work (cudaFree synchronises).
  void* (*record_event)(void* context, int32_t device, uintptr_t stream, std::string* error) = nullptr;
  bool (*event_done)(void* context, int32_t device, void* event) = nullptr;
  void (*event_wait)(void* context, int32_t device, void* event) = nullptr;
  void (*event_release)(void* context, int32_t device, void* event) = nullptr;
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
  int64_t num_deferred_frees = 0;  // frees that waited for other streams (record_stream)
  int64_t pending_frees = 0;       // blocks waiting for those streams now
  // The order memory_stats returns them in.
  std::vector<int64_t> to_vector() const {
    return {allocated, reserved, peak_allocated, peak_reserved, num_allocations, num_cache_hits,
            num_device_allocations, num_ooms, num_deferred_frees, pending_frees};
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
  // nullptr on failure; last_error() then says why. `stream` identifies the pool. On a failed
  // device allocation the device's pending frees are waited for and its cache released, then the
  // allocation retried (an out-of-memory when that fails too). A probe (may_release_cache false:
  // cuDNN trying an algorithm's workspace, with a smaller one to fall back on) only takes a cached
  // block or asks the device once: a failure waits for nothing, keeps the cache and is no OOM.
  void* allocate(int32_t device, size_t nbytes, uintptr_t stream, bool may_release_cache = true);
  // Returns the block to its pool (unknown pointers are ignored: false); a block recorded on
  // other streams goes there once their work queued so far is done.
  bool deallocate(void* ptr);
  // The in-use block at `ptr` is also used by work queued on `stream` (a no-op for the stream it
  // was allocated on). False when `ptr` is not an in-use block of this allocator.
  bool record_stream(void* ptr, uintptr_t stream);
  // `stream` is about to be destroyed, its work done: blocks recorded on it need not wait for
  // it (nor can an event be recorded on it any more); its pool's cached blocks go back to the
  // device, and its blocks still in use (or waiting on other streams) go back to the device when
  // freed, so no block stays keyed by a dead handle (a new stream may reuse the value).
  void forget_stream(uintptr_t stream);
  // Waits for the pending frees of `device` (-1: every device), then releases every cached
  // (free) block of it back to the device.
  void empty_cache(int32_t device);
  AllocatorStats stats(int32_t device) const;

  // ---- private pools (CUDA graphs). A new pool id (torch.cuda.graph_pool_handle); ids start at 1.
  uint64_t create_pool();
  // Until end_allocate_to_pool, allocations of `device` on `stream` come from `pool` (made if
  // new), which gains a user: a graph captured into it. False when `stream` already allocates
  // to a pool.
  bool begin_allocate_to_pool(int32_t device, uintptr_t stream, uint64_t pool);
  void end_allocate_to_pool(int32_t device, uintptr_t stream);
  // One user of `pool` is gone (a graph reset). With none left its cached blocks go back to the
  // device, and its blocks in use go back to the device when freed.
  void release_pool(uint64_t pool);
  // Whether some stream is capturing (allocating to a private pool) now.
  bool capture_underway() const;
  // Bytes in blocks of `pool`, cached and in use (0 for an unknown or released pool).
  size_t pool_bytes(uint64_t pool) const;
  void reset_peaks(int32_t device);
  std::string last_error() const;

 private:
  struct Block {
    void* ptr;
    size_t size;
    int32_t device;
    uintptr_t stream;                     // the pool it belongs to
    std::vector<uintptr_t> stream_uses;   // other streams it was recorded on
    int32_t pending_events = 0;           // freed, waiting for this many events
    bool stream_destroyed = false;        // its pool's stream is gone: released when freed
    uint64_t private_pool = 0;            // a CUDA graph's pool (0: the shared cache)
  };
  struct PendingFree {
    void* event;
    int32_t device;
    void* ptr;
  };
  // (device, stream, 0) for the shared cache, (device, 0, pool) for a private pool.
  using PoolKey = std::tuple<int32_t, uintptr_t, uint64_t>;
  struct PrivatePool {
    int32_t users = 0;  // graphs captured into it and not yet reset
  };
  PoolKey pool_key_of(const Block& b) const;
  bool pool_alive(uint64_t pool) const;
  void release_dead_pools();  // the cached blocks of pools with no graph left go to the device
  void* take_cached(const PoolKey& key, size_t size);
  void release_cached(int32_t device);
  void release_block(void* ptr);              // back to the device
  void pool_block(Block& b);                  // into its pool (or the device, its stream gone)
  void free_block(Block& b);                  // into its pool, or pending on its streams' events
  void process_events();                      // pools the blocks whose events have completed
  void wait_pending(int32_t device);          // waits for every pending free of `device` (-1: all)
  void event_completed(const PendingFree& p);
  AllocatorStats& stats_of(int32_t device);

  RawAllocator raw_;
  mutable std::mutex mutex_;
  std::map<PoolKey, std::multimap<size_t, void*>> free_;  // size -> ptr of cached blocks
  std::unordered_map<void*, Block> blocks_;                // every block held, by pointer
  std::unordered_map<void*, bool> in_use_;
  std::vector<PendingFree> pending_;  // in the order they were recorded
  std::map<int32_t, AllocatorStats> stats_;
  std::map<std::pair<int32_t, uintptr_t>, uint64_t> allocating_to_;  // (device, stream) -> pool
  std::map<uint64_t, PrivatePool> pools_;
  uint64_t next_pool_ = 1;
  std::vector<void*> deferred_until_no_capture_;  // freed during a capture, needing events
  std::string last_error_;
};

}  // namespace tessera::gpu

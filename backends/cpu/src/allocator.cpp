#include "allocator.h"

#include <tessera/sdk/plugin.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>

namespace tessera::cpu {

namespace {
// Blocks at least this big are cached: below it malloc is fast and memory is already mapped.
constexpr size_t kCacheMinBytes = size_t(1) << 20;
// At most this much memory is kept cached.
constexpr size_t kCacheMaxBytes = size_t(1) << 30;
constexpr size_t kAlignment = 64;

struct BlockCache {
  std::mutex mutex;
  std::multimap<size_t, void*> free_blocks;  // rounded size -> block
  size_t cached_bytes = 0;
};
BlockCache& cache() {
  static BlockCache* c = new BlockCache;  // never destroyed: tensors may die after static teardown
  return *c;
}
size_t round_up(size_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

// Bytes handed out and not yet returned (cached blocks are not counted), for the profiler.
std::atomic<int64_t> allocated_bytes{0};
void* noted(void* p, int64_t nbytes) {
  const int64_t total = allocated_bytes.fetch_add(nbytes, std::memory_order_relaxed) + nbytes;
  sdk::observe_memory(ts_device{0, 0}, p, nbytes, total);
  return p;
}

void* allocate_block(size_t nbytes) {
  size_t size = round_up(nbytes == 0 ? 1 : nbytes);
  if (size >= kCacheMinBytes) {
    auto& c = cache();
    std::lock_guard lock(c.mutex);
    if (auto it = c.free_blocks.find(size); it != c.free_blocks.end()) {
      void* p = it->second;
      c.free_blocks.erase(it);
      c.cached_bytes -= size;
      return p;
    }
  }
  return std::aligned_alloc(kAlignment, size);
}

void release_block(void* ptr, size_t nbytes) {
  size_t size = round_up(nbytes == 0 ? 1 : nbytes);
  if (size >= kCacheMinBytes) {
    auto& c = cache();
    std::lock_guard lock(c.mutex);
    if (c.cached_bytes + size <= kCacheMaxBytes) {
      c.free_blocks.emplace(size, ptr);
      c.cached_bytes += size;
      return;
    }
  }
  std::free(ptr);
}

}  // namespace

void* allocate(size_t nbytes) {
  void* p = allocate_block(nbytes);
  return p ? noted(p, int64_t(nbytes)) : nullptr;
}

void deallocate(void* ptr, size_t nbytes) {
  if (!ptr) return;
  noted(ptr, -int64_t(nbytes));
  release_block(ptr, nbytes);
}

void empty_cache() {
  auto& c = cache();
  std::lock_guard lock(c.mutex);
  for (auto& [size, p] : c.free_blocks) std::free(p);
  c.free_blocks.clear();
  c.cached_bytes = 0;
}

}  // namespace tessera::cpu

#include "allocator.h"

#include <tessera/sdk/plugin.h>

#include <atomic>
#include <cstdlib>
#include <list>
#include <map>
#include <mutex>

namespace tessera::cpu {

namespace {
// Blocks at least this big are cached: below it malloc is fast and memory is already mapped.
constexpr size_t kCacheMinBytes = size_t(1) << 20;
// At most this much memory is kept cached.
constexpr size_t kCacheMaxBytes = size_t(1) << 30;
constexpr size_t kAlignment = 64;

// Cached blocks by size, and in the order they were cached: when a new block would pass the cap,
// the oldest go back to the system first, so the blocks of the work running now stay cached (after
// a large model, a smaller one's blocks would otherwise find the cache full of sizes it never asks
// for, and pay fresh page faults on every step).
struct BlockCache {
  struct Block {
    size_t size;
    void* ptr;
  };
  using Order = std::list<Block>;
  std::mutex mutex;
  Order oldest_first;
  std::multimap<size_t, Order::iterator> free_blocks;  // rounded size -> its entry in oldest_first
  size_t cached_bytes = 0;

  void* take(size_t size) {
    auto it = free_blocks.find(size);
    if (it == free_blocks.end()) return nullptr;
    void* p = it->second->ptr;
    oldest_first.erase(it->second);
    free_blocks.erase(it);
    cached_bytes -= size;
    return p;
  }
  void put(size_t size, void* ptr) {
    while (!oldest_first.empty() && cached_bytes + size > kCacheMaxBytes) {
      const Block old = oldest_first.front();
      auto range = free_blocks.equal_range(old.size);
      for (auto it = range.first; it != range.second; ++it)
        if (it->second == oldest_first.begin()) {
          free_blocks.erase(it);
          break;
        }
      oldest_first.pop_front();
      cached_bytes -= old.size;
      std::free(old.ptr);
    }
    free_blocks.emplace(size, oldest_first.insert(oldest_first.end(), Block{size, ptr}));
    cached_bytes += size;
  }
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
    if (void* p = c.take(size)) return p;
  }
  return std::aligned_alloc(kAlignment, size);
}

void release_block(void* ptr, size_t nbytes) {
  size_t size = round_up(nbytes == 0 ? 1 : nbytes);
  if (size >= kCacheMinBytes) {
    if (size <= kCacheMaxBytes) {
      auto& c = cache();
      std::lock_guard lock(c.mutex);
      c.put(size, ptr);
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
  for (const auto& block : c.oldest_first) std::free(block.ptr);
  c.oldest_first.clear();
  c.free_blocks.clear();
  c.cached_bytes = 0;
}

}  // namespace tessera::cpu

#include "allocator.h"

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
}  // namespace

void* allocate(size_t nbytes) {
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

void deallocate(void* ptr, size_t nbytes) {
  if (!ptr) return;
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

void empty_cache() {
  auto& c = cache();
  std::lock_guard lock(c.mutex);
  for (auto& [size, p] : c.free_blocks) std::free(p);
  c.free_blocks.clear();
  c.cached_bytes = 0;
}

}  // namespace tessera::cpu

#include "caching_allocator.h"

namespace tessera::gpu {

size_t CachingAllocator::round_size(size_t nbytes) {
  if (nbytes == 0) nbytes = 1;  // a zero-byte tensor still gets a distinct, valid pointer
  size_t unit = nbytes <= kSmallSize ? kSmallRound : kLargeRound;
  return (nbytes + unit - 1) / unit * unit;
}

AllocatorStats& CachingAllocator::stats_of(int32_t device) { return stats_[device]; }

void* CachingAllocator::take_cached(int32_t device, uintptr_t stream, size_t size) {
  auto pool = free_.find({device, stream});
  if (pool == free_.end()) return nullptr;
  auto it = pool->second.lower_bound(size);
  if (it == pool->second.end()) return nullptr;
  size_t limit = size <= kSmallSize ? 2 * size : size + size / 4 + kLargeRound;
  if (it->first > limit) return nullptr;  // too wasteful: get a fitting block instead
  void* ptr = it->second;
  pool->second.erase(it);
  return ptr;
}

void* CachingAllocator::allocate(int32_t device, size_t nbytes, uintptr_t stream) {
  std::lock_guard lock(mutex_);
  AllocatorStats& st = stats_of(device);
  ++st.num_allocations;
  size_t size = round_size(nbytes);
  void* ptr = take_cached(device, stream, size);
  if (ptr) {
    ++st.num_cache_hits;
  } else {
    std::string error;
    ptr = raw_.allocate(raw_.context, device, size, &error);
    if (!ptr) {  // the cache may hold what we need in the wrong sizes: give it back and retry
      release_cached(device);
      ptr = raw_.allocate(raw_.context, device, size, &error);
    }
    if (!ptr) {
      ++st.num_ooms;
      last_error_ = "failed to allocate " + std::to_string(nbytes) + " bytes on device " + std::to_string(device) +
                    " (" + std::to_string(st.allocated) + " bytes allocated, " + std::to_string(st.reserved) +
                    " reserved): " + error;
      return nullptr;
    }
    ++st.num_device_allocations;
    blocks_[ptr] = Block{ptr, size, device, stream};
    st.reserved += int64_t(size);
    if (st.reserved > st.peak_reserved) st.peak_reserved = st.reserved;
  }
  in_use_[ptr] = true;
  st.allocated += int64_t(blocks_[ptr].size);
  if (st.allocated > st.peak_allocated) st.peak_allocated = st.allocated;
  return ptr;
}

bool CachingAllocator::deallocate(void* ptr) {
  std::lock_guard lock(mutex_);
  auto use = in_use_.find(ptr);
  if (use == in_use_.end()) return false;
  in_use_.erase(use);
  const Block& b = blocks_.at(ptr);
  stats_of(b.device).allocated -= int64_t(b.size);
  free_[{b.device, b.stream}].emplace(b.size, ptr);
  return true;
}

void CachingAllocator::release_cached(int32_t device) {
  for (auto pool = free_.begin(); pool != free_.end();) {
    if (device >= 0 && pool->first.first != device) { ++pool; continue; }
    for (auto& [size, ptr] : pool->second) {
      Block b = blocks_.at(ptr);
      raw_.release(raw_.context, b.device, ptr);
      stats_of(b.device).reserved -= int64_t(b.size);
      blocks_.erase(ptr);
    }
    pool = free_.erase(pool);
  }
}

void CachingAllocator::empty_cache(int32_t device) {
  std::lock_guard lock(mutex_);
  release_cached(device);
}

AllocatorStats CachingAllocator::stats(int32_t device) const {
  std::lock_guard lock(mutex_);
  auto it = stats_.find(device);
  return it == stats_.end() ? AllocatorStats{} : it->second;
}

void CachingAllocator::reset_peaks(int32_t device) {
  std::lock_guard lock(mutex_);
  AllocatorStats& st = stats_of(device);
  st.peak_allocated = st.allocated;
  st.peak_reserved = st.reserved;
}

std::string CachingAllocator::last_error() const {
  std::lock_guard lock(mutex_);
  return last_error_;
}

}  // namespace tessera::gpu

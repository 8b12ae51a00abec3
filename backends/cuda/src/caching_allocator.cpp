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

void* CachingAllocator::allocate(int32_t device, size_t nbytes, uintptr_t stream, bool may_release_cache) {
  std::lock_guard lock(mutex_);
  process_events();
  AllocatorStats& st = stats_of(device);
  ++st.num_allocations;
  size_t size = round_size(nbytes);
  void* ptr = take_cached(device, stream, size);
  bool hit = ptr != nullptr;
  std::string error;
  if (!ptr && !(ptr = raw_.allocate(raw_.context, device, size, &error)) && may_release_cache) {
    // Wait for the pending frees, one may fit; else give the cache back to the device and retry.
    wait_pending(device);
    if ((ptr = take_cached(device, stream, size))) {
      hit = true;
    } else {
      release_cached(device);
      ptr = raw_.allocate(raw_.context, device, size, &error);
    }
  }
  if (!ptr) {
    if (may_release_cache) ++st.num_ooms;
    last_error_ = "failed to allocate " + std::to_string(nbytes) + " bytes on device " + std::to_string(device) +
                  " (" + std::to_string(st.allocated) + " bytes allocated, " + std::to_string(st.reserved) +
                  " reserved): " + error;
    return nullptr;
  }
  if (hit) {
    ++st.num_cache_hits;
  } else {
    ++st.num_device_allocations;
    blocks_[ptr] = Block{ptr, size, device, stream, {}, 0};
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
  Block& b = blocks_.at(ptr);
  stats_of(b.device).allocated -= int64_t(b.size);
  free_block(b);
  return true;
}

bool CachingAllocator::record_stream(void* ptr, uintptr_t stream) {
  std::lock_guard lock(mutex_);
  if (!in_use_.count(ptr)) return false;
  Block& b = blocks_.at(ptr);
  if (stream == b.stream) return true;  // its own stream orders its reuse already
  for (uintptr_t s : b.stream_uses)
    if (s == stream) return true;
  b.stream_uses.push_back(stream);
  return true;
}

void CachingAllocator::forget_stream(uintptr_t stream) {
  std::lock_guard lock(mutex_);
  for (auto& [ptr, b] : blocks_) {
    std::erase(b.stream_uses, stream);
    if (b.stream == stream) b.stream_destroyed = true;
  }
  for (auto pool = free_.begin(); pool != free_.end();) {
    if (pool->first.second != stream) { ++pool; continue; }
    for (auto& [size, ptr] : pool->second) release_block(ptr);
    pool = free_.erase(pool);
  }
}

void CachingAllocator::release_block(void* ptr) {
  Block b = blocks_.at(ptr);
  raw_.release(raw_.context, b.device, ptr);
  stats_of(b.device).reserved -= int64_t(b.size);
  blocks_.erase(ptr);
}

void CachingAllocator::pool_block(Block& b) {
  if (b.stream_destroyed) return release_block(b.ptr);
  free_[{b.device, b.stream}].emplace(b.size, b.ptr);
}

void CachingAllocator::free_block(Block& b) {
  if (b.stream_uses.empty()) return pool_block(b);
  std::vector<uintptr_t> uses;
  uses.swap(b.stream_uses);
  std::vector<void*> events;
  bool recorded = raw_.record_event && raw_.event_done && raw_.event_wait && raw_.event_release;
  for (uintptr_t s : uses) {
    if (!recorded) break;
    std::string error;
    void* event = raw_.record_event(raw_.context, b.device, s, &error);
    if (event) events.push_back(event);
    else recorded = false;
  }
  AllocatorStats& st = stats_of(b.device);
  if (!recorded) {
    // The other streams' work cannot be marked: release the block to the device, whose free
    // waits for all of its work, rather than risk handing it out early.
    for (void* event : events) {
      raw_.event_wait(raw_.context, b.device, event);
      raw_.event_release(raw_.context, b.device, event);
    }
    return release_block(b.ptr);
  }
  ++st.num_deferred_frees;
  ++st.pending_frees;
  b.pending_events = int32_t(events.size());
  for (void* event : events) pending_.push_back(PendingFree{event, b.device, b.ptr});
}

void CachingAllocator::event_completed(const PendingFree& p) {
  raw_.event_release(raw_.context, p.device, p.event);
  Block& b = blocks_.at(p.ptr);
  if (--b.pending_events > 0) return;
  --stats_of(b.device).pending_frees;
  pool_block(b);
}

void CachingAllocator::process_events() {
  size_t kept = 0;
  for (size_t i = 0; i < pending_.size(); ++i) {
    const PendingFree& p = pending_[i];
    if (raw_.event_done(raw_.context, p.device, p.event)) event_completed(p);
    else pending_[kept++] = p;
  }
  pending_.resize(kept);
}

void CachingAllocator::wait_pending(int32_t device) {
  size_t kept = 0;
  for (size_t i = 0; i < pending_.size(); ++i) {
    const PendingFree& p = pending_[i];
    if (device < 0 || p.device == device) {
      raw_.event_wait(raw_.context, p.device, p.event);
      event_completed(p);
    } else {
      pending_[kept++] = p;
    }
  }
  pending_.resize(kept);
}

void CachingAllocator::release_cached(int32_t device) {
  for (auto pool = free_.begin(); pool != free_.end();) {
    if (device >= 0 && pool->first.first != device) { ++pool; continue; }
    for (auto& [size, ptr] : pool->second) release_block(ptr);
    pool = free_.erase(pool);
  }
}

void CachingAllocator::empty_cache(int32_t device) {
  std::lock_guard lock(mutex_);
  wait_pending(device);
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

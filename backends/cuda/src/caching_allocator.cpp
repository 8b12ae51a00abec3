#include "caching_allocator.h"

#include <algorithm>

namespace tessera::gpu {

size_t CachingAllocator::round_size(size_t nbytes) {
  if (nbytes == 0) nbytes = 1;  // a zero-byte tensor still gets a distinct, valid pointer
  size_t unit = nbytes <= kSmallSize ? kSmallRound : kLargeRound;
  return (nbytes + unit - 1) / unit * unit;
}

AllocatorStats& CachingAllocator::stats_of(int32_t device) { return stats_[device]; }

CachingAllocator::PoolKey CachingAllocator::pool_key_of(const Block& b) const {
  return b.private_pool ? PoolKey{b.device, 0, b.private_pool} : PoolKey{b.device, b.stream, 0};
}

bool CachingAllocator::pool_alive(uint64_t pool) const {
  auto it = pools_.find(pool);
  return it != pools_.end() && it->second.users > 0;
}

void* CachingAllocator::take_cached(const PoolKey& key, size_t size) {
  auto pool = free_.find(key);
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
  // During a capture no event may be queried and nothing released to the device.
  const bool capturing = !allocating_to_.empty();
  if (!capturing) process_events();
  AllocatorStats& st = stats_of(device);
  ++st.num_allocations;
  size_t size = round_size(nbytes);
  auto to = allocating_to_.find({device, stream});
  const uint64_t pool = to == allocating_to_.end() ? 0 : to->second;
  const PoolKey key = pool ? PoolKey{device, 0, pool} : PoolKey{device, stream, 0};
  void* ptr = take_cached(key, size);
  bool hit = ptr != nullptr;
  std::string error;
  if (!ptr && !(ptr = raw_.allocate(raw_.context, device, size, &error)) && may_release_cache && !capturing) {
    // Wait for the pending frees, one may fit; else give the cache back to the device and retry.
    wait_pending(device);
    if ((ptr = take_cached(key, size))) {
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
    if (capturing) last_error_ += " (the cache is not released to the device while a CUDA graph is captured)";
    return nullptr;
  }
  if (hit) {
    ++st.num_cache_hits;
  } else {
    ++st.num_device_allocations;
    Block b{ptr, size, device, stream, {}, 0};
    b.private_pool = pool;
    blocks_[ptr] = b;
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
    if (b.stream == stream && !b.private_pool) b.stream_destroyed = true;
  }
  for (auto pool = free_.begin(); pool != free_.end();) {
    if (std::get<1>(pool->first) != stream || std::get<2>(pool->first) != 0) { ++pool; continue; }
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
  // A released graph pool's block goes back to the device, once no capture forbids that.
  const bool gone = b.private_pool ? !pool_alive(b.private_pool) : b.stream_destroyed;
  if (gone && allocating_to_.empty()) return release_block(b.ptr);
  free_[pool_key_of(b)].emplace(b.size, b.ptr);
}

void CachingAllocator::free_block(Block& b) {
  if (b.stream_uses.empty()) return pool_block(b);
  if (!allocating_to_.empty()) {  // no event may be recorded for it during a capture
    deferred_until_no_capture_.push_back(b.ptr);
    return;
  }
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
    // A live graph pool keeps its blocks: its graphs' replays write them.
    const uint64_t private_pool = std::get<2>(pool->first);
    if ((device >= 0 && std::get<0>(pool->first) != device) || (private_pool && pool_alive(private_pool))) {
      ++pool;
      continue;
    }
    for (auto& [size, ptr] : pool->second) release_block(ptr);
    pool = free_.erase(pool);
  }
}

void CachingAllocator::empty_cache(int32_t device) {
  std::lock_guard lock(mutex_);
  if (!allocating_to_.empty()) return;  // nothing may be released or waited for during a capture
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

uint64_t CachingAllocator::create_pool() {
  std::lock_guard lock(mutex_);
  return next_pool_++;
}

bool CachingAllocator::begin_allocate_to_pool(int32_t device, uintptr_t stream, uint64_t pool) {
  std::lock_guard lock(mutex_);
  if (pool == 0 || !allocating_to_.emplace(std::pair{device, stream}, pool).second) return false;
  ++pools_[pool].users;
  next_pool_ = std::max(next_pool_, pool + 1);  // a handle passed in is never handed out again
  return true;
}

void CachingAllocator::end_allocate_to_pool(int32_t device, uintptr_t stream) {
  std::lock_guard lock(mutex_);
  allocating_to_.erase({device, stream});
  if (!allocating_to_.empty()) return;
  // The last capture ended: the frees it held back go ahead, and released pools' blocks go.
  std::vector<void*> deferred;
  deferred.swap(deferred_until_no_capture_);
  for (void* ptr : deferred) free_block(blocks_.at(ptr));
  release_dead_pools();
}

void CachingAllocator::release_dead_pools() {
  for (auto cached = free_.begin(); cached != free_.end();) {
    const uint64_t pool = std::get<2>(cached->first);
    if (!pool || pool_alive(pool)) { ++cached; continue; }
    for (auto& [size, ptr] : cached->second) release_block(ptr);
    cached = free_.erase(cached);
  }
}

void CachingAllocator::release_pool(uint64_t pool) {
  std::lock_guard lock(mutex_);
  auto it = pools_.find(pool);
  if (it == pools_.end() || it->second.users == 0) return;
  if (--it->second.users == 0 && allocating_to_.empty()) release_dead_pools();
}

bool CachingAllocator::capture_underway() const {
  std::lock_guard lock(mutex_);
  return !allocating_to_.empty();
}

size_t CachingAllocator::pool_bytes(uint64_t pool) const {
  std::lock_guard lock(mutex_);
  size_t bytes = 0;
  for (const auto& [ptr, b] : blocks_)
    if (b.private_pool == pool) bytes += b.size;
  return bytes;
}

std::string CachingAllocator::last_error() const {
  std::lock_guard lock(mutex_);
  return last_error_;
}

}  // namespace tessera::gpu

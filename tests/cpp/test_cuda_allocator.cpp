// The CUDA plugin's caching allocator, on a fake device (host memory with a capacity), so it
// runs on any machine: rounding, reuse per (device, stream), bounded waste, statistics,
// empty_cache, the release-and-retry on a failed device allocation, and stream-ordered frees
// (record_stream) with fake events whose completion the test decides.
#include <gtest/gtest.h>

// The allocator has no CUDA dependency; compiled into this test directly.
#include "../../backends/cuda/src/caching_allocator.cpp"

#include <algorithm>
#include <cstdlib>
#include <initializer_list>
#include <set>

using tessera::gpu::CachingAllocator;
using tessera::gpu::RawAllocator;

namespace {
struct FakeDevice {
  size_t capacity = size_t(64) << 20, used = 0;
  int mallocs = 0, frees = 0;
  std::unordered_map<void*, size_t> sizes;
};
void* fake_alloc(void* ctx, int32_t, size_t n, std::string* error) {
  auto* d = static_cast<FakeDevice*>(ctx);
  if (d->used + n > d->capacity) { *error = "fake device out of memory"; return nullptr; }
  void* p = std::malloc(n);
  d->used += n;
  d->sizes[p] = n;
  ++d->mallocs;
  return p;
}
void fake_free(void* ctx, int32_t, void* p) {
  auto* d = static_cast<FakeDevice*>(ctx);
  d->used -= d->sizes.at(p);
  d->sizes.erase(p);
  ++d->frees;
  std::free(p);
}
RawAllocator raw(FakeDevice& d) { return RawAllocator{fake_alloc, fake_free, &d}; }

// Fake streams and events: a stream is "busy" until the test finishes it; an event recorded on
// a busy stream completes when that stream is finished (or waited for).
struct FakeEvent {
  uintptr_t stream;
  bool done;
};
struct FakeStreams : FakeDevice {
  std::set<uintptr_t> busy;
  std::vector<FakeEvent*> live;
  int recorded = 0, waited = 0, released = 0;
  bool fail_record = false;
  void finish(uintptr_t stream) {
    busy.erase(stream);
    for (FakeEvent* e : live)
      if (e->stream == stream) e->done = true;
  }
};
// The context is the FakeDevice base (what fake_alloc expects).
FakeStreams* streams_of(void* ctx) { return static_cast<FakeStreams*>(static_cast<FakeDevice*>(ctx)); }
void* fake_record(void* ctx, int32_t, uintptr_t stream, std::string* error) {
  FakeStreams* d = streams_of(ctx);
  if (d->fail_record) { *error = "fake record failure"; return nullptr; }
  ++d->recorded;
  d->live.push_back(new FakeEvent{stream, !d->busy.count(stream)});
  return d->live.back();
}
bool fake_done(void*, int32_t, void* e) { return static_cast<FakeEvent*>(e)->done; }
void fake_wait(void* ctx, int32_t, void* e) {
  ++streams_of(ctx)->waited;
  static_cast<FakeEvent*>(e)->done = true;
}
void fake_release(void* ctx, int32_t, void* e) {
  FakeStreams* d = streams_of(ctx);
  ++d->released;
  d->live.erase(std::find(d->live.begin(), d->live.end(), static_cast<FakeEvent*>(e)));
  delete static_cast<FakeEvent*>(e);
}
RawAllocator raw_with_events(FakeStreams& d) {
  RawAllocator r{fake_alloc, fake_free, static_cast<FakeDevice*>(&d)};
  r.record_event = fake_record;
  r.event_done = fake_done;
  r.event_wait = fake_wait;
  r.event_release = fake_release;
  return r;
}

// The allocator, like PyTorch's, never frees device memory on destruction (the device context may
// be gone by then): each test hands its blocks back and empties the cache, and checks that this
// returns every byte to the device (LeakSanitizer would see the rest as leaks).
void give_everything_back(CachingAllocator& a, FakeDevice& dev, std::initializer_list<void*> live) {
  for (void* p : live) EXPECT_TRUE(a.deallocate(p));
  a.empty_cache(-1);
  EXPECT_EQ(dev.used, 0u);
  EXPECT_TRUE(dev.sizes.empty());
}
}  // namespace

TEST(CudaCachingAllocator, RoundsSizes) {
  EXPECT_EQ(CachingAllocator::round_size(0), 512u);
  EXPECT_EQ(CachingAllocator::round_size(1), 512u);
  EXPECT_EQ(CachingAllocator::round_size(513), 1024u);
  EXPECT_EQ(CachingAllocator::round_size(1 << 20), size_t(1) << 20);
  EXPECT_EQ(CachingAllocator::round_size((1 << 20) + 1), size_t(2) << 20);
  EXPECT_EQ(CachingAllocator::round_size((5 << 20) + 3), size_t(6) << 20);
}

TEST(CudaCachingAllocator, ReusesFreedBlocksOnTheSameStreamOnly) {
  FakeDevice dev;
  CachingAllocator a(raw(dev));
  void* p = a.allocate(0, 1000, /*stream=*/1);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(a.deallocate(p));
  EXPECT_EQ(a.allocate(0, 900, 1), p);  // same rounded size, same stream: reused
  void* q = a.allocate(0, 1000, 2);     // another stream: a new block
  EXPECT_NE(q, p);
  EXPECT_EQ(dev.mallocs, 2);
  auto st = a.stats(0);
  EXPECT_EQ(st.num_allocations, 3);
  EXPECT_EQ(st.num_cache_hits, 1);
  EXPECT_EQ(st.allocated, 2048);
  EXPECT_EQ(st.reserved, 2048);
  EXPECT_FALSE(a.deallocate(reinterpret_cast<void*>(0x1234)));  // unknown pointers are ignored
  give_everything_back(a, dev, {p, q});
}

TEST(CudaCachingAllocator, BoundsWasteAndTracksPeaks) {
  FakeDevice dev;
  CachingAllocator a(raw(dev));
  void* big = a.allocate(0, size_t(32) << 20, 0);
  a.deallocate(big);
  void* small = a.allocate(0, 4096, 0);  // a 32 MiB block is far too big for 4 KiB
  EXPECT_NE(small, big);
  auto st = a.stats(0);
  EXPECT_EQ(st.peak_allocated, int64_t(32) << 20);
  EXPECT_EQ(st.allocated, 4096);
  a.reset_peaks(0);
  EXPECT_EQ(a.stats(0).peak_allocated, 4096);
  give_everything_back(a, dev, {small});
}

TEST(CudaCachingAllocator, EmptyCacheReleasesOnlyFreeBlocks) {
  FakeDevice dev;
  CachingAllocator a(raw(dev));
  void* p = a.allocate(0, 100, 0);
  void* q = a.allocate(0, 100, 0);
  a.deallocate(p);
  a.empty_cache(-1);
  EXPECT_EQ(dev.frees, 1);
  EXPECT_EQ(a.stats(0).reserved, 512);
  a.deallocate(q);
  a.empty_cache(0);
  EXPECT_EQ(dev.used, 0u);
  EXPECT_EQ(a.stats(0).reserved, 0);
}

TEST(CudaCachingAllocator, ReleasesTheCacheAndRetriesWhenTheDeviceIsFull) {
  FakeDevice dev;
  dev.capacity = size_t(7) << 20;
  CachingAllocator a(raw(dev));
  void* p = a.allocate(0, size_t(6) << 20, 0);
  a.deallocate(p);                            // 6 MiB cached
  void* q = a.allocate(0, size_t(3) << 19, 0);  // 2 MiB: the 6 MiB block wastes too much; full -> release, retry
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(dev.frees, 1);
  EXPECT_EQ(a.allocate(0, size_t(16) << 20, 0), nullptr);  // beyond capacity: a clear failure
  EXPECT_NE(a.last_error().find("fake device out of memory"), std::string::npos);
  EXPECT_EQ(a.stats(0).num_ooms, 1);
  give_everything_back(a, dev, {q});
}

// ---- record_stream: a block used on another stream waits for that stream's work when freed.

TEST(CudaCachingAllocator, ABlockRecordedOnAnotherStreamIsReusedOnlyAfterItsEventCompletes) {
  FakeStreams dev;
  CachingAllocator a(raw_with_events(dev));
  void* p = a.allocate(0, 1000, /*stream=*/1);
  ASSERT_TRUE(a.record_stream(p, 2));
  ASSERT_TRUE(a.record_stream(p, 2));  // recorded once
  dev.busy.insert(2);                   // stream 2 still has work reading p
  EXPECT_TRUE(a.deallocate(p));
  EXPECT_EQ(dev.recorded, 1);
  auto st = a.stats(0);
  EXPECT_EQ(st.num_deferred_frees, 1);
  EXPECT_EQ(st.pending_frees, 1);
  EXPECT_EQ(st.allocated, 0);           // freed for the statistics already, as in PyTorch
  void* q = a.allocate(0, 1000, 1);     // stream 2 busy: p must not come back
  EXPECT_NE(q, p);
  dev.finish(2);
  void* r = a.allocate(0, 1000, 1);     // its event completed: p is back in stream 1's pool
  EXPECT_EQ(r, p);
  EXPECT_EQ(a.stats(0).pending_frees, 0);
  EXPECT_EQ(dev.released, 1);
  EXPECT_EQ(dev.waited, 0);             // nothing blocked
  EXPECT_EQ(a.stats(0).to_vector().size(), 10u);
  give_everything_back(a, dev, {q, r});
}

TEST(CudaCachingAllocator, ABlockWaitsForEveryStreamItWasRecordedOn) {
  FakeStreams dev;
  CachingAllocator a(raw_with_events(dev));
  void* p = a.allocate(0, 1000, 1);
  a.record_stream(p, 2);
  a.record_stream(p, 3);
  dev.busy = {2, 3};
  a.deallocate(p);
  EXPECT_EQ(dev.recorded, 2);
  dev.finish(2);
  void* q = a.allocate(0, 1000, 1);  // stream 3 still busy
  EXPECT_NE(q, p);
  dev.finish(3);
  void* r = a.allocate(0, 1000, 1);
  EXPECT_EQ(r, p);
  give_everything_back(a, dev, {q, r});
}

TEST(CudaCachingAllocator, RecordingTheBlocksOwnStreamIsANoOp) {
  FakeStreams dev;
  CachingAllocator a(raw_with_events(dev));
  void* p = a.allocate(0, 1000, 1);
  EXPECT_TRUE(a.record_stream(p, 1));
  dev.busy.insert(1);
  a.deallocate(p);
  EXPECT_EQ(dev.recorded, 0);
  EXPECT_EQ(a.allocate(0, 1000, 1), p);  // stream order protects reuse on its own stream
  EXPECT_EQ(a.stats(0).num_deferred_frees, 0);
  EXPECT_FALSE(a.record_stream(reinterpret_cast<void*>(0x1234), 2));  // not a block of ours
  give_everything_back(a, dev, {p});
  EXPECT_FALSE(a.record_stream(p, 2));  // freed already
}

TEST(CudaCachingAllocator, AForgottenStreamIsNotWaitedFor) {
  FakeStreams dev;
  CachingAllocator a(raw_with_events(dev));
  void* p = a.allocate(0, 1000, 1);
  a.record_stream(p, 2);
  a.forget_stream(2);  // destroyed after its work finished
  a.deallocate(p);
  EXPECT_EQ(dev.recorded, 0);
  EXPECT_EQ(a.allocate(0, 1000, 1), p);
  give_everything_back(a, dev, {p});
}

TEST(CudaCachingAllocator, EmptyCacheWaitsForPendingFrees) {
  FakeStreams dev;
  CachingAllocator a(raw_with_events(dev));
  void* p = a.allocate(0, 1000, 1);
  a.record_stream(p, 2);
  dev.busy.insert(2);
  a.deallocate(p);
  a.empty_cache(-1);
  EXPECT_EQ(dev.waited, 1);
  EXPECT_EQ(dev.used, 0u);
  EXPECT_EQ(a.stats(0).reserved, 0);
  EXPECT_EQ(a.stats(0).pending_frees, 0);
  EXPECT_TRUE(dev.live.empty());
}

TEST(CudaCachingAllocator, AFullDeviceWaitsForPendingFreesBeforeGivingUp) {
  FakeStreams dev;
  dev.capacity = size_t(7) << 20;
  CachingAllocator a(raw_with_events(dev));
  void* p = a.allocate(0, size_t(6) << 20, 1);
  a.record_stream(p, 2);
  dev.busy.insert(2);
  a.deallocate(p);
  void* q = a.allocate(0, size_t(6) << 20, 1);  // no room: waits for stream 2, then reuses p
  EXPECT_EQ(q, p);
  EXPECT_EQ(dev.waited, 1);
  EXPECT_EQ(dev.mallocs, 1);
  EXPECT_EQ(a.stats(0).num_ooms, 0);
  give_everything_back(a, dev, {q});
}

TEST(CudaCachingAllocator, ABlockWhoseStreamsCannotBeMarkedGoesBackToTheDevice) {
  FakeStreams dev;
  CachingAllocator a(raw_with_events(dev));
  void* p = a.allocate(0, 1000, 1);
  a.record_stream(p, 2);
  dev.fail_record = true;
  a.deallocate(p);  // cudaFree waits for the device's work: safe without an event
  EXPECT_EQ(dev.frees, 1);
  EXPECT_EQ(a.stats(0).reserved, 0);
  // Without event functions at all the same holds.
  FakeDevice plain;
  CachingAllocator b(raw(plain));
  void* r = b.allocate(0, 1000, 1);
  EXPECT_TRUE(b.record_stream(r, 2));
  b.deallocate(r);
  EXPECT_EQ(plain.frees, 1);
  EXPECT_EQ(plain.used, 0u);
}

// ---- issue 23, finding 10: a cuDNN workspace probe that does not fit is not an out-of-memory.

TEST(CudaCachingAllocator, AProbeThatDoesNotFitKeepsTheCacheAndCountsNoOom) {
  FakeStreams dev;
  dev.capacity = size_t(8) << 20;
  CachingAllocator a(raw_with_events(dev));
  void* cached = a.allocate(0, size_t(2) << 20, 1);
  void* pending = a.allocate(0, size_t(2) << 20, 1);
  a.record_stream(pending, 2);
  dev.busy.insert(2);
  a.deallocate(cached);   // cached on stream 1
  a.deallocate(pending);  // waiting for stream 2
  // A workspace too big for what is left (4 MiB): the probe fails at once.
  EXPECT_EQ(a.allocate(0, size_t(6) << 20, 1, /*may_release_cache=*/false), nullptr);
  EXPECT_EQ(dev.waited, 0) << "a probe waits for no pending free";
  EXPECT_EQ(dev.frees, 0) << "a probe releases no cached block";
  EXPECT_EQ(a.stats(0).num_ooms, 0);
  EXPECT_EQ(a.stats(0).reserved, int64_t(4) << 20);
  EXPECT_NE(a.last_error().find("fake device out of memory"), std::string::npos);
  // A probe that fits from the cache or the device still works.
  void* small = a.allocate(0, size_t(2) << 20, 1, false);
  EXPECT_EQ(small, cached);
  void* fresh = a.allocate(0, size_t(2) << 20, 1, false);
  ASSERT_NE(fresh, nullptr);
  // The same request without the probe flag releases and retries (what cuFFT/cuSOLVER use).
  EXPECT_TRUE(a.deallocate(fresh));
  void* big = a.allocate(0, size_t(6) << 20, 1);
  EXPECT_NE(big, nullptr);
  EXPECT_EQ(dev.waited, 1);
  dev.finish(2);
  give_everything_back(a, dev, {small, big});
}

// ---- issue 23, finding 12: no block stays in a pool keyed by a destroyed stream's handle.

TEST(CudaCachingAllocator, ADestroyedStreamsCachedBlocksGoBackToTheDevice) {
  FakeStreams dev;
  CachingAllocator a(raw_with_events(dev));
  void* p = a.allocate(0, 1000, 7);
  void* q = a.allocate(0, 1000, 8);
  a.deallocate(p);
  a.deallocate(q);
  a.forget_stream(7);
  EXPECT_EQ(dev.frees, 1) << "stream 7's cached block is released";
  EXPECT_EQ(a.stats(0).reserved, int64_t(CachingAllocator::round_size(1000)));
  // A new stream that reuses handle value 7 starts with an empty pool.
  void* r = a.allocate(0, 1000, 7);
  EXPECT_EQ(a.stats(0).num_cache_hits, 0);
  EXPECT_EQ(dev.mallocs, 3);
  EXPECT_EQ(a.allocate(0, 1000, 8), q) << "other streams' pools are untouched";
  give_everything_back(a, dev, {r, q});
}

TEST(CudaCachingAllocator, ABlockOfADestroyedStreamGoesBackToTheDeviceWhenFreed) {
  FakeStreams dev;
  CachingAllocator a(raw_with_events(dev));
  void* in_use = a.allocate(0, 1000, 7);
  void* waiting = a.allocate(0, 1000, 7);
  a.record_stream(waiting, 2);
  dev.busy.insert(2);
  a.deallocate(waiting);  // pending on stream 2's event
  a.forget_stream(7);
  a.deallocate(in_use);
  EXPECT_EQ(dev.frees, 1) << "a block of the dead stream is not pooled under its handle";
  dev.finish(2);
  void* fresh = a.allocate(0, 1000, 7);  // processes the completed event: `waiting` is released
  EXPECT_EQ(dev.frees, 2);
  EXPECT_EQ(a.stats(0).pending_frees, 0);
  EXPECT_EQ(a.stats(0).num_cache_hits, 0);
  give_everything_back(a, dev, {fresh});
}

// ---- private pools (CUDA graphs)

TEST(CudaCachingAllocator, ACapturingStreamsBlocksStayInItsPrivatePool) {
  FakeDevice dev;
  CachingAllocator a(raw(dev));
  const uint64_t pool = a.create_pool();
  ASSERT_TRUE(a.begin_allocate_to_pool(0, 5, pool));
  EXPECT_TRUE(a.capture_underway());
  void* scratch = a.allocate(0, 1000, 5);
  a.deallocate(scratch);
  EXPECT_EQ(a.allocate(0, 1000, 5), scratch) << "freed during the capture: reused by the same capture";
  void* output = a.allocate(0, 1000, 5);
  void* other = a.allocate(0, 1000, 6);  // another stream is not capturing: the shared cache
  a.end_allocate_to_pool(0, 5);
  EXPECT_FALSE(a.capture_underway());
  EXPECT_EQ(a.pool_bytes(pool), 2 * CachingAllocator::round_size(1000));
  a.deallocate(scratch);
  void* outside = a.allocate(0, 1000, 5);
  EXPECT_NE(outside, scratch) << "the graph's replays write its pool's blocks: never handed out outside it";
  a.deallocate(other);
  a.empty_cache(-1);
  EXPECT_EQ(a.pool_bytes(pool), 2 * CachingAllocator::round_size(1000)) << "empty_cache keeps a live graph's pool";
  // A second graph captured into the same pool reuses its free blocks.
  ASSERT_TRUE(a.begin_allocate_to_pool(0, 5, pool));
  EXPECT_EQ(a.allocate(0, 1000, 5), scratch);
  a.end_allocate_to_pool(0, 5);
  a.release_pool(pool);
  a.deallocate(scratch);
  EXPECT_EQ(a.pool_bytes(pool), 2 * CachingAllocator::round_size(1000)) << "one of its two graphs is still alive";
  a.release_pool(pool);
  EXPECT_EQ(a.pool_bytes(pool), CachingAllocator::round_size(1000)) << "the cached block went back to the device";
  a.deallocate(output);
  EXPECT_EQ(a.pool_bytes(pool), 0u) << "a released pool's block goes back to the device when freed";
  give_everything_back(a, dev, {outside});
}

TEST(CudaCachingAllocator, NothingIsReleasedOrWaitedForDuringACapture) {
  FakeStreams dev;
  dev.capacity = size_t(8) << 20;
  CachingAllocator a(raw_with_events(dev));
  void* cached = a.allocate(0, size_t(4) << 20, 1);
  void* shared = a.allocate(0, 1000, 1);
  a.deallocate(cached);
  a.record_stream(shared, 2);
  dev.busy.insert(2);
  const uint64_t pool = a.create_pool();
  ASSERT_TRUE(a.begin_allocate_to_pool(0, 3, pool));
  EXPECT_FALSE(a.begin_allocate_to_pool(0, 3, pool)) << "a stream captures into one pool at a time";
  a.deallocate(shared);  // needs an event on stream 2: recording one is illegal during capture
  EXPECT_EQ(dev.recorded, 0);
  a.empty_cache(-1);
  EXPECT_EQ(dev.frees, 0) << "empty_cache does nothing during a capture";
  EXPECT_EQ(a.allocate(0, size_t(6) << 20, 3), nullptr) << "the full device does not release the cache mid-capture";
  EXPECT_NE(a.last_error().find("CUDA graph"), std::string::npos) << a.last_error();
  EXPECT_EQ(dev.frees, 0);
  a.end_allocate_to_pool(0, 3);
  EXPECT_EQ(dev.recorded, 1) << "the held-back free goes ahead once the capture ended";
  dev.finish(2);
  a.release_pool(pool);
  give_everything_back(a, dev, {});
}

TEST(CudaCachingAllocator, PoolHandlesAreDistinctAndAPassedHandleIsNotReissued) {
  FakeDevice dev;
  CachingAllocator a(raw(dev));
  EXPECT_FALSE(a.begin_allocate_to_pool(0, 1, 0)) << "0 is the shared cache, not a pool";
  const uint64_t first = a.create_pool(), second = a.create_pool();
  EXPECT_NE(first, second);
  ASSERT_TRUE(a.begin_allocate_to_pool(0, 1, 100));
  a.end_allocate_to_pool(0, 1);
  EXPECT_GT(a.create_pool(), 100u);
  a.release_pool(100);
  a.release_pool(100);  // a second release of a released pool is ignored
  give_everything_back(a, dev, {});
}

// The CUDA plugin's caching allocator, on a fake device (host memory with a capacity), so it
// runs on any machine: rounding, reuse per (device, stream), bounded waste, statistics,
// empty_cache, and the release-and-retry on a failed device allocation.
#include <gtest/gtest.h>

// The allocator has no CUDA dependency; compiled into this test directly.
#include "../../backends/cuda/src/caching_allocator.cpp"

#include <cstdlib>
#include <initializer_list>

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

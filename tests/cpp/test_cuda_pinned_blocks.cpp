// The GPU plugin's page-locked block bookkeeping (backends/cuda/src/pinned_blocks.{h,cpp}) on
// fake events and host memory, on any machine (issue 23, finding 8): a long-lived pinned buffer
// used for many async copies holds only the events of the copies still in flight (it held one
// per copy until the next host_allocate/host_deallocate); a block freed while a copy uses it is
// freed once that copy completes.
#include <gtest/gtest.h>

// The bookkeeping has no CUDA dependency; compiled into this test directly.
#include "../../backends/cuda/src/pinned_blocks.cpp"

#include <cstdlib>
#include <set>

using tessera::gpu::PinnedBlocks;
using tessera::gpu::PinnedEvents;

namespace {
struct FakeEvent {
  bool done = false;
};
struct FakeHost {
  std::set<FakeEvent*> live;
  std::set<void*> freed;
  FakeEvent* record() { return *live.insert(new FakeEvent).first; }
  void finish_all() {
    for (FakeEvent* e : live) e->done = true;
  }
};
bool fake_done(void*, int32_t, void* e) { return static_cast<FakeEvent*>(e)->done; }
void fake_release(void* ctx, int32_t, void* e) {
  static_cast<FakeHost*>(ctx)->live.erase(static_cast<FakeEvent*>(e));
  delete static_cast<FakeEvent*>(e);
}
void fake_free_host(void* ctx, void* p) { static_cast<FakeHost*>(ctx)->freed.insert(p); }
PinnedEvents events_of(FakeHost& h) { return PinnedEvents{fake_done, fake_release, fake_free_host, &h}; }
}  // namespace

TEST(CudaPinnedBlocks, ALongLivedBufferHoldsOnlyTheCopiesInFlight) {
  FakeHost host;
  PinnedBlocks blocks(events_of(host));
  alignas(64) static char buffer[4096];
  blocks.add(buffer, sizeof buffer);
  for (int copy = 0; copy < 1000; ++copy) {
    ASSERT_TRUE(blocks.holds(buffer + 128, 256));
    FakeEvent* e = host.record();
    blocks.add_use(buffer + 128, 0, e);
    e->done = true;  // the copy completes before the next one is queued
  }
  // One event (the last copy's, not yet looked at), not 1000.
  EXPECT_EQ(blocks.pending_uses(buffer), 1);
  EXPECT_EQ(host.live.size(), 1u);
  // Copies still running stay held.
  FakeEvent* running = host.record();
  blocks.add_use(buffer, 0, running);
  FakeEvent* second = host.record();
  blocks.add_use(buffer, 0, second);
  EXPECT_EQ(blocks.pending_uses(buffer), 2);
  host.finish_all();
  blocks.collect();
  EXPECT_EQ(blocks.pending_uses(buffer), 0);
  EXPECT_TRUE(host.live.empty());
  EXPECT_TRUE(blocks.free(buffer));
  EXPECT_EQ(host.freed.count(buffer), 1u);
  EXPECT_EQ(blocks.size(), 0u);
}

TEST(CudaPinnedBlocks, ABlockFreedDuringACopyIsFreedWhenTheCopyCompletes) {
  FakeHost host;
  PinnedBlocks blocks(events_of(host));
  alignas(64) static char a[256], b[256];
  blocks.add(a, sizeof a);
  blocks.add(b, sizeof b);
  FakeEvent* copy = host.record();
  blocks.add_use(a, 0, copy);
  EXPECT_TRUE(blocks.free(a));
  EXPECT_EQ(host.freed.count(a), 0u) << "the copy still reads it";
  EXPECT_FALSE(blocks.holds(a, 16)) << "a freed block takes no new async copy";
  copy->done = true;
  blocks.collect();
  EXPECT_EQ(host.freed.count(a), 1u);
  EXPECT_TRUE(blocks.holds(b, sizeof b));
  EXPECT_FALSE(blocks.holds(b, sizeof b + 1)) << "a range past the block's end";
  EXPECT_FALSE(blocks.free(a + 1)) << "not the start of a block";
  EXPECT_TRUE(blocks.free(b));
  EXPECT_EQ(blocks.size(), 0u);
}

// The GPU plugin's overlap tests for copy_ (sdk/include/tessera/sdk/memory_overlap.h), on any machine
// (issue 23, finding 7): x[1:].copy_(x[:-1]) shares memory and must be staged (the GPU copies
// elements in parallel), x.copy_(x) is a no-op, disjoint views copy directly, an expanded
// destination is refused (as the CPU plugin refuses it). The views are described on a host
// array the way the plugin describes device tensors.
#include <tessera/sdk/memory_overlap.h>

#include <gtest/gtest.h>

#include <vector>

using tessera::sdk::byte_extent;
using tessera::sdk::has_internal_overlap;
using tessera::sdk::may_overlap;
using tessera::sdk::same_view;
using tessera::sdk::StridedView;

namespace {
float storage[64];

// A view of `storage` starting at element `first`.
struct View {
  std::vector<int64_t> sizes, strides;
  int64_t first = 0;
  StridedView get() const { return {storage + first, sizes, strides, int64_t(sizeof(float))}; }
};
}  // namespace

TEST(CudaMemoryOverlap, ShiftedSlicesOfOneTensorOverlap) {
  View tail{{9}, {1}, 1}, head{{9}, {1}, 0};  // x[1:] and x[:-1] of a 10-element x
  EXPECT_TRUE(may_overlap(tail.get(), head.get()));
  EXPECT_FALSE(same_view(tail.get(), head.get()));
  View row0{{4}, {1}, 0}, col0{{4}, {4}, 0};  // x[0] and x[:, 0] of a 4x4 x share x[0, 0]
  EXPECT_TRUE(may_overlap(row0.get(), col0.get()));
  View t{{4, 4}, {1, 4}, 0}, x{{4, 4}, {4, 1}, 0};  // x.copy_(x.t())
  EXPECT_TRUE(may_overlap(t.get(), x.get()));
  EXPECT_FALSE(same_view(t.get(), x.get()));
}

TEST(CudaMemoryOverlap, DisjointViewsDoNotOverlap) {
  View first_half{{8}, {1}, 0}, second_half{{8}, {1}, 8};
  EXPECT_FALSE(may_overlap(first_half.get(), second_half.get()));
  View row0{{4}, {1}, 0}, row1{{4}, {1}, 4};
  EXPECT_FALSE(may_overlap(row0.get(), row1.get()));
  View empty{{0, 3}, {3, 1}, 0};
  EXPECT_FALSE(may_overlap(empty.get(), first_half.get()));
  EXPECT_EQ(byte_extent(first_half.get()).hi - byte_extent(first_half.get()).lo, 8 * sizeof(float));
}

TEST(CudaMemoryOverlap, ATensorCopiedOntoItselfIsTheSameView) {
  View x{{3, 5}, {5, 1}, 2}, again{{3, 5}, {5, 1}, 2};
  EXPECT_TRUE(same_view(x.get(), again.get()));
  View one_row{{1, 5}, {99, 1}, 2}, one_row_other_stride{{1, 5}, {5, 1}, 2};  // size-1 dims' strides do not matter
  EXPECT_TRUE(same_view(one_row.get(), one_row_other_stride.get()));
  View shifted{{3, 5}, {5, 1}, 3};
  EXPECT_FALSE(same_view(x.get(), shifted.get()));
}

TEST(CudaMemoryOverlap, AnExpandedDestinationHasInternalOverlap) {
  View expanded{{4, 3}, {0, 1}, 0};  // x.expand(4, 3)
  EXPECT_TRUE(has_internal_overlap(expanded.get()));
  View one_row{{1, 3}, {0, 1}, 0};  // stride 0 on a size-1 dim reaches each element once
  EXPECT_FALSE(has_internal_overlap(one_row.get()));
  View plain{{4, 3}, {3, 1}, 0};
  EXPECT_FALSE(has_internal_overlap(plain.get()));
}

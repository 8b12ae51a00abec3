// The GPU plugin's launch arithmetic (backends/cuda/src/launch_shape.h), on any machine (issue
// 23, findings 2 and 3): the grid-stride loop visits every index of a loop of up to 2^31 - 1
// elements exactly once with the capped grid (its counter was 32-bit and wrapped negative past
// 2^31 - 1); the 32-bit index choice; the tiled GEMM's grid stays within gridDim's limits for
// any m and n, and the tiles the blocks stride over cover every output tile once.
#include "../../backends/cuda/src/launch_shape.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

using namespace tessera::gpu;

namespace {
// The indices one thread visits (thread `t` of block `b`) with blocks_for(n) blocks.
std::vector<int64_t> visits(int64_t n, int64_t block, int64_t thread) {
  const int64_t grid = blocks_for(n);
  std::vector<int64_t> seen;
  grid_stride_loop(block * kThreads + thread, grid * kThreads, n, [&](int64_t i) { seen.push_back(i); });
  return seen;
}
}  // namespace

TEST(CudaLaunchShape, GridStrideLoopNeverWrapsBelowTwoToThe31) {
  // An 8 GB float32 tensor: numel just below 2^31, the largest loop index32 allows.
  for (int64_t n : {int64_t(2'100'000'000), (int64_t(1) << 31) - 1}) {
    ASSERT_TRUE(index32_fits(n));
    const int64_t grid = blocks_for(n);
    EXPECT_EQ(grid, 65535 * 8) << "the grid is capped, so each thread runs several iterations";
    // The last thread of the last block: the one whose next index passes 2^31 - 1 first.
    std::vector<int64_t> seen = visits(n, grid - 1, kThreads - 1);
    const int64_t step = grid * kThreads;
    int64_t first = (grid - 1) * kThreads + kThreads - 1;
    ASSERT_EQ(int64_t(seen.size()), (n - first + step - 1) / step) << "n = " << n;
    for (int64_t i : seen) {
      ASSERT_GE(i, 0) << "n = " << n;
      ASSERT_LT(i, n) << "n = " << n;
      ASSERT_LE(i, INT32_MAX) << "every visited index fits the 32-bit offset arithmetic";
    }
    // Thread 0 of block 0 visits 0, step, 2 step, ...
    std::vector<int64_t> first_thread = visits(n, 0, 0);
    EXPECT_EQ(first_thread.front(), 0);
    EXPECT_EQ(first_thread.back(), (n - 1) / step * step);
  }
}

TEST(CudaLaunchShape, IndexWidthIsThirtyTwoBitsOnlyBelowTwoToThe31) {
  EXPECT_TRUE(index32_fits(1));
  EXPECT_TRUE(index32_fits((int64_t(1) << 31) - 1));
  EXPECT_FALSE(index32_fits(int64_t(1) << 31));
  EXPECT_FALSE(index32_fits(int64_t(5) << 32));
}

TEST(CudaLaunchShape, BlocksForIsAtLeastOneAndCapped) {
  EXPECT_EQ(blocks_for(0), 1u);
  EXPECT_EQ(blocks_for(1), 1u);
  EXPECT_EQ(blocks_for(kThreads + 1), 2u);
  EXPECT_EQ(blocks_for(int64_t(1) << 40), 65535u * 8);
}

// m = 1,048,561 (65,536 row tiles) failed to launch: gridDim.y was ceil(m / 16), over 65535.
TEST(CudaLaunchShape, TiledGemmGridStaysWithinTheLimitsAndCoversEveryTile) {
  struct Case { int64_t m, n, batch; };
  for (Case c : {Case{1'048'561, 3, 1}, Case{5, 1'048'561, 2}, Case{33, 17, 70'000}, Case{int64_t(1) << 33, 1, 1}}) {
    GridShape g = tiled_gemm_grid(c.m, c.n, c.batch);
    EXPECT_LE(g.x, 65535u);
    EXPECT_LE(g.y, 65535u);
    EXPECT_LE(g.z, 65535u);
    EXPECT_GE(g.x, 1u);
    // Blocks stride over the row tiles by gridDim.y (as the kernel does): each tile once.
    const int64_t tiles = gemm_tiles(c.m);
    if (tiles > 200'000'000) continue;  // the coverage count below is O(tiles)
    std::vector<int> hits(size_t(tiles), 0);
    for (unsigned by = 0; by < g.y; ++by)
      grid_stride_loop(by, g.y, tiles, [&](int64_t t) { ++hits[size_t(t)]; });
    for (int64_t t = 0; t < tiles; ++t) ASSERT_EQ(hits[size_t(t)], 1) << "row tile " << t << " of m = " << c.m;
  }
  EXPECT_EQ(tiled_gemm_grid(1'048'561, 3, 1).y, 65535u);
  EXPECT_EQ(tiled_gemm_grid(1'048'560, 3, 1).y, 65535u);
  EXPECT_EQ(tiled_gemm_grid(16, 16, 1).x, 1u);
}

// How the GPU plugin lays out and launches a reduction (backends/cuda/src/reduction_plan.h), on
// any machine (issue 23, finding 5): with fewer outputs than the device has multiprocessors,
// each output is split over several blocks (a whole-tensor sum ran on one of an H200's 132), the
// splits cover the reduced range exactly; many outputs keep one block each; dims that step
// through memory as one are merged.
#include "../../backends/cuda/src/reduction_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

using namespace tessera::gpu;

namespace {
constexpr int64_t kH200Multiprocessors = 132;

// Every reduced index of one output lands in exactly one split.
void expect_splits_cover(int64_t reduced, int64_t splits) {
  const int64_t chunk = reduction_chunk(reduced, splits);
  int64_t covered = 0;
  for (int64_t s = 0; s < splits; ++s) {
    const int64_t k0 = s * chunk, k1 = std::min(k0 + chunk, reduced);
    ASSERT_LE(k0, reduced) << "split " << s << " of " << splits;
    covered += std::max<int64_t>(0, k1 - k0);
  }
  EXPECT_EQ(covered, reduced);
}
}  // namespace

TEST(CudaReductionPlan, AWholeTensorReductionIsSpreadOverTheDevice) {
  const int64_t numel = int64_t(256) << 20;  // the 256M-element mean
  const int64_t splits = reduction_splits(1, numel, kH200Multiprocessors);
  EXPECT_GE(splits, kH200Multiprocessors) << "at least one block per multiprocessor";
  EXPECT_LE(splits, kMaxReduceSplits);
  EXPECT_GE(reduction_chunk(numel, splits), kMinReducePerBlock);
  expect_splits_cover(numel, splits);
}

TEST(CudaReductionPlan, FewOutputsAreSplitManyAreNot) {
  const int64_t per_output = int64_t(1) << 24;
  const int64_t few = reduction_splits(8, per_output, kH200Multiprocessors);
  EXPECT_GT(few, 1);
  EXPECT_GE(8 * few, kH200Multiprocessors);
  expect_splits_cover(per_output, few);
  EXPECT_EQ(reduction_splits(4096, per_output, kH200Multiprocessors), 1) << "enough outputs to fill the device";
  EXPECT_EQ(reduction_splits(0, per_output, kH200Multiprocessors), 1);
}

TEST(CudaReductionPlan, SmallReductionsStayInOneBlock) {
  EXPECT_EQ(reduction_splits(1, 1000, kH200Multiprocessors), 1) << "fewer elements than one block's share";
  EXPECT_EQ(reduction_splits(1, 0, kH200Multiprocessors), 1);
  const int64_t two_blocks_worth = 2 * kMinReducePerBlock;
  EXPECT_EQ(reduction_splits(1, two_blocks_worth, kH200Multiprocessors), 2);
  expect_splits_cover(two_blocks_worth + 7, reduction_splits(1, two_blocks_worth + 7, kH200Multiprocessors));
  EXPECT_EQ(reduction_splits(1, int64_t(1) << 40, 1), kReduceBlocksPerSm) << "one multiprocessor";
  EXPECT_EQ(reduction_splits(1, int64_t(1) << 40, 100000), kMaxReduceSplits);
}

// Issue 23, finding 6: layer_norm backward's grad_weight/grad_bias sum 1024 columns over 32768
// rows: 4 blocks of columns alone would leave 128 of 132 multiprocessors idle.
TEST(CudaReductionPlan, ColumnSumsOfFewColumnsAreSplitByRows) {
  const int64_t columns = 1024, rows = 32768, column_blocks = (columns + kThreads - 1) / kThreads;
  const int64_t splits = reduction_splits(column_blocks, rows * kThreads, kH200Multiprocessors);
  EXPECT_GE(column_blocks * splits, kH200Multiprocessors);
  EXPECT_GE(reduction_chunk(rows, splits), 16) << "each block still sums a run of rows";
  expect_splits_cover(rows, splits);
  EXPECT_EQ(reduction_splits(1024, 64 * kThreads, kH200Multiprocessors), 1) << "many columns: one pass";
}

TEST(CudaReductionPlan, ContiguousDimsMergeAndSizeOneDimsGo) {
  std::vector<int64_t> sizes{2, 3, 4, 5}, strides{60, 20, 5, 1};
  coalesce_dims(sizes, strides);
  EXPECT_EQ(sizes, (std::vector<int64_t>{120}));
  EXPECT_EQ(strides, (std::vector<int64_t>{1}));
  // x[:, :3] of a contiguous (4, 6): a gap after each row, no merge.
  sizes = {4, 3}, strides = {6, 1};
  coalesce_dims(sizes, strides);
  EXPECT_EQ(sizes, (std::vector<int64_t>{4, 3}));
  // x[:, ::2] of a contiguous (4, 6): every other element, evenly spaced: one dim of stride 2.
  sizes = {4, 3}, strides = {6, 2};
  coalesce_dims(sizes, strides);
  EXPECT_EQ(sizes, (std::vector<int64_t>{12}));
  EXPECT_EQ(strides, (std::vector<int64_t>{2}));
  // A transposed (3, 4) -> (4, 3): strides (1, 4): no merge.
  sizes = {4, 3}, strides = {1, 4};
  coalesce_dims(sizes, strides);
  EXPECT_EQ(sizes, (std::vector<int64_t>{4, 3}));
  sizes = {1, 7, 1}, strides = {99, 1, 5};
  coalesce_dims(sizes, strides);
  EXPECT_EQ(sizes, (std::vector<int64_t>{7}));
  EXPECT_EQ(strides, (std::vector<int64_t>{1}));
  sizes = {}, strides = {};
  coalesce_dims(sizes, strides);
  EXPECT_TRUE(sizes.empty());
}

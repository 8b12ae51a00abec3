#pragma once
// How a reduction is laid out and launched, as plain arithmetic (no runtime header): the dims it
// walks, merged where memory allows, and how many blocks share one output. Shared by the host
// (reduce_ops.cpp), reduce.cu and tests/cpp/test_cuda_reduction_plan.cpp.
#include "launch_shape.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tessera::gpu {

// Merges runs of dims that step through memory as one (stride[d] == stride[d + 1] * size[d + 1])
// and drops size-1 dims, in place: a whole-tensor sum of a contiguous 4-D tensor walks one dim,
// not four (each dim costs a division per element). Sizes and strides stay in order.
inline void coalesce_dims(std::vector<int64_t>& sizes, std::vector<int64_t>& strides) {
  std::vector<int64_t> cs, cst;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 1) continue;
    if (!cs.empty() && cst.back() == strides[d] * sizes[d]) {
      cs.back() *= sizes[d];
      cst.back() = strides[d];
    } else {
      cs.push_back(sizes[d]);
      cst.push_back(strides[d]);
    }
  }
  sizes.swap(cs);
  strides.swap(cst);
}

// How many blocks share one output of a reduction. One block per output leaves the GPU idle
// when there are fewer outputs than multiprocessors (a whole-tensor sum runs on one of 132): then
// each output's reduced range is split over enough blocks to give every multiprocessor about
// kReduceBlocksPerSm, each block keeping at least kMinReducePerBlock elements (fewer is all
// launch and combine), at most kMaxReduceSplits partials per output (the second pass's block
// combines them).
inline constexpr int64_t kReduceBlocksPerSm = 4;
inline constexpr int64_t kMinReducePerBlock = int64_t(kThreads) * 16;
inline constexpr int64_t kMaxReduceSplits = 1024;
inline int64_t reduction_splits(int64_t kept, int64_t reduced, int64_t multiprocessors) {
  const int64_t target_blocks = kReduceBlocksPerSm * (multiprocessors < 1 ? 1 : multiprocessors);
  if (kept <= 0 || kept >= target_blocks / 2) return 1;
  int64_t splits = (target_blocks + kept - 1) / kept;
  const int64_t by_work = reduced / kMinReducePerBlock;
  if (splits > by_work) splits = by_work;
  if (splits > kMaxReduceSplits) splits = kMaxReduceSplits;
  return splits < 1 ? 1 : splits;
}
// The reduced elements each split covers (the last split may get fewer).
TS_LAUNCH_HD inline int64_t reduction_chunk(int64_t reduced, int64_t splits) { return (reduced + splits - 1) / splits; }

}  // namespace tessera::gpu

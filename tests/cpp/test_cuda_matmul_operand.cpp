// The GPU plugin's GEMM operand geometry (backends/cuda/src/matmul_operand.h), on any machine:
// how cuBLAS reads an operand, and the copy of one it cannot read, which must keep the batch,
// rows and cols the GEMM computed (issue 23, findings 1 and 4). The copy's geometry is checked
// by reading through it: every element the GEMM addresses lands inside the copy and holds the
// element the original view held.
#include "../../backends/cuda/src/matmul_operand.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <functional>
#include <numeric>
#include <vector>

using tessera::gpu::batch_chunks;
using tessera::gpu::BatchChunk;
using tessera::gpu::blas_layout;
using tessera::gpu::BlasLayout;
using tessera::gpu::blas_readable;
using tessera::gpu::contiguous_copy_of;
using tessera::gpu::MatrixGeometry;
using tessera::gpu::OperandCopy;

namespace {

// Element (b, i, j) of a geometry, as an offset from its first element.
int64_t offset(const MatrixGeometry& g, int64_t b, int64_t i, int64_t j) { return b * g.bs + i * g.rs + j * g.cs; }

// A storage of `n` distinct values and the contiguous copy of the view `plan` describes (what
// contiguous() does on the device): row-major over view_sizes.
std::vector<int64_t> copy_view(const std::vector<int64_t>& storage, const OperandCopy& plan) {
  const auto& sz = plan.view_sizes;
  const auto& st = plan.view_strides;
  int64_t n = std::accumulate(sz.begin(), sz.end(), int64_t(1), std::multiplies<>());
  std::vector<int64_t> out;
  for (int64_t lin = 0; lin < n; ++lin) {
    int64_t rest = lin, off = 0;
    for (size_t d = sz.size(); d-- > 0;) {
      off += (rest % sz[d]) * st[d];
      rest /= sz[d];
    }
    out.push_back(storage.at(size_t(off)));
  }
  return out;
}

// Every (b, i, j) the GEMM reads through the copy's geometry is inside the copy and equals the
// element the original geometry addresses.
void expect_copy_reads_the_same(const MatrixGeometry& g, const char* what) {
  int64_t reach = 0;
  for (int64_t b = 0; b < g.batch; ++b)
    for (int64_t i = 0; i < g.rows; ++i)
      for (int64_t j = 0; j < g.cols; ++j) reach = std::max(reach, offset(g, b, i, j));
  std::vector<int64_t> storage(size_t(reach + 1));
  std::iota(storage.begin(), storage.end(), 1000);
  OperandCopy plan = contiguous_copy_of(g);
  std::vector<int64_t> copy = copy_view(storage, plan);
  const MatrixGeometry& c = plan.copied;
  EXPECT_EQ(c.batch, g.batch) << what;
  EXPECT_EQ(c.rows, g.rows) << what;
  EXPECT_EQ(c.cols, g.cols) << what;
  EXPECT_TRUE(blas_readable(c)) << what << ": the copy must be readable by cuBLAS";
  for (int64_t b = 0; b < g.batch; ++b)
    for (int64_t i = 0; i < g.rows; ++i)
      for (int64_t j = 0; j < g.cols; ++j) {
        int64_t at = offset(c, b, i, j);
        ASSERT_GE(at, 0) << what;
        ASSERT_LT(at, int64_t(copy.size())) << what << ": (" << b << ", " << i << ", " << j << ") past the copy";
        ASSERT_EQ(copy[size_t(at)], storage[size_t(offset(g, b, i, j))])
            << what << " at (" << b << ", " << i << ", " << j << ")";
      }
}

}  // namespace

TEST(CudaMatmulOperand, LayoutsCublasReadsDirectly) {
  BlasLayout row_major = blas_layout({1, 4, 3, 0, 3, 1});
  EXPECT_TRUE(row_major.ok);
  EXPECT_FALSE(row_major.transposed);
  EXPECT_EQ(row_major.ld, 3);
  BlasLayout transposed = blas_layout({1, 4, 3, 0, 1, 4});  // a .t() of a 3x4 matrix
  EXPECT_TRUE(transposed.ok);
  EXPECT_TRUE(transposed.transposed);
  EXPECT_EQ(transposed.ld, 4);
  EXPECT_FALSE(blas_layout({1, 4, 3, 0, 6, 2}).ok);  // x[:, ::2]: no unit stride
}

// matmul(x[::2], M): the 1-D operand becomes a 1 x k row with strides (2, 2). The old code
// described its contiguous copy by rank (mat2d of a 1-D tensor) and read shape[1] past the end.
TEST(CudaMatmulOperand, StridedOneDimensionalOperandKeepsItsRowShape) {
  MatrixGeometry row{1, 1, 5, 0, 2, 2};
  EXPECT_FALSE(blas_readable(row));
  expect_copy_reads_the_same(row, "strided 1-D operand");
  OperandCopy plan = contiguous_copy_of(row);
  EXPECT_EQ(plan.view_sizes, (std::vector<int64_t>{1, 5}));
}

// A 4-D operand (2, 3, 4, 5) with a non-unit inner stride, its batch dims collapsed to 6: k is
// its last dim (5), not its dim 1, and the copy's ld is 5, never 0.
TEST(CudaMatmulOperand, FourDimensionalOperandKeepsKAndItsLeadingDimension) {
  MatrixGeometry g{6, 4, 5, 40, 10, 2};  // x[..., ::2] of a contiguous (2, 3, 4, 10)
  EXPECT_FALSE(blas_readable(g));
  expect_copy_reads_the_same(g, "4-D operand");
  OperandCopy plan = contiguous_copy_of(g);
  EXPECT_EQ(plan.copied, (MatrixGeometry{6, 4, 5, 20, 5, 1}));
  EXPECT_EQ(blas_layout(plan.copied).ld, 5);
}

// A (1, n, k) operand broadcast against a batch of 7: batch stride 0. Its copy is one matrix and
// keeps batch stride 0; the old one took rows * cols and cuBLAS read 6 matrices past the buffer.
TEST(CudaMatmulOperand, BroadcastBatchCopiesOneMatrixAndKeepsStrideZero) {
  MatrixGeometry g{7, 3, 4, 0, 8, 2};
  expect_copy_reads_the_same(g, "broadcast batch");
  OperandCopy plan = contiguous_copy_of(g);
  EXPECT_EQ(plan.view_sizes, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(plan.copied.bs, 0);
}

TEST(CudaMatmulOperand, BatchedStridedOperandCopiesEveryMatrix) {
  expect_copy_reads_the_same({3, 2, 3, 100, 20, 3}, "batched strided operand");
  expect_copy_reads_the_same({1, 1, 1, 0, 5, 7}, "1 x 1");
}

// Finding 4: a leading dimension of 2^31 or more cannot be passed as int; such an operand is
// copied (its copy's ld is cols). m, n, k are checked by the caller.
TEST(CudaMatmulOperand, LeadingDimensionsBeyondIntAreCopied) {
  const int64_t big = int64_t(1) << 31;
  MatrixGeometry wide_rows{1, 2, 3, 0, big, 1};
  EXPECT_TRUE(blas_layout(wide_rows).ok);
  EXPECT_FALSE(blas_readable(wide_rows));
  EXPECT_EQ(contiguous_copy_of(wide_rows).copied.rs, 3);
  MatrixGeometry wide_cols{1, 2, 3, 0, 1, big};
  EXPECT_FALSE(blas_readable(wide_cols));
  EXPECT_TRUE(blas_readable({1, 2, 3, 0, INT_MAX, 1}));
}

TEST(CudaMatmulOperand, BatchesBeyondIntRunInChunks) {
  EXPECT_EQ(batch_chunks(5, 2), (std::vector<BatchChunk>{{0, 2}, {2, 2}, {4, 1}}));
  EXPECT_EQ(batch_chunks(1), (std::vector<BatchChunk>{{0, 1}}));
  const int64_t batch = int64_t(INT_MAX) + 3;
  std::vector<BatchChunk> chunks = batch_chunks(batch);
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[0], (BatchChunk{0, INT_MAX}));
  EXPECT_EQ(chunks[1], (BatchChunk{INT_MAX, 3}));
}

#pragma once
// Where a GEMM operand's matrices lie in memory, and how a vendor BLAS (column-major, int
// dimensions and leading dimensions) can read them. Pure host arithmetic, no runtime: blas.cpp
// uses it, and tests/cpp/test_cuda_matmul_operand.cpp checks it on any machine.
#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace tessera::gpu {

// A batch of matrices inside a tensor's storage, in elements from its first element: `batch`
// matrices of rows x cols, batch stride bs (0: one matrix broadcast over the batch), row stride
// rs and col stride cs.
struct MatrixGeometry {
  int64_t batch = 1, rows = 0, cols = 0, bs = 0, rs = 0, cs = 0;
  bool operator==(const MatrixGeometry&) const = default;
};

// How column-major BLAS reads a row-major operand: as stored with ld = the row stride (not
// transposed), transposed with ld = the col stride, or not at all (ok false: copy it first).
struct BlasLayout {
  bool ok = false;
  bool transposed = false;
  int64_t ld = 0;
};
inline BlasLayout blas_layout(const MatrixGeometry& m) {
  if (m.cs == 1 && m.rs >= std::max<int64_t>(1, m.cols)) return {true, false, m.rs};
  if (m.rs == 1 && m.cs >= std::max<int64_t>(1, m.rows)) return {true, true, m.cs};
  return {};
}

// The 32-bit API takes m, n, k, the leading dimensions and the batch count as int.
inline bool fits_blas_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

// A layout the 32-bit API can take: expressible, and its leading dimension an int (a view with
// a row stride of 2^31 or more is copied; the copy's ld is its cols, which fits when k and n do).
inline bool blas_readable(const MatrixGeometry& m) {
  BlasLayout l = blas_layout(m);
  return l.ok && fits_blas_int(l.ld);
}

// The plain row-major copy of an operand BLAS cannot read: the view to copy (sizes and strides
// over the operand's first element) and the geometry of that copy, built from the geometry the
// GEMM computed, never from the copied tensor's rank (a 1-D or 4-D operand, or a batch broadcast
// from one matrix, would be misread). A broadcast batch (bs == 0) copies its one matrix and keeps
// bs 0, so BLAS still reads that matrix for every batch entry.
struct OperandCopy {
  std::vector<int64_t> view_sizes, view_strides;
  MatrixGeometry copied;
};
inline OperandCopy contiguous_copy_of(const MatrixGeometry& m) {
  const bool one_matrix = m.batch == 1 || m.bs == 0;
  OperandCopy c;
  if (one_matrix) {
    c.view_sizes = {m.rows, m.cols};
    c.view_strides = {m.rs, m.cs};
  } else {
    c.view_sizes = {m.batch, m.rows, m.cols};
    c.view_strides = {m.bs, m.rs, m.cs};
  }
  c.copied = {m.batch, m.rows, m.cols, one_matrix && m.batch > 1 ? 0 : m.rows * m.cols, m.cols, 1};
  return c;
}

// The 32-bit API's batch count is an int: a larger batch runs as consecutive chunks of at most
// `limit` matrices (first matrix, count).
struct BatchChunk {
  int64_t first = 0, count = 0;
  bool operator==(const BatchChunk&) const = default;
};
inline std::vector<BatchChunk> batch_chunks(int64_t batch, int64_t limit = INT_MAX) {
  std::vector<BatchChunk> chunks;
  for (int64_t b0 = 0; b0 < batch; b0 += limit) chunks.push_back({b0, std::min(limit, batch - b0)});
  return chunks;
}

}  // namespace tessera::gpu

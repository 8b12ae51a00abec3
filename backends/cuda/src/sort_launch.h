#pragma once
// The host/device boundary of sort.stable and topk (sort_cub.cu, sort_ops.cpp; CUDA only: CUB).
// Rows are contiguous, `n` elements each. Each launcher follows CUB's convention: called with
// scratch == nullptr it only returns the scratch bytes it needs.
#include "launch.h"

#include <cstddef>

namespace tessera::gpu {

// Buffers of rows * n elements the host allocates for a row sort: the encoded keys (4 bytes, or
// 8 for int64/float64: sort_key_bytes) twice, the int64 indices twice, and rows + 1 offsets.
struct RowSort {
  const char* in = nullptr;
  int32_t dtype = 0;
  int64_t rows = 0, n = 0;
  bool descending = false;
  void *keys = nullptr, *keys_sorted = nullptr;
  int64_t *index = nullptr, *index_sorted = nullptr;
  int64_t* offsets = nullptr;
  void* scratch = nullptr;
  size_t scratch_bytes = 0;
};
int32_t sort_key_bytes(int32_t dtype);
// A stable sort of every row: index_sorted gets the positions in the CPU plugin's order
// (ascending with NaN last, or descending with NaN first; -0.0 equal to +0.0; ties in index order).
size_t launch_sort_rows(const RowSort& s, gpuStream_t stream);
// Sorts every row of `w` int64 values of `index` ascending into `sorted` (offsets: rows + 1).
size_t launch_sort_index_rows(const int64_t* index, int64_t* sorted, int64_t rows, int64_t w, int64_t* offsets,
                              void* scratch, size_t scratch_bytes, gpuStream_t stream);
// values[r, j] = in[r, index[r * index_stride + j]] and out_index[r, j] = that index, j < w (rows of n in `in`).
void launch_take_rows(const char* in, int32_t dtype, int64_t rows, int64_t n, const int64_t* index, int64_t index_stride,
                      int64_t w, char* values, int64_t* out_index, gpuStream_t stream);

}  // namespace tessera::gpu

// embedding: a row gather moved as words of the weight's item size (any dtype). Its dense
// backward adds gradient rows into a float64 accumulator with atomics (the order of additions
// varies, in double, before one rounding to the gradient's dtype), then converts it.
#include "device_io.cuh"
#include "nn_launch.h"

namespace tessera::gpu {
namespace {

// Index i; false (and recorded in bad) when it is outside [0, rows).
GPU_D bool index_of(const EmbeddingArgs& a, int64_t i, int64_t& v) {
  v = a.index_dtype == kInt64 ? reinterpret_cast<const int64_t*>(a.indices)[i]
                              : int64_t(reinterpret_cast<const int32_t*>(a.indices)[i]);
  if (v >= 0 && v < a.rows) return true;
  a.bad[1] = v;
  a.bad[0] = 1;
  return false;
}

template <class W>
__global__ void gather_rows(EmbeddingArgs a) {
  const int64_t total = a.n * a.dim;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += int64_t(gridDim.x) * blockDim.x) {
    int64_t r;
    if (!index_of(a, e / a.dim, r)) continue;
    reinterpret_cast<W*>(a.out)[e] = reinterpret_cast<const W*>(a.weight)[r * a.row_stride + (e % a.dim) * a.col_stride];
  }
}

__global__ void scatter_rows(EmbeddingArgs a) {
  const int64_t total = a.n * a.dim, gsz = itemsize_of(a.grad_dtype);
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += int64_t(gridDim.x) * blockDim.x) {
    int64_t r;
    if (!index_of(a, e / a.dim, r)) continue;
    const int64_t j = e % a.dim;
    if (a.counts && j == 0) atomicAdd(reinterpret_cast<unsigned long long*>(a.counts + r), 1ull);
    if (r == a.padding_idx) continue;
    atomicAdd(a.acc + r * a.dim + j, load<double>(a.grad + e * gsz, a.grad_dtype));
  }
}

__global__ void finish_rows(EmbeddingArgs a) {
  const int64_t total = a.rows * a.dim, gsz = itemsize_of(a.grad_dtype);
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = e / a.dim;
    double v = r == a.padding_idx ? 0.0 : a.acc[e];
    if (a.counts && a.counts[r] > 0) v /= double(a.counts[r]);
    store<double>(a.grad_weight + e * gsz, a.grad_dtype, v);
  }
}
}  // namespace

void launch_embedding(const EmbeddingArgs& a, gpuStream_t s) {
  const int64_t total = a.n * a.dim;
  if (total == 0) return;
  const unsigned grid = blocks_for(total);
  switch (a.itemsize) {
    case 1: gather_rows<uint8_t><<<grid, kThreads, 0, s>>>(a); break;
    case 2: gather_rows<uint16_t><<<grid, kThreads, 0, s>>>(a); break;
    case 4: gather_rows<uint32_t><<<grid, kThreads, 0, s>>>(a); break;
    default: gather_rows<uint64_t><<<grid, kThreads, 0, s>>>(a); break;
  }
  check_launch("embedding");
}

void launch_embedding_backward(const EmbeddingArgs& a, gpuStream_t s) {
  if (a.n * a.dim > 0) {
    scatter_rows<<<blocks_for(a.n * a.dim), kThreads, 0, s>>>(a);
    check_launch("embedding_dense_backward");
  }
  if (a.rows * a.dim > 0) {
    finish_rows<<<blocks_for(a.rows * a.dim), kThreads, 0, s>>>(a);
    check_launch("embedding_dense_backward");
  }
}

}  // namespace tessera::gpu

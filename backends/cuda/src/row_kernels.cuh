#pragma once
// Pieces shared by the kernels that work one row per block (norms, losses, softmax and its
// backward): a block-wide sum, element loads and stores in any dtype computed in double, and the
// launch shape of such a kernel.
#include "device_io.cuh"

namespace tessera::gpu {

// The sum over the block of one value per thread (valid in every thread).
GPU_D double block_sum(double v) {
  __shared__ double buf[kThreads];
  buf[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) buf[threadIdx.x] += buf[threadIdx.x + s];
    __syncthreads();
  }
  const double r = buf[0];
  __syncthreads();  // buf is reused by the next call
  return r;
}

GPU_D double at(const char* p, int32_t dtype, int64_t i) { return load<double>(p + i * itemsize_of(dtype), dtype); }
GPU_D void put(char* p, int32_t dtype, int64_t i, double v) { store<double>(p + i * itemsize_of(dtype), dtype, v); }

// Blocks for `rows` rows: one each, up to a grid the kernels stride over.
inline unsigned rows_grid(int64_t rows) { return unsigned(rows < 65535 * 16 ? rows : 65535 * 16); }
// Threads per block for rows of `n` elements: a power of two, 32..kThreads.
inline unsigned threads_for(int64_t n) {
  unsigned t = 32;
  while (t < unsigned(kThreads) && int64_t(t) < n) t <<= 1;
  return t;
}

}  // namespace tessera::gpu

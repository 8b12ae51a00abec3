#pragma once
// The grid-stride element-wise loop every map-shaped kernel family uses (elementwise.cu,
// activation.cu): f(loop, offsets) for each linear index (a 64-bit counter), 32- or 64-bit offset arithmetic.
#include "device_io.cuh"

namespace tessera::gpu {

template <class I, int N, class F>
__global__ void map_kernel(Loop L, F f) {
  // The counter is 64-bit; offsets are computed in I (exact: index32 checked every offset fits).
  grid_stride_loop(int64_t(blockIdx.x) * blockDim.x + threadIdx.x, int64_t(gridDim.x) * blockDim.x, L.numel,
                   [&](int64_t i) {
                     I off[N];
                     offsets<I, N>(L, I(i), off);
                     f(L, off);
                   });
}

template <int N, class F>
void run_map(const Loop& L, gpuStream_t s, F f, const char* what) {
  if (L.numel == 0) return;
  if (L.index32) map_kernel<int32_t, N><<<blocks_for(L.numel), kThreads, 0, s>>>(L, f);
  else map_kernel<int64_t, N><<<blocks_for(L.numel), kThreads, 0, s>>>(L, f);
  check_launch(what);
}

template <class I>
GPU_D char* at(const Operand& o, I off) { return o.data + int64_t(off) * o.itemsize; }

}  // namespace tessera::gpu

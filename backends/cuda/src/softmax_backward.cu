// _softmax_backward_data / _log_softmax_backward_data: one block per row along `dim` (like the
// forward in reduce.cu), the row's sum combined in shared memory in the compute type (float
// for 16-bit floats and float32, as the CPU plugin's opmath; double for float64).
#include "device_io.cuh"
#include "row_kernels.cuh"
#include "nn_launch.h"

#include <cmath>

namespace tessera::gpu {
namespace {

template <class C> GPU_D C block_sum(C v) {
  __shared__ char raw[kThreads * sizeof(double)];
  C* buf = reinterpret_cast<C*>(raw);
  buf[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) buf[threadIdx.x] += buf[threadIdx.x + s];
    __syncthreads();
  }
  C r = buf[0];
  __syncthreads();
  return r;
}

template <class C>
__global__ void softmax_backward_kernel(SoftmaxBackwardArgs a) {
  const int32_t gsz = itemsize_of(a.grad_dtype), ysz = itemsize_of(a.y_dtype), osz = itemsize_of(a.out_dtype);
  for (int64_t row = blockIdx.x; row < a.outer * a.inner; row += gridDim.x) {
    const int64_t first = (row / a.inner) * a.dim * a.inner + row % a.inner;
    auto g = [&](int64_t j) { return load<C>(a.grad + (first + j * a.inner) * gsz, a.grad_dtype); };
    auto y = [&](int64_t j) { return load<C>(a.y + (first + j * a.inner) * ysz, a.y_dtype); };
    C sum = 0;
    for (int64_t j = threadIdx.x; j < a.dim; j += blockDim.x) sum += a.log ? g(j) : g(j) * y(j);
    sum = block_sum(sum);
    for (int64_t j = threadIdx.x; j < a.dim; j += blockDim.x)
      store<C>(a.out + (first + j * a.inner) * osz, a.out_dtype, a.log ? g(j) - exp(y(j)) * sum : y(j) * (g(j) - sum));
  }
}

}  // namespace

void launch_softmax_backward(Compute c, const SoftmaxBackwardArgs& a, gpuStream_t s) {
  const int64_t rows = a.outer * a.inner;
  if (rows == 0 || a.dim == 0) return;
  if (c == Compute::Double) softmax_backward_kernel<double><<<rows_grid(rows), threads_for(a.dim), 0, s>>>(a);
  else softmax_backward_kernel<float><<<rows_grid(rows), threads_for(a.dim), 0, s>>>(a);
  check_launch(a.log ? "_log_softmax_backward_data" : "_softmax_backward_data");
}

}  // namespace tessera::gpu

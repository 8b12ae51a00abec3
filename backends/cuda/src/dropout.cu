// native_dropout and its backward, one thread per element of a contiguous tensor. The keep
// decision of element i is the CPU plugin's counter-based hash of (seed, i): the mask depends
// on the seed alone (not on the launch shape), and equals the CPU's for the same seed.
#include "device_io.cuh"
#include "nn_launch.h"

namespace tessera::gpu {
namespace {

// 64 well-mixed bits for position i of the stream `seed` (SplitMix64's finaliser).
GPU_D uint64_t mix(uint64_t seed, uint64_t i) {
  uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

__global__ void dropout_forward(DropoutArgs a) {
  const int32_t sz = itemsize_of(a.dtype);
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < a.n; i += int64_t(gridDim.x) * blockDim.x) {
    const bool k = double(mix(a.seed, uint64_t(i)) >> 11) * 0x1.0p-53 < a.keep;
    reinterpret_cast<bool*>(a.mask)[i] = k;
    store<double>(a.out + i * sz, a.dtype, k ? load<double>(a.in + i * sz, a.dtype) * a.scale : 0.0);
  }
}

__global__ void dropout_backward(DropoutArgs a) {
  const int32_t sz = itemsize_of(a.dtype);
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < a.n; i += int64_t(gridDim.x) * blockDim.x) {
    const bool k = reinterpret_cast<const bool*>(a.mask_in)[i];
    store<double>(a.out + i * sz, a.dtype, k ? load<double>(a.in + i * sz, a.dtype) * a.scale : 0.0);
  }
}
}  // namespace

void launch_dropout(const DropoutArgs& a, gpuStream_t s) {
  if (a.n == 0) return;
  dropout_forward<<<blocks_for(a.n), kThreads, 0, s>>>(a);
  check_launch("native_dropout");
}

void launch_dropout_backward(const DropoutArgs& a, gpuStream_t s) {
  if (a.n == 0) return;
  dropout_backward<<<blocks_for(a.n), kThreads, 0, s>>>(a);
  check_launch("native_dropout_backward");
}

}  // namespace tessera::gpu

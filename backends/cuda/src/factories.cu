// Factories that compute their values: arange, linspace, eye, and the random ones (rand, randn,
// randint) from Philox4x32-10, the counter-based generator the CPU plugin uses too (Salmon et
// al., SC'11): element pair j comes from counter j under the call's seed, so no state is kept
// on the device and every thread is independent. Formulas as backends/cpu/src/factories.cpp
// and random.cpp; the values of random tensors need not match the CPU's bit for bit.
#include "device_io.cuh"
#include "ops_launch.h"

#include <cmath>

namespace tessera::gpu {
namespace {

struct Bits128 {
  uint64_t lo, hi;
};
GPU_D Bits128 philox(uint64_t seed, uint64_t counter) {
  uint32_t c0 = uint32_t(counter), c1 = uint32_t(counter >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t(0xD2511F53u) * c0, p1 = uint64_t(0xCD9E8D57u) * c2;
    const uint32_t n0 = uint32_t(p1 >> 32) ^ c1 ^ k0, n1 = uint32_t(p1);
    const uint32_t n2 = uint32_t(p0 >> 32) ^ c3 ^ k1, n3 = uint32_t(p0);
    c0 = n0, c1 = n1, c2 = n2, c3 = n3;
    k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
  }
  return {uint64_t(c0) | (uint64_t(c1) << 32), uint64_t(c2) | (uint64_t(c3) << 32)};
}
GPU_D double unit_double(uint64_t bits) { return double(bits >> 11) * 0x1.0p-53; }
GPU_D uint64_t mul_hi(uint64_t a, uint64_t b) { return __umul64hi(a, b); }  // CUDA and HIP both have it

__global__ void deterministic_kernel(FactoryOp op, FactoryArgs f) {
  const int32_t isz = itemsize_of(f.dtype);
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < f.numel; i += int64_t(gridDim.x) * blockDim.x) {
    char* p = f.out + i * isz;
    switch (op) {
      case FactoryOp::ArangeInt: store<int64_t>(p, f.dtype, f.start_i + i * f.step_i); break;
      case FactoryOp::ArangeDouble: store<double>(p, f.dtype, f.start_d + double(i) * f.step_d); break;
      case FactoryOp::Linspace: {
        // The second half counts back from `end`, so that the last value is exactly `end`.
        const int64_t half = f.steps / 2 > 1 ? f.steps / 2 : 1;
        store<double>(p, f.dtype, i < half ? f.start_d + f.step_d * double(i)
                                           : f.end_d - f.step_d * double(f.steps - 1 - i));
        break;
      }
      default: store<int64_t>(p, f.dtype, i / f.cols == i % f.cols ? 1 : 0); break;  // Eye
    }
  }
}

// One thread per Philox block: elements 2j and 2j + 1.
__global__ void random_kernel(FactoryOp op, FactoryArgs f) {
  const int32_t isz = itemsize_of(f.dtype);
  const int64_t blocks = (f.numel + 1) / 2;
  for (int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; j < blocks; j += int64_t(gridDim.x) * blockDim.x) {
    const Bits128 b = philox(f.seed, uint64_t(j));
    const uint64_t words[2] = {b.lo, b.hi};
    double v[2];
    if (op == FactoryOp::Rand) {  // as many random bits as the dtype has digits: never rounds to 1
      const double scale = ldexp(1.0, -f.digits);
      for (int k = 0; k < 2; ++k) v[k] = double(words[k] >> (64 - f.digits)) * scale;
    } else if (op == FactoryOp::Randn) {  // Box-Muller in double
      const double u1 = 1.0 - unit_double(b.lo), u2 = unit_double(b.hi);
      const double r = sqrt(-2.0 * log(u1)), theta = 6.283185307179586476925 * u2;
      v[0] = r * cos(theta);
      v[1] = r * sin(theta);
    }
    for (int k = 0; k < 2; ++k) {
      const int64_t i = 2 * j + k;
      if (i >= f.numel) break;
      char* p = f.out + i * isz;
      if (op == FactoryOp::Randint) {  // [low, low + range): the high word of bits * range (Lemire)
        const int64_t x = int64_t(uint64_t(f.start_i) + mul_hi(words[k], uint64_t(f.step_i)));
        if (f.dtype >= kFloat16) store<double>(p, f.dtype, double(x)); else store<int64_t>(p, f.dtype, x);
      } else {
        store<double>(p, f.dtype, v[k]);
      }
    }
  }
}
}  // namespace

void launch_factory(FactoryOp op, const FactoryArgs& f, gpuStream_t s) {
  if (f.numel == 0) return;
  if (op == FactoryOp::Rand || op == FactoryOp::Randn || op == FactoryOp::Randint)
    random_kernel<<<blocks_for((f.numel + 1) / 2), kThreads, 0, s>>>(op, f);
  else
    deterministic_kernel<<<blocks_for(f.numel), kThreads, 0, s>>>(op, f);
  check_launch("a factory");
}

}  // namespace tessera::gpu

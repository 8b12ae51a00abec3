// _fused_adam_ on the GPU: one thread per element of a contiguous parameter, its two moments and
// its gradient read once and written once (the CPU plugin's optim_fused.cpp, element for element).
#include "device_io.cuh"
#include "nn_launch.h"

namespace tessera::gpu {
namespace {

template <class T>
__global__ void adam_step(AdamArgs a) {
  T* param = reinterpret_cast<T*>(a.param);
  T* exp_avg = reinterpret_cast<T*>(a.exp_avg);
  T* exp_avg_sq = reinterpret_cast<T*>(a.exp_avg_sq);
  const T* grad = reinterpret_cast<const T*>(a.grad);
  T* max_sq = reinterpret_cast<T*>(a.max_sq);
  const T sign = T(a.sign), decay = T(a.decay), coupled = T(a.coupled_decay), beta2 = T(a.beta2),
          one_minus_beta1 = T(a.one_minus_beta1), one_minus_beta2 = T(a.one_minus_beta2), eps = T(a.eps),
          step_size = T(a.step_size), inv_bc2_sqrt = T(a.inv_bc2_sqrt);
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < a.n; i += int64_t(gridDim.x) * blockDim.x) {
    T g = grad[i] * sign;
    if (a.coupled_decay != 0) g += coupled * param[i];  // L2 decay; skipped at 0 (no 0 * inf)
    const T m = exp_avg[i] + one_minus_beta1 * (g - exp_avg[i]);
    const T v = exp_avg_sq[i] * beta2 + one_minus_beta2 * g * g;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    T v_hat = v;
    if (max_sq) {
      v_hat = max_sq[i] > v ? max_sq[i] : v;
      max_sq[i] = v_hat;
    }
    param[i] = param[i] * decay - step_size * m / (sqrt(v_hat) * inv_bc2_sqrt + eps);
  }
}

}  // namespace

void launch_fused_adam(const AdamArgs& a, gpuStream_t s) {
  if (a.n == 0) return;
  if (a.dtype == kFloat64) adam_step<double><<<blocks_for(a.n), kThreads, 0, s>>>(a);
  else adam_step<float><<<blocks_for(a.n), kThreads, 0, s>>>(a);
  check_launch("_fused_adam_");
}

}  // namespace tessera::gpu

// _fused_adam_: one Adam / AdamW step on one parameter in a single pass over its memory.
// Operator by operator the step reads and writes the parameter and its two moments about ten
// times (mul_, add_, addcmul_, sqrt, div, add_, addcdiv_); fused, each element is read once and
// written once, which is what decides the time of a step over a large model. The arithmetic is
// torch's single-tensor Adam, element by element, in float for float32 and double for float64.
#include "kernels.h"
#include "tensor_iterator.h"

#include <tessera/sdk/adam_step.h>

#include <cmath>

namespace tessera::cpu {
namespace {

using sdk::Args;

// The per-step constants (sdk/adam_step.h) in the parameters' type.
template <class T>
struct Coefficients {
  T sign, decay, coupled_decay, beta2, one_minus_beta1, one_minus_beta2, eps, step_size, inv_bc2_sqrt;
  explicit Coefficients(const sdk::AdamStep& s)
      : sign(T(s.sign)),
        decay(T(s.decay)),
        coupled_decay(T(s.coupled_decay)),
        beta2(T(s.beta2)),
        one_minus_beta1(T(s.one_minus_beta1)),
        one_minus_beta2(T(s.one_minus_beta2)),
        eps(T(s.eps)),
        step_size(T(s.step_size)),
        inv_bc2_sqrt(T(s.inv_bc2_sqrt)) {}
};

// The element loop, branch-free inside so that it vectorises (the file is built with
// -fno-math-errno: a vector sqrt needs it). kCoupled: L2 decay added to the gradient (skipped
// when zero, as torch does, so that an inf parameter does not make 0 * inf).
template <class T, bool kAmsgrad, bool kCoupled>
[[gnu::always_inline]] inline void adam_loop(const Coefficients<T>& k, T* __restrict param, T* __restrict exp_avg,
                                             T* __restrict exp_avg_sq, const T* __restrict grad,
                                             T* __restrict max_sq, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    T g = grad[i] * k.sign;
    const T p = param[i] * k.decay;
    if constexpr (kCoupled) g += k.coupled_decay * param[i];
    const T m = exp_avg[i] + k.one_minus_beta1 * (g - exp_avg[i]);  // lerp, as torch's
    const T v = exp_avg_sq[i] * k.beta2 + k.one_minus_beta2 * g * g;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    T v_hat = v;
    if constexpr (kAmsgrad) {
      v_hat = max_sq[i] > v ? max_sq[i] : v;
      max_sq[i] = v_hat;
    }
    // sqrt(v̂) / bc2 as a product by the reciprocal: one division per element, not two.
    param[i] = p - k.step_size * m / (std::sqrt(v_hat) * k.inv_bc2_sqrt + k.eps);
  }
}

// One clone per ISA, picked at load time (GCC function multiversioning): the plugin stays
// loadable on any x86-64 CPU and runs AVX-512 / AVX2 where the CPU has them.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TESSERA_ISA_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define TESSERA_ISA_CLONES
#endif

template <class T>
void adam_range(const Coefficients<T>& k, bool amsgrad, bool coupled, T* param, T* exp_avg, T* exp_avg_sq,
                const T* grad, T* max_sq, int64_t n);

template <>
TESSERA_ISA_CLONES void adam_range<float>(const Coefficients<float>& k, bool amsgrad, bool coupled, float* param,
                                          float* exp_avg, float* exp_avg_sq, const float* grad, float* max_sq,
                                          int64_t n) {
  if (amsgrad) {
    if (coupled) adam_loop<float, true, true>(k, param, exp_avg, exp_avg_sq, grad, max_sq, n);
    else adam_loop<float, true, false>(k, param, exp_avg, exp_avg_sq, grad, max_sq, n);
  } else {
    if (coupled) adam_loop<float, false, true>(k, param, exp_avg, exp_avg_sq, grad, max_sq, n);
    else adam_loop<float, false, false>(k, param, exp_avg, exp_avg_sq, grad, max_sq, n);
  }
}

template <>
TESSERA_ISA_CLONES void adam_range<double>(const Coefficients<double>& k, bool amsgrad, bool coupled, double* param,
                                           double* exp_avg, double* exp_avg_sq, const double* grad, double* max_sq,
                                           int64_t n) {
  if (amsgrad) {
    if (coupled) adam_loop<double, true, true>(k, param, exp_avg, exp_avg_sq, grad, max_sq, n);
    else adam_loop<double, true, false>(k, param, exp_avg, exp_avg_sq, grad, max_sq, n);
  } else {
    if (coupled) adam_loop<double, false, true>(k, param, exp_avg, exp_avg_sq, grad, max_sq, n);
    else adam_loop<double, false, false>(k, param, exp_avg, exp_avg_sq, grad, max_sq, n);
  }
}

// _fused_adam_: the operands and coefficients as every device reads them (sdk/adam_step.h).
void fused_adam_kernel(Args& a) {
  const char* op = "_fused_adam_";
  const sdk::AdamStep s = sdk::adam_step(op, a);
  check_cpu(op, s.tensors());
  const int64_t n = s.param.numel();
  const bool coupled = s.coupled_decay != 0;
  auto run = [&](auto zero) {
    using T = decltype(zero);
    const Coefficients<T> k(s);
    T *p = s.param.data<T>(), *m = s.exp_avg.data<T>(), *v = s.exp_avg_sq.data<T>();
    const T* g = s.grad.data<T>();
    T* vmax = s.max_sq ? s.max_sq->data<T>() : nullptr;
    parallel_for(n, kGrainSize, [&](int64_t b, int64_t e) {
      adam_range<T>(k, vmax != nullptr, coupled, p + b, m + b, v + b, g + b, vmax ? vmax + b : nullptr, e - b);
    });
  };
  if (s.dtype == TS_FLOAT64) run(double{});
  else run(float{});
  a.returns({});
}

}  // namespace

void register_optim_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("_fused_adam_", key, fused_adam_kernel);
}

}  // namespace tessera::cpu

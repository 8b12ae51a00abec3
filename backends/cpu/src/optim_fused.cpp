// _fused_adam_: one Adam / AdamW step on one parameter in a single pass over its memory.
// Operator by operator the step reads and writes the parameter and its two moments about ten
// times (mul_, add_, addcmul_, sqrt, div, add_, addcdiv_); fused, each element is read once and
// written once, which is what decides the time of a step over a large model. The arithmetic is
// torch's single-tensor Adam, element by element, in float for float32 and double for float64.
#include "kernels.h"
#include "tensor_iterator.h"

#include <cmath>

namespace tessera::cpu {
namespace {

using sdk::Args;
using sdk::fail;

struct AdamConfig {
  double lr, beta1, beta2, eps, weight_decay, bias_correction1, bias_correction2_sqrt;
  bool maximize, decoupled;
};

// The per-step constants in the parameters' type.
template <class T>
struct Coefficients {
  T sign, decay, coupled_decay, beta2, one_minus_beta1, one_minus_beta2, eps, step_size, inv_bc2_sqrt;
  explicit Coefficients(const AdamConfig& c)
      : sign(c.maximize ? -1 : 1),
        decay(T(c.decoupled ? 1 - c.lr * c.weight_decay : 1)),
        coupled_decay(T(c.decoupled ? 0 : c.weight_decay)),
        beta2(T(c.beta2)),
        one_minus_beta1(T(1 - c.beta1)),
        one_minus_beta2(T(1 - c.beta2)),
        eps(T(c.eps)),
        step_size(T(c.lr / c.bias_correction1)),
        inv_bc2_sqrt(T(1 / c.bias_correction2_sqrt)) {}
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

// _fused_adam_(Tensor(a!) param, Tensor(b!) exp_avg, Tensor(c!) exp_avg_sq, Tensor grad,
//   Tensor(d!)? max_exp_avg_sq, float lr, float beta1, float beta2, float eps, float weight_decay,
//   float bias_correction1, float bias_correction2_sqrt, bool maximize, bool decoupled_weight_decay) -> ()
void fused_adam_kernel(Args& a) {
  const char* op = "_fused_adam_";
  TensorRef param = a.tensor(0), exp_avg = a.tensor(1), exp_avg_sq = a.tensor(2), grad = a.tensor(3);
  std::optional<TensorRef> max_sq = a.optional_tensor(4);
  std::vector<const TensorRef*> all{&param, &exp_avg, &exp_avg_sq, &grad};
  if (max_sq) all.push_back(&*max_sq);
  check_cpu(op, all);
  const int32_t dtype = param.dtype();
  if (dtype != TS_FLOAT32 && dtype != TS_FLOAT64)
    fail(TS_ERROR_TYPE, op, ": expected float32 or float64 parameters (others take the unfused step), got ",
         sdk::dtype_name(dtype));
  const char* names[] = {"param", "exp_avg", "exp_avg_sq", "grad", "max_exp_avg_sq"};
  for (size_t k = 0; k < all.size(); ++k) {
    const TensorRef& t = *all[k];
    if (t.dtype() != dtype)
      fail(TS_ERROR_TYPE, op, ": expected ", names[k], " of dtype ", sdk::dtype_name(dtype), " (the parameter's), got ",
           sdk::dtype_name(t.dtype()));
    if (t.shape_vector() != param.shape_vector())
      fail(TS_ERROR_VALUE, op, ": expected ", names[k], " of shape ", shape_str(param.sizes()), " (the parameter's), got ",
           shape_str(t.sizes()));
    if (!t.is_contiguous())
      fail(TS_ERROR_VALUE, op, ": expected contiguous tensors (others take the unfused step); ", names[k],
           " is not");
  }
  const AdamConfig c{a.to_double(5),  a.to_double(6),  a.to_double(7),  a.to_double(8), a.to_double(9),
                     a.to_double(10), a.to_double(11), a.to_bool(12),   a.to_bool(13)};
  const int64_t n = param.numel();
  const bool coupled = !c.decoupled && c.weight_decay != 0;
  auto run = [&](auto zero) {
    using T = decltype(zero);
    const Coefficients<T> k(c);
    T *p = param.data<T>(), *m = exp_avg.data<T>(), *v = exp_avg_sq.data<T>();
    const T* g = grad.data<T>();
    T* vmax = max_sq ? max_sq->data<T>() : nullptr;
    parallel_for(n, kGrainSize, [&](int64_t b, int64_t e) {
      adam_range<T>(k, vmax != nullptr, coupled, p + b, m + b, v + b, g + b, vmax ? vmax + b : nullptr, e - b);
    });
  };
  if (dtype == TS_FLOAT64) run(double{});
  else run(float{});
  a.returns({});
}

}  // namespace

void register_optim_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("_fused_adam_", key, fused_adam_kernel);
}

}  // namespace tessera::cpu

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

template <class T>
void adam_range(const AdamConfig& c, T* param, T* exp_avg, T* exp_avg_sq, const T* grad, T* max_sq, int64_t begin,
                int64_t end) {
  const T beta1 = T(c.beta1), beta2 = T(c.beta2), one_minus_beta1 = T(1 - c.beta1), one_minus_beta2 = T(1 - c.beta2);
  const T wd = T(c.weight_decay), decay = T(1 - c.lr * c.weight_decay), eps = T(c.eps);
  const T step_size = T(c.lr / c.bias_correction1), bc2_sqrt = T(c.bias_correction2_sqrt);
  for (int64_t i = begin; i < end; ++i) {
    T g = c.maximize ? -grad[i] : grad[i];
    T p = param[i];
    if (c.weight_decay != 0) {
      if (c.decoupled) p *= decay;
      else g += wd * p;
    }
    const T m = exp_avg[i] + one_minus_beta1 * (g - exp_avg[i]);  // lerp, as torch's
    const T v = exp_avg_sq[i] * beta2 + one_minus_beta2 * g * g;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    T v_hat = v;
    if (max_sq) v_hat = max_sq[i] = std::max(max_sq[i], v);
    param[i] = p - step_size * m / (std::sqrt(v_hat) / bc2_sqrt + eps);
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
  auto run = [&](auto zero) {
    using T = decltype(zero);
    T* m = max_sq ? max_sq->data<T>() : nullptr;
    parallel_for(n, kGrainSize, [&](int64_t b, int64_t e) {
      adam_range<T>(c, param.data<T>(), exp_avg.data<T>(), exp_avg_sq.data<T>(), grad.data<T>(), m, b, e);
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

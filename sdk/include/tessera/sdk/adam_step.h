#pragma once
// _fused_adam_'s argument rules and per-step coefficients, shared by every device's kernel so
// that they accept the same arguments, refuse bad ones with the same messages, and compute the
// same step (torch's single-tensor Adam / AdamW, element by element).
//
// _fused_adam_(Tensor(a!) param, Tensor(b!) exp_avg, Tensor(c!) exp_avg_sq, Tensor grad,
//   Tensor(d!)? max_exp_avg_sq, float lr, float beta1, float beta2, float eps, float weight_decay,
//   float bias_correction1, float bias_correction2_sqrt, bool maximize, bool decoupled_weight_decay) -> ()
#include <tessera/sdk/plugin.h>

#include <optional>
#include <vector>

namespace tessera::sdk {

struct AdamStep {
  TensorRef param, exp_avg, exp_avg_sq, grad;
  std::optional<TensorRef> max_sq;  // amsgrad's running maximum
  int32_t dtype = 0;                // float32 or float64, every tensor's
  // Per element: g = grad * sign (+ coupled_decay * param); m = lerp(m, g, one_minus_beta1);
  // v = v * beta2 + one_minus_beta2 * g * g; param = param * decay - step_size * m /
  // (sqrt(v̂) * inv_bc2_sqrt + eps), v̂ = v or max(max_sq, v).
  double sign = 1, decay = 1, coupled_decay = 0, beta2 = 0, one_minus_beta1 = 0, one_minus_beta2 = 0, eps = 0,
         step_size = 0, inv_bc2_sqrt = 1;

  std::vector<const TensorRef*> tensors() const {
    std::vector<const TensorRef*> all{&param, &exp_avg, &exp_avg_sq, &grad};
    if (max_sq) all.push_back(&*max_sq);
    return all;
  }
};

// The operands of an _fused_adam_ call, checked (dtype, shape, contiguity; the caller checks the
// device), and its coefficients.
inline AdamStep adam_step(const char* op, Args& a) {
  AdamStep s{a.tensor(0), a.tensor(1), a.tensor(2), a.tensor(3), a.optional_tensor(4)};
  s.dtype = s.param.dtype();
  TS_SDK_CHECK(s.dtype == TS_FLOAT32 || s.dtype == TS_FLOAT64, TS_ERROR_TYPE, op,
               ": expected float32 or float64 parameters (others take the unfused step), got ", dtype_name(s.dtype));
  const char* names[] = {"param", "exp_avg", "exp_avg_sq", "grad", "max_exp_avg_sq"};
  const std::vector<const TensorRef*> all = s.tensors();
  for (size_t k = 0; k < all.size(); ++k) {
    const TensorRef& t = *all[k];
    TS_SDK_CHECK(t.dtype() == s.dtype, TS_ERROR_TYPE, op, ": expected ", names[k], " of dtype ", dtype_name(s.dtype),
                 " (the parameter's), got ", dtype_name(t.dtype()));
    TS_SDK_CHECK(t.shape_vector() == s.param.shape_vector(), TS_ERROR_VALUE, op, ": expected ", names[k], " of shape ",
                 shape_text(s.param.sizes()), " (the parameter's), got ", shape_text(t.sizes()));
    TS_SDK_CHECK(t.is_contiguous(), TS_ERROR_VALUE, op, ": expected contiguous tensors (others take the unfused step); ",
                 names[k], " is not");
  }
  const double lr = a.to_double(5), beta1 = a.to_double(6), beta2 = a.to_double(7), eps = a.to_double(8),
               weight_decay = a.to_double(9), bias_correction1 = a.to_double(10),
               bias_correction2_sqrt = a.to_double(11);
  const bool maximize = a.to_bool(12), decoupled = a.to_bool(13);
  s.sign = maximize ? -1 : 1;
  s.decay = decoupled ? 1 - lr * weight_decay : 1;
  s.coupled_decay = decoupled ? 0 : weight_decay;
  s.beta2 = beta2;
  s.one_minus_beta1 = 1 - beta1;
  s.one_minus_beta2 = 1 - beta2;
  s.eps = eps;
  s.step_size = lr / bias_correction1;
  s.inv_bc2_sqrt = 1 / bias_correction2_sqrt;
  return s;
}

}  // namespace tessera::sdk

// Activation functions and the element-wise backward formulas autograd calls: gelu (erf and
// tanh forms), silu, and the backward of gelu, silu, relu (threshold_backward), sigmoid and
// tanh. All go through the TensorIterator (broadcasting, strides, threads); the arithmetic is
// done in float for the 16-bit floats, in the tensor's own type otherwise.
#include "kernels.h"
#include "tensor_iterator.h"

#include <cmath>
#include <string>

namespace tessera::cpu {
namespace {

using sdk::fail;
using sdk::opmath_t;

// Constants of the GELU formulas.
constexpr double kInvSqrt2 = 0.70710678118654752440;     // 1 / sqrt(2)
constexpr double kInvSqrt2Pi = 0.39894228040143267794;   // 1 / sqrt(2 pi)
constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2 / pi)
constexpr double kGeluCubic = 0.044715;

enum class Approx { None, Tanh };

Approx read_approximate(const std::string& name, std::optional<std::string_view> s) {
  if (!s || *s == "none") return Approx::None;
  if (*s == "tanh") return Approx::Tanh;
  fail(TS_ERROR_VALUE, name, ": expected approximate to be 'none' or 'tanh', got '", *s, "'");
}

template <class M> M gelu(M x, Approx ap) {
  if (ap == Approx::None) return M(0.5) * x * (M(1) + std::erf(x * M(kInvSqrt2)));
  // 0.5 (1 + tanh(u)) = sigmoid(2u): one exp, which vectorises where tanh does not.
  const M u = M(kSqrt2OverPi) * (x + M(kGeluCubic) * x * x * x);
  return x / (M(1) + std::exp(M(-2) * u));
}

// d gelu(x) / dx.
template <class M> M gelu_derivative(M x, Approx ap) {
  if (ap == Approx::None) {
    const M cdf = M(0.5) * (M(1) + std::erf(x * M(kInvSqrt2)));
    const M pdf = M(kInvSqrt2Pi) * std::exp(M(-0.5) * x * x);
    return cdf + x * pdf;
  }
  // With s = sigmoid(2u) = 0.5 (1 + tanh(u)): 1 - tanh(u)^2 = 4 s (1 - s).
  const M x2 = x * x;
  const M s = M(1) / (M(1) + std::exp(M(-2 * kSqrt2OverPi) * (x + M(kGeluCubic) * x2 * x)));
  const M du = M(kSqrt2OverPi) * (M(1) + M(3 * kGeluCubic) * x2);
  return s + M(2) * x * s * (M(1) - s) * du;
}

template <class M> M sigmoid(M x) { return M(1) / (M(1) + std::exp(-x)); }

void require_floating(const std::string& name, const char* what, int32_t dtype) {
  if (!sdk::is_floating(dtype))
    fail(TS_ERROR_TYPE, name, ": expected ", what, " of a floating point dtype, got ", sdk::dtype_name(dtype));
}

// y = f(x) for a floating `self`, functional or in-place; f maps the opmath type to itself.
template <class F>
void float_unary(sdk::Args& a, const std::string& name, Variant v, F f) {
  TensorRef self = a.tensor(0);
  require_floating(name, "input", self.dtype());
  TensorIterator it = IterConfig(a.call(), name.c_str()).output(v, self, TensorRef()).input(self).build();
  TS_DISPATCH_FLOAT(it.common_dtype(), fail(TS_ERROR_TYPE, name, ": unsupported dtype"), {
    using M = opmath_t<scalar_t>;
    it.run([&f](char** d, const int64_t* s, int64_t n) {
      map_row<scalar_t, scalar_t>(d, s, n, [&f](scalar_t x) { return scalar_t(f(M(x))); });
    });
  });
  a.return_argument(it.result());
}

// out = f(grad, x) with grad and x broadcast and promoted to a floating dtype.
template <class F>
void float_backward(sdk::Args& a, const char* name, const char* second, F f) {
  TensorRef grad = a.tensor(0), x = a.tensor(1);
  TensorIterator it = IterConfig(a.call(), name).output(TensorRef(), false).input(grad).input(x).build();
  if (!sdk::is_floating(it.common_dtype()))
    fail(TS_ERROR_TYPE, name, ": expected grad_output and ", second, " of a floating point dtype, got ",
         sdk::dtype_name(grad.dtype()), " and ", sdk::dtype_name(x.dtype()));
  TS_DISPATCH_FLOAT(it.common_dtype(), fail(TS_ERROR_TYPE, name, ": unsupported dtype"), {
    using M = opmath_t<scalar_t>;
    it.run([&f](char** d, const int64_t* s, int64_t n) {
      binary_row<scalar_t, scalar_t, scalar_t>(d, s, n,
                                               [&f](scalar_t g, scalar_t x) { return scalar_t(f(M(g), M(x))); });
    });
  });
  a.return_argument(it.result());
}

// gelu(Tensor self, *, str approximate='none'), and gelu_.
template <Variant V> void gelu_k(sdk::Args& a) {
  const std::string name = variant_name("gelu", V);
  const Approx ap = read_approximate(name, a.optional_str(1));
  float_unary(a, name, V, [ap](auto x) { return gelu(x, ap); });
}

template <Variant V> void silu_k(sdk::Args& a) {
  float_unary(a, variant_name("silu", V), V, [](auto x) { return x * sigmoid(x); });
}

// gelu_backward(Tensor grad_output, Tensor self, *, str approximate='none')
void gelu_backward_k(sdk::Args& a) {
  const Approx ap = read_approximate("gelu_backward", a.optional_str(2));
  float_backward(a, "gelu_backward", "self", [ap](auto g, auto x) { return g * gelu_derivative(x, ap); });
}

void silu_backward_k(sdk::Args& a) {
  float_backward(a, "silu_backward", "self", [](auto g, auto x) {
    using M = decltype(x);
    const M s = sigmoid(x);
    return g * s * (M(1) + x * (M(1) - s));
  });
}

// sigmoid_backward(grad_output, output): g * y * (1 - y), from the forward's result.
void sigmoid_backward_k(sdk::Args& a) {
  float_backward(a, "sigmoid_backward", "output", [](auto g, auto y) { return g * y * (decltype(y)(1) - y); });
}

// tanh_backward(grad_output, output): g * (1 - y^2).
void tanh_backward_k(sdk::Args& a) {
  float_backward(a, "tanh_backward", "output", [](auto g, auto y) { return g * (decltype(y)(1) - y * y); });
}

// threshold_backward(grad_output, self, threshold): grad where self > threshold, else 0 (relu's
// backward with threshold 0). Any numeric dtype, as relu.
void threshold_backward_k(sdk::Args& a) {
  const char* name = "threshold_backward";
  TensorRef grad = a.tensor(0), x = a.tensor(1);
  const ScalarArg th = a.scalar(2);
  TensorIterator it = IterConfig(a.call(), name).output(TensorRef(), false).input(grad).input(x).build();
  if (it.common_dtype() == TS_BOOL) fail(TS_ERROR_TYPE, name, ": expected numeric tensors, got bool");
  TS_DISPATCH_NUMERIC(it.common_dtype(), fail(TS_ERROR_TYPE, name, ": unsupported dtype"), {
    using M = opmath_t<scalar_t>;
    // An integral tensor against a fractional threshold compares in double.
    if (std::is_integral_v<scalar_t> && th.kind == ScalarArg::Double) {
      const double t = th.d;
      it.run([t](char** d, const int64_t* s, int64_t n) {
        binary_row<scalar_t, scalar_t, scalar_t>(
            d, s, n, [t](scalar_t g, scalar_t v) { return double(v) <= t ? scalar_t(0) : g; });
      });
    } else {
      const M t = scalar_to<M>(th);
      it.run([t](char** d, const int64_t* s, int64_t n) {
        binary_row<scalar_t, scalar_t, scalar_t>(
            d, s, n, [t](scalar_t g, scalar_t v) { return M(v) <= t ? scalar_t(0) : g; });
      });
    }
  });
  a.return_argument(it.result());
}

}  // namespace

void register_activation_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("gelu", key, gelu_k<Variant::Functional>);
  reg.kernel("gelu_", key, gelu_k<Variant::Inplace>);
  reg.kernel("silu", key, silu_k<Variant::Functional>);
  reg.kernel("silu_", key, silu_k<Variant::Inplace>);
  reg.kernel("gelu_backward", key, gelu_backward_k);
  reg.kernel("silu_backward", key, silu_backward_k);
  reg.kernel("sigmoid_backward", key, sigmoid_backward_k);
  reg.kernel("tanh_backward", key, tanh_backward_k);
  reg.kernel("threshold_backward", key, threshold_backward_k);
}

}  // namespace tessera::cpu

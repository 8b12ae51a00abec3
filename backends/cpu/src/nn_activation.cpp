// Activation functions and the element-wise backward formulas autograd calls: gelu (erf and
// tanh forms), silu, and the backward of gelu, silu, relu (threshold_backward), sigmoid and
// tanh. All go through the TensorIterator (broadcasting, strides, threads); the arithmetic is
// done in float for the 16-bit floats, in the tensor's own type otherwise.
#include "kernels.h"
#include "simd_table.h"
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

// The normal CDF 0.5 (1 + erf(x / sqrt 2)) as 0.5 erfc(-x / sqrt 2): accurate in the left tail too,
// where 1 + erf cancels.
template <class M> M normal_cdf(M x) { return M(0.5) * std::erfc(-x * M(kInvSqrt2)); }

// sigmoid(x) = 1 / (1 + E), E = exp(-x), and 1 - sigmoid(x): E s where s >= 1/2 (no cancellation
// where s rounds to nearly 1), 1 - s elsewhere. The vector kernels (simd_kernels.h) do the same.
template <class M> M sigmoid(M x, M& one_minus) {
  const M E = std::exp(-x);
  const M s = M(1) / (M(1) + E);
  one_minus = E <= M(1) ? E * s : M(1) - s;
  return s;
}
template <class M> M sigmoid(M x) {
  M unused;
  return sigmoid(x, unused);
}

template <class M> M gelu(M x, Approx ap) {
  if (ap == Approx::None) return x * normal_cdf(x);
  // 0.5 (1 + tanh(u)) = sigmoid(2u): one exp, which vectorises where tanh does not.
  const M u = M(kSqrt2OverPi) * (x + M(kGeluCubic) * x * x * x);
  return x * sigmoid(M(2) * u);
}

// d gelu(x) / dx.
template <class M> M gelu_derivative(M x, Approx ap) {
  if (ap == Approx::None) return normal_cdf(x) + x * M(kInvSqrt2Pi) * std::exp(M(-0.5) * x * x);
  // With s = sigmoid(2u) = 0.5 (1 + tanh(u)): 1 - tanh(u)^2 = 4 s (1 - s).
  const M x2 = x * x;
  M one_minus;
  const M s = sigmoid(M(2 * kSqrt2OverPi) * (x + M(kGeluCubic) * x2 * x), one_minus);
  const M du = M(kSqrt2OverPi) * (M(1) + M(3 * kGeluCubic) * x2);
  return s + M(2) * x * s * one_minus * du;
}

void require_floating(const std::string& name, const char* what, int32_t dtype) {
  if (!sdk::is_floating(dtype))
    fail(TS_ERROR_TYPE, name, ": expected ", what, " of a floating point dtype, got ", sdk::dtype_name(dtype));
}

constexpr int64_t kF32 = sizeof(float);

// A vector kernel over a float32 row whose operands are not all contiguous (a broadcast
// gradient: sum().backward() hands the activation's backward a stride-0 grad): a chunk at a time,
// strided operands gathered into (and the output scattered from) buffers on the stack. Far faster
// than the scalar formulas, whose erf/exp are not vectorised.
constexpr int64_t kChunk = 256;

const float* gathered(const char* base, int64_t stride, int64_t n, float* buffer) {
  if (stride == kF32) return reinterpret_cast<const float*>(base);
  for (int64_t i = 0; i < n; ++i) buffer[i] = *reinterpret_cast<const float*>(base + i * stride);
  return buffer;
}

template <class Kernel>  // kernel(out, inputs...) on n contiguous floats
void vec_in_chunks(char** d, const int64_t* s, int64_t n, int inputs, Kernel kernel) {
  alignas(64) float buffers[3][kChunk];
  for (int64_t i0 = 0; i0 < n; i0 += kChunk) {
    const int64_t m = std::min(kChunk, n - i0);
    const float* in[2] = {nullptr, nullptr};
    for (int k = 0; k < inputs; ++k) in[k] = gathered(d[k + 1] + i0 * s[k + 1], s[k + 1], m, buffers[k + 1]);
    float* out = s[0] == kF32 ? reinterpret_cast<float*>(d[0] + i0 * kF32) : buffers[0];
    kernel(out, in[0], in[1], m);
    if (out == buffers[0])
      for (int64_t i = 0; i < m; ++i) *reinterpret_cast<float*>(d[0] + (i0 + i) * s[0]) = out[i];
  }
}

// y = f(x) for a floating `self`, functional or in-place; f maps the opmath type to itself.
// float32 rows that are contiguous run `vec` from the vector table when it has one.
template <class F>
void float_unary(sdk::Args& a, const std::string& name, Variant v, F f, simd::UnaryFn vec = nullptr) {
  TensorRef self = a.tensor(0);
  require_floating(name, "input", self.dtype());
  TensorIterator it = IterConfig(a.call(), name.c_str()).output(v, self, TensorRef()).input(self).build();
  TS_DISPATCH_FLOAT(it.common_dtype(), fail(TS_ERROR_TYPE, name, ": unsupported dtype"), {
    using M = opmath_t<scalar_t>;
    it.run([&f, vec](char** d, const int64_t* s, int64_t n) {
      if (std::is_same_v<scalar_t, float> && vec) {
        if (s[0] == kF32 && s[1] == kF32)
          return vec(reinterpret_cast<float*>(d[0]), reinterpret_cast<const float*>(d[1]), n);
        return vec_in_chunks(d, s, n, 1, [vec](float* o, const float* x, const float*, int64_t m) { vec(o, x, m); });
      }
      map_row<scalar_t, scalar_t>(d, s, n, [&f](scalar_t x) { return scalar_t(f(M(x))); });
    });
  });
  a.return_argument(it.result());
}

// out = f(grad, x) with grad and x broadcast and promoted to a floating dtype (`vec` as above).
template <class F>
void float_backward(sdk::Args& a, const char* name, const char* second, F f, simd::BinaryVV vec = nullptr) {
  TensorRef grad = a.tensor(0), x = a.tensor(1);
  TensorIterator it = IterConfig(a.call(), name).output(TensorRef(), false).input(grad).input(x).build();
  if (!sdk::is_floating(it.common_dtype()))
    fail(TS_ERROR_TYPE, name, ": expected grad_output and ", second, " of a floating point dtype, got ",
         sdk::dtype_name(grad.dtype()), " and ", sdk::dtype_name(x.dtype()));
  TS_DISPATCH_FLOAT(it.common_dtype(), fail(TS_ERROR_TYPE, name, ": unsupported dtype"), {
    using M = opmath_t<scalar_t>;
    it.run([&f, vec](char** d, const int64_t* s, int64_t n) {
      if (std::is_same_v<scalar_t, float> && vec) {
        if (s[0] == kF32 && s[1] == kF32 && s[2] == kF32)
          return vec(reinterpret_cast<float*>(d[0]), reinterpret_cast<const float*>(d[1]),
                     reinterpret_cast<const float*>(d[2]), n);
        return vec_in_chunks(d, s, n, 2, vec);
      }
      binary_row<scalar_t, scalar_t, scalar_t>(d, s, n,
                                               [&f](scalar_t g, scalar_t x) { return scalar_t(f(M(g), M(x))); });
    });
  });
  a.return_argument(it.result());
}

simd::Activation gelu_activation(Approx ap) {
  return ap == Approx::None ? simd::Activation::Gelu : simd::Activation::GeluTanh;
}

// gelu(Tensor self, *, str approximate='none'), and gelu_.
template <Variant V> void gelu_k(sdk::Args& a) {
  const std::string name = variant_name("gelu", V);
  const Approx ap = read_approximate(name, a.optional_str(1));
  float_unary(a, name, V, [ap](auto x) { return gelu(x, ap); }, simd::vec().activation[int(gelu_activation(ap))]);
}

template <Variant V> void silu_k(sdk::Args& a) {
  float_unary(a, variant_name("silu", V), V, [](auto x) { return x * sigmoid(x); },
              simd::vec().activation[int(simd::Activation::Silu)]);
}

// gelu_backward(Tensor grad_output, Tensor self, *, str approximate='none')
void gelu_backward_k(sdk::Args& a) {
  const Approx ap = read_approximate("gelu_backward", a.optional_str(2));
  float_backward(a, "gelu_backward", "self", [ap](auto g, auto x) { return g * gelu_derivative(x, ap); },
                 simd::vec().activation_backward[int(gelu_activation(ap))]);
}

void silu_backward_k(sdk::Args& a) {
  float_backward(a, "silu_backward", "self", [](auto g, auto x) {
    using M = decltype(x);
    M one_minus;
    const M s = sigmoid(x, one_minus);
    return g * s * (M(1) + x * one_minus);
  }, simd::vec().activation_backward[int(simd::Activation::Silu)]);
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

// Element-wise unary ops. Floating ops (exp, log, ...) compute integer and bool inputs in
// float32 as PyTorch does; neg/abs/sign/relu keep the input's dtype. 16-bit floats compute in
// float. One loop per op and compute dtype; contiguous float32 rows go through the vectorised
// kernels of simd_table.h (AVX2 / AVX-512, chosen at load time).
#include "kernels.h"
#include "simd_table.h"
#include "tensor_iterator.h"

#include "special_functions.h"

#include <cmath>

namespace tessera::cpu {
namespace {

using sdk::fail;
using sdk::opmath_t;

// ---- floating ops: each maps M (float or double) to M.
struct Exp {
  static constexpr bool complex_ok = true;
  static constexpr simd::Unary vec = simd::Unary::Exp;
  static constexpr const char* name = "exp";
  template <class M> static M f(M x) { return std::exp(x); }
};
struct Log {
  static constexpr bool complex_ok = true;
  static constexpr simd::Unary vec = simd::Unary::Log;
  static constexpr const char* name = "log";
  template <class M> static M f(M x) { return std::log(x); }
};
struct Log1p {
  static constexpr simd::Unary vec = simd::Unary::Log1p;
  static constexpr const char* name = "log1p";
  template <class M> static M f(M x) { return std::log1p(x); }
};
struct Sqrt {
  static constexpr bool complex_ok = true;
  static constexpr simd::Unary vec = simd::Unary::Sqrt;
  static constexpr const char* name = "sqrt";
  template <class M> static M f(M x) { return std::sqrt(x); }
};
struct Rsqrt {
  static constexpr bool complex_ok = true;
  static constexpr simd::Unary vec = simd::Unary::Rsqrt;
  static constexpr const char* name = "rsqrt";
  template <class M> static M f(M x) { return M(1) / std::sqrt(x); }
};
struct Sin {
  static constexpr bool complex_ok = true;
  static constexpr simd::Unary vec = simd::Unary::Sin;
  static constexpr const char* name = "sin";
  template <class M> static M f(M x) { return std::sin(x); }
};
struct Cos {
  static constexpr bool complex_ok = true;
  static constexpr simd::Unary vec = simd::Unary::Cos;
  static constexpr const char* name = "cos";
  template <class M> static M f(M x) { return std::cos(x); }
};
struct Tanh {
  static constexpr bool complex_ok = true;
  static constexpr simd::Unary vec = simd::Unary::Tanh;
  static constexpr const char* name = "tanh";
  template <class M> static M f(M x) { return std::tanh(x); }
};
struct Sigmoid {
  static constexpr bool complex_ok = true;
  static constexpr simd::Unary vec = simd::Unary::Sigmoid;
  static constexpr const char* name = "sigmoid";
  template <class M> static M f(M x) { return M(1) / (M(1) + std::exp(-x)); }
};
struct Erf {
  static constexpr simd::Unary vec = simd::Unary::Erf;
  static constexpr const char* name = "erf";
  template <class M> static M f(M x) { return std::erf(x); }
};


// ---- more floating ops (no vector kernels: the compiler's libm loop)
#define TS_FLOAT_UNARY(Name, str, expr, cplx)                        \
  struct Name {                                                      \
    static constexpr bool complex_ok = cplx;                         \
    static constexpr simd::Unary vec = simd::Unary::Count;           \
    static constexpr const char* name = str;                         \
    template <class M> static M f(M x) { return expr; }              \
  };
TS_FLOAT_UNARY(Exp2, "exp2", std::exp2(x), false)
TS_FLOAT_UNARY(Expm1, "expm1", std::expm1(x), false)
TS_FLOAT_UNARY(Log2, "log2", std::log2(x), false)
TS_FLOAT_UNARY(Log10, "log10", std::log10(x), true)
TS_FLOAT_UNARY(Tan, "tan", std::tan(x), true)
TS_FLOAT_UNARY(Asin, "asin", std::asin(x), true)
TS_FLOAT_UNARY(Acos, "acos", std::acos(x), true)
TS_FLOAT_UNARY(Atan, "atan", std::atan(x), true)
TS_FLOAT_UNARY(Sinh, "sinh", std::sinh(x), true)
TS_FLOAT_UNARY(Cosh, "cosh", std::cosh(x), true)
TS_FLOAT_UNARY(Asinh, "asinh", std::asinh(x), true)
TS_FLOAT_UNARY(Acosh, "acosh", std::acosh(x), true)
TS_FLOAT_UNARY(Atanh, "atanh", std::atanh(x), true)
TS_FLOAT_UNARY(Erfc, "erfc", std::erfc(x), false)
TS_FLOAT_UNARY(Erfinv, "erfinv", special::erfinv(x), false)
TS_FLOAT_UNARY(Lgamma, "lgamma", special::lgamma(x), false)
TS_FLOAT_UNARY(Digamma, "digamma", special::digamma(x), false)
TS_FLOAT_UNARY(Reciprocal, "reciprocal", M(1) / x, true)
#undef TS_FLOAT_UNARY

// ---- rounding: floating values rounded, integers returned unchanged (as PyTorch)
#define TS_ROUNDING_UNARY(Name, str, expr)                                        \
  struct Name {                                                                   \
    static constexpr simd::Unary vec = simd::Unary::Count;                        \
    static constexpr const char* name = str;                                      \
    static constexpr bool allow_bool = false;                                     \
    template <class M> static M f(M x) {                                          \
      if constexpr (std::is_floating_point_v<M>) return expr;                     \
      else return x;                                                              \
    }                                                                             \
  };
TS_ROUNDING_UNARY(Floor, "floor", std::floor(x))
TS_ROUNDING_UNARY(Ceil, "ceil", std::ceil(x))
TS_ROUNDING_UNARY(Trunc, "trunc", std::trunc(x))
TS_ROUNDING_UNARY(Round, "round", std::nearbyint(x))  // half to even in the default rounding mode
#undef TS_ROUNDING_UNARY

// bitwise_not: ~x for integers, logical not for bool; floating inputs are refused.
struct BitwiseNot {
  static constexpr simd::Unary vec = simd::Unary::Count;
  static constexpr const char* name = "bitwise_not";
  static constexpr bool allow_bool = true;
  template <class M> static M f(M x) {
    if constexpr (std::is_same_v<M, bool>) return !x;
    else if constexpr (std::is_integral_v<M>) return M(~x);
    else return x;  // unreachable: refused before the loop
  }
};

// -x without signed-overflow UB (the most negative integer wraps to itself, as in PyTorch).
template <class T> T wrapping_neg(T x) {
  if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
    using U = std::make_unsigned_t<T>;
    return T(U(0) - U(x));
  } else {
    return T(-x);
  }
}

// ---- dtype-keeping ops: each maps the compute type M to M; `allow_bool` as PyTorch.
struct Neg {
  static constexpr bool complex_ok = true;
  static constexpr simd::Unary vec = simd::Unary::Neg;
  static constexpr const char* name = "neg";
  static constexpr bool allow_bool = false;
  template <class M> static M f(M x) { return wrapping_neg(x); }
};
struct Abs {
  static constexpr simd::Unary vec = simd::Unary::Abs;
  static constexpr const char* name = "abs";
  static constexpr bool allow_bool = true;
  template <class M> static M f(M x) {
    if constexpr (std::is_same_v<M, bool> || std::is_unsigned_v<M>) return x;
    else if constexpr (std::is_floating_point_v<M>) return std::abs(x);  // abs(-0.0) is +0.0
    else return x < M(0) ? wrapping_neg(x) : x;
  }
};
struct Sign {
  static constexpr simd::Unary vec = simd::Unary::Count;  // no vector kernel
  static constexpr const char* name = "sign";
  static constexpr bool allow_bool = true;
  template <class M> static M f(M x) {
    if constexpr (std::is_same_v<M, bool>) return x;
    else return M(int(M(0) < x) - int(x < M(0)));
  }
};
struct Relu {
  static constexpr simd::Unary vec = simd::Unary::Relu;
  static constexpr const char* name = "relu";
  static constexpr bool allow_bool = false;
  template <class M> static M f(M x) { return x < M(0) ? M(0) : x; }  // NaN stays NaN
};

// Whether Op has a complex form (ops declare complex_ok; the others refuse complex tensors).
template <class Op> constexpr bool complex_capable() {
  if constexpr (requires { Op::complex_ok; }) return Op::complex_ok;
  else return false;
}
// Runs Op over an iterator of compute type T: contiguous float32 rows through the vector table,
// everything else through the plain row loop.
template <class Op, class T>
void run_unary(TensorIterator& it) {
  using M = opmath_t<T>;
  if constexpr (std::is_same_v<T, float> && Op::vec != simd::Unary::Count) {
    const simd::UnaryFn vf = simd::vec().unary[int(Op::vec)];
    it.run([vf](char** d, const int64_t* s, int64_t n) {
      if (s[0] == int64_t(sizeof(float)) && s[1] == int64_t(sizeof(float)))
        vf(reinterpret_cast<float*>(d[0]), reinterpret_cast<const float*>(d[1]), n);
      else
        map_row<float, float>(d, s, n, [](float x) { return Op::f(x); });
    });
  } else {
    it.run([](char** d, const int64_t* s, int64_t n) {
      map_row<T, T>(d, s, n, [](T x) { return T(Op::f(M(x))); });
    });
  }
}

// Runs Op over a complex iterator (refusing ops without a complex form) and returns true; false
// when the iterator is real.
template <class Op>
bool ran_as_complex(const std::string& name, TensorIterator& it) {
  if (!sdk::is_complex(it.common_dtype())) return false;
  if constexpr (complex_capable<Op>()) {
    TS_DISPATCH_COMPLEX(it.common_dtype(), , run_unary<Op, scalar_t>(it));
  } else {
    fail(TS_ERROR_TYPE, name, ": not supported for complex tensors, got ", sdk::dtype_name(it.common_dtype()));
  }
  return true;
}

template <class Op, Variant V>
void float_kernel(sdk::Args& a) {
  const std::string name = variant_name(Op::name, V);
  TensorRef self = a.tensor(0);
  TensorRef out = V == Variant::Out ? a.tensor(1) : TensorRef();
  TensorIterator it =
      IterConfig(a.call(), name.c_str()).output(V, self, out).input(self).promote_integers_to_float().build();
  if (ran_as_complex<Op>(name, it)) return a.return_argument(it.result());
  TS_DISPATCH_FLOAT(it.common_dtype(), fail(TS_ERROR_TYPE, name, ": unsupported dtype"), run_unary<Op, scalar_t>(it));
  a.return_argument(it.result());
}

// abs of a complex tensor is its (real) modulus: float32 for complex64, float64 for complex128.
void complex_abs(sdk::Args& a, Variant v) {
  const std::string name = variant_name("abs", v);
  if (v == Variant::Inplace) fail(TS_ERROR_TYPE, name, ": in-place abs is not supported for complex tensors");
  TensorRef self = a.tensor(0);
  TensorIterator it = IterConfig(a.call(), name.c_str())
                          .output(v, self, v == Variant::Out ? a.tensor(1) : TensorRef())
                          .input(self)
                          .output_dtype(sdk::real_dtype(self.dtype()))
                          .build();
  TS_DISPATCH_COMPLEX(it.common_dtype(), fail(TS_ERROR_TYPE, name, ": unsupported dtype"), {
    using R = typename scalar_t::value_type;
    it.run([](char** d, const int64_t* s, int64_t n) { map_row<R, scalar_t>(d, s, n, [](scalar_t z) { return std::abs(z); }); });
  });
  a.return_argument(it.result());
}

template <class Op, Variant V>
void keep_dtype_kernel(sdk::Args& a) {
  const std::string name = variant_name(Op::name, V);
  TensorRef self = a.tensor(0);
  TensorRef out = V == Variant::Out ? a.tensor(1) : TensorRef();
  if constexpr (std::is_same_v<Op, BitwiseNot>)
    if (sdk::is_floating(self.dtype()))
      fail(TS_ERROR_TYPE, name, ": bitwise_not is only supported for integer and boolean tensors, got ",
           sdk::dtype_name(self.dtype()));
  if (self.dtype() == TS_BOOL && !Op::allow_bool)
    fail(TS_ERROR_TYPE, name, ": expected a numeric tensor, got bool",
         std::string_view(Op::name) == "neg" ? " (to invert a mask, use logical_not)" : "");
  if constexpr (std::is_same_v<Op, Abs>)
    if (sdk::is_complex(self.dtype())) return complex_abs(a, V);
  if constexpr (std::is_same_v<Op, Sign>)
    if (sdk::is_complex(self.dtype()))
      fail(TS_ERROR_TYPE, name, ": Unlike NumPy, sign is not intended to support complex numbers; use sgn instead");
  TensorIterator it = IterConfig(a.call(), name.c_str()).output(V, self, out).input(self).build();
  if (ran_as_complex<Op>(name, it)) return a.return_argument(it.result());
  TS_DISPATCH_ALL(it.common_dtype(), fail(TS_ERROR_TYPE, name, ": unsupported dtype"), run_unary<Op, scalar_t>(it));
  a.return_argument(it.result());
}

template <class Op>
void register_float(sdk::Registrar& reg, ts_dispatch_key key) {
  const std::string n = Op::name;
  reg.kernel(n.c_str(), key, float_kernel<Op, Variant::Functional>);
  reg.kernel((n + "_").c_str(), key, float_kernel<Op, Variant::Inplace>);
  reg.kernel((n + ".out").c_str(), key, float_kernel<Op, Variant::Out>);
}

template <class Op>
void register_keep_dtype(sdk::Registrar& reg, ts_dispatch_key key) {
  const std::string n = Op::name;
  reg.kernel(n.c_str(), key, keep_dtype_kernel<Op, Variant::Functional>);
  reg.kernel((n + "_").c_str(), key, keep_dtype_kernel<Op, Variant::Inplace>);
  reg.kernel((n + ".out").c_str(), key, keep_dtype_kernel<Op, Variant::Out>);
}

}  // namespace

void register_unary_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  simd::select_isa();  // once, at plugin load: the vector kernels every element-wise op uses
  register_float<Exp>(reg, key);
  register_float<Log>(reg, key);
  register_float<Log1p>(reg, key);
  register_float<Sqrt>(reg, key);
  register_float<Rsqrt>(reg, key);
  register_float<Sin>(reg, key);
  register_float<Cos>(reg, key);
  register_float<Tanh>(reg, key);
  register_float<Sigmoid>(reg, key);
  register_float<Erf>(reg, key);
  register_float<Exp2>(reg, key);
  register_float<Expm1>(reg, key);
  register_float<Log2>(reg, key);
  register_float<Log10>(reg, key);
  register_float<Tan>(reg, key);
  register_float<Asin>(reg, key);
  register_float<Acos>(reg, key);
  register_float<Atan>(reg, key);
  register_float<Sinh>(reg, key);
  register_float<Cosh>(reg, key);
  register_float<Asinh>(reg, key);
  register_float<Acosh>(reg, key);
  register_float<Atanh>(reg, key);
  register_float<Erfc>(reg, key);
  register_float<Erfinv>(reg, key);
  register_float<Lgamma>(reg, key);
  register_float<Digamma>(reg, key);
  register_float<Reciprocal>(reg, key);
  register_keep_dtype<Floor>(reg, key);
  register_keep_dtype<Ceil>(reg, key);
  register_keep_dtype<Trunc>(reg, key);
  register_keep_dtype<Round>(reg, key);
  register_keep_dtype<BitwiseNot>(reg, key);
  reg.kernel("neg", key, keep_dtype_kernel<Neg, Variant::Functional>);
  reg.kernel("neg_", key, keep_dtype_kernel<Neg, Variant::Inplace>);
  reg.kernel("neg.out", key, keep_dtype_kernel<Neg, Variant::Out>);
  reg.kernel("abs", key, keep_dtype_kernel<Abs, Variant::Functional>);
  reg.kernel("abs_", key, keep_dtype_kernel<Abs, Variant::Inplace>);
  reg.kernel("abs.out", key, keep_dtype_kernel<Abs, Variant::Out>);
  reg.kernel("sign", key, keep_dtype_kernel<Sign, Variant::Functional>);
  reg.kernel("sign_", key, keep_dtype_kernel<Sign, Variant::Inplace>);
  reg.kernel("sign.out", key, keep_dtype_kernel<Sign, Variant::Out>);
  reg.kernel("relu", key, keep_dtype_kernel<Relu, Variant::Functional>);
  reg.kernel("relu_", key, keep_dtype_kernel<Relu, Variant::Inplace>);
}

}  // namespace tessera::cpu

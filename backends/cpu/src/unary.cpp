// Element-wise unary ops. Floating ops (exp, log, ...) compute integer and bool inputs in
// float32 as PyTorch does; neg/abs/sign/relu keep the input's dtype. 16-bit floats compute in
// float. One loop per op and compute dtype; contiguous float32 rows go through the vectorised
// kernels of simd_table.h (AVX2 / AVX-512, chosen at load time).
#include "kernels.h"
#include "simd_table.h"
#include "tensor_iterator.h"

#include <cmath>

namespace tessera::cpu {
namespace {

using sdk::fail;
using sdk::opmath_t;

// ---- floating ops: each maps M (float or double) to M.
struct Exp {
  static constexpr simd::Unary vec = simd::Unary::Exp;
  static constexpr const char* name = "exp";
  template <class M> static M f(M x) { return std::exp(x); }
};
struct Log {
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
  static constexpr simd::Unary vec = simd::Unary::Sqrt;
  static constexpr const char* name = "sqrt";
  template <class M> static M f(M x) { return std::sqrt(x); }
};
struct Rsqrt {
  static constexpr simd::Unary vec = simd::Unary::Rsqrt;
  static constexpr const char* name = "rsqrt";
  template <class M> static M f(M x) { return M(1) / std::sqrt(x); }
};
struct Sin {
  static constexpr simd::Unary vec = simd::Unary::Sin;
  static constexpr const char* name = "sin";
  template <class M> static M f(M x) { return std::sin(x); }
};
struct Cos {
  static constexpr simd::Unary vec = simd::Unary::Cos;
  static constexpr const char* name = "cos";
  template <class M> static M f(M x) { return std::cos(x); }
};
struct Tanh {
  static constexpr simd::Unary vec = simd::Unary::Tanh;
  static constexpr const char* name = "tanh";
  template <class M> static M f(M x) { return std::tanh(x); }
};
struct Sigmoid {
  static constexpr simd::Unary vec = simd::Unary::Sigmoid;
  static constexpr const char* name = "sigmoid";
  template <class M> static M f(M x) { return M(1) / (M(1) + std::exp(-x)); }
};
struct Erf {
  static constexpr simd::Unary vec = simd::Unary::Erf;
  static constexpr const char* name = "erf";
  template <class M> static M f(M x) { return std::erf(x); }
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

template <class Op, Variant V>
void float_kernel(sdk::Args& a) {
  const std::string name = variant_name(Op::name, V);
  TensorRef self = a.tensor(0);
  TensorRef out = V == Variant::Out ? a.tensor(1) : TensorRef();
  TensorIterator it =
      IterConfig(a.call(), name.c_str()).output(V, self, out).input(self).promote_integers_to_float().build();
  TS_DISPATCH_FLOAT(it.common_dtype(), fail(TS_ERROR_TYPE, name, ": unsupported dtype"), run_unary<Op, scalar_t>(it));
  a.return_argument(it.result());
}

template <class Op, Variant V>
void keep_dtype_kernel(sdk::Args& a) {
  const std::string name = variant_name(Op::name, V);
  TensorRef self = a.tensor(0);
  TensorRef out = V == Variant::Out ? a.tensor(1) : TensorRef();
  if (self.dtype() == TS_BOOL && !Op::allow_bool)
    fail(TS_ERROR_TYPE, name, ": expected a numeric tensor, got bool",
         std::string_view(Op::name) == "neg" ? " (to invert a mask, use logical_not)" : "");
  TensorIterator it = IterConfig(a.call(), name.c_str()).output(V, self, out).input(self).build();
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

// Element-wise arithmetic: add, sub, mul, div (true, trunc, floor), floor_divide, pow, maximum,
// minimum, with their Scalar overloads and in-place / out= variants. Operands are promoted and
// cast by the TensorIterator, so each op has one loop per compute dtype. float32 add, sub, mul
// and div run contiguous rows (and rows against a broadcast scalar) through the vector kernels.
#include "kernels.h"
#include "simd_table.h"
#include "tensor_iterator.h"

#include <atomic>
#include <cmath>

namespace tessera::cpu {

void register_compare_kernels(sdk::Registrar& reg, ts_dispatch_key key);  // compare.cpp

namespace {

using sdk::fail;
using sdk::opmath_t;

// The second operand of a binary op: a tensor, or a Python number for the Scalar overloads.
struct Other {
  TensorRef tensor;
  std::optional<ScalarArg> scalar;
  int32_t dtype() const { return scalar ? scalar_dtype(*scalar) : tensor.dtype(); }
};
Other read_other(sdk::Args& a, int i, bool scalar) {
  if (scalar) return {TensorRef(), a.scalar(i)};
  return {a.tensor(i), std::nullopt};
}

// The iterator of `self op other` for a kernel variant; `out_index` is where out= sits.
TensorIterator binary_iter(sdk::Args& a, const std::string& name, Variant v, const TensorRef& self, const Other& other,
                           int out_index, bool int_to_float = false) {
  IterConfig cfg(a.call(), name.c_str());
  cfg.output(v, self, v == Variant::Out ? a.tensor(out_index) : TensorRef()).input(self);
  if (other.scalar) cfg.input(*other.scalar);
  else cfg.input(other.tensor);
  if (int_to_float) cfg.promote_integers_to_float();
  return cfg.build();
}

// Runs f(x, y) -> scalar_t over a binary iterator whose common dtype is scalar_t.
template <class T, class F>
void run_binary(TensorIterator& it, F f) {
  it.run([&f](char** d, const int64_t* s, int64_t n) { binary_row<T, T, T>(d, s, n, f); });
}

// float32 through the vector kernels: contiguous rows, or a contiguous row against a broadcast
// scalar; other layouts use `f` row by row. The vector ops are IEEE-exact (+ - * /), so every
// path gives the same bits.
template <class F>
void run_binary_f32(TensorIterator& it, simd::Binary op, F f) {
  const simd::Table& t = simd::vec();
  const simd::BinaryVV vv = t.binary_vv[int(op)];
  const simd::BinaryVS vs = t.binary_vs[int(op)];
  const simd::BinarySV sv = t.binary_sv[int(op)];
  it.run([&](char** d, const int64_t* s, int64_t n) {
    constexpr int64_t k = sizeof(float);
    if (s[0] == k) {
      float* o = reinterpret_cast<float*>(d[0]);
      const float* x = reinterpret_cast<const float*>(d[1]);
      const float* y = reinterpret_cast<const float*>(d[2]);
      if (s[1] == k && s[2] == k) return vv(o, x, y, n);
      if (s[1] == k && s[2] == 0) return vs(o, x, *y, n);
      if (s[1] == 0 && s[2] == k) return sv(o, *x, y, n);
    }
    binary_row<float, float, float>(d, s, n, f);
  });
}

// Small-tensor fast path for functional ops on two contiguous tensors of one shape and dtype:
// below the parallel grain the iterator's set-up costs more than the arithmetic, so this
// skips it. `f(x, y)` is called in opmath; false (and nothing allocated) when it does not apply.
template <class F>
bool try_small_same_layout(sdk::Args& a, Variant v, const TensorRef& x, const Other& y_other, simd::Binary vop, F f) {
  if (v != Variant::Functional || y_other.scalar) return false;
  const TensorRef& y = y_other.tensor;
  if (x.dtype() != y.dtype() || x.dim() != y.dim() || x.numel() > kGrainSize) return false;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (x.size(d) != y.size(d)) return false;
  if (!x.is_contiguous() || !y.is_contiguous()) return false;
  auto run = [&](auto tag) {
    using T = decltype(tag);
    TensorRef out = sdk::empty(a.call(), x.sizes(), x.dtype(), x.device());
    const T* px = x.data<T>();
    const T* py = y.data<T>();
    T* po = out.data<T>();
    const int64_t n = x.numel();
    // A handful of floats is quicker inline than through the table (an indirect call, a tail).
    bool done = false;
    if constexpr (std::is_same_v<T, float>) {
      if (n >= 64) {
        simd::vec().binary_vv[int(vop)](po, px, py, n);
        done = true;
      }
    }
    if (!done)
      for (int64_t i = 0; i < n; ++i) po[i] = T(f(px[i], py[i]));
    a.return_tensor(std::move(out));
    return true;
  };
  switch (x.dtype()) {
    case TS_FLOAT32: return run(float{});
    case TS_FLOAT64: return run(double{});
    case TS_INT64: return run(int64_t{});
    case TS_INT32: return run(int32_t{});
    default: return false;
  }
}

// True when an integral tensor holds a zero (integer division by zero must raise, not trap).
template <class T>
bool any_zero(const TensorRef& t) {
  LoopGeometry g(1, t.shape_vector());
  g.set_operand(0, t.sizes(), t.strides(), t.itemsize());
  g.coalesce();
  std::atomic<bool> found{false};
  char* base[1] = {static_cast<char*>(t.data())};
  g.run(base, [&found](char** d, const int64_t* s, int64_t n) {
    bool zero = false;
    for (int64_t i = 0; i < n; ++i) zero |= *reinterpret_cast<const T*>(d[0] + i * s[0]) == T(0);
    if (zero) found.store(true, std::memory_order_relaxed);
  });
  return found.load();
}
void check_no_integer_zero(const TensorIterator& it, const std::string& name) {
  if (it.numel() == 0) return;  // no element is divided
  bool zero = false;
  TS_DISPATCH_ALL(it.common_dtype(), return, {
    if constexpr (std::is_integral_v<scalar_t>) zero = any_zero<scalar_t>(it.operand(2));
  });
  if (zero) fail(TS_ERROR_VALUE, name, ": ZeroDivisionError (integer division by zero)");
}

// ---- add / sub: self + alpha * other (sub negates alpha).
void add_sub(sdk::Args& a, Variant v, bool scalar, bool subtract) {
  const std::string name = variant_name(subtract ? "sub" : "add", v);
  TensorRef self = a.tensor(0);
  const Other other = read_other(a, 1, scalar);
  ScalarArg alpha = a.is_none(2) ? ScalarArg{ScalarArg::Int, 1, 0} : a.scalar(2);
  if (subtract && (self.dtype() == TS_BOOL || other.dtype() == TS_BOOL))
    fail(TS_ERROR_TYPE, name, ": subtraction with a bool tensor is not supported, got ",
         sdk::dtype_name(self.dtype()), " and ", sdk::dtype_name(other.dtype()),
         " (use logical_xor, or logical_not to invert a mask)");
  if (alpha.kind != ScalarArg::Double && alpha.i == 1 &&
      try_small_same_layout(a, v, self, other, subtract ? simd::Binary::Sub : simd::Binary::Add,
                            [subtract](auto x, auto y) { return subtract ? x - y : x + y; }))
    return;
  TensorIterator it = binary_iter(a, name, v, self, other, 3);
  if (alpha.kind == ScalarArg::Double && !sdk::is_inexact(it.common_dtype()))
    fail(TS_ERROR_TYPE, name, ": for integral input tensors, argument alpha must not be a floating point number, got ",
         alpha.d);
  if (subtract) {
    alpha.i = -alpha.i;
    alpha.d = -alpha.d;
  }
  TS_DISPATCH_ALL_AND_COMPLEX(it.common_dtype(), fail(TS_ERROR_TYPE, name, ": unsupported dtype"), {
    using M = opmath_t<scalar_t>;
    const M al = scalar_to<M>(alpha);
    const auto f = [al](scalar_t x, scalar_t y) { return scalar_t(M(x) + al * M(y)); };
    // x + 1 * y and x + (-1) * y are exactly x + y and x - y.
    if constexpr (std::is_same_v<scalar_t, float>) {
      if (al == M(1) || al == M(-1)) run_binary_f32(it, al == M(1) ? simd::Binary::Add : simd::Binary::Sub, f);
      else run_binary<scalar_t>(it, f);
    } else {
      run_binary<scalar_t>(it, f);
    }
  });
  a.return_argument(it.result());
}

template <class T> T mul_value(T x, T y) {
  using M = opmath_t<T>;
  if constexpr (std::is_same_v<T, bool>) return x && y;
  else return T(M(x) * M(y));
}

void mul(sdk::Args& a, Variant v, bool scalar) {
  const std::string name = variant_name("mul", v);
  const Other other = read_other(a, 1, scalar);
  if (try_small_same_layout(a, v, a.tensor(0), other, simd::Binary::Mul, [](auto x, auto y) { return x * y; })) return;
  TensorIterator it = binary_iter(a, name, v, a.tensor(0), other, 2);
  const auto f = [](auto x, auto y) { return mul_value(x, y); };
  if (it.common_dtype() == TS_FLOAT32) run_binary_f32(it, simd::Binary::Mul, f);
  else TS_DISPATCH_ALL_AND_COMPLEX(it.common_dtype(), fail(TS_ERROR_TYPE, name, ": unsupported dtype"),
                                   run_binary<scalar_t>(it, f));
  a.return_argument(it.result());
}

// ---- division
// Python's floor division of floats, exact where floor(x / y) would round wrongly.
template <class M> M floor_div_float(M x, M y) {
  if (y == M(0)) return x / y;
  const M mod = std::fmod(x, y);
  M div = (x - mod) / y;
  if (mod != M(0) && ((y < M(0)) != (mod < M(0)))) div -= M(1);
  if (div == M(0)) return std::copysign(M(0), x / y);
  M floored = std::floor(div);
  if (div - floored > M(0.5)) floored += M(1);
  return floored;
}
// Integer quotient rounded toward zero or down; the divisor is known nonzero. -1 is special:
// the most negative value divided by -1 overflows (and traps on x86).
template <class T> T int_div(T x, T y, bool floor) {
  if constexpr (std::is_signed_v<T>) {
    if (y == T(-1)) return T(std::make_unsigned_t<T>(0) - std::make_unsigned_t<T>(x));
  }
  T q = T(x / y);
  if constexpr (std::is_signed_v<T>)
    if (floor && T(x % y) != T(0) && ((x < T(0)) != (y < T(0)))) q = T(q - 1);
  return q;
}

enum class Rounding { None, Trunc, Floor };

void true_divide(sdk::Args& a, Variant v, bool scalar, int out_index) {
  const std::string name = variant_name("div", v);
  TensorIterator it = binary_iter(a, name, v, a.tensor(0), read_other(a, 1, scalar), out_index, true);
  TS_DISPATCH_FLOAT_AND_COMPLEX(it.common_dtype(), fail(TS_ERROR_TYPE, name, ": unsupported dtype"), {
    using M = opmath_t<scalar_t>;
    const auto f = [](scalar_t x, scalar_t y) { return scalar_t(M(x) / M(y)); };
    if constexpr (std::is_same_v<scalar_t, float>) run_binary_f32(it, simd::Binary::Div, f);
    else run_binary<scalar_t>(it, f);
  });
  a.return_argument(it.result());
}

template <class T> T rounded_div(T x, T y, Rounding r) {
  using M = opmath_t<T>;
  if constexpr (std::is_integral_v<T>) return int_div(x, y, r == Rounding::Floor);
  else if (r == Rounding::Trunc) return T(std::trunc(M(x) / M(y)));
  else return T(floor_div_float(M(x), M(y)));
}

void rounding_divide(sdk::Args& a, Variant v, Rounding r, const char* base, int out_index) {
  const std::string name = variant_name(base, v);
  TensorRef self = a.tensor(0);
  const Other other = read_other(a, 1, false);
  if (self.dtype() == TS_BOOL && other.dtype() == TS_BOOL)
    fail(TS_ERROR_TYPE, name, ": expected numeric tensors, got bool and bool");
  TensorIterator it = binary_iter(a, name, v, self, other, out_index);
  if (sdk::is_integral(it.common_dtype(), false)) check_no_integer_zero(it, name);
  if (sdk::is_complex(it.common_dtype()))
    fail(TS_ERROR_TYPE, name, ": rounding division is not supported for complex tensors, got ",
         sdk::dtype_name(it.common_dtype()));
  TS_DISPATCH_NUMERIC(it.common_dtype(), fail(TS_ERROR_TYPE, name, ": unsupported dtype"), {
    if (r == Rounding::Floor)
      run_binary<scalar_t>(it, [](scalar_t x, scalar_t y) { return rounded_div(x, y, Rounding::Floor); });
    else
      run_binary<scalar_t>(it, [](scalar_t x, scalar_t y) { return rounded_div(x, y, Rounding::Trunc); });
  });
  a.return_argument(it.result());
}

// div.Tensor_mode(Tensor self, Tensor other, *, str? rounding_mode)
void div_mode(sdk::Args& a, Variant v) {
  const std::optional<std::string_view> mode = a.optional_str(2);
  if (!mode) return true_divide(a, v, false, 3);
  if (*mode == "trunc") return rounding_divide(a, v, Rounding::Trunc, "div", 3);
  if (*mode == "floor") return rounding_divide(a, v, Rounding::Floor, "div", 3);
  fail(TS_ERROR_VALUE, variant_name("div", v), ": expected rounding_mode to be one of None, 'trunc' or 'floor', got '",
       *mode, "'");
}

// ---- pow
template <class T> T pow_value(T x, T y) {
  if constexpr (std::is_integral_v<T>) {
    if constexpr (std::is_signed_v<T>) {
      if (y < T(0)) return x == T(1) ? T(1) : x == T(-1) ? T((y % 2) ? -1 : 1) : T(0);
    }
    // Square and multiply in unsigned arithmetic: overflow wraps instead of being UB.
    using U = std::make_unsigned_t<std::conditional_t<sizeof(T) < sizeof(int), int, T>>;
    U result = 1, base = U(x);
    for (auto e = std::make_unsigned_t<T>(y); e; e >>= 1) {
      if (e & 1) result *= base;
      base *= base;
    }
    return T(result);
  } else {
    using M = opmath_t<T>;
    return T(std::pow(M(x), M(y)));
  }
}

// A floating tensor to a scalar power that is a product or a square root, as PyTorch computes it
// (x ** 2 through std::pow took 27.6 ms on 6.4M floats, torch's x * x 1.3 ms). False for
// other exponents (the caller uses pow).
template <class T> bool run_special_power(TensorIterator& it, double e) {
  using M = opmath_t<T>;
  if (e == 2) run_binary<T>(it, [](T x, T) { const M m = M(x); return T(m * m); });
  else if (e == 3) run_binary<T>(it, [](T x, T) { const M m = M(x); return T(m * m * m); });
  else if (e == 0.5) run_binary<T>(it, [](T x, T) { return T(std::sqrt(M(x))); });
  else if (e == -0.5) run_binary<T>(it, [](T x, T) { return T(M(1) / std::sqrt(M(x))); });
  else if (e == -1) run_binary<T>(it, [](T x, T) { return T(M(1) / M(x)); });
  else if (e == -2) run_binary<T>(it, [](T x, T) { const M m = M(x); return T(M(1) / (m * m)); });
  else return false;
  return true;
}

void pow_kernel(sdk::Args& a, Variant v, bool scalar) {
  const std::string name = variant_name("pow", v);
  TensorRef self = a.tensor(0);
  const Other exponent = read_other(a, 1, scalar);
  TensorIterator it = binary_iter(a, name, v, self, exponent, 2);
  if (it.common_dtype() == TS_BOOL) fail(TS_ERROR_TYPE, name, ": expected numeric tensors, got bool");
  if (scalar && sdk::is_integral(it.common_dtype(), false) && exponent.scalar->kind == ScalarArg::Int &&
      exponent.scalar->i < 0)
    fail(TS_ERROR_VALUE, name, ": integers to negative integer powers are not allowed, got exponent ",
         exponent.scalar->i);
  bool done = false;  // a product or square root did it
  if (scalar && sdk::is_floating(it.common_dtype()))
    TS_DISPATCH_FLOAT(it.common_dtype(), , done = run_special_power<scalar_t>(it, exponent.scalar->to_double()));
  if (done) return a.return_argument(it.result());
  if (sdk::is_complex(it.common_dtype())) {
    TS_DISPATCH_COMPLEX(it.common_dtype(), ,
                        run_binary<scalar_t>(it, [](scalar_t x, scalar_t y) { return scalar_t(std::pow(x, y)); }));
  } else {
    TS_DISPATCH_NUMERIC(it.common_dtype(), fail(TS_ERROR_TYPE, name, ": unsupported dtype"),
                        run_binary<scalar_t>(it, [](scalar_t x, scalar_t y) { return pow_value(x, y); }));
  }
  a.return_argument(it.result());
}

// ---- maximum / minimum: NaN propagates.
void extremum(sdk::Args& a, Variant v, bool is_max) {
  const std::string name = variant_name(is_max ? "maximum" : "minimum", v);
  TensorIterator it = binary_iter(a, name, v, a.tensor(0), read_other(a, 1, false), 2);
  if (sdk::is_complex(it.common_dtype()))
    fail(TS_ERROR_TYPE, name, ": complex numbers are not ordered, got ", sdk::dtype_name(it.common_dtype()));
  TS_DISPATCH_ALL(it.common_dtype(), fail(TS_ERROR_TYPE, name, ": unsupported dtype"), {
    using M = opmath_t<scalar_t>;
    if (is_max)
      run_binary<scalar_t>(it, [](scalar_t x, scalar_t y) { return (M(x) > M(y) || M(x) != M(x)) ? x : y; });
    else
      run_binary<scalar_t>(it, [](scalar_t x, scalar_t y) { return (M(x) < M(y) || M(x) != M(x)) ? x : y; });
  });
  a.return_argument(it.result());
}

// Kernel entry points: one per (op, overload, variant).
template <Variant V, bool S, bool Sub> void add_sub_k(sdk::Args& a) { add_sub(a, V, S, Sub); }
template <Variant V, bool S> void mul_k(sdk::Args& a) { mul(a, V, S); }
template <Variant V, bool S> void div_k(sdk::Args& a) { true_divide(a, V, S, 2); }
template <Variant V> void div_mode_k(sdk::Args& a) { div_mode(a, V); }
template <Variant V> void floor_divide_k(sdk::Args& a) { rounding_divide(a, V, Rounding::Floor, "floor_divide", 2); }
template <Variant V, bool S> void pow_k(sdk::Args& a) { pow_kernel(a, V, S); }
template <Variant V, bool Max> void extremum_k(sdk::Args& a) { extremum(a, V, Max); }

constexpr Variant F = Variant::Functional, I = Variant::Inplace, O = Variant::Out;

}  // namespace

void register_binary_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("add.Tensor", key, add_sub_k<F, false, false>);
  reg.kernel("add_.Tensor", key, add_sub_k<I, false, false>);
  reg.kernel("add.out", key, add_sub_k<O, false, false>);
  reg.kernel("add.Scalar", key, add_sub_k<F, true, false>);
  reg.kernel("add_.Scalar", key, add_sub_k<I, true, false>);
  reg.kernel("sub.Tensor", key, add_sub_k<F, false, true>);
  reg.kernel("sub_.Tensor", key, add_sub_k<I, false, true>);
  reg.kernel("sub.out", key, add_sub_k<O, false, true>);
  reg.kernel("sub.Scalar", key, add_sub_k<F, true, true>);
  reg.kernel("sub_.Scalar", key, add_sub_k<I, true, true>);
  reg.kernel("mul.Tensor", key, mul_k<F, false>);
  reg.kernel("mul_.Tensor", key, mul_k<I, false>);
  reg.kernel("mul.out", key, mul_k<O, false>);
  reg.kernel("mul.Scalar", key, mul_k<F, true>);
  reg.kernel("mul_.Scalar", key, mul_k<I, true>);
  reg.kernel("div.Tensor", key, div_k<F, false>);
  reg.kernel("div_.Tensor", key, div_k<I, false>);
  reg.kernel("div.out", key, div_k<O, false>);
  reg.kernel("div.Scalar", key, div_k<F, true>);
  reg.kernel("div_.Scalar", key, div_k<I, true>);
  reg.kernel("div.Tensor_mode", key, div_mode_k<F>);
  reg.kernel("div_.Tensor_mode", key, div_mode_k<I>);
  reg.kernel("div.Tensor_mode_out", key, div_mode_k<O>);
  reg.kernel("floor_divide", key, floor_divide_k<F>);
  reg.kernel("floor_divide_", key, floor_divide_k<I>);
  reg.kernel("floor_divide.out", key, floor_divide_k<O>);
  reg.kernel("pow.Tensor_Tensor", key, pow_k<F, false>);
  reg.kernel("pow_.Tensor_Tensor", key, pow_k<I, false>);
  reg.kernel("pow.Tensor_Tensor_out", key, pow_k<O, false>);
  reg.kernel("pow.Tensor_Scalar", key, pow_k<F, true>);
  reg.kernel("pow_.Tensor_Scalar", key, pow_k<I, true>);
  reg.kernel("pow.Tensor_Scalar_out", key, pow_k<O, true>);
  reg.kernel("maximum", key, extremum_k<F, true>);
  reg.kernel("maximum.out", key, extremum_k<O, true>);
  reg.kernel("minimum", key, extremum_k<F, false>);
  reg.kernel("minimum.out", key, extremum_k<O, false>);
  register_compare_kernels(reg, key);
}

}  // namespace tessera::cpu

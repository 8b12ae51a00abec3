// More element-wise operators on the engine's grid-stride loop (map.cuh): rounding division,
// pow, maximum/minimum, logical and/or/not, atan2, copysign, fmod/remainder, the bitwise ops,
// sign, the floating unary ops (digamma included), clamp, masked_fill. The formulas are the CPU
// plugin's (binary.cpp, binary_math.cpp, compare.cpp, unary.cpp, special_functions.h). One
// instance per (family, compute type, index width); the op is a runtime switch, as in elementwise.cu.
#include "map.cuh"
#include "ops_launch.h"

#include <cmath>
#include <type_traits>

namespace tessera::gpu {
namespace {

// Python's floor division of floats (as the CPU plugin): exact where floor(x / y) would round wrongly.
template <class C> GPU_D C floor_div_float(C x, C y) {
  if (y == C(0)) return x / y;
  const C mod = fmod(x, y);
  C div = (x - mod) / y;
  if (mod != C(0) && ((y < C(0)) != (mod < C(0)))) div -= C(1);
  if (div == C(0)) return copysign(C(0), x / y);
  C floored = floor(div);
  if (div - floored > C(0.5)) floored += C(1);
  return floored;
}

// Integer division rounded toward zero or down; y != 0 (checked by the host). x / -1 wraps.
GPU_D int64_t int_div(int64_t x, int64_t y, bool floor_mode) {
  if (y == -1) return int64_t(uint64_t(0) - uint64_t(x));
  int64_t q = x / y;
  if (floor_mode && x % y != 0 && ((x < 0) != (y < 0))) --q;
  return q;
}

// Integer power by squaring in unsigned arithmetic (overflow wraps); negative exponents as PyTorch.
GPU_D int64_t int_pow(int64_t x, int64_t y) {
  if (y < 0) return x == 1 ? 1 : x == -1 ? ((y % 2) ? -1 : 1) : 0;
  uint64_t result = 1, base = uint64_t(x);
  for (uint64_t e = uint64_t(y); e; e >>= 1) {
    if (e & 1) result *= base;
    base *= base;
  }
  return int64_t(result);
}

// C's fmod sign (the dividend's), or Python's (the divisor's); integer y != 0 (checked by the
// host). x % -1 is 0 without computing it (INT64_MIN % -1 traps).
template <class C> GPU_D C modulo(C x, C y, bool python) {
  C r;
  if constexpr (std::is_floating_point_v<C>) r = fmod(x, y);
  else r = y == C(-1) ? C(0) : C(x % y);
  if (python && r != C(0) && ((r < C(0)) != (y < C(0)))) r = r + y;
  return r;
}

// Shifts by a negative amount or by the width or more give 0 (right shifts of negatives: -1), as
// the CPU plugin; narrower dtypes are truncated on store, so only `bits` differs per dtype.
GPU_D int64_t shift(int64_t x, int64_t n, int32_t bits, bool left) {
  if (n < 0 || n >= bits) return left ? 0 : (x < 0 ? -1 : 0);
  return left ? int64_t(uint64_t(x) << n) : x >> n;
}

template <class C> struct BinaryMoreF {
  BinaryMoreOp op;
  int32_t bits;
  template <class I> GPU_D void operator()(const Loop& L, const I (&off)[3]) const {
    char* out = at(L.ops[0], off[0]);
    const int32_t od = L.ops[0].dtype;
    if (op == BinaryMoreOp::And || op == BinaryMoreOp::Or) {  // nonzero is true, NaN included
      const bool a = load<double>(at(L.ops[1], off[1]), L.ops[1].dtype) != 0;
      const bool b = load<double>(at(L.ops[2], off[2]), L.ops[2].dtype) != 0;
      store<int64_t>(out, od, op == BinaryMoreOp::And ? (a && b) : (a || b));
      return;
    }
    const C a = load<C>(at(L.ops[1], off[1]), L.ops[1].dtype);
    C b;
    if (L.ops[2].data) b = load<C>(at(L.ops[2], off[2]), L.ops[2].dtype);
    else if constexpr (std::is_floating_point_v<C>) b = C(L.scalar_d);
    else b = C(L.scalar_i);
    C r;
    switch (op) {
      case BinaryMoreOp::DivTrunc:
        if constexpr (std::is_floating_point_v<C>) r = trunc(a / b); else r = int_div(a, b, false);
        break;
      case BinaryMoreOp::DivFloor:
        if constexpr (std::is_floating_point_v<C>) r = floor_div_float(a, b); else r = int_div(a, b, true);
        break;
      case BinaryMoreOp::Pow:
        if constexpr (std::is_floating_point_v<C>) r = pow(a, b); else r = int_pow(a, b);
        break;
      case BinaryMoreOp::Maximum: r = (a > b || a != a) ? a : b; break;  // NaN propagates
      case BinaryMoreOp::Minimum: r = (a < b || a != a) ? a : b; break;
      case BinaryMoreOp::Atan2:
        if constexpr (std::is_floating_point_v<C>) r = atan2(a, b); else r = a;  // integers are promoted first
        break;
      case BinaryMoreOp::Copysign:
        if constexpr (std::is_floating_point_v<C>) r = copysign(a, b); else r = a;
        break;
      case BinaryMoreOp::Fmod: r = modulo(a, b, false); break;
      case BinaryMoreOp::Remainder: r = modulo(a, b, true); break;
      default:
        if constexpr (std::is_integral_v<C>) {  // floating dtypes are refused by the host
          switch (op) {
            case BinaryMoreOp::BitAnd: r = a & b; break;
            case BinaryMoreOp::BitOr: r = a | b; break;
            case BinaryMoreOp::BitXor: r = a ^ b; break;
            default: r = shift(a, b, bits, op == BinaryMoreOp::ShiftLeft); break;
          }
        } else {
          r = a;
        }
        break;
    }
    store<C>(out, od, r);
  }
};

// digamma as the CPU plugin (in double): the recurrence psi(x) = psi(x + 1) - 1/x up to x >= 10,
// then the asymptotic series; reflection for negative x; NaN at negative integers, -inf at +0
// (+inf at -0).
GPU_D double digamma(double x) {
  if (x == 0) return signbit(x) ? INFINITY : -INFINITY;
  double result = 0;
  if (x < 0) {
    if (x == floor(x)) return NAN;
    const double pi = 3.14159265358979323846;
    result = -pi / tan(pi * x);  // psi(x) = psi(1 - x) - pi / tan(pi x)
    x = 1 - x;
  }
  while (x < 10) {
    result -= 1 / x;
    x += 1;
  }
  const double f = 1 / (x * x);
  const double series = f * (1.0 / 12 - f * (1.0 / 120 - f * (1.0 / 252 - f * (1.0 / 240 - f * (1.0 / 132)))));
  return result + log(x) - 0.5 / x - series;
}

// The floating unary ops of UnaryMoreOp (the device's libm), rounding half to even for Round.
template <class C> GPU_D C floating_unary(UnaryMoreOp op, C x) {
  switch (op) {
    case UnaryMoreOp::Log1p: return log1p(x);
    case UnaryMoreOp::Erf: return erf(x);
    case UnaryMoreOp::Exp2: return exp2(x);
    case UnaryMoreOp::Expm1: return expm1(x);
    case UnaryMoreOp::Log2: return log2(x);
    case UnaryMoreOp::Log10: return log10(x);
    case UnaryMoreOp::Tan: return tan(x);
    case UnaryMoreOp::Asin: return asin(x);
    case UnaryMoreOp::Acos: return acos(x);
    case UnaryMoreOp::Atan: return atan(x);
    case UnaryMoreOp::Sinh: return sinh(x);
    case UnaryMoreOp::Cosh: return cosh(x);
    case UnaryMoreOp::Asinh: return asinh(x);
    case UnaryMoreOp::Acosh: return acosh(x);
    case UnaryMoreOp::Atanh: return atanh(x);
    case UnaryMoreOp::Erfc: return erfc(x);
    case UnaryMoreOp::Erfinv: return erfinv(x);
    case UnaryMoreOp::Lgamma: return lgamma(x);
    case UnaryMoreOp::Digamma: return C(digamma(double(x)));
    case UnaryMoreOp::Reciprocal: return C(1) / x;
    case UnaryMoreOp::Floor: return floor(x);
    case UnaryMoreOp::Ceil: return ceil(x);
    case UnaryMoreOp::Trunc: return trunc(x);
    default: return rint(x);  // Round
  }
}

template <class C> struct UnaryMoreF {
  UnaryMoreOp op;
  template <class I> GPU_D void operator()(const Loop& L, const I (&off)[2]) const {
    char* out = at(L.ops[0], off[0]);
    const int32_t od = L.ops[0].dtype;
    if (op == UnaryMoreOp::Not) {
      store<int64_t>(out, od, load<double>(at(L.ops[1], off[1]), L.ops[1].dtype) == 0);
      return;
    }
    const C x = load<C>(at(L.ops[1], off[1]), L.ops[1].dtype);
    C r;
    switch (op) {
      case UnaryMoreOp::Sign: r = C(int(C(0) < x) - int(x < C(0))); break;  // NaN gives 0, as the CPU
      case UnaryMoreOp::BitNot:  // integers only (the host refuses floating dtypes)
        if constexpr (std::is_integral_v<C>) r = od == kBool ? C(x == 0) : C(~x); else r = x;
        break;
      default:
        if constexpr (std::is_floating_point_v<C>) r = floating_unary(op, x); else r = x;  // rounding keeps integers
        break;
    }
    store<C>(out, od, r);
  }
};

template <class C> struct ClampF {
  bool has_lo, has_hi;
  template <class I> GPU_D void operator()(const Loop& L, const I (&off)[2]) const {
    C y = load<C>(at(L.ops[1], off[1]), L.ops[1].dtype);
    const C lo = std::is_floating_point_v<C> ? C(L.scalar_d) : C(L.scalar_i);
    const C hi = std::is_floating_point_v<C> ? C(L.alpha_d) : C(L.alpha_i);
    if (has_lo && y < lo) y = lo;  // min first, then max: min > max gives max (PyTorch)
    if (has_hi && y > hi) y = hi;
    store<C>(at(L.ops[0], off[0]), L.ops[0].dtype, y);
  }
};

template <class C> struct MaskedFillF {
  template <class I> GPU_D void operator()(const Loop& L, const I (&off)[3]) const {
    const bool m = load<int64_t>(at(L.ops[2], off[2]), L.ops[2].dtype) != 0;
    const C v = m ? (std::is_floating_point_v<C> ? C(L.scalar_d) : C(L.scalar_i))
                  : load<C>(at(L.ops[1], off[1]), L.ops[1].dtype);
    store<C>(at(L.ops[0], off[0]), L.ops[0].dtype, v);
  }
};

template <template <class> class F, int N, class... A>
void by_compute(Compute c, const Loop& L, gpuStream_t s, const char* what, A... args) {
  switch (c) {
    case Compute::Float: return run_map<N>(L, s, F<float>{args...}, what);
    case Compute::Double: return run_map<N>(L, s, F<double>{args...}, what);
    case Compute::Int64: return run_map<N>(L, s, F<int64_t>{args...}, what);
  }
}
}  // namespace

void launch_binary_more(BinaryMoreOp op, Compute c, const Loop& L, gpuStream_t s, int32_t bits) {
  by_compute<BinaryMoreF, 3>(c, L, s, "a binary kernel", op, bits);
}
void launch_unary_more(UnaryMoreOp op, Compute c, const Loop& L, gpuStream_t s) {
  by_compute<UnaryMoreF, 2>(c, L, s, "a unary kernel", op);
}
void launch_clamp(Compute c, const Loop& L, bool has_lo, bool has_hi, gpuStream_t s) {
  by_compute<ClampF, 2>(c, L, s, "clamp", has_lo, has_hi);
}
void launch_masked_fill(Compute c, const Loop& L, gpuStream_t s) { by_compute<MaskedFillF, 3>(c, L, s, "masked_fill"); }

}  // namespace tessera::gpu

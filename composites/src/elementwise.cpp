// Element-wise composites: each a short formula over primitive element-wise operators.
#include "composite.h"

#include <cmath>
#include <limits>

namespace tessera::composites {
namespace {

constexpr double kPi = 3.14159265358979323846;

void frac(Args& a) {
  TensorRef x = a.tensor(0);
  a.return_tensor(ops::sub(x, ops::trunc(x)));
}

void square(Args& a) {
  TensorRef x = a.tensor(0);
  // bool squares to int64, as PyTorch's pow(x, 2)
  TensorRef v = x.dtype() == TS_BOOL ? ops::to(x, int32_t(TS_INT64)) : x;
  a.return_tensor(ops::mul(v, v));
}

void round_decimals(Args& a) {
  TensorRef x = a.tensor(0);
  int64_t decimals = a.to_int(1);
  if (!sdk::is_floating(x.dtype()) || decimals == 0) return a.return_tensor(ops::round(x));
  // PyTorch scales by 10^d (or divides by 10^-d), rounds half to even, and scales back.
  double scale = std::pow(10.0, double(std::abs(decimals)));
  if (decimals > 0) a.return_tensor(ops::div(ops::round(ops::mul(x, Scalar(scale))), Scalar(scale)));
  else a.return_tensor(ops::mul(ops::round(ops::div(x, Scalar(scale))), Scalar(scale)));
}

void rad2deg(Args& a) { a.return_tensor(ops::mul(a.tensor(0), Scalar(180.0 / kPi))); }
void deg2rad(Args& a) { a.return_tensor(ops::mul(a.tensor(0), Scalar(kPi / 180.0))); }
// sgn: sign for real dtypes; z / |z| (0 at 0) for complex ones.
void sgn(Args& a) {
  TensorRef z = a.tensor(0);
  if (!sdk::is_complex(z.dtype())) return a.return_tensor(ops::sign(z));
  TensorRef r = ops::abs(z);
  a.return_tensor(ops::where(ops::eq(r, Scalar(0.0)), ops::mul(z, Scalar(0.0)), ops::div(z, r)));
}

// self + w * (end - self) for |w| < 0.5, end - (end - self) * (1 - w) otherwise: exact at w = 1.
void lerp_scalar(Args& a) {
  TensorRef self = a.tensor(0), end = a.tensor(1);
  double w = a.scalar(2).to_double();
  TensorRef diff = ops::sub(end, self);
  if (std::abs(w) < 0.5) a.return_tensor(ops::add(self, ops::mul(diff, Scalar(w))));
  else a.return_tensor(ops::sub(end, ops::mul(diff, Scalar(1.0 - w))));
}

void lerp_tensor(Args& a) {
  TensorRef self = a.tensor(0), end = a.tensor(1), w = a.tensor(2);
  TensorRef diff = ops::sub(end, self);
  TensorRef low = ops::add(self, ops::mul(w, diff));
  TensorRef high = ops::sub(end, ops::mul(diff, ops::sub(ops::ones({}, w.dtype(), w.device()), w)));
  a.return_tensor(ops::where(ops::lt(ops::abs(w), Scalar(0.5)), low, high));
}

void addcmul(Args& a) {
  a.return_tensor(ops::add(a.tensor(0), ops::mul(a.tensor(1), a.tensor(2)), Scalar(a.scalar(3))));
}

void addcdiv(Args& a) {
  TensorRef t1 = a.tensor(1), t2 = a.tensor(2);
  if (!sdk::is_floating(t1.dtype()) && !sdk::is_floating(t2.dtype()))
    fail(TS_ERROR_TYPE, "addcdiv: integer division of tensors using addcdiv is no longer supported; divide "
         "tensor1 by tensor2 with div and add it instead");
  a.return_tensor(ops::add(a.tensor(0), ops::div(t1, t2), Scalar(a.scalar(3))));
}

void hypot(Args& a) {
  TensorRef x = a.tensor(0), y = a.tensor(1);
  int32_t common = sdk::promote_types(x.dtype(), y.dtype());
  if (!sdk::is_floating(common)) common = sdk::host().default_float_dtype();
  x = ops::to(x, common);
  y = ops::to(y, common);
  a.return_tensor(ops::sqrt(ops::add(ops::mul(x, x), ops::mul(y, y))));
}

// max + log1p(exp(-|x - y|)); equal arguments (infinities included) give x + log 2.
void logaddexp(Args& a) {
  TensorRef x = a.tensor(0), y = a.tensor(1);
  TensorRef m = ops::maximum(x, y);
  TensorRef general = ops::add(m, ops::log1p(ops::exp(ops::neg(ops::abs(ops::sub(x, y))))));
  a.return_tensor(ops::where(ops::eq(x, y), ops::add(x, Scalar(std::log(2.0))), general));
}

void logaddexp2(Args& a) {
  TensorRef x = a.tensor(0), y = a.tensor(1);
  TensorRef m = ops::maximum(x, y);
  TensorRef tail = ops::div(ops::log1p(ops::exp2(ops::neg(ops::abs(ops::sub(x, y))))), Scalar(std::log(2.0)));
  a.return_tensor(ops::where(ops::eq(x, y), ops::add(x, Scalar(1.0)), ops::add(m, tail)));
}

// x * log(y), and 0 where x == 0 unless y is NaN.
void xlogy(Args& a) {
  TensorRef x = a.tensor(0), y = a.tensor(1);
  TensorRef product = ops::mul(x, ops::log(y));
  TensorRef zero = ops::logical_and(ops::eq(x, Scalar(0)), ops::eq(y, y));
  a.return_tensor(ops::where(zero, ops::zeros({}, product.dtype(), product.device()), product));
}

void clamp_tensor(Args& a) {
  TensorRef x = a.tensor(0);
  auto lo = a.optional_tensor(1), hi = a.optional_tensor(2);
  if (!lo && !hi) fail(TS_ERROR_VALUE, "clamp: at least one of 'min' or 'max' must not be None");
  TensorRef out = x;
  if (lo) out = ops::maximum(out, *lo);
  if (hi) out = ops::minimum(out, *hi);
  if (out.handle() == x.handle()) out = ops::clone(x);
  a.return_tensor(std::move(out));
}

// The Scalar overloads of binary primitives: the number as a 0-d tensor (promotion as PyTorch's).
void fmod_scalar(Args& a) { a.return_tensor(ops::fmod(a.tensor(0), scalar_tensor(a.tensor(0), a.scalar(1)))); }
void remainder_scalar(Args& a) {
  a.return_tensor(ops::remainder(a.tensor(0), scalar_tensor(a.tensor(0), a.scalar(1))));
}
void copysign_scalar(Args& a) { a.return_tensor(ops::copysign(a.tensor(0), scalar_tensor(a.tensor(0), a.scalar(1)))); }
void bitwise_and_scalar(Args& a) {
  a.return_tensor(ops::bitwise_and(a.tensor(0), scalar_tensor(a.tensor(0), a.scalar(1))));
}
void bitwise_or_scalar(Args& a) { a.return_tensor(ops::bitwise_or(a.tensor(0), scalar_tensor(a.tensor(0), a.scalar(1)))); }
void bitwise_xor_scalar(Args& a) {
  a.return_tensor(ops::bitwise_xor(a.tensor(0), scalar_tensor(a.tensor(0), a.scalar(1))));
}

void left_shift_scalar(Args& a) {
  a.return_tensor(ops::bitwise_left_shift(a.tensor(0), scalar_tensor(a.tensor(0), a.scalar(1))));
}
void right_shift_scalar(Args& a) {
  a.return_tensor(ops::bitwise_right_shift(a.tensor(0), scalar_tensor(a.tensor(0), a.scalar(1))));
}

void isnan(Args& a) {
  TensorRef x = a.tensor(0);
  a.return_tensor(ops::ne(x, x));
}

TensorRef all_false(const TensorRef& x) { return ops::zeros(shape_of(x), int32_t(TS_BOOL), x.device()); }

void isinf(Args& a) {
  TensorRef x = a.tensor(0);
  if (!sdk::is_floating(x.dtype())) return a.return_tensor(all_false(x));
  a.return_tensor(ops::eq(ops::abs(x), Scalar(std::numeric_limits<double>::infinity())));
}
void isposinf(Args& a) {
  TensorRef x = a.tensor(0);
  if (!sdk::is_floating(x.dtype())) return a.return_tensor(all_false(x));
  a.return_tensor(ops::eq(x, Scalar(std::numeric_limits<double>::infinity())));
}
void isneginf(Args& a) {
  TensorRef x = a.tensor(0);
  if (!sdk::is_floating(x.dtype())) return a.return_tensor(all_false(x));
  a.return_tensor(ops::eq(x, Scalar(-std::numeric_limits<double>::infinity())));
}
void isfinite(Args& a) {
  TensorRef x = a.tensor(0);
  if (!sdk::is_floating(x.dtype())) return a.return_tensor(ops::ones(shape_of(x), int32_t(TS_BOOL), x.device()));
  a.return_tensor(ops::eq(ops::sub(x, x), Scalar(0)));  // inf - inf and NaN - NaN are NaN
}

// The largest finite value of a floating dtype (torch.finfo(dtype).max).
double finite_max(int32_t dtype) {
  switch (dtype) {
    case TS_FLOAT16: return 65504.0;
    case TS_BFLOAT16: return 3.38953138925153547590470800371487866880e+38;
    case TS_FLOAT32: return double(std::numeric_limits<float>::max());
    default: return std::numeric_limits<double>::max();
  }
}

void nan_to_num(Args& a) {
  TensorRef x = a.tensor(0);
  if (!sdk::is_floating(x.dtype())) return a.return_tensor(ops::clone(x));
  double nan = a.optional_double(1).value_or(0.0);
  double posinf = a.optional_double(2).value_or(finite_max(x.dtype()));
  double neginf = a.optional_double(3).value_or(-finite_max(x.dtype()));
  auto fill = [&](double v) { return ops::full({}, Scalar(v), x.dtype(), x.device()); };
  constexpr double inf = std::numeric_limits<double>::infinity();
  TensorRef out = ops::where(ops::ne(x, x), fill(nan), x);
  out = ops::where(ops::eq(x, Scalar(inf)), fill(posinf), out);
  a.return_tensor(ops::where(ops::eq(x, Scalar(-inf)), fill(neginf), out));
}

}  // namespace

void register_elementwise(sdk::Registrar& reg) {
  composite(reg, "frac", frac, true, true);
  composite(reg, "square", square, true, true);
  composite(reg, "round.decimals", round_decimals, true, true);
  composite(reg, "rad2deg", rad2deg, true, true);
  composite(reg, "deg2rad", deg2rad, true, true);
  composite(reg, "sgn", sgn, true, true);
  composite(reg, "lerp.Scalar", lerp_scalar, true, true);
  composite(reg, "lerp.Tensor", lerp_tensor, true, true);
  composite(reg, "addcmul", addcmul, true, true);
  composite(reg, "addcdiv", addcdiv, true, true);
  composite(reg, "hypot", hypot, true, true);
  composite(reg, "logaddexp", logaddexp, false, true);
  composite(reg, "logaddexp2", logaddexp2, false, true);
  composite(reg, "xlogy.Tensor", xlogy, true, true);
  composite(reg, "clamp.Tensor", clamp_tensor, true, true, "clamp.Tensor_out");
  composite(reg, "fmod.Scalar", fmod_scalar, true);
  composite(reg, "remainder.Scalar", remainder_scalar, true);
  composite(reg, "copysign.Scalar", copysign_scalar, true);
  composite(reg, "bitwise_and.Scalar", bitwise_and_scalar, true);
  composite(reg, "bitwise_or.Scalar", bitwise_or_scalar, true);
  composite(reg, "bitwise_xor.Scalar", bitwise_xor_scalar, true);
  composite(reg, "bitwise_left_shift.Tensor_Scalar", left_shift_scalar, true);
  composite(reg, "bitwise_right_shift.Tensor_Scalar", right_shift_scalar, true);
  composite(reg, "isnan", isnan);
  composite(reg, "isinf", isinf);
  composite(reg, "isposinf", isposinf);
  composite(reg, "isneginf", isneginf);
  composite(reg, "isfinite", isfinite);
  composite(reg, "nan_to_num", nan_to_num, true, true);
}

}  // namespace tessera::composites

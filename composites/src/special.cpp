// torch.special's functions without a primitive of their own, over the element-wise primitives.
#include "composite.h"

#include <cmath>
#include <limits>

namespace tessera::composites {
namespace {

TensorRef as_floating(const TensorRef& x) {
  return sdk::is_floating(x.dtype()) ? x : ops::to(x, sdk::host().default_float_dtype());
}

// logit(p) = log(p / (1 - p)), p clamped to [eps, 1 - eps] when eps is given.
void logit(Args& a) {
  TensorRef x = as_floating(a.tensor(0));
  if (auto eps = a.optional_double(1)) x = ops::clamp(x, Scalar(*eps), Scalar(1.0 - *eps));
  a.return_tensor(ops::log(ops::div(x, ops::sub(ops::ones({}, x.dtype(), x.device()), x))));
}

// sinc(x) = sin(pi x) / (pi x), 1 at 0.
void sinc(Args& a) {
  TensorRef x = as_floating(a.tensor(0));
  TensorRef px = ops::mul(x, Scalar(3.14159265358979323846));
  a.return_tensor(ops::where(ops::eq(x, Scalar(0)), ops::ones({}, x.dtype(), x.device()), ops::div(ops::sin(px), px)));
}

// entr(x) = -x log x for x > 0, 0 at 0, -inf below 0.
void entr(Args& a) {
  TensorRef x = as_floating(a.tensor(0));
  TensorRef value = ops::neg(ops::mul(x, ops::log(x)));
  value = ops::where(ops::eq(x, Scalar(0)), zero_like_scalar(x), value);
  a.return_tensor(ops::where(ops::lt(x, Scalar(0)), ops::full({}, Scalar(-std::numeric_limits<double>::infinity()), x.dtype(), x.device()), value));
}

// The standard normal CDF, its inverse and its log.
void ndtr(Args& a) {
  TensorRef x = as_floating(a.tensor(0));
  a.return_tensor(ops::mul(ops::erfc(ops::mul(x, Scalar(-0.70710678118654752440))), Scalar(0.5)));
}
void ndtri(Args& a) {
  TensorRef p = as_floating(a.tensor(0));
  a.return_tensor(ops::mul(ops::erfinv(ops::sub(ops::mul(p, Scalar(2.0)), Scalar(1.0))), Scalar(1.41421356237309504880)));
}
void log_ndtr(Args& a) {
  TensorRef x = as_floating(a.tensor(0));
  a.return_tensor(ops::log(ops::mul(ops::erfc(ops::mul(x, Scalar(-0.70710678118654752440))), Scalar(0.5))));
}

// xlog1py(x, y) = x * log1p(y), 0 where x == 0 unless y is NaN.
void xlog1py(Args& a) {
  TensorRef x = a.tensor(0), y = a.tensor(1);
  TensorRef product = ops::mul(x, ops::log1p(y));
  TensorRef zero = ops::logical_and(ops::eq(x, Scalar(0)), ops::eq(y, y));
  a.return_tensor(ops::where(zero, ops::zeros({}, product.dtype(), product.device()), product));
}

}  // namespace

void register_special(sdk::Registrar& reg) {
  composite(reg, "logit", logit, true, true);
  composite(reg, "sinc", sinc, true, true);
  composite(reg, "special_entr", entr, false, true);
  composite(reg, "special_ndtr", ndtr, false, true);
  composite(reg, "special_ndtri", ndtri, false, true);
  composite(reg, "special_log_ndtr", log_ndtr, false, true);
  composite(reg, "special_xlog1py", xlog1py, false, true);
}

}  // namespace tessera::composites

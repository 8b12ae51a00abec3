// Random composites over rand / randn: they draw from the device's generator, so manual_seed
// makes them reproducible on every device.
#include "composite.h"

#include <cmath>
#include <limits>

namespace tessera::composites {
namespace {

// True when some element of the bool tensor is set (checked on the CPU only: see host_flag).
bool any_set(const TensorRef& mask) { return host_flag(ops::gt(ops::sum(mask), Scalar(0))); }

int32_t float_dtype_of(const TensorRef& t) {
  return sdk::is_floating(t.dtype()) ? t.dtype() : sdk::host().default_float_dtype();
}

void bernoulli(Args& a) {
  TensorRef p = a.tensor(0);
  TensorRef u = ops::rand(shape_of(p), float_dtype_of(p), p.device());
  a.return_tensor(ops::to(ops::lt(u, p), p.dtype()));
}

void bernoulli_p(Args& a) {
  TensorRef self = a.tensor(0);
  double p = a.to_double(1);
  if (!(p >= 0 && p <= 1)) fail(TS_ERROR_VALUE, "bernoulli: p must be in [0, 1], got ", p);
  TensorRef u = ops::rand(shape_of(self), float_dtype_of(self), self.device());
  a.return_tensor(ops::to(ops::lt(u, Scalar(p)), self.dtype()));
}

// Without replacement: the Gumbel-top-k trick (the k largest log(u) / p are a weighted sample
// without replacement). With replacement: inverse-CDF sampling with searchsorted.
void multinomial(Args& a) {
  TensorRef probs = a.tensor(0);
  int64_t n = a.to_int(1);
  bool replacement = a.to_bool(2);
  if (probs.dim() != 1 && probs.dim() != 2)
    fail(TS_ERROR_VALUE, "multinomial: prob_dist must be 1 or 2 dim, got ", probs.dim());
  if (!sdk::is_floating(probs.dtype()))
    fail(TS_ERROR_TYPE, "multinomial: only floating point dtypes are supported for prob_dist, got ", sdk::dtype_name(probs.dtype()));
  int64_t categories = probs.size(probs.dim() - 1);
  if (n <= 0) fail(TS_ERROR_VALUE, "multinomial: cannot sample n_sample <= 0 samples");
  if (!replacement && n > categories)
    fail(TS_ERROR_VALUE, "multinomial: cannot sample n_sample > prob_dist.size(-1) samples without replacement (", n,
         " > ", categories, ")");
  if (any_set(ops::logical_not(ops::ge(probs, Scalar(0)))))
    fail(TS_ERROR_VALUE, "multinomial: probability tensor contains either `inf`, `nan` or element < 0");
  TensorRef total = ops::sum(probs, IntList{-1}, true);
  if (any_set(ops::logical_not(ops::gt(total, Scalar(0)))))
    fail(TS_ERROR_VALUE, "multinomial: invalid multinomial distribution (sum of probabilities <= 0)");
  IntList sample_shape = shape_of(probs);
  if (!replacement) {
    if (any_set(ops::lt(ops::sum(ops::gt(probs, Scalar(0)), IntList{-1}, false), Scalar(n))))
      fail(TS_ERROR_VALUE, "multinomial: invalid multinomial distribution (with replacement=False, not enough non-negative category to sample)");
    TensorRef u = ops::rand(sample_shape, probs.dtype(), probs.device());
    TensorRef keys = ops::div(ops::log(u), probs);  // -inf where p == 0: never chosen
    auto [values, indices] = ops::topk(keys, n, -1, true, true);
    return a.return_tensor(std::move(indices));
  }
  TensorRef cdf = ops::cumsum(ops::div(probs, total), -1);
  sample_shape.back() = n;
  TensorRef u = ops::rand(sample_shape, probs.dtype(), probs.device());
  TensorRef idx = ops::searchsorted(cdf, u, false, true);
  a.return_tensor(ops::clamp(idx, std::nullopt, Scalar(categories - 1)));
}

void normal_tensor_tensor(Args& a) {
  TensorRef mean = a.tensor(0), std = a.tensor(1);
  if (any_set(ops::lt(std, Scalar(0))))
    fail(TS_ERROR_VALUE, "normal expects all elements of std >= 0.0");
  TensorRef shape_probe = ops::add(ops::mul(mean, Scalar(0)), ops::mul(std, Scalar(0)));  // the broadcast shape
  TensorRef z = ops::randn(shape_of(shape_probe), shape_probe.dtype(), shape_probe.device());
  a.return_tensor(ops::add(mean, ops::mul(std, z)));
}

// A uniformly random permutation: the order of n uniform draws.
void randperm(Args& a) {
  int64_t n = a.to_int(0);
  if (n < 0) fail(TS_ERROR_VALUE, "randperm: n must be non-negative, got ", n);
  int32_t dtype = a.optional_dtype(1).value_or(TS_INT64);
  ts_device device = a.optional_device(2).value_or(ts_device{0, 0});
  TensorRef keys = ops::rand({n}, int32_t(TS_FLOAT64), device);
  auto [values, indices] = ops::sort(keys, std::optional<bool>(false), int64_t(0), false);
  a.return_tensor(ops::to(indices, dtype));
}

// The in-place samplers: a draw of self's shape (in self's dtype when floating), copied into self.
TensorRef uniform_draw(const TensorRef& self) { return ops::rand(shape_of(self), float_dtype_of(self), self.device()); }
void fill_with(Args& a, const TensorRef& self, const TensorRef& draw) {
  ops::copy_(self, ops::to(draw, self.dtype()));  // converted here: a device's copy_ may take one dtype only
  a.return_argument(self);
}

void uniform_(Args& a) {
  TensorRef self = a.tensor(0);
  double from = a.to_double(1), to = a.to_double(2);
  if (from > to) fail(TS_ERROR_VALUE, "uniform_ expects to return a [from, to) range, but found from=", from, " > to=", to);
  fill_with(a, self, ops::add(ops::mul(uniform_draw(self), Scalar(to - from)), Scalar(from)));
}
void normal_(Args& a) {
  TensorRef self = a.tensor(0);
  double mean = a.to_double(1), std = a.to_double(2);
  if (std < 0) fail(TS_ERROR_VALUE, "normal expects std >= 0.0, but found std ", std);
  TensorRef z = ops::randn(shape_of(self), float_dtype_of(self), self.device());
  fill_with(a, self, ops::add(ops::mul(z, Scalar(std)), Scalar(mean)));
}
void exponential_(Args& a) {
  TensorRef self = a.tensor(0);
  double lambd = a.to_double(1);
  if (!(lambd > 0)) fail(TS_ERROR_VALUE, "exponential_ expects lambda > 0.0, but found lambda=", lambd);
  TensorRef one_minus_u = ops::sub(ops::ones({}, float_dtype_of(self), self.device()), uniform_draw(self));  // (0, 1]
  fill_with(a, self, ops::div(ops::neg(ops::log(one_minus_u)), Scalar(lambd)));
}
void geometric_(Args& a) {
  TensorRef self = a.tensor(0);
  double p = a.to_double(1);
  if (!(p > 0 && p < 1)) fail(TS_ERROR_VALUE, "geometric_ expects p to be in (0, 1), but got p=", p);
  TensorRef one_minus_u = ops::sub(ops::ones({}, float_dtype_of(self), self.device()), uniform_draw(self));
  TensorRef trials = ops::ceil(ops::div(ops::log(one_minus_u), Scalar(std::log1p(-p))));
  fill_with(a, self, ops::clamp(trials, Scalar(1), std::nullopt));
}
void log_normal_(Args& a) {
  TensorRef self = a.tensor(0);
  double mean = a.to_double(1), std = a.to_double(2);
  if (!(std > 0)) fail(TS_ERROR_VALUE, "log_normal_ expects std > 0.0, but found std=", std);
  TensorRef z = ops::randn(shape_of(self), float_dtype_of(self), self.device());
  fill_with(a, self, ops::exp(ops::add(ops::mul(z, Scalar(std)), Scalar(mean))));
}
void cauchy_(Args& a) {
  TensorRef self = a.tensor(0);
  double median = a.to_double(1), sigma = a.to_double(2);
  TensorRef angle = ops::mul(ops::sub(uniform_draw(self), Scalar(0.5)), Scalar(3.14159265358979323846));
  fill_with(a, self, ops::add(ops::mul(ops::tan(angle), Scalar(sigma)), Scalar(median)));
}
void bernoulli_float(Args& a) {
  TensorRef self = a.tensor(0);
  double p = a.to_double(1);
  if (!(p >= 0 && p <= 1)) fail(TS_ERROR_VALUE, "bernoulli_ expects p to be in [0, 1], but got p=", p);
  fill_with(a, self, ops::lt(uniform_draw(self), Scalar(p)));
}

// random_: integers uniform in [from, to); `to` None means up to the dtype's largest exactly
// representable integer (2^24 for float32, 2^53 for float64, the integer type's maximum + 1).
int64_t random_upper(int32_t dtype) {
  switch (dtype) {
    case TS_BOOL: return 2;
    case TS_UINT8: return 256;
    case TS_INT8: return 128;
    case TS_INT16: return 1 << 15;
    case TS_INT32: return int64_t(1) << 31;
    case TS_FLOAT16: return 1 << 11;
    case TS_BFLOAT16: return 1 << 8;
    case TS_FLOAT32: return 1 << 24;
    case TS_FLOAT64: return int64_t(1) << 53;
    default: return std::numeric_limits<int64_t>::max();
  }
}
void random_range(Args& a, const TensorRef& self, int64_t from, int64_t to) {
  if (from >= to) fail(TS_ERROR_VALUE, "random_ expects 'from' to be less than 'to', but got from=", from, " >= to=", to);
  fill_with(a, self, ops::randint(from, to, shape_of(self), int32_t(TS_INT64), self.device()));
}
void random_from(Args& a) {
  TensorRef self = a.tensor(0);
  auto to = a.optional_int(2);
  random_range(a, self, a.to_int(1), to ? *to : random_upper(self.dtype()));
}
void random_to(Args& a) {
  TensorRef self = a.tensor(0);
  random_range(a, self, 0, a.to_int(1));
}

}  // namespace

void register_random(sdk::Registrar& reg) {
  composite(reg, "bernoulli", bernoulli);
  composite(reg, "bernoulli.p", bernoulli_p);
  composite(reg, "multinomial", multinomial);
  composite(reg, "normal.Tensor_Tensor", normal_tensor_tensor);
  composite(reg, "randperm", randperm);
  composite(reg, "uniform_", uniform_);
  composite(reg, "normal_", normal_);
  composite(reg, "exponential_", exponential_);
  composite(reg, "geometric_", geometric_);
  composite(reg, "log_normal_", log_normal_);
  composite(reg, "cauchy_", cauchy_);
  composite(reg, "bernoulli_.float", bernoulli_float);
  composite(reg, "random_.from", random_from);
  composite(reg, "random_.to", random_to);
}

}  // namespace tessera::composites

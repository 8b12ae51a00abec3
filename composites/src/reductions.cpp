// Reduction, scan and sorting composites.
#include "composite.h"

#include <cmath>
#include <limits>

namespace tessera::composites {
namespace {

std::optional<IntList> optional_dims(Args& a, int i) {
  auto d = a.optional_int_list(i);
  if (!d) return std::nullopt;
  return IntList(d->begin(), d->end());
}
IntList dims_or_all(const std::optional<IntList>& d) { return d ? *d : IntList{}; }

// linalg.vector_norm: ord 2 (the default), inf, -inf, 0, 1 or any other real p, over dim.
void linalg_vector_norm(Args& a) {
  TensorRef self = a.tensor(0);
  double ord = a.scalar(1).to_double();
  std::optional<IntList> dim = optional_dims(a, 2);
  bool keepdim = a.to_bool(3);
  std::optional<int32_t> dtype = a.optional_dtype(4);
  if (!sdk::is_floating(self.dtype()))
    fail(TS_ERROR_TYPE, "linalg.vector_norm: Expected a floating point or complex tensor as input. Got ",
         sdk::dtype_name(self.dtype()));
  TensorRef x = dtype ? ops::to(self, *dtype) : self;
  if (std::isinf(ord) && x.numel() == 0)
    fail(TS_ERROR_VALUE, "linalg.vector_norm: cannot compute the ", ord > 0 ? "inf" : "-inf",
         " norm on an empty tensor because the operation does not have an identity");
  TensorRef abs = ops::abs(x);
  if (ord == 2.0) return a.return_tensor(ops::sqrt(ops::sum(ops::mul(abs, abs), dim, keepdim)));
  if (ord == 1.0) return a.return_tensor(ops::sum(abs, dim, keepdim));
  if (std::isinf(ord))
    return a.return_tensor(ord > 0 ? ops::amax(abs, dims_or_all(dim), keepdim) : ops::amin(abs, dims_or_all(dim), keepdim));
  if (ord == 0.0) return a.return_tensor(ops::sum(ops::ne(x, Scalar(0)), dim, keepdim, x.dtype()));
  a.return_tensor(ops::pow(ops::sum(ops::pow(abs, Scalar(ord)), dim, keepdim), Scalar(1.0 / ord)));
}

void count_nonzero_dims(Args& a) {
  TensorRef x = a.tensor(0);
  auto d = a.int_list(1);
  a.return_tensor(ops::sum(ops::ne(x, Scalar(0)), IntList(d.begin(), d.end()), false));
}

void count_nonzero(Args& a) {
  TensorRef x = a.tensor(0);
  auto d = a.optional_int(1);
  a.return_tensor(d ? ops::sum(ops::ne(x, Scalar(0)), IntList{*d}, false) : ops::sum(ops::ne(x, Scalar(0))));
}

// var_mean / std_mean: (var or std, mean) over the same dims.
void spread_mean(Args& a, bool standard_deviation) {
  TensorRef x = a.tensor(0);
  auto dim = optional_dims(a, 1);
  auto correction = a.optional_scalar(2);
  bool keepdim = a.to_bool(3);
  std::optional<Scalar> c;
  if (correction) c = Scalar(*correction);
  TensorRef spread = standard_deviation ? ops::std(x, dim, c, keepdim) : ops::var(x, dim, c, keepdim);
  return_tensors(a, {spread, ops::mean(x, dim, keepdim)});
}
void var_mean(Args& a) { spread_mean(a, false); }
void std_mean(Args& a) { spread_mean(a, true); }

void aminmax(Args& a) {
  TensorRef x = a.tensor(0);
  auto d = a.optional_int(1);
  bool keepdim = a.to_bool(2);
  if (x.numel() == 0 && !d)
    fail(TS_ERROR_VALUE, "aminmax(): cannot compute aminmax over an empty dimension as the operation has no identity");
  IntList dims = d ? IntList{*d} : IntList{};
  return_tensors(a, {ops::amin(x, dims, keepdim), ops::amax(x, dims, keepdim)});
}

void nansum(Args& a) {
  TensorRef x = a.tensor(0);
  auto dim = optional_dims(a, 1);
  bool keepdim = a.to_bool(2);
  auto dtype = a.optional_dtype(3);
  TensorRef v = sdk::is_floating(x.dtype()) ? ops::where(ops::ne(x, x), zero_like_scalar(x), x) : x;
  a.return_tensor(ops::sum(v, dim, keepdim, dtype));
}

void nanmean(Args& a) {
  TensorRef x = a.tensor(0);
  auto dim = optional_dims(a, 1);
  bool keepdim = a.to_bool(2);
  auto dtype = a.optional_dtype(3);
  if (!sdk::is_floating(x.dtype()))
    fail(TS_ERROR_TYPE, "nanmean(): expected input to have floating point dtype but got ", sdk::dtype_name(x.dtype()));
  TensorRef valid = ops::eq(x, x);
  TensorRef total = ops::sum(ops::where(valid, x, zero_like_scalar(x)), dim, keepdim, dtype);
  a.return_tensor(ops::div(total, ops::sum(valid, dim, keepdim)));
}

// log(cumsum(exp(x - m))) + m with m the slice's finite maximum: no overflow for large inputs.
void logcumsumexp(Args& a) {
  TensorRef x = a.tensor(0);
  int64_t dim = wrap_dim("logcumsumexp", a.to_int(1), x.dim());
  if (x.numel() == 0) return a.return_tensor(ops::clone(x));
  TensorRef m = ops::amax(x, IntList{dim}, true);
  m = ops::where(ops::eq(ops::abs(m), Scalar(std::numeric_limits<double>::infinity())), zero_like_scalar(m), m);
  a.return_tensor(ops::add(ops::log(ops::cumsum(ops::exp(ops::sub(x, m)), dim)), m));
}

void sort(Args& a) {
  auto [values, indices] = ops::sort(a.tensor(0), std::optional<bool>(false), a.to_int(1), a.to_bool(2));
  return_tensors(a, {values, indices});
}

void argsort(Args& a) {
  auto [values, indices] = ops::sort(a.tensor(0), std::optional<bool>(false), a.to_int(1), a.to_bool(2));
  a.return_tensor(std::move(indices));
}

void argsort_stable(Args& a) {
  auto [values, indices] = ops::sort(a.tensor(0), std::optional<bool>(a.to_bool(1)), a.to_int(2), a.to_bool(3));
  a.return_tensor(std::move(indices));
}

void msort(Args& a) {
  auto [values, indices] = ops::sort(a.tensor(0), std::optional<bool>(false), int64_t(0), false);
  a.return_tensor(std::move(values));
}

void bucketize(Args& a) {
  TensorRef boundaries = a.tensor(1);
  if (boundaries.dim() != 1)
    fail(TS_ERROR_VALUE, "bucketize: boundaries tensor must be 1 dimension, but got dim(", boundaries.dim(), ")");
  a.return_tensor(ops::searchsorted(boundaries, a.tensor(0), a.to_bool(2), a.to_bool(3)));
}

}  // namespace

void register_reductions(sdk::Registrar& reg) {
  composite(reg, "linalg_vector_norm", linalg_vector_norm);
  composite(reg, "count_nonzero.dim_IntList", count_nonzero_dims);
  composite(reg, "count_nonzero", count_nonzero);
  composite(reg, "var_mean.correction", var_mean);
  composite(reg, "std_mean.correction", std_mean);
  composite(reg, "aminmax", aminmax);
  composite(reg, "nansum", nansum);
  composite(reg, "nanmean", nanmean);
  composite(reg, "logcumsumexp", logcumsumexp);
  composite(reg, "sort", sort);
  composite(reg, "argsort", argsort);
  composite(reg, "argsort.stable", argsort_stable);
  composite(reg, "msort", msort);
  composite(reg, "bucketize.Tensor", bucketize);
}

}  // namespace tessera::composites

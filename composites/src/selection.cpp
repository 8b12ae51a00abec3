// Selection composites over sort: kthvalue, median, nanmedian, unique, unique_consecutive, histc.
#include "composite.h"

#include <limits>

namespace tessera::composites {
namespace {

std::pair<TensorRef, TensorRef> sorted_along(const TensorRef& x, int64_t dim) {
  auto [values, indices] = ops::sort(x, std::optional<bool>(true), dim, false);
  return {values, indices};
}

// The values and indices at per-slice positions `pos` (keepdim-shaped) of the sorted slices.
void return_at(Args& a, const TensorRef& values, const TensorRef& indices, const TensorRef& pos, int64_t dim, bool keepdim) {
  TensorRef v = ops::gather(values, dim, pos), i = ops::gather(indices, dim, pos);
  if (!keepdim) {
    v = ops::squeeze(v, dim);
    i = ops::squeeze(i, dim);
  }
  return_tensors(a, {v, i});
}

// n - count, as an int64 tensor of count's shape.
TensorRef minus_from(const TensorRef& count, int64_t n) { return ops::sub(ops::full({}, Scalar(n), int32_t(TS_INT64), count.device()), count); }

TensorRef as_slices(const TensorRef& x) { return x.dim() == 0 ? ops::reshape(x, {1}) : x; }

void kthvalue(Args& a) {
  TensorRef x = a.tensor(0);
  int64_t k = a.to_int(1);
  int64_t dim = wrap_dim("kthvalue", a.to_int(2), x.dim());
  bool keepdim = a.to_bool(3) || x.dim() == 0;
  TensorRef s = as_slices(x);
  int64_t n = s.size(dim);
  if (k < 1 || k > n) fail(TS_ERROR_INDEX, "kthvalue(): selected number k out of range for dimension ", dim, " (k = ", k, ", size ", n, ")");
  auto [values, indices] = sorted_along(s, dim);
  TensorRef v = ops::narrow(values, dim, k - 1, 1), i = ops::narrow(indices, dim, k - 1, 1);
  if (!keepdim) {
    v = ops::squeeze(v, dim);
    i = ops::squeeze(i, dim);
  }
  if (x.dim() == 0) {
    v = ops::reshape(v, {});
    i = ops::reshape(i, {});
  }
  return_tensors(a, {ops::contiguous(v), ops::contiguous(i)});
}

// The position in each sorted slice of n elements (NaNs last; `nans` of them, keepdim-shaped)
// of its lower median: the first NaN when there is one (median), or the median of the others
// (nanmedian, position 0 when every element is NaN), as PyTorch.
TensorRef median_position(const TensorRef& nans, int64_t n, bool ignore_nan) {
  auto long_scalar = [&](int64_t v) { return ops::full({}, Scalar(v), int32_t(TS_INT64), nans.device()); };
  if (ignore_nan)
    return ops::clamp(ops::floor_divide(ops::sub(minus_from(nans, n), Scalar(1)), long_scalar(2)), Scalar(0), std::nullopt);
  return ops::where(ops::gt(nans, Scalar(0)), minus_from(nans, n), long_scalar((n - 1) / 2));
}

void median_dim_impl(Args& a, bool ignore_nan) {
  const char* op = ignore_nan ? "nanmedian" : "median";
  TensorRef x = a.tensor(0);
  int64_t dim = wrap_dim(op, a.to_int(1), x.dim());
  bool keepdim = a.to_bool(2) || x.dim() == 0;
  TensorRef s = as_slices(x);
  int64_t n = s.size(dim);
  if (n == 0) fail(TS_ERROR_INDEX, op, "(): Expected reduction dim ", dim, " to have non-zero size.");
  auto [values, indices] = sorted_along(s, dim);
  TensorRef nans = ops::sum(ops::ne(s, s), IntList{dim}, true);
  return_at(a, values, indices, median_position(nans, n, ignore_nan), dim, keepdim);
}
void median_dim(Args& a) { median_dim_impl(a, false); }
void nanmedian_dim(Args& a) { median_dim_impl(a, true); }

void median_all_impl(Args& a, bool ignore_nan) {
  TensorRef x = a.tensor(0);
  if (x.numel() == 0) return a.return_tensor(ops::full({}, Scalar(std::numeric_limits<double>::quiet_NaN()), x.dtype(), x.device()));
  TensorRef flat = ops::reshape(x, {-1});
  auto [values, indices] = sorted_along(flat, 0);
  TensorRef nans = ops::sum(ops::ne(flat, flat), IntList{0}, true);
  a.return_tensor(ops::reshape(ops::gather(values, 0, median_position(nans, flat.numel(), ignore_nan)), {}));
}
void median_all(Args& a) { median_all_impl(a, false); }
void nanmedian_all(Args& a) { median_all_impl(a, true); }

TensorRef empty_long(const TensorRef& like) { return ops::zeros({0}, int32_t(TS_INT64), like.device()); }

// Groups of equal neighbours in `flat`: `starts` marks each group's first element.
void group_outputs(Args& a, const TensorRef& flat, const TensorRef& starts, const TensorRef& order, const TensorRef& self,
                   bool return_inverse, bool return_counts) {
  TensorRef values = ops::masked_select(flat, starts);
  TensorRef inverse = empty_long(self), counts = empty_long(self);
  TensorRef group = ops::sub(ops::cumsum(starts, 0), Scalar(1));  // each element's group, in `flat`'s order
  if (return_inverse) {
    TensorRef inv = order.defined() ? ops::scatter(ops::zeros(shape_of(group), int32_t(TS_INT64), group.device()), 0, order, group) : group;
    inverse = ops::reshape(inv, shape_of(self));
  }
  if (return_counts) counts = ops::bincount(group, TensorRef(), values.numel());
  return_tensors(a, {values, inverse, counts});
}

TensorRef neighbour_starts(const TensorRef& flat) {
  int64_t n = flat.numel();
  TensorRef first = ops::ones({std::min<int64_t>(n, 1)}, int32_t(TS_BOOL), flat.device());
  if (n <= 1) return first;
  return ops::cat({first, ops::ne(ops::narrow(flat, 0, 1, n - 1), ops::narrow(flat, 0, 0, n - 1))}, 0);
}

// _unique2: the distinct values of the flattened input, sorted (always: sorting is how they are found).
void unique2(Args& a) {
  TensorRef x = a.tensor(0);
  bool return_inverse = a.to_bool(2), return_counts = a.to_bool(3);
  TensorRef flat = ops::reshape(x, {-1});
  auto [values, order] = sorted_along(flat, 0);
  group_outputs(a, values, neighbour_starts(values), order, x, return_inverse, return_counts);
}

void unique_consecutive(Args& a) {
  TensorRef x = a.tensor(0);
  bool return_inverse = a.to_bool(1), return_counts = a.to_bool(2);
  if (a.optional_int(3))
    fail(TS_ERROR_NOT_IMPLEMENTED, "unique_consecutive: dim is not supported yet; call it on the flattened tensor");
  TensorRef flat = ops::contiguous(ops::reshape(x, {-1}));
  group_outputs(a, flat, neighbour_starts(flat), TensorRef(), x, return_inverse, return_counts);
}

// histc: counts in `bins` equal-width bins over [min, max] (the data's range when both are 0);
// values outside are ignored, the maximum falls in the last bin.
void histc(Args& a) {
  TensorRef x = a.tensor(0);
  int64_t bins = a.to_int(1);
  double lo = a.scalar(2).to_double(), hi = a.scalar(3).to_double();
  if (bins <= 0) fail(TS_ERROR_VALUE, "histc(): bins must be > 0, but got ", bins);
  if (lo > hi) fail(TS_ERROR_VALUE, "histc(): max must be larger than min, got min ", lo, " and max ", hi);
  if (!sdk::is_floating(x.dtype())) fail(TS_ERROR_TYPE, "histc(): expected a floating point input, got ", sdk::dtype_name(x.dtype()));
  TensorRef flat = ops::reshape(x, {-1});
  TensorRef low, high;
  if (lo == hi && flat.numel() > 0) {
    low = ops::to(ops::amin(flat, IntList{}, false), int32_t(TS_FLOAT64));
    high = ops::to(ops::amax(flat, IntList{}, false), int32_t(TS_FLOAT64));
  } else {
    low = ops::full({}, Scalar(lo), int32_t(TS_FLOAT64), x.device());
    high = ops::full({}, Scalar(hi), int32_t(TS_FLOAT64), x.device());
  }
  TensorRef same = ops::eq(low, high);
  low = ops::where(same, ops::sub(low, Scalar(1)), low);
  high = ops::where(same, ops::add(high, Scalar(1)), high);
  TensorRef v = ops::to(flat, int32_t(TS_FLOAT64));
  TensorRef inside = ops::logical_and(ops::ge(v, low), ops::le(v, high));
  TensorRef bin = ops::floor(ops::div(ops::mul(ops::sub(v, low), Scalar(double(bins))), ops::sub(high, low)));
  bin = ops::to(ops::clamp(bin, Scalar(0), Scalar(bins - 1)), int32_t(TS_INT64));
  TensorRef counts = ops::bincount(ops::masked_select(bin, inside), TensorRef(), bins);
  a.return_tensor(ops::to(counts, x.dtype()));
}

// mode: the most frequent value of each slice (the smallest on ties) and the last index where it
// occurs. Runs of equal values in the sorted slice give each value's count.
void mode(Args& a) {
  TensorRef x = a.tensor(0);
  int64_t dim = wrap_dim("mode", a.to_int(1), x.dim());
  bool keepdim = a.to_bool(2);
  TensorRef s = as_slices(x);
  int64_t n = s.size(dim);
  if (n == 0) fail(TS_ERROR_INDEX, "mode(): Expected reduction dim ", dim, " to have non-zero size.");
  const IntList source{dim}, destination{-1};
  TensorRef moved = movedim_to(s, source, destination);
  IntList out_shape = shape_of(moved);
  out_shape.pop_back();
  TensorRef rows = ops::reshape(moved, {-1, n});
  int64_t r = rows.size(0);
  auto [sorted, order] = sorted_along(rows, 1);
  TensorRef first = ops::ones({r, 1}, int32_t(TS_BOOL), x.device());
  TensorRef starts = n == 1 ? first
                            : ops::cat({first, ops::ne(ops::narrow(sorted, 1, 1, n - 1), ops::narrow(sorted, 1, 0, n - 1))}, 1);
  TensorRef run = ops::sub(ops::cumsum(starts, 1), Scalar(1));  // each element's run, per row
  TensorRef counts = ops::scatter_add(ops::zeros({r, n}, int32_t(TS_INT64), x.device()), 1, run,
                                      ops::ones({r, n}, int32_t(TS_INT64), x.device()));
  TensorRef length = ops::gather(counts, 1, run);
  TensorRef best = ops::amax(length, IntList{1}, true);
  TensorRef at = ops::argmax(ops::to(ops::eq(length, best), int32_t(TS_INT32)), int64_t(1), true);  // the first (smallest) value of a longest run
  TensorRef value = ops::gather(sorted, 1, at);
  TensorRef same_run = ops::eq(run, ops::gather(run, 1, at));
  TensorRef index = ops::amax(ops::where(same_run, order, ops::full({}, Scalar(-1), int32_t(TS_INT64), x.device())), IntList{1}, true);
  TensorRef v = ops::reshape(value, out_shape), i = ops::reshape(index, out_shape);
  if (keepdim && x.dim() > 0) {
    v = ops::unsqueeze(v, dim);
    i = ops::unsqueeze(i, dim);
  }
  return_tensors(a, {ops::contiguous(v), ops::contiguous(i)});
}

}  // namespace

void register_selection(sdk::Registrar& reg) {
  composite(reg, "kthvalue", kthvalue);
  composite(reg, "median", median_all);
  composite(reg, "median.dim", median_dim);
  composite(reg, "nanmedian", nanmedian_all);
  composite(reg, "nanmedian.dim", nanmedian_dim);
  composite(reg, "_unique2", unique2);
  composite(reg, "unique_consecutive", unique_consecutive);
  composite(reg, "histc", histc);
  composite(reg, "mode", mode);
}

}  // namespace tessera::composites

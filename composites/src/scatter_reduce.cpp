// scatter_reduce.two: src reduced into the positions of self that index selects along dim, with
// sum, prod, mean, amax or amin, written once for every device.
//
// sum and mean are scatter_adds. prod, amax and amin have no accumulating primitive: the
// contributions are sorted by their target position (a stable sort, so equal positions keep
// their order), each run of equal positions is reduced by a segmented scan in log2(n) rounds of
// element-wise steps, and the last element of each run is written at its position.
#include "composite.h"

namespace tessera::composites {
namespace {

enum class Reduce { Sum, Prod, Mean, Amax, Amin };

Reduce parse_reduce(const std::string& s) {
  if (s == "sum") return Reduce::Sum;
  if (s == "prod") return Reduce::Prod;
  if (s == "mean") return Reduce::Mean;
  if (s == "amax") return Reduce::Amax;
  if (s == "amin") return Reduce::Amin;
  fail(TS_ERROR_VALUE, "scatter_reduce: reduce argument must be either sum, prod, mean, amax or amin, got ", s);
}

TensorRef combine(Reduce r, const TensorRef& x, const TensorRef& y) {
  switch (r) {
    case Reduce::Prod: return ops::mul(x, y);
    case Reduce::Amax: return ops::maximum(x, y);
    default: return ops::minimum(x, y);
  }
}

// For each element of index, the flat position in (contiguous) self that it targets.
TensorRef target_positions(const TensorRef& self, int64_t dim, const TensorRef& index) {
  const int64_t nd = index.dim();
  IntList strides(size_t(nd), 1);
  for (int64_t d = nd - 2; d >= 0; --d) strides[size_t(d)] = strides[size_t(d + 1)] * self.size(d + 1);
  TensorRef pos = ops::mul(index, Scalar(strides[size_t(dim)]));
  for (int64_t d = 0; d < nd; ++d) {
    if (d == dim) continue;
    IntList shape(size_t(nd), 1);
    shape[size_t(d)] = index.size(d);
    TensorRef coord = ops::arange(Scalar(index.size(d)), int32_t(TS_INT64), index.device());
    pos = ops::add(pos, ops::mul(ops::reshape(coord, shape), Scalar(strides[size_t(d)])));
  }
  return ops::reshape(pos, {-1});
}

// values[i] becomes the reduction of the run of equal keys that ends at i (keys sorted).
TensorRef segmented_scan(Reduce r, TensorRef values, const TensorRef& keys) {
  const int64_t n = values.size(0);
  for (int64_t shift = 1; shift < n; shift *= 2) {
    TensorRef earlier = ops::narrow(values, 0, 0, n - shift);
    TensorRef same = ops::eq(ops::narrow(keys, 0, shift, n - shift), ops::narrow(keys, 0, 0, n - shift));
    TensorRef later = ops::narrow(values, 0, shift, n - shift);
    TensorRef merged = ops::where(same, combine(r, later, earlier), later);
    values = ops::cat({ops::narrow(values, 0, 0, shift), merged}, 0);
  }
  return values;
}

TensorRef reduce_by_sorting(Reduce r, const TensorRef& self, int64_t dim, const TensorRef& index, const TensorRef& src,
                            bool include_self) {
  TensorRef used = src;  // PyTorch reads only the leading index.size(d) entries of src in each dim
  for (int64_t d = 0; d < src.dim(); ++d) used = ops::narrow(used, d, 0, index.size(d));
  TensorRef keys = target_positions(self, dim, index);
  TensorRef values = ops::reshape(ops::contiguous(used), {-1});
  TensorRef order = ops::argsort(keys, true, 0, false);
  keys = ops::index_select(keys, 0, order);
  values = segmented_scan(r, ops::index_select(values, 0, order), keys);
  const int64_t n = keys.size(0);
  TensorRef run_end = ops::cat({ops::ne(ops::narrow(keys, 0, 0, n - 1), ops::narrow(keys, 0, 1, n - 1)),
                                ops::ones({1}, int32_t(TS_BOOL), keys.device())},
                               0);
  TensorRef targets = ops::masked_select(keys, run_end);
  TensorRef reduced = ops::masked_select(values, run_end);
  TensorRef flat = ops::reshape(ops::contiguous(self), {-1});
  if (include_self) reduced = combine(r, reduced, ops::index_select(flat, 0, targets));
  return ops::reshape(ops::index_put(flat, {targets}, reduced, false), shape_of(self));
}

void check_arguments(const TensorRef& self, int64_t dim, const TensorRef& index, const TensorRef& src) {
  if (index.dtype() != TS_INT64)
    fail(TS_ERROR_TYPE, "scatter_reduce: expected index of dtype int64, got ", sdk::dtype_name(index.dtype()));
  if (src.dtype() != self.dtype())
    fail(TS_ERROR_TYPE, "scatter_reduce: expected src of dtype ", sdk::dtype_name(self.dtype()), " (like self), got ",
         sdk::dtype_name(src.dtype()));
  // scatter checks the rest (dims, sizes, index range) with PyTorch's messages.
  (void)ops::scatter(self, dim, index, src);
}

void scatter_reduce_two(Args& a) {
  TensorRef self = a.tensor(0), index = a.tensor(2), src = a.tensor(3);
  const Reduce reduce = parse_reduce(std::string(*a.optional_str(4)));
  const bool include_self = a.to_bool(5);
  check_arguments(self, a.to_int(1), index, src);
  const int64_t dim = wrap_dim("scatter_reduce", a.to_int(1), self.dim());
  if (index.numel() == 0) return a.return_tensor(ops::clone(self));
  if (reduce == Reduce::Prod || reduce == Reduce::Amax || reduce == Reduce::Amin) {
    if (self.dim() == 0)  // one position: reshape to 1-D and back
      return a.return_tensor(ops::reshape(reduce_by_sorting(reduce, ops::reshape(self, {1}), 0, ops::reshape(index, {1}),
                                                            ops::reshape(src, {1}), include_self),
                                          IntList{}));
    return a.return_tensor(reduce_by_sorting(reduce, self, dim, index, src, include_self));
  }
  TensorRef base = include_self ? self : ops::scatter(self, dim, index, Scalar(0));
  TensorRef total = ops::scatter_add(base, dim, index, src);
  if (reduce == Reduce::Sum) return a.return_tensor(std::move(total));
  TensorRef ones = ops::ones(shape_of(src), self.dtype(), self.device());
  TensorRef counts = ops::scatter_add(ops::full(shape_of(self), Scalar(include_self ? 1 : 0), self.dtype(), self.device()),
                                      dim, index, ones);
  TensorRef mean = ops::div(total, ops::clamp(counts, Scalar(1), std::nullopt));
  a.return_tensor(sdk::is_inexact(self.dtype()) ? mean : ops::to(ops::floor(mean), self.dtype()));
}

}  // namespace

void register_scatter_reduce(sdk::Registrar& reg) { composite(reg, "scatter_reduce.two", scatter_reduce_two); }

}  // namespace tessera::composites

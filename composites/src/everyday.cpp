// Everyday composites: unfold, tensor_split, broadcast_tensors, cross, unique over a dim, the
// stacks, diff, flips, signbit, isin, heaviside.
#include "composite.h"

#include <algorithm>

namespace tessera::composites {
namespace {

// Tensor.unfold: windows of `size` every `step` along `dimension`, as a new last dim (a view).
void unfold(Args& a) {
  TensorRef x = a.tensor(0);
  int64_t size = a.to_int(2), step = a.to_int(3);
  int64_t d = x.dim() == 0 ? 0 : wrap_dim("unfold", a.to_int(1), x.dim());
  int64_t n = x.dim() == 0 ? 1 : x.size(d);
  if (size > n) fail(TS_ERROR_VALUE, "unfold: maximum size for tensor at dimension ", d, " is ", n, " but size is ", size);
  if (step <= 0) fail(TS_ERROR_VALUE, "unfold: step is ", step, " but must be > 0");
  IntList shape = shape_of(x), strides(x.strides().begin(), x.strides().end());
  if (x.dim() == 0) {
    shape = {};
    strides = {};
  }
  int64_t inner = x.dim() == 0 ? 1 : x.stride(d);
  if (x.dim() > 0) {
    shape[size_t(d)] = (n - size) / step + 1;
    strides[size_t(d)] = step * inner;
  }
  shape.push_back(size);
  strides.push_back(inner);
  a.return_tensor(ops::as_strided(x, shape, strides, x.storage_offset()));
}

void split_at(Args& a, const TensorRef& x, int64_t dim, const IntList& bounds) {
  std::vector<TensorRef> parts;
  int64_t n = x.size(dim), start = 0;
  for (int64_t b : bounds) {
    int64_t end = std::clamp<int64_t>(b, start, n);
    parts.push_back(ops::narrow(x, dim, start, end - start));
    start = end;
  }
  parts.push_back(ops::narrow(x, dim, start, n - start));
  return_tensor_list(a, parts);
}

// tensor_split into `sections` near-equal parts (the first n % sections one longer), or at indices.
void tensor_split_sections(Args& a) {
  TensorRef x = a.tensor(0);
  int64_t sections = a.to_int(1);
  if (sections <= 0) fail(TS_ERROR_VALUE, "tensor_split: number of sections must be greater than 0, but was ", sections);
  if (x.dim() == 0) fail(TS_ERROR_VALUE, "tensor_split: expected at least a 1-dimensional tensor, but got a tensor with 0 dims");
  int64_t dim = wrap_dim("tensor_split", a.to_int(2), x.dim()), n = x.size(dim);
  IntList bounds;
  int64_t at = 0;
  for (int64_t i = 0; i + 1 < sections; ++i) {
    at += n / sections + (i < n % sections ? 1 : 0);
    bounds.push_back(at);
  }
  split_at(a, x, dim, bounds);
}

void tensor_split_indices(Args& a) {
  TensorRef x = a.tensor(0);
  if (x.dim() == 0) fail(TS_ERROR_VALUE, "tensor_split: expected at least a 1-dimensional tensor, but got a tensor with 0 dims");
  auto idx = a.int_list(1);
  int64_t dim = wrap_dim("tensor_split", a.to_int(2), x.dim());
  split_at(a, x, dim, IntList(idx.begin(), idx.end()));
}

void broadcast_tensors(Args& a) {
  std::vector<TensorRef> ts = a.tensor_list(0);
  IntList shape = broadcast_shape("broadcast_tensors", ts);
  std::vector<TensorRef> out;
  for (const auto& t : ts) out.push_back(ops::expand(t, shape));
  return_tensor_list(a, out);
}

// torch.cross: dim None means the first dim of size 3 (after broadcasting).
void cross(Args& a) {
  TensorRef x = a.tensor(0), y = a.tensor(1);
  IntList shape = broadcast_shape("cross", {x, y});
  auto d = a.optional_int(2);
  int64_t dim = -1;
  if (d) {
    dim = *d;
  } else {
    auto it = std::find(shape.begin(), shape.end(), 3);
    if (it == shape.end()) fail(TS_ERROR_VALUE, "cross: no dimension of size 3 in input");
    dim = int64_t(it - shape.begin());
  }
  a.return_tensor(ops::linalg_cross(ops::expand(x, shape), ops::expand(y, shape), dim));
}

// unique_dim: the distinct slices along `dim`, sorted lexicographically (stable sorts by each
// element of the slices, last to first), with inverse and counts.
void unique_dim(Args& a) {
  TensorRef x = a.tensor(0);
  int64_t dim = wrap_dim("unique_dim", a.to_int(1), x.dim());
  bool return_inverse = a.to_bool(3), return_counts = a.to_bool(4);
  const IntList source{dim}, destination{0};
  TensorRef rows = ops::contiguous(movedim_to(x, source, destination));
  int64_t n = rows.dim() ? rows.size(0) : 1;
  TensorRef flat = ops::reshape(rows, {n, -1});
  int64_t k = flat.size(1);
  TensorRef order = ops::arange(Scalar(n), int32_t(TS_INT64), x.device());
  for (int64_t c = k - 1; c >= 0; --c) {
    TensorRef key = ops::index_select(ops::select(flat, 1, c), 0, order);
    auto [v, idx] = ops::sort(key, std::optional<bool>(true), int64_t(0), false);
    order = ops::index_select(order, 0, idx);
  }
  TensorRef sorted = ops::index_select(flat, 0, order);
  TensorRef starts = n == 0 ? ops::zeros({0}, int32_t(TS_BOOL), x.device())
                   : n == 1 ? ops::ones({1}, int32_t(TS_BOOL), x.device())
                            : ops::cat({ops::ones({1}, int32_t(TS_BOOL), x.device()),
                                        ops::gt(ops::sum(ops::ne(ops::narrow(sorted, 0, 1, n - 1), ops::narrow(sorted, 0, 0, n - 1)),
                                                         IntList{1}, false), Scalar(0))}, 0);
  TensorRef firsts = ops::masked_select(ops::arange(Scalar(n), int32_t(TS_INT64), x.device()), starts);
  IntList out_shape = shape_of(rows);
  out_shape[0] = firsts.numel();
  TensorRef values = movedim_to(ops::reshape(ops::index_select(sorted, 0, firsts), out_shape), destination, source);
  TensorRef group = ops::sub(ops::cumsum(starts, 0), Scalar(1));
  TensorRef inverse = return_inverse ? ops::scatter(ops::zeros({n}, int32_t(TS_INT64), x.device()), 0, order, group)
                                     : ops::zeros({0}, int32_t(TS_INT64), x.device());
  TensorRef counts = return_counts ? ops::bincount(group, TensorRef(), firsts.numel()) : ops::zeros({0}, int32_t(TS_INT64), x.device());
  return_tensors(a, {ops::contiguous(values), inverse, counts});
}

TensorRef at_least(const TensorRef& t, int64_t dims) {
  if (t.dim() >= dims) return t;
  if (dims == 1) return ops::reshape(t, {t.numel()});
  if (dims == 2) return t.dim() == 0 ? ops::reshape(t, {1, 1}) : ops::unsqueeze(t, 0);
  // 3: 0-d -> [1, 1, 1], 1-d [n] -> [1, n, 1], 2-d [m, n] -> [m, n, 1]
  if (t.dim() == 0) return ops::reshape(t, {1, 1, 1});
  if (t.dim() == 1) return ops::reshape(t, {1, t.size(0), 1});
  return ops::unsqueeze(t, 2);
}

std::vector<TensorRef> nonempty_list(Args& a, const char* op) {
  std::vector<TensorRef> ts = a.tensor_list(0);
  if (ts.empty()) fail(TS_ERROR_VALUE, op, " expects a non-empty TensorList");
  return ts;
}

void hstack(Args& a) {
  std::vector<TensorRef> ts = nonempty_list(a, "hstack");
  for (auto& t : ts) t = at_least(t, 1);
  a.return_tensor(ops::cat(ts, ts[0].dim() == 1 ? 0 : 1));
}
void vstack(Args& a) {
  std::vector<TensorRef> ts = nonempty_list(a, "vstack");
  for (auto& t : ts) t = at_least(t, 2);
  a.return_tensor(ops::cat(ts, 0));
}
void dstack(Args& a) {
  std::vector<TensorRef> ts = nonempty_list(a, "dstack");
  for (auto& t : ts) t = at_least(t, 3);
  a.return_tensor(ops::cat(ts, 2));
}
void column_stack(Args& a) {
  std::vector<TensorRef> ts = nonempty_list(a, "column_stack");
  for (auto& t : ts) t = t.dim() <= 1 ? ops::reshape(t, {t.numel(), 1}) : t;
  a.return_tensor(ops::cat(ts, 1));
}

// diff: n-th forward difference along dim, with optional prepend / append.
void diff(Args& a) {
  TensorRef x = a.tensor(0);
  int64_t n = a.to_int(1);
  if (x.dim() == 0) fail(TS_ERROR_VALUE, "diff expects input to be at least one-dimensional");
  if (n < 0) fail(TS_ERROR_VALUE, "order must be non-negative but got ", n);
  int64_t dim = wrap_dim("diff", a.to_int(2), x.dim());
  std::vector<TensorRef> parts;
  if (auto p = a.optional_tensor(3)) parts.push_back(p->dim() ? *p : ops::expand(*p, [&] { IntList s = shape_of(x); s[size_t(dim)] = 1; return s; }()));
  parts.push_back(x);
  if (auto q = a.optional_tensor(4)) parts.push_back(q->dim() ? *q : ops::expand(*q, [&] { IntList s = shape_of(x); s[size_t(dim)] = 1; return s; }()));
  TensorRef out = parts.size() > 1 ? ops::cat(parts, dim) : x;
  for (int64_t i = 0; i < n && out.size(dim) > 0; ++i) {
    int64_t len = out.size(dim) - 1;
    TensorRef hi = ops::narrow(out, dim, 1, len), lo = ops::narrow(out, dim, 0, len);
    out = out.dtype() == TS_BOOL ? ops::ne(hi, lo) : ops::sub(hi, lo);
  }
  a.return_tensor(out.handle() == x.handle() ? ops::clone(x) : std::move(out));
}

void flipud(Args& a) {
  TensorRef x = a.tensor(0);
  if (x.dim() < 1) fail(TS_ERROR_VALUE, "Input must be >= 1-d.");
  a.return_tensor(ops::flip(x, {0}));
}
void fliplr(Args& a) {
  TensorRef x = a.tensor(0);
  if (x.dim() < 2) fail(TS_ERROR_VALUE, "Input must be >= 2-d.");
  a.return_tensor(ops::flip(x, {1}));
}

// signbit: the sign bit set (-0.0 and negative NaN included).
void signbit(Args& a) {
  TensorRef x = a.tensor(0);
  if (!sdk::is_floating(x.dtype())) return a.return_tensor(ops::lt(x, Scalar(0)));
  a.return_tensor(ops::lt(ops::copysign(ops::ones({}, x.dtype(), x.device()), x), Scalar(0)));
}

// isin: each element compared with every test element (broadcast), any match.
void isin(Args& a) {
  TensorRef e = a.tensor(0), test = ops::reshape(a.tensor(1), {-1});
  bool invert = a.to_bool(3);
  TensorRef flat = ops::reshape(e, {-1, 1});
  TensorRef found = ops::gt(ops::sum(ops::eq(flat, ops::unsqueeze(test, 0)), IntList{1}, false), Scalar(0));
  if (invert) found = ops::logical_not(found);
  a.return_tensor(ops::reshape(found, shape_of(e)));
}

// heaviside(x, values): 0 below zero, values at zero, 1 above.
void heaviside(Args& a) {
  TensorRef x = a.tensor(0), v = a.tensor(1);
  if (x.dtype() != v.dtype())
    fail(TS_ERROR_TYPE, "heaviside is not yet implemented for tensors with different dtypes");
  TensorRef one = ops::ones({}, x.dtype(), x.device()), zero = zero_like_scalar(x);
  a.return_tensor(ops::where(ops::eq(x, Scalar(0)), v, ops::where(ops::gt(x, Scalar(0)), one, zero)));
}

}  // namespace

void register_everyday(sdk::Registrar& reg) {
  composite(reg, "unfold", unfold);
  composite(reg, "tensor_split.sections", tensor_split_sections);
  composite(reg, "tensor_split.indices", tensor_split_indices);
  composite(reg, "broadcast_tensors", broadcast_tensors);
  composite(reg, "cross", cross);
  composite(reg, "unique_dim", unique_dim);
  composite(reg, "hstack", hstack);
  composite(reg, "vstack", vstack);
  composite(reg, "dstack", dstack);
  composite(reg, "column_stack", column_stack);
  composite(reg, "diff", diff);
  composite(reg, "flipud", flipud);
  composite(reg, "fliplr", fliplr);
  composite(reg, "signbit", signbit);
  composite(reg, "isin.Tensor_Tensor", isin);
  composite(reg, "heaviside", heaviside);
}

}  // namespace tessera::composites

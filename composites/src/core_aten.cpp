// The rest of PyTorch's Core ATen IR under its own names and schemas: aliases of operators Tessera
// has under other names, and short decompositions (pads, upsampling, scatters, splits).
#include "composite.h"

#include <cmath>
#include <limits>

namespace tessera::composites {
namespace {

// A new view of x with x's own geometry.
TensorRef same_view(const TensorRef& x) {
  IntList identity;
  for (int64_t d = 0; d < x.dim(); ++d) identity.push_back(d);
  return ops::permute(x, identity);
}

void alias(Args& a) { a.return_tensor(same_view(a.tensor(0))); }

void adaptive_avg_pool2d(Args& a) {
  auto size = a.int_list(1);
  a.return_tensor(ops::adaptive_avg_pool2d(a.tensor(0), IntList(size.begin(), size.end())));
}
void adaptive_avg_pool2d_backward(Args& a) { a.return_tensor(ops::adaptive_avg_pool2d_backward(a.tensor(0), a.tensor(1))); }

void softmax_impl(Args& a, bool log) {
  TensorRef x = a.tensor(0);
  std::optional<int32_t> dtype;
  if (a.to_bool(2)) dtype = int32_t(TS_FLOAT32);  // half_to_float
  a.return_tensor(log ? ops::log_softmax(x, a.to_int(1), dtype) : ops::softmax(x, a.to_int(1), dtype));
}
void softmax(Args& a) { softmax_impl(a, false); }
void log_softmax(Args& a) { softmax_impl(a, true); }

void to_copy(Args& a) {
  TensorRef x = a.tensor(0);
  int32_t dtype = a.optional_dtype(1).value_or(x.dtype());
  if (auto d = a.optional_device(2); d && (d->type != x.device().type || d->index != x.device().index)) {
    TensorRef out = ops::empty(shape_of(x), dtype, *d);
    ops::copy_(out, x);
    return a.return_tensor(std::move(out));
  }
  a.return_tensor(ops::to(x, dtype, false, true));
}

void batch_norm_legit(Args& a) {
  auto [out, mean, invstd] = ops::native_batch_norm(a.tensor(0), a.optional_tensor(1).value_or(TensorRef()),
                                                    a.optional_tensor(2).value_or(TensorRef()), a.tensor(3), a.tensor(4),
                                                    a.to_bool(5), a.to_double(6), a.to_double(7));
  return_tensors(a, {out, mean, invstd});
}
void batch_norm_no_stats(Args& a) {
  auto [out, mean, invstd] = ops::native_batch_norm(a.tensor(0), a.optional_tensor(1).value_or(TensorRef()),
                                                    a.optional_tensor(2).value_or(TensorRef()), TensorRef(), TensorRef(),
                                                    a.to_bool(3), a.to_double(4), a.to_double(5));
  return_tensors(a, {out, mean, invstd});
}
void batch_norm_no_training(Args& a) {
  auto [out, mean, invstd] = ops::native_batch_norm(a.tensor(0), a.optional_tensor(1).value_or(TensorRef()),
                                                    a.optional_tensor(2).value_or(TensorRef()), a.tensor(3), a.tensor(4),
                                                    false, a.to_double(5), a.to_double(6));
  return_tensors(a, {out, mean, invstd});
}

void cdist_forward(Args& a) { a.return_tensor(ops::cdist(a.tensor(0), a.tensor(1), a.to_double(2), a.optional_int(3))); }

// pdist: the distances of every pair i < j of rows, in row-major order of the pairs.
void pdist_forward(Args& a) {
  TensorRef x = a.tensor(0);
  if (x.dim() != 2) fail(TS_ERROR_VALUE, "pdist only supports 2D tensors, got: ", x.dim(), "D");
  int64_t n = x.size(0);
  TensorRef pairs = ops::triu_indices(n, n, 1, int32_t(TS_INT64), x.device());
  TensorRef d = ops::cdist(x, x, a.to_double(1), std::nullopt);
  a.return_tensor(ops::index(d, {ops::select(pairs, 0, 0), ops::select(pairs, 0, 1)}));
}

void local_scalar_dense(Args& a) {
  TensorRef x = a.tensor(0);
  if (x.numel() != 1) fail(TS_ERROR_VALUE, "_local_scalar_dense: a Tensor with ", x.numel(), " elements cannot be converted to Scalar");
  TensorRef c = ops::contiguous(x);
  if (x.device().type != 0) {  // a device's value: copied to the host first
    TensorRef host = ops::empty(shape_of(x), x.dtype(), ts_device{0, 0});
    ops::copy_(host, c);
    c = host;
  }
  if (sdk::is_floating(x.dtype())) return a.returns({sdk::value(*ops::to(c, int32_t(TS_FLOAT64)).data<double>())});
  if (x.dtype() == TS_BOOL) return a.returns({sdk::value(*c.data<bool>())});
  a.returns({sdk::value(*ops::to(c, int32_t(TS_INT64)).data<int64_t>())});
}

TensorRef nonzero_any(const TensorRef& x, std::optional<IntList> dims, bool keepdim) {
  return ops::gt(ops::sum(ops::ne(x, Scalar(0)), dims, keepdim), Scalar(0));
}
void any_all(Args& a) { a.return_tensor(nonzero_any(a.tensor(0), std::nullopt, false)); }
void any_dim(Args& a) { a.return_tensor(nonzero_any(a.tensor(0), IntList{a.to_int(1)}, a.to_bool(2))); }
void any_dims(Args& a) {
  auto d = a.optional_int_list(1);
  a.return_tensor(nonzero_any(a.tensor(0), d ? std::optional<IntList>(IntList(d->begin(), d->end())) : std::nullopt, a.to_bool(2)));
}

// constant_pad_nd: pad[0], pad[1] pad the last dim (before, after), pad[2], pad[3] the one before
// it...; negative pads crop.
void constant_pad_nd(Args& a) {
  TensorRef x = a.tensor(0);
  auto pad = a.int_list(1);
  Scalar value(a.scalar(2));
  if (pad.size() % 2 != 0) fail(TS_ERROR_VALUE, "constant_pad_nd: Length of pad must be even but instead it equals ", pad.size());
  if (int64_t(pad.size() / 2) > x.dim())
    fail(TS_ERROR_VALUE, "constant_pad_nd: Length of pad should be no more than twice the number of dimensions of the input. Pad length is ",
         pad.size(), " while the input has ", x.dim(), " dimensions.");
  TensorRef out = x;
  for (size_t i = 0; i < pad.size() / 2; ++i) {
    int64_t d = x.dim() - 1 - int64_t(i), before = pad[2 * i], after = pad[2 * i + 1];
    if (before < 0) out = ops::narrow(out, d, -before, out.size(d) + before);
    if (after < 0) out = ops::narrow(out, d, 0, out.size(d) + after);
    std::vector<TensorRef> parts;
    IntList side = shape_of(out);
    if (before > 0) {
      side[size_t(d)] = before;
      parts.push_back(ops::full(side, value, x.dtype(), x.device()));
    }
    parts.push_back(out);
    if (after > 0) {
      side[size_t(d)] = after;
      parts.push_back(ops::full(side, value, x.dtype(), x.device()));
    }
    if (parts.size() > 1) out = ops::cat(parts, d);
  }
  a.return_tensor(out.handle() == x.handle() ? ops::clone(x) : std::move(out));
}

// Reflection / replication padding of the last k dims: one index_select per padded dim.
TensorRef pad_indices(int64_t n, int64_t before, int64_t after, bool reflect, ts_device device) {
  TensorRef i = ops::arange(Scalar(-before), Scalar(n + after), Scalar(1), int32_t(TS_INT64), device);
  if (!reflect) return ops::clamp(i, Scalar(0), Scalar(n - 1));
  TensorRef j = ops::abs(i);  // reflect at the start, then at the end
  return ops::where(ops::ge(j, Scalar(n)), ops::sub(ops::full({}, Scalar(2 * (n - 1)), int32_t(TS_INT64), device), j), j);
}

void pad_impl(Args& a, int k, bool reflect, const char* op) {
  TensorRef x = a.tensor(0);
  auto pad = a.int_list(1);
  if (int64_t(pad.size()) != 2 * k) fail(TS_ERROR_VALUE, op, ": padding size is expected to be ", 2 * k, ", but got: ", pad.size());
  if (x.dim() < k + 1 || x.dim() > k + 2)
    fail(TS_ERROR_VALUE, op, ": Expected ", k + 1, "D or ", k + 2, "D (batch mode) tensor with possibly 0 batch size, got ", x.dim(), "D");
  TensorRef out = x;
  for (int i = 0; i < k; ++i) {
    int64_t d = x.dim() - 1 - i, before = pad[size_t(2 * i)], after = pad[size_t(2 * i + 1)], n = x.size(d);
    if (reflect && (before >= n || after >= n))
      fail(TS_ERROR_VALUE, op, ": Padding size should be less than the corresponding input dimension, but got: padding (",
           before, ", ", after, ") at dimension ", d, " of input ", sdk::shape_text(x.sizes()));
    out = ops::index_select(out, d, pad_indices(n, before, after, reflect, x.device()));
  }
  a.return_tensor(std::move(out));
}
void reflection_pad1d(Args& a) { pad_impl(a, 1, true, "reflection_pad1d"); }
void reflection_pad2d(Args& a) { pad_impl(a, 2, true, "reflection_pad2d"); }
void reflection_pad3d(Args& a) { pad_impl(a, 3, true, "reflection_pad3d"); }
void replication_pad2d(Args& a) { pad_impl(a, 2, false, "replication_pad2d"); }
void replication_pad3d(Args& a) { pad_impl(a, 3, false, "replication_pad3d"); }

void copy(Args& a) {
  TensorRef self = a.tensor(0), src = a.tensor(1);
  a.return_tensor(ops::contiguous(ops::to(ops::expand(src, shape_of(self)), self.dtype(), false, true)));
}

void div_scalar_mode(Args& a) {
  TensorRef x = a.tensor(0);
  auto mode = a.optional_str(2);
  std::string m = mode ? std::string(*mode) : std::string();
  a.return_tensor(ops::div(x, scalar_tensor(x, a.scalar(1)), mode ? m.c_str() : nullptr));
}

void elu(Args& a) {
  TensorRef x = a.tensor(0);
  double alpha = a.scalar(1).to_double(), scale = a.scalar(2).to_double(), input_scale = a.scalar(3).to_double();
  TensorRef negative = ops::mul(ops::expm1(ops::mul(x, Scalar(input_scale))), Scalar(alpha * scale));
  a.return_tensor(ops::where(ops::gt(x, Scalar(0)), ops::mul(x, Scalar(scale)), negative));
}

void empty_memory_format(Args& a) {
  auto size = a.int_list(0);
  a.return_tensor(ops::empty(IntList(size.begin(), size.end()), a.optional_dtype(1), a.optional_device(2)));
}

void empty_strided(Args& a) {
  auto size = a.int_list(0), stride = a.int_list(1);
  if (size.size() != stride.size()) fail(TS_ERROR_VALUE, "empty_strided: mismatch in length of strides and shape");
  int64_t extent = 1;
  for (size_t d = 0; d < size.size(); ++d) {
    if (size[d] == 0) extent = 0;
    if (extent) extent += (size[d] - 1) * stride[d];
  }
  TensorRef storage = ops::empty({extent}, a.optional_dtype(2), a.optional_device(3));
  a.return_tensor(ops::as_strided(storage, IntList(size.begin(), size.end()), IntList(stride.begin(), stride.end()), int64_t(0)));
}

void fill_scalar(Args& a) {
  TensorRef x = a.tensor(0);
  a.return_tensor(ops::full(shape_of(x), Scalar(a.scalar(1)), x.dtype(), x.device()));
}
void full_like(Args& a) {
  TensorRef x = a.tensor(0);
  a.return_tensor(ops::full(shape_of(x), Scalar(a.scalar(1)), a.optional_dtype(2).value_or(x.dtype()),
                            a.optional_device(3).value_or(x.device())));
}
void scalar_tensor_op(Args& a) {
  sdk::ScalarArg s = a.scalar(0);
  int32_t dtype = a.optional_dtype(1).value_or(sdk::host().default_float_dtype());
  a.return_tensor(ops::full({}, Scalar(s), dtype, a.optional_device(2).value_or(ts_device{0, 0})));
}

void hardtanh(Args& a) { a.return_tensor(ops::clamp(a.tensor(0), Scalar(a.scalar(1)), Scalar(a.scalar(2)))); }
void leaky_relu(Args& a) {
  TensorRef x = a.tensor(0);
  a.return_tensor(ops::where(ops::gt(x, Scalar(0)), x, ops::mul(x, Scalar(a.scalar(1)))));
}
void logical_xor(Args& a) { a.return_tensor(ops::ne(ops::ne(a.tensor(0), Scalar(0)), ops::ne(a.tensor(1), Scalar(0)))); }

// masked_scatter: self with its masked positions (row-major) taking source's leading elements.
void masked_scatter(Args& a) {
  TensorRef self = a.tensor(0), mask = a.tensor(1), source = a.tensor(2);
  if (mask.dtype() != TS_BOOL) fail(TS_ERROR_TYPE, "masked_scatter_: expected BoolTensor for mask");
  TensorRef m = ops::expand(mask, shape_of(self));
  int64_t count = ops::masked_select(self, m).numel();
  if (count > source.numel())
    fail(TS_ERROR_VALUE, "masked_scatter: Number of elements of source < number of ones in mask (", source.numel(), " < ", count, ")");
  TensorRef values = ops::narrow(ops::reshape(source, {-1}), 0, 0, count);
  a.return_tensor(ops::index_put(self, {ops::contiguous(m)}, values, false));
}

void extreme_dim(Args& a, bool is_max) {
  TensorRef x = a.tensor(0);
  int64_t dim = a.to_int(1);
  bool keepdim = a.to_bool(2);
  if (x.dim() > 0 && x.size(wrap_dim(is_max ? "max" : "min", dim, x.dim())) == 0)
    fail(TS_ERROR_INDEX, is_max ? "max" : "min", "(): Expected reduction dim ", dim, " to have non-zero size.");
  TensorRef v = is_max ? ops::amax(x, IntList{dim}, keepdim) : ops::amin(x, IntList{dim}, keepdim);
  TensorRef i = is_max ? ops::argmax(x, dim, keepdim) : ops::argmin(x, dim, keepdim);
  return_tensors(a, {v, i});
}
void max_dim(Args& a) { extreme_dim(a, true); }
void min_dim(Args& a) { extreme_dim(a, false); }

void mean_all(Args& a) { a.return_tensor(ops::mean(a.tensor(0), std::nullopt, false, a.optional_dtype(1))); }
void prod_all(Args& a) { a.return_tensor(ops::prod(a.tensor(0), std::nullopt, false, a.optional_dtype(1))); }
void prod_dim_int(Args& a) { a.return_tensor(ops::prod(a.tensor(0), IntList{a.to_int(1)}, a.to_bool(2), a.optional_dtype(3))); }

void pow_scalar(Args& a) {
  TensorRef e = a.tensor(1);
  a.return_tensor(ops::pow(scalar_tensor(e, a.scalar(0)), e));
}

void var_dim(Args& a) {
  auto d = a.optional_int_list(1);
  std::optional<IntList> dims;
  if (d) dims = IntList(d->begin(), d->end());
  a.return_tensor(ops::var(a.tensor(0), dims, Scalar(a.to_bool(2) ? 1 : 0), a.to_bool(3)));
}

// The scatters write src into the selected part of a copy of self: index_put, functionally.
void select_scatter(Args& a) {
  TensorRef self = a.tensor(0), src = a.tensor(1);
  int64_t dim = wrap_dim("select_scatter", a.to_int(2), self.dim()), index = a.to_int(3);
  if (index < 0) index += self.size(dim);
  std::vector<TensorRef> indices(static_cast<size_t>(dim));
  indices.push_back(ops::full({1}, Scalar(index), int32_t(TS_INT64), self.device()));
  a.return_tensor(ops::index_put(self, indices, ops::unsqueeze(src, dim), false));
}

void slice_scatter(Args& a) {
  TensorRef self = a.tensor(0), src = a.tensor(1);
  int64_t dim = wrap_dim("slice_scatter", a.to_int(2), self.dim()), n = self.size(dim);
  int64_t start = a.optional_int(3).value_or(0), end = a.optional_int(4).value_or(n), step = a.to_int(5);
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  std::vector<TensorRef> indices(static_cast<size_t>(dim));
  indices.push_back(ops::arange(Scalar(start), Scalar(end), Scalar(step), int32_t(TS_INT64), self.device()));
  a.return_tensor(ops::index_put(self, indices, src, false));
}

void split_with_sizes(Args& a) {
  TensorRef x = a.tensor(0);
  auto sizes = a.int_list(1);
  int64_t dim = wrap_dim("split_with_sizes", a.to_int(2), x.dim()), at = 0, total = 0;
  for (int64_t s : sizes) total += s;
  if (total != x.size(dim))
    fail(TS_ERROR_VALUE, "split_with_sizes expects split_sizes to sum exactly to ", x.size(dim), " (input tensor's size at dimension ",
         dim, "), but got split_sizes=", sdk::shape_text(sizes));
  std::vector<TensorRef> parts;
  for (int64_t s : sizes) {
    parts.push_back(ops::narrow(x, dim, at, s));
    at += s;
  }
  return_tensor_list(a, parts);
}

void squeeze_dims(Args& a) {
  TensorRef x = a.tensor(0);
  auto dims = a.int_list(1);
  IntList wrapped;
  for (int64_t d : dims) wrapped.push_back(wrap_dim("squeeze", d, x.dim()));
  std::sort(wrapped.rbegin(), wrapped.rend());
  TensorRef out = x;
  for (int64_t d : wrapped) out = ops::squeeze(out, d);
  a.return_tensor(out.handle() == x.handle() ? same_view(x) : std::move(out));
}

void sym_numel(Args& a) { a.returns({sdk::value(a.tensor(0).numel())}); }
void sym_size(Args& a) {
  TensorRef x = a.tensor(0);
  a.returns({sdk::value(x.size(wrap_dim("sym_size", a.to_int(1), x.dim())))});
}
void sym_stride(Args& a) {
  TensorRef x = a.tensor(0);
  a.returns({sdk::value(x.stride(wrap_dim("sym_stride", a.to_int(1), x.dim())))});
}
void sym_storage_offset(Args& a) { a.returns({sdk::value(a.tensor(0).storage_offset())}); }

// The output size of an upsampling: output_size, or floor(input * scale).
IntList upsample_size(const char* op, const TensorRef& x, Args& a, int scale_arg) {
  if (x.dim() != 4) fail(TS_ERROR_VALUE, op, ": expected a 4-D input (N, C, H, W), got ", x.dim(), "-D");
  auto size = a.optional_int_list(1);
  const ts_value& sv = a.value(scale_arg);
  if (size) return IntList(size->begin(), size->end());
  if (sv.tag != TS_VALUE_DOUBLE_LIST || sv.u.doubles.size != 2) fail(TS_ERROR_VALUE, op, ": either output_size or scale_factors must be given");
  return {int64_t(std::floor(double(x.size(2)) * sv.u.doubles.data[0])), int64_t(std::floor(double(x.size(3)) * sv.u.doubles.data[1]))};
}

// Source positions per output position along spatial dim i (0: H, 1: W): 1 / scale when the caller
// gave scale_factors (as PyTorch, so a 1.7x upsample samples at 1/1.7 steps, not in/out), else in / out.
double upsample_step(Args& a, int scale_arg, int i, int64_t in, int64_t out) {
  const ts_value& sv = a.value(scale_arg);
  if (!a.optional_int_list(1) && sv.tag == TS_VALUE_DOUBLE_LIST && sv.u.doubles.size == 2 && sv.u.doubles.data[i] > 0)
    return 1.0 / sv.u.doubles.data[i];
  return double(in) / double(out);
}

// The source index of each output position (nearest: floor(dst * step)).
TensorRef nearest_indices(int64_t in, int64_t out, double step, ts_device device) {
  TensorRef dst = ops::arange(Scalar(out), int32_t(TS_FLOAT64), device);
  TensorRef src = ops::floor(ops::mul(dst, Scalar(step)));
  return ops::to(ops::clamp(src, Scalar(0), Scalar(in - 1)), int32_t(TS_INT64));
}

void upsample_nearest2d(Args& a) {
  TensorRef x = a.tensor(0);
  IntList size = upsample_size("upsample_nearest2d", x, a, 2);
  const double step_h = upsample_step(a, 2, 0, x.size(2), size[0]), step_w = upsample_step(a, 2, 1, x.size(3), size[1]);
  TensorRef rows = ops::index_select(x, 2, nearest_indices(x.size(2), size[0], step_h, x.device()));
  a.return_tensor(ops::index_select(rows, 3, nearest_indices(x.size(3), size[1], step_w, x.device())));
}

// Linear interpolation along one dim: the two neighbours' rows weighted by the distance.
TensorRef lerp_along(const TensorRef& x, int64_t dim, int64_t out, bool align_corners, double step) {
  int64_t in = x.size(dim);
  TensorRef dst = ops::arange(Scalar(out), int32_t(TS_FLOAT64), x.device());
  TensorRef src = align_corners ? ops::mul(dst, Scalar(out > 1 ? double(in - 1) / double(out - 1) : 0.0))
                                : ops::clamp(ops::sub(ops::mul(ops::add(dst, Scalar(0.5)), Scalar(step)), Scalar(0.5)),
                                             Scalar(0.0), std::nullopt);
  TensorRef i0 = ops::clamp(ops::floor(src), Scalar(0), Scalar(in - 1));
  TensorRef i1 = ops::clamp(ops::add(i0, Scalar(1)), Scalar(0), Scalar(in - 1));
  TensorRef w = ops::to(ops::sub(src, i0), x.dtype());
  IntList view(static_cast<size_t>(x.dim()), 1);
  view[size_t(dim)] = out;
  w = ops::reshape(w, view);
  TensorRef lo = ops::index_select(x, dim, ops::to(i0, int32_t(TS_INT64)));
  TensorRef hi = ops::index_select(x, dim, ops::to(i1, int32_t(TS_INT64)));
  return ops::add(lo, ops::mul(ops::sub(hi, lo), w));
}

void upsample_bilinear2d(Args& a) {
  TensorRef x = a.tensor(0);
  bool align_corners = a.to_bool(2);
  IntList size = upsample_size("upsample_bilinear2d", x, a, 3);
  const double step_h = upsample_step(a, 3, 0, x.size(2), size[0]), step_w = upsample_step(a, 3, 1, x.size(3), size[1]);
  a.return_tensor(lerp_along(lerp_along(x, 2, size[0], align_corners, step_h), 3, size[1], align_corners, step_w));
}

}  // namespace

void register_core_aten(sdk::Registrar& reg) {
  composite(reg, "alias", alias);
  composite(reg, "_adaptive_avg_pool2d", adaptive_avg_pool2d);
  composite(reg, "_adaptive_avg_pool2d_backward", adaptive_avg_pool2d_backward);
  composite(reg, "_softmax", softmax);
  composite(reg, "_log_softmax", log_softmax);
  composite(reg, "_to_copy", to_copy);
  composite(reg, "_native_batch_norm_legit", batch_norm_legit);
  composite(reg, "_native_batch_norm_legit.no_stats", batch_norm_no_stats);
  composite(reg, "_native_batch_norm_legit_no_training", batch_norm_no_training);
  composite(reg, "_cdist_forward", cdist_forward);
  composite(reg, "_pdist_forward", pdist_forward);
  composite(reg, "_local_scalar_dense", local_scalar_dense);
  composite(reg, "any", any_all);
  composite(reg, "any.dim", any_dim);
  composite(reg, "any.dims", any_dims);
  composite(reg, "constant_pad_nd", constant_pad_nd);
  composite(reg, "copy", copy);
  composite(reg, "div.Scalar_mode", div_scalar_mode);
  composite(reg, "elu", elu);
  composite(reg, "empty.memory_format", empty_memory_format);
  composite(reg, "empty_strided", empty_strided);
  composite(reg, "fill.Scalar", fill_scalar);
  composite(reg, "full_like", full_like);
  composite(reg, "scalar_tensor", scalar_tensor_op);
  composite(reg, "hardtanh", hardtanh);
  composite(reg, "leaky_relu", leaky_relu);
  composite(reg, "logical_xor", logical_xor);
  composite(reg, "masked_scatter", masked_scatter);
  composite(reg, "max.dim", max_dim);
  composite(reg, "min.dim", min_dim);
  composite(reg, "mean", mean_all);
  composite(reg, "prod", prod_all);
  composite(reg, "prod.dim_int", prod_dim_int);
  composite(reg, "pow.Scalar", pow_scalar);
  composite(reg, "var.dim", var_dim);
  composite(reg, "reflection_pad1d", reflection_pad1d);
  composite(reg, "reflection_pad2d", reflection_pad2d);
  composite(reg, "reflection_pad3d", reflection_pad3d);
  composite(reg, "replication_pad2d", replication_pad2d);
  composite(reg, "replication_pad3d", replication_pad3d);
  composite(reg, "select_scatter", select_scatter);
  composite(reg, "slice_scatter", slice_scatter);
  composite(reg, "split_with_sizes", split_with_sizes);
  composite(reg, "squeeze.dims", squeeze_dims);
  composite(reg, "sym_numel", sym_numel);
  composite(reg, "sym_size.int", sym_size);
  composite(reg, "sym_stride.int", sym_stride);
  composite(reg, "sym_storage_offset", sym_storage_offset);
  composite(reg, "upsample_nearest2d.vec", upsample_nearest2d);
  composite(reg, "upsample_bilinear2d.vec", upsample_bilinear2d);
}

}  // namespace tessera::composites

// Joining and indexing on the device: cat, stack (copies into regions of the result, converting
// dtypes), index_select, gather, scatter (src / value, in place too), scatter_add, index_add,
// slice_backward, select_backward. Shapes, dtypes, checks and messages as the CPU plugin's
// join.cpp, index.cpp and nn_accumulate.cpp. Every index is checked before anything is written:
// that check waits for the device (one 8-byte read), as an IndexError must be raised here.
// The indexed tensors are laid over the loop's shape as views (sdk::alias, no copy) whose
// stride along `dim` is 0: the kernel adds index * step there (indexing.cu). With duplicate
// indices, scatter keeps one of the values (which one is unspecified, unlike the CPU's last);
// scatter_add/index_add sum them in an unspecified order.
#include "more_ops.h"

#include <algorithm>
#include <cstring>

namespace tessera::gpu {
namespace {
using Shape = std::vector<int64_t>;

Shape strides_of(const TensorRef& t) { return {t.strides().begin(), t.strides().end()}; }

void check_ours(const char* op, const std::vector<TensorRef>& ts) {
  const ts_device dev = ts[0].device();
  for (size_t i = 0; i < ts.size(); ++i) {
    const ts_device d = ts[i].device();
    TS_SDK_CHECK(is_ours(d) && d.index == dev.index, TS_ERROR_VALUE, op, ": expected all tensors on ",
                 device_str(dev), ", got tensor ", i, " on ", device_str(d));
  }
}

// A 0-d tensor as a one-element 1-D view (as PyTorch treats it in these ops).
TensorRef as_1d(ts_call call, const TensorRef& t) {
  if (t.dim() > 0) return t;
  const int64_t one[1] = {1}, unit[1] = {1};
  return restride(call, t, one, unit, t.storage_offset());
}

void run_index(IndexOp op, const TensorRef& dev, Loop& L, int64_t step) {
  if (L.numel == 0) return;
  DeviceGuard guard(dev.device().index);
  launch_index(op, L, step, stream_for(dev.device().index));
}

TensorRef zeros_on(ts_call call, std::span<const int64_t> shape, int32_t dtype, ts_device device) {
  TensorRef t = empty_on(call, shape, dtype, device);
  if (t.numel()) {
    DeviceGuard guard(device.index);
    check(gpuMemsetAsync(t.data(), 0, size_t(t.numel() * t.itemsize()), stream_for(device.index)), "zeros");
  }
  return t;
}

// ---- cat / stack
int32_t promoted(const std::vector<TensorRef>& ts) {
  int32_t d = ts[0].dtype();
  for (const TensorRef& t : ts) d = sdk::promote_types(d, t.dtype());
  return d;
}

void cat_k(sdk::Args& a) {
  auto ts = a.tensor_list(0);
  TS_SDK_CHECK(!ts.empty(), TS_ERROR_VALUE, "cat: expected a non-empty list of tensors");
  check_ours("cat", ts);
  auto skipped = [](const TensorRef& t) { return t.dim() == 1 && t.size(0) == 0; };  // PyTorch's legacy rule
  const TensorRef* ref = nullptr;
  size_t ref_index = 0;
  for (size_t i = 0; i < ts.size() && !ref; ++i)
    if (!skipped(ts[i])) ref = &ts[i], ref_index = i;
  if (!ref) {
    const int64_t zero[1] = {0};
    return a.return_tensor(empty_on(a.call(), zero, promoted(ts), ts[0].device()));
  }
  for (size_t i = 0; i < ts.size(); ++i)
    TS_SDK_CHECK(ts[i].dim() != 0, TS_ERROR_VALUE, "cat: zero-dimensional tensor (at position ", i,
                 ") cannot be concatenated");
  const int64_t dim = wrap_dim("cat", a.is_none(1) ? 0 : a.to_int(1), ref->dim());
  Shape shape = ref->shape_vector();
  shape[size_t(dim)] = 0;
  for (size_t i = 0; i < ts.size(); ++i) {
    const TensorRef& t = ts[i];
    if (skipped(t)) continue;
    TS_SDK_CHECK(t.dim() == ref->dim(), TS_ERROR_VALUE, "cat: expected tensors of ", ref->dim(),
                 " dimensions (like tensor ", ref_index, ", shape ", shape_text(ref->sizes()), "), got ", t.dim(),
                 " dimensions for tensor ", i, " (shape ", shape_text(t.sizes()), ")");
    for (int64_t d = 0; d < t.dim(); ++d)
      TS_SDK_CHECK(d == dim || t.size(d) == ref->size(d), TS_ERROR_VALUE,
                   "cat: sizes of tensors must match except in dimension ", dim, "; expected size ", ref->size(d),
                   " in dimension ", d, " (like tensor ", ref_index, "), got size ", t.size(d), " for tensor ", i,
                   " (shape ", shape_text(t.sizes()), ")");
    shape[size_t(dim)] += t.size(dim);
  }
  TensorRef out = empty_on(a.call(), shape, promoted(ts), ts[0].device());
  int64_t at = 0;
  for (const TensorRef& t : ts) {
    if (skipped(t)) continue;
    if (t.numel()) {
      TensorRef region = restride(a.call(), out, t.sizes(), out.strides(), out.storage_offset() + at * out.stride(dim));
      copy_into("cat", region, t);
    }
    at += t.size(dim);
  }
  a.return_tensor(std::move(out));
}

void stack_k(sdk::Args& a) {
  auto ts = a.tensor_list(0);
  TS_SDK_CHECK(!ts.empty(), TS_ERROR_VALUE, "stack: expected a non-empty list of tensors");
  check_ours("stack", ts);
  for (size_t i = 1; i < ts.size(); ++i)
    TS_SDK_CHECK(ts[i].shape_vector() == ts[0].shape_vector(), TS_ERROR_VALUE,
                 "stack: expected each tensor to have the same shape, got ", shape_text(ts[0].sizes()),
                 " for tensor 0 and ", shape_text(ts[i].sizes()), " for tensor ", i);
  const int64_t dim = wrap_dim("stack", a.is_none(1) ? 0 : a.to_int(1), ts[0].dim() + 1);
  Shape shape = ts[0].shape_vector();
  shape.insert(shape.begin() + dim, int64_t(ts.size()));
  TensorRef out = empty_on(a.call(), shape, promoted(ts), ts[0].device());
  Shape strides = strides_of(out);
  const int64_t step = strides[size_t(dim)];
  strides.erase(strides.begin() + dim);  // input i's region: out.select(dim, i)
  for (size_t i = 0; i < ts.size(); ++i) {
    if (!ts[i].numel()) continue;
    TensorRef region = restride(a.call(), out, ts[i].sizes(), strides, out.storage_offset() + int64_t(i) * step);
    copy_into("stack", region, ts[i]);
  }
  a.return_tensor(std::move(out));
}

// ---- index_select(Tensor self, int dim, Tensor index): out.select(dim, i) = self.select(dim, index[i])
void index_select_k(sdk::Args& a) {
  const char* op = "index_select";
  TensorRef self = a.tensor(0), index = a.tensor(2);
  const int64_t dim = wrap_dim(op, a.to_int(1), self.dim());
  common_device(op, {&self, &index});
  TS_SDK_CHECK(index.dim() <= 1, TS_ERROR_VALUE, op, ": expected a 0-d or 1-D index, got ", index.dim(),
               " dimensions (shape ", shape_text(index.sizes()), ")");
  check_index_dtype(op, index);
  const int64_t size = self.dim() == 0 ? 1 : self.size(dim);
  check_index_range(a.call(), op, index, dim, size);
  if (self.dim() == 0) {  // every index is 0: the value, in index's shape
    TensorRef out = empty_on(a.call(), index.sizes(), self.dtype(), self.device());
    if (out.numel()) copy_into(op, out, self);
    return a.return_tensor(std::move(out));
  }
  Shape shape = self.shape_vector();
  shape[size_t(dim)] = index.numel();
  TensorRef out = empty_on(a.call(), shape, self.dtype(), self.device());
  Shape self_strides = strides_of(self), index_strides(shape.size(), 0);
  self_strides[size_t(dim)] = 0;
  index_strides[size_t(dim)] = index.dim() ? index.stride(0) : 0;
  TensorRef self_view = restride(a.call(), self, shape, self_strides, self.storage_offset());
  TensorRef index_view = restride(a.call(), index, shape, index_strides, index.storage_offset());
  Loop L = make_loop(op, shape, {&out, &self_view, &index_view});
  run_index(IndexOp::Gather, self, L, self.stride(dim));
  a.return_tensor(std::move(out));
}

// Shapes shared by gather and scatter (as the CPU): index has self's rank and fits inside self
// except along dim; for scatter it also fits inside src.
void check_index_shape(const char* op, const TensorRef& self, const TensorRef& index, int64_t dim,
                       const TensorRef* src) {
  TS_SDK_CHECK(index.dim() == self.dim(), TS_ERROR_VALUE, op, ": expected index to have as many dimensions as self (",
               self.dim(), "), got ", index.dim(), " (index shape ", shape_text(index.sizes()), ", self shape ",
               shape_text(self.sizes()), ")");
  for (int64_t d = 0; d < index.dim(); ++d)
    TS_SDK_CHECK(d == dim || index.size(d) <= self.size(d), TS_ERROR_VALUE, op, ": expected index.size(", d,
                 ") <= self.size(", d, "), got index shape ", shape_text(index.sizes()), " and self shape ",
                 shape_text(self.sizes()));
  if (!src) return;
  TS_SDK_CHECK(src->dim() == self.dim(), TS_ERROR_VALUE, op, ": expected src to have as many dimensions as self (",
               self.dim(), "), got ", src->dim());
  for (int64_t d = 0; d < index.dim(); ++d)
    TS_SDK_CHECK(index.size(d) <= src->size(d), TS_ERROR_VALUE, op, ": expected index.size(", d, ") <= src.size(", d,
                 "), got index shape ", shape_text(index.sizes()), " and src shape ", shape_text(src->sizes()));
}

// `t` laid over index's shape with its own strides, 0 along dim (the kernel adds index * step).
TensorRef over_index(ts_call call, const TensorRef& t, const TensorRef& index, int64_t dim, bool zero_dim) {
  Shape strides = strides_of(t);
  if (zero_dim && !strides.empty()) strides[size_t(dim)] = 0;
  return restride(call, t, index.sizes(), strides, t.storage_offset());
}

// ---- gather(Tensor self, int dim, Tensor index): out has index's shape
void gather_k(sdk::Args& a) {
  const char* op = "gather";
  TensorRef self = a.tensor(0), index = a.tensor(2);
  const int64_t dim = wrap_dim(op, a.to_int(1), self.dim());
  common_device(op, {&self, &index});
  check_index_dtype(op, index);
  check_index_shape(op, self, index, dim, nullptr);
  check_index_range(a.call(), op, index, dim, self.dim() == 0 ? 1 : self.size(dim));
  TensorRef out = empty_on(a.call(), index.sizes(), self.dtype(), self.device());
  TensorRef self_view = over_index(a.call(), self, index, dim, true);
  auto shape = index.shape_vector();
  Loop L = make_loop(op, shape, {&out, &self_view, &index});
  run_index(IndexOp::Gather, self, L, self.dim() ? self.stride(dim) : 0);
  a.return_tensor(std::move(out));
}

// The bits of a Scalar in `dtype` (low bytes of a word), as the CPU plugin converts it.
int64_t scalar_bits(const ScalarArg& value, int32_t dtype) {
  uint64_t bits = 0;
  TS_DISPATCH_ALL(dtype, sdk::fail(TS_ERROR_TYPE, "scatter: unsupported dtype ", dtype), {
    scalar_t v;
    if constexpr (std::is_same_v<scalar_t, bool>) v = value.to_double() != 0;
    else if constexpr (std::is_integral_v<scalar_t>)
      v = value.kind == ScalarArg::Double ? static_cast<scalar_t>(value.d) : static_cast<scalar_t>(value.i);
    else v = scalar_t(static_cast<sdk::opmath_t<scalar_t>>(value.to_double()));
    std::memcpy(&bits, &v, sizeof v);
  });
  return int64_t(bits);
}

TensorRef copy_of(ts_call call, const TensorRef& self) {
  TensorRef out = empty_on(call, self.sizes(), self.dtype(), self.device());
  if (out.numel()) copy_into("scatter", out, self);
  return out;
}

// scatter.src / scatter.value and scatter_ (target = a copy of self, or self).
template <bool Inplace, bool HasSrc>
void scatter_k(sdk::Args& a) {
  const char* op = Inplace ? "scatter_" : "scatter";
  TensorRef self = a.tensor(0), index = a.tensor(2);
  const int64_t dim = wrap_dim(op, a.to_int(1), self.dim());
  common_device(op, {&self, &index});
  check_index_dtype(op, index);
  std::optional<TensorRef> src;
  int64_t bits = 0;
  if (HasSrc) {
    src = a.tensor(3);
    common_device(op, {&self, &*src});
    TS_SDK_CHECK(src->dtype() == self.dtype(), TS_ERROR_TYPE, op, ": expected src of dtype ",
                 sdk::dtype_name(self.dtype()), " (like self), got ", sdk::dtype_name(src->dtype()));
  } else {
    bits = scalar_bits(a.scalar(3), self.dtype());
  }
  check_index_shape(op, self, index, dim, src ? &*src : nullptr);
  check_index_range(a.call(), op, index, dim, self.dim() == 0 ? 1 : self.size(dim));
  TensorRef target = Inplace ? self : copy_of(a.call(), self);
  TensorRef target_view = over_index(a.call(), target, index, dim, true);
  auto shape = index.shape_vector();
  Loop L;
  if (src) {
    TensorRef src_view = over_index(a.call(), *src, index, dim, false);
    L = make_loop(op, shape, {&target_view, &src_view, &index});
  } else {
    L = make_loop(op, shape, {&target_view, nullptr, &index});
    L.scalar_i = bits;
  }
  run_index(IndexOp::Scatter, self, L, target.dim() ? target.stride(dim) : 0);
  finish_output(a, Inplace, std::move(target));
}

// scatter_add(Tensor self, int dim, Tensor index, Tensor src) and scatter_add_
template <bool Inplace>
void scatter_add_k(sdk::Args& a) {
  const char* op = Inplace ? "scatter_add_" : "scatter_add";
  TensorRef self = a.tensor(0), index = a.tensor(2), src = a.tensor(3);
  common_device(op, {&self, &index, &src});
  const int64_t dim = wrap_dim(op, a.to_int(1), self.dim());
  check_index_dtype(op, index);
  TS_SDK_CHECK(src.dtype() == self.dtype(), TS_ERROR_TYPE, op, ": expected src of dtype ",
               sdk::dtype_name(self.dtype()), " (like self), got ", sdk::dtype_name(src.dtype()));
  TensorRef target = Inplace ? self : copy_of(a.call(), self);
  if (index.numel() > 0) {
    TS_SDK_CHECK(index.dim() == self.dim() && src.dim() == self.dim(), TS_ERROR_VALUE, op,
                 ": expected index and src to have as many dimensions as self (", self.dim(), "), got index shape ",
                 shape_text(index.sizes()), " and src shape ", shape_text(src.sizes()));
    for (int64_t d = 0; d < self.dim(); ++d)
      TS_SDK_CHECK(!((d != dim && index.size(d) > self.size(d)) || index.size(d) > src.size(d)), TS_ERROR_VALUE, op,
                   ": expected index.size(", d, ") <= src.size(", d, ") and, but for dim ", dim, ", <= self.size(", d,
                   "); got index shape ", shape_text(index.sizes()), ", src shape ", shape_text(src.sizes()),
                   " and self shape ", shape_text(self.sizes()));
    check_index_range(a.call(), op, index, dim, self.dim() == 0 ? 1 : self.size(dim));
    TensorRef target_view = over_index(a.call(), target, index, dim, true);
    TensorRef src_view = over_index(a.call(), src, index, dim, false);
    auto shape = index.shape_vector();
    Loop L = make_loop(op, shape, {&target_view, &src_view, &index});
    run_index(IndexOp::ScatterAdd, self, L, target.dim() ? target.stride(dim) : 0);
  }
  finish_output(a, Inplace, std::move(target));
}

// index_add(Tensor self, int dim, Tensor index, Tensor source, *, Scalar alpha=1) and index_add_
template <bool Inplace>
void index_add_k(sdk::Args& a) {
  const char* op = Inplace ? "index_add_" : "index_add";
  TensorRef self = a.tensor(0), index = a.tensor(2), source = a.tensor(3);
  const ScalarArg alpha = a.is_none(4) ? ScalarArg{ScalarArg::Int, 1, 0} : a.scalar(4);
  common_device(op, {&self, &index, &source});
  const int64_t dim = wrap_dim(op, a.to_int(1), self.dim());
  check_index_dtype(op, index);
  TS_SDK_CHECK(index.dim() <= 1, TS_ERROR_VALUE, op, ": expected a 0-d or 1-D index, got shape ",
               shape_text(index.sizes()));
  TS_SDK_CHECK(source.dtype() == self.dtype(), TS_ERROR_TYPE, op, ": expected source of dtype ",
               sdk::dtype_name(self.dtype()), " (like self), got ", sdk::dtype_name(source.dtype()));
  TS_SDK_CHECK(sdk::is_floating(self.dtype()) || alpha.kind != ScalarArg::Double, TS_ERROR_TYPE, op,
               ": expected an integral alpha for a self of dtype ", sdk::dtype_name(self.dtype()), ", got ", alpha.d);
  // source has self's shape but for `dim`, where it has one entry per index (0-d as [1]).
  const TensorRef s1 = as_1d(a.call(), self), src1 = as_1d(a.call(), source), idx1 = as_1d(a.call(), index);
  bool ok = source.dim() == self.dim() || (source.dim() <= 1 && self.dim() <= 1);
  for (int64_t d = 0; ok && d < s1.dim(); ++d)
    ok = d == dim ? src1.size(d) == index.numel() : src1.size(d) == s1.size(d);
  TS_SDK_CHECK(ok, TS_ERROR_VALUE, op, ": expected source of shape ", shape_text(self.sizes()), " but with ",
               index.numel(), " (the number of indices) in dimension ", dim, ", got ", shape_text(source.sizes()));
  check_index_range(a.call(), op, index, dim, s1.size(dim));
  TensorRef target = Inplace ? self : copy_of(a.call(), self);
  if (index.numel() > 0 && target.numel() > 0) {
    TensorRef t1 = as_1d(a.call(), target);
    auto shape = src1.shape_vector();
    Shape t_strides = strides_of(t1), i_strides(shape.size(), 0);
    t_strides[size_t(dim)] = 0;
    i_strides[size_t(dim)] = idx1.stride(0);
    TensorRef target_view = restride(a.call(), t1, shape, t_strides, t1.storage_offset());
    TensorRef index_view = restride(a.call(), idx1, shape, i_strides, idx1.storage_offset());
    Loop L = make_loop(op, shape, {&target_view, &src1, &index_view});
    L.alpha_d = alpha.to_double();
    L.alpha_i = alpha.to_int();
    run_index(IndexOp::ScatterAdd, self, L, t1.stride(dim));
  }
  finish_output(a, Inplace, std::move(target));
}

// ---- slice_backward / select_backward: zeros(input_sizes) with grad written through the view.
Shape sizes_arg(const char* op, const sdk::Args& a, int i) {
  const auto s = a.int_list(i);
  Shape sizes(s.begin(), s.end());
  for (int64_t v : sizes)
    TS_SDK_CHECK(v >= 0, TS_ERROR_VALUE, op, ": expected non-negative input_sizes, got ", shape_text(sizes));
  TS_SDK_CHECK(!sizes.empty(), TS_ERROR_VALUE, op, ": expected input_sizes of at least one dimension, got []");
  return sizes;
}

void scatter_view(sdk::Args& a, const char* op, const TensorRef& grad, const Shape& sizes, const Shape& view_sizes,
                  const Shape& view_strides, int64_t offset) {
  TS_SDK_CHECK(std::equal(view_sizes.begin(), view_sizes.end(), grad.sizes().begin(), grad.sizes().end()),
               TS_ERROR_VALUE, op, ": expected grad_output of shape ", shape_text(view_sizes), " for input_sizes ",
               shape_text(sizes), ", got ", shape_text(grad.sizes()));
  TensorRef out = zeros_on(a.call(), sizes, grad.dtype(), grad.device());
  if (grad.numel() > 0) copy_into(op, restride(a.call(), out, view_sizes, view_strides, offset), grad);
  a.return_tensor(std::move(out));
}

// slice_backward(Tensor grad_output, int[] input_sizes, int dim, int start, int end, int step)
void slice_backward_k(sdk::Args& a) {
  const char* op = "slice_backward";
  const TensorRef grad = a.tensor(0);
  common_device(op, {&grad});
  const Shape sizes = sizes_arg(op, a, 1);
  const int64_t dim = wrap_dim(op, a.to_int(2), int64_t(sizes.size()));
  int64_t start = a.to_int(3), end = a.to_int(4);
  const int64_t step = a.to_int(5);
  TS_SDK_CHECK(step > 0, TS_ERROR_VALUE, op, ": expected a positive step, got ", step);
  const int64_t size = sizes[size_t(dim)];
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = std::clamp<int64_t>(start, 0, size);
  end = std::clamp<int64_t>(end, start, size);
  Shape view_sizes = sizes, view_strides = contiguous_strides(sizes);
  const int64_t offset = start * view_strides[size_t(dim)];
  view_sizes[size_t(dim)] = (end - start + step - 1) / step;
  view_strides[size_t(dim)] *= step;
  scatter_view(a, op, grad, sizes, view_sizes, view_strides, offset);
}

// select_backward(Tensor grad_output, int[] input_sizes, int dim, int index)
void select_backward_k(sdk::Args& a) {
  const char* op = "select_backward";
  const TensorRef grad = a.tensor(0);
  common_device(op, {&grad});
  const Shape sizes = sizes_arg(op, a, 1);
  const int64_t dim = wrap_dim(op, a.to_int(2), int64_t(sizes.size()));
  int64_t index = a.to_int(3);
  const int64_t size = sizes[size_t(dim)];
  TS_SDK_CHECK(index >= -size && index < size, TS_ERROR_INDEX, op, ": index ", index,
               " is out of range for dimension ", dim, " with size ", size);
  if (index < 0) index += size;
  const Shape strides = contiguous_strides(sizes);
  Shape view_sizes = sizes, view_strides = strides;
  view_sizes.erase(view_sizes.begin() + dim);
  view_strides.erase(view_strides.begin() + dim);
  scatter_view(a, op, grad, sizes, view_sizes, view_strides, index * strides[size_t(dim)]);
}
}  // namespace

void register_indexing_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("cat", key, cat_k);
  reg.kernel("stack", key, stack_k);
  reg.kernel("index_select", key, index_select_k);
  reg.kernel("gather", key, gather_k);
  reg.kernel("scatter.src", key, scatter_k<false, true>);
  reg.kernel("scatter.value", key, scatter_k<false, false>);
  reg.kernel("scatter_.src", key, scatter_k<true, true>);
  reg.kernel("scatter_.value", key, scatter_k<true, false>);
  reg.kernel("scatter_add", key, scatter_add_k<false>);
  reg.kernel("scatter_add_", key, scatter_add_k<true>);
  reg.kernel("index_add", key, index_add_k<false>);
  reg.kernel("index_add_", key, index_add_k<true>);
  reg.kernel("slice_backward", key, slice_backward_k);
  reg.kernel("select_backward", key, select_backward_k);
}

}  // namespace tessera::gpu

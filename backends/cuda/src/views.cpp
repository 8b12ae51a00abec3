// Views: new geometry over the same device storage (the host's tensor_alias); no kernel runs,
// except reshape of a layout that cannot be viewed, which copies first (as in PyTorch).
#include "cuda_plugin.h"

#include <tessera/sdk/view_geometry.h>

#include <algorithm>
#include <optional>

namespace tessera::gpu {
namespace {
using Shape = std::vector<int64_t>;

TensorRef ours(sdk::Args& a, const char* op) {
  TensorRef self = a.tensor(0);
  common_device(op, {&self});
  return self;
}
Shape strides_of(const TensorRef& t) { return {t.strides().begin(), t.strides().end()}; }
void give(sdk::Args& a, const TensorRef& base, const Shape& shape, const Shape& strides, int64_t offset) {
  a.return_tensor(restride(a.call(), base, shape, strides, offset));
}

// The shape with one -1 inferred, checked against numel.
Shape infer_shape(const char* op, std::span<const int64_t> size, int64_t numel) {
  Shape shape(size.begin(), size.end());
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      TS_SDK_CHECK(infer < 0, TS_ERROR_VALUE, op, ": only one dimension can be inferred");
      infer = int64_t(i);
    } else {
      TS_SDK_CHECK(shape[i] >= 0, TS_ERROR_VALUE, op, ": invalid shape dimension ", shape[i]);
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    TS_SDK_CHECK(known != 0 && numel % known == 0, TS_ERROR_VALUE, op, ": shape '", shape_text(size),
                 "' is invalid for input of size ", numel);
    shape[size_t(infer)] = numel / known;
  }
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  TS_SDK_CHECK(n == numel, TS_ERROR_VALUE, op, ": shape '", shape_text(size), "' is invalid for input of size ", numel);
  return shape;
}

// Strides viewing x as `shape` without a copy, if its layout allows: every run of new dims must
// fall inside one run of old dims that are laid out contiguously with each other.
std::optional<Shape> view_strides(const TensorRef& x, const Shape& shape) {
  if (x.is_contiguous()) return contiguous_strides(shape);
  if (x.numel() == 0) return contiguous_strides(shape);
  Shape strides(shape.size(), 1);
  int64_t vd = int64_t(shape.size()) - 1;
  int64_t base = x.stride(x.dim() - 1), chunk = 1, vnumel = 1;
  for (int64_t d = x.dim() - 1; d >= 0; --d) {
    chunk *= x.size(d);
    bool ends = d == 0 || (x.size(d - 1) != 1 && x.stride(d - 1) != chunk * base);
    if (!ends) continue;
    while (vd >= 0 && (vnumel < chunk || shape[size_t(vd)] == 1)) {
      strides[size_t(vd)] = vnumel * base;
      vnumel *= shape[size_t(vd)];
      --vd;
    }
    if (vnumel != chunk) return std::nullopt;
    if (d > 0) {
      base = x.stride(d - 1);
      chunk = vnumel = 1;
    }
  }
  if (vd != -1) return std::nullopt;
  return strides;
}

void view_k(sdk::Args& a) {
  TensorRef x = ours(a, "view");
  Shape shape = infer_shape("view", a.int_list(1), x.numel());
  auto strides = view_strides(x, shape);
  TS_SDK_CHECK(strides, TS_ERROR_VALUE, "view: view size is not compatible with input tensor's size and stride (at "
               "least one dimension spans across two contiguous subspaces). Use .reshape(...) instead.");
  give(a, x, shape, *strides, x.storage_offset());
}

void reshape_k(sdk::Args& a) {
  TensorRef x = ours(a, "reshape");
  Shape shape = infer_shape("reshape", a.int_list(1), x.numel());
  if (auto strides = view_strides(x, shape)) return give(a, x, shape, *strides, x.storage_offset());
  TensorRef c = contiguous(a.call(), x, x.dtype());
  give(a, c, shape, contiguous_strides(shape), c.storage_offset());
}

void permute_k(sdk::Args& a) {
  TensorRef x = ours(a, "permute");
  auto dims = a.int_list(1);
  TS_SDK_CHECK(int64_t(dims.size()) == x.dim(), TS_ERROR_VALUE, "permute: number of dims don't match in permute ",
               "(expected ", x.dim(), ", got ", dims.size(), ")");
  Shape shape, strides;
  std::vector<bool> seen(size_t(x.dim()), false);
  for (int64_t d : dims) {
    int64_t w = wrap_dim("permute", d, x.dim());
    TS_SDK_CHECK(!seen[size_t(w)], TS_ERROR_VALUE, "permute: repeated dim ", w);
    seen[size_t(w)] = true;
    shape.push_back(x.size(w));
    strides.push_back(x.stride(w));
  }
  give(a, x, shape, strides, x.storage_offset());
}

void transpose_k(sdk::Args& a) {
  TensorRef x = ours(a, "transpose");
  Shape shape = x.shape_vector(), strides = strides_of(x);
  if (x.dim() > 0) {
    int64_t d0 = wrap_dim("transpose", a.to_int(1), x.dim()), d1 = wrap_dim("transpose", a.to_int(2), x.dim());
    std::swap(shape[size_t(d0)], shape[size_t(d1)]);
    std::swap(strides[size_t(d0)], strides[size_t(d1)]);
  }
  give(a, x, shape, strides, x.storage_offset());
}

void expand_k(sdk::Args& a) {
  TensorRef x = ours(a, "expand");
  auto size = a.int_list(1);
  int64_t lead = int64_t(size.size()) - x.dim();
  TS_SDK_CHECK(lead >= 0, TS_ERROR_VALUE, "expand: the number of sizes provided (", size.size(),
               ") must be greater or equal to the number of dimensions in the tensor (", x.dim(), ")");
  Shape shape(size.begin(), size.end()), strides(size.size(), 0);
  for (int64_t d = 0; d < int64_t(size.size()); ++d) {
    int64_t want = size[size_t(d)];
    if (d < lead) {
      TS_SDK_CHECK(want >= 0, TS_ERROR_VALUE, "expand: the expanded size ", want,
                   " isn't allowed in a leading, non-existing dimension ", d);
      continue;
    }
    int64_t have = x.size(d - lead);
    if (want == -1 || want == have) {
      shape[size_t(d)] = have;
      strides[size_t(d)] = x.stride(d - lead);
    } else {
      TS_SDK_CHECK(have == 1, TS_ERROR_VALUE, "expand: the expanded size of the tensor (", want,
                   ") must match the existing size (", have, ") at non-singleton dimension ", d, ". Target sizes: ",
                   shape_text(size), ". Tensor sizes: ", shape_text(x.sizes()));
    }
  }
  give(a, x, shape, strides, x.storage_offset());
}

template <class Keep>
void drop_dims(sdk::Args& a, const TensorRef& x, Keep keep) {
  Shape shape, strides;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (keep(d)) {
      shape.push_back(x.size(d));
      strides.push_back(x.stride(d));
    }
  give(a, x, shape, strides, x.storage_offset());
}

void squeeze_k(sdk::Args& a) {
  TensorRef x = ours(a, "squeeze");
  drop_dims(a, x, [&](int64_t d) { return x.size(d) != 1; });
}

void squeeze_dim_k(sdk::Args& a) {
  TensorRef x = ours(a, "squeeze");
  int64_t dim = wrap_dim("squeeze", a.to_int(1), x.dim());
  drop_dims(a, x, [&](int64_t d) { return d != dim || x.size(d) != 1; });
}

void unsqueeze_k(sdk::Args& a) {
  TensorRef x = ours(a, "unsqueeze");
  int64_t dim = wrap_dim("unsqueeze", a.to_int(1), x.dim() + 1);
  Shape shape = x.shape_vector(), strides = strides_of(x);
  int64_t stride = dim < x.dim() ? x.size(dim) * x.stride(dim) : 1;
  shape.insert(shape.begin() + dim, 1);
  strides.insert(strides.begin() + dim, stride);
  give(a, x, shape, strides, x.storage_offset());
}

void narrow_to(sdk::Args& a, const TensorRef& x, int64_t dim, int64_t start, int64_t length, int64_t step) {
  Shape shape = x.shape_vector(), strides = strides_of(x);
  shape[size_t(dim)] = length;
  strides[size_t(dim)] *= step;
  give(a, x, shape, strides, x.storage_offset() + start * x.stride(dim));
}

void slice_k(sdk::Args& a) {
  TensorRef x = ours(a, "slice");
  TS_SDK_CHECK(x.dim() > 0, TS_ERROR_INDEX, "slice: cannot slice a 0-d tensor");
  int64_t dim = wrap_dim("slice", a.is_none(1) ? 0 : a.to_int(1), x.dim());
  int64_t step = a.is_none(4) ? 1 : a.to_int(4);
  TS_SDK_CHECK(step > 0, TS_ERROR_VALUE, "slice: slice step must be positive, got ", step);
  int64_t size = x.size(dim);
  auto clamp = [size](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + size : i, 0, size); };
  int64_t start = clamp(a.optional_int(2).value_or(0));
  int64_t end = std::max(start, clamp(a.optional_int(3).value_or(size)));
  narrow_to(a, x, dim, start, (end - start + step - 1) / step, step);
}

void narrow_k(sdk::Args& a) {
  TensorRef x = ours(a, "narrow");
  TS_SDK_CHECK(x.dim() > 0, TS_ERROR_INDEX, "narrow: cannot narrow a 0-d tensor");
  int64_t dim = wrap_dim("narrow", a.to_int(1), x.dim());
  int64_t start = a.to_int(2), length = a.to_int(3), size = x.size(dim);
  if (start < 0) start += size;
  TS_SDK_CHECK(start >= 0 && start <= size, TS_ERROR_INDEX, "narrow: start (", a.to_int(2), ") is out of bounds for ",
               "dimension ", dim, " of size ", size);
  TS_SDK_CHECK(length >= 0 && start + length <= size, TS_ERROR_VALUE, "narrow: start (", start, ") + length (", length,
               ") exceeds dimension size (", size, ")");
  narrow_to(a, x, dim, start, length, 1);
}

void select_k(sdk::Args& a) {
  TensorRef x = ours(a, "select");
  TS_SDK_CHECK(x.dim() > 0, TS_ERROR_INDEX, "select: cannot select from a 0-d tensor");
  int64_t dim = wrap_dim("select", a.to_int(1), x.dim());
  int64_t index = a.to_int(2), size = x.size(dim);
  TS_SDK_CHECK(index >= -size && index < size, TS_ERROR_INDEX, "select: index ", index,
               " out of range for tensor of size ", shape_text(x.sizes()), " at dimension ", dim);
  if (index < 0) index += size;
  Shape shape = x.shape_vector(), strides = strides_of(x);
  shape.erase(shape.begin() + dim);
  strides.erase(strides.begin() + dim);
  give(a, x, shape, strides, x.storage_offset() + index * x.stride(dim));
}

void flatten_k(sdk::Args& a) {
  TensorRef x = ours(a, "flatten");
  if (x.dim() == 0) return give(a, x, {1}, {1}, x.storage_offset());
  int64_t s = wrap_dim("flatten", a.to_int(1), x.dim()), e = wrap_dim("flatten", a.to_int(2), x.dim());
  TS_SDK_CHECK(s <= e, TS_ERROR_VALUE, "flatten: start_dim (", s, ") cannot come after end_dim (", e, ")");
  Shape shape(x.sizes().begin(), x.sizes().begin() + s);
  int64_t n = 1;
  for (int64_t d = s; d <= e; ++d) n *= x.size(d);
  shape.push_back(n);
  shape.insert(shape.end(), x.sizes().begin() + e + 1, x.sizes().end());
  if (auto strides = view_strides(x, shape)) return give(a, x, shape, *strides, x.storage_offset());
  TensorRef c = contiguous(a.call(), x, x.dtype());
  give(a, c, shape, contiguous_strides(shape), c.storage_offset());
}
// diagonal and as_strided: the SDK's shared geometry (sdk/view_geometry.h).
void diagonal_k(sdk::Args& a) {
  TensorRef x = ours(a, "diagonal");
  sdk::ViewGeometry g = sdk::diagonal_geometry(x, a.to_int(1), a.to_int(2), a.to_int(3));
  give(a, x, g.sizes, g.strides, g.storage_offset);
}
void as_strided_k(sdk::Args& a) {
  TensorRef x = ours(a, "as_strided");
  sdk::ViewGeometry g = sdk::as_strided_geometry(x, a.int_list(1), a.int_list(2), a.optional_int(3));
  give(a, x, g.sizes, g.strides, g.storage_offset);
}
}  // namespace

void register_view_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("view", key, view_k);
  reg.kernel("reshape", key, reshape_k);
  reg.kernel("permute", key, permute_k);
  reg.kernel("transpose.int", key, transpose_k);
  reg.kernel("expand", key, expand_k);
  reg.kernel("squeeze", key, squeeze_k);
  reg.kernel("squeeze.dim", key, squeeze_dim_k);
  reg.kernel("unsqueeze", key, unsqueeze_k);
  reg.kernel("slice.Tensor", key, slice_k);
  reg.kernel("select.int", key, select_k);
  reg.kernel("narrow", key, narrow_k);
  reg.kernel("flatten.using_ints", key, flatten_k);
  reg.kernel("diagonal", key, diagonal_k);
  reg.kernel("as_strided", key, as_strided_k);
}

}  // namespace tessera::gpu

// View and shape kernels of the CPU plugin. Every op here returns an alias of its input (same
// storage, new sizes/strides/offset); only reshape and flatten copy, and only when no strides
// can describe the requested shape over the input's memory.
#include "kernels.h"
#include "strided.h"

#include <tessera/sdk/view_geometry.h>

#include <optional>

namespace tessera::cpu {

void register_join_kernels(sdk::Registrar& reg, ts_dispatch_key key);  // join.cpp

namespace {

using sdk::Args;
using sdk::TensorRef;
using strided::str;
using strided::wrap_dim;
using Shape = std::vector<int64_t>;

TensorRef alias(const Args& a, const TensorRef& self, std::span<const int64_t> shape, std::span<const int64_t> strides,
                int64_t offset) {
  return sdk::alias(a.call(), self, shape, strides, offset);
}

// Resolves one -1 in a requested shape against the number of elements.
Shape infer_shape(const char* op, std::span<const int64_t> requested, int64_t numel) {
  Shape shape(requested.begin(), requested.end());
  int64_t infer = -1, known = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == -1) {
      if (infer >= 0) sdk::fail(TS_ERROR_VALUE, op, ": only one dimension can be inferred (-1), got shape ", str(shape));
      infer = int64_t(d);
    } else if (shape[d] < 0) {
      sdk::fail(TS_ERROR_VALUE, op, ": invalid size ", shape[d], " at dimension ", d, " of shape ", str(shape));
    } else {
      known *= shape[d];
    }
  }
  if (infer >= 0) {
    if (known == 0)
      sdk::fail(TS_ERROR_VALUE, op, ": cannot infer dimension ", infer, " of shape ", str(shape),
                " for input of size ", numel, ": the other dimensions hold 0 elements");
    if (numel % known == 0) {
      shape[size_t(infer)] = numel / known;
      return shape;
    }
  } else if (known == numel) {
    return shape;
  }
  sdk::fail(TS_ERROR_VALUE, op, ": shape ", str(shape), " is invalid for input of size ", numel);
}

// Strides under which `shape` addresses the same elements, in the same row-major order, as
// (sizes, strides); nullopt when a new dimension would span two non-mergeable ones.
// The input is cut into chunks: maximal runs of dims that are contiguous with each other.
// Each new dim, innermost first, must fall entirely inside one chunk.
std::optional<Shape> view_strides(std::span<const int64_t> sizes, std::span<const int64_t> strides,
                                  std::span<const int64_t> shape) {
  if (strided::numel(sizes) == 0) return strided::contiguous_strides(shape);
  struct Chunk {
    int64_t numel, stride;  // elements in the chunk, stride of its innermost dim
  };
  std::vector<Chunk> chunks;  // innermost first
  int64_t prev_extent = -1;   // stride * size of the last dim added
  for (size_t d = sizes.size(); d-- > 0;) {
    if (sizes[d] == 1) continue;
    if (!chunks.empty() && strides[d] == prev_extent) chunks.back().numel *= sizes[d];
    else chunks.push_back({sizes[d], strides[d]});
    prev_extent = strides[d] * sizes[d];
  }
  Shape out(shape.size());
  size_t c = 0;
  int64_t remaining = chunks.empty() ? 1 : chunks[0].numel;
  int64_t stride = chunks.empty() ? 1 : chunks[0].stride;
  for (size_t d = shape.size(); d-- > 0;) {
    const int64_t n = shape[d];
    if (n != 1) {
      if (c >= chunks.size() || remaining % n != 0) return std::nullopt;
      out[d] = stride;
      stride *= n;
      remaining /= n;
      if (remaining == 1 && ++c < chunks.size()) {
        remaining = chunks[c].numel;
        stride = chunks[c].stride;
      }
    } else {
      out[d] = stride;  // any stride addresses a size-1 dim; this one keeps contiguity natural
    }
  }
  return out;
}

// A tensor with `shape` over self's elements: an alias when strides allow, else a contiguous copy.
TensorRef reshape_alias_or_copy(const Args& a, const TensorRef& self, const Shape& shape) {
  if (auto strides = view_strides(self.sizes(), self.strides(), shape))
    return alias(a, self, shape, *strides, self.storage_offset());
  static const sdk::Operator contiguous("contiguous");
  TensorRef dense = contiguous.call(a.call(), {sdk::value(self)});
  return alias(a, dense, shape, strided::contiguous_strides(shape), dense.storage_offset());
}

void view_kernel(Args& a) {
  TensorRef self = a.tensor(0);
  Shape shape = infer_shape("view", a.int_list(1), self.numel());
  auto strides = view_strides(self.sizes(), self.strides(), shape);
  if (!strides)
    sdk::fail(TS_ERROR_VALUE, "view: shape ", str(shape), " is not compatible with the input's sizes ",
              str(self.sizes()), " and strides ", str(self.strides()),
              " (a new dimension would span non-contiguous dimensions); use reshape instead");
  a.return_tensor(alias(a, self, shape, *strides, self.storage_offset()));
}

void reshape_kernel(Args& a) {
  TensorRef self = a.tensor(0);
  a.return_tensor(reshape_alias_or_copy(a, self, infer_shape("reshape", a.int_list(1), self.numel())));
}

void permute_kernel(Args& a) {
  TensorRef self = a.tensor(0);
  auto dims = a.int_list(1);
  const int64_t nd = self.dim();
  if (int64_t(dims.size()) != nd)
    sdk::fail(TS_ERROR_VALUE, "permute: expected ", nd, " dims for a tensor of ", nd, " dimensions, got ", dims.size(),
              " (", str(dims), ")");
  Shape shape(static_cast<size_t>(nd)), strides(static_cast<size_t>(nd));
  std::vector<bool> seen(size_t(nd), false);
  for (int64_t i = 0; i < nd; ++i) {
    int64_t d = wrap_dim("permute", dims[size_t(i)], nd);
    if (seen[size_t(d)]) sdk::fail(TS_ERROR_VALUE, "permute: dimension ", d, " appears more than once in ", str(dims));
    seen[size_t(d)] = true;
    shape[size_t(i)] = self.size(d);
    strides[size_t(i)] = self.stride(d);
  }
  a.return_tensor(alias(a, self, shape, strides, self.storage_offset()));
}

void transpose_kernel(Args& a) {
  TensorRef self = a.tensor(0);
  const int64_t nd = self.dim();
  int64_t d0 = wrap_dim("transpose", a.to_int(1), nd), d1 = wrap_dim("transpose", a.to_int(2), nd);
  Shape shape = self.shape_vector();
  Shape strides(self.strides().begin(), self.strides().end());
  if (nd > 0) {
    std::swap(shape[size_t(d0)], shape[size_t(d1)]);
    std::swap(strides[size_t(d0)], strides[size_t(d1)]);
  }
  a.return_tensor(alias(a, self, shape, strides, self.storage_offset()));
}

// expand: sizes align from the right; -1 keeps a size, a size-1 dim broadcasts with stride 0,
// new leading dims get stride 0.
void expand_kernel(Args& a) {
  TensorRef self = a.tensor(0);
  auto target = a.int_list(1);
  const int64_t nd = self.dim(), nt = int64_t(target.size());
  if (nt < nd)
    sdk::fail(TS_ERROR_VALUE, "expand: the number of sizes (", nt, ", ", str(target),
              ") must be at least the number of dimensions of the tensor (", nd, ", ", str(self.sizes()), ")");
  Shape shape(static_cast<size_t>(nt)), strides(static_cast<size_t>(nt));
  for (int64_t i = nt - 1; i >= 0; --i) {
    const int64_t d = i - (nt - nd);  // the matching dim of self, or < 0 for a new one
    int64_t want = target[size_t(i)];
    if (d < 0) {
      if (want < 0)
        sdk::fail(TS_ERROR_VALUE, "expand: expected a non-negative size for new leading dimension ", i, ", got ", want,
                  " in ", str(target));
      shape[size_t(i)] = want;
      strides[size_t(i)] = 0;
      continue;
    }
    const int64_t have = self.size(d);
    if (want == -1) want = have;
    if (want < 0) sdk::fail(TS_ERROR_VALUE, "expand: invalid size ", want, " at dimension ", i, " of ", str(target));
    if (want == have) {
      shape[size_t(i)] = have;
      strides[size_t(i)] = self.stride(d);
    } else if (have == 1) {
      shape[size_t(i)] = want;
      strides[size_t(i)] = 0;
    } else {
      sdk::fail(TS_ERROR_VALUE, "expand: the expanded size (", want, ") must match the existing size (", have,
                ") at non-singleton dimension ", i, "; target sizes ", str(target), ", tensor sizes ",
                str(self.sizes()));
    }
  }
  a.return_tensor(alias(a, self, shape, strides, self.storage_offset()));
}

// An alias of self without the dims for which keep(d) is false, at `offset` (default: self's).
template <class Keep>
TensorRef drop_dims(const Args& a, const TensorRef& self, Keep keep, std::optional<int64_t> offset = std::nullopt) {
  Shape shape, strides;
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (!keep(d)) continue;
    shape.push_back(self.size(d));
    strides.push_back(self.stride(d));
  }
  return alias(a, self, shape, strides, offset.value_or(self.storage_offset()));
}

void squeeze_kernel(Args& a) {
  TensorRef self = a.tensor(0);
  a.return_tensor(drop_dims(a, self, [&](int64_t d) { return self.size(d) != 1; }));
}

void squeeze_dim_kernel(Args& a) {
  TensorRef self = a.tensor(0);
  const int64_t dim = wrap_dim("squeeze", a.to_int(1), self.dim());
  // A dim whose size is not 1 is left alone, as in PyTorch.
  a.return_tensor(drop_dims(a, self, [&](int64_t d) { return d != dim || self.size(d) != 1; }));
}

void unsqueeze_kernel(Args& a) {
  TensorRef self = a.tensor(0);
  const int64_t nd = self.dim();
  const int64_t dim = wrap_dim("unsqueeze", a.to_int(1), nd + 1);
  Shape shape = self.shape_vector();
  Shape strides(self.strides().begin(), self.strides().end());
  const int64_t stride = dim < nd ? self.size(dim) * self.stride(dim) : 1;
  shape.insert(shape.begin() + dim, 1);
  strides.insert(strides.begin() + dim, stride);
  a.return_tensor(alias(a, self, shape, strides, self.storage_offset()));
}

// slice: Python semantics for start/end (negative counts from the end, out of range clamps).
void slice_kernel(Args& a) {
  TensorRef self = a.tensor(0);
  if (self.dim() == 0) sdk::fail(TS_ERROR_INDEX, "slice: cannot slice a 0-d tensor");
  const int64_t dim = wrap_dim("slice", a.is_none(1) ? 0 : a.to_int(1), self.dim());
  const int64_t step = a.is_none(4) ? 1 : a.to_int(4);
  if (step <= 0) sdk::fail(TS_ERROR_VALUE, "slice: expected a positive step, got ", step);
  const int64_t size = self.size(dim);
  auto clamp = [size](int64_t i) {
    if (i < 0) i += size;
    return std::min(std::max<int64_t>(i, 0), size);
  };
  const int64_t start = clamp(a.optional_int(2).value_or(0));
  const int64_t end = std::max(start, clamp(a.optional_int(3).value_or(size)));
  Shape shape = self.shape_vector();
  Shape strides(self.strides().begin(), self.strides().end());
  shape[size_t(dim)] = (end - start + step - 1) / step;
  strides[size_t(dim)] *= step;
  a.return_tensor(alias(a, self, shape, strides, self.storage_offset() + start * self.stride(dim)));
}

void select_kernel(Args& a) {
  TensorRef self = a.tensor(0);
  if (self.dim() == 0) sdk::fail(TS_ERROR_INDEX, "select: cannot select from a 0-d tensor");
  const int64_t dim = wrap_dim("select", a.to_int(1), self.dim());
  const int64_t size = self.size(dim);
  int64_t index = a.to_int(2);
  if (index < -size || index >= size)
    sdk::fail(TS_ERROR_INDEX, "select: index ", index, " is out of range for dimension ", dim, " with size ", size);
  if (index < 0) index += size;
  const int64_t offset = self.storage_offset() + index * self.stride(dim);
  a.return_tensor(drop_dims(a, self, [dim](int64_t d) { return d != dim; }, offset));
}

// diagonal and as_strided: the SDK's shared geometry (sdk/view_geometry.h).
void diagonal_kernel(Args& a) {
  sdk::ViewGeometry g = sdk::diagonal_geometry(a.tensor(0), a.to_int(1), a.to_int(2), a.to_int(3));
  a.return_tensor(alias(a, a.tensor(0), g.sizes, g.strides, g.storage_offset));
}

void as_strided_kernel(Args& a) {
  sdk::ViewGeometry g = sdk::as_strided_geometry(a.tensor(0), a.int_list(1), a.int_list(2), a.optional_int(3));
  a.return_tensor(alias(a, a.tensor(0), g.sizes, g.strides, g.storage_offset));
}

void narrow_kernel(Args& a) {
  TensorRef self = a.tensor(0);
  if (self.dim() == 0) sdk::fail(TS_ERROR_INDEX, "narrow: cannot narrow a 0-d tensor");
  const int64_t dim = wrap_dim("narrow", a.to_int(1), self.dim());
  const int64_t size = self.size(dim);
  int64_t start = a.to_int(2);
  const int64_t length = a.to_int(3);
  if (start < -size || start > size)
    sdk::fail(TS_ERROR_INDEX, "narrow: start ", start, " is out of range for dimension ", dim, " with size ", size);
  if (start < 0) start += size;
  if (length < 0 || start + length > size)
    sdk::fail(TS_ERROR_VALUE, "narrow: expected 0 <= length and start + length <= ", size, " (the size of dimension ",
              dim, "), got start ", start, " and length ", length);
  Shape shape = self.shape_vector();
  shape[size_t(dim)] = length;
  a.return_tensor(alias(a, self, shape, self.strides(), self.storage_offset() + start * self.stride(dim)));
}

void flatten_kernel(Args& a) {
  TensorRef self = a.tensor(0);
  const int64_t nd = self.dim();
  const int64_t start = wrap_dim("flatten", a.is_none(1) ? 0 : a.to_int(1), nd);
  const int64_t end = wrap_dim("flatten", a.is_none(2) ? -1 : a.to_int(2), nd);
  if (start > end)
    sdk::fail(TS_ERROR_VALUE, "flatten: expected start_dim (", start, ") <= end_dim (", end, ") after wrapping");
  if (nd == 0) {  // a 0-d tensor flattens to one element in one dim
    const int64_t one[1] = {1};
    a.return_tensor(alias(a, self, one, one, self.storage_offset()));
    return;
  }
  Shape shape;
  for (int64_t d = 0; d < start; ++d) shape.push_back(self.size(d));
  int64_t merged = 1;
  for (int64_t d = start; d <= end; ++d) merged *= self.size(d);
  shape.push_back(merged);
  for (int64_t d = end + 1; d < nd; ++d) shape.push_back(self.size(d));
  a.return_tensor(reshape_alias_or_copy(a, self, shape));
}

}  // namespace

void register_shape_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("view", key, view_kernel);
  reg.kernel("reshape", key, reshape_kernel);
  reg.kernel("permute", key, permute_kernel);
  reg.kernel("transpose.int", key, transpose_kernel);
  reg.kernel("expand", key, expand_kernel);
  reg.kernel("squeeze", key, squeeze_kernel);
  reg.kernel("squeeze.dim", key, squeeze_dim_kernel);
  reg.kernel("unsqueeze", key, unsqueeze_kernel);
  reg.kernel("slice.Tensor", key, slice_kernel);
  reg.kernel("select.int", key, select_kernel);
  reg.kernel("narrow", key, narrow_kernel);
  reg.kernel("diagonal", key, diagonal_kernel);
  reg.kernel("as_strided", key, as_strided_kernel);
  reg.kernel("flatten.using_ints", key, flatten_kernel);
  register_join_kernels(reg, key);
}

}  // namespace tessera::cpu

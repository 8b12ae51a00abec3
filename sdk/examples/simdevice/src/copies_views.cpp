// clone, contiguous, copy_ (into a device tensor from this device or the CPU), view, reshape, and
// the strided views autograd's formulas use: expand, unsqueeze, transpose, permute.
// Views share the arena block through the host's tensor_alias; only the geometry changes.
#include "simdev.h"

#include <tessera/sdk/view_geometry.h>

#include <algorithm>
#include <optional>

#include <cstring>

namespace simdev {

namespace {
// Copies src into dst (same shape after broadcasting src), converting dtypes.
void copy_elements(const char* op, const sdk::TensorRef& dst, const sdk::TensorRef& src) {
  auto shape = dst.shape_vector();
  Operand d = broadcast_operand(op, dst, shape), s = broadcast_operand(op, src, shape);
  if (dst.dtype() == src.dtype()) {
    walk<2>(shape, {&d, &s}, [&](auto p) { std::memcpy(p[0], p[1], size_t(d.itemsize)); });
  } else if (sdk::is_floating(dst.dtype())) {
    walk<2>(shape, {&d, &s}, [&](auto p) { store(p[0], dst.dtype(), load_double(p[1], s.dtype)); });
  } else if (sdk::is_floating(src.dtype())) {  // float -> int truncates toward zero
    walk<2>(shape, {&d, &s}, [&](auto p) {
      double v = load_double(p[1], s.dtype);
      if (dst.dtype() == TS_BOOL) store(p[0], TS_BOOL, int64_t(v != 0)); else store(p[0], dst.dtype(), int64_t(v));
    });
  } else {
    walk<2>(shape, {&d, &s}, [&](auto p) { store(p[0], dst.dtype(), load_int(p[1], s.dtype)); });
  }
}

sdk::TensorRef clone_of(ts_call call, const sdk::TensorRef& x) {
  sdk::TensorRef out = sdk::empty(call, x.sizes(), x.dtype(), x.device());
  copy_elements("clone", out, x);
  return out;
}

void require_here(const char* op, const sdk::TensorRef& x) {
  TS_SDK_CHECK(is_this_device(x.device()), TS_ERROR_VALUE, op, ": expected a ", SIMDEV_NAME, " tensor, got ",
               device_str(x.device()));
}

void clone_kernel(sdk::Args& a) {
  sdk::TensorRef x = a.tensor(0);
  require_here("clone", x);
  a.return_tensor(clone_of(a.call(), x));
}

void contiguous_kernel(sdk::Args& a) {
  sdk::TensorRef x = a.tensor(0);
  require_here("contiguous", x);
  if (x.is_contiguous()) return a.return_argument(x);
  a.return_tensor(clone_of(a.call(), x));
}

void copy_kernel(sdk::Args& a) {
  sdk::TensorRef self = a.tensor(0), src = a.tensor(1);
  require_here("copy_", self);
  // The source may be on this device (any index) or on the CPU: both are bytes the plugin can read.
  TS_SDK_CHECK(is_this_device(src.device()) || src.device().type == 0, TS_ERROR_VALUE, "copy_: cannot copy from ",
               device_str(src.device()), " into ", device_str(self.device()), "; go through the CPU");
  copy_elements("copy_", self, src);
  self.bump_version();
  a.return_argument(self);
}

std::string shape_str(std::span<const int64_t> size) {
  std::string text = "[";
  for (size_t i = 0; i < size.size(); ++i) text += sdk::cat(i ? ", " : "", size[i]);
  return text + "]";
}

// The shape with one -1 inferred, checked against numel.
std::vector<int64_t> infer_shape(const char* op, std::span<const int64_t> size, int64_t numel) {
  std::vector<int64_t> shape(size.begin(), size.end());
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
    TS_SDK_CHECK(known != 0 && numel % known == 0, TS_ERROR_VALUE, op, ": shape '", shape_str(size),
                 "' is invalid for input of size ", numel);
    shape[size_t(infer)] = numel / known;
  }
  TS_SDK_CHECK(numel_of(shape) == numel, TS_ERROR_VALUE, op, ": shape '", shape_str(size),
               "' is invalid for input of size ", numel);
  return shape;
}

// Strides for viewing x as `shape` without copying, or nothing when x's layout does not allow it:
// each run of new dims must fall inside one run of old dims that are contiguous with each other.
std::optional<std::vector<int64_t>> view_strides(const sdk::TensorRef& x, const std::vector<int64_t>& shape) {
  if (x.is_contiguous()) return contiguous_strides(shape);
  std::vector<int64_t> strides(shape.size(), 1);
  int64_t view_d = int64_t(shape.size()) - 1;
  int64_t base_stride = x.dim() ? x.stride(x.dim() - 1) : 1;  // stride of the current chunk's last dim
  int64_t chunk_numel = 1, view_numel = 1;
  for (int64_t d = x.dim() - 1; d >= 0; --d) {
    chunk_numel *= x.size(d);
    bool chunk_ends = d == 0 || (x.size(d - 1) != 1 && x.stride(d - 1) != chunk_numel * base_stride);
    if (!chunk_ends) continue;
    while (view_d >= 0 && (view_numel < chunk_numel || shape[size_t(view_d)] == 1)) {
      strides[size_t(view_d)] = view_numel * base_stride;
      view_numel *= shape[size_t(view_d)];
      --view_d;
    }
    if (view_numel != chunk_numel) return std::nullopt;
    if (d > 0) {
      base_stride = x.stride(d - 1);
      chunk_numel = view_numel = 1;
    }
  }
  if (view_d != -1) return std::nullopt;
  return strides;
}

sdk::TensorRef view_of(ts_call call, const char* op, const sdk::TensorRef& x, std::span<const int64_t> size) {
  auto shape = infer_shape(op, size, x.numel());
  auto strides = view_strides(x, shape);
  TS_SDK_CHECK(strides, TS_ERROR_VALUE, op, ": view size is not compatible with input tensor's size and stride "
               "(at least one dimension spans across two contiguous subspaces). Use .reshape(...) instead.");
  return sdk::alias(call, x, shape, *strides, sdk::host().tensor_storage_offset(x.handle()));
}

void view_kernel(sdk::Args& a) {
  sdk::TensorRef x = a.tensor(0);
  require_here("view", x);
  a.return_tensor(view_of(a.call(), "view", x, a.int_list(1)));
}

void reshape_kernel(sdk::Args& a) {
  sdk::TensorRef x = a.tensor(0);
  require_here("reshape", x);
  auto size = a.int_list(1);
  if (view_strides(x, infer_shape("reshape", size, x.numel())))
    return a.return_tensor(view_of(a.call(), "reshape", x, size));
  sdk::TensorRef copy = clone_of(a.call(), x);
  a.return_tensor(view_of(a.call(), "reshape", copy, size));
}
// A strided view of x: new geometry over the same arena block.
sdk::TensorRef restride(ts_call call, const sdk::TensorRef& x, const std::vector<int64_t>& shape,
                        const std::vector<int64_t>& strides) {
  return sdk::alias(call, x, shape, strides, sdk::host().tensor_storage_offset(x.handle()));
}

int64_t wrap(const char* op, int64_t d, int64_t ndim) {
  int64_t n = std::max<int64_t>(ndim, 1);
  TS_SDK_CHECK(d >= -n && d < n, TS_ERROR_INDEX, op, ": dimension ", d, " out of range for ", ndim, " dims");
  return d < 0 ? d + n : d;
}

// The geometry of these views is the SDK's (tessera/sdk/view_geometry.h), so every device
// accepts and refuses exactly what the CPU does.
void return_view(sdk::Args& a, const sdk::TensorRef& x, const sdk::ViewGeometry& g) {
  a.return_tensor(restride(a.call(), x, g.sizes, g.strides));
}

void expand_kernel(sdk::Args& a) {
  sdk::TensorRef x = a.tensor(0);
  require_here("expand", x);
  return_view(a, x, sdk::expand_geometry(x, a.int_list(1)));
}

void unsqueeze_kernel(sdk::Args& a) {
  sdk::TensorRef x = a.tensor(0);
  require_here("unsqueeze", x);
  return_view(a, x, sdk::unsqueeze_geometry(x, a.to_int(1)));
}

void permute_to(sdk::Args& a, const sdk::TensorRef& x, const std::vector<int64_t>& order) {
  std::vector<int64_t> shape, strides;
  for (int64_t d : order) {
    shape.push_back(x.size(d));
    strides.push_back(x.stride(d));
  }
  a.return_tensor(restride(a.call(), x, shape, strides));
}

void transpose_kernel(sdk::Args& a) {
  sdk::TensorRef x = a.tensor(0);
  require_here("transpose", x);
  return_view(a, x, sdk::transpose_geometry(x, a.to_int(1), a.to_int(2)));
}

void permute_kernel(sdk::Args& a) {
  sdk::TensorRef x = a.tensor(0);
  require_here("permute", x);
  auto dims = a.int_list(1);
  TS_SDK_CHECK(int64_t(dims.size()) == x.dim(), TS_ERROR_VALUE, "permute: expected ", x.dim(), " dims, got ",
               dims.size());
  std::vector<int64_t> order;
  std::vector<bool> seen(size_t(x.dim()), false);
  for (int64_t d : dims) {
    int64_t w = wrap("permute", d, x.dim());
    TS_SDK_CHECK(!seen[size_t(w)], TS_ERROR_VALUE, "permute: dimension ", w, " repeats");
    seen[size_t(w)] = true;
    order.push_back(w);
  }
  permute_to(a, x, order);
}
}  // namespace

void register_copies_and_views(Registrar& reg, ts_dispatch_key key) {
  reg.kernel("expand", key, expand_kernel);
  reg.kernel("unsqueeze", key, unsqueeze_kernel);
  reg.kernel("transpose.int", key, transpose_kernel);
  reg.kernel("permute", key, permute_kernel);
  reg.kernel("clone", key, clone_kernel);
  reg.kernel("contiguous", key, contiguous_kernel);
  reg.kernel("copy_", key, copy_kernel);
  reg.kernel("view", key, view_kernel);
  reg.kernel("reshape", key, reshape_kernel);
}

}  // namespace simdev

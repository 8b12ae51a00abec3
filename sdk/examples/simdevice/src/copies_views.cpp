// clone, contiguous, copy_ (into a device tensor from this device or the CPU), view, reshape.
// Views share the arena block through the host's tensor_alias; only the geometry changes.
#include "simdev.h"

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

sdk::TensorRef view_of(ts_call call, const char* op, const sdk::TensorRef& x, std::span<const int64_t> size) {
  TS_SDK_CHECK(x.is_contiguous(), TS_ERROR_VALUE, op, ": ", SIMDEV_NAME,
               " views need a contiguous input; use .reshape(...) (which copies) instead");
  auto shape = infer_shape(op, size, x.numel());
  auto strides = contiguous_strides(shape);
  return sdk::alias(call, x, shape, strides, sdk::host().tensor_storage_offset(x.handle()));
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
  if (x.is_contiguous()) return a.return_tensor(view_of(a.call(), "reshape", x, size));
  sdk::TensorRef copy = clone_of(a.call(), x);
  a.return_tensor(view_of(a.call(), "reshape", copy, size));
}
}  // namespace

void register_copies_and_views(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("clone", key, clone_kernel);
  reg.kernel("contiguous", key, contiguous_kernel);
  reg.kernel("copy_", key, copy_kernel);
  reg.kernel("view", key, view_kernel);
  reg.kernel("reshape", key, reshape_kernel);
}

}  // namespace simdev

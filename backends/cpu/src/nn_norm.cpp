// The normalization family's registration and the helpers its files share (see nn_norm.h).
#include "nn_norm.h"

#include "strided.h"
#include "tensor_iterator.h"

#include <cstring>

namespace tessera::cpu {
namespace norm {

void check_cpu_all(const char* op, std::initializer_list<const TensorRef*> tensors) {
  std::vector<const TensorRef*> defined;
  for (const TensorRef* t : tensors)
    if (t && t->defined()) defined.push_back(t);
  check_cpu(op, defined);
}

TensorRef contiguous(ts_call call, const TensorRef& t) {
  if (t.is_contiguous()) return t;
  TensorRef copy = sdk::empty(call, t.sizes(), t.dtype(), t.device());
  strided::copy_tensor(copy, t);
  return copy;
}

int32_t stat_dtype(int32_t dtype) { return dtype == TS_FLOAT16 || dtype == TS_BFLOAT16 ? TS_FLOAT32 : dtype; }

namespace {
// A 0-d tensor walked as one element in one dim.
struct Walk {
  std::vector<int64_t> sizes, strides;
  explicit Walk(const TensorRef& t) : sizes(t.shape_vector()), strides(t.strides().begin(), t.strides().end()) {
    if (sizes.empty()) sizes = {1}, strides = {0};
  }
};
}  // namespace

std::vector<double> read_values(const char* op, const TensorRef& t, const char* what) {
  require_floating(op, t, what);
  std::vector<double> v;
  v.reserve(size_t(t.numel()));
  Walk w(t);
  TS_DISPATCH_FLOAT(t.dtype(), break, {
    const scalar_t* p = t.data<scalar_t>();
    strided::for_each_offset<1>(w.sizes, {w.strides.data()},
                                [&](const std::array<int64_t, 1>& off) { v.push_back(load(p[off[0]])); });
  });
  return v;
}

std::vector<double> optional_values(const char* op, const std::optional<TensorRef>& t, std::span<const int64_t> shape,
                                    const char* what) {
  if (!t) return {};
  require_floating(op, *t, what);
  require_shape(op, *t, shape, what);
  return read_values(op, *t, what);
}

void write_values(const TensorRef& t, std::span<const double> v) {
  Walk w(t);
  size_t i = 0;
  TS_DISPATCH_FLOAT(t.dtype(), sdk::fail(TS_ERROR_TYPE, "write_values: unsupported dtype"), {
    scalar_t* p = t.data<scalar_t>();
    strided::for_each_offset<1>(w.sizes, {w.strides.data()},
                                [&](const std::array<int64_t, 1>& off) { p[off[0]] = store<scalar_t>(v[i++]); });
  });
}

TensorRef tensor_of(ts_call call, std::span<const int64_t> shape, int32_t dtype, std::span<const double> v) {
  TensorRef t = sdk::empty(call, shape, dtype, kCpuDevice);
  write_values(t, v);
  return t;
}

TensorRef zeros(ts_call call, std::span<const int64_t> shape, int32_t dtype) {
  TensorRef t = sdk::empty(call, shape, dtype, kCpuDevice);
  if (t.numel() > 0) std::memset(t.data(), 0, size_t(t.numel() * t.itemsize()));
  return t;
}

void return3(sdk::Args& a, TensorRef&& x, TensorRef&& y, TensorRef&& z) {
  a.returns({sdk::Args::tensor_value(std::move(x)), sdk::Args::tensor_value(std::move(y)),
             sdk::Args::tensor_value(std::move(z))});
}

}  // namespace norm

void register_normalization_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  register_batch_norm_kernels(reg, key);
  register_layer_norm_kernels(reg, key);
  register_group_norm_kernels(reg, key);
  register_dropout_kernels(reg, key);
  register_embedding_kernels(reg, key);
  register_accumulate_kernels(reg, key);
}

}  // namespace tessera::cpu

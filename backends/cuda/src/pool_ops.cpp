// max_pool2d_with_indices, avg_pool2d, adaptive_avg_pool2d and their backwards (PyTorch
// semantics, the CPU plugin's checks and messages): over the last two dims of a (C, H, W) or
// (N, C, H, W) input of a floating dtype; inputs are made contiguous first. Kernels: pool.cu.
#include "cuda_plugin.h"
#include "nn_launch.h"

#include <tessera/sdk/pool_geometry.h>

#include <array>
#include <climits>
#include <optional>

namespace tessera::gpu {
namespace {

using Pair = std::array<int64_t, 2>;

// An int[2] argument: one value stands for two; `empty_means` (when given) replaces [].
Pair int_pair(const char* op, const char* name, std::span<const int64_t> v, const Pair* empty_means = nullptr) {
  if (v.empty() && empty_means) return *empty_means;
  if (v.size() == 1) return {v[0], v[0]};
  TS_SDK_CHECK(v.size() == 2, TS_ERROR_VALUE, op, ": expected ", name, " to be a single int or a pair of ints, got ",
               shape_text(v));
  return {v[0], v[1]};
}

using Planes = sdk::PoolPlanes;

// `self` on our device, floating, 3-D or 4-D, only the batch dim may be 0.
Planes planes_of(const char* op, const TensorRef& self) {
  common_device(op, {&self});
  TS_SDK_CHECK(sdk::is_floating(self.dtype()), TS_ERROR_TYPE, op, ": expected input of a floating point dtype, got ",
               sdk::dtype_name(self.dtype()));
  return sdk::pool_input_planes(op, self);
}

void check_params(const char* op, const Pair& k, const Pair& s, const Pair& pad, const Pair& dil) {
  sdk::check_pool_params(op, k, s, pad, dil);
  for (int64_t v : {k[0], k[1], s[0], s[1], dil[0], dil[1]})
    TS_SDK_CHECK(v <= INT_MAX, TS_ERROR_VALUE, op, ": pooling parameters above ", INT_MAX, " are not supported on ",
                 kName);
}

using sdk::pooled_plane;

void check_grad_output(const char* op, const TensorRef& grad_out, const TensorRef& self,
                       const std::vector<int64_t>& expected) {
  common_device(op, {&grad_out, &self});
  TS_SDK_CHECK(grad_out.dtype() == self.dtype(), TS_ERROR_TYPE, op, ": expected grad_output to have self's dtype ",
               sdk::dtype_name(self.dtype()), ", got ", sdk::dtype_name(grad_out.dtype()));
  TS_SDK_CHECK(grad_out.shape_vector() == expected, TS_ERROR_VALUE, op, ": expected grad_output of shape ",
               shape_text(expected), " (the pooling's output), got ", shape_text(grad_out.sizes()));
}

// The launch arguments over contiguous `in` and `out`.
PoolArgs args_of(const Planes& p, int64_t oh, int64_t ow, const TensorRef& in, const TensorRef& out) {
  PoolArgs a;
  a.in = first_element(in);
  a.out = first_element(out);
  a.in_dtype = in.dtype();
  a.out_dtype = out.dtype();
  a.planes = p.planes, a.h = p.h, a.w = p.w, a.oh = oh, a.ow = ow;
  return a;
}
void set_window(PoolArgs& a, const Pair& k, const Pair& s, const Pair& pad, const Pair& dil) {
  a.kh = int32_t(k[0]), a.kw = int32_t(k[1]), a.sh = int32_t(s[0]), a.sw = int32_t(s[1]);
  a.ph = int32_t(pad[0]), a.pw = int32_t(pad[1]), a.dh = int32_t(dil[0]), a.dw = int32_t(dil[1]);
}

// ---- max
struct MaxPlan {
  Planes in;
  Pair k, s, pad, dil, out;
};
MaxPlan plan_max(const char* op, const TensorRef& self, const sdk::Args& a, int first) {
  MaxPlan m;
  m.in = planes_of(op, self);
  m.k = int_pair(op, "kernel_size", a.int_list(first));
  m.s = int_pair(op, "stride", a.int_list(first + 1), &m.k);
  m.pad = int_pair(op, "padding", a.int_list(first + 2));
  m.dil = int_pair(op, "dilation", a.int_list(first + 3));
  check_params(op, m.k, m.s, m.pad, m.dil);
  m.out = pooled_plane(op, m.in, m.k, m.s, m.pad, m.dil, a.to_bool(first + 4));
  return m;
}

// max_pool2d_with_indices(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0,
//                         int[2] dilation=1, bool ceil_mode=False) -> (Tensor, Tensor)
void max_pool2d_k(sdk::Args& a) {
  const char* op = "max_pool2d_with_indices";
  TensorRef self = a.tensor(0);
  const MaxPlan m = plan_max(op, self, a, 1);
  DeviceGuard guard(self.device().index);
  TensorRef x = contiguous(a.call(), self, self.dtype());
  const auto shape = m.in.shape(m.out[0], m.out[1]);
  TensorRef y = empty_on(a.call(), shape, self.dtype(), self.device());
  TensorRef idx = empty_on(a.call(), shape, TS_INT64, self.device());
  PoolArgs p = args_of(m.in, m.out[0], m.out[1], x, y);
  set_window(p, m.k, m.s, m.pad, m.dil);
  p.indices = static_cast<int64_t*>(idx.data());
  launch_pool(PoolOp::MaxForward, compute_for(self.dtype()), p, stream_for(self.device().index));
  a.returns({sdk::Args::tensor_value(std::move(y)), sdk::Args::tensor_value(std::move(idx))});
}

// max_pool2d_with_indices_backward(Tensor grad_output, Tensor self, int[2] kernel_size, int[2] stride,
//                                  int[2] padding, int[2] dilation, bool ceil_mode, Tensor indices) -> Tensor
void max_pool2d_backward_k(sdk::Args& a) {
  const char* op = "max_pool2d_with_indices_backward";
  TensorRef grad_out = a.tensor(0), self = a.tensor(1), indices = a.tensor(7);
  const MaxPlan m = plan_max(op, self, a, 2);
  const auto shape = m.in.shape(m.out[0], m.out[1]);
  check_grad_output(op, grad_out, self, shape);
  common_device(op, {&self, &indices});
  TS_SDK_CHECK(indices.dtype() == TS_INT64, TS_ERROR_TYPE, op, ": expected indices of dtype int64, got ",
               sdk::dtype_name(indices.dtype()));
  TS_SDK_CHECK(indices.shape_vector() == shape, TS_ERROR_VALUE, op, ": expected indices of shape ", shape_text(shape),
               " (like grad_output), got ", shape_text(indices.sizes()));
  const int32_t index = self.device().index;
  DeviceGuard guard(index);
  TensorRef gy = contiguous(a.call(), grad_out, grad_out.dtype()), idx = contiguous(a.call(), indices, TS_INT64);
  // Atomics accumulate in float32/float64; 16-bit results are converted afterwards.
  const int32_t acc_dtype = self.dtype() == TS_FLOAT64 ? TS_FLOAT64 : TS_FLOAT32;
  TensorRef acc = empty_on(a.call(), self.sizes(), acc_dtype, self.device());
  if (acc.numel())
    check(gpuMemsetAsync(acc.data(), 0, size_t(acc.numel() * acc.itemsize()), stream_for(index)), "zero-filling");
  PoolArgs p = args_of(m.in, m.out[0], m.out[1], gy, acc);
  set_window(p, m.k, m.s, m.pad, m.dil);
  p.indices = static_cast<int64_t*>(idx.data());
  launch_pool(PoolOp::MaxBackward, compute_for(acc_dtype), p, stream_for(index));
  a.return_tensor(contiguous(a.call(), acc, self.dtype()));
}

// ---- avg
struct AvgPlan {
  Planes in;
  Pair k, s, pad, out;
  bool count_include_pad = true;
  int64_t divisor = 0;
};
// Arguments from `first`: kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override.
AvgPlan plan_avg(const char* op, const TensorRef& self, const sdk::Args& a, int first) {
  AvgPlan m;
  m.in = planes_of(op, self);
  m.k = int_pair(op, "kernel_size", a.int_list(first));
  m.s = int_pair(op, "stride", a.int_list(first + 1), &m.k);
  m.pad = int_pair(op, "padding", a.int_list(first + 2));
  check_params(op, m.k, m.s, m.pad, {1, 1});
  m.out = pooled_plane(op, m.in, m.k, m.s, m.pad, {1, 1}, a.to_bool(first + 3));
  m.count_include_pad = a.to_bool(first + 4);
  std::optional<int64_t> divisor = a.optional_int(first + 5);
  TS_SDK_CHECK(!divisor || *divisor != 0, TS_ERROR_VALUE, op, ": expected a non-zero divisor_override, got 0");
  m.divisor = divisor.value_or(0);
  return m;
}
PoolArgs avg_args(const AvgPlan& m, const TensorRef& in, const TensorRef& out) {
  PoolArgs p = args_of(m.in, m.out[0], m.out[1], in, out);
  set_window(p, m.k, m.s, m.pad, {1, 1});
  p.count_include_pad = m.count_include_pad;
  p.divisor = m.divisor;
  return p;
}

// avg_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, bool ceil_mode=False,
//            bool count_include_pad=True, int? divisor_override=None) -> Tensor
void avg_pool2d_k(sdk::Args& a) {
  const char* op = "avg_pool2d";
  TensorRef self = a.tensor(0);
  const AvgPlan m = plan_avg(op, self, a, 1);
  DeviceGuard guard(self.device().index);
  TensorRef x = contiguous(a.call(), self, self.dtype());
  TensorRef y = empty_on(a.call(), m.in.shape(m.out[0], m.out[1]), self.dtype(), self.device());
  launch_pool(PoolOp::AvgForward, compute_for(self.dtype()), avg_args(m, x, y), stream_for(self.device().index));
  a.return_tensor(std::move(y));
}

// avg_pool2d_backward(Tensor grad_output, Tensor self, int[2] kernel_size, int[2] stride, int[2] padding,
//                     bool ceil_mode, bool count_include_pad, int? divisor_override) -> Tensor
void avg_pool2d_backward_k(sdk::Args& a) {
  const char* op = "avg_pool2d_backward";
  TensorRef grad_out = a.tensor(0), self = a.tensor(1);
  const AvgPlan m = plan_avg(op, self, a, 2);
  check_grad_output(op, grad_out, self, m.in.shape(m.out[0], m.out[1]));
  DeviceGuard guard(self.device().index);
  TensorRef gy = contiguous(a.call(), grad_out, grad_out.dtype());
  TensorRef gx = empty_on(a.call(), self.sizes(), self.dtype(), self.device());
  launch_pool(PoolOp::AvgBackward, compute_for(self.dtype()), avg_args(m, gy, gx), stream_for(self.device().index));
  a.return_tensor(std::move(gx));
}

// ---- adaptive avg
// adaptive_avg_pool2d(Tensor self, int[2] output_size) -> Tensor
void adaptive_avg_pool2d_k(sdk::Args& a) {
  const char* op = "adaptive_avg_pool2d";
  TensorRef self = a.tensor(0);
  const Planes in = planes_of(op, self);
  const Pair out = int_pair(op, "output_size", a.int_list(1));
  TS_SDK_CHECK(out[0] >= 0 && out[1] >= 0, TS_ERROR_VALUE, op, ": expected output_size >= 0, got ", shape_text(out));
  DeviceGuard guard(self.device().index);
  TensorRef x = contiguous(a.call(), self, self.dtype());
  TensorRef y = empty_on(a.call(), in.shape(out[0], out[1]), self.dtype(), self.device());
  launch_pool(PoolOp::AdaptiveForward, compute_for(self.dtype()), args_of(in, out[0], out[1], x, y),
              stream_for(self.device().index));
  a.return_tensor(std::move(y));
}

// adaptive_avg_pool2d_backward(Tensor grad_output, Tensor self) -> Tensor: the output size is
// grad_output's last two dims.
void adaptive_avg_pool2d_backward_k(sdk::Args& a) {
  const char* op = "adaptive_avg_pool2d_backward";
  TensorRef grad_out = a.tensor(0), self = a.tensor(1);
  const Planes in = planes_of(op, self);
  TS_SDK_CHECK(grad_out.dim() == self.dim(), TS_ERROR_VALUE, op, ": expected grad_output with as many dims as self (",
               self.dim(), "), got shape ", shape_text(grad_out.sizes()));
  const int64_t d = grad_out.dim(), oh = grad_out.size(d - 2), ow = grad_out.size(d - 1);
  check_grad_output(op, grad_out, self, in.shape(oh, ow));
  const int32_t index = self.device().index;
  DeviceGuard guard(index);
  TensorRef gy = contiguous(a.call(), grad_out, grad_out.dtype());
  TensorRef gx = empty_on(a.call(), self.sizes(), self.dtype(), self.device());
  if (gy.numel() == 0) {  // no cell covers anything: a zero gradient
    if (gx.numel())
      check(gpuMemsetAsync(gx.data(), 0, size_t(gx.numel() * gx.itemsize()), stream_for(index)), "zero-filling");
  } else {
    launch_pool(PoolOp::AdaptiveBackward, compute_for(self.dtype()), args_of(in, oh, ow, gy, gx), stream_for(index));
  }
  a.return_tensor(std::move(gx));
}
}  // namespace

void register_pool_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("max_pool2d_with_indices", key, max_pool2d_k);
  reg.kernel("max_pool2d_with_indices_backward", key, max_pool2d_backward_k);
  reg.kernel("avg_pool2d", key, avg_pool2d_k);
  reg.kernel("avg_pool2d_backward", key, avg_pool2d_backward_k);
  reg.kernel("adaptive_avg_pool2d", key, adaptive_avg_pool2d_k);
  reg.kernel("adaptive_avg_pool2d_backward", key, adaptive_avg_pool2d_backward_k);
}

}  // namespace tessera::gpu

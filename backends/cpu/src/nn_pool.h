#pragma once
// Shared by the 2-D pooling kernels (nn_pool_*.cpp): the input's planes, PyTorch's output-size
// rule and the parameter checks. Pooling runs over the last two dims of a (C, H, W) or
// (N, C, H, W) input, one plane (n, c) at a time, planes in parallel.
#include "nn_conv_pool.h"

#include "strided.h"
#include "tensor_iterator.h"

#include <array>
#include <vector>

namespace tessera::cpu {

struct PoolPlanes {
  int64_t planes = 0, h = 0, w = 0;
  std::vector<int64_t> lead;  // [C] or [N, C]

  std::vector<int64_t> shape(int64_t oh, int64_t ow) const {
    std::vector<int64_t> s = lead;
    s.push_back(oh);
    s.push_back(ow);
    return s;
  }
};

// Checks `self` (cpu, floating, 3-D or 4-D, only the batch dim may be 0) and describes it.
inline PoolPlanes pool_planes(const char* op, const sdk::TensorRef& self) {
  const sdk::TensorRef* ts[] = {&self};
  check_cpu(op, ts);
  check_floating(op, "input", self);
  const int64_t d = self.dim();
  if (d != 3 && d != 4)
    sdk::fail(TS_ERROR_VALUE, op, ": expected a 3-D (C, H, W) or 4-D (N, C, H, W) input, got ", d,
              "-D input of shape ", strided::str(self.sizes()));
  for (int64_t i = d - 3; i < d; ++i)
    if (self.size(i) == 0)
      sdk::fail(TS_ERROR_VALUE, op, ": expected an input with non-zero sizes in all but the batch dim, got shape ",
                strided::str(self.sizes()));
  PoolPlanes p;
  p.lead.assign(self.sizes().begin(), self.sizes().end() - 2);
  p.planes = strided::numel(p.lead);
  p.h = self.size(d - 2);
  p.w = self.size(d - 1);
  return p;
}

// kernel > 0, stride > 0, dilation > 0, 0 <= padding <= kernel / 2 (PyTorch's limits).
inline void check_pool_params(const char* op, const std::array<int64_t, 2>& k, const std::array<int64_t, 2>& s,
                              const std::array<int64_t, 2>& pad, const std::array<int64_t, 2>& dil) {
  auto pair = [](const std::array<int64_t, 2>& v) { return strided::str(v); };
  if (k[0] <= 0 || k[1] <= 0) sdk::fail(TS_ERROR_VALUE, op, ": expected kernel_size > 0, got ", pair(k));
  if (s[0] <= 0 || s[1] <= 0) sdk::fail(TS_ERROR_VALUE, op, ": expected stride > 0, got ", pair(s));
  if (dil[0] <= 0 || dil[1] <= 0) sdk::fail(TS_ERROR_VALUE, op, ": expected dilation > 0, got ", pair(dil));
  if (pad[0] < 0 || pad[1] < 0) sdk::fail(TS_ERROR_VALUE, op, ": expected padding >= 0, got ", pair(pad));
  if (pad[0] > k[0] / 2 || pad[1] > k[1] / 2)
    sdk::fail(TS_ERROR_VALUE, op, ": expected padding to be at most half of kernel_size, got padding ", pair(pad),
              " and kernel_size ", pair(k));
}

// PyTorch's pooling output size; in ceil mode the last window must start inside the input or
// the left padding.
inline int64_t pooled_size(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dil, bool ceil_mode) {
  const int64_t num = in + 2 * pad - dil * (k - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  const int64_t q = num >= 0 ? num / stride : -((-num + stride - 1) / stride);  // floor division
  int64_t out = q + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

// The output's (oh, ow); ValueError when a dim would be empty.
inline std::array<int64_t, 2> pooled_plane(const char* op, const PoolPlanes& p, const std::array<int64_t, 2>& k,
                                           const std::array<int64_t, 2>& s, const std::array<int64_t, 2>& pad,
                                           const std::array<int64_t, 2>& dil, bool ceil_mode) {
  const int64_t oh = pooled_size(p.h, k[0], pad[0], s[0], dil[0], ceil_mode);
  const int64_t ow = pooled_size(p.w, k[1], pad[1], s[1], dil[1], ceil_mode);
  if (oh < 1 || ow < 1)
    sdk::fail(TS_ERROR_VALUE, op, ": the output would be empty: input plane ", p.h, "x", p.w, " with kernel_size ",
              strided::str(k), ", stride ", strided::str(s), ", padding ", strided::str(pad), " and dilation ",
              strided::str(dil), " gives ", oh, "x", ow);
  return {oh, ow};
}

// Planes per parallel task so that each task has about kGrainSize elements of work.
inline int64_t plane_grain(int64_t work_per_plane) {
  return std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, work_per_plane));
}

// The gradient checks of a pooling backward: grad_output on the cpu, of self's dtype and shape `expected`.
inline void check_grad_output(const char* op, const sdk::TensorRef& grad_out, const sdk::TensorRef& self,
                              const std::vector<int64_t>& expected) {
  const sdk::TensorRef* ts[] = {&grad_out};
  check_cpu(op, ts);
  check_same_dtype(op, "grad_output", grad_out, "self", self.dtype());
  if (grad_out.shape_vector() != expected)
    sdk::fail(TS_ERROR_VALUE, op, ": expected grad_output of shape ", strided::str(expected),
              " (the pooling's output), got ", strided::str(grad_out.sizes()));
}

// A zero-filled tensor.
inline sdk::TensorRef zeros_like_shape(ts_call call, std::span<const int64_t> shape, int32_t dtype) {
  sdk::TensorRef t = sdk::empty(call, shape, dtype, kCpuDevice);
  std::fill_n(t.data<char>(), t.numel() * t.itemsize(), char(0));  // all-zero bits are 0.0 in every float dtype
  return t;
}

}  // namespace tessera::cpu

#pragma once
// Shared by the 2-D pooling kernels (nn_pool_*.cpp): the CPU's checks over the SDK's pooling
// shape rules (tessera/sdk/pool_geometry.h). Pooling runs over the last two dims of a (C, H, W) or
// (N, C, H, W) input, one plane (n, c) at a time, planes in parallel.
#include "nn_conv_pool.h"

#include <tessera/sdk/pool_geometry.h>

#include "strided.h"
#include "tensor_iterator.h"

#include <array>
#include <vector>

namespace tessera::cpu {

using sdk::check_pool_params;
using sdk::pooled_plane;
using sdk::pooled_size;
using sdk::PoolPlanes;

// Checks `self` (cpu, floating, 3-D or 4-D, only the batch dim may be 0) and describes it.
inline PoolPlanes pool_planes(const char* op, const sdk::TensorRef& self) {
  const sdk::TensorRef* ts[] = {&self};
  check_cpu(op, ts);
  check_floating(op, "input", self);
  return sdk::pool_input_planes(op, self);
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

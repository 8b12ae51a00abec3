#pragma once
// The host/device boundary of the neural-network kernel families (activation.cu, pool.cu):
// plain structs passed by value to kernels and launchers keyed by an enum, like launch.h.
#include "launch.h"

namespace tessera::gpu {

// Element-wise backward formulas: ops out, grad_output, x (the forward's input, or its output
// for sigmoid/tanh). Compute Float or Double; Threshold also Int64 (threshold_backward of
// integer tensors), comparing against Loop::scalar_d (or scalar_i when `threshold_is_int`).
enum class ActivationBackward : int32_t { Gelu, GeluTanh, Silu, Sigmoid, Tanh, Threshold };
void launch_activation_backward(ActivationBackward op, Compute c, const Loop& loop, bool threshold_is_int,
                                gpuStream_t stream);

// 2-D pooling over `planes` contiguous [h, w] input planes and [oh, ow] output planes.
struct PoolArgs {
  const char* in = nullptr;  // self (forward) or grad_output (backward), contiguous
  char* out = nullptr;       // output (forward) or grad_input (backward), contiguous
  int64_t* indices = nullptr;  // max pooling: flat h * w index of each output's maximum
  int32_t in_dtype = 0, out_dtype = 0;
  int64_t planes = 0, h = 0, w = 0, oh = 0, ow = 0;
  int32_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
  bool count_include_pad = true;
  int64_t divisor = 0;  // avg pooling's divisor_override, 0: none
};
enum class PoolOp : int32_t { MaxForward, MaxBackward, AvgForward, AvgBackward, AdaptiveForward, AdaptiveBackward };
// MaxBackward accumulates into `out` (zeroed by the caller; float32 or float64 only, since it
// uses atomics); every other op writes each output element once.
void launch_pool(PoolOp op, Compute c, const PoolArgs& args, gpuStream_t stream);

}  // namespace tessera::gpu

namespace tessera::gpu {

// Layer norm over m contiguous rows of n elements. Statistics in double whatever the dtype (as
// the CPU plugin), stored in `stat_dtype`. Null weight/bias: none. Forward writes out, mean,
// rstd; backward reads grad, mean, rstd and writes out (grad_input) and, when non-null,
// grad_weight / grad_bias.
struct LayerNormArgs {
  const char* x = nullptr;
  const char* grad = nullptr;
  const char* weight = nullptr;
  const char* bias = nullptr;
  char* out = nullptr;
  char* mean = nullptr;
  char* rstd = nullptr;
  char* grad_weight = nullptr;
  char* grad_bias = nullptr;
  int32_t x_dtype = 0, grad_dtype = 0, w_dtype = 0, b_dtype = 0, out_dtype = 0, stat_dtype = 0;
  int32_t gw_dtype = 0, gb_dtype = 0;
  int64_t m = 0, n = 0;
  double eps = 0;
};
void launch_layer_norm(const LayerNormArgs& args, gpuStream_t stream);
void launch_layer_norm_backward(const LayerNormArgs& args, gpuStream_t stream);

}  // namespace tessera::gpu

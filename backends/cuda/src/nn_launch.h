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
  // Backward's column sums (grad_weight, grad_bias): the rows are split into row_splits chunks
  // summed by separate blocks into column_partials (2 * row_splits * n doubles: weight's, then
  // bias's), then added per column in chunk order. row_splits 1 (or no partials): one pass.
  int64_t row_splits = 1;
  double* column_partials = nullptr;
};
void launch_layer_norm(const LayerNormArgs& args, gpuStream_t stream);
void launch_layer_norm_backward(const LayerNormArgs& args, gpuStream_t stream);

}  // namespace tessera::gpu

namespace tessera::gpu {

// Batch norm and group norm over a contiguous (N, C, HW) input (channel_norm.cu). Statistics in
// double whatever the dtype (the CPU plugin's precision). `scratch` is a device buffer of
// doubles the host allocates: 4 per channel (batch norm) or per (n, group) row (group norm);
// the first kernel fills it with per-statistic coefficients, the element-wise one reads them.
// Null tensors: absent. `group` == 0: batch norm, else the number of groups.
struct ChannelNormArgs {
  const char* x = nullptr;
  const char* grad = nullptr;
  const char* weight = nullptr;
  const char* bias = nullptr;
  const char* stat_a = nullptr;  // given statistics: mean (save_mean / running_mean / group mean)
  const char* stat_b = nullptr;  // and invstd (save_invstd, rstd) or running_var when `b_is_var`
  char* out = nullptr;           // output (forward) or grad_input (backward)
  char* save_a = nullptr;        // forward outputs: save_mean / mean and save_invstd / rstd
  char* save_b = nullptr;
  char* running_mean = nullptr;  // updated in place (contiguous) by a training batch norm
  char* running_var = nullptr;
  char* grad_weight = nullptr;
  char* grad_bias = nullptr;
  double* scratch = nullptr;
  int32_t x_dtype = 0, grad_dtype = 0, w_dtype = 0, b_dtype = 0, a_dtype = 0, bvar_dtype = 0, out_dtype = 0;
  int32_t save_dtype = 0, rm_dtype = 0, rv_dtype = 0, gw_dtype = 0, gb_dtype = 0;
  int64_t n = 0, c = 0, hw = 1, group = 0;
  bool training = false, b_is_var = false;
  double eps = 0, momentum = 0;
  // Batch norm's per-channel sums over few channels of many elements are split over `splits`
  // blocks per channel: split_stats (3 doubles per (channel, split), a host-allocated device
  // buffer) gets each split's count, mean and sum of squared deviations (forward) or sum of dy
  // and of dy * (x - mean) (backward); the statistics kernel combines them in split order.
  int64_t splits = 1;
  double* split_stats = nullptr;
};
void launch_batch_norm(const ChannelNormArgs& args, gpuStream_t stream);
void launch_batch_norm_backward(const ChannelNormArgs& args, gpuStream_t stream);
void launch_group_norm(const ChannelNormArgs& args, gpuStream_t stream);
void launch_group_norm_backward(const ChannelNormArgs& args, gpuStream_t stream);

}  // namespace tessera::gpu

namespace tessera::gpu {

// nll_loss over a contiguous (outer, classes, inner) input of log-probabilities and its
// contiguous int64 target of outer * inner class indices (loss.cu). A target outside
// [0, classes) that is not ignore_index sets bad[0] = 1 and bad[1] = the target (the host reads
// it back and raises). The forward sums loss and weight per block into `partial` (2 doubles
// per block, at most kLossBlocks blocks) and folds them in order: reproducible.
inline constexpr int kLossBlocks = 256;
struct NllArgs {
  const char* self = nullptr;
  const char* target = nullptr;
  const char* weight = nullptr;        // null: every class weighs 1
  const char* grad_out = nullptr;      // backward: (outer * inner) or one element
  const char* total_weight = nullptr;  // backward: the forward's total_weight (one element)
  char* out = nullptr;                 // forward: the losses (reduction none) or the reduced loss
  char* total_weight_out = nullptr;
  char* grad_in = nullptr;             // backward: zeroed by the host, self's shape
  double* partial = nullptr;
  int64_t* bad = nullptr;
  int32_t self_dtype = 0, w_dtype = 0, out_dtype = 0, go_dtype = 0, tw_dtype = 0;
  int64_t outer = 1, classes = 0, inner = 1, ignore_index = -100, reduction = 1;
  bool go_one = false;  // grad_out has one element
};
void launch_nll_loss(const NllArgs& args, gpuStream_t stream);
void launch_nll_loss_backward(const NllArgs& args, gpuStream_t stream);

// Element-wise losses on the loop (out first): Mse, L1 (out, x, y); BceLogits (out, x, t) and
// BceLogitsPosWeight (out, x, t, pos_weight); MseBackward (out, x, y, grad) = scalar_d * (x - y) * grad.
enum class PointwiseLoss : int32_t { Mse, L1, BceLogits, BceLogitsPosWeight, MseBackward };
void launch_pointwise_loss(PointwiseLoss op, Compute c, const Loop& loop, gpuStream_t stream);

// _softmax_backward_data / _log_softmax_backward_data along the middle dim of contiguous
// [outer, dim, inner] grad and output (y): softmax y (g - sum(g y)), log_softmax g - exp(y) sum(g).
struct SoftmaxBackwardArgs {
  const char* grad = nullptr;
  const char* y = nullptr;
  char* out = nullptr;
  int32_t grad_dtype = 0, y_dtype = 0, out_dtype = 0;
  int64_t outer = 1, dim = 1, inner = 1;
  bool log = false;
};
void launch_softmax_backward(Compute c, const SoftmaxBackwardArgs& args, gpuStream_t stream);

}  // namespace tessera::gpu

namespace tessera::gpu {

// embedding (embedding.cu): out[i, :] = weight[indices[i], :] for n positions, moved as words of
// the weight's item size (any dtype, any strides). The dense backward adds each position's
// gradient row into a float64 [rows, dim] accumulator with atomics (skipping padding_idx),
// counts positions per row for scale_grad_by_freq, then converts into grad_weight. An index
// outside [0, rows) sets bad[0] = 1, bad[1] = the index (the host reads it back and raises).
struct EmbeddingArgs {
  const char* weight = nullptr;
  const char* indices = nullptr;  // contiguous int64 or int32
  char* out = nullptr;            // forward, contiguous [n, dim]
  const char* grad = nullptr;     // backward, contiguous [n, dim]
  double* acc = nullptr;          // backward, zeroed [rows, dim]
  int64_t* counts = nullptr;      // backward with scale_grad_by_freq, zeroed [rows]
  char* grad_weight = nullptr;    // backward, contiguous [rows, dim]
  int64_t* bad = nullptr;
  int32_t index_dtype = 0, itemsize = 0, grad_dtype = 0;
  int64_t n = 0, dim = 0, rows = 0, row_stride = 0, col_stride = 1, padding_idx = -1;
  bool scale_grad_by_freq = false;
};
void launch_embedding(const EmbeddingArgs& args, gpuStream_t stream);
void launch_embedding_backward(const EmbeddingArgs& args, gpuStream_t stream);

// native_dropout (dropout.cu) over n contiguous elements: element i is kept when the
// counter-based hash of (seed, i) (SplitMix64's finaliser, as the CPU plugin) falls below
// `keep`; kept elements are scaled by `scale`. The backward is out = mask ? in * scale : 0.
struct DropoutArgs {
  const char* in = nullptr;  // input (forward) or grad_output (backward)
  char* out = nullptr;
  char* mask = nullptr;      // bool, written by the forward
  const char* mask_in = nullptr;  // bool, read by the backward
  int32_t dtype = 0;
  int64_t n = 0;
  uint64_t seed = 0;
  double keep = 1, scale = 1;
};
void launch_dropout(const DropoutArgs& args, gpuStream_t stream);
void launch_dropout_backward(const DropoutArgs& args, gpuStream_t stream);

}  // namespace tessera::gpu

namespace tessera::gpu {

// Fused attention (attention.cu). A [B, H, rows, cols] operand read or written through its
// element strides, any dtype: element (b, h, r, c) at data + (b sb + h sh + r sr + c sc) * item size.
struct HeadTensor {
  char* data = nullptr;
  int32_t dtype = 0;
  int64_t sb = 0, sh = 0, sr = 0, sc = 0;
};
// query [B, H, L, E], key [B, H, S, E], value [B, H, S, Ev]; mask (data null: none) an additive
// [B, H, L, S] (broadcast dims stride 0); lse [B, H, L] float32. The forward writes out and lse;
// the backward reads grad_out, out and lse, fills delta ([B, H, L] float32 scratch) and writes
// grad_q, grad_k, grad_v. `tile` queries and keys per block (attention_tile).
struct AttentionArgs {
  HeadTensor q, k, v, mask, out, grad_out, grad_q, grad_k, grad_v;
  float* lse = nullptr;
  float* delta = nullptr;
  int64_t B = 0, H = 0, L = 0, S = 0, E = 0, Ev = 0;
  float scale = 1.0f;
  bool causal = false;
  int tile = 16;
};
// Head sizes up to this run fused; tiles of 16 up to 64 features, 8 above (48 KB of shared memory).
inline constexpr int64_t kAttentionMaxHeadDim = 128;
inline int attention_tile(int64_t E, int64_t Ev) { return E <= 64 && Ev <= 64 ? 16 : 8; }
enum class AttentionKernel : int32_t { Forward, BackwardQuery, BackwardKey };
size_t attention_shared_bytes(const AttentionArgs& args, AttentionKernel which);
void launch_attention_forward(const AttentionArgs& args, gpuStream_t stream);
void launch_attention_backward(const AttentionArgs& args, gpuStream_t stream);

}  // namespace tessera::gpu

namespace tessera::gpu {

// One Adam / AdamW step over n contiguous elements of one parameter (optim.cu): the CPU plugin's
// _fused_adam_ arithmetic, float32 in float and float64 in double. max_sq: null without amsgrad.
struct AdamArgs {
  char* param = nullptr;
  char* exp_avg = nullptr;
  char* exp_avg_sq = nullptr;
  const char* grad = nullptr;
  char* max_sq = nullptr;
  int32_t dtype = 0;
  int64_t n = 0;
  double sign = 1, decay = 1, coupled_decay = 0, beta2 = 0, one_minus_beta1 = 0, one_minus_beta2 = 0, eps = 0,
         step_size = 0, inv_bc2_sqrt = 1;
};
void launch_fused_adam(const AdamArgs& args, gpuStream_t stream);

}  // namespace tessera::gpu

// The losses: nll_loss forward (per-block sums in double folded in order, so the result does not
// depend on scheduling) and backward (one thread per target writes its one gradient element),
// and the element-wise losses on the grid-stride loop in the CPU plugin's formulas.
#include "map.cuh"
#include "row_kernels.cuh"
#include "nn_launch.h"

#include <algorithm>
#include <cmath>

namespace tessera::gpu {
namespace {


// Loads target i; false when it is ignored or out of range (then recorded in bad).
GPU_D bool target_of(const NllArgs& a, int64_t i, int64_t& t) {
  t = reinterpret_cast<const int64_t*>(a.target)[i];
  if (t == a.ignore_index) return false;
  if (t < 0 || t >= a.classes) {
    a.bad[1] = t;
    a.bad[0] = 1;
    return false;
  }
  return true;
}
GPU_D int64_t class_offset(const NllArgs& a, int64_t i, int64_t t) {
  return ((i / a.inner) * a.classes + t) * a.inner + i % a.inner;
}

__global__ void nll_forward_blocks(NllArgs a) {
  const int64_t n = a.outer * a.inner;
  double loss_sum = 0, weight_sum = 0;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t t;
    double loss = 0;
    if (target_of(a, i, t)) {
      const double wt = a.weight ? at(a.weight, a.w_dtype, t) : 1.0;
      loss = -wt * at(a.self, a.self_dtype, class_offset(a, i, t));
      loss_sum += loss;
      weight_sum += wt;
    }
    if (a.reduction == 0) put(a.out, a.out_dtype, i, loss);
  }
  loss_sum = block_sum(loss_sum);
  weight_sum = block_sum(weight_sum);
  if (threadIdx.x == 0) {
    a.partial[2 * blockIdx.x] = loss_sum;
    a.partial[2 * blockIdx.x + 1] = weight_sum;
  }
}

__global__ void nll_forward_fold(NllArgs a, int32_t blocks) {
  double loss = 0, weight = 0;
  for (int32_t b = 0; b < blocks; ++b) loss += a.partial[2 * b], weight += a.partial[2 * b + 1];
  put(a.total_weight_out, a.out_dtype, 0, weight);
  if (a.reduction != 0) put(a.out, a.out_dtype, 0, a.reduction == 1 ? loss / weight : loss);
}

__global__ void nll_backward(NllArgs a) {
  const int64_t n = a.outer * a.inner;
  // Mean divides by the summed weight (0 when every target is ignored: NaN, as PyTorch).
  const double scale = a.reduction == 1 ? 1.0 / at(a.total_weight, a.tw_dtype, 0) : 1.0;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t t;
    if (!target_of(a, i, t)) continue;
    const double wt = a.weight ? at(a.weight, a.w_dtype, t) : 1.0;
    const double go = at(a.grad_out, a.go_dtype, a.go_one ? 0 : i);
    put(a.grad_in, a.self_dtype, class_offset(a, i, t), -wt * go * scale);
  }
}

template <class C> GPU_D C bce_logits(C x, C t, C lw) {  // stable: -log(sigmoid(x)) = max(-x, 0) + log1p(exp(-|x|))
  return (C(1) - t) * x + lw * (log1p(exp(-fabs(x))) + fmax(-x, C(0)));
}

template <class C> struct LossF {
  PointwiseLoss op;
  template <class I> GPU_D void operator()(const Loop& L, const I (&off)[4]) const {
    const C x = load<C>(at(L.ops[1], off[1]), L.ops[1].dtype);
    const C y = load<C>(at(L.ops[2], off[2]), L.ops[2].dtype);
    C r;
    switch (op) {
      case PointwiseLoss::Mse: r = (x - y) * (x - y); break;
      case PointwiseLoss::L1: r = fabs(x - y); break;
      case PointwiseLoss::BceLogits: r = bce_logits(x, y, C(1)); break;
      case PointwiseLoss::BceLogitsPosWeight: {
        const C p = load<C>(at(L.ops[3], off[3]), L.ops[3].dtype);
        r = bce_logits(x, y, (p - C(1)) * y + C(1));
        break;
      }
      default: r = C(L.scalar_d) * (x - y) * load<C>(at(L.ops[3], off[3]), L.ops[3].dtype); break;
    }
    store<C>(at(L.ops[0], off[0]), L.ops[0].dtype, r);
  }
};
}  // namespace

void launch_nll_loss(const NllArgs& a, gpuStream_t s) {
  const int64_t n = a.outer * a.inner;
  const int32_t blocks = int32_t(n == 0 ? 1 : std::min<int64_t>(kLossBlocks, (n + kThreads - 1) / kThreads));
  nll_forward_blocks<<<blocks, kThreads, 0, s>>>(a);
  check_launch("nll_loss_forward");
  nll_forward_fold<<<1, 1, 0, s>>>(a, blocks);
  check_launch("nll_loss_forward");
}

void launch_nll_loss_backward(const NllArgs& a, gpuStream_t s) {
  const int64_t n = a.outer * a.inner;
  if (n == 0) return;
  nll_backward<<<blocks_for(n), kThreads, 0, s>>>(a);
  check_launch("nll_loss_backward");
}

void launch_pointwise_loss(PointwiseLoss op, Compute c, const Loop& L, gpuStream_t s) {
  // Loops of 3 operands leave ops[3] unused: its zero strides and null data are never read.
  if (c == Compute::Double) run_map<4>(L, s, LossF<double>{op}, "a loss");
  else run_map<4>(L, s, LossF<float>{op}, "a loss");
}

}  // namespace tessera::gpu

// native_batch_norm / native_group_norm and their backwards over a contiguous (N, C, HW) input.
// Each has a statistics kernel (one block per channel, or per (n, group) row; sums two-pass in
// double, as the CPU plugin; batch norm's channels split over several blocks first when they are
// too few to fill the device) that leaves per-statistic coefficients in a double scratch buffer,
// then one element-wise pass. Channel sums walk (n, i) in order: no atomics, reproducible.
#include "device_io.cuh"
#include "row_kernels.cuh"
#include "nn_launch.h"
#include "reduction_plan.h"

#include <cmath>

namespace tessera::gpu {
namespace {

GPU_D double weight_of(const ChannelNormArgs& a, int64_t c) { return a.weight ? at(a.weight, a.w_dtype, c) : 1.0; }
GPU_D double bias_of(const ChannelNormArgs& a, int64_t c) { return a.bias ? at(a.bias, a.b_dtype, c) : 0.0; }
// Element k (of n * hw) of channel c.
GPU_D int64_t channel_offset(const ChannelNormArgs& a, int64_t c, int64_t k) {
  return ((k / a.hw) * a.c + c) * a.hw + k % a.hw;
}

GPU_HD bool split(const ChannelNormArgs& a) { return a.splits > 1 && a.split_stats; }

// The block's sums of dy and dy * (x - mean) over elements [k0, k1) of channel c (every thread
// gets them): the backward's two statistics, split or not.
GPU_D void grad_sums(const ChannelNormArgs& a, int64_t c, int64_t k0, int64_t k1, double mean, double& s, double& d) {
  for (int64_t k = k0 + threadIdx.x; k < k1; k += blockDim.x) {
    const int64_t o = channel_offset(a, c, k);
    const double g = at(a.grad, a.grad_dtype, o);
    s += g;
    d += g * (at(a.x, a.x_dtype, o) - mean);
  }
  s = block_sum(s);
  d = block_sum(d);
}

// Split pass 1 (few channels, many elements): block job = (c, s) sums elements [k0, k1) of
// channel c. Forward: the split's count, mean and sum of squared deviations from that mean (two
// passes over the split, as the unsplit kernel); backward: sum dy and sum dy * (x - mean).
__global__ void batch_norm_split_stats(ChannelNormArgs a) {
  const int64_t count = a.n * a.hw, chunk = reduction_chunk(count, a.splits);
  for (int64_t job = blockIdx.x; job < a.c * a.splits; job += gridDim.x) {
    const int64_t c = job / a.splits, k0 = job % a.splits * chunk, k1 = k0 + chunk < count ? k0 + chunk : count;
    double* out = a.split_stats + 3 * job;
    if (a.grad) {
      const double mean = at(a.stat_a, a.a_dtype, c);
      double s = 0, d = 0;
      grad_sums(a, c, k0, k1, mean, s, d);
      if (threadIdx.x == 0) out[0] = s, out[1] = d, out[2] = 0;
    } else {
      const int64_t len = k1 > k0 ? k1 - k0 : 0;
      double s = 0;
      for (int64_t k = k0 + threadIdx.x; k < k1; k += blockDim.x) s += at(a.x, a.x_dtype, channel_offset(a, c, k));
      const double mean = len ? block_sum(s) / double(len) : 0.0;
      double q = 0;
      for (int64_t k = k0 + threadIdx.x; k < k1; k += blockDim.x) {
        const double d = at(a.x, a.x_dtype, channel_offset(a, c, k)) - mean;
        q += d * d;
      }
      q = block_sum(q);
      if (threadIdx.x == 0) out[0] = double(len), out[1] = mean, out[2] = q;
    }
  }
}

// Channel c's mean and (biased) variance from its splits: Chan et al.'s pairwise update, in
// split order (every thread computes the same values).
GPU_D void combine_split_moments(const ChannelNormArgs& a, int64_t c, double& mean, double& var) {
  double n = 0, m2 = 0;
  mean = 0;
  for (int64_t s = 0; s < a.splits; ++s) {
    const double* st = a.split_stats + 3 * (c * a.splits + s);
    if (st[0] == 0) continue;
    const double total = n + st[0], delta = st[1] - mean;
    mean += delta * st[0] / total;
    m2 += st[2] + delta * delta * n * st[0] / total;
    n = total;
  }
  var = n ? m2 / n : 0.0;
}

__global__ void batch_norm_stats(ChannelNormArgs a) {
  const int64_t count = a.n * a.hw;
  for (int64_t c = blockIdx.x; c < a.c; c += gridDim.x) {
    double mean = 0, invstd = 0;
    if (a.training) {
      double var = 0;
      if (split(a)) {
        combine_split_moments(a, c, mean, var);
      } else {
        double s = 0;
        for (int64_t k = threadIdx.x; k < count; k += blockDim.x) s += at(a.x, a.x_dtype, channel_offset(a, c, k));
        mean = count ? block_sum(s) / double(count) : 0.0;
        double q = 0;
        for (int64_t k = threadIdx.x; k < count; k += blockDim.x) {
          const double d = at(a.x, a.x_dtype, channel_offset(a, c, k)) - mean;
          q += d * d;
        }
        var = count ? block_sum(q) / double(count) : 0.0;
      }
      if (count) invstd = 1.0 / sqrt(var + a.eps);  // an empty batch: 0, as the CPU plugin
      if (threadIdx.x == 0) {
        // Running estimates (unbiased variance); an empty batch leaves them as they were.
        if (count && a.running_mean)
          put(a.running_mean, a.rm_dtype, c, (1 - a.momentum) * at(a.running_mean, a.rm_dtype, c) + a.momentum * mean);
        if (count && a.running_var)
          put(a.running_var, a.rv_dtype, c,
              (1 - a.momentum) * at(a.running_var, a.rv_dtype, c) +
                  a.momentum * var * double(count) / double(count - 1));
        put(a.save_a, a.save_dtype, c, mean);
        put(a.save_b, a.save_dtype, c, invstd);
      }
    } else {
      mean = at(a.stat_a, a.a_dtype, c);
      invstd = 1.0 / sqrt(at(a.stat_b, a.bvar_dtype, c) + a.eps);
    }
    if (threadIdx.x == 0) {
      const double scale = invstd * weight_of(a, c);
      a.scratch[c] = scale;
      a.scratch[a.c + c] = bias_of(a, c) - mean * scale;
    }
  }
}

// Per channel: sum(dy) and sum(dy * (x - mean)); grad_input = k dy + k2 (x - mean) + k3.
__global__ void batch_norm_backward_stats(ChannelNormArgs a) {
  const int64_t count = a.n * a.hw;
  for (int64_t c = blockIdx.x; c < a.c; c += gridDim.x) {
    const double mean = at(a.stat_a, a.a_dtype, c);
    const double sb = at(a.stat_b, a.bvar_dtype, c), invstd = a.b_is_var ? 1.0 / sqrt(sb + a.eps) : sb;
    double s = 0, d = 0;
    if (split(a)) {
      for (int64_t sp = 0; sp < a.splits; ++sp) {
        s += a.split_stats[3 * (c * a.splits + sp)];
        d += a.split_stats[3 * (c * a.splits + sp) + 1];
      }
    } else {
      grad_sums(a, c, 0, count, mean, s, d);
    }
    if (threadIdx.x == 0) {
      const double k = weight_of(a, c) * invstd;
      double k2 = 0, k3 = 0;
      if (a.training && count > 0) {
        k2 = -k * invstd * invstd * d / double(count);
        k3 = -k * s / double(count);
      }
      a.scratch[c] = k;
      a.scratch[a.c + c] = k2;
      a.scratch[2 * a.c + c] = k3;
      a.scratch[3 * a.c + c] = mean;
      if (a.grad_weight) put(a.grad_weight, a.gw_dtype, c, d * invstd);
      if (a.grad_bias) put(a.grad_bias, a.gb_dtype, c, s);
    }
  }
}

__global__ void group_norm_stats(ChannelNormArgs a) {
  const int64_t rows = a.n * a.group, len = a.c / a.group * a.hw;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t first = r * len;
    double s = 0;
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x) s += at(a.x, a.x_dtype, first + j);
    const double mu = len ? block_sum(s) / double(len) : 0.0;
    double q = 0;
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
      const double d = at(a.x, a.x_dtype, first + j) - mu;
      q += d * d;
    }
    const double var = len ? block_sum(q) / double(len) : 0.0;
    const double rs = 1.0 / sqrt(var + a.eps);
    if (threadIdx.x == 0) {
      a.scratch[r] = mu;
      a.scratch[rows + r] = rs;
      put(a.save_a, a.save_dtype, r, mu);
      put(a.save_b, a.save_dtype, r, rs);
    }
  }
}

// Per (n, group) row: c1 = mean(h), c2 = mean(h * xhat), h = dy * w[c].
__global__ void group_norm_backward_rows(ChannelNormArgs a) {
  const int64_t rows = a.n * a.group, per = a.c / a.group, len = per * a.hw;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const double mu = at(a.stat_a, a.a_dtype, r), rs = at(a.stat_b, a.bvar_dtype, r);
    const int64_t first = r * len, c0 = (r % a.group) * per;
    double sh = 0, shx = 0;
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
      const double h = at(a.grad, a.grad_dtype, first + j) * weight_of(a, c0 + j / a.hw);
      sh += h;
      shx += h * (at(a.x, a.x_dtype, first + j) - mu) * rs;
    }
    sh = block_sum(sh);
    shx = block_sum(shx);
    if (threadIdx.x == 0) {
      a.scratch[r] = mu;
      a.scratch[rows + r] = rs;
      a.scratch[2 * rows + r] = len ? sh / double(len) : 0.0;
      a.scratch[3 * rows + r] = len ? shx / double(len) : 0.0;
    }
  }
}

// Per channel over the batch: grad_weight = sum(dy * xhat), grad_bias = sum(dy).
__global__ void group_norm_backward_channels(ChannelNormArgs a) {
  const int64_t rows = a.n * a.group, per = a.c / a.group, count = a.n * a.hw;
  for (int64_t c = blockIdx.x; c < a.c; c += gridDim.x) {
    double sw = 0, sb = 0;
    for (int64_t k = threadIdx.x; k < count; k += blockDim.x) {
      const int64_t o = channel_offset(a, c, k), r = (k / a.hw) * a.group + c / per;
      const double d = at(a.grad, a.grad_dtype, o);
      sw += d * (at(a.x, a.x_dtype, o) - a.scratch[r]) * a.scratch[rows + r];
      sb += d;
    }
    sw = block_sum(sw);
    sb = block_sum(sb);
    if (threadIdx.x == 0) {
      if (a.grad_weight) put(a.grad_weight, a.gw_dtype, c, sw);
      if (a.grad_bias) put(a.grad_bias, a.gb_dtype, c, sb);
    }
  }
}

enum class Pass : int32_t { BatchForward, BatchBackward, GroupForward, GroupBackward };

__global__ void channel_elementwise(ChannelNormArgs a, Pass pass) {
  const int64_t total = a.n * a.c * a.hw, C = a.c;
  const int64_t rows = a.n * (a.group ? a.group : 1), len = a.group ? a.c / a.group * a.hw : 1;
  const double* s = a.scratch;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = (e / a.hw) % C;
    const double x = at(a.x, a.x_dtype, e);
    double v;
    switch (pass) {
      case Pass::BatchForward: v = x * s[c] + s[C + c]; break;
      case Pass::BatchBackward: v = s[c] * at(a.grad, a.grad_dtype, e) + s[C + c] * (x - s[3 * C + c]) + s[2 * C + c]; break;
      case Pass::GroupForward: {
        const int64_t r = e / len;
        const double scale = s[rows + r] * weight_of(a, c);
        v = x * scale + (bias_of(a, c) - s[r] * scale);
        break;
      }
      default: {
        const int64_t r = e / len;
        const double rs = s[rows + r];
        v = rs * (at(a.grad, a.grad_dtype, e) * weight_of(a, c) - s[2 * rows + r] - (x - s[r]) * rs * s[3 * rows + r]);
        break;
      }
    }
    put(a.out, a.out_dtype, e, v);
  }
}

void elementwise(const ChannelNormArgs& a, Pass pass, gpuStream_t s, const char* what) {
  const int64_t total = a.n * a.c * a.hw;
  if (total == 0) return;
  channel_elementwise<<<blocks_for(total), kThreads, 0, s>>>(a, pass);
  check_launch(what);
}

void split_stats(const ChannelNormArgs& a, gpuStream_t s, const char* what) {
  if (!split(a)) return;
  batch_norm_split_stats<<<rows_grid(a.c * a.splits), threads_for(reduction_chunk(a.n * a.hw, a.splits)), 0, s>>>(a);
  check_launch(what);
}
}  // namespace

void launch_batch_norm(const ChannelNormArgs& a, gpuStream_t s) {
  if (a.c == 0) return;
  if (a.training) split_stats(a, s, "native_batch_norm (split statistics)");
  batch_norm_stats<<<rows_grid(a.c), threads_for(a.n * a.hw), 0, s>>>(a);
  check_launch("native_batch_norm");
  elementwise(a, Pass::BatchForward, s, "native_batch_norm");
}

void launch_batch_norm_backward(const ChannelNormArgs& a, gpuStream_t s) {
  if (a.c == 0) return;
  split_stats(a, s, "native_batch_norm_backward (split statistics)");
  batch_norm_backward_stats<<<rows_grid(a.c), threads_for(a.n * a.hw), 0, s>>>(a);
  check_launch("native_batch_norm_backward");
  elementwise(a, Pass::BatchBackward, s, "native_batch_norm_backward");
}

void launch_group_norm(const ChannelNormArgs& a, gpuStream_t s) {
  const int64_t rows = a.n * a.group;
  if (rows == 0) return;
  group_norm_stats<<<rows_grid(rows), threads_for(a.c / a.group * a.hw), 0, s>>>(a);
  check_launch("native_group_norm");
  elementwise(a, Pass::GroupForward, s, "native_group_norm");
}

void launch_group_norm_backward(const ChannelNormArgs& a, gpuStream_t s) {
  const int64_t rows = a.n * a.group;
  if (rows > 0) {
    group_norm_backward_rows<<<rows_grid(rows), threads_for(a.c / a.group * a.hw), 0, s>>>(a);
    check_launch("native_group_norm_backward");
    elementwise(a, Pass::GroupBackward, s, "native_group_norm_backward");
  }
  if (a.c > 0) {  // every channel's grad_bias is written, 0 for an empty batch
    group_norm_backward_channels<<<rows_grid(a.c), threads_for(a.n * a.hw), 0, s>>>(a);
    check_launch("native_group_norm_backward");
  }
}

}  // namespace tessera::gpu

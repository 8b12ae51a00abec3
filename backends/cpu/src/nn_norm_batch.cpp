// native_batch_norm and its backward. Input (N, C, *) is made contiguous and seen as N x C rows
// of HW elements; channel statistics are two-pass in double, one channel per task. A
// channels-last 4-D input (torch.channels_last) is kept so: seen as N*H*W rows of C channels, its
// statistics summed per channel over fixed chunks of rows, and the results laid out NHWC too. Training mode
// updates running_mean / running_var in place (the unbiased variance for the running estimate,
// as PyTorch) and bumps their versions; evaluation mode normalises with the running statistics
// and returns save_mean / save_invstd as empty [0] tensors (as PyTorch's CPU kernel).
#include "nn_norm.h"

#include "channels_last.h"

#include "strided.h"
#include "tensor_iterator.h"

#include <cmath>

namespace tessera::cpu {
namespace {

using namespace norm;
using sdk::Args;

using Layout = sdk::ChannelLayout;  // N x C rows of HW elements

// y = x * scale[c] + shift[c] over every (n, c) row.
template <class T>
void affine_rows(const T* x, T* y, const Layout& l, const std::vector<double>& scale, const std::vector<double>& shift) {
  const int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, l.hw));
  parallel_for(l.n * l.c, grain, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t c = r % l.c;
      const double s = scale[size_t(c)], t = shift[size_t(c)];
      const T* p = x + r * l.hw;
      T* q = y + r * l.hw;
      for (int64_t i = 0; i < l.hw; ++i) q[i] = store<T>(load(p[i]) * s + t);
    }
  });
}

// ---- channels-last (NHWC) inputs: R = N*H*W rows of C channels

// Per-channel sums over rows, in fixed chunks of rows (one per thread; summed in chunk order, so a
// thread count gives one result): f(row index, that chunk's C partial sums) per row.
template <class Row>
std::vector<double> channel_sums(int64_t rows, int64_t c, Row f) {
  const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(max_threads(), rows));
  std::vector<double> partial(size_t(chunks * c), 0.0);
  parallel_for(chunks, 1, [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k)
      for (int64_t r = rows * k / chunks; r < rows * (k + 1) / chunks; ++r) f(r, partial.data() + k * c);
  });
  std::vector<double> total(size_t(c), 0.0);
  for (int64_t k = 0; k < chunks; ++k)
    for (int64_t i = 0; i < c; ++i) total[size_t(i)] += partial[size_t(k * c + i)];
  return total;
}

// y[r, c] = x[r, c] * scale[c] + shift[c].
template <class T>
void affine_channels_last(const T* x, T* y, int64_t rows, int64_t c, const std::vector<double>& scale,
                          const std::vector<double>& shift) {
  parallel_for(rows, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, c)), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r)
      for (int64_t i = 0; i < c; ++i)
        y[r * c + i] = store<T>(load(x[r * c + i]) * scale[size_t(i)] + shift[size_t(i)]);
  });
}

// native_batch_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor? running_mean,
//                   Tensor? running_var, bool training, float momentum, float eps)
void batch_norm_kernel(Args& a) {
  const char* op = "native_batch_norm";
  const TensorRef input = a.tensor(0);
  const std::optional<TensorRef> weight = a.optional_tensor(1), bias = a.optional_tensor(2);
  const std::optional<TensorRef> running_mean = a.optional_tensor(3), running_var = a.optional_tensor(4);
  const bool training = a.to_bool(5);
  const double momentum = a.to_double(6), eps = a.to_double(7);
  check_cpu_all(op, {&input, weight ? &*weight : nullptr, bias ? &*bias : nullptr,
                     running_mean ? &*running_mean : nullptr, running_var ? &*running_var : nullptr});
  require_floating(op, input, "input");
  const Layout l = sdk::channel_layout(op, input);
  const int64_t channels[] = {l.c};
  const std::vector<double> w = optional_values(op, weight, channels, "weight");
  const std::vector<double> b = optional_values(op, bias, channels, "bias");
  std::vector<double> rm = optional_values(op, running_mean, channels, "running_mean");
  std::vector<double> rv = optional_values(op, running_var, channels, "running_var");
  sdk::check_batch_norm_mode(op, training, running_mean && running_var, l, input);

  const bool nhwc = is_channels_last(input);
  const TensorRef x = nhwc ? input : contiguous(a.call(), input);
  TensorRef out = nhwc ? empty_channels_last(a.call(), input.sizes(), input.dtype())
                       : sdk::empty(a.call(), input.sizes(), input.dtype(), kCpuDevice);
  const int64_t rows = l.n * l.hw;  // channels-last rows
  std::vector<double> mean(size_t(l.c), 0.0), invstd(size_t(l.c), 0.0);
  if (training) {
    std::vector<double> var(size_t(l.c), 0.0);
    if (l.count() > 0) {
      const int64_t grain = std::max<int64_t>(1, kGrainSize / l.count());
      TS_DISPATCH_FLOAT(input.dtype(), break, {
        const scalar_t* p = x.data<scalar_t>();
        if (nhwc) {  // two passes: the mean, then the squared deviations from it
          mean = channel_sums(rows, l.c, [&](int64_t r, double* acc) {
            for (int64_t i = 0; i < l.c; ++i) acc[i] += load(p[r * l.c + i]);
          });
          for (double& m : mean) m /= double(rows);
          var = channel_sums(rows, l.c, [&](int64_t r, double* acc) {
            for (int64_t i = 0; i < l.c; ++i) {
              const double d = load(p[r * l.c + i]) - mean[size_t(i)];
              acc[i] += d * d;
            }
          });
          for (double& v : var) v /= double(rows);
        } else {
          parallel_for(l.c, grain, [&](int64_t cb, int64_t ce) {
            for (int64_t c = cb; c < ce; ++c)
              moments(p + c * l.hw, l.n, l.c * l.hw, l.hw, mean[size_t(c)], var[size_t(c)]);
          });
        }
      });
      for (int64_t c = 0; c < l.c; ++c) invstd[size_t(c)] = 1.0 / std::sqrt(var[size_t(c)] + eps);
      // Running estimates: an empty batch leaves them as they were.
      const double unbias = double(l.count()) / double(l.count() - 1);
      if (running_mean) {
        for (int64_t c = 0; c < l.c; ++c)
          rm[size_t(c)] = (1 - momentum) * rm[size_t(c)] + momentum * mean[size_t(c)];
        write_values(*running_mean, rm);
        running_mean->bump_version();
      }
      if (running_var) {
        for (int64_t c = 0; c < l.c; ++c)
          rv[size_t(c)] = (1 - momentum) * rv[size_t(c)] + momentum * var[size_t(c)] * unbias;
        write_values(*running_var, rv);
        running_var->bump_version();
      }
    }
  } else {
    mean = rm;
    for (int64_t c = 0; c < l.c; ++c) invstd[size_t(c)] = 1.0 / std::sqrt(rv[size_t(c)] + eps);
  }
  std::vector<double> scale(size_t(l.c)), shift(size_t(l.c));
  for (size_t c = 0; c < size_t(l.c); ++c) {
    scale[c] = invstd[c] * (w.empty() ? 1.0 : w[c]);
    shift[c] = (b.empty() ? 0.0 : b[c]) - mean[c] * scale[c];
  }
  TS_DISPATCH_FLOAT(input.dtype(), break, {
    if (nhwc) affine_channels_last(x.data<scalar_t>(), out.data<scalar_t>(), rows, l.c, scale, shift);
    else affine_rows(x.data<scalar_t>(), out.data<scalar_t>(), l, scale, shift);
  });
  const int32_t sd = stat_dtype(input.dtype());
  const int64_t none[] = {0};
  TensorRef save_mean = training ? tensor_of(a.call(), channels, sd, mean) : zeros(a.call(), none, sd);
  TensorRef save_invstd = training ? tensor_of(a.call(), channels, sd, invstd) : zeros(a.call(), none, sd);
  return3(a, std::move(out), std::move(save_mean), std::move(save_invstd));
}

// native_batch_norm_backward(Tensor grad_out, Tensor input, Tensor? weight, Tensor? running_mean,
//   Tensor? running_var, Tensor? save_mean, Tensor? save_invstd, bool train, float eps)
// -> (grad_input, grad_weight, grad_bias). grad_weight is an empty [0] tensor when weight is
// None; grad_bias (the sum of grad_out per channel) is always computed.
void batch_norm_backward_kernel(Args& a) {
  const char* op = "native_batch_norm_backward";
  const TensorRef grad_out = a.tensor(0), input = a.tensor(1);
  const std::optional<TensorRef> weight = a.optional_tensor(2);
  const std::optional<TensorRef> running_mean = a.optional_tensor(3), running_var = a.optional_tensor(4);
  const std::optional<TensorRef> save_mean = a.optional_tensor(5), save_invstd = a.optional_tensor(6);
  const bool train = a.to_bool(7);
  const double eps = a.to_double(8);
  check_cpu_all(op, {&grad_out, &input, weight ? &*weight : nullptr, running_mean ? &*running_mean : nullptr,
                     running_var ? &*running_var : nullptr, save_mean ? &*save_mean : nullptr,
                     save_invstd ? &*save_invstd : nullptr});
  require_floating(op, input, "input");
  require_floating(op, grad_out, "grad_out");
  require_shape(op, grad_out, input.sizes(), "grad_out");
  const Layout l = sdk::channel_layout(op, input);
  const int64_t channels[] = {l.c};
  const std::vector<double> w = optional_values(op, weight, channels, "weight");
  std::vector<double> mean, invstd;
  sdk::check_batch_norm_backward_statistics(op, train, save_mean && save_invstd, running_mean && running_var);
  if (train) {
    mean = optional_values(op, save_mean, channels, "save_mean");
    invstd = optional_values(op, save_invstd, channels, "save_invstd");
  } else {
    mean = optional_values(op, running_mean, channels, "running_mean");
    invstd = optional_values(op, running_var, channels, "running_var");
    for (double& v : invstd) v = 1.0 / std::sqrt(v + eps);
  }

  const bool nhwc = is_channels_last(input);
  const TensorRef x = nhwc ? input : contiguous(a.call(), input);
  const TensorRef dy = nhwc ? channels_last_copy(a.call(), grad_out, input.dtype(), op)
                            : contiguous(a.call(), to_dtype(a.call(), grad_out, input.dtype(), op));
  TensorRef grad_input = nhwc ? empty_channels_last(a.call(), input.sizes(), input.dtype())
                              : sdk::empty(a.call(), input.sizes(), input.dtype(), kCpuDevice);
  const int64_t rows = l.n * l.hw;  // channels-last rows
  // Per channel: sum(dy) and sum(dy * (x - mean)).
  std::vector<double> sum_dy(size_t(l.c), 0.0), dot(size_t(l.c), 0.0);
  const int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, l.count()));
  TS_DISPATCH_FLOAT(input.dtype(), break, {
    const scalar_t* xp = x.data<scalar_t>();
    const scalar_t* gp = dy.data<scalar_t>();
    if (nhwc) {
      sum_dy = channel_sums(rows, l.c, [&](int64_t r, double* acc) {
        for (int64_t i = 0; i < l.c; ++i) acc[i] += load(gp[r * l.c + i]);
      });
      dot = channel_sums(rows, l.c, [&](int64_t r, double* acc) {
        for (int64_t i = 0; i < l.c; ++i) acc[i] += load(gp[r * l.c + i]) * (load(xp[r * l.c + i]) - mean[size_t(i)]);
      });
    } else parallel_for(l.c, grain, [&](int64_t cb, int64_t ce) {
      for (int64_t c = cb; c < ce; ++c) {
        double s = 0, d = 0;
        const double m = mean[size_t(c)];
        for (int64_t n = 0; n < l.n; ++n) {
          const scalar_t* g = gp + (n * l.c + c) * l.hw;
          const scalar_t* xr = xp + (n * l.c + c) * l.hw;
          s += sum_over(l.hw, [g](int64_t i) { return load(g[i]); });
          d += sum_over(l.hw, [g, xr, m](int64_t i) { return load(g[i]) * (load(xr[i]) - m); });
        }
        sum_dy[size_t(c)] = s;
        dot[size_t(c)] = d;
      }
    });
    // grad_input = k * dy + k2 * (x - mean) + k3 per channel.
    std::vector<double> k(size_t(l.c)), k2(size_t(l.c), 0.0), k3(size_t(l.c), 0.0);
    for (size_t c = 0; c < size_t(l.c); ++c) {
      const double wc = w.empty() ? 1.0 : w[c];
      k[c] = wc * invstd[c];
      if (train && l.count() > 0) {
        const double n = double(l.count());
        k2[c] = -k[c] * invstd[c] * invstd[c] * dot[c] / n;
        k3[c] = -k[c] * sum_dy[c] / n;
      }
    }
    scalar_t* gi = grad_input.data<scalar_t>();
    if (nhwc) {
      parallel_for(rows, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, l.c)), [&](int64_t rb, int64_t re) {
        for (int64_t r = rb; r < re; ++r)
          for (size_t c = 0; c < size_t(l.c); ++c) {
            const int64_t i = r * l.c + int64_t(c);
            gi[i] = store<scalar_t>(k[c] * load(gp[i]) + k2[c] * (load(xp[i]) - mean[c]) + k3[c]);
          }
      });
    } else {
      const int64_t row_grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, l.hw));
      parallel_for(l.n * l.c, row_grain, [&](int64_t rb, int64_t re) {
      for (int64_t r = rb; r < re; ++r) {
        const size_t c = size_t(r % l.c);
        const int64_t off = r * l.hw;
        for (int64_t i = 0; i < l.hw; ++i)
          gi[off + i] = store<scalar_t>(k[c] * load(gp[off + i]) + k2[c] * (load(xp[off + i]) - mean[c]) + k3[c]);
      }
      });
    }
  });
  const int64_t none[] = {0};
  const int32_t param_dtype = weight ? weight->dtype() : input.dtype();
  TensorRef grad_weight = zeros(a.call(), none, param_dtype);
  if (weight) {
    std::vector<double> gw(size_t(l.c));
    for (size_t c = 0; c < size_t(l.c); ++c) gw[c] = dot[c] * invstd[c];
    grad_weight = tensor_of(a.call(), channels, param_dtype, gw);
  }
  TensorRef grad_bias = tensor_of(a.call(), channels, param_dtype, sum_dy);
  return3(a, std::move(grad_input), std::move(grad_weight), std::move(grad_bias));
}

}  // namespace

void register_batch_norm_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("native_batch_norm", key, batch_norm_kernel);
  reg.kernel("native_batch_norm_backward", key, batch_norm_backward_kernel);
}

}  // namespace tessera::cpu

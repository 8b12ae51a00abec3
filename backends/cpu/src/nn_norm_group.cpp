// native_group_norm and its backward. The input is made contiguous and seen as N x group rows
// of (C / group) * HxW elements; row statistics are two-pass in double, rows in parallel.
// mean / rstd have shape (N, group).
#include "nn_norm.h"

#include "strided.h"
#include "tensor_iterator.h"

#include <cmath>

namespace tessera::cpu {
namespace {

using namespace norm;
using sdk::Args;

using Groups = sdk::GroupLayout;  // N x group rows of (C / group) * HxW elements

// native_group_norm(Tensor input, Tensor? weight, Tensor? bias, int N, int C, int HxW, int group, float eps)
void group_norm_kernel(Args& a) {
  const char* op = "native_group_norm";
  const TensorRef input = a.tensor(0);
  const std::optional<TensorRef> weight = a.optional_tensor(1), bias = a.optional_tensor(2);
  check_cpu_all(op, {&input, weight ? &*weight : nullptr, bias ? &*bias : nullptr});
  require_floating(op, input, "input");
  const Groups g = sdk::group_layout(op, input, a.to_int(3), a.to_int(4), a.to_int(5), a.to_int(6));
  const double eps = a.to_double(7);
  const int64_t channels[] = {g.c};
  const std::vector<double> w = optional_values(op, weight, channels, "weight");
  const std::vector<double> b = optional_values(op, bias, channels, "bias");

  const TensorRef x = contiguous(a.call(), input);
  TensorRef out = sdk::empty(a.call(), input.sizes(), input.dtype(), kCpuDevice);
  std::vector<double> mean(size_t(g.n * g.group)), rstd(size_t(g.n * g.group));
  const int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, g.row()));
  TS_DISPATCH_FLOAT(input.dtype(), break, {
    const scalar_t* xp = x.data<scalar_t>();
    scalar_t* yp = out.data<scalar_t>();
    parallel_for(g.n * g.group, grain, [&](int64_t rb, int64_t re) {
      for (int64_t r = rb; r < re; ++r) {
        double mu, var;
        moments(xp + r * g.row(), 1, 0, g.row(), mu, var);
        const double rs = 1.0 / std::sqrt(var + eps);
        mean[size_t(r)] = mu;
        rstd[size_t(r)] = rs;
        const int64_t c0 = (r % g.group) * g.per_group();
        for (int64_t k = 0; k < g.per_group(); ++k) {
          const size_t c = size_t(c0 + k);
          const double scale = rs * (w.empty() ? 1.0 : w[c]), shift = (b.empty() ? 0.0 : b[c]) - mu * scale;
          const int64_t off = r * g.row() + k * g.hw;
          for (int64_t i = 0; i < g.hw; ++i) yp[off + i] = store<scalar_t>(load(xp[off + i]) * scale + shift);
        }
      }
    });
  });
  const int32_t sd = stat_dtype(input.dtype());
  const int64_t stat_shape[] = {g.n, g.group};
  return3(a, std::move(out), tensor_of(a.call(), stat_shape, sd, mean), tensor_of(a.call(), stat_shape, sd, rstd));
}

// native_group_norm_backward(Tensor grad_out, Tensor input, Tensor mean, Tensor rstd, Tensor? weight,
//   int N, int C, int HxW, int group) -> (grad_input, grad_weight, grad_bias)
// grad_weight is an empty [0] tensor when weight is None; grad_bias is always computed.
void group_norm_backward_kernel(Args& a) {
  const char* op = "native_group_norm_backward";
  const TensorRef grad_out = a.tensor(0), input = a.tensor(1), mean_t = a.tensor(2), rstd_t = a.tensor(3);
  const std::optional<TensorRef> weight = a.optional_tensor(4);
  check_cpu_all(op, {&grad_out, &input, &mean_t, &rstd_t, weight ? &*weight : nullptr});
  require_floating(op, input, "input");
  require_floating(op, grad_out, "grad_out");
  require_shape(op, grad_out, input.sizes(), "grad_out");
  const Groups g = sdk::group_layout(op, input, a.to_int(5), a.to_int(6), a.to_int(7), a.to_int(8));
  const int64_t channels[] = {g.c};
  const std::vector<double> w = optional_values(op, weight, channels, "weight");
  sdk::check_group_statistics(op, g, mean_t, rstd_t);
  const std::vector<double> mean = read_values(op, mean_t, "mean"), rstd = read_values(op, rstd_t, "rstd");

  const TensorRef x = contiguous(a.call(), input);
  const TensorRef dy = contiguous(a.call(), to_dtype(a.call(), grad_out, input.dtype(), op));
  TensorRef grad_input = sdk::empty(a.call(), input.sizes(), input.dtype(), kCpuDevice);
  std::vector<double> gw(size_t(g.c), 0.0), gb(size_t(g.c), 0.0);
  TS_DISPATCH_FLOAT(input.dtype(), break, {
    const scalar_t* xp = x.data<scalar_t>();
    const scalar_t* gp = dy.data<scalar_t>();
    scalar_t* gi = grad_input.data<scalar_t>();
    // dx = rstd * (h - mean(h) - xhat * mean(h * xhat)) over a row, h = dy * w[c].
    const int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, g.row()));
    parallel_for(g.n * g.group, grain, [&](int64_t rb, int64_t re) {
      for (int64_t r = rb; r < re; ++r) {
        const double mu = mean[size_t(r)], rs = rstd[size_t(r)];
        const int64_t c0 = (r % g.group) * g.per_group(), base = r * g.row();
        double sh = 0, shx = 0;
        for (int64_t k = 0; k < g.per_group(); ++k) {
          const double wc = w.empty() ? 1.0 : w[size_t(c0 + k)];
          for (int64_t i = 0; i < g.hw; ++i) {
            const int64_t o = base + k * g.hw + i;
            const double h = load(gp[o]) * wc;
            sh += h;
            shx += h * (load(xp[o]) - mu) * rs;
          }
        }
        if (g.row() == 0) continue;
        const double n = double(g.row()), c1 = sh / n, c2 = shx / n;
        for (int64_t k = 0; k < g.per_group(); ++k) {
          const double wc = w.empty() ? 1.0 : w[size_t(c0 + k)];
          for (int64_t i = 0; i < g.hw; ++i) {
            const int64_t o = base + k * g.hw + i;
            const double xh = (load(xp[o]) - mu) * rs;
            gi[o] = store<scalar_t>(rs * (load(gp[o]) * wc - c1 - xh * c2));
          }
        }
      }
    });
    // Per channel, over the batch: sum(dy * xhat) and sum(dy).
    const int64_t cgrain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, g.n * g.hw));
    parallel_for(g.c, cgrain, [&](int64_t cb, int64_t ce) {
      for (int64_t c = cb; c < ce; ++c) {
        double sw = 0, sb = 0;
        for (int64_t n = 0; n < g.n; ++n) {
          const size_t r = size_t(n * g.group + c / g.per_group());
          const int64_t off = (n * g.c + c) * g.hw;
          for (int64_t i = 0; i < g.hw; ++i) {
            const double d = load(gp[off + i]);
            sw += d * (load(xp[off + i]) - mean[r]) * rstd[r];
            sb += d;
          }
        }
        gw[size_t(c)] = sw;
        gb[size_t(c)] = sb;
      }
    });
  });
  const int64_t none[] = {0};
  const int32_t param_dtype = weight ? weight->dtype() : input.dtype();
  TensorRef grad_weight = weight ? tensor_of(a.call(), channels, param_dtype, gw) : zeros(a.call(), none, param_dtype);
  TensorRef grad_bias = tensor_of(a.call(), channels, param_dtype, gb);
  return3(a, std::move(grad_input), std::move(grad_weight), std::move(grad_bias));
}

}  // namespace

void register_group_norm_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("native_group_norm", key, group_norm_kernel);
  reg.kernel("native_group_norm_backward", key, group_norm_backward_kernel);
}

}  // namespace tessera::cpu

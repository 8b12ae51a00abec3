// native_layer_norm and its backward. The input is made contiguous and seen as M rows of the
// normalized_shape's N elements; each row's statistics are two-pass in double, rows in
// parallel. mean / rstd have the input's leading dims followed by a 1 per normalized dim.
#include "nn_norm.h"

#include "simd_table.h"
#include "strided.h"
#include "tensor_iterator.h"

#include <tessera/sdk/norm_geometry.h>

#include <algorithm>
#include <cmath>

namespace tessera::cpu {
namespace {

using namespace norm;
using sdk::Args;
using sdk::fail;

using Rows = sdk::LayerNormRows;

// native_layer_norm(Tensor input, int[] normalized_shape, Tensor? weight, Tensor? bias, float eps)
void layer_norm_kernel(Args& a) {
  const char* op = "native_layer_norm";
  const TensorRef input = a.tensor(0);
  const std::vector<int64_t> normalized(a.int_list(1).begin(), a.int_list(1).end());
  const std::optional<TensorRef> weight = a.optional_tensor(2), bias = a.optional_tensor(3);
  const double eps = a.to_double(4);
  check_cpu_all(op, {&input, weight ? &*weight : nullptr, bias ? &*bias : nullptr});
  require_floating(op, input, "input");
  const Rows r = sdk::layer_norm_rows(op, input, normalized);
  const std::vector<double> w = optional_values(op, weight, normalized, "weight");
  const std::vector<double> b = optional_values(op, bias, normalized, "bias");

  const TensorRef x = contiguous(a.call(), input);
  TensorRef out = sdk::empty(a.call(), input.sizes(), input.dtype(), kCpuDevice);
  std::vector<double> mean(size_t(r.m)), rstd(size_t(r.m));
  const int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, r.n));
  const simd::Table& vec = simd::vec();
  TS_DISPATCH_FLOAT(input.dtype(), break, {
    const scalar_t* xp = x.data<scalar_t>();
    scalar_t* yp = out.data<scalar_t>();
    // (Not `if constexpr`: outside a template both branches compile, hence the casts.)
    if (std::is_same_v<scalar_t, float> && vec.layer_norm_row) {  // float32 rows through the vector kernels
      const std::vector<float> wf(w.begin(), w.end()), bf(b.begin(), b.end());
      const float* xf = reinterpret_cast<const float*>(xp);
      float* yf = reinterpret_cast<float*>(yp);
      parallel_for(r.m, grain, [&](int64_t rb, int64_t re) {
        for (int64_t i = rb; i < re; ++i)
          vec.layer_norm_row(yf + i * r.n, xf + i * r.n, r.n, eps, wf.empty() ? nullptr : wf.data(),
                             bf.empty() ? nullptr : bf.data(), &mean[size_t(i)], &rstd[size_t(i)]);
      });
      break;
    }
    parallel_for(r.m, grain, [&](int64_t rb, int64_t re) {
      for (int64_t i = rb; i < re; ++i) {
        double mu, var;
        moments(xp + i * r.n, 1, 0, r.n, mu, var);
        const double rs = 1.0 / std::sqrt(var + eps);
        mean[size_t(i)] = mu;
        rstd[size_t(i)] = rs;
        const scalar_t* p = xp + i * r.n;
        scalar_t* q = yp + i * r.n;
        if (w.empty() && b.empty()) {
          for (int64_t j = 0; j < r.n; ++j) q[j] = store<scalar_t>((load(p[j]) - mu) * rs);
        } else {
          for (int64_t j = 0; j < r.n; ++j) {
            const double v = (load(p[j]) - mu) * rs;
            q[j] = store<scalar_t>(v * (w.empty() ? 1.0 : w[size_t(j)]) + (b.empty() ? 0.0 : b[size_t(j)]));
          }
        }
      }
    });
  });
  const int32_t sd = stat_dtype(input.dtype());
  return3(a, std::move(out), tensor_of(a.call(), r.stat_shape, sd, mean), tensor_of(a.call(), r.stat_shape, sd, rstd));
}

// When grad_out repeats one float32 row over all the rows (its leading dims have stride 0:
// sum().backward() hands down an expanded scalar), that row gathered, so the kernel reads it with
// row stride 0 instead of copying grad_out out to the input's size; empty otherwise.
std::vector<float> repeated_row(const TensorRef& g, int64_t normalized_dims, const Rows& r) {
  const int64_t lead = g.dim() - normalized_dims;
  if (g.dtype() != TS_FLOAT32 || r.m < 2) return {};
  for (int64_t d = 0; d < lead; ++d)
    if (g.size(d) != 1 && g.stride(d) != 0) return {};
  std::vector<float> row(size_t(r.n));
  std::vector<int64_t> index(size_t(normalized_dims), 0);
  const float* base = g.data<float>();
  for (int64_t j = 0; j < r.n; ++j) {
    int64_t offset = 0;
    for (int64_t d = 0; d < normalized_dims; ++d) offset += index[size_t(d)] * g.stride(lead + d);
    row[size_t(j)] = base[offset];
    for (int64_t d = normalized_dims - 1; d >= 0 && ++index[size_t(d)] == g.size(lead + d); --d) index[size_t(d)] = 0;
  }
  return row;
}

// native_layer_norm_backward(Tensor grad_out, Tensor input, int[] normalized_shape, Tensor mean,
//   Tensor rstd, Tensor? weight, Tensor? bias) -> (grad_input, grad_weight, grad_bias)
// grad_weight / grad_bias are empty [0] tensors when weight / bias is None.
void layer_norm_backward_kernel(Args& a) {
  const char* op = "native_layer_norm_backward";
  const TensorRef grad_out = a.tensor(0), input = a.tensor(1);
  const std::vector<int64_t> normalized(a.int_list(2).begin(), a.int_list(2).end());
  const TensorRef mean_t = a.tensor(3), rstd_t = a.tensor(4);
  const std::optional<TensorRef> weight = a.optional_tensor(5), bias = a.optional_tensor(6);
  check_cpu_all(op, {&grad_out, &input, &mean_t, &rstd_t, weight ? &*weight : nullptr, bias ? &*bias : nullptr});
  require_floating(op, input, "input");
  require_floating(op, grad_out, "grad_out");
  require_shape(op, grad_out, input.sizes(), "grad_out");
  const Rows r = sdk::layer_norm_rows(op, input, normalized);
  const std::vector<double> w = optional_values(op, weight, normalized, "weight");
  if (bias) {
    require_floating(op, *bias, "bias");
    require_shape(op, *bias, normalized, "bias");
  }
  const std::vector<double> mean = read_values(op, mean_t, "mean"), rstd = read_values(op, rstd_t, "rstd");
  if (int64_t(mean.size()) != r.m || int64_t(rstd.size()) != r.m)
    fail(TS_ERROR_VALUE, op, ": expected mean and rstd of ", r.m, " elements (shape ", strided::str(r.stat_shape),
         "), got shapes ", strided::str(mean_t.sizes()), " and ", strided::str(rstd_t.sizes()));

  const TensorRef x = contiguous(a.call(), input);
  const simd::Table& vec = simd::vec();
  const std::vector<float> dy_row =  // (only the vector kernels below read a repeated row)
      input.dtype() == TS_FLOAT32 && vec.layer_norm_backward_row ? repeated_row(grad_out, int64_t(normalized.size()), r) : std::vector<float>{};
  const TensorRef dy = dy_row.empty() ? contiguous(a.call(), to_dtype(a.call(), grad_out, input.dtype(), op)) : grad_out;
  TensorRef grad_input = sdk::empty(a.call(), input.sizes(), input.dtype(), kCpuDevice);
  // grad_weight / grad_bias sum over rows: a fixed number of row blocks (independent of the
  // thread count, so results are reproducible) each sum into their own buffer.
  const bool want_w = weight.has_value(), want_b = bias.has_value();
  const int64_t blocks = (want_w || want_b) ? std::min<int64_t>(std::max<int64_t>(r.m, 1), 16) : 0;
  std::vector<double> part_w(want_w ? size_t(blocks * r.n) : 0, 0.0), part_b(want_b ? size_t(blocks * r.n) : 0, 0.0);
  const int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, r.n));
  TS_DISPATCH_FLOAT(input.dtype(), break, {
    const scalar_t* xp = x.data<scalar_t>();
    const scalar_t* gp = dy.data<scalar_t>();
    scalar_t* gi = grad_input.data<scalar_t>();
    if (std::is_same_v<scalar_t, float> && vec.layer_norm_backward_row) {  // float32 through the vector kernels
      const std::vector<float> wf(w.begin(), w.end());
      const float* xf = reinterpret_cast<const float*>(xp);
      const float* gf = dy_row.empty() ? reinterpret_cast<const float*>(gp) : dy_row.data();
      const int64_t g_row_stride = dy_row.empty() ? r.n : 0;
      float* gif = reinterpret_cast<float*>(gi);
      auto grad_input_row = [&](int64_t i, float* gw, float* gb) {
        vec.layer_norm_backward_row(gif + i * r.n, gf + i * g_row_stride, xf + i * r.n, r.n, float(mean[size_t(i)]),
                                    float(rstd[size_t(i)]), wf.empty() ? nullptr : wf.data(), gw, gb);
      };
      if (blocks == 0) {
        parallel_for(r.m, grain, [&](int64_t rb, int64_t re) {
          for (int64_t i = rb; i < re; ++i) grad_input_row(i, nullptr, nullptr);
        });
        break;
      }
      // One pass: each row block computes its rows' grad_input and, while the row is in
      // registers, adds it to the block's parameter gradients (float within a block, the
      // blocks in double).
      std::vector<float> fw(part_w.size(), 0.0f), fb(part_b.size(), 0.0f);
      parallel_for(blocks, 1, [&](int64_t bb, int64_t be) {
        for (int64_t blk = bb; blk < be; ++blk)
          for (int64_t i = r.m * blk / blocks; i < r.m * (blk + 1) / blocks; ++i)
            grad_input_row(i, want_w ? fw.data() + blk * r.n : nullptr, want_b ? fb.data() + blk * r.n : nullptr);
      });
      std::copy(fw.begin(), fw.end(), part_w.begin());
      std::copy(fb.begin(), fb.end(), part_b.begin());
      break;
    }
    // dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * w.
    parallel_for(r.m, grain, [&](int64_t rb, int64_t re) {
      for (int64_t i = rb; i < re; ++i) {
        const scalar_t* p = xp + i * r.n;
        const scalar_t* g = gp + i * r.n;
        const double mu = mean[size_t(i)], rs = rstd[size_t(i)];
        double sg = 0, sgx = 0;
        for (int64_t j = 0; j < r.n; ++j) {
          const double gj = load(g[j]) * (w.empty() ? 1.0 : w[size_t(j)]);
          sg += gj;
          sgx += gj * (load(p[j]) - mu) * rs;
        }
        const double n = double(r.n), c1 = sg / n, c2 = sgx / n;
        for (int64_t j = 0; j < r.n; ++j) {
          const double gj = load(g[j]) * (w.empty() ? 1.0 : w[size_t(j)]);
          const double xh = (load(p[j]) - mu) * rs;
          gi[i * r.n + j] = store<scalar_t>(rs * (gj - c1 - xh * c2));
        }
      }
    });
    if (blocks > 0) {
      parallel_for(blocks, 1, [&](int64_t bb, int64_t be) {
        for (int64_t blk = bb; blk < be; ++blk) {
          double* pw = want_w ? part_w.data() + blk * r.n : nullptr;
          double* pb = want_b ? part_b.data() + blk * r.n : nullptr;
          for (int64_t i = r.m * blk / blocks; i < r.m * (blk + 1) / blocks; ++i) {
            const scalar_t* p = xp + i * r.n;
            const scalar_t* g = gp + i * r.n;
            const double mu = mean[size_t(i)], rs = rstd[size_t(i)];
            for (int64_t j = 0; j < r.n; ++j) {
              const double gj = load(g[j]);
              if (pw) pw[j] += gj * (load(p[j]) - mu) * rs;
              if (pb) pb[j] += gj;
            }
          }
        }
      });
    }
  });
  auto total = [&](const std::vector<double>& part) {
    std::vector<double> sum(size_t(r.n), 0.0);
    for (int64_t blk = 0; blk < blocks; ++blk)
      for (int64_t j = 0; j < r.n; ++j) sum[size_t(j)] += part[size_t(blk * r.n + j)];
    return sum;
  };
  const int64_t none[] = {0};
  TensorRef grad_weight = want_w ? tensor_of(a.call(), normalized, weight->dtype(), total(part_w))
                                 : zeros(a.call(), none, input.dtype());
  TensorRef grad_bias = want_b ? tensor_of(a.call(), normalized, bias->dtype(), total(part_b))
                               : zeros(a.call(), none, input.dtype());
  return3(a, std::move(grad_input), std::move(grad_weight), std::move(grad_bias));
}

}  // namespace

void register_layer_norm_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("native_layer_norm", key, layer_norm_kernel);
  reg.kernel("native_layer_norm_backward", key, layer_norm_backward_kernel);
}

}  // namespace tessera::cpu

// The backward of softmax and log_softmax along one dim, from the forward's result y:
//   softmax:      grad_input = y * (g - sum(g * y))
//   log_softmax:  grad_input = g - exp(y) * sum(g)
// Rows along `dim` are walked like softmax.cpp: the other dims through a LoopGeometry in
// parallel, and a block of adjacent rows at a time when `dim` is not the innermost.
#include "kernels.h"
#include "simd_table.h"
#include "tensor_iterator.h"

#include <cmath>
#include <cstdlib>

namespace tessera::cpu {
namespace {

using sdk::fail;
using sdk::opmath_t;

template <class T, bool Log>
void backward_rows(const TensorRef& out, const TensorRef& g, const TensorRef& y, int64_t dim) {
  using M = opmath_t<T>;
  const TensorRef* ts[3] = {&out, &g, &y};
  const int64_t len = g.dim() == 0 ? 1 : g.size(dim);
  int64_t step[3];
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides[3];
  for (int k = 0; k < 3; ++k) step[k] = g.dim() == 0 ? 0 : ts[k]->stride(dim) * ts[k]->itemsize();
  for (int64_t d = 0; d < g.dim(); ++d) {
    if (d == dim) continue;
    sizes.push_back(g.size(d));
    for (int k = 0; k < 3; ++k) strides[k].push_back(ts[k]->stride(d));
  }
  LoopGeometry rows(3, sizes);
  for (int k = 0; k < 3; ++k) rows.set_operand(k, sizes, strides[k], ts[k]->itemsize());
  rows.coalesce();
  if (len == 0 || rows.numel() == 0) return;

  // The row sum each formula needs, and the element it writes.
  auto term = [](M gv, M yv) { return Log ? gv : gv * yv; };
  auto result = [](M gv, M yv, M sum) { return Log ? gv - std::exp(yv) * sum : yv * (gv - sum); };
  char* base[3] = {static_cast<char*>(out.data()), static_cast<char*>(g.data()), static_cast<char*>(y.data())};
  const int rd = rows.ndim();
  if (rd > 0 && std::abs(rows.stride(1, rd - 1)) < std::abs(step[1])) {
    // `dim` is not the innermost: kBlock rows adjacent in memory are summed side by side.
    constexpr int64_t kBlock = 64;
    const int64_t width = rows.sizes()[size_t(rd - 1)], blocks = (width + kBlock - 1) / kBlock;
    int64_t js[3];
    for (int k = 0; k < 3; ++k) js[k] = rows.stride(k, rd - 1);
    const LoopGeometry outer = rows.slice_dims(0, rd - 1);
    const int64_t grain = std::max<int64_t>(1, kGrainSize / (kBlock * len));
    parallel_for(outer.numel() * blocks, grain, [&](int64_t tb, int64_t te) {
      M sum[kBlock];
      for (int64_t task = tb; task < te; ++task) {
        const int64_t o = task / blocks, j0 = task % blocks * kBlock, nb = std::min(kBlock, width - j0);
        char* p[3];
        for (int k = 0; k < 3; ++k) p[k] = base[k] + outer.offset_of(k, o) + j0 * js[k];
        auto at = [&](int k, int64_t i, int64_t j) -> T& {
          return *reinterpret_cast<T*>(p[k] + i * step[k] + j * js[k]);
        };
        for (int64_t j = 0; j < nb; ++j) sum[j] = 0;
        for (int64_t i = 0; i < len; ++i)
          for (int64_t j = 0; j < nb; ++j) sum[j] += term(M(at(1, i, j)), M(at(2, i, j)));
        for (int64_t i = 0; i < len; ++i)
          for (int64_t j = 0; j < nb; ++j) at(0, i, j) = T(result(M(at(1, i, j)), M(at(2, i, j)), sum[j]));
      }
    });
    return;
  }
  if constexpr (std::is_same_v<T, float>) {
    if (step[0] == 4 && step[1] == 4 && step[2] == 4) {
      // Contiguous float rows: a few vectorised passes per row (exp is most of the work) that
      // stay in cache.
      const simd::Table& v = simd::vec();
      rows.run(
          base,
          [&](char** d, const int64_t* s, int64_t n) {
            for (int64_t r = 0; r < n; ++r) {
              float* o = reinterpret_cast<float*>(d[0] + r * s[0]);
              const float* gp = reinterpret_cast<const float*>(d[1] + r * s[1]);
              const float* yp = reinterpret_cast<const float*>(d[2] + r * s[2]);
              if constexpr (Log) {  // g - exp(y) * sum(g)
                const float sum = float(v.sum(gp, len));
                v.unary[int(simd::Unary::Exp)](o, yp, len);
                v.binary_vs[int(simd::Binary::Mul)](o, o, -sum, len);
                v.binary_vv[int(simd::Binary::Add)](o, o, gp, len);
              } else {  // y * (g - sum(g * y))
                v.binary_vv[int(simd::Binary::Mul)](o, gp, yp, len);
                const float sum = float(v.sum(o, len));
                v.binary_vs[int(simd::Binary::Sub)](o, gp, sum, len);
                v.binary_vv[int(simd::Binary::Mul)](o, o, yp, len);
              }
            }
          },
          std::max<int64_t>(1, kGrainSize / len));
      return;
    }
  }
  rows.run(
      base,
      [&](char** d, const int64_t* s, int64_t n) {
        for (int64_t r = 0; r < n; ++r) {
          char* o = d[0] + r * s[0];
          const char* gp = d[1] + r * s[1];
          const char* yp = d[2] + r * s[2];
          auto gv = [&](int64_t i) { return M(*reinterpret_cast<const T*>(gp + i * step[1])); };
          auto yv = [&](int64_t i) { return M(*reinterpret_cast<const T*>(yp + i * step[2])); };
          M sum = 0;
          for (int64_t i = 0; i < len; ++i) sum += term(gv(i), yv(i));
          for (int64_t i = 0; i < len; ++i) *reinterpret_cast<T*>(o + i * step[0]) = T(result(gv(i), yv(i), sum));
        }
      },
      std::max<int64_t>(1, kGrainSize / len));
}

// _softmax_backward_data / _log_softmax_backward_data
//   (Tensor grad_output, Tensor output, int dim, ScalarType input_dtype)
// Computes in the promoted dtype of grad_output and output; the result has input_dtype (the
// forward's input dtype, lower than the output's when softmax ran with dtype=).
template <bool Log>
void softmax_backward_kernel(sdk::Args& a) {
  const char* name = Log ? "_log_softmax_backward_data" : "_softmax_backward_data";
  TensorRef g = a.tensor(0), y = a.tensor(1);
  const TensorRef* ts[] = {&g, &y};
  check_cpu(name, ts);
  if (g.shape_vector() != y.shape_vector())
    fail(TS_ERROR_VALUE, name, ": expected grad_output and output of the same shape, got ", shape_str(g.sizes()),
         " and ", shape_str(y.sizes()));
  const int64_t dim = wrap_dim(name, a.to_int(2), g.dim());
  const std::optional<int32_t> input_dtype = a.optional_dtype(3);
  if (!input_dtype) fail(TS_ERROR_TYPE, name, ": expected input_dtype to be a dtype, got None");
  const int32_t dtype = sdk::promote_types(g.dtype(), y.dtype());
  if (!sdk::is_floating(dtype))
    fail(TS_ERROR_TYPE, name, ": expected grad_output and output of a floating point dtype, got ",
         sdk::dtype_name(g.dtype()), " and ", sdk::dtype_name(y.dtype()));
  if (!sdk::is_floating(*input_dtype))
    fail(TS_ERROR_TYPE, name, ": expected a floating point input_dtype, got ", sdk::dtype_name(*input_dtype));
  const TensorRef gc = to_dtype(a.call(), g, dtype, name), yc = to_dtype(a.call(), y, dtype, name);
  TensorRef out = sdk::empty(a.call(), g.sizes(), dtype, kCpuDevice);
  TS_DISPATCH_FLOAT(dtype, fail(TS_ERROR_TYPE, name, ": unsupported dtype"),
                    backward_rows<scalar_t, Log>(out, gc, yc, dim));
  if (*input_dtype != dtype) out = convert(a.call(), out, *input_dtype, name);
  a.return_tensor(std::move(out));
}

}  // namespace

void register_softmax_backward_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("_softmax_backward_data", key, softmax_backward_kernel<false>);
  reg.kernel("_log_softmax_backward_data", key, softmax_backward_kernel<true>);
}

}  // namespace tessera::cpu

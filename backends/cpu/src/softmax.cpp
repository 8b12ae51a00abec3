// softmax and log_softmax along one dim, numerically stable (the row's max is subtracted
// first). Rows are walked with the shared LoopGeometry over every other dim, in parallel;
// contiguous float32 rows go through the vector kernels.
#include "kernels.h"
#include "simd_table.h"
#include "tensor_iterator.h"

#include <cmath>
#include <cstdlib>
#include <limits>

namespace tessera::cpu {
namespace {

using sdk::fail;
using sdk::opmath_t;

template <class T, bool Log>
void softmax_rows(const TensorRef& out, const TensorRef& in, int64_t dim) {
  using M = opmath_t<T>;
  const int64_t len = in.dim() == 0 ? 1 : in.size(dim);
  const int64_t in_step = in.dim() == 0 ? 0 : in.stride(dim) * in.itemsize();
  const int64_t out_step = out.dim() == 0 ? 0 : out.stride(dim) * out.itemsize();
  // The rows: every dim but `dim`, operands {out, in}.
  std::vector<int64_t> sizes, out_strides, in_strides;
  for (int64_t d = 0; d < in.dim(); ++d) {
    if (d == dim) continue;
    sizes.push_back(in.size(d));
    out_strides.push_back(out.stride(d));
    in_strides.push_back(in.stride(d));
  }
  LoopGeometry rows(2, sizes);
  rows.set_operand(0, sizes, out_strides, out.itemsize());
  rows.set_operand(1, sizes, in_strides, in.itemsize());
  rows.coalesce();
  if (len == 0 || rows.numel() == 0) return;

  char* base[2] = {static_cast<char*>(out.data()), static_cast<char*>(in.data())};
  const int rd = rows.ndim();
  if (rd > 0 && std::abs(rows.stride(1, rd - 1)) < std::abs(in_step)) {
    // `dim` is not the innermost: rows adjacent along the innermost other dim are done a block
    // at a time, so every pass reads memory sequentially. softmax keeps exp(x - max) in the
    // output between passes (one extra rounding for 16-bit outputs).
    constexpr int64_t kBlock = 64;
    const int64_t width = rows.sizes()[size_t(rd - 1)], blocks = (width + kBlock - 1) / kBlock;
    const int64_t xs = rows.stride(1, rd - 1), ys = rows.stride(0, rd - 1);
    const LoopGeometry outer = rows.slice_dims(0, rd - 1);
    const int64_t grain = std::max<int64_t>(1, kGrainSize / (kBlock * len));
    parallel_for(outer.numel() * blocks, grain, [&](int64_t tb, int64_t te) {
      M mx[kBlock], sum[kBlock];
      for (int64_t task = tb; task < te; ++task) {
        const int64_t o = task / blocks, j0 = task % blocks * kBlock, nb = std::min(kBlock, width - j0);
        const char* x = base[1] + outer.offset_of(1, o) + j0 * xs;
        char* y = base[0] + outer.offset_of(0, o) + j0 * ys;
        auto at = [&](int64_t i, int64_t j) { return M(*reinterpret_cast<const T*>(x + i * in_step + j * xs)); };
        auto out_at = [&](int64_t i, int64_t j) -> T& { return *reinterpret_cast<T*>(y + i * out_step + j * ys); };
        for (int64_t j = 0; j < nb; ++j) {
          mx[j] = -std::numeric_limits<M>::infinity();
          sum[j] = 0;
        }
        for (int64_t i = 0; i < len; ++i)
          for (int64_t j = 0; j < nb; ++j) mx[j] = std::max(mx[j], at(i, j));
        if constexpr (Log) {
          for (int64_t i = 0; i < len; ++i)
            for (int64_t j = 0; j < nb; ++j) sum[j] += std::exp(at(i, j) - mx[j]);
          for (int64_t j = 0; j < nb; ++j) mx[j] += std::log(sum[j]);
          for (int64_t i = 0; i < len; ++i)
            for (int64_t j = 0; j < nb; ++j) out_at(i, j) = T(at(i, j) - mx[j]);
        } else {
          for (int64_t i = 0; i < len; ++i)
            for (int64_t j = 0; j < nb; ++j) {
              const M e = std::exp(at(i, j) - mx[j]);
              sum[j] += e;
              out_at(i, j) = T(e);
            }
          for (int64_t j = 0; j < nb; ++j) sum[j] = M(1) / sum[j];
          for (int64_t i = 0; i < len; ++i)
            for (int64_t j = 0; j < nb; ++j) out_at(i, j) = T(M(out_at(i, j)) * sum[j]);
        }
      }
    });
    return;
  }
  const int64_t grain = std::max<int64_t>(1, kGrainSize / len);
  if constexpr (std::is_same_v<T, float>) {
    if (in_step == int64_t(sizeof(float)) && out_step == int64_t(sizeof(float))) {
      const auto row = Log ? simd::vec().log_softmax : simd::vec().softmax;
      rows.run(
          base,
          [&](char** d, const int64_t* s, int64_t n) {
            for (int64_t r = 0; r < n; ++r)
              row(reinterpret_cast<float*>(d[0] + r * s[0]), reinterpret_cast<const float*>(d[1] + r * s[1]), len);
          },
          grain);
      return;
    }
  }
  rows.run(
      base,
      [&](char** d, const int64_t* s, int64_t n) {
        std::vector<M> e(Log ? 0 : size_t(len));  // exp(x - max) of one row, reused
        for (int64_t r = 0; r < n; ++r) {
          const char* x = d[1] + r * s[1];
          char* y = d[0] + r * s[0];
          auto at = [&](int64_t i) { return M(*reinterpret_cast<const T*>(x + i * in_step)); };
          M mx = -std::numeric_limits<M>::infinity();
          for (int64_t i = 0; i < len; ++i) mx = std::max(mx, at(i));
          M sum = 0;
          if constexpr (Log) {
            for (int64_t i = 0; i < len; ++i) sum += std::exp(at(i) - mx);
            const M shift = mx + std::log(sum);
            for (int64_t i = 0; i < len; ++i) *reinterpret_cast<T*>(y + i * out_step) = T(at(i) - shift);
          } else {
            for (int64_t i = 0; i < len; ++i) sum += e[size_t(i)] = std::exp(at(i) - mx);
            const M inv = M(1) / sum;
            for (int64_t i = 0; i < len; ++i) *reinterpret_cast<T*>(y + i * out_step) = T(e[size_t(i)] * inv);
          }
        }
      },
      grain);
}

// softmax.int / log_softmax.int (Tensor self, int dim, ScalarType? dtype=None)
template <bool Log>
void softmax_kernel(sdk::Args& a) {
  const char* name = Log ? "log_softmax" : "softmax";
  TensorRef self = a.tensor(0);
  const TensorRef* ts[] = {&self};
  check_cpu(name, ts);
  const int64_t dim = wrap_dim(name, a.to_int(1), self.dim());
  const std::optional<int32_t> dtype = a.optional_dtype(2);
  const int32_t out_dtype = dtype.value_or(self.dtype());
  if (!sdk::is_floating(out_dtype))
    fail(TS_ERROR_TYPE, name, ": expected a floating point input or dtype, got ", sdk::dtype_name(out_dtype));
  const TensorRef in = to_dtype(a.call(), self, out_dtype, name);
  TensorRef out = sdk::empty(a.call(), in.sizes(), out_dtype, kCpuDevice);
  TS_DISPATCH_FLOAT(out_dtype, fail(TS_ERROR_TYPE, name, ": unsupported dtype"), softmax_rows<scalar_t, Log>(out, in, dim));
  a.return_tensor(std::move(out));
}

}  // namespace

void register_softmax_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("softmax.int", key, softmax_kernel<false>);
  reg.kernel("log_softmax.int", key, softmax_kernel<true>);
}

}  // namespace tessera::cpu

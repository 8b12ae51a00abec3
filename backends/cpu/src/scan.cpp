// Cumulative sums and products along one dim, over a contiguous [outer, n, inner] view: each
// outer block runs the n steps with `inner` accumulators side by side (a vectorisable inner loop,
// no transpose). Floats accumulate in double and integers in int64, as PyTorch's CPU kernels;
// integral and bool inputs give int64 results unless `dtype` says otherwise.
#include "kernels.h"
#include "strided.h"
#include "tensor_iterator.h"

#include <tessera/sdk/ops.h>

#include <omp.h>

#include <vector>

namespace tessera::cpu {
namespace {

using sdk::fail;
namespace ops = sdk::ops;

// One contiguous run (inner == 1): the running value in a register; long runs split over the
// threads: each sums its block, then scans it from the blocks before it.
template <class T, bool Product, class Acc>
void scan_run(const T* src, T* dst, int64_t n) {
  const int threads = n >= (int64_t(1) << 18) ? strided::threads_for(n) : 1;
  if (threads <= 1) {
    Acc acc = Acc(Product ? 1 : 0);
    for (int64_t i = 0; i < n; ++i) {
      if constexpr (Product) acc *= Acc(src[i]);
      else acc += Acc(src[i]);
      dst[i] = T(acc);
    }
    return;
  }
  std::vector<Acc> totals(static_cast<size_t>(threads), Acc(Product ? 1 : 0));
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t begin = n * t / nt, end = n * (t + 1) / nt;
    Acc acc = Acc(Product ? 1 : 0);
    for (int64_t i = begin; i < end; ++i) {
      if constexpr (Product) acc *= Acc(src[i]);
      else acc += Acc(src[i]);
    }
    totals[size_t(t)] = acc;
#pragma omp barrier
    Acc start = Acc(Product ? 1 : 0);
    for (int u = 0; u < t; ++u) {
      if constexpr (Product) start *= totals[size_t(u)];
      else start += totals[size_t(u)];
    }
    acc = start;
    for (int64_t i = begin; i < end; ++i) {
      if constexpr (Product) acc *= Acc(src[i]);
      else acc += Acc(src[i]);
      dst[i] = T(acc);
    }
  }
}

template <class T, bool Product>
void scan(const TensorRef& in, TensorRef& out, int64_t outer, int64_t n, int64_t inner) {
  using M = sdk::opmath_t<T>;
  using Acc = std::conditional_t<sdk::is_complex_v<M>, std::complex<double>,
                                 std::conditional_t<std::is_floating_point_v<M>, double, int64_t>>;
  const T* src = in.data<T>();
  T* dst = out.data<T>();
  if (inner == 1 && outer == 1) return scan_run<T, Product, Acc>(src, dst, n);
#pragma omp parallel for num_threads(strided::threads_for(in.numel())) schedule(static)
  for (int64_t o = 0; o < outer; ++o) {
    if (inner == 1) {
      scan_run<T, Product, Acc>(src + o * n, dst + o * n, n);
      continue;
    }
    std::vector<Acc> acc(size_t(inner), Acc(Product ? 1 : 0));
    for (int64_t i = 0; i < n; ++i) {
      const T* s = src + (o * n + i) * inner;
      T* d = dst + (o * n + i) * inner;
      for (int64_t j = 0; j < inner; ++j) {
        if constexpr (Product) acc[size_t(j)] *= Acc(s[j]);
        else acc[size_t(j)] += Acc(s[j]);
        d[j] = T(acc[size_t(j)]);
      }
    }
  }
}

template <bool Product, Variant V>
void cum_k(sdk::Args& a) {
  const std::string name = variant_name(Product ? "cumprod" : "cumsum", V);
  TensorRef self = a.tensor(0);
  int64_t nd = std::max<int64_t>(self.dim(), 1);
  int64_t dim = a.to_int(1);
  if (dim < -nd || dim >= nd)
    fail(TS_ERROR_INDEX, name, ": dimension out of range (expected to be in range of [", -nd, ", ", nd - 1, "], but got ", dim, ")");
  if (dim < 0) dim += nd;
  auto dtype_arg = a.optional_dtype(2);
  int32_t dtype = dtype_arg ? *dtype_arg : sdk::is_inexact(self.dtype()) ? self.dtype() : int32_t(TS_INT64);
  if (V == Variant::Inplace) dtype = self.dtype();
  if (V == Variant::Out && !dtype_arg) dtype = a.tensor(3).dtype();
  TensorRef in = ops::contiguous(ops::to(self, dtype));
  TensorRef result = sdk::empty(a.call(), self.sizes(), dtype, self.device());
  int64_t outer = 1, inner = 1, n = self.dim() ? self.size(dim) : 1;
  for (int64_t d = 0; d < dim; ++d) outer *= self.size(d);
  for (int64_t d = dim + 1; d < self.dim(); ++d) inner *= self.size(d);
  if (self.numel() > 0)
    TS_DISPATCH_NUMERIC_AND_COMPLEX(dtype, fail(TS_ERROR_TYPE, name, ": unsupported dtype ", sdk::dtype_name(dtype)),
                                    (scan<scalar_t, Product>(in, result, outer, n, inner)));
  if (V == Variant::Functional) return a.return_tensor(std::move(result));
  TensorRef target = V == Variant::Inplace ? self : a.tensor(3);
  if (V == Variant::Out && !std::equal(target.sizes().begin(), target.sizes().end(), self.sizes().begin(), self.sizes().end()))
    sdk::resize(a.call(), target, self.sizes());
  ops::copy_(target, result);
  a.return_argument(target);
}

// Running maximum (minimum) and the index where it was last reached; a NaN, once seen, stays
// (PyTorch's cummax / cummin).
template <class T, bool Max>
void running_extreme(const TensorRef& in, TensorRef& values, TensorRef& indices, int64_t outer, int64_t n, int64_t inner) {
  using M = sdk::opmath_t<T>;
  const T* src = in.data<T>();
  T* vout = values.data<T>();
  int64_t* iout = indices.data<int64_t>();
#pragma omp parallel for num_threads(strided::threads_for(in.numel())) schedule(static)
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j) {
      M best = M(src[o * n * inner + j]);
      int64_t at = 0;
      for (int64_t i = 0; i < n; ++i) {
        const int64_t k = (o * n + i) * inner + j;
        M x = M(src[k]);
        bool x_nan = x != x, best_nan = best != best;
        if (x_nan || (!best_nan && (Max ? x >= best : x <= best))) {
          best = x;
          at = i;
        }
        vout[k] = T(best);
        iout[k] = at;
      }
    }
}

template <bool Max>
void cum_extreme_k(sdk::Args& a) {
  const char* name = Max ? "cummax" : "cummin";
  TensorRef self = a.tensor(0);
  int64_t nd = std::max<int64_t>(self.dim(), 1), dim = a.to_int(1);
  if (dim < -nd || dim >= nd)
    fail(TS_ERROR_INDEX, name, ": dimension out of range (expected to be in range of [", -nd, ", ", nd - 1, "], but got ", dim, ")");
  if (dim < 0) dim += nd;
  TensorRef in = ops::contiguous(self);
  TensorRef values = sdk::empty(a.call(), self.sizes(), self.dtype(), self.device());
  TensorRef indices = sdk::empty(a.call(), self.sizes(), TS_INT64, self.device());
  int64_t outer = 1, inner = 1, n = self.dim() ? self.size(dim) : 1;
  for (int64_t d = 0; d < dim; ++d) outer *= self.size(d);
  for (int64_t d = dim + 1; d < self.dim(); ++d) inner *= self.size(d);
  if (self.numel() > 0)
    TS_DISPATCH_ALL(self.dtype(), fail(TS_ERROR_TYPE, name, ": unsupported dtype"),
                    (running_extreme<scalar_t, Max>(in, values, indices, outer, n, inner)));
  a.returns({sdk::Args::tensor_value(std::move(values)), sdk::Args::tensor_value(std::move(indices))});
}

constexpr Variant F = Variant::Functional, I = Variant::Inplace, O = Variant::Out;

}  // namespace

void register_scan_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("cumsum", key, cum_k<false, F>);
  reg.kernel("cumsum_", key, cum_k<false, I>);
  reg.kernel("cumsum.out", key, cum_k<false, O>);
  reg.kernel("cumprod", key, cum_k<true, F>);
  reg.kernel("cumprod_", key, cum_k<true, I>);
  reg.kernel("cumprod.out", key, cum_k<true, O>);
  reg.kernel("cummax", key, cum_extreme_k<true>);
  reg.kernel("cummin", key, cum_extreme_k<false>);
}

}  // namespace tessera::cpu

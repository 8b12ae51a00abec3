// Reductions over any set of dims: sum, mean, prod, amax, amin, argmax, argmin, var, std,
// logsumexp. Each op is an accumulator (identity / row / combine / write) that the shared
// driver run_reduction folds over the ReduceGeometry, in parallel over outputs or, when the
// outputs are few, over each reduction. Float sums accumulate in double; ints in int64.
// Contiguous float32 rows are summed by the vector kernels (blocked, double lanes).
#include "kernels.h"
#include "simd_table.h"
#include "tensor_iterator.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>
#include <type_traits>

namespace tessera::cpu {
namespace {

using sdk::fail;
using sdk::opmath_t;

// Element i of a row, converted to the type arithmetic happens in.
template <class T> inline opmath_t<T> load(const char* p, int64_t stride, int64_t i) {
  return opmath_t<T>(*reinterpret_cast<const T*>(p + i * stride));
}
// Stores `v` as `dtype` (int64 or the input type T: the two results sum/prod can have).
template <class T, class V> inline void store(char* out, int32_t dtype, V v) {
  if constexpr (sdk::is_complex_v<V>) *reinterpret_cast<T*>(out) = T(v);
  else if (dtype == TS_INT64) *reinterpret_cast<int64_t*>(out) = int64_t(v);
  else *reinterpret_cast<T*>(out) = T(static_cast<opmath_t<T>>(v));
}

// ---- sum / mean / prod
template <class T>
using wide_t = std::conditional_t<std::is_integral_v<T>, int64_t,
                                  std::conditional_t<sdk::is_complex_v<T>, std::complex<double>, double>>;

template <class T>
struct SumOp {
  using acc_t = wide_t<T>;
  int32_t out_dtype;
  bool mean = false;
  double count = 0;  // mean: the number of elements folded (0 gives NaN, as 0 / 0)
  acc_t identity() const { return 0; }
  void row(acc_t& acc, const char* p, int64_t s, int64_t n, int64_t) const {
    if constexpr (std::is_same_v<T, float>) {
      if (s == int64_t(sizeof(float)) && n >= 16) {
        acc += simd::vec().sum(reinterpret_cast<const float*>(p), n);
        return;
      }
    }
    // Four independent partial sums: better rounding and instruction-level parallelism.
    acc_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    int64_t i = 0;
    if (s == int64_t(sizeof(T))) {
      const T* x = reinterpret_cast<const T*>(p);
      for (; i + 4 <= n; i += 4) {
        a0 += acc_t(opmath_t<T>(x[i]));
        a1 += acc_t(opmath_t<T>(x[i + 1]));
        a2 += acc_t(opmath_t<T>(x[i + 2]));
        a3 += acc_t(opmath_t<T>(x[i + 3]));
      }
    }
    for (; i < n; ++i) a0 += acc_t(load<T>(p, s, i));
    acc += (a0 + a1) + (a2 + a3);
  }
  acc_t combine(acc_t a, acc_t b) const { return a + b; }
  void write(char* out, acc_t acc) const {
    if (!mean) store<T>(out, out_dtype, acc);
    else if constexpr (sdk::is_complex_v<acc_t>) store<T>(out, out_dtype, acc / count);
    else store<T>(out, out_dtype, double(acc) / count);
  }
};

template <class T>
struct ProdOp {
  using acc_t = wide_t<T>;
  int32_t out_dtype;
  acc_t identity() const { return 1; }
  void row(acc_t& acc, const char* p, int64_t s, int64_t n, int64_t) const {
    for (int64_t i = 0; i < n; ++i) acc *= acc_t(load<T>(p, s, i));
  }
  acc_t combine(acc_t a, acc_t b) const { return a * b; }
  void write(char* out, acc_t acc) const { store<T>(out, out_dtype, acc); }
};

// ---- amax / amin: NaN propagates.
template <class T, bool Max>
struct ExtremumOp {
  using M = opmath_t<T>;
  using acc_t = M;
  static bool better(M x, M cur) { return Max ? (x > cur || x != x) : (x < cur || x != x); }
  acc_t identity() const {
    if constexpr (std::is_same_v<M, bool>) return !Max;
    else if constexpr (std::numeric_limits<M>::has_infinity) return Max ? -std::numeric_limits<M>::infinity()
                                                                         : std::numeric_limits<M>::infinity();
    else return Max ? std::numeric_limits<M>::lowest() : std::numeric_limits<M>::max();
  }
  void row(acc_t& acc, const char* p, int64_t s, int64_t n, int64_t) const {
    for (int64_t i = 0; i < n; ++i) {
      const M x = load<T>(p, s, i);
      if (acc == acc && better(x, acc)) acc = x;  // once NaN, stays NaN
    }
  }
  acc_t combine(acc_t a, acc_t b) const { return (a == a && better(b, a)) ? b : a; }
  void write(char* out, acc_t acc) const { *reinterpret_cast<T*>(out) = T(acc); }
};

// ---- argmax / argmin: the first index of the extremum; NaN counts as the extremum.
template <class T, bool Max>
struct ArgOp {
  using M = opmath_t<T>;
  struct acc_t {
    M value;
    int64_t index;  // -1: nothing seen yet
  };
  static bool better(M x, M cur) {
    if (cur != cur) return false;  // the first NaN wins
    return Max ? (x > cur || x != x) : (x < cur || x != x);
  }
  acc_t identity() const { return {M(0), -1}; }
  void row(acc_t& acc, const char* p, int64_t s, int64_t n, int64_t first) const {
    for (int64_t i = 0; i < n; ++i) {
      const M x = load<T>(p, s, i);
      if (acc.index < 0 || better(x, acc.value)) acc = {x, first + i};
    }
  }
  acc_t combine(acc_t a, acc_t b) const {
    if (a.index < 0) return b;
    return (b.index >= 0 && better(b.value, a.value)) ? b : a;
  }
  void write(char* out, const acc_t& acc) const { *reinterpret_cast<int64_t*>(out) = acc.index; }
};

// ---- var / std: each row is summarised by a two-pass (mean, M2) and merged with Chan's formula.
template <class T>
struct MomentsOp {
  struct acc_t {
    double n, mean, m2;
  };
  double correction;
  bool take_sqrt;
  acc_t identity() const { return {0, 0, 0}; }
  static acc_t merge(const acc_t& a, const acc_t& b) {
    if (a.n == 0) return b;
    if (b.n == 0) return a;
    const double n = a.n + b.n, delta = b.mean - a.mean;
    return {n, a.mean + delta * (b.n / n), a.m2 + b.m2 + delta * delta * (a.n * b.n / n)};
  }
  void row(acc_t& acc, const char* p, int64_t s, int64_t n, int64_t) const {
    if (n == 0) return;
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += double(load<T>(p, s, i));
    const double mean = sum / double(n);
    double m2 = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double d = double(load<T>(p, s, i)) - mean;
      m2 += d * d;
    }
    acc = merge(acc, {double(n), mean, m2});
  }
  acc_t combine(const acc_t& a, const acc_t& b) const { return merge(a, b); }
  void write(char* out, const acc_t& acc) const {
    const double var = acc.m2 / std::max(0.0, acc.n - correction);
    *reinterpret_cast<T*>(out) = T(opmath_t<T>(take_sqrt ? std::sqrt(var) : var));
  }
};

// ---- logsumexp: a running (shift, sum) with total = sum * exp(shift). Infinite maxima shift
// by 0, so +inf gives +inf and an all -inf reduction gives -inf.
template <class T>
struct LogSumExpOp {
  using M = opmath_t<T>;
  struct acc_t {
    M shift;
    double sum;  // exps are computed in M, summed in double like every float sum
  };
  acc_t identity() const { return {M(0), 0.0}; }
  static acc_t merge(const acc_t& a, const acc_t& b) {
    if (a.sum == 0) return b;
    if (b.sum == 0) return a;
    const M s = std::max(a.shift, b.shift);
    return {s, a.sum * std::exp(double(a.shift - s)) + b.sum * std::exp(double(b.shift - s))};
  }
  void row(acc_t& acc, const char* p, int64_t s, int64_t n, int64_t) const {
    if (n == 0) return;
    M mx = -std::numeric_limits<M>::infinity();
    for (int64_t i = 0; i < n; ++i) mx = std::max(mx, load<T>(p, s, i));
    const M shift = std::isinf(mx) ? M(0) : mx;
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += double(std::exp(load<T>(p, s, i) - shift));
    acc = merge(acc, {shift, sum});
  }
  acc_t combine(const acc_t& a, const acc_t& b) const { return merge(a, b); }
  void write(char* out, const acc_t& acc) const {
    *reinterpret_cast<T*>(out) = T(M(std::log(acc.sum) + double(acc.shift)));
  }
};

// ---- shared plumbing
// The result tensor of reducing `in` over `mask`, and its geometry.
struct Reduction {
  TensorRef out;
  ReduceGeometry geom;
};
Reduction make_reduction(ts_call call, const TensorRef& in, const std::vector<bool>& mask, bool keepdim,
                         int32_t out_dtype) {
  TensorRef out = sdk::empty(call, reduced_shape(in.sizes(), mask, keepdim), out_dtype, kCpuDevice);
  ReduceGeometry geom(out, in, mask);
  return {std::move(out), geom};
}

// Returns `result`, or copies it into the out= argument at `out_index` (resized as needed).
void deliver(sdk::Args& a, const char* name, TensorRef result, std::optional<int> out_index) {
  if (!out_index) return a.return_tensor(std::move(result));
  TensorRef out = a.tensor(*out_index);
  prepare_out(a.call(), name, out, result.sizes(), result.dtype());
  copy_into(a.call(), out, result, name);
  out.bump_version();
  a.return_argument(out);
}

bool keepdim_arg(const sdk::Args& a, int i) { return !a.is_none(i) && a.to_bool(i); }

TensorRef checked_self(const char* op, const sdk::Args& a) {
  TensorRef t = a.tensor(0);
  const TensorRef* ts[] = {&t};
  check_cpu(op, ts);
  return t;
}

// Raises when a reduction without identity (amax, argmax) would fold an empty dim.
void check_nonempty(const char* op, const TensorRef& in, const std::vector<bool>& mask) {
  if (in.numel() != 0) return;
  for (int64_t d = 0; d < in.dim(); ++d)
    if (mask[size_t(d)] && in.size(d) == 0)
      fail(TS_ERROR_VALUE, op, ": expected reduction dim ", d, " to have non-zero size, got an input of shape ",
           shape_str(in.sizes()));
}

// A sum over the leading dims of a contiguous float tensor (bias gradients: x.sum([0, 1]) of a
// [B, T, C] activation): out[j] = sum over rows r of x[r, j]. The generic driver folds each
// column with a strided walk; here each thread owns an equal run of columns and adds whole rows
// into double accumulators, reading memory in order: float32 through the vector table's
// sum_rows (2040 x 1152: 0.33 -> 0.1 ms), float64 in a plain loop.
template <class T>
void sum_leading(const T* x, T* out, int64_t rows, int64_t cols, bool mean) {
  constexpr int64_t kMaxBlock = 512;  // accumulators per pass: 4 KiB of doubles, in L1
  const int threads = int(std::max<int64_t>(1, std::min<int64_t>(max_threads(), rows * cols / 32768)));
  const int64_t per_thread = ((cols + threads - 1) / threads + 15) / 16 * 16;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int t = 0; t < threads; ++t) {
    const int64_t end = std::min(cols, (t + 1) * per_thread);
    for (int64_t j0 = t * per_thread; j0 < end; j0 += kMaxBlock) {
      const int64_t n = std::min(kMaxBlock, end - j0);
      double acc[kMaxBlock] = {};
      if constexpr (std::is_same_v<T, float>) {
        simd::vec().sum_rows(acc, x + j0, rows, cols, n);
      } else {
        for (int64_t r = 0; r < rows; ++r) {
          const T* row = x + r * cols + j0;
#pragma omp simd
          for (int64_t j = 0; j < n; ++j) acc[j] += double(row[j]);
        }
      }
      for (int64_t j = 0; j < n; ++j) out[j0 + j] = T(mean ? acc[j] / double(rows) : acc[j]);
    }
  }
}

// True when `mask` reduces exactly a leading run of dims and keeps the rest.
bool reduces_leading_dims(const std::vector<bool>& mask) {
  size_t k = 0;
  while (k < mask.size() && mask[k]) ++k;
  for (size_t d = k; d < mask.size(); ++d)
    if (mask[d]) return false;
  return k > 0 && k < mask.size();
}

// sum.dim_IntList / mean.dim / prod.dim_IntList (Tensor self, int[1]? dim, bool keepdim, *, ScalarType? dtype)
enum class SumKind { Sum, Mean, Prod };
void sum_like(sdk::Args& a, SumKind kind, std::optional<int> out_index) {
  const char* name = kind == SumKind::Sum ? "sum" : kind == SumKind::Mean ? "mean" : "prod";
  const TensorRef self = checked_self(name, a);
  const std::vector<bool> mask = reduction_mask(name, a.optional_int_list(1), self.dim());
  const bool keepdim = keepdim_arg(a, 2);
  const std::optional<int32_t> dtype = a.optional_dtype(3);
  int32_t out_dtype = dtype ? *dtype : sdk::is_integral(self.dtype(), true) ? TS_INT64 : self.dtype();
  if (kind == SumKind::Mean) {
    out_dtype = dtype.value_or(self.dtype());
    if (!sdk::is_inexact(out_dtype))
      fail(TS_ERROR_TYPE, "mean: could not infer output dtype: expected a floating point or complex input or dtype, got ",
           sdk::dtype_name(out_dtype));
  }
  const TensorRef in = dtype ? to_dtype(a.call(), self, *dtype, name) : self;
  Reduction r = make_reduction(a.call(), in, mask, keepdim, out_dtype);
  if (kind != SumKind::Prod && (in.dtype() == TS_FLOAT32 || in.dtype() == TS_FLOAT64) && out_dtype == in.dtype() &&
      in.is_contiguous() && reduces_leading_dims(mask) && in.numel() > 0) {
    int64_t rows = 1;
    for (size_t d = 0; mask[d]; ++d) rows *= in.size(int64_t(d));
    const int64_t cols = in.numel() / rows;
    if (in.dtype() == TS_FLOAT32) sum_leading(in.data<float>(), r.out.data<float>(), rows, cols, kind == SumKind::Mean);
    else sum_leading(in.data<double>(), r.out.data<double>(), rows, cols, kind == SumKind::Mean);
    return deliver(a, name, std::move(r.out), out_index);
  }
  TS_DISPATCH_ALL_AND_COMPLEX(in.dtype(), fail(TS_ERROR_TYPE, name, ": unsupported dtype"), {
    if (kind == SumKind::Prod) run_reduction(r.geom, ProdOp<scalar_t>{out_dtype});
    else run_reduction(r.geom, SumOp<scalar_t>{out_dtype, kind == SumKind::Mean, double(r.geom.n_reduce)});
  });
  deliver(a, name, std::move(r.out), out_index);
}

// amax / amin (Tensor self, int[1] dim=[], bool keepdim=False)
template <bool Max>
void extremum(sdk::Args& a, std::optional<int> out_index) {
  const char* name = Max ? "amax" : "amin";
  const TensorRef self = checked_self(name, a);
  std::optional<std::span<const int64_t>> dims;
  if (!a.is_none(1)) dims = a.int_list(1);
  const std::vector<bool> mask = reduction_mask(name, dims, self.dim());
  check_nonempty(name, self, mask);
  Reduction r = make_reduction(a.call(), self, mask, keepdim_arg(a, 2), self.dtype());
  TS_DISPATCH_ALL(self.dtype(), fail(TS_ERROR_TYPE, name, ": unsupported dtype"),
                  run_reduction(r.geom, ExtremumOp<scalar_t, Max>{}));
  deliver(a, name, std::move(r.out), out_index);
}

// argmax / argmin (Tensor self, int? dim=None, bool keepdim=False): dim=None flattens.
template <bool Max>
void arg_extremum(sdk::Args& a) {
  const char* name = Max ? "argmax" : "argmin";
  const TensorRef self = checked_self(name, a);
  if (self.dtype() == TS_BOOL) fail(TS_ERROR_TYPE, name, ": expected a numeric tensor, got bool");
  const std::optional<int64_t> dim = a.optional_int(1);
  std::optional<std::span<const int64_t>> dims;
  if (dim) dims = std::span<const int64_t>(&*dim, 1);
  const std::vector<bool> mask = reduction_mask(name, dims, self.dim());
  if (!dim && self.numel() == 0)
    fail(TS_ERROR_VALUE, name, ": expected a dim to be given for an empty input, got dim=None and shape ",
         shape_str(self.sizes()));
  check_nonempty(name, self, mask);
  Reduction r = make_reduction(a.call(), self, mask, keepdim_arg(a, 2), TS_INT64);
  TS_DISPATCH_NUMERIC(self.dtype(), fail(TS_ERROR_TYPE, name, ": unsupported dtype"),
                      run_reduction(r.geom, ArgOp<scalar_t, Max>{}));
  a.return_tensor(std::move(r.out));
}

// var.correction / std.correction (Tensor self, int[1]? dim, *, Scalar? correction, bool keepdim)
template <bool Sqrt>
void moments(sdk::Args& a) {
  const char* name = Sqrt ? "std" : "var";
  const TensorRef self = checked_self(name, a);
  if (!sdk::is_floating(self.dtype()))
    fail(TS_ERROR_TYPE, name, ": expected a floating point tensor, got ", sdk::dtype_name(self.dtype()));
  const std::vector<bool> mask = reduction_mask(name, a.optional_int_list(1), self.dim());
  const double correction = a.is_none(2) ? 1.0 : a.scalar(2).to_double();
  Reduction r = make_reduction(a.call(), self, mask, keepdim_arg(a, 3), self.dtype());
  TS_DISPATCH_FLOAT(self.dtype(), fail(TS_ERROR_TYPE, name, ": unsupported dtype"),
                    run_reduction(r.geom, MomentsOp<scalar_t>{correction, Sqrt}));
  a.return_tensor(std::move(r.out));
}

// logsumexp(Tensor self, int[1] dim, bool keepdim=False): integer inputs compute in float32.
void logsumexp(sdk::Args& a) {
  const TensorRef self = checked_self("logsumexp", a);
  const std::vector<bool> mask = reduction_mask("logsumexp", a.int_list(1), self.dim());
  const TensorRef in = sdk::is_floating(self.dtype()) ? self : convert(a.call(), self, sdk::default_float_dtype(), "logsumexp");
  Reduction r = make_reduction(a.call(), in, mask, keepdim_arg(a, 2), in.dtype());
  TS_DISPATCH_FLOAT(in.dtype(), fail(TS_ERROR_TYPE, "logsumexp: unsupported dtype"),
                    run_reduction(r.geom, LogSumExpOp<scalar_t>{}));
  a.return_tensor(std::move(r.out));
}

void sum_k(sdk::Args& a) { sum_like(a, SumKind::Sum, std::nullopt); }
void sum_out_k(sdk::Args& a) { sum_like(a, SumKind::Sum, 4); }
void mean_k(sdk::Args& a) { sum_like(a, SumKind::Mean, std::nullopt); }
void mean_out_k(sdk::Args& a) { sum_like(a, SumKind::Mean, 4); }
void prod_k(sdk::Args& a) { sum_like(a, SumKind::Prod, std::nullopt); }
template <bool Max> void extremum_k(sdk::Args& a) { extremum<Max>(a, std::nullopt); }
template <bool Max> void extremum_out_k(sdk::Args& a) { extremum<Max>(a, 3); }

}  // namespace

void register_softmax_kernels(sdk::Registrar& reg, ts_dispatch_key key);  // softmax.cpp

void register_reduction_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("sum.dim_IntList", key, sum_k);
  reg.kernel("sum.dim_IntList_out", key, sum_out_k);
  reg.kernel("mean.dim", key, mean_k);
  reg.kernel("mean.dim_out", key, mean_out_k);
  reg.kernel("prod.dim_IntList", key, prod_k);
  reg.kernel("amax", key, extremum_k<true>);
  reg.kernel("amax.out", key, extremum_out_k<true>);
  reg.kernel("amin", key, extremum_k<false>);
  reg.kernel("amin.out", key, extremum_out_k<false>);
  reg.kernel("argmax", key, arg_extremum<true>);
  reg.kernel("argmin", key, arg_extremum<false>);
  reg.kernel("var.correction", key, moments<false>);
  reg.kernel("std.correction", key, moments<true>);
  reg.kernel("logsumexp", key, logsumexp);
  register_softmax_kernels(reg, key);
}

}  // namespace tessera::cpu

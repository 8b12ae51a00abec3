#pragma once
// The normalization family of the CPU plugin and the helpers its files share:
//   nn_norm_batch.cpp, nn_norm_layer.cpp, nn_norm_group.cpp   batch / layer / group norm (+ backward)
//   nn_dropout.cpp                                             native_dropout (+ backward)
//   nn_embedding.cpp                                           embedding (+ dense backward)
//   nn_accumulate.cpp                                          scatter_add, index_add, slice/select_backward
// Statistics are accumulated in double whatever the input dtype, so float32 stays accurate on
// large inputs; the 16-bit floats keep their statistics (mean, rstd) in float32, as PyTorch.
#include "kernels.h"

#include <tessera/sdk/norm_geometry.h>

#include <initializer_list>
#include <optional>
#include <span>
#include <vector>

namespace tessera::cpu {

void register_batch_norm_kernels(sdk::Registrar& reg, ts_dispatch_key key);  // nn_norm_batch.cpp
void register_layer_norm_kernels(sdk::Registrar& reg, ts_dispatch_key key);  // nn_norm_layer.cpp
void register_group_norm_kernels(sdk::Registrar& reg, ts_dispatch_key key);  // nn_norm_group.cpp
void register_dropout_kernels(sdk::Registrar& reg, ts_dispatch_key key);     // nn_dropout.cpp
void register_embedding_kernels(sdk::Registrar& reg, ts_dispatch_key key);   // nn_embedding.cpp
void register_accumulate_kernels(sdk::Registrar& reg, ts_dispatch_key key);  // nn_accumulate.cpp

namespace norm {

using sdk::TensorRef;

// Raises unless every defined tensor lives on the CPU (undefined ones are skipped).
void check_cpu_all(const char* op, std::initializer_list<const TensorRef*> tensors);
// TypeError unless `t` has a floating dtype; ValueError unless `t` has exactly `shape`.
using sdk::require_floating;
using sdk::require_shape;
// `t` itself when contiguous, else a contiguous copy (same dtype).
TensorRef contiguous(ts_call call, const TensorRef& t);
// The dtype statistics are returned in: float32 for the 16-bit floats, the input's otherwise.
int32_t stat_dtype(int32_t dtype);
// The values of a floating tensor (any layout) in row-major order, as doubles.
std::vector<double> read_values(const char* op, const TensorRef& t, const char* what);
// An optional affine parameter / statistic: none -> empty vector; else its values after
// checking it is floating and has `shape`.
std::vector<double> optional_values(const char* op, const std::optional<TensorRef>& t, std::span<const int64_t> shape,
                                    const char* what);
// Writes `v` (row-major) into a floating tensor of any layout.
void write_values(const TensorRef& t, std::span<const double> v);
// A new contiguous tensor holding `v`.
TensorRef tensor_of(ts_call call, std::span<const int64_t> shape, int32_t dtype, std::span<const double> v);
// A new contiguous tensor of zeros (any dtype: all-zero bytes).
TensorRef zeros(ts_call call, std::span<const int64_t> shape, int32_t dtype);
// Returns three tensors from a kernel.
void return3(sdk::Args& a, TensorRef&& x, TensorRef&& y, TensorRef&& z);

// A floating element as double / from double (the 16-bit floats go through float).
template <class T> inline double load(T x) { return double(static_cast<sdk::opmath_t<T>>(x)); }
template <class T> inline T store(double v) { return T(static_cast<sdk::opmath_t<T>>(v)); }

// The sum of f(i) over i in [0, len), in double, with eight running partial sums added in a fixed
// order (one result on every run). A single running sum waits an add's latency per element:
// a small batch norm spent its time there.
template <class F>
double sum_over(int64_t len, F f) {
  double a[8] = {};
  int64_t i = 0;
  for (; i + 8 <= len; i += 8)
    for (int k = 0; k < 8; ++k) a[k] += f(i + k);
  for (int k = 0; i < len; ++i, ++k) a[k] += f(i);
  return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

// Mean and biased variance (two passes, in double) of `rows` rows of `len` elements, row r
// starting at x + r * row_stride.
template <class T>
void moments(const T* x, int64_t rows, int64_t row_stride, int64_t len, double& mean, double& var) {
  const int64_t n = rows * len;
  if (n == 0) {
    mean = var = 0;
    return;
  }
  double s = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const T* p = x + r * row_stride;
    s += sum_over(len, [p](int64_t i) { return load(p[i]); });
  }
  mean = s / double(n);
  double q = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const T* p = x + r * row_stride;
    q += sum_over(len, [p, m = mean](int64_t i) {
      const double d = load(p[i]) - m;
      return d * d;
    });
  }
  var = q / double(n);
}

}  // namespace norm
}  // namespace tessera::cpu

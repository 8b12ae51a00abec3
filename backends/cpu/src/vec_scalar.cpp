// The portable kernel table: plain loops the compiler vectorises for the baseline ISA (SSE2 on
// x86-64), with the C library's math functions. TESSERA_CPU_ISA=scalar forces it; it is also
// what runs on CPUs without AVX2.
#include "simd_table.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace tessera::cpu::simd {
namespace {

template <Unary U> inline float apply(float x) {
  if constexpr (U == Unary::Exp) return std::exp(x);
  else if constexpr (U == Unary::Log) return std::log(x);
  else if constexpr (U == Unary::Log1p) return std::log1p(x);
  else if constexpr (U == Unary::Sqrt) return std::sqrt(x);
  else if constexpr (U == Unary::Rsqrt) return 1.0f / std::sqrt(x);
  else if constexpr (U == Unary::Sin) return std::sin(x);
  else if constexpr (U == Unary::Cos) return std::cos(x);
  else if constexpr (U == Unary::Tanh) return std::tanh(x);
  else if constexpr (U == Unary::Sigmoid) return 1.0f / (1.0f + std::exp(-x));
  else if constexpr (U == Unary::Erf) return std::erf(x);
  else if constexpr (U == Unary::Neg) return -x;
  else if constexpr (U == Unary::Abs) return std::abs(x);
  else return x < 0.0f ? 0.0f : x;  // relu: NaN stays NaN
}
template <Binary B> inline float apply(float x, float y) {
  if constexpr (B == Binary::Add) return x + y;
  else if constexpr (B == Binary::Sub) return x - y;
  else if constexpr (B == Binary::Mul) return x * y;
  else return x / y;
}

template <Unary U> void unary(float* o, const float* a, int64_t n) {
  for (int64_t i = 0; i < n; ++i) o[i] = apply<U>(a[i]);
}
template <Binary B> void vv(float* o, const float* a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) o[i] = apply<B>(a[i], b[i]);
}
template <Binary B> void vs(float* o, const float* a, float b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) o[i] = apply<B>(a[i], b);
}
template <Binary B> void sv(float* o, float a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) o[i] = apply<B>(a, b[i]);
}

// Four independent partial sums in double.
double sum(const float* x, int64_t n) {
  double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    a0 += double(x[i]);
    a1 += double(x[i + 1]);
    a2 += double(x[i + 2]);
    a3 += double(x[i + 3]);
  }
  for (; i < n; ++i) a0 += double(x[i]);
  return (a0 + a1) + (a2 + a3);
}

void sum_rows(double* acc, const float* x, int64_t rows, int64_t stride, int64_t n) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) acc[j] += double(x[r * stride + j]);
}

void max_update(float* best, float* at, const float* v, const float* v_at, float offset, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (v[i] > best[i] || v[i] != v[i]) {
      best[i] = v[i];
      at[i] = v_at[i] + offset;
    }
}

float row_max(const float* x, int64_t n) {
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) mx = std::max(mx, x[i]);
  return mx;
}
float exp_sum(float* e, const float* x, float shift, int64_t n) {
  float s = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float v = std::exp(x[i] - shift);
    if (e) e[i] = v;
    s += v;
  }
  return s;
}
void softmax(float* y, const float* x, int64_t n) {
  const float mx = row_max(x, n);
  float s = 0;
  for (int64_t i = 0; i < n; ++i) s += y[i] = std::exp(x[i] - mx);
  const float inv = 1.0f / s;
  for (int64_t i = 0; i < n; ++i) y[i] *= inv;
}
void log_softmax(float* y, const float* x, int64_t n) {
  const float mx = row_max(x, n);
  float s = 0;
  for (int64_t i = 0; i < n; ++i) s += std::exp(x[i] - mx);
  const float shift = mx + std::log(s);
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] - shift;
}

Table make() {
  Table t{};
  t.isa = "scalar";
  t.unary[int(Unary::Exp)] = &unary<Unary::Exp>;
  t.unary[int(Unary::Log)] = &unary<Unary::Log>;
  t.unary[int(Unary::Log1p)] = &unary<Unary::Log1p>;
  t.unary[int(Unary::Sqrt)] = &unary<Unary::Sqrt>;
  t.unary[int(Unary::Rsqrt)] = &unary<Unary::Rsqrt>;
  t.unary[int(Unary::Sin)] = &unary<Unary::Sin>;
  t.unary[int(Unary::Cos)] = &unary<Unary::Cos>;
  t.unary[int(Unary::Tanh)] = &unary<Unary::Tanh>;
  t.unary[int(Unary::Sigmoid)] = &unary<Unary::Sigmoid>;
  t.unary[int(Unary::Erf)] = &unary<Unary::Erf>;
  t.unary[int(Unary::Neg)] = &unary<Unary::Neg>;
  t.unary[int(Unary::Abs)] = &unary<Unary::Abs>;
  t.unary[int(Unary::Relu)] = &unary<Unary::Relu>;
  t.binary_vv[int(Binary::Add)] = &vv<Binary::Add>;
  t.binary_vv[int(Binary::Sub)] = &vv<Binary::Sub>;
  t.binary_vv[int(Binary::Mul)] = &vv<Binary::Mul>;
  t.binary_vv[int(Binary::Div)] = &vv<Binary::Div>;
  t.binary_vs[int(Binary::Add)] = &vs<Binary::Add>;
  t.binary_vs[int(Binary::Sub)] = &vs<Binary::Sub>;
  t.binary_vs[int(Binary::Mul)] = &vs<Binary::Mul>;
  t.binary_vs[int(Binary::Div)] = &vs<Binary::Div>;
  t.binary_sv[int(Binary::Add)] = &sv<Binary::Add>;
  t.binary_sv[int(Binary::Sub)] = &sv<Binary::Sub>;
  t.binary_sv[int(Binary::Mul)] = &sv<Binary::Mul>;
  t.binary_sv[int(Binary::Div)] = &sv<Binary::Div>;
  t.sum = &sum;
  t.sum_rows = &sum_rows;
  t.max_update = &max_update;
  t.softmax = &softmax;
  t.log_softmax = &log_softmax;
  t.row_max = &row_max;
  t.exp_sum = &exp_sum;
  t.exp_sum_fast = &exp_sum;
  return t;
}

const Table kTable = make();

}  // namespace

const Table* scalar_table() { return &kTable; }

}  // namespace tessera::cpu::simd

#pragma once
// The vector kernels, written once over a traits type V (register type R of W floats, loads,
// arithmetic, math functions) and instantiated by each ISA's translation unit. Everything here
// has internal linkage: a copy compiled with -mavx512f must never be merged with (and replace)
// a baseline copy of the same inline function elsewhere in the plugin. For the same reason
// these files call only intrinsics, C library functions and SLEEF, not std:: templates.
// Tails shorter than W go through a zero-padded buffer, so they take the same vector code path
// (same rounding) as the body.
#include "simd_table.h"

#include <math.h>
#include <stdint.h>

namespace tessera::cpu::simd {
namespace {

template <class V>
struct Kernels {
  using R = typename V::R;
  static constexpr int W = V::W;

  template <class F>
  static inline void map1(float* o, const float* a, int64_t n, F f) {
    int64_t i = 0;
    for (; i + 2 * W <= n; i += 2 * W) {
      const R x0 = V::load(a + i), x1 = V::load(a + i + W);
      V::store(o + i, f(x0));
      V::store(o + i + W, f(x1));
    }
    for (; i + W <= n; i += W) V::store(o + i, f(V::load(a + i)));
    if (i < n) {
      alignas(64) float t[W] = {};
      __builtin_memcpy(t, a + i, size_t(n - i) * sizeof(float));
      V::store(t, f(V::load(t)));
      __builtin_memcpy(o + i, t, size_t(n - i) * sizeof(float));
    }
  }
  template <class F>
  static inline void map2(float* o, const float* a, const float* b, int64_t n, F f) {
    int64_t i = 0;
    for (; i + 2 * W <= n; i += 2 * W) {
      const R x0 = V::load(a + i), x1 = V::load(a + i + W);
      const R y0 = V::load(b + i), y1 = V::load(b + i + W);
      V::store(o + i, f(x0, y0));
      V::store(o + i + W, f(x1, y1));
    }
    for (; i + W <= n; i += W) V::store(o + i, f(V::load(a + i), V::load(b + i)));
    if (i < n) {
      alignas(64) float t[W] = {}, u[W] = {};
      __builtin_memcpy(t, a + i, size_t(n - i) * sizeof(float));
      __builtin_memcpy(u, b + i, size_t(n - i) * sizeof(float));
      V::store(t, f(V::load(t), V::load(u)));
      __builtin_memcpy(o + i, t, size_t(n - i) * sizeof(float));
    }
  }

  template <Unary U> static inline R apply(R x) {
    if constexpr (U == Unary::Exp) return V::exp(x);
    else if constexpr (U == Unary::Log) return V::log(x);
    else if constexpr (U == Unary::Log1p) return V::log1p(x);
    else if constexpr (U == Unary::Sqrt) return V::sqrt(x);
    else if constexpr (U == Unary::Rsqrt) return V::div(V::set1(1.0f), V::sqrt(x));
    else if constexpr (U == Unary::Sin) return V::sin(x);
    else if constexpr (U == Unary::Cos) return V::cos(x);
    else if constexpr (U == Unary::Tanh) return V::tanh(x);
    else if constexpr (U == Unary::Sigmoid) return V::div(V::set1(1.0f), V::add(V::set1(1.0f), V::exp(V::neg(x))));
    else if constexpr (U == Unary::Erf) return V::erf(x);
    else if constexpr (U == Unary::Neg) return V::neg(x);
    else if constexpr (U == Unary::Abs) return V::abs(x);
    else return V::relu(x);
  }
  template <Binary B> static inline R apply(R x, R y) {
    if constexpr (B == Binary::Add) return V::add(x, y);
    else if constexpr (B == Binary::Sub) return V::sub(x, y);
    else if constexpr (B == Binary::Mul) return V::mul(x, y);
    else return V::div(x, y);
  }

  // exp inline for the activations (Cephes' expf: x = n ln2 + r, |r| <= ln2 / 2, a degree-6
  // polynomial, then 2^n into the exponent; within 2 ulp), several times cheaper than a call to
  // SLEEF's. Results below FLT_MIN (x < -87.33) are flushed to 0, which no activation can tell
  // apart; x > 88.72 gives inf, NaN stays NaN (max/min return their second operand for NaN).
  static inline R exp_inline(R x) {
    const R lo = V::set1(-87.3365448f), hi = V::set1(88.7228394f);
    const R c = V::min(hi, V::max(lo, x));
    const R n = V::round_nearest(V::mul(c, V::set1(1.44269504088896341f)));
    R r = V::fmadd(n, V::set1(-0.693359375f), c);
    r = V::fmadd(n, V::set1(2.12194440e-4f), r);
    R p = V::set1(1.9875691500e-4f);
    p = V::fmadd(p, r, V::set1(1.3981999507e-3f));
    p = V::fmadd(p, r, V::set1(8.3334519073e-3f));
    p = V::fmadd(p, r, V::set1(4.1665795894e-2f));
    p = V::fmadd(p, r, V::set1(1.6666665459e-1f));
    p = V::fmadd(p, r, V::set1(5.0000001201e-1f));
    p = V::fmadd(V::mul(p, r), r, V::add(r, V::set1(1.0f)));
    R e = V::scale_pow2(p, n);
    e = V::lt_select(x, lo, V::set1(0.0f), e);
    return V::lt_select(hi, x, V::set1(__builtin_inff()), e);
  }

  // ---- activations (nn_activation.cpp's formulas, vectorised)
  // The normal CDF 0.5 (1 + erf(z)), z = x / sqrt(2), gelu's weight, from the tail
  // q = (1 - erf|z|) = t P(t) exp(-z^2), t = 1 / (1 + p|z|) (Abramowitz & Stegun 7.1.26, absolute
  // error 1.5e-7): 0.5 q for x < 0 (no cancellation of 1 + erf in the left tail), 1 - 0.5 q
  // otherwise. `e` returns exp(-z^2) = exp(-x^2 / 2), which the derivative's pdf reuses.
  static inline R normal_cdf(R x, R& e) {
    const R z = V::mul(x, V::set1(0.70710678118654752f));
    const R az = V::abs(z);
    const R t = V::div(V::set1(1.0f), V::fmadd(V::set1(0.3275911f), az, V::set1(1.0f)));
    R poly = V::set1(1.061405429f);
    poly = V::fmadd(poly, t, V::set1(-1.453152027f));
    poly = V::fmadd(poly, t, V::set1(1.421413741f));
    poly = V::fmadd(poly, t, V::set1(-0.284496736f));
    poly = V::fmadd(poly, t, V::set1(0.254829592f));
    e = exp_inline(V::neg(V::mul(z, z)));
    const R half_q = V::mul(V::set1(0.5f), V::mul(V::mul(poly, t), e));
    return V::lt_select(x, V::set1(0.0f), half_q, V::sub(V::set1(1.0f), half_q));
  }
  // sigmoid(x) = 1 / (1 + E), E = exp(-x); `one_minus` gets 1 - sigmoid(x) as E sigmoid(x) where
  // s >= 1/2 (E <= 1), which keeps its relative accuracy where s rounds to nearly 1 (1 - s would
  // cancel), and as 1 - s elsewhere (no cancellation there; E may be infinite).
  static inline R sigmoid(R x, R& one_minus) {
    const R E = exp_inline(V::neg(x));
    const R s = V::div(V::set1(1.0f), V::add(V::set1(1.0f), E));
    one_minus = V::lt_select(V::set1(1.0f), E, V::sub(V::set1(1.0f), s), V::mul(E, s));
    return s;
  }
  static inline R sigmoid(R x) {
    R unused;
    return sigmoid(x, unused);
  }
  // gelu_tanh's weight 0.5 (1 + tanh(u)) = sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3).
  static inline R tanh_weight(R x, R& one_minus) {
    const R inner = V::fmadd(V::mul(V::set1(0.044715f), V::mul(x, x)), x, x);
    return sigmoid(V::mul(V::set1(2.0f * 0.79788456080286535f), inner), one_minus);
  }
  template <Activation A> static inline R activate(R x) {
    if constexpr (A == Activation::Gelu) {
      R e;
      return V::mul(x, normal_cdf(x, e));
    }
    else if constexpr (A == Activation::GeluTanh) {
      R unused;
      return V::mul(x, tanh_weight(x, unused));
    }
    else return V::mul(x, sigmoid(x));
  }
  template <Activation A> static inline R derivative(R x) {
    if constexpr (A == Activation::Gelu) {  // cdf + x pdf
      R e;
      const R cdf = normal_cdf(x, e);
      return V::fmadd(x, V::mul(V::set1(0.39894228040143268f), e), cdf);
    } else if constexpr (A == Activation::GeluTanh) {  // s + 2 x s (1 - s) du
      R one_minus;
      const R s = tanh_weight(x, one_minus);
      const R du = V::mul(V::set1(0.79788456080286535f), V::fmadd(V::set1(3.0f * 0.044715f), V::mul(x, x), V::set1(1.0f)));
      return V::fmadd(V::mul(V::add(x, x), V::mul(s, one_minus)), du, s);
    } else {  // s (1 + x (1 - s))
      R one_minus;
      const R s = sigmoid(x, one_minus);
      return V::mul(s, V::fmadd(x, one_minus, V::set1(1.0f)));
    }
  }
  template <Activation A> static void activation(float* o, const float* x, int64_t n) {
    map1(o, x, n, [](R v) { return activate<A>(v); });
  }
  template <Activation A> static void activation_backward(float* o, const float* g, const float* x, int64_t n) {
    map2(o, g, x, n, [](R gv, R xv) { return V::mul(gv, derivative<A>(xv)); });
  }

  template <Unary U> static void unary(float* o, const float* a, int64_t n) {
    map1(o, a, n, [](R x) { return apply<U>(x); });
  }
  template <Binary B> static void vv(float* o, const float* a, const float* b, int64_t n) {
    map2(o, a, b, n, [](R x, R y) { return apply<B>(x, y); });
  }
  template <Binary B> static void vs(float* o, const float* a, float b, int64_t n) {
    const R y = V::set1(b);
    map1(o, a, n, [y](R x) { return apply<B>(x, y); });
  }
  template <Binary B> static void sv(float* o, float a, const float* b, int64_t n) {
    const R x = V::set1(a);
    map1(o, b, n, [x](R y) { return apply<B>(x, y); });
  }

  // Blocked sum: every 4 * W floats are first added pairwise in float lanes (two roundings, each
  // within an ulp of a four-element partial sum), then widened into double accumulators, so the
  // error does not grow with n. A quarter of the conversions of widening every element, which is
  // what kept the sum behind memory speed on mid-size arrays.
  static double sum(const float* x, int64_t n) {
    typename V::D a0 = V::dzero(), a1 = V::dzero(), a2 = V::dzero(), a3 = V::dzero();
    auto quad = [x](int64_t i) {
      return V::add(V::add(V::load(x + i), V::load(x + i + W)), V::add(V::load(x + i + 2 * W), V::load(x + i + 3 * W)));
    };
    int64_t i = 0;
    for (; i + 8 * W <= n; i += 8 * W) {
      V::widen_add(a0, a1, quad(i));
      V::widen_add(a2, a3, quad(i + 4 * W));
    }
    for (; i + W <= n; i += W) V::widen_add(a0, a1, V::load(x + i));
    double tail = 0;
    for (; i < n; ++i) tail += double(x[i]);
    return V::dhsum(V::dadd(V::dadd(a0, a2), V::dadd(a1, a3))) + tail;
  }

  // Column sums: each four rows are added pairwise in float lanes (as sum() does), then widened
  // into the double accumulators, so acc is loaded and stored once per four rows.
  static void sum_rows(double* acc, const float* x, int64_t rows, int64_t stride, int64_t n) {
    const int64_t vector_end = n / W * W;
    auto accumulate = [acc](int64_t j, R s) {
      typename V::D lo = V::dload(acc + j), hi = V::dload(acc + j + W / 2);
      V::widen_add(lo, hi, s);
      V::dstore(acc + j, lo);
      V::dstore(acc + j + W / 2, hi);
    };
    int64_t r = 0;
    for (; r + 4 <= rows; r += 4) {
      const float *a = x + r * stride, *b = a + stride, *c = b + stride, *d = c + stride;
      for (int64_t j = 0; j < vector_end; j += W)
        accumulate(j, V::add(V::add(V::load(a + j), V::load(b + j)), V::add(V::load(c + j), V::load(d + j))));
    }
    for (; r < rows; ++r)
      for (int64_t j = 0; j < vector_end; j += W) accumulate(j, V::load(x + r * stride + j));
    for (int64_t j = vector_end; j < n; ++j)
      for (r = 0; r < rows; ++r) acc[j] += double(x[r * stride + j]);
  }

  static void max_update(float* best, float* at, const float* v, const float* v_at, float offset, int64_t n) {
    const R shift = V::set1(offset);
    int64_t i = 0;
    for (; i + W <= n; i += W) {
      const R x = V::load(v + i), b = V::load(best + i);
      V::store(best + i, V::gt_or_nan_select(x, b, x, b));
      V::store(at + i, V::gt_or_nan_select(x, b, V::add(V::load(v_at + i), shift), V::load(at + i)));
    }
    for (; i < n; ++i)
      if (v[i] > best[i] || v[i] != v[i]) {
        best[i] = v[i];
        at[i] = v_at[i] + offset;
      }
  }

  // ---- layer norm rows
  // Row sums in float lanes over two vectors at a time, each pair then widened into double (as
  // sum() does over four): the float error stays that of a two-term sum per lane, with half the
  // conversions of widening every vector, which kept these rows behind PyTorch's.
  // Sum of (x - mu)^2.
  static double centered_squares(const float* x, float mu, int64_t n) {
    typename V::D a0 = V::dzero(), a1 = V::dzero();
    const R m = V::set1(mu);
    int64_t i = 0;
    for (; i + 2 * W <= n; i += 2 * W) {
      const R d0 = V::sub(V::load(x + i), m), d1 = V::sub(V::load(x + i + W), m);
      V::widen_add(a0, a1, V::fmadd(d0, d0, V::mul(d1, d1)));
    }
    for (; i + W <= n; i += W) {
      const R d = V::sub(V::load(x + i), m);
      V::widen_add(a0, a1, V::mul(d, d));
    }
    double tail = 0;
    for (; i < n; ++i) tail += double(x[i] - mu) * double(x[i] - mu);
    return V::dhsum(V::dadd(a0, a1)) + tail;
  }
  // A W-float load that reads only the first `valid` floats (zeros after): the rows' tails.
  static R load_part(const float* p, int64_t valid) {
    if (valid >= W) return V::load(p);
    alignas(64) float t[W] = {};
    __builtin_memcpy(t, p, size_t(valid) * sizeof(float));
    return V::load(t);
  }
  static void store_part(float* p, R v, int64_t valid) {
    if (valid >= W) return V::store(p, v);
    alignas(64) float t[W];
    V::store(t, v);
    __builtin_memcpy(p, t, size_t(valid) * sizeof(float));
  }

  // y = (x - mean) rstd [* w] [+ b]; the presence of w and b is a template argument so the loop
  // carries no branch.
  template <bool HasW, bool HasB>
  static void normalize_row(float* y, const float* x, int64_t n, R m, R r, const float* w, const float* b) {
    auto at = [&](R xv, int64_t i, int64_t k) {
      R v = V::mul(V::sub(xv, m), r);
      if constexpr (HasW && HasB) return V::fmadd(v, load_part(w + i, k), load_part(b + i, k));
      if constexpr (HasW && !HasB) return V::mul(v, load_part(w + i, k));
      if constexpr (!HasW && HasB) return V::add(v, load_part(b + i, k));
      return v;
    };
    int64_t i = 0;
    for (; i + W <= n; i += W) V::store(y + i, at(V::load(x + i), i, W));
    if (i < n) store_part(y + i, at(load_part(x + i, n - i), i, n - i), n - i);
  }

  static void layer_norm_row(float* y, const float* x, int64_t n, double eps, const float* w, const float* b,
                             double* mean, double* rstd) {
    const double mu = n ? sum(x, n) / double(n) : 0.0;
    const double var = n ? centered_squares(x, float(mu), n) / double(n) : 0.0;
    const double rs = 1.0 / __builtin_sqrt(var + eps);
    *mean = mu;
    *rstd = rs;
    const R m = V::set1(float(mu)), r = V::set1(float(rs));
    if (w && b) normalize_row<true, true>(y, x, n, m, r, w, b);
    else if (w) normalize_row<true, false>(y, x, n, m, r, w, b);
    else if (b) normalize_row<false, true>(y, x, n, m, r, w, b);
    else normalize_row<false, false>(y, x, n, m, r, w, b);
  }

  // gi = rstd (g - mean(g) - xhat mean(g xhat)) with g = dy [* w]; the same pass adds dy xhat
  // and dy into the weight / bias gradient accumulators when they are given (Acc).
  template <bool HasW, bool Acc>
  static void layer_norm_backward_row_impl(float* gi, const float* dy, const float* x, int64_t n, float mean,
                                           float rstd, const float* w, float* gw, float* gb) {
    const R m = V::set1(mean), r = V::set1(rstd);
    auto g_at = [&](int64_t i, int64_t k) {
      if constexpr (HasW) return V::mul(load_part(dy + i, k), load_part(w + i, k));
      return load_part(dy + i, k);
    };
    auto xhat_at = [&](int64_t i, int64_t k) { return V::mul(V::sub(load_part(x + i, k), m), r); };
    typename V::D s0 = V::dzero(), s1 = V::dzero(), t0 = V::dzero(), t1 = V::dzero();
    int64_t i = 0;
    for (; i + 2 * W <= n; i += 2 * W) {
      const R g0 = g_at(i, W), g1 = g_at(i + W, W);
      V::widen_add(s0, s1, V::add(g0, g1));
      V::widen_add(t0, t1, V::fmadd(g0, xhat_at(i, W), V::mul(g1, xhat_at(i + W, W))));
    }
    for (; i < n; i += W) {  // a tail's padding has g = 0, so it adds nothing to either sum
      const R g = g_at(i, n - i);
      V::widen_add(s0, s1, g);
      V::widen_add(t0, t1, V::mul(g, xhat_at(i, n - i)));
    }
    const double sg = V::dhsum(V::dadd(s0, s1)), sgx = V::dhsum(V::dadd(t0, t1));
    const R c1 = V::set1(float(sg / double(n))), c2 = V::set1(float(sgx / double(n)));
    for (i = 0; i < n; i += W) {
      const int64_t k = n - i;
      const R xh = xhat_at(i, k);
      store_part(gi + i, V::mul(r, V::sub(V::sub(g_at(i, k), c1), V::mul(xh, c2))), k);
      if constexpr (Acc) {
        const R d = load_part(dy + i, k);
        if (gw) store_part(gw + i, V::fmadd(d, xh, load_part(gw + i, k)), k);
        if (gb) store_part(gb + i, V::add(d, load_part(gb + i, k)), k);
      }
    }
  }
  static void layer_norm_backward_row(float* gi, const float* dy, const float* x, int64_t n, float mean, float rstd,
                                      const float* w, float* gw, float* gb) {
    const bool acc = gw || gb;
    if (w) {
      if (acc) layer_norm_backward_row_impl<true, true>(gi, dy, x, n, mean, rstd, w, gw, gb);
      else layer_norm_backward_row_impl<true, false>(gi, dy, x, n, mean, rstd, w, gw, gb);
    } else {
      if (acc) layer_norm_backward_row_impl<false, true>(gi, dy, x, n, mean, rstd, w, gw, gb);
      else layer_norm_backward_row_impl<false, false>(gi, dy, x, n, mean, rstd, w, gw, gb);
    }
  }

  static float hmax(R m) {
    alignas(64) float t[W];
    V::store(t, m);
    float r = t[0];
    for (int j = 1; j < W; ++j) r = t[j] > r ? t[j] : r;
    return r;
  }
  static float hsum(R s) {
    alignas(64) float t[W];
    V::store(t, s);
    float r = 0;
    for (int j = 0; j < W; ++j) r += t[j];
    return r;
  }
  // The row's max; a NaN anywhere makes the whole row NaN later (through exp), as in the
  // scalar path, whether or not the max itself caught it.
  static float row_max(const float* x, int64_t n) {
    R m = V::set1(-__builtin_inff());
    int64_t i = 0;
    for (; i + W <= n; i += W) m = V::max(m, V::load(x + i));
    float r = hmax(m);
    for (; i < n; ++i) r = x[i] > r ? x[i] : r;
    return r;
  }
  // sum of exp(x - mx), also stored into `e` when it is not null.
  // exp through SLEEF (within 1 ulp) or, for Inline, through exp_inline (within 2 ulp, a
  // fraction of the cost: the fused attention's probabilities, as PyTorch's flash kernel uses a
  // faster exp than its softmax).
  template <bool Inline>
  static float exp_sum_impl(float* e, const float* x, float mx, int64_t n) {
    const R shift = V::set1(mx);
    auto ex = [](R v) {
      if constexpr (Inline) return exp_inline(v);
      return V::exp(v);
    };
    R s0 = V::set1(0.0f), s1 = V::set1(0.0f);
    int64_t i = 0;
    for (; i + 2 * W <= n; i += 2 * W) {
      const R v0 = ex(V::sub(V::load(x + i), shift)), v1 = ex(V::sub(V::load(x + i + W), shift));
      if (e) V::store(e + i, v0), V::store(e + i + W, v1);
      s0 = V::add(s0, v0);
      s1 = V::add(s1, v1);
    }
    for (; i + W <= n; i += W) {
      const R v = ex(V::sub(V::load(x + i), shift));
      if (e) V::store(e + i, v);
      s0 = V::add(s0, v);
    }
    if (i < n) {  // pad with -inf: exp(-inf - mx) adds 0
      alignas(64) float t[W];
      for (int j = 0; j < W; ++j) t[j] = i + j < n ? x[i + j] : -__builtin_inff();
      const R v = ex(V::sub(V::load(t), shift));
      V::store(t, v);
      if (e) __builtin_memcpy(e + i, t, size_t(n - i) * sizeof(float));
      s1 = V::add(s1, V::load(t));
    }
    return hsum(V::add(s0, s1));
  }
  static float exp_sum(float* e, const float* x, float mx, int64_t n) { return exp_sum_impl<false>(e, x, mx, n); }
  static float exp_sum_fast(float* e, const float* x, float mx, int64_t n) { return exp_sum_impl<true>(e, x, mx, n); }
  static void softmax(float* y, const float* x, int64_t n) {
    const float mx = row_max(x, n);
    const float inv = 1.0f / exp_sum(y, x, mx, n);
    vs<Binary::Mul>(y, y, inv, n);
  }
  static void log_softmax(float* y, const float* x, int64_t n) {
    const float mx = row_max(x, n);
    const float shift = mx + logf(exp_sum(nullptr, x, mx, n));
    vs<Binary::Sub>(y, x, shift, n);
  }

  static constexpr Table make(const char* isa) {
    Table t{};
    t.isa = isa;
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
    t.activation[int(Activation::Gelu)] = &activation<Activation::Gelu>;
    t.activation[int(Activation::GeluTanh)] = &activation<Activation::GeluTanh>;
    t.activation[int(Activation::Silu)] = &activation<Activation::Silu>;
    t.activation_backward[int(Activation::Gelu)] = &activation_backward<Activation::Gelu>;
    t.activation_backward[int(Activation::GeluTanh)] = &activation_backward<Activation::GeluTanh>;
    t.activation_backward[int(Activation::Silu)] = &activation_backward<Activation::Silu>;
    t.layer_norm_row = &layer_norm_row;
    t.layer_norm_backward_row = &layer_norm_backward_row;
    t.sum = &sum;
    t.sum_rows = &sum_rows;
    t.max_update = &max_update;
    t.softmax = &softmax;
    t.log_softmax = &log_softmax;
    t.row_max = &row_max;
    t.exp_sum = &exp_sum;
    t.exp_sum_fast = &exp_sum_fast;
    return t;
  }
};

// Applies a C math function lane by lane: the fallback when SLEEF is absent.
template <class V, float (*F)(float)>
inline typename V::R lanewise(typename V::R x) {
  alignas(64) float t[V::W];
  V::store(t, x);
  for (int j = 0; j < V::W; ++j) t[j] = F(t[j]);
  return V::load(t);
}

// tanh from exp: 1 - 2 / (exp(2|x|) + 1) where |x| >= 0.5 (no cancellation there, tanh >= 0.46),
// the Taylor series to x^17 below (truncation < 1e-8 relative), then x's sign. About as fast as
// exp; SLEEF's own tanhf is several times slower. NaN takes the exp branch and stays NaN;
// exp overflowing (|x| > 44) gives exactly 1.
template <class V>
inline typename V::R tanh_via_exp(typename V::R x) {
  using R = typename V::R;
  const R a = V::abs(x);
  const R e = V::exp(V::add(a, a));
  const R big = V::sub(V::set1(1.0f), V::div(V::set1(2.0f), V::add(e, V::set1(1.0f))));
  const R x2 = V::mul(a, a);
  R p = V::set1(float(6404582.0 / 10854718875.0));
  p = V::fmadd(p, x2, V::set1(float(-929569.0 / 638512875.0)));
  p = V::fmadd(p, x2, V::set1(float(21844.0 / 6081075.0)));
  p = V::fmadd(p, x2, V::set1(float(-1382.0 / 155925.0)));
  p = V::fmadd(p, x2, V::set1(float(62.0 / 2835.0)));
  p = V::fmadd(p, x2, V::set1(float(-17.0 / 315.0)));
  p = V::fmadd(p, x2, V::set1(float(2.0 / 15.0)));
  p = V::fmadd(p, x2, V::set1(float(-1.0 / 3.0)));
  const R small = V::fmadd(V::mul(p, x2), a, a);
  return V::copysign(V::lt_select(a, V::set1(0.5f), small, big), x);
}

}  // namespace
}  // namespace tessera::cpu::simd

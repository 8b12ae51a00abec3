// Tests of the CPU plugin's vectorised float32 kernels (backends/cpu/src/vec_*.cpp): unary math,
// activations (gelu, silu) and their derivatives, layer norm rows, add/sub/mul/div (contiguous and against a broadcast scalar), sum, softmax and log_softmax, the fused attention's online softmax.
// Lengths around every vector width (tails), unaligned starts, NaN / inf / -0 / denormals, and
// sizes that split across threads; each result is checked against a reference loop here
// (double precision for the math functions, float arithmetic bit for bit for + - * /).
// SimdKernels.* runs under whichever ISA the plugin picked; SimdIsa.EveryPathPasses re-runs them
// in child processes with TESSERA_CPU_ISA=scalar|avx2|avx512 (each ISA the CPU has).
#include <gtest/gtest.h>

#include "test_util.h"

#include <tessera/tessera.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

using namespace tessera;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Lengths around the 8- and 16-float widths, the 2x unrolled loop, and the parallel grain.
const std::vector<int64_t> kLengths = {0, 1, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 47, 100, 1023, 70001};

// `n` values in [lo, hi) from a fixed generator, with specials sprinkled in when asked.
std::vector<float> values(int64_t n, float lo, float hi, int seed, bool specials) {
  std::vector<float> v(static_cast<size_t>(n));
  uint32_t s = 12345u + uint32_t(seed) * 7919u;
  for (auto& x : v) {
    s ^= s << 13;
    s ^= s >> 17;
    s ^= s << 5;
    x = lo + (hi - lo) * float(s % 100000) / 100000.0f;
  }
  if (specials) {
    const float sp[] = {kNaN, kInf, -kInf, 0.0f, -0.0f, 1e-40f, -1e-40f, 88.9f, -104.0f, 1e30f, -1e30f};
    for (size_t i = 0; i < v.size(); i += 5) v[i] = sp[(i / 5) % (sizeof(sp) / sizeof(sp[0]))];
  }
  return v;
}

// A contiguous float32 tensor holding `v`; `unaligned` makes it a view starting one float into a
// larger buffer, so its data pointer is 4 bytes off the allocator's alignment.
Tensor make(const std::vector<float>& v, bool unaligned = false) {
  const int64_t n = int64_t(v.size()), off = unaligned ? 1 : 0;
  Tensor base = empty({n + off}, kFloat32);
  float* p = base.data_ptr<float>();
  p[0] = 0.0f;
  for (int64_t i = 0; i < n; ++i) p[i + off] = v[size_t(i)];
  return unaligned ? slice(base, 0, 1, n + 1) : base;
}
std::vector<float> read(const Tensor& t) {
  const Tensor c = t.is_contiguous() ? t : contiguous(t);
  const float* p = c.data_ptr<float>();
  return std::vector<float>(p, p + c.numel());
}

// Within a few ulp of the double reference (SLEEF's u10 functions are within 1 ulp); NaN must
// stay NaN, infinities must match exactly, denormal results get an absolute slack.
void expect_close(float got, double ref, const std::string& what, double rtol = 4e-7 * 4) {
  if (std::isnan(ref)) {
    EXPECT_TRUE(std::isnan(got)) << what << ": expected NaN, got " << got;
  } else if (std::isinf(ref) || std::abs(ref) > double(std::numeric_limits<float>::max())) {
    EXPECT_EQ(double(got), double(float(ref))) << what;
  } else {
    EXPECT_NEAR(double(got), ref, rtol * std::abs(ref) + 1e-37) << what;
  }
}
void expect_same_bits(float got, float ref, const std::string& what) {
  if (std::isnan(ref)) {
    EXPECT_TRUE(std::isnan(got)) << what << ": expected NaN, got " << got;
  } else {
    EXPECT_EQ(got, ref) << what;
    EXPECT_EQ(std::signbit(got), std::signbit(ref)) << what << " (sign of zero)";
  }
}

struct UnaryCase {
  const char* name;
  std::function<Tensor(const Tensor&)> op;
  std::function<double(double)> ref;
  float lo, hi;  // the range of ordinary inputs
};
std::vector<UnaryCase> unary_cases() {
  return {
      {"exp", [](const Tensor& x) { return exp(x); }, [](double x) { return std::exp(x); }, -80, 80},
      {"log", [](const Tensor& x) { return log(x); }, [](double x) { return std::log(x); }, 0, 1000},
      {"log1p", [](const Tensor& x) { return log1p(x); }, [](double x) { return std::log1p(x); }, -0.9f, 100},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }, [](double x) { return std::sqrt(x); }, 0, 1000},
      {"rsqrt", [](const Tensor& x) { return rsqrt(x); }, [](double x) { return 1.0 / std::sqrt(x); }, 0.01f, 1000},
      {"sin", [](const Tensor& x) { return sin(x); }, [](double x) { return std::sin(x); }, -100, 100},
      {"cos", [](const Tensor& x) { return cos(x); }, [](double x) { return std::cos(x); }, -100, 100},
      {"tanh", [](const Tensor& x) { return tanh(x); }, [](double x) { return std::tanh(x); }, -12, 12},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }, [](double x) { return 1.0 / (1.0 + std::exp(-x)); },
       -30, 30},
      {"erf", [](const Tensor& x) { return erf(x); }, [](double x) { return std::erf(x); }, -5, 5},
      {"neg", [](const Tensor& x) { return neg(x); }, [](double x) { return -x; }, -10, 10},
      {"abs", [](const Tensor& x) { return abs(x); }, [](double x) { return std::abs(x); }, -10, 10},
      {"relu", [](const Tensor& x) { return relu(x); }, [](double x) { return x < 0 ? 0.0 : x; }, -10, 10},
  };
}

TEST(SimdKernels, UnaryMatchesReferenceAtEveryLengthAndAlignment) {
  for (const UnaryCase& c : unary_cases()) {
    for (int64_t n : kLengths) {
      for (bool unaligned : {false, true}) {
        for (bool specials : {false, true}) {
          const std::vector<float> v = values(n, c.lo, c.hi, int(n), specials);
          const std::vector<float> got = read(c.op(make(v, unaligned)));
          ASSERT_EQ(got.size(), v.size());
          const std::string what = std::string(c.name) + " n=" + std::to_string(n) + (unaligned ? " unaligned" : "") +
                                   (specials ? " specials" : "");
          // Near zeros of sin/cos/log1p, relative error is not meaningful: allow an absolute ulp.
          const double atol = std::string(c.name) == "sin" || std::string(c.name) == "cos" ? 1e-6 : 0;
          for (size_t i = 0; i < v.size(); ++i) {
            const double r = c.ref(double(v[i]));
            if (atol > 0 && std::isfinite(r) && std::abs(double(got[i]) - r) <= atol) continue;
            expect_close(got[i], r, what + " at " + std::to_string(i) + " x=" + std::to_string(v[i]));
          }
        }
      }
    }
  }
}

TEST(SimdKernels, UnaryInPlaceAndSpecialValues) {
  // In-place on an unaligned view with every special value; the buffer's first float is untouched.
  const std::vector<float> v = {kNaN, kInf, -kInf, 0.0f, -0.0f, 1e-40f, 100.0f, -100.0f, 0.5f, -0.5f, 3.0f};
  Tensor t = make(v, true);
  exp_(t);
  const std::vector<float> got = read(t);
  for (size_t i = 0; i < v.size(); ++i) expect_close(got[i], std::exp(double(v[i])), "exp_ at " + std::to_string(i));
  const std::vector<float> r = read(relu(make(v)));
  for (size_t i = 0; i < v.size(); ++i) {
    if (std::isnan(v[i])) EXPECT_TRUE(std::isnan(r[i]));
    else expect_same_bits(r[i], v[i] < 0 ? 0.0f : v[i], "relu at " + std::to_string(i));
  }
  const std::vector<float> a = read(abs(make(v)));
  EXPECT_FALSE(std::signbit(a[4])) << "abs(-0.0) is +0.0";
  const std::vector<float> ng = read(neg(make(v)));
  EXPECT_TRUE(std::signbit(ng[3])) << "neg(0.0) is -0.0";
}

// Activations and their derivatives (gelu in both forms, silu), the vector kernels against the
// formulas in double. gelu's normal CDF is an approximation with absolute error 1.5e-7 (as
// PyTorch's vectorised erf), taken from the tail so the left tail keeps its relative accuracy.
struct ActivationCase {
  const char* name;
  std::function<Tensor(const Tensor&)> forward;
  std::function<Tensor(const Tensor&, const Tensor&)> backward;  // (grad, x)
  std::function<double(double)> f, df;
};
std::vector<ActivationCase> activation_cases() {
  const double c = std::sqrt(2.0 / M_PI), k = 0.044715;
  auto cdf = [](double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); };
  auto pdf = [](double x) { return std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI); };
  auto sig = [](double x) { return 1.0 / (1.0 + std::exp(-x)); };
  return {
      {"gelu", [](const Tensor& x) { return gelu(x); }, [](const Tensor& g, const Tensor& x) { return gelu_backward(g, x); },
       [=](double x) { return x * cdf(x); }, [=](double x) { return cdf(x) + x * pdf(x); }},
      {"gelu_tanh", [](const Tensor& x) { return gelu(x, "tanh"); },
       [](const Tensor& g, const Tensor& x) { return gelu_backward(g, x, "tanh"); },
       [=](double x) { return 0.5 * x * (1.0 + std::tanh(c * (x + k * x * x * x))); },
       [=](double x) {
         const double t = std::tanh(c * (x + k * x * x * x));
         return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * k * x * x);
       }},
      {"silu", [](const Tensor& x) { return silu(x); }, [](const Tensor& g, const Tensor& x) { return silu_backward(g, x); },
       [=](double x) { return x * sig(x); }, [=](double x) { return sig(x) * (1.0 + x * (1.0 - sig(x))); }},
  };
}

TEST(SimdKernels, ActivationsAndDerivativesMatchReference) {
  for (const ActivationCase& c : activation_cases()) {
    for (int64_t n : kLengths) {
      for (bool unaligned : {false, true}) {
        const std::vector<float> x = values(n, -12, 12, int(n) + 3, false), g = values(n, -2, 2, int(n) + 4, false);
        const std::vector<float> y = read(c.forward(make(x, unaligned)));
        const std::vector<float> dx = read(c.backward(make(g, unaligned), make(x)));
        const std::string what = std::string(c.name) + " n=" + std::to_string(n) + (unaligned ? " unaligned" : "");
        for (size_t i = 0; i < x.size(); ++i) {
          const double xi = x[i], scale = std::max(1.0, std::abs(xi));
          EXPECT_NEAR(y[i], c.f(xi), 4e-7 * scale) << what << " forward at x=" << xi;
          EXPECT_NEAR(dx[i], double(g[i]) * c.df(xi), 1e-6 * std::max(1.0, std::abs(double(g[i])))) << what << " backward at x=" << xi;
        }
      }
    }
    // Left tail: relative accuracy where 1 + erf would cancel in float (gelu(-5) is about -1.4e-6,
    // gelu(-9) about -1e-18; 1 + erf(x / sqrt 2) computed in float is off by 10% at -5 and 100% at -9).
    if (std::string(c.name) == "gelu") {
      const std::vector<float> tail = {-3.0f, -5.0f, -7.0f, -9.0f};
      const std::vector<float> y = read(c.forward(make(tail)));
      for (size_t i = 0; i < tail.size(); ++i)
        EXPECT_NEAR(y[i], c.f(tail[i]), 3e-2 * std::abs(c.f(tail[i]))) << "gelu's left tail at x=" << tail[i];
    }
    // Infinities and NaN: the float formulas' own values (PyTorch's too).
    const std::vector<float> sp = {kInf, -kInf, kNaN};
    const std::vector<float> y = read(c.forward(make(sp)));
    EXPECT_EQ(y[0], kInf) << c.name;
    EXPECT_TRUE(std::isnan(y[1]) && std::isnan(y[2])) << c.name << ": -inf * 0 and NaN are NaN";
  }
}

struct BinaryCase {
  const char* name;
  std::function<Tensor(const Tensor&, const Tensor&)> op;
  std::function<Tensor(const Tensor&, double)> op_scalar;
  std::function<float(float, float)> ref;
};
std::vector<BinaryCase> binary_cases() {
  return {
      {"add", [](const Tensor& a, const Tensor& b) { return add(a, b); },
       [](const Tensor& a, double s) { return add(a, Scalar(s)); }, [](float x, float y) { return x + y; }},
      {"sub", [](const Tensor& a, const Tensor& b) { return sub(a, b); },
       [](const Tensor& a, double s) { return sub(a, Scalar(s)); }, [](float x, float y) { return x - y; }},
      {"mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); },
       [](const Tensor& a, double s) { return mul(a, Scalar(s)); }, [](float x, float y) { return x * y; }},
      {"div", [](const Tensor& a, const Tensor& b) { return div(a, b); },
       [](const Tensor& a, double s) { return div(a, Scalar(s)); }, [](float x, float y) { return x / y; }},
  };
}

TEST(SimdKernels, BinaryIsBitExactForEveryLayout) {
  for (const BinaryCase& c : binary_cases()) {
    for (int64_t n : kLengths) {
      for (bool unaligned : {false, true}) {
        const std::vector<float> x = values(n, -50, 50, int(n) + 1, true), y = values(n, -3, 3, int(n) + 2, true);
        const Tensor tx = make(x, unaligned), ty = make(y, !unaligned);
        const std::string what = std::string(c.name) + " n=" + std::to_string(n) + (unaligned ? " unaligned" : "");
        const std::vector<float> vv = read(c.op(tx, ty));
        for (size_t i = 0; i < x.size(); ++i) expect_same_bits(vv[i], c.ref(x[i], y[i]), what + " vv at " + std::to_string(i));
        // A Python-number operand is a 0-dim tensor: the scalar is broadcast on the right...
        const std::vector<float> vs = read(c.op_scalar(tx, 1.75));
        for (size_t i = 0; i < x.size(); ++i) expect_same_bits(vs[i], c.ref(x[i], 1.75f), what + " vs at " + std::to_string(i));
        // ...or, as a 0-dim tensor, on the left.
        const std::vector<float> sv = read(c.op(reshape(make({-2.5f}), {}), tx));
        for (size_t i = 0; i < x.size(); ++i) expect_same_bits(sv[i], c.ref(-2.5f, x[i]), what + " sv at " + std::to_string(i));
      }
    }
  }
}

TEST(SimdKernels, SmallTensorsAndAlphaStayExact) {
  const Tensor a = make({1.0f, 2.0f, 3.0f, 4.0f}), b = make({0.5f, -0.25f, kInf, kNaN});
  const std::vector<float> s = read(add(a, b));
  EXPECT_EQ(s[0], 1.5f);
  EXPECT_EQ(s[1], 1.75f);
  EXPECT_EQ(s[2], kInf);
  EXPECT_TRUE(std::isnan(s[3]));
  // alpha = 2 takes the generic loop, alpha = -1 the vector sub: both exact here.
  const std::vector<float> a2 = read(add(a, b, 2));
  EXPECT_EQ(a2[1], 1.5f);
  const std::vector<float> am = read(add(a, b, -1));
  EXPECT_EQ(am[0], 0.5f);
  EXPECT_EQ(am[1], 2.25f);
  // in-place and out= go through the same rows
  Tensor x = make(values(37, -1, 1, 3, false), true);
  const std::vector<float> before = read(x);
  mul_(x, make(values(37, -1, 1, 4, false)));
  const std::vector<float> other = values(37, -1, 1, 4, false), after = read(x);
  for (size_t i = 0; i < before.size(); ++i) EXPECT_EQ(after[i], before[i] * other[i]);
}

TEST(SimdKernels, SumMatchesDoubleReference) {
  for (int64_t n : kLengths) {
    for (bool unaligned : {false, true}) {
      const std::vector<float> v = values(n, -1, 1.5f, int(n) + 3, false);
      double ref = 0, mag = 0;
      for (float x : v) ref += double(x), mag += std::abs(double(x));
      const double got = sum(make(v, unaligned)).item_double();
      EXPECT_NEAR(double(got), ref, 1e-6 * mag + 1e-6 * std::abs(ref) + 1e-30) << "sum n=" << n;
    }
  }
  // Rows of a 2-D tensor (contiguous inner reduction) and a huge sum that splits across threads.
  const int64_t rows = 5, cols = 1031;
  const std::vector<float> m = values(rows * cols, -2, 2, 9, false);
  const std::vector<float> got = read(sum(reshape(make(m), {rows, cols}), std::vector<int64_t>{1}));
  for (int64_t r = 0; r < rows; ++r) {
    double ref = 0;
    for (int64_t c = 0; c < cols; ++c) ref += double(m[size_t(r * cols + c)]);
    EXPECT_NEAR(double(got[size_t(r)]), ref, 1e-5) << "row " << r;
  }
  const std::vector<float> big(3'000'001, 0.1f);
  EXPECT_NEAR(double(sum(make(big)).item_double()), 3'000'001 * double(0.1f), 0.5);
  // Specials propagate.
  std::vector<float> w(40, 1.0f);
  w[21] = kNaN;
  EXPECT_TRUE(std::isnan(sum(make(w)).item_double()));
  w[21] = 1.0f;
  w[37] = kInf;
  EXPECT_EQ(sum(make(w)).item_double(), kInf);
  w[3] = -kInf;
  EXPECT_TRUE(std::isnan(sum(make(w)).item_double()));
}

TEST(SimdKernels, SoftmaxRowsMatchReference) {
  for (int64_t len : {1, 3, 8, 15, 16, 17, 33, 1000}) {
    const int64_t rows = 7;
    std::vector<float> v = values(rows * len, -20, 20, int(len), false);
    if (len > 2) v[1] = -kInf;  // a masked entry
    const Tensor t = reshape(make(v), {rows, len});
    const std::vector<float> sm = read(softmax(t, 1)), lsm = read(log_softmax(t, 1));
    for (int64_t r = 0; r < rows; ++r) {
      const float* x = v.data() + r * len;
      double mx = -INFINITY, s = 0;
      for (int64_t i = 0; i < len; ++i) mx = std::max(mx, double(x[i]));
      for (int64_t i = 0; i < len; ++i) s += std::exp(double(x[i]) - mx);
      for (int64_t i = 0; i < len; ++i) {
        const double p = std::exp(double(x[i]) - mx) / s, lp = double(x[i]) - mx - std::log(s);
        const std::string what = "len=" + std::to_string(len) + " row " + std::to_string(r) + " i=" + std::to_string(i);
        EXPECT_NEAR(double(sm[size_t(r * len + i)]), p, 2e-6 * p + 1e-7) << "softmax " << what;
        if (std::isinf(lp)) EXPECT_EQ(double(lsm[size_t(r * len + i)]), lp) << what;
        else EXPECT_NEAR(double(lsm[size_t(r * len + i)]), lp, 2e-5 + 2e-6 * std::abs(lp)) << "log_softmax " << what;
      }
    }
  }
  // A NaN anywhere in a row makes the whole row NaN; other rows are unaffected.
  std::vector<float> v = values(2 * 21, -1, 1, 5, false);
  v[13] = kNaN;
  const std::vector<float> sm = read(softmax(reshape(make(v), {2, 21}), 1));
  for (int i = 0; i < 21; ++i) EXPECT_TRUE(std::isnan(sm[size_t(i)])) << i;
  for (int i = 21; i < 42; ++i) EXPECT_FALSE(std::isnan(sm[size_t(i)])) << i;
}

// The fused attention kernel's online softmax (the tables' row_max and exp_sum), through the
// operator: 37 queries against 150 keys crosses its 128-key block, so a row's max and sum are
// corrected between blocks; causal and not, against a double reference.
TEST(SimdKernels, FusedAttentionMatchesReference) {
  const int64_t H = 2, L = 37, S = 150, E = 5, Ev = 3;
  const std::vector<float> q = values(H * L * E, -3, 3, 1, false), k = values(H * S * E, -3, 3, 2, false),
                           v = values(H * S * Ev, -1, 1, 3, false);
  const Tensor tq = reshape(make(q), {1, H, L, E}), tk = reshape(make(k), {1, H, S, E}),
               tv = reshape(make(v), {1, H, S, Ev});
  for (bool causal : {false, true}) {
    auto [out, lse] = _scaled_dot_product_flash_attention_for_cpu(tq, tk, tv, 0.0, causal);
    const std::vector<float> got = read(out), got_lse = read(lse);
    const double scale = 1.0 / std::sqrt(double(E));
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < L; ++i) {
        const int64_t keys = causal ? i + 1 : S;
        std::vector<double> p(static_cast<size_t>(keys));
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < keys; ++j) {
          double d = 0;
          for (int64_t e = 0; e < E; ++e) d += double(q[size_t((h * L + i) * E + e)]) * k[size_t((h * S + j) * E + e)];
          p[size_t(j)] = d * scale;
          mx = std::max(mx, p[size_t(j)]);
        }
        for (double& x : p) sum += x = std::exp(x - mx);
        const std::string what = std::string(causal ? "causal" : "full") + " h=" + std::to_string(h) +
                                 " i=" + std::to_string(i);
        EXPECT_NEAR(double(got_lse[size_t(h * L + i)]), mx + std::log(sum), 1e-5) << what;
        for (int64_t c = 0; c < Ev; ++c) {
          double o = 0;
          for (int64_t j = 0; j < keys; ++j) o += p[size_t(j)] / sum * v[size_t((h * S + j) * Ev + c)];
          EXPECT_NEAR(double(got[size_t((h * L + i) * Ev + c)]), o, 1e-5) << what << " c=" << c;
        }
      }
  }
}

// Layer norm rows, forward and backward (grad_input, grad_weight, grad_bias), against double
// formulas: row lengths around the vector widths (tails), with and without weight and bias.
TEST(SimdKernels, LayerNormRowsMatchReference) {
  for (int64_t len : {1, 3, 8, 15, 16, 17, 33, 384, 1000}) {
    for (bool affine : {false, true}) {
      const int64_t rows = 37;  // more rows than the parameter-gradient blocks
      const std::vector<float> xv = values(rows * len, -3, 5, int(len), false), gv = values(rows * len, -1, 1, int(len) + 1, false);
      const std::vector<float> wv = values(len, 0.5f, 1.5f, 7, false), bv = values(len, -1, 1, 8, false);
      const Tensor x = reshape(make(xv), {rows, len}), g = reshape(make(gv), {rows, len});
      const Tensor w = affine ? make(wv) : Tensor(), b = affine ? make(bv) : Tensor();
      auto [y, mean, rstd] = native_layer_norm(x, {len}, w, b, 1e-5);
      auto [gi, gw, gb] = native_layer_norm_backward(g, x, {len}, mean, rstd, w, b);
      const std::vector<float> yr = read(y), gir = read(gi);
      std::vector<double> ref_gw(size_t(len), 0.0), ref_gb(size_t(len), 0.0);
      const std::string what = "len=" + std::to_string(len) + (affine ? " affine" : "");
      for (int64_t r = 0; r < rows; ++r) {
        const float* xr = xv.data() + r * len;
        const float* gr = gv.data() + r * len;
        double mu = 0, var = 0;
        for (int64_t i = 0; i < len; ++i) mu += xr[i];
        mu /= double(len);
        for (int64_t i = 0; i < len; ++i) var += (xr[i] - mu) * (xr[i] - mu);
        const double rs = 1.0 / std::sqrt(var / double(len) + 1e-5);
        double sg = 0, sgx = 0;
        for (int64_t i = 0; i < len; ++i) {
          const double xh = (xr[i] - mu) * rs, gw_i = gr[i] * (affine ? wv[size_t(i)] : 1.0);
          const double want = xh * (affine ? wv[size_t(i)] : 1.0) + (affine ? bv[size_t(i)] : 0.0);
          EXPECT_NEAR(yr[size_t(r * len + i)], want, 2e-6 * (1 + std::abs(want))) << what << " forward row " << r << " i=" << i;
          sg += gw_i;
          sgx += gw_i * xh;
          ref_gw[size_t(i)] += gr[i] * xh;
          ref_gb[size_t(i)] += gr[i];
        }
        for (int64_t i = 0; i < len; ++i) {
          const double xh = (xr[i] - mu) * rs, gw_i = gr[i] * (affine ? wv[size_t(i)] : 1.0);
          const double want = rs * (gw_i - sg / double(len) - xh * sgx / double(len));
          EXPECT_NEAR(gir[size_t(r * len + i)], want, 1e-5 * (1 + std::abs(want))) << what << " grad_input row " << r << " i=" << i;
        }
      }
      if (affine) {
        const std::vector<float> gwr = read(gw), gbr = read(gb);
        for (int64_t i = 0; i < len; ++i) {
          EXPECT_NEAR(gwr[size_t(i)], ref_gw[size_t(i)], 1e-5 * (1 + std::abs(ref_gw[size_t(i)]))) << what << " grad_weight " << i;
          EXPECT_NEAR(gbr[size_t(i)], ref_gb[size_t(i)], 1e-5 * (1 + std::abs(ref_gb[size_t(i)]))) << what << " grad_bias " << i;
        }
      }
    }
  }
}

// ---- every ISA path, in child processes (the ISA is fixed when the plugin loads)
bool cpu_has(const char* isa) {
#if defined(__x86_64__)
  if (std::string(isa) == "avx2") return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (std::string(isa) == "avx512") return __builtin_cpu_supports("avx512f");
#endif
  return std::string(isa) == "scalar";
}

TEST(SimdIsa, EveryPathPasses) {
  if (std::getenv("TESSERA_SIMD_CHILD")) GTEST_SKIP() << "inside a child run";
  char exe[4096];
  const ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (len <= 0) GTEST_SKIP() << "cannot find this executable";
  exe[len] = '\0';
  for (const char* isa : {"scalar", "avx2", "avx512"}) {
    if (!cpu_has(isa)) {
      std::printf("skipping %s: not supported by this CPU\n", isa);
      continue;
    }
    const std::string cmd = std::string("TESSERA_SIMD_CHILD=1 TESSERA_CPU_ISA=") + isa + " '" + exe +
                            "' --gtest_filter='SimdKernels.*' 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    std::string out;
    char buf[4096];
    while (size_t k = std::fread(buf, 1, sizeof(buf), p)) out.append(buf, k);
    const int rc = pclose(p);
    EXPECT_EQ(rc, 0) << isa << " run failed:\n" << out;
    EXPECT_NE(out.find(std::string("element-wise kernels use ") + isa), std::string::npos)
        << "the plugin did not report using " << isa << ":\n" << out.substr(0, 2000);
    EXPECT_NE(out.find("[  PASSED  ]"), std::string::npos) << out.substr(0, 2000);
  }
}

}  // namespace

// Tests of the CPU plugin's convolution and pooling kernels (forward and backward) against
// naive reference loops in double written here: 1-D and 2-D convolution with stride, padding,
// dilation, groups and bias, batched and unbatched, float32 (oneDNN) and float64 (im2col);
// max / avg / adaptive-avg pooling with their options; the backward ops against the
// references' own adjoint loops and, for convolution, a finite difference; non-contiguous
// inputs, zero-size batches and the errors.
#include <gtest/gtest.h>

#include "test_util.h"

#include <tessera/runtime.h>
#include <tessera/tessera.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

namespace {

using namespace tessera;
using tessera::testing::expect_error;
using Shape = std::vector<int64_t>;
using Values = std::vector<double>;

int64_t numel(const Shape& s) { return tessera::testing::numel_of(s); }

// Deterministic values in [-1, 1) (a 64-bit LCG), distinct enough that max-pooling ties are rare.
Values random_values(int64_t n, uint64_t seed) {
  Values v(static_cast<size_t>(n));
  uint64_t state = seed * 6364136223846793005ULL + 1442695040888963407ULL;
  for (auto& x : v) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    x = double(state >> 11) / double(1ULL << 53) * 2 - 1;
  }
  return v;
}
Tensor rand_tensor(const Shape& shape, ScalarType dt, uint64_t seed) {
  return tensor_from_values(random_values(numel(shape), seed), shape, dt);
}

void expect_values(const Tensor& got, const Shape& shape, const Values& want, double tol) {
  ASSERT_EQ(got.shape(), shape);
  const Values g = got.to_double_vector();
  ASSERT_EQ(g.size(), want.size());
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(g[i])) << "at flat index " << i;
      continue;
    }
    if (std::isinf(want[i])) {
      EXPECT_EQ(g[i], want[i]) << "at flat index " << i;
      continue;
    }
    ASSERT_NEAR(g[i], want[i], tol * (1 + std::abs(want[i]))) << "at flat index " << i;
  }
}

double tol_for(ScalarType dt) { return dt == kFloat64 ? 1e-11 : dt == kFloat32 ? 2e-5 : 2e-2; }

// ============================================================================ convolution

struct ConvParams {
  int64_t sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1, groups = 1;
};

// The reference on canonical shapes: x [N, C, H, W], w [O, C / g, KH, KW].
struct ConvRef {
  Shape y_shape;
  Values y;
};
ConvRef ref_conv(const Values& x, const Shape& xs, const Values& w, const Shape& ws, const Values* b,
                 const ConvParams& p) {
  const int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], O = ws[0], CG = ws[1], KH = ws[2], KW = ws[3];
  const int64_t OG = O / p.groups;
  const int64_t OH = (H + 2 * p.ph - p.dh * (KH - 1) - 1) / p.sh + 1;
  const int64_t OW = (W + 2 * p.pw - p.dw * (KW - 1) - 1) / p.sw + 1;
  ConvRef r{{N, O, OH, OW}, Values(size_t(N * O * OH * OW), 0.0)};
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double s = b ? (*b)[size_t(o)] : 0.0;
          const int64_t g = o / OG;
          for (int64_t c = 0; c < CG; ++c)
            for (int64_t i = 0; i < KH; ++i)
              for (int64_t j = 0; j < KW; ++j) {
                const int64_t ih = oh * p.sh - p.ph + i * p.dh, iw = ow * p.sw - p.pw + j * p.dw;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                s += x[size_t(((n * C + g * CG + c) * H + ih) * W + iw)] * w[size_t(((o * CG + c) * KH + i) * KW + j)];
              }
          r.y[size_t(((n * O + o) * OH + oh) * OW + ow)] = s;
        }
  return r;
}

// The adjoint of the reference: the same loop nest, scattering.
struct ConvGrads {
  Values gx, gw, gb;
};
ConvGrads ref_conv_backward(const Values& gy, const Values& x, const Shape& xs, const Values& w, const Shape& ws,
                            const ConvParams& p) {
  const int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], O = ws[0], CG = ws[1], KH = ws[2], KW = ws[3];
  const int64_t OG = O / p.groups;
  const int64_t OH = (H + 2 * p.ph - p.dh * (KH - 1) - 1) / p.sh + 1;
  const int64_t OW = (W + 2 * p.pw - p.dw * (KW - 1) - 1) / p.sw + 1;
  ConvGrads r{Values(x.size(), 0.0), Values(w.size(), 0.0), Values(size_t(O), 0.0)};
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          const double g = gy[size_t(((n * O + o) * OH + oh) * OW + ow)];
          r.gb[size_t(o)] += g;
          const int64_t grp = o / OG;
          for (int64_t c = 0; c < CG; ++c)
            for (int64_t i = 0; i < KH; ++i)
              for (int64_t j = 0; j < KW; ++j) {
                const int64_t ih = oh * p.sh - p.ph + i * p.dh, iw = ow * p.sw - p.pw + j * p.dw;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                const size_t xi = size_t(((n * C + grp * CG + c) * H + ih) * W + iw);
                const size_t wi = size_t(((o * CG + c) * KH + i) * KW + j);
                r.gx[xi] += g * w[wi];
                r.gw[wi] += g * x[xi];
              }
        }
  return r;
}

// One 2-D case: input [N, C, H, W], weight [O, C / groups, KH, KW].
struct Conv2dCase {
  Shape x, w;
  ConvParams p;
  bool bias;
};

std::string describe(const Conv2dCase& c) {
  auto s = [](const Shape& v) {
    std::string r;
    for (auto x : v) r += std::to_string(x) + ",";
    return r;
  };
  return "x=" + s(c.x) + " w=" + s(c.w) + " stride=" + std::to_string(c.p.sh) + "," + std::to_string(c.p.sw) +
         " pad=" + std::to_string(c.p.ph) + "," + std::to_string(c.p.pw) + " dil=" + std::to_string(c.p.dh) + "," +
         std::to_string(c.p.dw) + " groups=" + std::to_string(c.p.groups) + (c.bias ? " bias" : "");
}

const std::vector<Conv2dCase>& conv2d_cases() {
  static const std::vector<Conv2dCase> cases = {
      {{2, 3, 8, 8}, {4, 3, 3, 3}, {}, true},
      {{1, 1, 5, 5}, {1, 1, 1, 1}, {}, false},
      {{2, 3, 8, 8}, {5, 3, 3, 3}, {1, 1, 1, 1, 1, 1, 1}, true},               // padding 1 ("same")
      {{2, 4, 9, 7}, {6, 2, 3, 2}, {2, 1, 1, 0, 1, 1, 2}, true},               // groups 2, stride 2 x 1
      {{1, 4, 10, 10}, {4, 1, 3, 3}, {1, 1, 2, 2, 2, 2, 4}, false},            // depthwise, dilation 2
      {{3, 2, 7, 6}, {3, 2, 2, 3}, {3, 2, 0, 1, 2, 1, 1}, true},               // everything uneven
      {{2, 6, 6, 6}, {6, 2, 3, 3}, {2, 2, 1, 1, 1, 1, 3}, true},               // groups 3
      {{1, 3, 4, 4}, {2, 3, 4, 4}, {}, true},                                   // kernel = input
      {{1, 2, 3, 3}, {2, 2, 5, 5}, {1, 1, 1, 1, 1, 1, 1}, false},              // kernel > input, padded
      {{5, 8, 16, 16}, {16, 8, 3, 3}, {1, 1, 1, 1, 1, 1, 1}, true},            // several GEMM blocks
      {{2, 2, 4, 4}, {3, 2, 2, 2}, {1, 1, 3, 3, 1, 1, 1}, true},               // padding > kernel
      {{1, 2, 5, 5}, {2, 2, 2, 2}, {7, 7, 0, 0, 1, 1, 1}, false},              // stride > input
      {{2, 3, 1, 1}, {5, 3, 1, 1}, {}, true},                                   // 1x1 everything
  };
  return cases;
}

void run_conv2d_case(const Conv2dCase& c, ScalarType dt, bool backward) {
  SCOPED_TRACE(describe(c) + " " + std::string(name(dt)));
  Tensor x = rand_tensor(c.x, dt, 1), w = rand_tensor(c.w, dt, 2);
  Tensor b = c.bias ? rand_tensor({c.w[0]}, dt, 3) : Tensor();
  const Values xv = x.to_double_vector(), wv = w.to_double_vector();
  const Values bv = c.bias ? b.to_double_vector() : Values();
  const std::vector<int64_t> stride{c.p.sh, c.p.sw}, pad{c.p.ph, c.p.pw}, dil{c.p.dh, c.p.dw};
  const ConvRef want = ref_conv(xv, c.x, wv, c.w, c.bias ? &bv : nullptr, c.p);
  Tensor y = convolution(x, w, b, stride, pad, dil, c.p.groups);
  EXPECT_EQ(y.dtype(), dt);
  expect_values(y, want.y_shape, want.y, tol_for(dt));
  if (!backward) return;
  Tensor gy = rand_tensor(want.y_shape, dt, 4);
  const ConvGrads g = ref_conv_backward(gy.to_double_vector(), xv, c.x, wv, c.w, c.p);
  auto [gx, gw, gb] = convolution_backward(gy, x, w, stride, pad, dil, c.p.groups);
  expect_values(gx, c.x, g.gx, tol_for(dt));
  expect_values(gw, c.w, g.gw, tol_for(dt));
  expect_values(gb, {c.w[0]}, g.gb, tol_for(dt));
}

TEST(CpuConv, Conv2dForwardAndBackwardFloat32) {
  for (const auto& c : conv2d_cases()) run_conv2d_case(c, kFloat32, true);
}

TEST(CpuConv, Conv2dForwardAndBackwardFloat64) {
  for (const auto& c : conv2d_cases()) run_conv2d_case(c, kFloat64, true);
}

TEST(CpuConv, Conv2dHalfPrecisionComputesInFloat) {
  for (ScalarType dt : {kFloat16, kBFloat16}) run_conv2d_case(conv2d_cases()[0], dt, true);
}

// Repeated calls reuse cached primitives; interleaving shapes must not mix them up.
TEST(CpuConv, RepeatedShapesGiveTheSameResults) {
  const auto& a = conv2d_cases()[0];
  const auto& b = conv2d_cases()[3];
  for (int i = 0; i < 3; ++i) {
    run_conv2d_case(a, kFloat32, true);
    run_conv2d_case(b, kFloat32, true);
  }
}

TEST(CpuConv, Conv1dBatchedAndUnbatched) {
  for (ScalarType dt : {kFloat32, kFloat64}) {
    SCOPED_TRACE(std::string(name(dt)));
    // [N, C, L] with weight [O, C / g, K]; the reference runs it as H = 1.
    const Shape xs{3, 4, 11}, ws{6, 2, 3};
    const ConvParams p{1, 2, 0, 1, 1, 2, 2};
    Tensor x = rand_tensor(xs, dt, 5), w = rand_tensor(ws, dt, 6), b = rand_tensor({6}, dt, 7);
    const Values xv = x.to_double_vector(), wv = w.to_double_vector(), bv = b.to_double_vector();
    const ConvRef want = ref_conv(xv, {3, 4, 1, 11}, wv, {6, 2, 1, 3}, &bv, p);
    const Shape ys{3, 6, want.y_shape[3]};
    Tensor y = convolution(x, w, b, {2}, {1}, {2}, 2);
    expect_values(y, ys, want.y, tol_for(dt));
    // Unbatched [C, L]: the same as a batch of one.
    Tensor x0 = select(x, 0, 1);
    Tensor y0 = convolution(x0, w, b, {2}, {1}, {2}, 2);
    expect_values(y0, {6, ys[2]}, select(y, 0, 1).to_double_vector(), tol_for(dt));
    // Backward, batched and unbatched.
    Tensor gy = rand_tensor(ys, dt, 8);
    const ConvGrads g = ref_conv_backward(gy.to_double_vector(), xv, {3, 4, 1, 11}, wv, {6, 2, 1, 3}, p);
    auto [gx, gw, gb] = convolution_backward(gy, x, w, {2}, {1}, {2}, 2);
    expect_values(gx, xs, g.gx, tol_for(dt));
    expect_values(gw, ws, g.gw, tol_for(dt));
    expect_values(gb, {6}, g.gb, tol_for(dt));
    Tensor gy0 = select(gy, 0, 0);
    auto [gx0, gw0, gb0] = convolution_backward(gy0, select(x, 0, 0), w, {2}, {1}, {2}, 2);
    const ConvGrads g0 = ref_conv_backward(gy0.to_double_vector(), select(x, 0, 0).to_double_vector(),
                                           {1, 4, 1, 11}, wv, {6, 2, 1, 3}, p);
    expect_values(gx0, {4, 11}, g0.gx, tol_for(dt));
    expect_values(gw0, ws, g0.gw, tol_for(dt));
    expect_values(gb0, {6}, g0.gb, tol_for(dt));
  }
}

TEST(CpuConv, Conv2dUnbatched) {
  for (ScalarType dt : {kFloat32, kFloat64}) {
    Tensor x = rand_tensor({3, 6, 5}, dt, 9), w = rand_tensor({2, 3, 3, 2}, dt, 10);
    const ConvRef want = ref_conv(x.to_double_vector(), {1, 3, 6, 5}, w.to_double_vector(), {2, 3, 3, 2}, nullptr,
                                  {1, 1, 1, 0, 1, 1, 1});
    Tensor y = convolution(x, w, Tensor(), {1}, {1, 0}, {1}, 1);
    expect_values(y, {2, want.y_shape[2], want.y_shape[3]}, want.y, tol_for(dt));
  }
}

// Transposed, permuted and strided views read like their contiguous copies.
TEST(CpuConv, NonContiguousOperands) {
  for (ScalarType dt : {kFloat32, kFloat64}) {
    SCOPED_TRACE(std::string(name(dt)));
    Tensor x = permute(rand_tensor({2, 7, 6, 3}, dt, 11), {0, 3, 1, 2});              // NHWC memory
    Tensor w = transpose(rand_tensor({3, 4, 2, 2}, dt, 12), 0, 1);                     // [4, 3, 2, 2]
    Tensor b = slice(rand_tensor({8}, dt, 13), 0, 0, 8, 2);                           // stride 2
    ASSERT_FALSE(x.is_contiguous());
    ASSERT_FALSE(w.is_contiguous());
    const Values xv = x.to_double_vector(), wv = w.to_double_vector(), bv = b.to_double_vector();
    const ConvParams p{2, 1, 1, 0, 1, 1, 1};
    const ConvRef want = ref_conv(xv, {2, 3, 7, 6}, wv, {4, 3, 2, 2}, &bv, p);
    Tensor y = convolution(x, w, b, {2, 1}, {1, 0}, {1, 1}, 1);
    expect_values(y, want.y_shape, want.y, tol_for(dt));
    Tensor gy = transpose(rand_tensor({want.y_shape[0], want.y_shape[1], want.y_shape[3], want.y_shape[2]}, dt, 14),
                          2, 3);
    const ConvGrads g = ref_conv_backward(gy.to_double_vector(), xv, {2, 3, 7, 6}, wv, {4, 3, 2, 2}, p);
    auto [gx, gw, gb] = convolution_backward(gy, x, w, {2, 1}, {1, 0}, {1, 1}, 1);
    expect_values(gx, {2, 3, 7, 6}, g.gx, tol_for(dt));
    expect_values(gw, {4, 3, 2, 2}, g.gw, tol_for(dt));
    expect_values(gb, {4}, g.gb, tol_for(dt));
  }
}

// Convolution is linear in x and in w: central differences of <gy, conv(x, w)> along a random
// direction match the backward's inner products (float64, exact up to rounding).
TEST(CpuConv, BackwardMatchesFiniteDifferences) {
  const Shape xs{2, 4, 6, 5}, ws{6, 2, 3, 3};
  const std::vector<int64_t> s{2, 1}, pad{1, 1}, dil{1, 2};
  Tensor x = rand_tensor(xs, kFloat64, 20), w = rand_tensor(ws, kFloat64, 21), b = rand_tensor({6}, kFloat64, 22);
  Tensor y = convolution(x, w, b, s, pad, dil, 2);
  Tensor gy = rand_tensor(y.shape(), kFloat64, 23);
  auto [gx, gw, gb] = convolution_backward(gy, x, w, s, pad, dil, 2);
  auto loss = [&](const Tensor& xx, const Tensor& ww) {
    const Values a = convolution(xx, ww, b, s, pad, dil, 2).to_double_vector(), g = gy.to_double_vector();
    double sum = 0;
    for (size_t i = 0; i < a.size(); ++i) sum += a[i] * g[i];
    return sum;
  };
  auto dot = [](const Values& a, const Values& b) {
    double s = 0;
    for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
    return s;
  };
  const double h = 1e-3;
  const Values dx = random_values(numel(xs), 24), dw = random_values(numel(ws), 25);
  auto shifted = [&](const Tensor& t, const Values& d, double step) {
    Values v = t.to_double_vector();
    for (size_t i = 0; i < v.size(); ++i) v[i] += step * d[i];
    return tensor_from_values(v, t.shape(), kFloat64);
  };
  const double fd_x = (loss(shifted(x, dx, h), w) - loss(shifted(x, dx, -h), w)) / (2 * h);
  EXPECT_NEAR(fd_x, dot(gx.to_double_vector(), dx), 1e-8 * (1 + std::abs(fd_x)));
  const double fd_w = (loss(x, shifted(w, dw, h)) - loss(x, shifted(w, dw, -h))) / (2 * h);
  EXPECT_NEAR(fd_w, dot(gw.to_double_vector(), dw), 1e-8 * (1 + std::abs(fd_w)));
}

TEST(CpuConv, ZeroSize) {
  for (ScalarType dt : {kFloat32, kFloat64}) {
    // An empty batch.
    Tensor x = zeros({0, 3, 5, 5}, dt), w = rand_tensor({2, 3, 3, 3}, dt, 1), b = rand_tensor({2}, dt, 2);
    Tensor y = convolution(x, w, b, {1}, {0}, {1}, 1);
    EXPECT_EQ(y.shape(), (Shape{0, 2, 3, 3}));
    auto [gx, gw, gb] = convolution_backward(zeros({0, 2, 3, 3}, dt), x, w, {1}, {0}, {1}, 1);
    EXPECT_EQ(gx.shape(), (Shape{0, 3, 5, 5}));
    expect_values(gw, {2, 3, 3, 3}, Values(54, 0.0), 0);
    expect_values(gb, {2}, Values(2, 0.0), 0);
    // No input channels: the output is the bias.
    Tensor b3 = rand_tensor({3}, dt, 3);
    Tensor y2 = convolution(zeros({2, 0, 4, 4}, dt), zeros({3, 0, 2, 2}, dt), b3, {1}, {0}, {1}, 1);
    const Values bias3 = b3.to_double_vector();
    Values want;
    for (int n = 0; n < 2; ++n)
      for (int c = 0; c < 3; ++c)
        for (int i = 0; i < 9; ++i) want.push_back(bias3[size_t(c)]);
    expect_values(y2, {2, 3, 3, 3}, want, tol_for(dt));
    // No output channels.
    Tensor y3 = convolution(rand_tensor({2, 3, 4, 4}, dt, 4), zeros({0, 3, 2, 2}, dt), Tensor(), {1}, {0}, {1}, 1);
    EXPECT_EQ(y3.shape(), (Shape{2, 0, 3, 3}));
  }
}

TEST(CpuConv, Errors) {
  Tensor x = zeros({2, 3, 8, 8}), w = zeros({4, 3, 3, 3});
  expect_error<ValueError>([&] { convolution(zeros({2, 5, 8, 8}), w, Tensor(), {1}, {0}, {1}, 1); },
                           {"convolution", "3 channels", "got 5 channels"});
  expect_error<ValueError>([&] { convolution(zeros({2, 6, 8, 8}), zeros({5, 3, 3, 3}), Tensor(), {1}, {0}, {1}, 2); },
                           {"convolution", "divisible by groups"});
  expect_error<ValueError>([&] { convolution(x, w, Tensor(), {1}, {0}, {1}, 0); }, {"convolution", "groups > 0"});
  expect_error<ValueError>([&] { convolution(zeros({2, 3, 2, 2}), w, Tensor(), {1}, {0}, {1}, 1); },
                           {"convolution", "kernel", "larger than the padded input"});
  expect_error<ValueError>([&] { convolution(zeros({2, 3, 5, 5}), w, Tensor(), {1}, {0}, {3}, 1); },
                           {"convolution", "kernel", "[7, 7]"});
  expect_error<ValueError>([&] { convolution(x, zeros({4, 3}), Tensor(), {1}, {0}, {1}, 1); },
                           {"convolution", "weight", "2-D"});
  expect_error<ValueError>([&] { convolution(zeros({8, 8}), w, Tensor(), {1}, {0}, {1}, 1); },
                           {"convolution", "3-D (unbatched) or 4-D (batched)", "got 2-D"});
  expect_error<ValueError>([&] { convolution(x, w, Tensor(), {0}, {0}, {1}, 1); }, {"convolution", "stride"});
  expect_error<ValueError>([&] { convolution(x, w, Tensor(), {1}, {-1}, {1}, 1); }, {"convolution", "padding"});
  expect_error<ValueError>([&] { convolution(x, w, Tensor(), {1, 1, 1}, {0}, {1}, 1); },
                           {"convolution", "stride", "1 or 2 values"});
  expect_error<ValueError>([&] { convolution(x, w, zeros({3}), {1}, {0}, {1}, 1); }, {"convolution", "bias", "[4]"});
  expect_error<TypeError>([&] { convolution(x, zeros({4, 3, 3, 3}, kFloat64), Tensor(), {1}, {0}, {1}, 1); },
                          {"convolution", "weight", "float32", "float64"});
  expect_error<TypeError>([&] { convolution(zeros({2, 3, 8, 8}, kInt64), zeros({4, 3, 3, 3}, kInt64), Tensor(), {1},
                                            {0}, {1}, 1); },
                          {"convolution", "floating point", "int64"});
  expect_error<TypeError>([&] { convolution(x, w, zeros({4}, kFloat64), {1}, {0}, {1}, 1); },
                          {"convolution", "bias", "float64"});
  expect_error<ValueError>([&] { convolution_backward(zeros({2, 4, 5, 5}), x, w, {1}, {0}, {1}, 1); },
                           {"convolution_backward", "grad_output", "[2, 4, 6, 6]", "[2, 4, 5, 5]"});
  expect_error<TypeError>([&] { convolution_backward(zeros({2, 4, 6, 6}, kFloat64), x, w, {1}, {0}, {1}, 1); },
                          {"convolution_backward", "grad_output", "float64"});
}

// ============================================================================ pooling

// Canonical pooling reference on [P, H, W] planes.
struct PoolParams {
  int64_t kh, kw, sh, sw, ph = 0, pw = 0, dh = 1, dw = 1;
  bool ceil = false;
};

int64_t ref_out_size(int64_t in, int64_t k, int64_t pad, int64_t s, int64_t d, bool ceil) {
  const double v = double(in + 2 * pad - d * (k - 1) - 1) / double(s);
  int64_t out = int64_t(ceil ? std::ceil(v) : std::floor(v)) + 1;
  if (ceil && (out - 1) * s >= in + pad) --out;
  return out;
}

struct MaxRef {
  Values y;
  std::vector<int64_t> idx;
  int64_t oh, ow;
};
MaxRef ref_max_pool(const Values& x, int64_t P, int64_t H, int64_t W, const PoolParams& p) {
  MaxRef r;
  r.oh = ref_out_size(H, p.kh, p.ph, p.sh, p.dh, p.ceil);
  r.ow = ref_out_size(W, p.kw, p.pw, p.sw, p.dw, p.ceil);
  for (int64_t pl = 0; pl < P; ++pl)
    for (int64_t oh = 0; oh < r.oh; ++oh)
      for (int64_t ow = 0; ow < r.ow; ++ow) {
        double best = -std::numeric_limits<double>::infinity();
        int64_t at = -1;
        for (int64_t i = 0; i < p.kh; ++i)
          for (int64_t j = 0; j < p.kw; ++j) {
            const int64_t ih = oh * p.sh - p.ph + i * p.dh, iw = ow * p.sw - p.pw + j * p.dw;
            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
            const double v = x[size_t((pl * H + ih) * W + iw)];
            if (at < 0 || v > best || std::isnan(v)) best = v, at = ih * W + iw;
          }
        r.y.push_back(best);
        r.idx.push_back(at);
      }
  return r;
}

struct AvgOpts {
  bool count_include_pad = true;
  std::optional<int64_t> divisor;
};
// Forward values, and the weight each input element gets from each output (for the adjoint).
struct AvgRef {
  Values y;
  int64_t oh, ow;
  std::vector<std::vector<std::pair<int64_t, double>>> taps;  // per output: (input flat index, weight)
};
AvgRef ref_avg_pool(const Values& x, int64_t P, int64_t H, int64_t W, const PoolParams& p, const AvgOpts& o) {
  AvgRef r;
  r.oh = ref_out_size(H, p.kh, p.ph, p.sh, 1, p.ceil);
  r.ow = ref_out_size(W, p.kw, p.pw, p.sw, 1, p.ceil);
  for (int64_t pl = 0; pl < P; ++pl)
    for (int64_t oh = 0; oh < r.oh; ++oh)
      for (int64_t ow = 0; ow < r.ow; ++ow) {
        // Window cells: inside the input, or inside the padding (which counts with count_include_pad);
        // beyond the padded input (ceil mode) nothing counts.
        int64_t inside = 0, padded = 0;
        std::vector<int64_t> cells;
        for (int64_t i = 0; i < p.kh; ++i)
          for (int64_t j = 0; j < p.kw; ++j) {
            const int64_t ih = oh * p.sh - p.ph + i, iw = ow * p.sw - p.pw + j;
            if (ih >= H + p.ph || iw >= W + p.pw) continue;
            ++padded;
            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
            ++inside;
            cells.push_back((pl * H + ih) * W + iw);
          }
        const double div = o.divisor ? double(*o.divisor) : o.count_include_pad ? double(padded) : double(inside);
        double s = 0;
        std::vector<std::pair<int64_t, double>> taps;
        for (int64_t c : cells) s += x[size_t(c)], taps.emplace_back(c, 1.0 / div);
        r.y.push_back(cells.empty() ? 0.0 : s / div);
        r.taps.push_back(std::move(taps));
      }
  return r;
}

Values adjoint(const AvgRef& r, const Values& gy, size_t n_in) {
  Values gx(n_in, 0.0);
  for (size_t o = 0; o < r.taps.size(); ++o)
    for (auto [i, wgt] : r.taps[o]) gx[size_t(i)] += wgt * gy[o];
  return gx;
}

AvgRef ref_adaptive(const Values& x, int64_t P, int64_t H, int64_t W, int64_t OH, int64_t OW) {
  AvgRef r;
  r.oh = OH, r.ow = OW;
  for (int64_t pl = 0; pl < P; ++pl)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        const int64_t h0 = int64_t(std::floor(double(oh * H) / double(OH)));
        const int64_t h1 = int64_t(std::ceil(double((oh + 1) * H) / double(OH)));
        const int64_t w0 = int64_t(std::floor(double(ow * W) / double(OW)));
        const int64_t w1 = int64_t(std::ceil(double((ow + 1) * W) / double(OW)));
        const double div = double((h1 - h0) * (w1 - w0));
        double s = 0;
        std::vector<std::pair<int64_t, double>> taps;
        for (int64_t ih = h0; ih < h1; ++ih)
          for (int64_t iw = w0; iw < w1; ++iw) {
            const int64_t c = (pl * H + ih) * W + iw;
            s += x[size_t(c)];
            taps.emplace_back(c, 1.0 / div);
          }
        r.y.push_back(s / div);
        r.taps.push_back(std::move(taps));
      }
  return r;
}

Shape pooled(const Shape& in, int64_t oh, int64_t ow) {
  Shape s(in.begin(), in.end() - 2);
  s.push_back(oh);
  s.push_back(ow);
  return s;
}

const std::vector<PoolParams>& max_cases() {
  static const std::vector<PoolParams> cases = {
      {2, 2, 2, 2},
      {3, 3, 1, 1, 1, 1},
      {3, 2, 2, 1, 1, 0},
      {3, 3, 2, 2, 1, 1, 2, 2},        // dilation 2
      {3, 3, 2, 2, 0, 0, 1, 1, true},  // ceil mode
      {2, 3, 3, 2, 1, 1, 1, 1, true},  // ceil mode with padding
      {1, 1, 1, 1},
  };
  return cases;
}

TEST(CpuPool, MaxPoolForwardAndBackward) {
  for (ScalarType dt : {kFloat32, kFloat64, kFloat16}) {
    for (const Shape& xs : {Shape{2, 3, 7, 8}, Shape{3, 5, 6}, Shape{1, 1, 9, 9}}) {
      for (const PoolParams& p : max_cases()) {
        SCOPED_TRACE(std::string(name(dt)) + " k=" + std::to_string(p.kh) + "x" + std::to_string(p.kw) +
                     " s=" + std::to_string(p.sh) + " pad=" + std::to_string(p.ph) + " dil=" + std::to_string(p.dh) +
                     (p.ceil ? " ceil" : "") + " rank " + std::to_string(xs.size()));
        Tensor x = rand_tensor(xs, dt, 30);
        const int64_t H = xs[xs.size() - 2], W = xs.back(), P = numel(xs) / (H * W);
        const Values xv = x.to_double_vector();
        const MaxRef want = ref_max_pool(xv, P, H, W, p);
        auto [y, idx] = max_pool2d_with_indices(x, {p.kh, p.kw}, {p.sh, p.sw}, {p.ph, p.pw}, {p.dh, p.dw}, p.ceil);
        const Shape ys = pooled(xs, want.oh, want.ow);
        EXPECT_EQ(idx.dtype(), kInt64);
        expect_values(y, ys, want.y, 0);  // a max is exact
        const Values iv = idx.to_double_vector();
        for (size_t i = 0; i < iv.size(); ++i) ASSERT_EQ(int64_t(iv[i]), want.idx[i]) << "index " << i;
        // Backward: grad_output scattered to the argmax of each window (accumulated on overlaps).
        Tensor gy = rand_tensor(ys, dt, 31);
        const Values gyv = gy.to_double_vector();
        Values gx(xv.size(), 0.0);
        for (size_t o = 0; o < gyv.size(); ++o) {
          const int64_t plane = int64_t(o) / (want.oh * want.ow);
          gx[size_t(plane * H * W + want.idx[o])] += gyv[o];
        }
        Tensor got = max_pool2d_with_indices_backward(gy, x, {p.kh, p.kw}, {p.sh, p.sw}, {p.ph, p.pw}, {p.dh, p.dw},
                                                      p.ceil, idx);
        expect_values(got, xs, gx, dt == kFloat16 ? 2e-3 : tol_for(dt));
      }
    }
  }
}

TEST(CpuPool, MaxPoolDefaultsNaNAndLayouts) {
  // stride=[] means stride = kernel_size; a single value means both dims.
  Tensor x = rand_tensor({2, 2, 6, 6}, kFloat32, 40);
  auto [y1, i1] = max_pool2d_with_indices(x, {3});
  auto [y2, i2] = max_pool2d_with_indices(x, {3, 3}, {3, 3}, {0, 0}, {1, 1}, false);
  EXPECT_EQ(y1.shape(), (Shape{2, 2, 2, 2}));
  expect_values(y1, y2.shape(), y2.to_double_vector(), 0);
  // A NaN is the maximum of its window.
  Values v(16, 0.0);
  v[5] = std::nan("");
  v[6] = 100;
  auto [yn, in] = max_pool2d_with_indices(tensor_from_values(v, {1, 4, 4}, kFloat64), {2, 2});
  const Values ynv = yn.to_double_vector();
  EXPECT_TRUE(std::isnan(ynv[0]));
  EXPECT_EQ(ynv[1], 100);
  EXPECT_EQ(in.to_double_vector()[0], 5);
  // Ties: the first maximum.
  auto [yt, it] = max_pool2d_with_indices(zeros({1, 4, 4}), {2, 2});
  EXPECT_EQ(it.to_double_vector(), (Values{0, 2, 8, 10}));
  // Non-contiguous input (channels-last memory) and an empty batch.
  Tensor xp = permute(rand_tensor({2, 7, 5, 3}, kFloat64, 41), {0, 3, 1, 2});
  const MaxRef want = ref_max_pool(xp.to_double_vector(), 6, 7, 5, {3, 2, 2, 1, 1, 1});
  auto [yp, ip] = max_pool2d_with_indices(xp, {3, 2}, {2, 1}, {1, 1});
  expect_values(yp, {2, 3, want.oh, want.ow}, want.y, 0);
  auto [ye, ie] = max_pool2d_with_indices(zeros({0, 3, 4, 4}), {2});
  EXPECT_EQ(ye.shape(), (Shape{0, 3, 2, 2}));
  EXPECT_EQ(ie.shape(), (Shape{0, 3, 2, 2}));
}

TEST(CpuPool, AvgPoolForwardAndBackward) {
  const std::vector<PoolParams> cases = {
      {2, 2, 2, 2}, {3, 3, 1, 1, 1, 1}, {3, 2, 2, 1, 1, 1}, {3, 3, 2, 2, 0, 0, 1, 1, true},
      {3, 3, 2, 2, 1, 1, 1, 1, true}, {2, 2, 3, 3, 1, 0, 1, 1, true},
  };
  const std::vector<AvgOpts> opts = {{true, std::nullopt}, {false, std::nullopt}, {true, 5}, {false, -3}};
  for (ScalarType dt : {kFloat32, kFloat64, kBFloat16}) {
    for (const Shape& xs : {Shape{2, 3, 7, 8}, Shape{2, 5, 6}}) {
      for (const PoolParams& p : cases) {
        for (const AvgOpts& o : opts) {
          SCOPED_TRACE(std::string(name(dt)) + " k=" + std::to_string(p.kh) + "x" + std::to_string(p.kw) +
                       " s=" + std::to_string(p.sh) + "x" + std::to_string(p.sw) + " pad=" + std::to_string(p.ph) +
                       "x" + std::to_string(p.pw) + (p.ceil ? " ceil" : "") +
                       (o.count_include_pad ? " include_pad" : "") +
                       (o.divisor ? " divisor=" + std::to_string(*o.divisor) : ""));
          Tensor x = rand_tensor(xs, dt, 50);
          const int64_t H = xs[xs.size() - 2], W = xs.back(), P = numel(xs) / (H * W);
          const Values xv = x.to_double_vector();
          const AvgRef want = ref_avg_pool(xv, P, H, W, p, o);
          const Shape ys = pooled(xs, want.oh, want.ow);
          Tensor y = avg_pool2d(x, {p.kh, p.kw}, {p.sh, p.sw}, {p.ph, p.pw}, p.ceil, o.count_include_pad, o.divisor);
          const double t = dt == kBFloat16 ? 1e-2 : tol_for(dt);
          expect_values(y, ys, want.y, t);
          Tensor gy = rand_tensor(ys, dt, 51);
          Tensor gx = avg_pool2d_backward(gy, x, {p.kh, p.kw}, {p.sh, p.sw}, {p.ph, p.pw}, p.ceil,
                                          o.count_include_pad, o.divisor);
          expect_values(gx, xs, adjoint(want, gy.to_double_vector(), xv.size()), t);
        }
      }
    }
  }
}

TEST(CpuPool, AvgPoolDefaultsAndLayouts) {
  Tensor x = rand_tensor({2, 3, 6, 6}, kFloat64, 60);
  expect_values(avg_pool2d(x, {2}), {2, 3, 3, 3}, avg_pool2d(x, {2, 2}, {2, 2}, {0, 0}).to_double_vector(), 0);
  Tensor xt = transpose(rand_tensor({2, 3, 5, 7}, kFloat64, 61), 2, 3);  // [2, 3, 7, 5]
  const AvgRef want = ref_avg_pool(xt.to_double_vector(), 6, 7, 5, {3, 3, 2, 2, 1, 1}, {});
  expect_values(avg_pool2d(xt, {3}, {2}, {1}), {2, 3, want.oh, want.ow}, want.y, 1e-12);
  EXPECT_EQ(avg_pool2d(zeros({0, 2, 4, 4}), {2}).shape(), (Shape{0, 2, 2, 2}));
}

TEST(CpuPool, AdaptiveAvgPool) {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{2, 3, 8, 8}, {1, 1}}, {{2, 3, 8, 8}, {4, 4}}, {{2, 3, 7, 5}, {3, 2}},
      {{3, 5, 6}, {4, 6}},    {{1, 2, 3, 3}, {5, 7}}, {{2, 3, 10, 9}, {3, 4}},
  };
  for (ScalarType dt : {kFloat32, kFloat64, kFloat16}) {
    for (const auto& [xs, os] : cases) {
      SCOPED_TRACE(std::string(name(dt)) + " rank " + std::to_string(xs.size()) + " out " + std::to_string(os[0]) +
                   "x" + std::to_string(os[1]));
      Tensor x = rand_tensor(xs, dt, 70);
      const int64_t H = xs[xs.size() - 2], W = xs.back(), P = numel(xs) / (H * W);
      const Values xv = x.to_double_vector();
      const AvgRef want = ref_adaptive(xv, P, H, W, os[0], os[1]);
      const Shape ys = pooled(xs, os[0], os[1]);
      const double t = dt == kFloat16 ? 2e-3 : tol_for(dt);
      expect_values(adaptive_avg_pool2d(x, os), ys, want.y, t);
      Tensor gy = rand_tensor(ys, dt, 71);
      expect_values(adaptive_avg_pool2d_backward(gy, x), xs, adjoint(want, gy.to_double_vector(), xv.size()), t);
    }
  }
  // Non-contiguous input; a single output size means both dims.
  Tensor xp = permute(rand_tensor({2, 6, 6, 3}, kFloat64, 72), {0, 3, 1, 2});
  const AvgRef want = ref_adaptive(xp.to_double_vector(), 6, 6, 6, 4, 4);
  expect_values(adaptive_avg_pool2d(xp, {4}), {2, 3, 4, 4}, want.y, 1e-12);
  EXPECT_EQ(adaptive_avg_pool2d(zeros({0, 3, 5, 5}), {2, 2}).shape(), (Shape{0, 3, 2, 2}));
}

TEST(CpuPool, Errors) {
  Tensor x = zeros({2, 3, 6, 6});
  expect_error<ValueError>([&] { max_pool2d_with_indices(zeros({6, 6}), {2}); },
                           {"max_pool2d_with_indices", "3-D", "4-D", "got 2-D"});
  expect_error<ValueError>([&] { max_pool2d_with_indices(zeros({2, 0, 6, 6}), {2}); },
                           {"max_pool2d_with_indices", "non-zero"});
  expect_error<ValueError>([&] { max_pool2d_with_indices(x, {0}); }, {"max_pool2d_with_indices", "kernel_size > 0"});
  expect_error<ValueError>([&] { max_pool2d_with_indices(x, {2}, {0}); }, {"max_pool2d_with_indices", "stride > 0"});
  expect_error<ValueError>([&] { max_pool2d_with_indices(x, {2}, {}, {2}); },
                           {"max_pool2d_with_indices", "half of kernel_size"});
  expect_error<ValueError>([&] { max_pool2d_with_indices(x, {7}); },
                           {"max_pool2d_with_indices", "output would be empty"});
  expect_error<ValueError>([&] { max_pool2d_with_indices(x, {2, 2, 2}); },
                           {"max_pool2d_with_indices", "kernel_size", "pair"});
  expect_error<TypeError>([&] { max_pool2d_with_indices(zeros({2, 3, 6, 6}, kInt32), {2}); },
                          {"max_pool2d_with_indices", "floating point", "int32"});
  auto [y, idx] = max_pool2d_with_indices(x, {2});
  expect_error<ValueError>(
      [&] { max_pool2d_with_indices_backward(zeros({2, 3, 2, 2}), x, {2}, {2}, {0}, {1}, false, idx); },
      {"max_pool2d_with_indices_backward", "grad_output", "[2, 3, 3, 3]"});
  expect_error<TypeError>(
      [&] { max_pool2d_with_indices_backward(y, x, {2}, {2}, {0}, {1}, false, zeros({2, 3, 3, 3})); },
      {"max_pool2d_with_indices_backward", "indices", "int64"});
  Tensor bad = full({2, 3, 3, 3}, 36, kInt64);
  expect_error<IndexError>([&] { max_pool2d_with_indices_backward(y, x, {2}, {2}, {0}, {1}, false, bad); },
                           {"max_pool2d_with_indices_backward", "36", "out of range"});
  expect_error<ValueError>([&] { avg_pool2d(x, {2}, {}, {0}, false, true, 0); }, {"avg_pool2d", "divisor_override"});
  expect_error<ValueError>([&] { avg_pool2d(x, {3}, {1}, {2}); }, {"avg_pool2d", "half of kernel_size"});
  expect_error<ValueError>([&] { avg_pool2d_backward(zeros({2, 3, 4, 4}), x, {2}, {2}, {0}, false, true, {}); },
                           {"avg_pool2d_backward", "grad_output", "[2, 3, 3, 3]"});
  expect_error<ValueError>([&] { adaptive_avg_pool2d(x, {-1, 2}); }, {"adaptive_avg_pool2d", "output_size"});
  expect_error<ValueError>([&] { adaptive_avg_pool2d(zeros({5}), {2}); }, {"adaptive_avg_pool2d", "3-D"});
  expect_error<ValueError>([&] { adaptive_avg_pool2d_backward(zeros({3, 2, 2}), x); },
                           {"adaptive_avg_pool2d_backward", "dims"});
  expect_error<ValueError>([&] { adaptive_avg_pool2d_backward(zeros({2, 4, 2, 2}), x); },
                           {"adaptive_avg_pool2d_backward", "grad_output", "[2, 4, 2, 2]"});
}

}  // namespace

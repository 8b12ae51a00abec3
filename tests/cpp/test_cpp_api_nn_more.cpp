// The C++ API's newer nn modules, each against an independent oracle: convolutions (1-D, 3-D and
// transposed) and their input gradients against direct loops, pooling against window loops,
// BatchNorm1d / GroupNorm against their formulas, activations and losses against closed forms
// (with gradients), LSTM / GRU / RNN against the gate equations (scalar loops for the values,
// plain operators under autograd for the gradients), and bad input naming the module.
#include "test_util.h"

#include <tessera/tessera.h>

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <map>
#include <random>

namespace ts = tessera;
using tessera::Tensor;
using tessera::testing::expect_close;
using tessera::testing::expect_error;
using tessera::testing::from;
using tessera::testing::randoms;
using tessera::testing::seq;
namespace F = tessera::nn::functional;
namespace nn = tessera::nn;

namespace {

using Shape = std::vector<int64_t>;


size_t numel(const Shape& s) { return size_t(tessera::testing::numel_of(s)); }

// Convolution geometry with up to 3 spatial dims, padded to 3 with size-1 leading dims.
struct Geometry {
  std::array<int64_t, 3> k{1, 1, 1}, s{1, 1, 1}, p{0, 0, 0}, d{1, 1, 1}, op{0, 0, 0};
};
Geometry geometry(const Shape& k, const Shape& s, const Shape& p, const Shape& d, const Shape& op = {}) {
  Geometry g;
  size_t n = k.size(), off = 3 - n;
  for (size_t i = 0; i < n; ++i) {
    g.k[off + i] = k[i];
    g.s[off + i] = s[i];
    g.p[off + i] = p[i];
    g.d[off + i] = d[i];
    g.op[off + i] = op.empty() ? 0 : op[i];
  }
  return g;
}
std::array<int64_t, 3> spatial3(const Shape& shape) {  // (N, C, spatial...) -> 3 spatial sizes
  std::array<int64_t, 3> out{1, 1, 1};
  size_t n = shape.size() - 2;
  for (size_t i = 0; i < n; ++i) out[3 - n + i] = shape[2 + i];
  return out;
}

// Direct convolution: x (N, C, sp...), w (O, C / groups, k...) -> (N, O, out...).
std::vector<double> conv_loop(const std::vector<double>& x, const Shape& xs, const std::vector<double>& w, int64_t O,
                              const std::vector<double>& b, const Geometry& g, int64_t groups, Shape* out_shape) {
  int64_t N = xs[0], C = xs[1], Cg = C / groups, Og = O / groups;
  auto in = spatial3(xs);
  std::array<int64_t, 3> out;
  for (int i = 0; i < 3; ++i) out[i] = (in[i] + 2 * g.p[i] - g.d[i] * (g.k[i] - 1) - 1) / g.s[i] + 1;
  std::vector<double> y(size_t(N * O * out[0] * out[1] * out[2]), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t a = 0; a < out[0]; ++a)
        for (int64_t bb = 0; bb < out[1]; ++bb)
          for (int64_t c3 = 0; c3 < out[2]; ++c3) {
            double acc = b.empty() ? 0.0 : b[size_t(o)];
            int64_t grp = o / Og;
            for (int64_t c = 0; c < Cg; ++c)
              for (int64_t k0 = 0; k0 < g.k[0]; ++k0)
                for (int64_t k1 = 0; k1 < g.k[1]; ++k1)
                  for (int64_t k2 = 0; k2 < g.k[2]; ++k2) {
                    int64_t i0 = a * g.s[0] - g.p[0] + k0 * g.d[0], i1 = bb * g.s[1] - g.p[1] + k1 * g.d[1],
                            i2 = c3 * g.s[2] - g.p[2] + k2 * g.d[2];
                    if (i0 < 0 || i0 >= in[0] || i1 < 0 || i1 >= in[1] || i2 < 0 || i2 >= in[2]) continue;
                    int64_t ic = grp * Cg + c;
                    acc += x[size_t((((n * C + ic) * in[0] + i0) * in[1] + i1) * in[2] + i2)] *
                           w[size_t((((o * Cg + c) * g.k[0] + k0) * g.k[1] + k1) * g.k[2] + k2)];
                  }
            y[size_t((((n * O + o) * out[0] + a) * out[1] + bb) * out[2] + c3)] = acc;
          }
  *out_shape = {N, O};
  for (size_t i = 3 - (xs.size() - 2); i < 3; ++i) out_shape->push_back(out[i]);
  return y;
}

// Transposed convolution as a scatter: x (N, C_in, sp...), w (C_in, C_out / groups, k...).
std::vector<double> conv_transpose_loop(const std::vector<double>& x, const Shape& xs, const std::vector<double>& w,
                                        int64_t Cout, const std::vector<double>& b, const Geometry& g, int64_t groups,
                                        Shape* out_shape) {
  int64_t N = xs[0], Cin = xs[1], Cig = Cin / groups, Cog = Cout / groups;
  auto in = spatial3(xs);
  std::array<int64_t, 3> out;
  for (int i = 0; i < 3; ++i) out[i] = (in[i] - 1) * g.s[i] - 2 * g.p[i] + g.d[i] * (g.k[i] - 1) + g.op[i] + 1;
  std::vector<double> y(size_t(N * Cout * out[0] * out[1] * out[2]), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < Cout; ++o)
      for (int64_t i = 0; i < numel({out[0], out[1], out[2]}); ++i)
        y[size_t((n * Cout + o) * out[0] * out[1] * out[2] + i)] = b.empty() ? 0.0 : b[size_t(o)];
  for (int64_t n = 0; n < N; ++n)
    for (int64_t ci = 0; ci < Cin; ++ci)
      for (int64_t a = 0; a < in[0]; ++a)
        for (int64_t bb = 0; bb < in[1]; ++bb)
          for (int64_t c3 = 0; c3 < in[2]; ++c3) {
            double xv = x[size_t((((n * Cin + ci) * in[0] + a) * in[1] + bb) * in[2] + c3)];
            int64_t grp = ci / Cig;
            for (int64_t ol = 0; ol < Cog; ++ol)
              for (int64_t k0 = 0; k0 < g.k[0]; ++k0)
                for (int64_t k1 = 0; k1 < g.k[1]; ++k1)
                  for (int64_t k2 = 0; k2 < g.k[2]; ++k2) {
                    int64_t o0 = a * g.s[0] - g.p[0] + k0 * g.d[0], o1 = bb * g.s[1] - g.p[1] + k1 * g.d[1],
                            o2 = c3 * g.s[2] - g.p[2] + k2 * g.d[2];
                    if (o0 < 0 || o0 >= out[0] || o1 < 0 || o1 >= out[1] || o2 < 0 || o2 >= out[2]) continue;
                    int64_t o = grp * Cog + ol;
                    y[size_t((((n * Cout + o) * out[0] + o0) * out[1] + o1) * out[2] + o2)] +=
                        xv * w[size_t((((ci * Cog + ol) * g.k[0] + k0) * g.k[1] + k1) * g.k[2] + k2)];
                  }
          }
  *out_shape = {N, Cout};
  for (size_t i = 3 - (xs.size() - 2); i < 3; ++i) out_shape->push_back(out[i]);
  return y;
}

}  // namespace

// ---------------------------------------------------------------------------- convolutions
TEST(CppApiNnMore, Conv1dAndConv3dMatchLoops) {
  ts::manual_seed(1);
  // Conv1d: stride 2, padding 1, dilation 2, two groups
  nn::Conv1d c1(4, 6, 3, {.stride = {2}, .padding = {1}, .dilation = {2}, .groups = 2});
  EXPECT_EQ(c1.weight().shape(), (Shape{6, 2, 3}));
  Shape xs1{2, 4, 11};
  Tensor x1 = from(randoms(numel(xs1), 3), xs1);
  Shape ys1;
  auto ref1 = conv_loop(x1.to_double_vector(), xs1, c1.weight().to_double_vector(), 6, c1.bias().to_double_vector(),
                        geometry({3}, {2}, {1}, {2}), 2, &ys1);
  Tensor y1 = c1(x1);
  EXPECT_EQ(y1.shape(), ys1);
  expect_close(y1, ref1, 1e-4);
  // unbatched (C, L)
  expect_close(c1(x1.select(0, 1)), std::vector<double>(ref1.begin() + long(ref1.size() / 2), ref1.end()), 1e-4);
  EXPECT_EQ(c1.repr(), "Conv1d(4, 6, kernel_size=(3,), stride=(2,), padding=(1,), dilation=(2,), groups=2)");

  // Conv3d: per-dim kernel, stride and padding, no bias
  nn::Conv3d c3(2, 3, {2, 3, 2}, {.stride = {1, 2, 1}, .padding = {1, 0, 1}, .bias = false});
  EXPECT_EQ(c3.weight().shape(), (Shape{3, 2, 2, 3, 2}));
  EXPECT_FALSE(c3.bias().defined());
  Shape xs3{2, 2, 3, 5, 4};
  Tensor x3 = from(randoms(numel(xs3), 4), xs3);
  Shape ys3;
  auto ref3 = conv_loop(x3.to_double_vector(), xs3, c3.weight().to_double_vector(), 3, {},
                        geometry({2, 3, 2}, {1, 2, 1}, {1, 0, 1}, {1, 1, 1}), 1, &ys3);
  Tensor y3 = c3(x3);
  EXPECT_EQ(y3.shape(), ys3);
  expect_close(y3, ref3, 1e-4);
  EXPECT_EQ(c3(x3.select(0, 0)).dim(), 4);

  // the input gradient of sum(conv(x) * r) is the transposed convolution of r with the same weight
  Tensor xg = x3.clone().requires_grad_();
  std::vector<double> r = randoms(ref3.size(), 5);
  (c3(xg) * from(r, ys3)).sum().backward();
  // output_padding makes the transposed geometry land on the input's size exactly
  Geometry g = geometry({2, 3, 2}, {1, 2, 1}, {1, 0, 1}, {1, 1, 1});
  auto in = spatial3(xs3), out = spatial3(ys3);
  for (int i = 0; i < 3; ++i) g.op[i] = in[i] - ((out[i] - 1) * g.s[i] - 2 * g.p[i] + (g.k[i] - 1) + 1);
  // conv weight (O, C, k) read as the transposed one (C_in = O, C_out = C)
  Shape gs;
  auto gref = conv_transpose_loop(r, ys3, c3.weight().to_double_vector(), 2, {}, g, 1, &gs);
  EXPECT_EQ(gs, xs3);
  expect_close(xg.grad(), gref, 1e-4);
  // the weight's gradient of sum(conv(x)) with no padding: the sum of the input patches
  nn::Conv3d plain(1, 1, 2, {.bias = false});
  Tensor ones_in = from(randoms(27, 6), {1, 1, 3, 3, 3});
  plain(ones_in).sum().backward();
  auto xv = ones_in.to_double_vector();
  std::vector<double> wg(8, 0.0);
  for (int k0 = 0; k0 < 2; ++k0)
    for (int k1 = 0; k1 < 2; ++k1)
      for (int k2 = 0; k2 < 2; ++k2)
        for (int a = 0; a < 2; ++a)
          for (int b = 0; b < 2; ++b)
            for (int c = 0; c < 2; ++c) wg[size_t(k0 * 4 + k1 * 2 + k2)] += xv[size_t((a + k0) * 9 + (b + k1) * 3 + c + k2)];
  expect_close(plain.weight().grad(), wg, 1e-4);
}

TEST(CppApiNnMore, ConvPaddingSameAndValid) {
  ts::manual_seed(3);
  // kernel (3, 4), dilation (2, 1): "same" pads H by 2 + 2 and W by 1 on the left, 2 on the right
  nn::Conv2d c(3, 4, {3, 4}, {.padding = nn::kSame, .dilation = {2, 1}});
  EXPECT_EQ(c.repr(), "Conv2d(3, 4, kernel_size=(3, 4), stride=(1, 1), padding=same, dilation=(2, 1))");
  const int64_t N = 2, C = 3, H = 5, W = 6;
  Tensor x = from(randoms(size_t(N * C * H * W), 8), {N, C, H, W});
  std::vector<double> xv = x.to_double_vector(), padded(size_t(N * C * (H + 4) * (W + 3)), 0.0);
  for (int64_t n = 0; n < N * C; ++n)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t w = 0; w < W; ++w) padded[size_t((n * (H + 4) + h + 2) * (W + 3) + w + 1)] = xv[size_t((n * H + h) * W + w)];
  Shape ys;
  auto ref = conv_loop(padded, {N, C, H + 4, W + 3}, c.weight().to_double_vector(), 4, c.bias().to_double_vector(),
                       geometry({3, 4}, {1, 1}, {0, 0}, {2, 1}), 1, &ys);
  EXPECT_EQ(ys, (Shape{N, 4, H, W}));
  Tensor y = c(x);
  EXPECT_EQ(y.shape(), ys);
  expect_close(y, ref, 1e-4);
  // gradients flow through the padding
  Tensor xg = x.clone().requires_grad_();
  c(xg).sum().backward();
  EXPECT_EQ(xg.grad().shape(), x.shape());

  // "valid" is no padding at all; "same" with a symmetric total is plain symmetric padding
  nn::Conv1d valid(3, 2, 3, {.padding = nn::kValid});
  Tensor x1 = from(randoms(3 * 7, 9), {1, 3, 7});
  Shape ys1;
  auto ref1 = conv_loop(x1.to_double_vector(), {1, 3, 7}, valid.weight().to_double_vector(), 2,
                        valid.bias().to_double_vector(), geometry({3}, {1}, {0}, {1}), 1, &ys1);
  expect_close(valid(x1), ref1, 1e-4);
  EXPECT_EQ(valid(x1).shape(), (Shape{1, 2, 5}));
  nn::Conv3d same3(1, 1, 3, {.padding = nn::kSame, .bias = false});
  EXPECT_EQ(same3(from(randoms(4 * 5 * 6, 10), {1, 1, 4, 5, 6})).shape(), (Shape{1, 1, 4, 5, 6}));

  expect_error<tessera::ValueError>([] { nn::Conv2d(3, 4, 3, {.stride = {2}, .padding = nn::kSame}); },
                                    {"Conv2d: padding='same' is not supported for strided convolutions", "stride=(2, 2)"});
}

TEST(CppApiNnMore, ConvTransposeMatchesScatterLoops) {
  ts::manual_seed(2);
  {  // 1-D: stride 3, padding 1, output_padding 2, groups 2
    nn::ConvTranspose1d m(4, 6, 3, {.stride = {3}, .padding = {1}, .output_padding = {2}, .groups = 2});
    EXPECT_EQ(m.weight().shape(), (Shape{4, 3, 3}));
    Shape xs{2, 4, 5};
    Tensor x = from(randoms(numel(xs), 7), xs);
    Shape ys;
    auto ref = conv_transpose_loop(x.to_double_vector(), xs, m.weight().to_double_vector(), 6,
                                   m.bias().to_double_vector(), geometry({3}, {3}, {1}, {1}, {2}), 2, &ys);
    EXPECT_EQ(ys, (Shape{2, 6, 15}));
    Tensor y = m(x);
    EXPECT_EQ(y.shape(), ys);
    expect_close(y, ref, 1e-4);
    EXPECT_EQ(m.repr(), "ConvTranspose1d(4, 6, kernel_size=(3,), stride=(3,), padding=(1,), output_padding=(2,), groups=2)");
  }
  {  // 2-D: stride 2, dilation 2; the input gradient of sum(y * r) is conv2d(r) with the same weight
    nn::ConvTranspose2d m(3, 2, {3, 2}, {.stride = {2}, .padding = {1, 0}, .dilation = {2, 1}});
    Shape xs{2, 3, 4, 3};
    Tensor x = from(randoms(numel(xs), 8), xs).requires_grad_();
    Shape ys;
    auto ref = conv_transpose_loop(x.to_double_vector(), xs, m.weight().to_double_vector(), 2,
                                   m.bias().to_double_vector(), geometry({3, 2}, {2, 2}, {1, 0}, {2, 1}), 1, &ys);
    Tensor y = m(x);
    EXPECT_EQ(y.shape(), ys);
    expect_close(y, ref, 1e-4);
    std::vector<double> r = randoms(ref.size(), 9);
    (y * from(r, ys)).sum().backward();
    Shape gs;
    auto gref = conv_loop(r, ys, m.weight().to_double_vector(), 3, {}, geometry({3, 2}, {2, 2}, {1, 0}, {2, 1}), 1, &gs);
    EXPECT_EQ(gs, xs);
    expect_close(x.grad(), gref, 1e-4);
    // the bias gradient: the sum of r over everything but the channel
    std::vector<double> bg(2, 0.0);
    int64_t plane = ys[2] * ys[3];
    for (size_t i = 0; i < r.size(); ++i) bg[size_t((int64_t(i) / plane) % 2)] += r[i];
    expect_close(m.bias().grad(), bg, 1e-4);
  }
  {  // 3-D, unbatched
    nn::ConvTranspose3d m(2, 2, 2, {.stride = {2, 1, 1}, .bias = false});
    Shape xs{1, 2, 2, 3, 2};
    Tensor x = from(randoms(numel(xs), 10), xs);
    Shape ys;
    auto ref = conv_transpose_loop(x.to_double_vector(), xs, m.weight().to_double_vector(), 2, {},
                                   geometry({2, 2, 2}, {2, 1, 1}, {0, 0, 0}, {1, 1, 1}), 1, &ys);
    Tensor y = m(x.select(0, 0));
    EXPECT_EQ(y.shape(), Shape(ys.begin() + 1, ys.end()));
    expect_close(y, ref, 1e-4);
  }
}

TEST(CppApiNnMore, ConvBadInputNamesModuleExpectedAndGot) {
  nn::Conv3d c3(2, 4, 3);
  expect_error<ts::ValueError>([&] { c3(ts::zeros({1, 3, 5, 5, 5})); },
                               {"Conv3d", "expected input with 2 channels", "got 3 channels"});
  expect_error<ts::ValueError>([&] { c3(ts::zeros({2, 5, 5})); }, {"Conv3d", "4-D (unbatched) or 5-D", "got 3-D"});
  nn::Conv1d c1(3, 4, 2);
  expect_error<ts::ValueError>([&] { c1(ts::zeros({2, 5, 7})); }, {"Conv1d", "3 channels", "got 5"});
  nn::ConvTranspose2d t2(4, 2, 3);
  expect_error<ts::ValueError>([&] { t2(ts::zeros({1, 3, 4, 4})); }, {"ConvTranspose2d", "4 channels", "got 3"});
  expect_error<ts::ValueError>([] { nn::ConvTranspose1d(2, 2, 3, {.stride = {2}, .output_padding = {2}}); },
                               {"ConvTranspose1d", "output_padding", "smaller"});
  expect_error<ts::ValueError>([] { nn::Conv3d(2, 4, {3, 3}); }, {"Conv3d", "kernel_size", "1 or 3 values", "got 2"});
  expect_error<ts::ValueError>([] { nn::Conv1d(3, 4, 3, {.groups = 2}); }, {"Conv1d", "in_channels (3)", "groups (2)"});
}

// ---------------------------------------------------------------------------- pooling
namespace {

// Pooling windows over the last two dims of (P, H, W) planes: max or average.
std::vector<double> pool_loop(const std::vector<double>& x, int64_t P, int64_t H, int64_t W, Shape k, Shape s, Shape p,
                              bool is_max, bool count_include_pad, Shape* out_hw, bool ceil_mode = false) {
  auto out_size = [&](int64_t in, int i) {
    int64_t num = in + 2 * p[size_t(i)] - k[size_t(i)];
    int64_t o = (ceil_mode ? (num + s[size_t(i)] - 1) / s[size_t(i)] : num / s[size_t(i)]) + 1;
    if (ceil_mode && (o - 1) * s[size_t(i)] >= in + p[size_t(i)]) --o;  // the last window must start inside
    return o;
  };
  int64_t OH = out_size(H, 0), OW = out_size(W, 1);
  *out_hw = {OH, OW};
  std::vector<double> y;
  for (int64_t pl = 0; pl < P; ++pl)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        double best = -INFINITY, sum = 0;
        int64_t count = 0;
        int64_t h0 = oh * s[0] - p[0], w0 = ow * s[1] - p[1];
        int64_t h1 = std::min(h0 + k[0], H + p[0]), w1 = std::min(w0 + k[1], W + p[1]);
        int64_t padded = (h1 - h0) * (w1 - w0);
        for (int64_t h = h0; h < h0 + k[0]; ++h)
          for (int64_t w = w0; w < w0 + k[1]; ++w) {
            if (h < 0 || h >= H || w < 0 || w >= W) continue;
            double v = x[size_t((pl * H + h) * W + w)];
            best = std::max(best, v);
            sum += v;
            ++count;
          }
        y.push_back(is_max ? best : sum / double(count_include_pad ? padded : count));
      }
  return y;
}

}  // namespace

TEST(CppApiNnMore, PoolingMatchesWindowLoops) {
  Shape xs{2, 3, 7, 6};
  std::vector<double> xv = randoms(numel(xs), 11);
  Tensor x = from(xv, xs);
  Shape hw;
  // MaxPool2d 3x2, stride (2, 2), padding (1, 0)
  auto ref = pool_loop(xv, 6, 7, 6, {3, 2}, {2, 2}, {1, 0}, true, true, &hw);
  nn::MaxPool2d mp({3, 2}, {.stride = {2}, .padding = {1, 0}});
  Tensor y = mp(x);
  EXPECT_EQ(y.shape(), (Shape{2, 3, hw[0], hw[1]}));
  expect_close(y, ref);
  // ceil_mode keeps a partial last window
  auto refc = pool_loop(xv, 6, 7, 6, {2, 2}, {2, 2}, {0, 0}, true, true, &hw, true);
  Tensor yc = nn::MaxPool2d(2, {.ceil_mode = true})(x);
  EXPECT_EQ(yc.shape(), (Shape{2, 3, 4, 3}));
  expect_close(yc, refc);
  // gradient: each window's argmax receives its output's gradient (windows do not overlap here)
  Tensor xg = x.clone().requires_grad_();
  nn::MaxPool2d(2)(xg).sum().backward();
  std::vector<double> g(xv.size(), 0.0);
  for (int64_t pl = 0; pl < 6; ++pl)
    for (int64_t oh = 0; oh < 3; ++oh)
      for (int64_t ow = 0; ow < 3; ++ow) {
        size_t arg = 0;
        double best = -INFINITY;
        for (int64_t h = oh * 2; h < oh * 2 + 2; ++h)
          for (int64_t w = ow * 2; w < ow * 2 + 2; ++w) {
            size_t i = size_t((pl * 7 + h) * 6 + w);
            if (xv[i] > best) best = xv[i], arg = i;
          }
        g[arg] += 1;
      }
  expect_close(xg.grad(), g);
  auto [values, indices] = mp.forward_with_indices(x);
  EXPECT_EQ(indices.dtype(), ts::kInt64);
  // each index is the flat (h * W + w) position of its window's max within its plane
  auto iv = indices.to_double_vector(), vv = values.to_double_vector();
  ASSERT_EQ(indices.shape(), values.shape());
  size_t per_plane = iv.size() / 6;
  for (size_t i = 0; i < iv.size(); ++i) EXPECT_EQ(vv[i], float(xv[(i / per_plane) * 42 + size_t(iv[i])]));

  // AvgPool2d with padding, counting the padding or not, and divisor_override
  for (bool include : {true, false}) {
    auto refa = pool_loop(xv, 6, 7, 6, {3, 3}, {2, 2}, {1, 1}, false, include, &hw);
    Tensor ya = nn::AvgPool2d(3, {.stride = {2}, .padding = {1}, .count_include_pad = include})(x);
    EXPECT_EQ(ya.shape(), (Shape{2, 3, hw[0], hw[1]}));
    expect_close(ya, refa);
  }
  auto refs = pool_loop(xv, 6, 7, 6, {2, 2}, {2, 2}, {0, 0}, false, true, &hw);
  for (double& v : refs) v *= 4.0 / 3.0;  // sum / 3 instead of sum / 4
  expect_close(nn::AvgPool2d(2, {.divisor_override = 3})(x), refs);

  // 1-D: the same windows over (N, C, L) with a size-1 height
  Shape ls{2, 3, 9};
  std::vector<double> lv = randoms(numel(ls), 12);
  auto ref1 = pool_loop(lv, 6, 1, 9, {1, 3}, {1, 2}, {0, 1}, true, true, &hw);
  Tensor y1 = nn::MaxPool1d(3, {.stride = {2}, .padding = {1}})(from(lv, ls));
  EXPECT_EQ(y1.shape(), (Shape{2, 3, hw[1]}));
  expect_close(y1, ref1);
  auto refa1 = pool_loop(lv, 6, 1, 9, {1, 4}, {1, 4}, {0, 0}, false, true, &hw);
  expect_close(nn::AvgPool1d(4)(from(lv, ls)), refa1);
  EXPECT_EQ(nn::AvgPool1d(4)(from(lv, ls).select(0, 0)).shape(), (Shape{3, 2}));

  expect_error<ts::ValueError>([&] { mp(ts::zeros({5, 5})); }, {"MaxPool2d", "3-D (C, H, W) or 4-D", "got 2-D"});
  expect_error<ts::ValueError>([&] { nn::MaxPool1d(2)(ts::zeros({1, 2, 3, 4})); }, {"MaxPool1d", "got 4-D"});
  expect_error<ts::ValueError>([] { nn::MaxPool2d(2, {.padding = {2}}); }, {"MaxPool2d", "pad should be at most half"});
}

TEST(CppApiNnMore, AdaptiveAvgPool2dMatchesWindowsAndGradient) {
  Shape xs{2, 2, 7, 5};
  std::vector<double> xv = randoms(numel(xs), 13);
  Tensor x = from(xv, xs).requires_grad_();
  int64_t OH = 3, OW = 2;
  nn::AdaptiveAvgPool2d pool({OH, OW});
  Tensor y = pool(x);
  EXPECT_EQ(y.shape(), (Shape{2, 2, 3, 2}));
  // windows [floor(i H / OH), ceil((i + 1) H / OH))
  std::vector<double> ref, g(xv.size(), 0.0);
  for (int64_t pl = 0; pl < 4; ++pl)
    for (int64_t i = 0; i < OH; ++i)
      for (int64_t j = 0; j < OW; ++j) {
        int64_t h0 = i * 7 / OH, h1 = ((i + 1) * 7 + OH - 1) / OH, w0 = j * 5 / OW, w1 = ((j + 1) * 5 + OW - 1) / OW;
        double sum = 0, n = double((h1 - h0) * (w1 - w0));
        for (int64_t h = h0; h < h1; ++h)
          for (int64_t w = w0; w < w1; ++w) {
            sum += xv[size_t((pl * 7 + h) * 5 + w)];
            g[size_t((pl * 7 + h) * 5 + w)] += 1 / n;
          }
        ref.push_back(sum / n);
      }
  expect_close(y, ref);
  y.sum().backward();
  expect_close(x.grad(), g);
  EXPECT_EQ(nn::AdaptiveAvgPool2d(1)(x).shape(), (Shape{2, 2, 1, 1}));
  EXPECT_THROW(nn::AdaptiveAvgPool2d(0), ts::ValueError);
}

// ---------------------------------------------------------------------------- normalization
TEST(CppApiNnMore, BatchNorm1dMatchesFormula) {
  for (Shape xs : {Shape{6, 3}, Shape{4, 3, 5}}) {
    nn::BatchNorm1d bn(3, {.momentum = 0.2});
    std::vector<double> xv = randoms(numel(xs), 14);
    Tensor x = from(xv, xs);
    auto yv = bn(x).to_double_vector();
    int64_t N = xs[0], L = xs.size() == 3 ? xs[2] : 1;
    std::vector<double> rm, rv;
    for (int64_t c = 0; c < 3; ++c) {
      std::vector<size_t> idx;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t l = 0; l < L; ++l) idx.push_back(size_t((n * 3 + c) * L + l));
      double mean = 0, var = 0;
      for (size_t i : idx) mean += xv[i];
      mean /= double(idx.size());
      for (size_t i : idx) var += (xv[i] - mean) * (xv[i] - mean);
      for (size_t i : idx) EXPECT_NEAR(yv[i], (xv[i] - mean) / std::sqrt(var / double(idx.size()) + 1e-5), 1e-4);
      rm.push_back(0.2 * mean);
      rv.push_back(0.8 + 0.2 * var / double(idx.size() - 1));
    }
    expect_close(bn.running_mean(), rm);
    expect_close(bn.running_var(), rv);
    bn.eval();
    auto ye = bn(x).to_double_vector();
    for (size_t i = 0; i < xv.size(); ++i) {
      size_t c = size_t((int64_t(i) / L) % 3);
      EXPECT_NEAR(ye[i], (xv[i] - rm[c]) / std::sqrt(rv[c] + 1e-5), 1e-4);
    }
  }
  nn::BatchNorm1d bn(3);
  expect_error<ts::ValueError>([&] { bn(ts::zeros({4, 5})); }, {"BatchNorm1d", "expected 3 channels", "got 5"});
  expect_error<ts::ValueError>([&] { bn(ts::zeros({2, 3, 4, 4})); }, {"BatchNorm1d", "2D (N, C) or 3D", "got 4D"});
  EXPECT_EQ(bn.repr(), "BatchNorm1d(3, eps=1e-05, momentum=0.1, affine=true, track_running_stats=true)");
}

TEST(CppApiNnMore, GroupNormMatchesFormulaAndGradient) {
  nn::GroupNorm gn(2, 6, {.eps = 1e-3});
  std::vector<double> wv = {0.5, 1, 1.5, 2, -1, 0.25}, bv = {0, 0.1, 0.2, -0.3, 1, 2};
  {
    ts::autograd::NoGradGuard no_grad;
    gn.weight().copy_(from(wv, {6}));
    gn.bias().copy_(from(bv, {6}));
  }
  Shape xs{2, 6, 2, 3};
  std::vector<double> xv = randoms(numel(xs), 15);
  Tensor y = gn(from(xv, xs));
  std::vector<double> ref(xv.size());
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t grp = 0; grp < 2; ++grp) {
      size_t begin = size_t((n * 6 + grp * 3) * 6), len = 18;
      double mean = 0, var = 0;
      for (size_t i = begin; i < begin + len; ++i) mean += xv[i];
      mean /= double(len);
      for (size_t i = begin; i < begin + len; ++i) var += (xv[i] - mean) * (xv[i] - mean);
      var /= double(len);
      for (size_t i = begin; i < begin + len; ++i) {
        size_t c = (i / 6) % 6;
        ref[i] = (xv[i] - mean) / std::sqrt(var + 1e-3) * wv[c] + bv[c];
      }
    }
  expect_close(y, ref, 1e-4);
  // d sum(y * r) / d bias_c = sum of r over channel c; / d weight_c = sum of r * x_hat over channel c
  std::vector<double> r = randoms(xv.size(), 16);
  (y * from(r, xs)).sum().backward();
  std::vector<double> gb(6, 0.0), gw(6, 0.0);
  for (size_t i = 0; i < r.size(); ++i) {
    size_t c = (i / 6) % 6;
    gb[c] += r[i];
    gw[c] += r[i] * (ref[i] - bv[c]) / wv[c];
  }
  expect_close(gn.bias().grad(), gb, 1e-4);
  expect_close(gn.weight().grad(), gw, 1e-4);
  expect_error<ts::ValueError>([&] { gn(ts::zeros({2, 4, 3})); }, {"GroupNorm", "expected 6 channels", "got 4"});
  expect_error<ts::ValueError>([] { nn::GroupNorm(4, 6); }, {"GroupNorm", "num_channels (6)", "num_groups (4)"});
}

// ---------------------------------------------------------------------------- containers
TEST(CppApiNnMore, ModuleListRegistersAndIterates) {
  nn::ModuleList list(nn::Linear(3, 4), nn::ReLU());
  list.push_back(std::make_shared<nn::Linear>(4, 2));
  EXPECT_EQ(list.size(), 3u);
  std::vector<std::string> names;
  for (auto& [n, t] : list.named_parameters()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"}));
  Tensor x = seq({5, 3});
  Tensor h = x;
  for (const auto& m : list) h = (*m)(h);
  auto l0 = list.at<nn::Linear>(0), l2 = list.at<nn::Linear>(2);
  Tensor ref = F::linear(F::linear(x, l0->weight(), l0->bias()).relu(), l2->weight(), l2->bias());
  expect_close(h, ref.to_double_vector());
  nn::ModuleList more;
  more.extend(list);
  EXPECT_EQ(more.size(), 3u);
  EXPECT_EQ(more[0].get(), list[0].get());  // shared, not copied
  list.eval();
  EXPECT_FALSE(list[1]->is_training());
  expect_error<ts::NotImplementedError>([&] { list(x); }, {"ModuleList", "no forward"});
  expect_error<ts::IndexError>([&] { list[3]; }, {"ModuleList", "index 3", "3 modules"});
  expect_error<ts::TypeError>([&] { list.at<nn::Linear>(1); }, {"ModuleList", "module 1", "ReLU"});
}

// ---------------------------------------------------------------------------- activations
TEST(CppApiNnMore, ActivationsMatchFormulasAndDerivatives) {
  std::vector<double> xv = {-2, -0.5, 0.25, 1.5, 3};
  auto check = [&](nn::Module& m, auto f, auto df, const char* what) {
    Tensor x = from(xv, {5}, ts::kFloat64).requires_grad_();
    Tensor y = m(x);
    std::vector<double> ref, dref;
    for (double v : xv) ref.push_back(f(v)), dref.push_back(df(v));
    expect_close(y, ref, 1e-12);
    y.sum().backward();
    SCOPED_TRACE(what);
    expect_close(x.grad(), dref, 1e-12);
  };
  nn::LeakyReLU leaky(0.2);
  check(leaky, [](double v) { return v > 0 ? v : 0.2 * v; }, [](double v) { return v > 0 ? 1.0 : 0.2; }, "LeakyReLU");
  nn::SiLU silu;
  auto sig = [](double v) { return 1 / (1 + std::exp(-v)); };
  check(silu, [&](double v) { return v * sig(v); }, [&](double v) { return sig(v) * (1 + v * (1 - sig(v))); }, "SiLU");
  nn::ELU elu(0.7);
  check(elu, [](double v) { return v > 0 ? v : 0.7 * (std::exp(v) - 1); },
        [](double v) { return v > 0 ? 1.0 : 0.7 * std::exp(v); }, "ELU");
  EXPECT_EQ(leaky.repr(), "LeakyReLU(negative_slope=0.2)");
  EXPECT_EQ(nn::LeakyReLU()(from({-1}, {1})).to_double_vector()[0], -0.01f);

  // Softmax / LogSoftmax along dim 0 of a (3, 2) input
  std::vector<double> m = {1, -1, 2, 0.5, -3, 4};
  Tensor x = from(m, {3, 2}, ts::kFloat64);
  std::vector<double> sm(6), lsm(6);
  for (int c = 0; c < 2; ++c) {
    double z = 0;
    for (int r = 0; r < 3; ++r) z += std::exp(m[size_t(r * 2 + c)]);
    for (int r = 0; r < 3; ++r) {
      sm[size_t(r * 2 + c)] = std::exp(m[size_t(r * 2 + c)]) / z;
      lsm[size_t(r * 2 + c)] = m[size_t(r * 2 + c)] - std::log(z);
    }
  }
  expect_close(nn::Softmax(0)(x), sm, 1e-12);
  expect_close(nn::LogSoftmax(0)(x), lsm, 1e-12);
  expect_close(nn::LogSoftmax(-2)(x), lsm, 1e-12);
  expect_error<ts::IndexError>([&] { nn::Softmax(2)(x); }, {"Softmax", "dim 2", "2-D input"});
}

// ---------------------------------------------------------------------------- losses
TEST(CppApiNnMore, RegressionLossModulesMatchLoops) {
  std::vector<double> a = {0.5, -1, 2, 3, 0, -2}, b = {1, 1, 1, -1, 0.5, -2};
  Tensor x = from(a, {2, 3}, ts::kFloat64), y = from(b, {2, 3}, ts::kFloat64);
  double se = 0, ae = 0;
  std::vector<double> sq, ab;
  for (size_t i = 0; i < 6; ++i) {
    se += (a[i] - b[i]) * (a[i] - b[i]);
    ae += std::abs(a[i] - b[i]);
    sq.push_back((a[i] - b[i]) * (a[i] - b[i]));
    ab.push_back(std::abs(a[i] - b[i]));
  }
  expect_close(nn::MSELoss()(x, y), {se / 6}, 1e-12);
  expect_close(nn::MSELoss({.reduction = nn::Reduction::Sum})(x, y), {se}, 1e-12);
  expect_close(nn::MSELoss({.reduction = nn::Reduction::None})(x, y), sq, 1e-12);
  expect_close(nn::L1Loss()(x, y), {ae / 6}, 1e-12);
  expect_close(nn::L1Loss({.reduction = nn::Reduction::None})(x, y), ab, 1e-12);
  Tensor xg = x.clone().requires_grad_();
  nn::MSELoss()(xg, y).backward();
  std::vector<double> g;
  for (size_t i = 0; i < 6; ++i) g.push_back(2 * (a[i] - b[i]) / 6);
  expect_close(xg.grad(), g, 1e-12);
  expect_error<ts::ValueError>([&] { nn::MSELoss()(x, ts::zeros({3, 2}, ts::kFloat64)); },
                               {"MSELoss", "[2, 3]", "[3, 2]"});
  expect_error<ts::NotImplementedError>([&] { nn::L1Loss().forward(x); }, {"L1Loss", "(input, target)"});
  EXPECT_EQ(nn::MSELoss({.reduction = nn::Reduction::Sum}).repr(), "MSELoss(reduction=sum)");
}

TEST(CppApiNnMore, ClassificationLossModulesMatchTorchFormulas) {
  // logits (4, 3), targets with one ignored, per-class weights
  std::vector<double> z = {1, 2, 0.5, -1, 0, 3, 0.2, 0.2, -0.4, 2, -2, 1};
  std::vector<int64_t> t = {1, 2, -100, 0};
  std::vector<double> w = {0.5, 2.0, 1.5};
  Tensor logits = from(z, {4, 3}, ts::kFloat64);
  Tensor target = ts::tensor_from_values(std::vector<double>(t.begin(), t.end()), {4}, ts::kInt64);
  Tensor weight = from(w, {3}, ts::kFloat64);
  auto logp = [&](size_t r, size_t c) {
    double s = 0;
    for (size_t k = 0; k < 3; ++k) s += std::exp(z[r * 3 + k]);
    return z[r * 3 + c] - std::log(s);
  };
  for (double ls : {0.0, 0.2}) {
    // torch: (1 - ls) * nll + ls / C * smooth, each normalised by the sum of the kept targets' weights
    double nll = 0, smooth = 0, wsum = 0, nll_unw = 0, smooth_unw = 0;
    std::vector<double> per(4, 0.0);
    for (size_t r = 0; r < 4; ++r) {
      if (t[r] == -100) continue;
      size_t c = size_t(t[r]);
      nll += -w[c] * logp(r, c);
      nll_unw += -logp(r, c);
      wsum += w[c];
      double sm = 0, sm_unw = 0;
      for (size_t k = 0; k < 3; ++k) sm += -w[k] * logp(r, k), sm_unw += -logp(r, k);
      smooth += sm;
      smooth_unw += sm_unw;
      per[r] = (1 - ls) * -w[c] * logp(r, c) + ls / 3 * sm;
    }
    SCOPED_TRACE(ls);
    nn::CrossEntropyLoss ce({.weight = weight, .label_smoothing = ls});
    expect_close(ce(logits, target), {(1 - ls) * nll / wsum + ls / 3 * smooth / wsum}, 1e-12);
    nn::CrossEntropyLoss ce_unw({.label_smoothing = ls});
    expect_close(ce_unw(logits, target), {((1 - ls) * nll_unw + ls / 3 * smooth_unw) / 3}, 1e-12);
    nn::CrossEntropyLoss ce_none({.weight = weight, .reduction = nn::Reduction::None, .label_smoothing = ls});
    expect_close(ce_none(logits, target), per, 1e-12);
    // gradient (unweighted, mean over the 3 kept rows): (softmax - ((1 - ls) onehot + ls / C)) / 3
    Tensor zg = logits.clone().requires_grad_();
    ce_unw(zg, target).backward();
    std::vector<double> g(12, 0.0);
    for (size_t r = 0; r < 4; ++r) {
      if (t[r] == -100) continue;
      for (size_t k = 0; k < 3; ++k)
        g[r * 3 + k] = (std::exp(logp(r, k)) - ((1 - ls) * (int64_t(k) == t[r]) + ls / 3)) / 3;
    }
    expect_close(zg.grad(), g, 1e-12);
  }
  // NLLLoss on log-probabilities, weight and ignore_index
  nn::NLLLoss nll({.weight = weight, .ignore_index = 2});
  double num = 0, den = 0;
  for (size_t r = 0; r < 4; ++r) {
    if (t[r] == 2 || t[r] == -100) continue;
    num += -w[size_t(t[r])] * logp(r, size_t(t[r]));
    den += w[size_t(t[r])];
  }
  Tensor t2 = ts::tensor_from_values(std::vector<double>{1, 2, 0, 0}, {4}, ts::kInt64);
  // rows 0, 2, 3 kept (row 1 is class 2, ignored); row 2 now has target 0
  num = -w[1] * logp(0, 1) - w[0] * logp(2, 0) - w[0] * logp(3, 0);
  den = w[1] + w[0] + w[0];
  expect_close(nll(logits.log_softmax(1), t2), {num / den}, 1e-12);
  EXPECT_EQ(nll.buffers().size(), 1u);  // the weight is a buffer

  // bad input: a class weight of the wrong size, a batch mismatch
  nn::CrossEntropyLoss bad({.weight = from({1, 1}, {2}, ts::kFloat64)});
  expect_error<ts::ValueError>([&] { bad(logits, target); }, {"CrossEntropyLoss", "weight of 3 elements", "[2]"});
  expect_error<ts::ValueError>([&] { nn::CrossEntropyLoss()(logits, ts::zeros({5}, ts::kInt64)); },
                               {"batch_size (4)", "batch_size (5)"});
  expect_error<ts::ValueError>([] { nn::CrossEntropyLoss({.label_smoothing = 1.5}); },
                               {"CrossEntropyLoss", "label_smoothing", "1.5"});
}

TEST(CppApiNnMore, BCEWithLogitsLossMatchesFormulaAndGradient) {
  std::vector<double> x = {0.3, -1.2, 2.5, -0.1, 4.0, -3.0}, y = {1, 0, 1, 0.25, 0, 1}, w = {1, 2, 0.5, 1, 1, 3},
                      pw = {2.0, 0.5, 1.0};  // per class, the last dim
  Tensor xt = from(x, {2, 3}, ts::kFloat64).requires_grad_(), yt = from(y, {2, 3}, ts::kFloat64);
  nn::BCEWithLogitsLoss loss({.weight = from(w, {2, 3}, ts::kFloat64), .pos_weight = from(pw, {3}, ts::kFloat64)});
  auto sig = [](double v) { return 1 / (1 + std::exp(-v)); };
  double total = 0;
  std::vector<double> g;
  for (size_t i = 0; i < 6; ++i) {
    double p = pw[i % 3], s = sig(x[i]);
    total += -w[i] * (p * y[i] * std::log(s) + (1 - y[i]) * std::log(1 - s));
    g.push_back(w[i] * ((p * y[i] + 1 - y[i]) * s - p * y[i]) / 6);
  }
  Tensor l = loss(xt, yt);
  expect_close(l, {total / 6}, 1e-12);
  l.backward();
  expect_close(xt.grad(), g, 1e-12);
  EXPECT_EQ(loss.named_buffers().size(), 2u);
  expect_close(nn::BCEWithLogitsLoss({.reduction = nn::Reduction::Sum})(from({0.0}, {1}), from({1.0}, {1})),
               {std::log(2.0)}, 1e-6);
  expect_error<ts::ValueError>([&] { loss(xt, ts::zeros({6}, ts::kFloat64)); },
                               {"BCEWithLogitsLoss", "[2, 3]", "[6]"});
}

// ---------------------------------------------------------------------------- recurrent layers
namespace {

double sigm(double v) { return 1 / (1 + std::exp(-v)); }

// One layer and direction in scalar loops: x [T][N][I] (flat), weights flat as the module's.
// Returns out [T][N][P]; h [N][P], c [N][H] updated to the final states. An LSTM with w_hr
// (P x H) projects each step's h to P values; without, P = H.
std::vector<double> cell_loop(const std::string& mode, const std::vector<double>& x, int64_t T, int64_t N, int64_t I,
                              int64_t H, const std::vector<double>& w_ih, const std::vector<double>& w_hh,
                              const std::vector<double>& b_ih, const std::vector<double>& b_hh, std::vector<double>& h,
                              std::vector<double>& c, bool reverse, const std::vector<double>& w_hr = {}) {
  int64_t G = mode == "LSTM" ? 4 : mode == "GRU" ? 3 : 1;
  const int64_t P = w_hr.empty() ? H : int64_t(w_hr.size()) / H;
  std::vector<double> out(size_t(T * N * P));
  for (int64_t s = 0; s < T; ++s) {
    int64_t t = reverse ? T - 1 - s : s;
    std::vector<double> hn(size_t(N * H)), cn(c.size());
    for (int64_t n = 0; n < N; ++n) {
      std::vector<double> xi(size_t(G * H)), hh(size_t(G * H));
      for (int64_t r = 0; r < G * H; ++r) {
        double a = b_ih.empty() ? 0 : b_ih[size_t(r)], b = b_hh.empty() ? 0 : b_hh[size_t(r)];
        for (int64_t k = 0; k < I; ++k) a += w_ih[size_t(r * I + k)] * x[size_t((t * N + n) * I + k)];
        for (int64_t k = 0; k < P; ++k) b += w_hh[size_t(r * P + k)] * h[size_t(n * P + k)];
        xi[size_t(r)] = a;
        hh[size_t(r)] = b;
      }
      for (int64_t j = 0; j < H; ++j) {
        auto at = [&](const std::vector<double>& v, int64_t gate) { return v[size_t(gate * H + j)]; };
        size_t o = size_t(n * H + j);
        if (mode == "LSTM") {
          double i = sigm(at(xi, 0) + at(hh, 0)), f = sigm(at(xi, 1) + at(hh, 1)), g = std::tanh(at(xi, 2) + at(hh, 2)),
                 og = sigm(at(xi, 3) + at(hh, 3));
          cn[o] = f * c[o] + i * g;
          hn[o] = og * std::tanh(cn[o]);
        } else if (mode == "GRU") {
          double r = sigm(at(xi, 0) + at(hh, 0)), z = sigm(at(xi, 1) + at(hh, 1)),
                 nn_ = std::tanh(at(xi, 2) + r * at(hh, 2));
          hn[o] = (1 - z) * nn_ + z * h[o];
        } else {
          hn[o] = std::tanh(at(xi, 0) + at(hh, 0));
        }
      }
    }
    if (!w_hr.empty()) {  // h = w_hr @ (o * tanh(c))
      std::vector<double> projected(size_t(N * P), 0.0);
      for (int64_t n = 0; n < N; ++n)
        for (int64_t q = 0; q < P; ++q)
          for (int64_t j = 0; j < H; ++j) projected[size_t(n * P + q)] += w_hr[size_t(q * H + j)] * hn[size_t(n * H + j)];
      hn = projected;
    }
    for (int64_t n = 0; n < N; ++n)
      for (int64_t q = 0; q < P; ++q) out[size_t((t * N + n) * P + q)] = hn[size_t(n * P + q)];
    h = hn;
    if (mode == "LSTM") c = cn;
  }
  return out;
}

// The whole module in scalar loops: x time-major [T][N][I]; h0/c0 [L * D][N][H].
struct RnnRef {
  std::vector<double> out, h_n, c_n;
};
RnnRef rnn_loop(const std::string& mode, const nn::RNNBase& m, const std::vector<double>& x, int64_t T, int64_t N,
                int64_t layers, bool bidir, std::vector<double> h0, std::vector<double> c0) {
  int64_t H = m.hidden_size(), D = bidir ? 2 : 1, I = m.input_size();
  const int64_t P = m.proj_size() > 0 ? m.proj_size() : H;  // h's width
  auto weights = m.all_weights();
  std::vector<double> in = x;
  RnnRef ref;
  for (int64_t l = 0; l < layers; ++l) {
    std::vector<std::vector<double>> outs;
    for (int64_t d = 0; d < D; ++d) {
      auto& w = weights[size_t(l * D + d)];
      std::vector<double> h(h0.begin() + long((l * D + d) * N * P), h0.begin() + long((l * D + d + 1) * N * P));
      std::vector<double> c = mode == "LSTM" ? std::vector<double>(c0.begin() + long((l * D + d) * N * H),
                                                                    c0.begin() + long((l * D + d + 1) * N * H))
                                             : std::vector<double>();
      outs.push_back(cell_loop(mode, in, T, N, I, H, w[0].to_double_vector(), w[1].to_double_vector(),
                               w[2].defined() ? w[2].to_double_vector() : std::vector<double>(),
                               w[3].defined() ? w[3].to_double_vector() : std::vector<double>(), h, c, d == 1,
                               w.size() > 4 ? w[4].to_double_vector() : std::vector<double>()));
      ref.h_n.insert(ref.h_n.end(), h.begin(), h.end());
      ref.c_n.insert(ref.c_n.end(), c.begin(), c.end());
    }
    in.assign(size_t(T * N * P * D), 0.0);  // concatenate the directions on the last dim
    for (int64_t r = 0; r < T * N; ++r)
      for (int64_t d = 0; d < D; ++d)
        for (int64_t j = 0; j < P; ++j) in[size_t((r * D + d) * P + j)] = outs[size_t(d)][size_t(r * P + j)];
    I = P * D;
  }
  ref.out = in;
  return ref;
}

// (N, T, F) <-> (T, N, F) of flat data.
std::vector<double> swap01(const std::vector<double>& v, int64_t A, int64_t B, int64_t F) {
  std::vector<double> out(v.size());
  for (int64_t a = 0; a < A; ++a)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t f = 0; f < F; ++f) out[size_t((b * A + a) * F + f)] = v[size_t((a * B + b) * F + f)];
  return out;
}

}  // namespace

// float32 runs the fused _rnn_layer operator, float64 the step-by-step path: both against loops.
TEST(CppApiNnMore, LstmGruRnnMatchGateEquations) {
  int64_t T = 4, N = 3, I = 5, H = 4, L = 2;
  for (auto dt : {ts::kFloat32, ts::kFloat64}) {
    for (const std::string mode : {"LSTM", "GRU", "RNN"}) {
      for (bool batch_first : {false, true}) {
        SCOPED_TRACE(mode + (dt == ts::kFloat32 ? " float32" : " float64") + (batch_first ? " batch_first" : ""));
        ts::manual_seed(20);
        nn::RNNOptions o{.num_layers = L, .batch_first = batch_first, .bidirectional = true, .dtype = dt};
        std::unique_ptr<nn::RNNBase> m;
        if (mode == "LSTM") m = std::make_unique<nn::LSTM>(I, H, o);
        else if (mode == "GRU") m = std::make_unique<nn::GRU>(I, H, o);
        else m = std::make_unique<nn::RNN>(I, H, o);
        EXPECT_EQ(m->parameters().size(), size_t(L * 2 * 4));
        std::vector<double> x = randoms(size_t(T * N * I), 21), h0 = randoms(size_t(L * 2 * N * H), 22),
                            c0 = randoms(size_t(L * 2 * N * H), 23);
        RnnRef ref = rnn_loop(mode, *m, x, T, N, L, true, h0, c0);
        Tensor xt = batch_first ? from(swap01(x, T, N, I), {N, T, I}, dt) : from(x, {T, N, I}, dt);
        Tensor h0t = from(h0, {L * 2, N, H}, dt), c0t = from(c0, {L * 2, N, H}, dt);
        Tensor out, h_n, c_n;
        if (mode == "LSTM") {
          auto [o_, state] = static_cast<nn::LSTM&>(*m)(xt, {h0t, c0t});
          out = o_;
          std::tie(h_n, c_n) = state;
        } else if (mode == "GRU") {
          std::tie(out, h_n) = static_cast<nn::GRU&>(*m)(xt, h0t);
        } else {
          std::tie(out, h_n) = static_cast<nn::RNN&>(*m)(xt, h0t);
        }
        double tol = dt == ts::kFloat32 ? 1e-5 : 1e-12;
        EXPECT_EQ(out.shape(), batch_first ? (Shape{N, T, 2 * H}) : (Shape{T, N, 2 * H}));
        expect_close(out, batch_first ? swap01(ref.out, T, N, 2 * H) : ref.out, tol);
        expect_close(h_n, ref.h_n, tol);
        if (mode == "LSTM") expect_close(c_n, ref.c_n, tol);
        // without states: zeros
        Tensor out0 = (*m)(xt);
        RnnRef ref0 = rnn_loop(mode, *m, x, T, N, L, true, std::vector<double>(h0.size(), 0.0),
                               std::vector<double>(c0.size(), 0.0));
        expect_close(out0, batch_first ? swap01(ref0.out, T, N, 2 * H) : ref0.out, tol);
      }
    }
  }
}

// proj_size: h projected by weight_hr each step (the step-by-step path in both dtypes).
TEST(CppApiNnMore, LstmProjectionMatchesGateEquations) {
  int64_t T = 3, N = 2, I = 4, H = 5, P = 3, L = 2;
  for (auto dt : {ts::kFloat32, ts::kFloat64}) {
    ts::manual_seed(24);
    nn::LSTM m(I, H, {.num_layers = L, .bidirectional = true, .proj_size = P, .dtype = dt});
    EXPECT_EQ(m.parameters().size(), size_t(L * 2 * 5));
    std::map<std::string, Shape> shapes;
    for (const auto& [name, t] : m.named_parameters()) shapes[name] = t.shape();
    EXPECT_EQ(shapes["weight_hr_l0"], (Shape{P, H}));
    EXPECT_EQ(shapes["weight_hh_l1_reverse"], (Shape{4 * H, P}));
    EXPECT_EQ(shapes["weight_ih_l1"], (Shape{4 * H, 2 * P}));
    EXPECT_EQ(m.repr(), "LSTM(4, 5, num_layers=2, bidirectional=true, proj_size=3)");
    std::vector<double> x = randoms(size_t(T * N * I), 25), h0 = randoms(size_t(L * 2 * N * P), 26),
                        c0 = randoms(size_t(L * 2 * N * H), 27);
    RnnRef ref = rnn_loop("LSTM", m, x, T, N, L, true, h0, c0);
    auto [out, state] = m(from(x, {T, N, I}, dt), {from(h0, {L * 2, N, P}, dt), from(c0, {L * 2, N, H}, dt)});
    auto [h_n, c_n] = state;
    double tol = dt == ts::kFloat32 ? 1e-5 : 1e-12;
    EXPECT_EQ(out.shape(), (Shape{T, N, 2 * P}));
    EXPECT_EQ(h_n.shape(), (Shape{L * 2, N, P}));
    EXPECT_EQ(c_n.shape(), (Shape{L * 2, N, H}));
    expect_close(out, ref.out, tol);
    expect_close(h_n, ref.h_n, tol);
    expect_close(c_n, ref.c_n, tol);
    // h0 of the cell's width is refused, naming the expected shape
    expect_error<tessera::ValueError>([&] { m(from(x, {T, N, I}, dt), {ts::zeros({L * 2, N, H}, dt), Tensor()}); },
                                      {"LSTM: expected hx of shape [4, 2, 3], got [4, 2, 5]"});
  }
  expect_error<tessera::ValueError>([] { nn::GRU(3, 4, {.proj_size = 2}); },
                                    {"GRU: proj_size argument is only supported for LSTM, not RNN or GRU"});
  expect_error<tessera::ValueError>([] { nn::LSTM(3, 4, {.proj_size = 4}); },
                                    {"LSTM: proj_size has to be smaller than hidden_size"});
}

// Gradients of the fused float32 LSTM and GRU against the gate equations written with plain
// operators (matmul, sigmoid, tanh) under autograd, on the same weights.
TEST(CppApiNnMore, LstmAndGruGradientsMatchOperatorReference) {
  int64_t T = 3, N = 2, I = 3, H = 4;
  for (const std::string mode : {"LSTM", "GRU"}) {
    SCOPED_TRACE(mode);
    ts::manual_seed(30);
    std::unique_ptr<nn::RNNBase> m;
    if (mode == "LSTM") m = std::make_unique<nn::LSTM>(I, H);
    else m = std::make_unique<nn::GRU>(I, H);
    std::vector<double> xv = randoms(size_t(T * N * I), 31), rv = randoms(size_t(T * N * H), 32);
    Tensor x = from(xv, {T, N, I}).requires_grad_();
    Tensor r = from(rv, {T, N, H});
    (m->forward(x) * r).sum().backward();

    auto w = m->all_weights()[0];
    std::vector<Tensor> ref_w;
    for (const Tensor& t : w) ref_w.push_back(t.detach().clone().requires_grad_());
    Tensor xr = from(xv, {T, N, I}).requires_grad_();
    Tensor h = ts::zeros({N, H}), c = ts::zeros({N, H});
    Tensor loss = ts::zeros({});
    for (int64_t t = 0; t < T; ++t) {
      Tensor gi = xr.select(0, t).matmul(ref_w[0].transpose(0, 1)) + ref_w[2];
      Tensor gh = h.matmul(ref_w[1].transpose(0, 1)) + ref_w[3];
      auto part = [&](const Tensor& v, int64_t k) { return v.narrow(1, k * H, H); };
      if (mode == "LSTM") {
        Tensor g = gi + gh;
        c = part(g, 1).sigmoid() * c + part(g, 0).sigmoid() * part(g, 2).tanh();
        h = part(g, 3).sigmoid() * c.tanh();
      } else {
        Tensor rg = (part(gi, 0) + part(gh, 0)).sigmoid(), z = (part(gi, 1) + part(gh, 1)).sigmoid();
        Tensor n = (part(gi, 2) + rg * part(gh, 2)).tanh();
        h = (1.0 - z) * n + z * h;
      }
      loss = loss + (h * r.select(0, t)).sum();
    }
    loss.backward();
    expect_close(x.grad(), xr.grad().to_double_vector(), 1e-4);
    for (size_t k = 0; k < 4; ++k) {
      SCOPED_TRACE(k);
      expect_close(w[k].grad(), ref_w[k].grad().to_double_vector(), 1e-4);
    }
  }
}

TEST(CppApiNnMore, RecurrentShapesAndBadInput) {
  nn::LSTM lstm(4, 3, {.batch_first = true});
  // unbatched (T, I): batch_first does not apply
  Tensor x = from(randoms(5 * 4, 40), {5, 4});
  auto [out, state] = lstm(x, {});
  EXPECT_EQ(out.shape(), (Shape{5, 3}));
  EXPECT_EQ(std::get<0>(state).shape(), (Shape{1, 3}));
  expect_close(out, lstm(x.unsqueeze(0)).squeeze(0).to_double_vector(), 1e-6);
  expect_error<ts::ValueError>([&] { lstm(ts::zeros({2, 5, 6})); }, {"LSTM", "input_size=4", "got 6"});
  expect_error<ts::ValueError>([&] { lstm(ts::zeros({2, 5, 4}), {ts::zeros({1, 3, 3}), Tensor()}); },
                               {"LSTM", "hx of shape [1, 2, 3]", "[1, 3, 3]"});
  expect_error<ts::ValueError>([&] { lstm(ts::zeros({4})); }, {"LSTM", "2-D (unbatched) or 3-D", "got 1-D"});
  nn::GRU gru(4, 3, {.num_layers = 2});
  expect_error<ts::ValueError>([&] { gru(ts::zeros({5, 2, 4}), ts::zeros({1, 2, 3})); },
                               {"GRU", "[2, 2, 3]", "[1, 2, 3]"});
  EXPECT_EQ(gru.repr(), "GRU(4, 3, num_layers=2)");
  EXPECT_EQ(gru.named_parameters()[4].first, "weight_ih_l1");
  EXPECT_EQ(gru.all_weights()[1][0].shape(), (Shape{9, 3}));
  EXPECT_THROW(nn::LSTM(4, 0), ts::ValueError);
  expect_error<ts::ValueError>([] { nn::RNN(4, 3, {.nonlinearity = "gelu"}); }, {"RNN", "gelu"});
  // an LSTM in a Sequential: the output sequence flows on
  nn::Sequential seqm(nn::LSTM(4, 6), nn::Linear(6, 2));
  EXPECT_EQ(seqm(ts::zeros({5, 2, 4})).shape(), (Shape{5, 2, 2}));
  // training a 1-layer LSTM regressor moves the loss down (float32, fused path with backward)
  ts::manual_seed(41);
  nn::LSTM rnn(2, 8);
  nn::Linear head(8, 1);
  std::vector<Tensor> params = rnn.parameters();
  for (auto& p : head.parameters()) params.push_back(p);
  ts::optim::Adam opt(params, {.lr = 0.02});
  Tensor xs = ts::rand({6, 16, 2}), target = xs.sum(std::vector<int64_t>{0, 2}).unsqueeze(1).mul(0.2);
  double first = 0, last = 0;
  for (int step = 0; step < 60; ++step) {
    opt.zero_grad();
    Tensor pred = head(rnn(xs).select(0, 5));
    Tensor l = F::mse_loss(pred, target);
    l.backward();
    opt.step();
    (step == 0 ? first : last) = l.item<double>();
  }
  EXPECT_LT(last, first / 5) << first << " -> " << last;
}

// A cell's step equals a one-step, one-layer recurrent layer with the same weights (the layers
// are checked against the gate equations above), batched and unbatched, with and without states.
TEST(CppApiNnMore, CellsMatchOneStepOfTheirLayer) {
  int64_t N = 3, I = 5, H = 4;
  for (const std::string mode : {"LSTM", "GRU", "RNN"}) {
    SCOPED_TRACE(mode);
    ts::manual_seed(40);
    std::unique_ptr<nn::RNNBase> layer;
    std::unique_ptr<nn::Module> cell;
    if (mode == "LSTM") layer = std::make_unique<nn::LSTM>(I, H), cell = std::make_unique<nn::LSTMCell>(I, H);
    else if (mode == "GRU") layer = std::make_unique<nn::GRU>(I, H), cell = std::make_unique<nn::GRUCell>(I, H);
    else layer = std::make_unique<nn::RNN>(I, H), cell = std::make_unique<nn::RNNCell>(I, H);
    auto cell_params = cell->named_parameters(), layer_params = layer->named_parameters();
    ASSERT_EQ(cell_params.size(), layer_params.size());
    {
      ts::autograd::NoGradGuard no_grad;
      for (size_t i = 0; i < cell_params.size(); ++i) layer_params[i].second.copy_(cell_params[i].second);
    }
    Tensor x = from(randoms(size_t(N * I), 41), {N, I}), h0 = from(randoms(size_t(N * H), 42), {N, H}),
           c0 = from(randoms(size_t(N * H), 43), {N, H});
    Tensor h, c, want_h, want_c;
    if (mode == "LSTM") {
      std::tie(h, c) = static_cast<nn::LSTMCell&>(*cell)(x, {h0, c0});
      auto [out, state] = static_cast<nn::LSTM&>(*layer)(x.unsqueeze(0), {h0.unsqueeze(0), c0.unsqueeze(0)});
      want_h = std::get<0>(state).squeeze(0);
      want_c = std::get<1>(state).squeeze(0);
      expect_close(c, want_c.to_double_vector(), 1e-6);
      // unbatched
      auto [hu, cu] = static_cast<nn::LSTMCell&>(*cell)(x.select(0, 1), {h0.select(0, 1), c0.select(0, 1)});
      expect_close(hu, want_h.select(0, 1).to_double_vector(), 1e-6);
      expect_close(cu, want_c.select(0, 1).to_double_vector(), 1e-6);
    } else if (mode == "GRU") {
      h = static_cast<nn::GRUCell&>(*cell)(x, h0);
      want_h = std::get<1>(static_cast<nn::GRU&>(*layer)(x.unsqueeze(0), h0.unsqueeze(0))).squeeze(0);
    } else {
      h = static_cast<nn::RNNCell&>(*cell)(x, h0);
      want_h = std::get<1>(static_cast<nn::RNN&>(*layer)(x.unsqueeze(0), h0.unsqueeze(0))).squeeze(0);
    }
    expect_close(h, want_h.to_double_vector(), 1e-6);
    // no state: zeros; and gradients reach the cell's weights
    Tensor h_zero = (*cell)(x);
    Tensor want_zero = (*layer)(x.unsqueeze(0)).squeeze(0);
    expect_close(h_zero, want_zero.to_double_vector(), 1e-6);
    h_zero.sum().backward();
    for (auto& [name, p] : cell->named_parameters()) EXPECT_TRUE(p.grad().defined()) << name;
  }
  expect_error<ts::ValueError>([] { nn::LSTMCell(3, 2)(ts::zeros({2, 4}), {}); },
                               {"LSTMCell", "input has inconsistent input_size: got 4 expected 3"});
  expect_error<ts::ValueError>([] { nn::GRUCell(3, 2)(ts::zeros({2, 3}), ts::zeros({2, 5})); },
                               {"GRUCell", "expected hx of shape [2, 2], got [2, 5]"});
  expect_error<ts::ValueError>([] { nn::RNNCell(3, 2)(ts::zeros({1, 2, 3}), Tensor()); },
                               {"RNNCell", "Expected input to be 1D or 2D, got 3D instead"});
  expect_error<ts::ValueError>([] { nn::LSTMCell(3, 2, {.nonlinearity = "relu"}); }, {"LSTMCell", "RNNCell option"});
}

// 3-D pooling against window loops over an input whose values are all distinct.
TEST(CppApiNnMore, Pool3dMatchesWindowLoops) {
  const int64_t D = 4, Hh = 5, W = 6, k = 2, s = 2;
  std::vector<double> v = randoms(size_t(2 * D * Hh * W), 50);
  Tensor x = from(v, {1, 2, D, Hh, W});
  const int64_t OD = (D - k) / s + 1, OH = (Hh - k) / s + 1, OW = (W - k) / s + 1;
  std::vector<double> want_max, want_avg;
  for (int64_t c = 0; c < 2; ++c)
    for (int64_t od = 0; od < OD; ++od)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double m = -1e300, sum = 0;
          for (int64_t a = 0; a < k; ++a)
            for (int64_t b = 0; b < k; ++b)
              for (int64_t e = 0; e < k; ++e) {
                double val = v[size_t(((c * D + od * s + a) * Hh + oh * s + b) * W + ow * s + e)];
                m = std::max(m, val);
                sum += val;
              }
          want_max.push_back(m);
          want_avg.push_back(sum / double(k * k * k));
        }
  nn::MaxPool3d mp(k);
  Tensor y = mp(x);
  EXPECT_EQ(y.shape(), (Shape{1, 2, OD, OH, OW}));
  expect_close(y, want_max, 1e-6);
  expect_close(nn::AvgPool3d(k)(x), want_avg, 1e-6);
  expect_close(mp(x.select(0, 0)), want_max, 1e-6);  // unbatched (C, D, H, W)
  EXPECT_EQ(mp(x.select(0, 0)).shape(), (Shape{2, OD, OH, OW}));
  auto [values, indices] = mp.forward_with_indices(x);
  EXPECT_EQ(indices.dtype(), ts::kInt64);
  EXPECT_EQ(mp.extra_repr(),
            "kernel_size=(2, 2, 2), stride=(2, 2, 2), padding=(0, 0, 0), dilation=(1, 1, 1), ceil_mode=false");
  expect_error<ts::ValueError>([&] { mp(ts::zeros({2, 3, 4})); }, {"MaxPool3d", "4-D (C, D, H, W) or 5-D", "got 3-D"});
  expect_error<ts::ValueError>([] { nn::AvgPool3d(2, {.divisor_override = 0}); }, {"AvgPool3d", "divisor"});
}

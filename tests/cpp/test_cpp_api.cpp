// The C++ API (frontend_cpp, Tessera::cpp): Tensor methods and operators, autograd, custom
// functions, nn modules, losses, optimizers, save/load and Runtime, each against a reference
// computed here (a loop or a closed-form gradient).
#include "test_util.h"

#include <tessera/runtime.h>
#include <tessera/tessera.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>

namespace ts = tessera;
using tessera::Tensor;
using tessera::testing::expect_close;
using tessera::testing::expect_error;
using tessera::testing::from;
using tessera::testing::randoms;
using tessera::testing::seq;
namespace F = tessera::nn::functional;

namespace {


class CppApi : public ::testing::TestWithParam<ts::ScalarType> {};

}  // namespace

// ---------------------------------------------------------------------------- methods and operators
TEST_P(CppApi, MethodsMatchLoops) {
  auto dt = GetParam();
  Tensor a = seq({2, 3}, dt, 1);  // [[1,2,3],[4,5,6]]
  Tensor b = seq({2, 3}, dt, -2);
  std::vector<double> av = a.to_double_vector(), bv = b.to_double_vector();
  std::vector<double> sum(6), prod(6), relu(6);
  for (int i = 0; i < 6; ++i) {
    sum[size_t(i)] = av[size_t(i)] + 2 * bv[size_t(i)];
    prod[size_t(i)] = av[size_t(i)] * bv[size_t(i)];
    relu[size_t(i)] = std::max(0.0, bv[size_t(i)]);
  }
  expect_close(a.add(b, 2), sum);
  expect_close(a.mul(b), prod);
  expect_close(b.relu(), relu);
  EXPECT_EQ(a.add(b).dtype(), dt);
  EXPECT_DOUBLE_EQ(a.sum().item<double>(), 21);
  expect_close(a.sum(std::vector<int64_t>{1}), {6, 15});
  expect_close(a.sum(std::vector<int64_t>{0}, true), {5, 7, 9});
  EXPECT_EQ(a.sum(std::vector<int64_t>{0}, true).shape(), (std::vector<int64_t>{1, 3}));
  expect_close(a.mean(), {3.5});

  // matmul against a loop, with a non-contiguous (transposed) right operand
  Tensor w = seq({2, 3}, dt, 0.5).transpose(0, 1);  // (3, 2), strided
  ASSERT_FALSE(w.is_contiguous());
  std::vector<double> wv = w.contiguous().to_double_vector(), mm(4, 0.0);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j)
      for (int k = 0; k < 3; ++k) mm[size_t(i * 2 + j)] += av[size_t(i * 3 + k)] * wv[size_t(k * 2 + j)];
  expect_close(a.matmul(w), mm);
  EXPECT_EQ(a.matmul(w).shape(), (std::vector<int64_t>{2, 2}));

  // chained methods and views
  expect_close(a.reshape({3, 2}).transpose(0, 1).contiguous(), {1, 3, 5, 2, 4, 6});
  expect_close(a.exp().log(), av, 1e-5);
  expect_close(a.pow(2).sqrt(), av, 1e-5);
  auto [values, indices] = ts::max_pool2d_with_indices(a.reshape({1, 2, 3}), {1, 3});
  expect_close(values, {3, 6});
}

TEST_P(CppApi, OperatorsAndInPlace) {
  auto dt = GetParam();
  Tensor a = from({1, 2, 3, 4}, {2, 2}, dt);
  Tensor b = from({4, 3, 2, 1}, {2, 2}, dt);
  expect_close(a + b, {5, 5, 5, 5});
  expect_close(a - b, {-3, -1, 1, 3});
  expect_close(a * b, {4, 6, 6, 4});
  expect_close(a / b, {0.25, 2.0 / 3, 1.5, 4});
  expect_close(a + 1, {2, 3, 4, 5});
  expect_close(2 * a, {2, 4, 6, 8});
  expect_close(10 - a, {9, 8, 7, 6});
  expect_close(1.0 / a, {1, 0.5, 1.0 / 3, 0.25});
  expect_close(-a, {-1, -2, -3, -4});
  expect_close(a.matmul(b), {8, 5, 20, 13});
  // broadcasting
  expect_close(a + from({10, 20}, {2}, dt), {11, 22, 13, 24});
  // in place: every handle of the tensor sees it
  Tensor alias = a;
  a += b;
  a *= 2;
  expect_close(alias, {10, 10, 10, 10});
  a.add_(1, 3);  // a += 3 * 1
  expect_close(alias, {13, 13, 13, 13});
}

TEST(CppApiOps, IntegerTensorsAndBadInput) {
  Tensor i = ts::arange(ts::Scalar(4));
  EXPECT_EQ(i.dtype(), ts::kInt64);
  EXPECT_EQ(i.sum().item<int64_t>(), 6);
  expect_close(1.5 / (i + 1), {1.5, 0.75, 0.5, 0.375});
  Tensor undefined;
  EXPECT_THROW(undefined.requires_grad_(), ts::ValueError);
  EXPECT_THROW(seq({2, 3}).matmul(seq({2, 3})), ts::Error);
  EXPECT_THROW(seq({2, 3}).add(seq({4})), ts::Error);
}

// ---------------------------------------------------------------------------- autograd
TEST_P(CppApi, GradientsMatchFormulas) {
  auto dt = GetParam();
  std::vector<double> xv = {0.5, -1.0, 2.0}, wv = {1.5, 0.25, -3.0};
  Tensor x = from(xv, {3}, dt).requires_grad_();
  Tensor w = from(wv, {3}, dt).requires_grad_();
  EXPECT_TRUE(x.requires_grad());
  EXPECT_TRUE(x.is_leaf());
  // y = sum(x * x * w + sin(x)): dy/dx = 2 x w + cos(x), dy/dw = x^2
  Tensor y = (x * x * w + x.sin()).sum();
  EXPECT_TRUE(y.requires_grad());
  EXPECT_FALSE(y.is_leaf());
  EXPECT_FALSE(y.grad_fn_name().empty());
  y.backward();
  std::vector<double> gx(3), gw(3);
  for (size_t k = 0; k < 3; ++k) {
    gx[k] = 2 * xv[k] * wv[k] + std::cos(xv[k]);
    gw[k] = xv[k] * xv[k];
  }
  expect_close(x.grad(), gx);
  expect_close(w.grad(), gw);
  EXPECT_EQ(x.grad().dtype(), dt);

  // a second backward accumulates; set_grad(undefined) clears
  (x * 3).sum().backward();
  for (double& g : gx) g += 3;
  expect_close(x.grad(), gx);
  x.set_grad(Tensor());
  EXPECT_FALSE(x.grad().defined());

  // autograd::grad: d/dA sum(A @ B) = ones @ B^T, nothing accumulated
  Tensor A = seq({2, 3}, dt).requires_grad_();
  Tensor B = seq({3, 4}, dt, 1).requires_grad_();
  auto grads = ts::autograd::grad({A.matmul(B).sum()}, {A, B});
  ASSERT_EQ(grads.size(), 2u);
  std::vector<double> bv = B.to_double_vector(), av = A.to_double_vector(), ga(6), gb(12);
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 3; ++k)
      for (int j = 0; j < 4; ++j) ga[size_t(i * 3 + k)] += bv[size_t(k * 4 + j)];
  for (int k = 0; k < 3; ++k)
    for (int j = 0; j < 4; ++j)
      for (int i = 0; i < 2; ++i) gb[size_t(k * 4 + j)] += av[size_t(i * 3 + k)];
  expect_close(grads[0], ga);
  expect_close(grads[1], gb);
  EXPECT_FALSE(A.grad().defined());
}

TEST(CppApiAutograd, NoGradGuardDetachHooksAndErrors) {
  Tensor x = from({1, 2, 3}, {3}).requires_grad_();
  {
    ts::autograd::NoGradGuard no_grad;
    EXPECT_FALSE(ts::autograd::is_grad_enabled());
    Tensor y = x * 2;
    EXPECT_FALSE(y.requires_grad());
    {
      ts::autograd::EnableGradGuard enable;
      EXPECT_TRUE((x * 2).requires_grad());
    }
    EXPECT_FALSE(ts::autograd::is_grad_enabled());
  }
  EXPECT_TRUE(ts::autograd::is_grad_enabled());
  EXPECT_FALSE(x.detach().requires_grad());

  // a hook sees and may replace the gradient
  Tensor seen;
  Tensor z = x * 1;
  ts::autograd::register_hook(z, [&](const Tensor& g) {
    seen = g;
    return g * 10;
  });
  (z * z).sum().backward();
  expect_close(seen, {2, 4, 6});
  expect_close(x.grad(), {20, 40, 60});

  // a non-scalar output needs an explicit gradient
  expect_error<ts::RuntimeError>([&] { (x * 2).backward(); }, {"scalar outputs"});
  Tensor g = from({1, 1, 1}, {3});
  x.set_grad(Tensor());
  (x * 2).backward(g);
  expect_close(x.grad(), {2, 2, 2});
  // only floating tensors can require grad
  EXPECT_THROW(ts::arange(ts::Scalar(3)).requires_grad_(), ts::Error);
  EXPECT_THROW(ts::autograd::backward({x * 2}, {g, g}), ts::ValueError);
}

// In-place on views: the base's gradient sees the change (closed form: y = x * 1, row 0 of y
// doubled through a view, then column 1 of its transpose scaled by w; d(sum y)/dx and /dw).
TEST(CppApiAutograd, InplaceOnViewsReachesTheBase) {
  Tensor x = from({1, 2, 3, 4, 5, 6}, {2, 3}, ts::kFloat64).requires_grad_();
  Tensor w = from({0.5, -1}, {2}, ts::kFloat64).requires_grad_();
  Tensor y = x * 1;
  y.select(0, 0).mul_(2);
  y.transpose(0, 1).select(0, 1).mul_(w);  // y[:, 1] *= w
  y.sum().backward();
  expect_close(x.grad(), {2, 2 * 0.5, 2, 1, -1, 1});
  expect_close(w.grad(), {2 * 2, 5});  // y[0, 1] (= 2 * 2) and y[1, 1] (= 5) before the scaling
  expect_error<ts::RuntimeError>([&] { x.select(0, 0).mul_(2); }, {"view of a leaf Variable"});
}

// A move to another device is recorded: the gradient comes back to the source device. The
// fallback_device fixture's memory is unreadable by the host, so only its copies can move data.
TEST(CppApiAutograd, DeviceMovesAreDifferentiable) {
  ts::load_plugin(std::string(TESSERA_FIXTURE_DIR) + "/libtessera_fallback_device.so");
  Tensor x = from({1, -2, 3}, {3}, ts::kFloat64).requires_grad_();
  Tensor on_device = x.to(ts::Device("fallbackdev"));
  EXPECT_TRUE(on_device.requires_grad());
  Tensor back = on_device.to(ts::Device());
  (back * back).sum().backward();
  EXPECT_EQ(x.grad().device(), ts::Device());
  expect_close(x.grad(), {2, -4, 6});
}

TEST(CppApiStreams, StreamsAndPinnedMemoryFromTheCppApi) {
  // The fallback device has no streams and no pinned memory: everything is synchronous there.
  ts::load_plugin(std::string(TESSERA_FIXTURE_DIR) + "/libtessera_fallback_device.so");
  ts::Device dev("fallbackdev");
  Tensor x = from({1, -2, 3}, {3}, ts::kFloat32);
  ts::Stream s = ts::Stream::create(dev);
  EXPECT_TRUE(s.is_default());
  Tensor on_device;
  {
    ts::StreamGuard guard(s);
    on_device = x.to(dev, /*non_blocking=*/true);
  }
  on_device.record_stream(s);
  ts::Event done(true);
  done.record(s);
  done.synchronize();
  EXPECT_TRUE(done.query());
  expect_close(on_device.to(ts::Device(), true), {1, -2, 3});
  EXPECT_FALSE(x.is_pinned());
  expect_error<ts::NotImplementedError>([&] { x.pin_memory("fallbackdev"); }, {"pin_memory", "fallbackdev"});
  expect_error<ts::ValueError>([&] { on_device.pin_memory("fallbackdev"); }, {"only CPU tensors can be pinned"});
}

// ---------------------------------------------------------------------------- custom functions
namespace {

struct Exp : ts::autograd::Function<Exp> {
  static Tensor forward(ts::autograd::AutogradContext* ctx, const Tensor& x) {
    Tensor y = x.exp();
    ctx->save_for_backward({y});
    return y;
  }
  static std::vector<Tensor> backward(ts::autograd::AutogradContext* ctx, std::vector<Tensor> grads) {
    return {grads[0] * ctx->get_saved_variables()[0]};
  }
};

// y = a * x + b * scale: a tensor, a non-tensor argument, and two outputs.
struct ScaledSum : ts::autograd::Function<ScaledSum> {
  static std::vector<Tensor> forward(ts::autograd::AutogradContext* ctx, const Tensor& x, double scale, const Tensor& b) {
    ctx->saved_data["scale"] = scale;
    return {x * scale + b, x - b};
  }
  static std::vector<Tensor> backward(ts::autograd::AutogradContext* ctx, std::vector<Tensor> g) {
    double scale = std::any_cast<double>(ctx->saved_data["scale"]);
    return {g[0] * scale + g[1], Tensor(), g[0] - g[1]};
  }
};

struct WrongArity : ts::autograd::Function<WrongArity> {
  static Tensor forward(ts::autograd::AutogradContext*, const Tensor& x) { return x * 2; }
  static std::vector<Tensor> backward(ts::autograd::AutogradContext*, std::vector<Tensor> g) { return {g[0], g[0]}; }
};

}  // namespace

TEST(CppApiFunction, CustomBackwardIsUsed) {
  std::vector<double> xv = {0.0, 1.0, -0.5};
  Tensor x = from(xv, {3}, ts::kFloat64).requires_grad_();
  Tensor y = Exp::apply(x);
  EXPECT_EQ(y.grad_fn_name(), "ExpBackward");
  (y * y).sum().backward();  // d/dx e^{2x} = 2 e^{2x}
  std::vector<double> expected;
  for (double v : xv) expected.push_back(2 * std::exp(2 * v));
  expect_close(x.grad(), expected, 1e-12);

  Tensor a = from({1, 2}, {2}, ts::kFloat64).requires_grad_();
  Tensor b = from({3, 5}, {2}, ts::kFloat64).requires_grad_();
  auto outs = ScaledSum::apply(a, 4.0, b);
  ASSERT_EQ(outs.size(), 2u);
  expect_close(outs[0], {7, 13});
  (outs[0].sum() + outs[1].sum() * 2).backward();
  expect_close(a.grad(), {6, 6});  // 4 + 2
  expect_close(b.grad(), {-1, -1});  // 1 - 2

  // without inputs that require grad, forward just runs
  EXPECT_FALSE(Exp::apply(from({1}, {1})).requires_grad());
  Tensor z = from({1, 2}, {2}).requires_grad_();
  expect_error<ts::Error>([&] { WrongArity::apply(z).sum().backward(); }, {"returned 2 gradients, expected 1"});
}

// ---------------------------------------------------------------------------- nn
TEST_P(CppApi, LinearForwardAndInit) {
  auto dt = GetParam();
  ts::manual_seed(0);
  ts::nn::Linear lin(3, 2, {.dtype = dt});
  EXPECT_EQ(lin.weight().shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(lin.bias().shape(), (std::vector<int64_t>{2}));
  EXPECT_TRUE(lin.weight().requires_grad());
  // torch's default init: both bounded by 1/sqrt(in_features)
  double bound = 1 / std::sqrt(3.0);
  for (double v : lin.weight().to_double_vector()) EXPECT_LE(std::abs(v), bound);
  for (double v : lin.bias().to_double_vector()) EXPECT_LE(std::abs(v), bound);

  Tensor x = seq({4, 3}, dt, -2);
  Tensor y = lin(x);
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{4, 2}));
  std::vector<double> xv = x.to_double_vector(), wv = lin.weight().to_double_vector(),
                      bv = lin.bias().to_double_vector(), ref(8);
  for (int n = 0; n < 4; ++n)
    for (int o = 0; o < 2; ++o) {
      double s = bv[size_t(o)];
      for (int i = 0; i < 3; ++i) s += xv[size_t(n * 3 + i)] * wv[size_t(o * 3 + i)];
      ref[size_t(n * 2 + o)] = s;
    }
  expect_close(y, ref);
  // unbatched input
  EXPECT_EQ(lin(seq({3}, dt)).shape(), (std::vector<int64_t>{2}));
  expect_error<ts::ValueError>([&] { lin(seq({4, 5}, dt)); }, {"in_features=3", "[4, 5]"});
  EXPECT_EQ(lin.repr(), "Linear(in_features=3, out_features=2, bias=true)");
}

TEST(CppApiNn, Conv2dMatchesLoop) {
  ts::manual_seed(1);
  ts::nn::Conv2d conv(2, 3, 3, {.padding = {1}});
  EXPECT_EQ(conv.weight().shape(), (std::vector<int64_t>{3, 2, 3, 3}));
  Tensor x = from(randoms(2 * 2 * 4 * 5, 7), {2, 2, 4, 5});
  Tensor y = conv(x);
  ASSERT_EQ(y.shape(), (std::vector<int64_t>{2, 3, 4, 5}));
  auto xv = x.to_double_vector(), wv = conv.weight().to_double_vector(), bv = conv.bias().to_double_vector();
  std::vector<double> ref;
  for (int n = 0; n < 2; ++n)
    for (int o = 0; o < 3; ++o)
      for (int h = 0; h < 4; ++h)
        for (int w = 0; w < 5; ++w) {
          double s = bv[size_t(o)];
          for (int c = 0; c < 2; ++c)
            for (int kh = 0; kh < 3; ++kh)
              for (int kw = 0; kw < 3; ++kw) {
                int ih = h + kh - 1, iw = w + kw - 1;
                if (ih < 0 || ih >= 4 || iw < 0 || iw >= 5) continue;
                s += xv[size_t(((n * 2 + c) * 4 + ih) * 5 + iw)] * wv[size_t(((o * 2 + c) * 3 + kh) * 3 + kw)];
              }
          ref.push_back(s);
        }
  expect_close(y, ref, 1e-4);
  EXPECT_EQ(ts::nn::Conv2d(2, 4, 3, {.stride = {2}})(x).shape(), (std::vector<int64_t>{2, 4, 1, 2}));
  EXPECT_THROW(conv(seq({2, 5})), ts::ValueError);
  EXPECT_THROW(ts::nn::Conv2d(3, 4, 3, {.groups = 2}), ts::ValueError);
}

TEST(CppApiNn, BatchNormTrainAndEval) {
  ts::nn::BatchNorm2d bn(2);
  Tensor x = from(randoms(3 * 2 * 2 * 2, 3), {3, 2, 2, 2});
  auto xv = x.to_double_vector();
  Tensor y = bn(x);
  auto yv = y.to_double_vector();
  // per channel: batch mean / biased var normalise; running stats move by momentum 0.1 (unbiased var)
  std::vector<double> rm, rv;
  for (int c = 0; c < 2; ++c) {
    std::vector<size_t> idx;
    for (int n = 0; n < 3; ++n)
      for (int k = 0; k < 4; ++k) idx.push_back(size_t((n * 2 + c) * 4 + k));
    double mean = 0, var = 0;
    for (size_t i : idx) mean += xv[i];
    mean /= double(idx.size());
    for (size_t i : idx) var += (xv[i] - mean) * (xv[i] - mean);
    for (size_t i : idx) EXPECT_NEAR(yv[i], (xv[i] - mean) / std::sqrt(var / double(idx.size()) + 1e-5), 1e-4);
    rm.push_back(0.1 * mean);
    rv.push_back(0.9 + 0.1 * var / double(idx.size() - 1));
  }
  expect_close(bn.running_mean(), rm, 1e-5);
  expect_close(bn.running_var(), rv, 1e-5);
  EXPECT_EQ(bn.num_batches_tracked().item<int64_t>(), 1);
  // eval: the running statistics
  bn.eval();
  auto ye = bn(x).to_double_vector();
  for (int n = 0; n < 3; ++n)
    for (int c = 0; c < 2; ++c)
      for (int k = 0; k < 4; ++k) {
        size_t i = size_t((n * 2 + c) * 4 + k);
        EXPECT_NEAR(ye[i], (xv[i] - rm[size_t(c)]) / std::sqrt(rv[size_t(c)] + 1e-5), 1e-4);
      }
  EXPECT_EQ(bn.num_batches_tracked().item<int64_t>(), 1);
  auto keys = bn.state_dict();
  ASSERT_EQ(keys.size(), 5u);
  EXPECT_EQ(keys[4].first, "num_batches_tracked");
  EXPECT_THROW(bn(seq({2, 2})), ts::ValueError);
}

TEST(CppApiNn, LayerNormDropoutEmbeddingActivations) {
  ts::nn::LayerNorm ln({3});
  Tensor x = from({1, 2, 3, 2, 4, 9}, {2, 3});
  auto xv = x.to_double_vector();
  std::vector<double> ref;
  for (int r = 0; r < 2; ++r) {
    double m = (xv[size_t(r * 3)] + xv[size_t(r * 3 + 1)] + xv[size_t(r * 3 + 2)]) / 3, v = 0;
    for (int k = 0; k < 3; ++k) v += std::pow(xv[size_t(r * 3 + k)] - m, 2) / 3;
    for (int k = 0; k < 3; ++k) ref.push_back((xv[size_t(r * 3 + k)] - m) / std::sqrt(v + 1e-5));
  }
  expect_close(ln(x), ref, 1e-4);
  EXPECT_THROW(ln(seq({3, 4})), ts::ValueError);

  ts::manual_seed(3);
  ts::nn::Dropout drop(0.5);
  Tensor ones = ts::ones({10000});
  auto dv = drop(ones).to_double_vector();
  int zeros = 0;
  for (double v : dv) {
    EXPECT_TRUE(v == 0.0 || std::abs(v - 2.0) < 1e-6);
    zeros += v == 0.0;
  }
  EXPECT_NEAR(zeros / 10000.0, 0.5, 0.05);
  drop.eval();
  expect_close(drop(ones), std::vector<double>(10000, 1.0));
  EXPECT_THROW(ts::nn::Dropout(1.5), ts::ValueError);

  ts::nn::Embedding emb(5, 2, {.padding_idx = 0});
  expect_close(emb.weight().select(0, 0), {0, 0});
  Tensor idx = ts::tensor_from_values(std::vector<double>{4, 0, 2}, {3}, ts::kInt64);
  Tensor e = emb(idx);
  EXPECT_EQ(e.shape(), (std::vector<int64_t>{3, 2}));
  auto wv = emb.weight().to_double_vector();
  expect_close(e, {wv[8], wv[9], 0, 0, wv[4], wv[5]});

  Tensor v = from({-1, 0.5, 2}, {3});
  expect_close(ts::nn::ReLU()(v), {0, 0.5, 2});
  expect_close(ts::nn::Tanh()(v), {std::tanh(-1.0), std::tanh(0.5), std::tanh(2.0)});
  expect_close(ts::nn::Sigmoid()(v), {1 / (1 + std::exp(1.0)), 1 / (1 + std::exp(-0.5)), 1 / (1 + std::exp(-2.0))});
  auto gelu = [](double z) { return 0.5 * z * (1 + std::erf(z / std::sqrt(2.0))); };
  expect_close(ts::nn::GELU()(v), {gelu(-1), gelu(0.5), gelu(2)});
  EXPECT_EQ(ts::nn::Flatten()(seq({2, 3, 4})).shape(), (std::vector<int64_t>{2, 12}));
}

TEST(CppApiNn, ZeroSizeBatchAndModuleErrors) {
  ts::nn::Linear lin(3, 2);
  Tensor y = lin(ts::zeros({0, 3}));
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{0, 2}));
  EXPECT_DOUBLE_EQ(ts::zeros({0}).sum().item<double>(), 0.0);
  // an empty batch contributes zero gradients
  y.sum().backward();
  expect_close(lin.weight().grad(), std::vector<double>(6, 0.0));
  lin.zero_grad();
  EXPECT_FALSE(lin.weight().grad().defined());
  ts::nn::Module base;
  expect_error<ts::NotImplementedError>([&] { base(y); }, {"forward"});
  expect_error<ts::ValueError>([&] { lin.load_state_dict({{"weight", Tensor()}, {"bias", ts::zeros({2})}}); },
                               {"weight", "undefined"});
  EXPECT_THROW(ts::nn::Linear(-1, 2), ts::ValueError);
  EXPECT_THROW(ts::nn::Embedding(3, 2, {.padding_idx = 3}), ts::ValueError);
}

TEST(CppApiNn, SequentialParametersAndModes) {
  ts::nn::Sequential model(ts::nn::Linear(4, 8), ts::nn::ReLU(), ts::nn::Dropout(0.1), ts::nn::Linear(8, 2));
  EXPECT_EQ(model.size(), 4u);
  auto named = model.named_parameters();
  std::vector<std::string> names;
  for (auto& [n, t] : named) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "0.bias", "3.weight", "3.bias"}));
  EXPECT_EQ(model.parameters().size(), 4u);
  EXPECT_EQ(model(seq({5, 4})).shape(), (std::vector<int64_t>{5, 2}));
  model.eval();
  EXPECT_FALSE(model[2]->is_training());
  model.train();
  EXPECT_TRUE(model[2]->is_training());
  EXPECT_THROW(model[9], ts::IndexError);
  // to(dtype): parameters convert and stay trainable leaves
  model.to(ts::kFloat64);
  for (auto& p : model.parameters()) {
    EXPECT_EQ(p.dtype(), ts::kFloat64);
    EXPECT_TRUE(p.requires_grad());
    EXPECT_TRUE(p.is_leaf());
  }
  EXPECT_EQ(model(seq({5, 4}, ts::kFloat64)).dtype(), ts::kFloat64);
  EXPECT_NE(model.repr().find("(3): Linear(in_features=8, out_features=2, bias=true)"), std::string::npos);
}

// ---------------------------------------------------------------------------- losses
TEST_P(CppApi, LossesMatchLoops) {
  auto dt = GetParam();
  Tensor a = from({0.5, -1, 2, 3}, {2, 2}, dt), b = from({1, 1, 1, -1}, {2, 2}, dt);
  expect_close(F::mse_loss(a, b), {(0.25 + 4 + 1 + 16) / 4});
  expect_close(F::mse_loss(a, b, F::Reduction::Sum), {0.25 + 4 + 1 + 16});
  expect_close(F::l1_loss(a, b), {(0.5 + 2 + 1 + 4) / 4.0});
  expect_close(F::l1_loss(a, b, F::Reduction::None), {0.5, 2, 1, 4});
  expect_error<ts::ValueError>([&] { F::mse_loss(a, seq({4}, dt)); }, {"mse_loss", "[2, 2]", "[4]"});

  // cross_entropy = mean over samples of logsumexp(row) - row[target]
  std::vector<double> logits = {1, 2, 0.5, -1, 0, 3};
  Tensor x = from(logits, {2, 3}, dt);
  Tensor target = ts::tensor_from_values(std::vector<double>{1, 2}, {2}, ts::kInt64);
  double ref = 0;
  for (int r = 0; r < 2; ++r) {
    double lse = 0;
    for (int c = 0; c < 3; ++c) lse += std::exp(logits[size_t(r * 3 + c)]);
    ref += std::log(lse) - logits[size_t(r * 3 + (r == 0 ? 1 : 2))];
  }
  expect_close(F::cross_entropy(x, target), {ref / 2});
  expect_close(F::nll_loss(x.log_softmax(1), target, Tensor(), F::Reduction::Sum), {ref});
  // probabilities as targets: one-hot gives the same loss
  Tensor onehot = from({0, 1, 0, 0, 0, 1}, {2, 3}, dt);
  expect_close(F::cross_entropy(x, onehot), {ref / 2});
  // the gradient of cross_entropy w.r.t. the logits: (softmax - onehot) / N
  Tensor xg = from(logits, {2, 3}, dt).requires_grad_();
  F::cross_entropy(xg, target).backward();
  std::vector<double> g;
  for (int r = 0; r < 2; ++r) {
    double lse = 0;
    for (int c = 0; c < 3; ++c) lse += std::exp(logits[size_t(r * 3 + c)]);
    for (int c = 0; c < 3; ++c)
      g.push_back((std::exp(logits[size_t(r * 3 + c)]) / lse - (c == (r == 0 ? 1 : 2) ? 1 : 0)) / 2);
  }
  expect_close(xg.grad(), g, 1e-5);
  EXPECT_THROW(F::nll_loss(x, ts::tensor_from_values(std::vector<double>{1, 2, 0}, {3}, ts::kInt64)), ts::ValueError);
}

// ---------------------------------------------------------------------------- optimizers
TEST(CppApiOptim, SgdMomentumWeightDecayMatchesRule) {
  std::vector<double> p0 = {1.0, -2.0}, grads1 = {0.5, 0.25}, grads2 = {-1.0, 2.0};
  Tensor p = from(p0, {2}, ts::kFloat64).requires_grad_();
  double lr = 0.1, mom = 0.9, wd = 0.01, damp = 0.0;
  ts::optim::SGD opt({p}, {.lr = lr, .momentum = mom, .dampening = damp, .weight_decay = wd});
  std::vector<double> ref = p0, buf(2);
  for (int step = 0; step < 2; ++step) {
    const auto& gv = step == 0 ? grads1 : grads2;
    p.set_grad(from(gv, {2}, ts::kFloat64));
    opt.step();
    for (size_t k = 0; k < 2; ++k) {
      double g = gv[k] + wd * ref[k];
      buf[k] = step == 0 ? g : mom * buf[k] + (1 - damp) * g;
      ref[k] -= lr * buf[k];
    }
    expect_close(p, ref, 1e-12);
  }
  EXPECT_TRUE(p.is_leaf());
  opt.zero_grad();
  EXPECT_FALSE(p.grad().defined());
  EXPECT_THROW(ts::optim::SGD({p}, {.lr = -1}), ts::ValueError);
  EXPECT_THROW(ts::optim::SGD({p}, {.nesterov = true}), ts::ValueError);
  EXPECT_THROW(ts::optim::SGD(std::vector<Tensor>{}), ts::ValueError);
}

TEST(CppApiOptim, AdamAndAdamWMatchRule) {
  for (bool decoupled : {false, true}) {
    std::vector<double> p0 = {0.5, -1.5, 3.0};
    Tensor p = from(p0, {3}, ts::kFloat64).requires_grad_();
    double lr = 0.01, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.1;
    std::unique_ptr<ts::optim::Optimizer> opt;
    if (decoupled) opt = std::make_unique<ts::optim::AdamW>(std::vector<Tensor>{p}, ts::optim::AdamWOptions{.lr = lr, .weight_decay = wd});
    else opt = std::make_unique<ts::optim::Adam>(std::vector<Tensor>{p}, ts::optim::AdamOptions{.lr = lr, .weight_decay = wd});
    std::vector<double> ref = p0, m(3), v(3);
    for (int t = 1; t <= 3; ++t) {
      std::vector<double> gv = {0.1 * t, -0.2, 0.3 / t};
      p.set_grad(from(gv, {3}, ts::kFloat64));
      opt->step();
      for (size_t k = 0; k < 3; ++k) {
        double g = gv[k];
        if (decoupled) ref[k] *= 1 - lr * wd;
        else g += wd * ref[k];
        m[k] = b1 * m[k] + (1 - b1) * g;
        v[k] = b2 * v[k] + (1 - b2) * g * g;
        double mhat = m[k] / (1 - std::pow(b1, t));
        double denom = std::sqrt(v[k]) / std::sqrt(1 - std::pow(b2, t)) + eps;
        ref[k] -= lr * mhat / denom;
      }
      expect_close(p, ref, 1e-12);
    }
  }
  Tensor q = from({1}, {1}).requires_grad_();
  EXPECT_THROW(ts::optim::Adam({q}, {.betas = {1.0, 0.999}}), ts::ValueError);
}

// ---------------------------------------------------------------------------- save / load
TEST(CppApiSerialization, StateDictRoundTrip) {
  auto make = [] { return ts::nn::Sequential(ts::nn::Linear(3, 4), ts::nn::BatchNorm2d(4), ts::nn::Linear(4, 1)); };
  ts::manual_seed(10);
  auto a = make();
  ts::manual_seed(11);
  auto b = make();
  std::string path = (std::filesystem::temp_directory_path() / "tessera_test_cpp_api.safetensors").string();
  ts::save(a, path);
  auto loaded = ts::load(path);
  EXPECT_EQ(loaded.size(), a.state_dict().size());
  EXPECT_NE(b.state_dict()[0].second.to_double_vector(), a.state_dict()[0].second.to_double_vector());
  ts::load(b, path);
  auto sa = a.state_dict(), sb = b.state_dict();
  ASSERT_EQ(sa.size(), sb.size());
  for (size_t i = 0; i < sa.size(); ++i) {
    EXPECT_EQ(sa[i].first, sb[i].first);
    EXPECT_EQ(sa[i].second.dtype(), sb[i].second.dtype());
    EXPECT_EQ(sa[i].second.to_double_vector(), sb[i].second.to_double_vector()) << sa[i].first;
  }
  // loaded parameters stay trainable leaves
  EXPECT_TRUE(b.parameters()[0].requires_grad());
  // mismatches are clear errors, and leave the module unchanged
  ts::nn::Linear other(3, 5);
  auto before = other.weight().to_double_vector();
  expect_error<ts::ValueError>([&] { ts::load(other, path); }, {"missing keys", "unexpected keys", "0.weight"});
  ts::NamedTensors wrong = {{"weight", ts::zeros({2, 2})}, {"bias", ts::zeros({5})}};
  expect_error<ts::ValueError>([&] { other.load_state_dict(wrong); }, {"size mismatch for weight", "[2, 2]", "[5, 3]"});
  EXPECT_EQ(other.weight().to_double_vector(), before);
  // non-strict loads what matches
  other.load_state_dict({{"bias", ts::ones({5})}, {"extra", ts::ones({1})}}, false);
  expect_close(other.bias(), {1, 1, 1, 1, 1});
  EXPECT_THROW(ts::load(other, path + ".missing"), ts::FileError);
  std::remove(path.c_str());
}

// ---------------------------------------------------------------------------- training
TEST(CppApiTraining, MlpLossFalls) {
  ts::manual_seed(0);
  // y = sin(x0) + 0.5 x1^2 on 128 points
  Tensor x = ts::rand({128, 2}).mul(4).sub(2);
  Tensor y = x.select(1, 0).sin().add(x.select(1, 1).pow(2).mul(0.5)).unsqueeze(1);
  ts::nn::Sequential model(ts::nn::Linear(2, 32), ts::nn::Tanh(), ts::nn::Linear(32, 1));
  ts::optim::Adam opt(model.parameters(), {.lr = 0.02});
  double first = 0, last = 0;
  for (int step = 0; step < 150; ++step) {
    opt.zero_grad();
    Tensor loss = F::mse_loss(model(x), y);
    loss.backward();
    opt.step();
    (step == 0 ? first : last) = loss.item<double>();
  }
  EXPECT_LT(last, first / 10) << "first " << first << " last " << last;
}

// ---------------------------------------------------------------------------- Runtime
TEST(CppApiRuntime, PluginSelection) {
  ts::Runtime rt({.plugins = {"cpu"}});
  EXPECT_TRUE(rt.is_loaded("cpu"));
  bool found = false;
  for (const auto& p : rt.plugins()) found = found || p.name == "cpu";
  EXPECT_TRUE(found);
  EXPECT_NE(rt.describe().find("cpu"), std::string::npos);
  EXPECT_EQ(rt.load("cpu").name, "cpu");
  expect_error<ts::PluginError>([] { ts::Runtime({.plugins = {"no_such_plugin"}}); },
                                {"no_such_plugin", "libtessera_no_such_plugin.so", "search path"});
  expect_error<ts::PluginError>([] { ts::Runtime({.plugins = {"/nonexistent/libtessera_x.so"}}); }, {"no such file"});
  // a search folder is searched first
  ts::Runtime with_path({.search_path = {TESSERA_FIXTURE_DIR}});
  auto sp = with_path.search_path();
  ASSERT_FALSE(sp.empty());
  EXPECT_EQ(sp.front(), TESSERA_FIXTURE_DIR);
  EXPECT_THROW(ts::Runtime({.num_threads = -1}), ts::ValueError);
}

// Strict mode: only the named plugins load; a need for another is an error naming it.
TEST(CppApiRuntime, NoLazyLoadingLoadsOnlyNamedPlugins) {
  setenv("TESSERA_PLUGIN_PATH", TESSERA_FIXTURE_DIR, 1);  // where libtessera_lazydev.so is
  {
    ts::Runtime strict({.plugins = {"cpu"}, .lazy_loading = false});
    EXPECT_FALSE(ts::lazy_loading_enabled());
    EXPECT_EQ(ts::add(ts::ones({2}), 1.0).to_double_vector(), (std::vector<double>{2, 2}));  // named: works
    if (!strict.is_loaded("lazydev"))
      expect_error<ts::PluginError>([] { ts::Device("lazydev"); },
                                    {"device type 'lazydev' needs plugin 'lazydev'", "libtessera_lazydev.so",
                                     "lazy loading is off"});
    EXPECT_FALSE(strict.is_loaded("lazydev"));
    if (!ts::autograd::is_loaded())
      expect_error<ts::PluginError>([] { ts::ones({2}).requires_grad_(); },
                                    {"autograd", "libtessera_autograd.so", "lazy loading is off"});
    EXPECT_EQ(strict.load("lazydev").name, "lazydev");  // an explicit load still works
    EXPECT_EQ(ts::Device("lazydev").type_name(), "lazydev");
  }
  ts::Runtime lenient({.lazy_loading = true});  // the default again
  EXPECT_TRUE(ts::lazy_loading_enabled());
  unsetenv("TESSERA_PLUGIN_PATH");
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CppApi, ::testing::Values(ts::kFloat32, ts::kFloat64),
                         [](const auto& info) { return std::string(ts::name(info.param)); });

// tessera::func from C++ (vmap, grad, jvp), each against a reference computed here: a loop over
// the samples, a closed-form gradient or directional derivative.
#include "test_util.h"

#include <tessera/tessera.h>

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace ts = tessera;
using tessera::Tensor;
using tessera::testing::expect_error;

namespace {

Tensor from(const std::vector<double>& v, std::vector<int64_t> shape) {
  return ts::tensor_from_values(v, std::move(shape), ts::kFloat64);
}

std::vector<double> randoms(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> d(-1, 1);
  std::vector<double> v(n);
  for (double& x : v) x = d(gen);
  return v;
}

void expect_same(const Tensor& got, const Tensor& want, double tol = 1e-12) {
  ASSERT_EQ(got.shape(), want.shape());
  std::vector<double> g = got.to_double_vector(), w = want.to_double_vector();
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], w[i], tol * std::max(1.0, std::abs(w[i]))) << "at " << i;
}

}  // namespace

TEST(CppApiFunc, VmapMatchesALoopOverSamples) {
  Tensor x = from(randoms(5 * 4, 1), {5, 4});
  Tensor w = from(randoms(4 * 3, 2), {4, 3});
  auto layer = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{in[0].matmul(in[1]).tanh().softmax(-1), in[0].sum()};
  };
  // x mapped over dim 0, w shared; the first output's batch dim placed last.
  ts::func::VmapOptions options;
  options.in_dims = {0, std::nullopt};
  options.out_dims = {1, 0};
  std::vector<Tensor> out = ts::func::vmap(layer, options)({x, w});
  std::vector<Tensor> rows, sums;
  for (int64_t b = 0; b < 5; ++b) {
    std::vector<Tensor> r = layer({x.select(0, b), w});
    rows.push_back(r[0]);
    sums.push_back(r[1]);
  }
  expect_same(out[0], ts::stack(rows, 1));
  expect_same(out[1], ts::stack(sums, 0));

  // One tensor in, one out; nested: a vmap of a vmap is the double loop.
  auto row_norms = ts::func::vmap(ts::func::vmap([](const Tensor& v) { return (v * v).sum().sqrt(); }));
  Tensor cube = from(randoms(2 * 3 * 4, 3), {2, 3, 4});
  expect_same(row_norms(cube), (cube * cube).sum(std::vector<int64_t>{-1}).sqrt());
}

TEST(CppApiFunc, PerSampleGradientsWithVmapOfGrad) {
  Tensor w = from(randoms(3, 4), {3});
  Tensor xs = from(randoms(6 * 3, 5), {6, 3});
  // loss(w, x) = sum(sin(w * x)): d/dw = cos(w * x) * x, per sample.
  auto dloss = ts::func::grad([](const std::vector<Tensor>& in) { return (in[0] * in[1]).sin().sum(); });
  ts::func::VmapOptions options;
  options.in_dims = {std::nullopt, 0};
  std::vector<Tensor> per_sample = ts::func::vmap(dloss, options)({w, xs});
  expect_same(per_sample[0], (w * xs).cos() * xs);
}

TEST(CppApiFunc, GradOfGradAndJvp) {
  Tensor x = from({0.3, -1.2, 2.0}, {3});
  auto f = [](const std::vector<Tensor>& in) { return (in[0] * in[0] * in[0]).sum(); };
  std::vector<Tensor> g = ts::func::grad(f)({x});
  expect_same(g[0], x * x * 3.0);
  // The second derivative of sum(x^3) summed: d/dx sum(3 x^2) = 6 x.
  auto sum_of_grad = [&](const std::vector<Tensor>& in) { return ts::func::grad(f)(in)[0].sum(); };
  expect_same(ts::func::grad(sum_of_grad)({x})[0], x * 6.0);

  // jvp of exp(x) * w in direction (t, u): exp(x) t w + exp(x) u.
  Tensor w = from({1.0, 2.0, -1.0}, {3});
  Tensor t = from({0.5, 0.5, 1.0}, {3}), u = from({1.0, 0.0, 2.0}, {3});
  auto h = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0].exp() * in[1]}; };
  auto [primal, tangent] = ts::func::jvp(h, {x, w}, {t, u});
  expect_same(primal[0], x.exp() * w);
  expect_same(tangent[0], x.exp() * t * w + x.exp() * u);
}

TEST(CppApiFunc, BadInputIsAClearError) {
  Tensor a = from(randoms(6, 6), {2, 3}), b = from(randoms(8, 7), {4, 2});
  auto id = [](const std::vector<Tensor>& in) { return in; };
  expect_error<ts::ValueError>([&] { ts::func::vmap(id)({a, b}); }, {"same size in the mapped dimension", "2", "4"});
  ts::func::VmapOptions bad_dim;
  bad_dim.in_dims = {5};
  expect_error<ts::ValueError>([&] { ts::func::vmap(id, bad_dim)({a}); }, {"in_dim=5", "dimensionality 2"});
  ts::func::VmapOptions none;
  none.in_dims = {std::nullopt};
  expect_error<ts::ValueError>([&] { ts::func::vmap(id, none)({a}); }, {"at least one input must be batched"});
  expect_error<ts::RuntimeError>(
      [&] { ts::func::grad([](const std::vector<Tensor>& in) { return in[0] * 2.0; })({a}); }, {"scalar Tensor"});
  expect_error<ts::ValueError>([&] { ts::func::jvp(id, {a}, {}); }, {"same length"});
  // .item() inside vmap is data-dependent: PyTorch's message.
  expect_error<ts::RuntimeError>(
      [&] {
        ts::func::vmap([](const Tensor& v) { return v * v.sum().item<double>(); })(a);
      },
      {"item"});
  // After an error the level was popped: vmap still works.
  expect_same(ts::func::vmap([](const Tensor& v) { return v * 2.0; })(a), a * 2.0);
}

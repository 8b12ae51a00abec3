// Tests of the CPU plugin's normalization family: batch / layer / group norm and their
// backwards, dropout, embedding (+ dense backward), scatter_add, index_add, slice_backward and
// select_backward. Forwards are checked against reference loops in double written here;
// backwards against central finite differences of those references (an oracle independent of
// the kernels' formulas). float32 and float64, batched and unbatched shapes, non-contiguous
// inputs, zero-size inputs and the errors.
#include <gtest/gtest.h>

#include "test_util.h"

#include <tessera/runtime.h>
#include <tessera/tessera.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

namespace {

using namespace tessera;
using tessera::testing::expect_error;
using Shape = std::vector<int64_t>;
using Vec = std::vector<double>;

int64_t numel(const Shape& s) { return tessera::testing::numel_of(s); }

// Deterministic values in about [-1.5, 1.5], different per seed.
Vec values_for(int64_t n, int seed) {
  Vec v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = std::sin(0.7 * double(i) + 1.3 * seed) * 1.5 + 0.1 * seed;
  return v;
}
Tensor data(const Shape& shape, ScalarType dt = kFloat64, int seed = 0) {
  return tensor_from_values(values_for(numel(shape), seed), shape, dt);
}
Tensor tv(const Vec& v, const Shape& shape, ScalarType dt = kFloat64) { return tensor_from_values(v, shape, dt); }
Tensor vec(const Vec& v, ScalarType dt = kFloat64) { return tensor_from_values(v, {int64_t(v.size())}, dt); }

void expect_near(const Tensor& got, const Vec& want, double tol, const std::string& what = "") {
  const Vec g = got.to_double_vector();
  ASSERT_EQ(g.size(), want.size()) << what;
  for (size_t i = 0; i < g.size(); ++i)
    ASSERT_NEAR(g[i], want[i], tol * (1 + std::abs(want[i]))) << what << " at flat index " << i;
}

// Central differences of sum(f(x) * g) with respect to x.
Vec numeric_grad(const std::function<Vec(const Vec&)>& f, Vec x, const Vec& g) {
  const double h = 1e-6;
  Vec out(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double keep = x[i];
    x[i] = keep + h;
    const Vec up = f(x);
    x[i] = keep - h;
    const Vec down = f(x);
    x[i] = keep;
    double s = 0;
    for (size_t j = 0; j < g.size(); ++j) s += (up[j] - down[j]) * g[j];
    out[i] = s / (2 * h);
  }
  return out;
}

// ---------------------------------------------------------------------------- references
// Normalises groups of elements: group_of(i) names the group of flat element i, and
// affine_of(i) the index of its weight / bias (or -1).
Vec ref_normalize(const Vec& x, int64_t groups, const std::function<int64_t(int64_t)>& group_of,
                  const std::function<int64_t(int64_t)>& affine_of, const Vec& w, const Vec& b, double eps,
                  const Vec* fixed_mean = nullptr, const Vec* fixed_var = nullptr) {
  Vec sum(size_t(groups), 0), sq(size_t(groups), 0), cnt(size_t(groups), 0);
  for (int64_t i = 0; i < int64_t(x.size()); ++i) sum[size_t(group_of(i))] += x[size_t(i)], cnt[size_t(group_of(i))]++;
  Vec mean(static_cast<size_t>(groups)), var(static_cast<size_t>(groups));
  for (size_t k = 0; k < size_t(groups); ++k) mean[k] = cnt[k] ? sum[k] / cnt[k] : 0;
  for (int64_t i = 0; i < int64_t(x.size()); ++i) {
    const double d = x[size_t(i)] - mean[size_t(group_of(i))];
    sq[size_t(group_of(i))] += d * d;
  }
  for (size_t k = 0; k < size_t(groups); ++k) var[k] = cnt[k] ? sq[k] / cnt[k] : 0;
  if (fixed_mean) mean = *fixed_mean, var = *fixed_var;
  Vec y(x.size());
  for (int64_t i = 0; i < int64_t(x.size()); ++i) {
    const size_t k = size_t(group_of(i));
    const int64_t a = affine_of(i);
    double v = (x[size_t(i)] - mean[k]) / std::sqrt(var[k] + eps);
    if (!w.empty()) v *= w[size_t(a)];
    if (!b.empty()) v += b[size_t(a)];
    y[size_t(i)] = v;
  }
  return y;
}

// Batch norm over (N, C, *): channel c = (i / HW) % C.
Vec ref_batch_norm(const Vec& x, const Shape& shape, const Vec& w, const Vec& b, double eps,
                   const Vec* rm = nullptr, const Vec* rv = nullptr) {
  const int64_t C = shape[1], HW = numel(shape) / std::max<int64_t>(1, shape[0] * C);
  auto ch = [=](int64_t i) { return (i / HW) % C; };
  return ref_normalize(x, C, ch, ch, w, b, eps, rm, rv);
}
Vec ref_layer_norm(const Vec& x, int64_t n, const Vec& w, const Vec& b, double eps) {
  return ref_normalize(x, int64_t(x.size()) / std::max<int64_t>(n, 1), [=](int64_t i) { return i / n; },
                       [=](int64_t i) { return i % n; }, w, b, eps);
}
Vec ref_group_norm(const Vec& x, int64_t N, int64_t C, int64_t HW, int64_t G, const Vec& w, const Vec& b, double eps) {
  return ref_normalize(x, N * G, [=](int64_t i) { return (i / HW / C) * G + (i / HW % C) / (C / G); },
                       [=](int64_t i) { return i / HW % C; }, w, b, eps);
}

// ---------------------------------------------------------------------------- batch norm

TEST(CpuNorm, BatchNormTrainingForwardAndRunningStats) {
  for (ScalarType dt : {kFloat32, kFloat64}) {
    for (const Shape& shape : {Shape{6, 3}, Shape{2, 3, 5}, Shape{3, 4, 2, 3}}) {
      SCOPED_TRACE(std::string(name(dt)) + " rank " + std::to_string(shape.size()));
      const int64_t C = shape[1];
      const Tensor x = data(shape, dt, 1);
      const Vec w = values_for(C, 2), b = values_for(C, 3);
      const Vec rm0 = values_for(C, 4);
      Vec rv0 = values_for(C, 5);
      for (double& v : rv0) v = std::abs(v) + 0.5;
      Tensor rm = vec(rm0, dt), rv = vec(rv0, dt);
      const uint64_t v0 = rm.version(), v1 = rv.version();
      auto [out, save_mean, save_invstd] = native_batch_norm(x, vec(w, dt), vec(b, dt), rm, rv, true, 0.1, 1e-5);
      const double tol = dt == kFloat32 ? 2e-5 : 1e-12;
      expect_near(out, ref_batch_norm(x.to_double_vector(), shape, w, b, 1e-5), tol, "out");
      EXPECT_EQ(out.dtype(), dt);
      EXPECT_EQ(out.shape(), shape);
      // Statistics: biased variance for save_invstd, unbiased for the running estimate.
      const Vec xv = x.to_double_vector();
      const int64_t HW = numel(shape) / (shape[0] * C), n = shape[0] * HW;
      Vec mean(size_t(C), 0), var(size_t(C), 0);
      for (int64_t i = 0; i < numel(shape); ++i) mean[size_t((i / HW) % C)] += xv[size_t(i)] / double(n);
      for (int64_t i = 0; i < numel(shape); ++i) {
        const double d = xv[size_t(i)] - mean[size_t((i / HW) % C)];
        var[size_t((i / HW) % C)] += d * d / double(n);
      }
      Vec invstd(static_cast<size_t>(C)), want_rm(static_cast<size_t>(C)), want_rv(static_cast<size_t>(C));
      for (size_t c = 0; c < size_t(C); ++c) {
        invstd[c] = 1 / std::sqrt(var[c] + 1e-5);
        want_rm[c] = 0.9 * rm0[c] + 0.1 * mean[c];
        want_rv[c] = 0.9 * rv0[c] + 0.1 * var[c] * double(n) / double(n - 1);
      }
      expect_near(save_mean, mean, tol, "save_mean");
      expect_near(save_invstd, invstd, tol, "save_invstd");
      expect_near(rm, want_rm, tol, "running_mean");
      expect_near(rv, want_rv, tol, "running_var");
      EXPECT_GT(rm.version(), v0);
      EXPECT_GT(rv.version(), v1);
    }
  }
}

TEST(CpuNorm, BatchNormEvalNoAffineAndNonContiguous) {
  const Shape shape{4, 3, 5};
  Tensor rm = vec({0.1, -0.2, 0.3}), rv = vec({0.5, 1.5, 2.0});
  const Tensor x = data(shape, kFloat64, 7);
  const uint64_t v0 = rm.version();
  auto [out, sm, si] = native_batch_norm(x, Tensor(), Tensor(), rm, rv, false, 0.1, 1e-3);
  const Vec m = rm.to_double_vector(), v = rv.to_double_vector();
  expect_near(out, ref_batch_norm(x.to_double_vector(), shape, {}, {}, 1e-3, &m, &v), 1e-12);
  EXPECT_EQ(sm.shape(), Shape{0});
  EXPECT_EQ(si.shape(), Shape{0});
  EXPECT_EQ(rm.version(), v0);  // eval mode leaves the running stats alone
  // A permuted (non-contiguous) input gives the result of its contiguous copy.
  const Tensor base = data({5, 4, 3}, kFloat32, 8);
  const Tensor xt = permute(base, {1, 2, 0});  // [4, 3, 5]
  ASSERT_FALSE(xt.is_contiguous());
  auto [o1, m1, s1] = native_batch_norm(xt, Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5);
  expect_near(o1, ref_batch_norm(contiguous(xt).to_double_vector(), shape, {}, {}, 1e-5), 2e-5);
  // Zero-size batch: empty output, statistics untouched.
  auto [o2, m2, s2] = native_batch_norm(zeros({0, 3, 2}, kFloat64), Tensor(), Tensor(), rm, rv, true, 0.1, 1e-5);
  EXPECT_EQ(o2.shape(), (Shape{0, 3, 2}));
  expect_near(rm, m, 0);
}

TEST(CpuNorm, BatchNormFloat32AccurateOnLargeChannels) {
  // A large offset and many elements: a float accumulator would lose the variance.
  const int64_t n = 200000;
  Vec v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = 1000.0 + double(i % 7) * 0.25;
  const Tensor x = tensor_from_values(v, {n, 1}, kFloat32);
  auto [out, mean, invstd] = native_batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 0.0);
  double m = 0, q = 0;
  for (double e : x.to_double_vector()) m += e;
  m /= double(n);
  for (double e : x.to_double_vector()) q += (e - m) * (e - m);
  EXPECT_NEAR(mean.item_double(), m, 1e-3);
  EXPECT_NEAR(invstd.item_double(), 1 / std::sqrt(q / double(n)), 1e-5 / std::sqrt(q / double(n)));
}

TEST(CpuNorm, BatchNormBackwardMatchesFiniteDifferences) {
  for (bool train : {true, false}) {
    for (const Shape& shape : {Shape{5, 3}, Shape{2, 3, 4}}) {
      SCOPED_TRACE(std::string(train ? "train" : "eval") + " rank " + std::to_string(shape.size()));
      const int64_t C = shape[1];
      const double eps = 1e-5;
      const Vec xv = values_for(numel(shape), 1), w = values_for(C, 2), b = values_for(C, 3), g = values_for(numel(shape), 4);
      const Vec rm = values_for(C, 5);
      Vec rv = values_for(C, 6);
      for (double& v : rv) v = std::abs(v) + 0.5;
      const Tensor x = tensor_from_values(xv, shape, kFloat64), wt = vec(w), rmt = vec(rm), rvt = vec(rv);
      auto [out, sm, si] = native_batch_norm(x, wt, vec(b), contiguous(rmt), contiguous(rvt), train, 0.1, eps);
      auto fwd = [&](const Vec& xs, const Vec& ws, const Vec& bs) {
        return train ? ref_batch_norm(xs, shape, ws, bs, eps) : ref_batch_norm(xs, shape, ws, bs, eps, &rm, &rv);
      };
      auto [gi, gw, gb] = native_batch_norm_backward(tensor_from_values(g, shape, kFloat64), x, wt, rmt, rvt, sm, si,
                                                     train, eps);
      expect_near(gi, numeric_grad([&](const Vec& v) { return fwd(v, w, b); }, xv, g), 1e-6, "grad_input");
      expect_near(gw, numeric_grad([&](const Vec& v) { return fwd(xv, v, b); }, w, g), 1e-6, "grad_weight");
      expect_near(gb, numeric_grad([&](const Vec& v) { return fwd(xv, w, v); }, b, g), 1e-6, "grad_bias");
      // Without weight: grad_weight is an empty [0] tensor, grad_input uses a weight of ones.
      auto [gi2, gw2, gb2] = native_batch_norm_backward(tensor_from_values(g, shape, kFloat64), x, Tensor(), rmt, rvt,
                                                        sm, si, train, eps);
      EXPECT_EQ(gw2.shape(), Shape{0});
      expect_near(gi2, numeric_grad([&](const Vec& v) { return fwd(v, {}, {}); }, xv, g), 1e-6, "grad_input, no weight");
      expect_near(gb2, numeric_grad([&](const Vec& v) { return fwd(xv, {}, v); }, Vec(size_t(C), 0.0), g), 1e-6);
    }
  }
  // float32 runs the same code: compared with the float64 result.
  const Tensor x = data({4, 3, 2}, kFloat32, 1), g = data({4, 3, 2}, kFloat32, 2), w = data({3}, kFloat32, 3);
  auto [o, sm, si] = native_batch_norm(x, w, Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5);
  auto [gi, gw, gb] = native_batch_norm_backward(g, x, w, Tensor(), Tensor(), sm, si, true, 1e-5);
  auto [o64, sm64, si64] = native_batch_norm(to(x, kFloat64), to(w, kFloat64), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5);
  auto [gi64, gw64, gb64] = native_batch_norm_backward(to(g, kFloat64), to(x, kFloat64), to(w, kFloat64), Tensor(), Tensor(),
                                                       sm64, si64, true, 1e-5);
  EXPECT_EQ(gi.dtype(), kFloat32);
  expect_near(gi, gi64.to_double_vector(), 1e-4);
  expect_near(gw, gw64.to_double_vector(), 1e-4);
}

TEST(CpuNorm, BatchNormErrors) {
  const Tensor x = zeros({4, 3});
  expect_error<ValueError>([&] { native_batch_norm(zeros({4}), Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5); },
                           {"native_batch_norm", "at least 2 dimensions", "[4]"});
  expect_error<ValueError>([&] { native_batch_norm(x, zeros({4}), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5); },
                           {"native_batch_norm", "weight", "[3]", "[4]"});
  expect_error<TypeError>(
      [&] { native_batch_norm(zeros({4, 3}, kInt64), Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5); },
      {"native_batch_norm", "floating", "int64"});
  expect_error<ValueError>([&] { native_batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), false, 0.1, 1e-5); },
                           {"native_batch_norm", "running_mean", "evaluation"});
  expect_error<ValueError>(
      [&] { native_batch_norm(zeros({1, 3}), Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5); },
      {"native_batch_norm", "more than 1 value per channel"});
  expect_error<ValueError>(
      [&] { native_batch_norm_backward(zeros({4, 2}), x, Tensor(), Tensor(), Tensor(), zeros({3}), zeros({3}), true, 1e-5); },
      {"native_batch_norm_backward", "grad_out", "[4, 3]", "[4, 2]"});
  expect_error<ValueError>(
      [&] { native_batch_norm_backward(x, x, Tensor(), Tensor(), Tensor(), Tensor(), Tensor(), true, 1e-5); },
      {"native_batch_norm_backward", "save_mean"});
}

// ---------------------------------------------------------------------------- layer norm

TEST(CpuNorm, LayerNormForward) {
  for (ScalarType dt : {kFloat32, kFloat64}) {
    for (const auto& [shape, normalized] : std::vector<std::pair<Shape, Shape>>{
             {{7}, {7}}, {{3, 8}, {8}}, {{2, 3, 4}, {3, 4}}, {{2, 2, 3, 5}, {5}}, {{0, 4}, {4}}}) {
      SCOPED_TRACE(std::string(name(dt)) + " rank " + std::to_string(shape.size()));
      const int64_t n = numel(normalized);
      const Tensor x = data(shape, dt, 1);
      const Vec w = values_for(n, 2), b = values_for(n, 3);
      const double tol = dt == kFloat32 ? 2e-5 : 1e-12;
      for (bool affine : {true, false}) {
        auto [out, mean, rstd] = native_layer_norm(x, normalized, affine ? tensor_from_values(w, normalized, dt) : Tensor(),
                                                   affine ? tensor_from_values(b, normalized, dt) : Tensor(), 1e-5);
        expect_near(out, ref_layer_norm(x.to_double_vector(), n, affine ? w : Vec{}, affine ? b : Vec{}, 1e-5), tol);
        Shape stat_shape(shape.begin(), shape.end() - int64_t(normalized.size()));
        stat_shape.insert(stat_shape.end(), normalized.size(), 1);
        EXPECT_EQ(mean.shape(), stat_shape);
        EXPECT_EQ(rstd.shape(), stat_shape);
        EXPECT_EQ(mean.dtype(), dt);
      }
    }
  }
  // Non-contiguous input.
  const Tensor xt = transpose(data({6, 4}, kFloat32, 5), 0, 1);  // [4, 6]
  auto [out, mean, rstd] = native_layer_norm(xt, {6}, Tensor(), Tensor(), 1e-5);
  expect_near(out, ref_layer_norm(contiguous(xt).to_double_vector(), 6, {}, {}, 1e-5), 2e-5);
  // float32 statistics accumulate in double: one long row with a large offset.
  const int64_t n = 300000;
  Vec v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = 500.0 + double(i % 5) * 0.5;
  auto [o2, m2, r2] = native_layer_norm(tensor_from_values(v, {1, n}, kFloat32), {n}, Tensor(), Tensor(), 0.0);
  EXPECT_NEAR(m2.item_double(), 501.0, 1e-4);
  EXPECT_NEAR(r2.item_double(), 1 / std::sqrt(0.5), 1e-4);
}

TEST(CpuNorm, LayerNormBackwardMatchesFiniteDifferences) {
  for (const auto& [shape, normalized] :
       std::vector<std::pair<Shape, Shape>>{{{3, 4}, {4}}, {{2, 3, 2}, {3, 2}}, {{20, 3}, {3}}}) {
    const int64_t n = numel(normalized);
    const double eps = 1e-5;
    const Vec xv = values_for(numel(shape), 1), w = values_for(n, 2), b = values_for(n, 3), g = values_for(numel(shape), 4);
    const Tensor x = tensor_from_values(xv, shape), wt = tensor_from_values(w, normalized),
                 bt = tensor_from_values(b, normalized), gt = tensor_from_values(g, shape);
    auto [out, mean, rstd] = native_layer_norm(x, normalized, wt, bt, eps);
    auto [gi, gw, gb] = native_layer_norm_backward(gt, x, normalized, mean, rstd, wt, bt);
    expect_near(gi, numeric_grad([&](const Vec& v) { return ref_layer_norm(v, n, w, b, eps); }, xv, g), 1e-6);
    expect_near(gw, numeric_grad([&](const Vec& v) { return ref_layer_norm(xv, n, v, b, eps); }, w, g), 1e-6);
    expect_near(gb, numeric_grad([&](const Vec& v) { return ref_layer_norm(xv, n, w, v, eps); }, b, g), 1e-6);
    EXPECT_EQ(gw.shape(), normalized);
    auto [gi2, gw2, gb2] = native_layer_norm_backward(gt, x, normalized, mean, rstd, Tensor(), Tensor());
    expect_near(gi2, numeric_grad([&](const Vec& v) { return ref_layer_norm(v, n, {}, {}, eps); }, xv, g), 1e-6);
    EXPECT_EQ(gw2.shape(), Shape{0});
    EXPECT_EQ(gb2.shape(), Shape{0});
  }
}

TEST(CpuNorm, LayerNormErrors) {
  expect_error<ValueError>([] { native_layer_norm(zeros({2, 3}), {4}, Tensor(), Tensor(), 1e-5); },
                           {"native_layer_norm", "normalized_shape", "[2, 3]"});
  expect_error<ValueError>([] { native_layer_norm(zeros({2, 3}), {2, 2, 3}, Tensor(), Tensor(), 1e-5); },
                           {"native_layer_norm"});
  expect_error<ValueError>([] { native_layer_norm(zeros({2, 3}), {3}, zeros({4}), Tensor(), 1e-5); },
                           {"native_layer_norm", "weight", "[3]", "[4]"});
  expect_error<TypeError>([] { native_layer_norm(zeros({2, 3}, kInt32), {3}, Tensor(), Tensor(), 1e-5); },
                          {"native_layer_norm", "int32"});
  expect_error<ValueError>([] { native_layer_norm_backward(zeros({2, 3}), zeros({2, 3}), {3}, zeros({5}), zeros({2}), Tensor(), Tensor()); },
                           {"native_layer_norm_backward", "mean and rstd"});
}

// ---------------------------------------------------------------------------- group norm

TEST(CpuNorm, GroupNormForwardAndBackward) {
  for (ScalarType dt : {kFloat32, kFloat64}) {
    for (const auto& [shape, G] : std::vector<std::pair<Shape, int64_t>>{
             {{2, 4, 3}, 2}, {{3, 6}, 3}, {{2, 6, 2, 2}, 1}, {{1, 4, 5}, 4}, {{0, 4, 2}, 2}}) {
      SCOPED_TRACE(std::string(name(dt)) + " rank " + std::to_string(shape.size()) + " groups " + std::to_string(G));
      const int64_t N = shape[0], C = shape[1], HW = numel(shape) / std::max<int64_t>(1, N * C);
      const double eps = 1e-5;
      const Vec xv = values_for(numel(shape), 1), w = values_for(C, 2), b = values_for(C, 3), g = values_for(numel(shape), 4);
      const Tensor x = tensor_from_values(xv, shape, dt), wt = vec(w, dt), bt = vec(b, dt);
      auto [out, mean, rstd] = native_group_norm(x, wt, bt, N, C, HW, G, eps);
      const double tol = dt == kFloat32 ? 2e-5 : 1e-12;
      expect_near(out, ref_group_norm(x.to_double_vector(), N, C, HW, G, w, b, eps), tol);
      EXPECT_EQ(mean.shape(), (Shape{N, G}));
      if (dt != kFloat64) continue;
      auto [gi, gw, gb] = native_group_norm_backward(tensor_from_values(g, shape), x, mean, rstd, wt, N, C, HW, G);
      auto f = [&](const Vec& xs, const Vec& ws, const Vec& bs) { return ref_group_norm(xs, N, C, HW, G, ws, bs, eps); };
      expect_near(gi, numeric_grad([&](const Vec& v) { return f(v, w, b); }, xv, g), 1e-6, "grad_input");
      expect_near(gw, numeric_grad([&](const Vec& v) { return f(xv, v, b); }, w, g), 1e-6, "grad_weight");
      expect_near(gb, numeric_grad([&](const Vec& v) { return f(xv, w, v); }, b, g), 1e-6, "grad_bias");
      auto [gi2, gw2, gb2] = native_group_norm_backward(tensor_from_values(g, shape), x, mean, rstd, Tensor(), N, C, HW, G);
      expect_near(gi2, numeric_grad([&](const Vec& v) { return f(v, {}, {}); }, xv, g), 1e-6, "grad_input, no weight");
      EXPECT_EQ(gw2.shape(), Shape{0});
    }
  }
  // Non-contiguous input.
  const Tensor xt = permute(data({3, 2, 4}, kFloat64, 3), {1, 2, 0});  // [2, 4, 3]
  auto [out, mean, rstd] = native_group_norm(xt, Tensor(), Tensor(), 2, 4, 3, 2, 1e-5);
  expect_near(out, ref_group_norm(contiguous(xt).to_double_vector(), 2, 4, 3, 2, {}, {}, 1e-5), 1e-12);
}

TEST(CpuNorm, GroupNormErrors) {
  expect_error<ValueError>([] { native_group_norm(zeros({2, 6, 3}), Tensor(), Tensor(), 2, 6, 3, 4, 1e-5); },
                           {"native_group_norm", "group", "divide", "C = 6", "group = 4"});
  expect_error<ValueError>([] { native_group_norm(zeros({2, 6, 3}), Tensor(), Tensor(), 2, 6, 4, 2, 1e-5); },
                           {"native_group_norm", "HxW = 4", "[2, 6, 3]"});
  expect_error<ValueError>([] { native_group_norm(zeros({2, 6, 3}), zeros({3}), Tensor(), 2, 6, 3, 2, 1e-5); },
                           {"native_group_norm", "weight", "[6]", "[3]"});
  expect_error<ValueError>([] { native_group_norm_backward(zeros({2, 6, 3}), zeros({2, 6, 3}), zeros({3}), zeros({4}), Tensor(), 2, 6, 3, 2); },
                           {"native_group_norm_backward", "mean and rstd"});
}

// ---------------------------------------------------------------------------- dropout

TEST(CpuNorm, Dropout) {
  const Tensor x = data({50, 40}, kFloat32, 1);
  const Vec xv = x.to_double_vector();
  // Identity in evaluation mode and for p = 0.
  for (auto [p, train] : std::vector<std::pair<double, std::optional<bool>>>{{0.5, false}, {0.0, true}, {0.0, std::nullopt}}) {
    auto [out, mask] = native_dropout(x, p, train);
    expect_near(out, xv, 0);
    EXPECT_EQ(mask.dtype(), kBool);
    for (double m : mask.to_double_vector()) ASSERT_EQ(m, 1.0);
  }
  // p = 1 drops everything.
  auto [zero, none] = native_dropout(x, 1.0, true);
  for (double v : zero.to_double_vector()) ASSERT_EQ(v, 0.0);
  for (double m : none.to_double_vector()) ASSERT_EQ(m, 0.0);
  // p = 0.3: kept elements scaled by 1 / 0.7, about 70% kept; train=None means training.
  for (ScalarType dt : {kFloat32, kFloat64}) {
    const Tensor xd = to(x, dt);
    manual_seed(123);
    auto [out, mask] = native_dropout(xd, 0.3, std::nullopt);
    const Vec o = out.to_double_vector(), m = mask.to_double_vector();
    double kept = 0;
    for (size_t i = 0; i < o.size(); ++i) {
      kept += m[i];
      ASSERT_NEAR(o[i], m[i] ? xd.to_double_vector()[i] / 0.7 : 0.0, 1e-6 * (1 + std::abs(o[i])));
    }
    EXPECT_NEAR(kept / double(o.size()), 0.7, 0.05);
    // Reproducible under manual_seed; a different seed gives a different mask.
    manual_seed(123);
    auto [out2, mask2] = native_dropout(xd, 0.3, true);
    EXPECT_EQ(mask2.to_double_vector(), m);
    manual_seed(124);
    auto [out3, mask3] = native_dropout(xd, 0.3, true);
    EXPECT_NE(mask3.to_double_vector(), m);
    // Backward: grad * mask * scale.
    const Tensor g = data({50, 40}, dt, 2);
    const Tensor gi = native_dropout_backward(g, mask, 1 / 0.7);
    const Vec gv = g.to_double_vector();
    Vec want(gv.size());
    for (size_t i = 0; i < gv.size(); ++i) want[i] = m[i] ? gv[i] / 0.7 : 0.0;
    expect_near(gi, want, dt == kFloat32 ? 1e-6 : 1e-12);
  }
  // Non-contiguous input and zero-size input.
  auto [ot, mt] = native_dropout(transpose(x, 0, 1), 0.0, true);
  expect_near(ot, contiguous(transpose(x, 0, 1)).to_double_vector(), 0);
  auto [oe, me] = native_dropout(zeros({0, 3}), 0.5, true);
  EXPECT_EQ(oe.shape(), (Shape{0, 3}));
  EXPECT_EQ(me.shape(), (Shape{0, 3}));
  expect_error<ValueError>([&] { native_dropout(x, 1.5, true); }, {"native_dropout", "[0, 1]", "1.5"});
  expect_error<TypeError>([&] { native_dropout(zeros({3}, kInt64), 0.5, true); }, {"native_dropout", "int64"});
  expect_error<TypeError>([&] { native_dropout_backward(x, x, 2.0); }, {"native_dropout_backward", "bool", "float32"});
  expect_error<ValueError>([&] { native_dropout_backward(x, zeros({3}, kBool), 2.0); }, {"native_dropout_backward", "mask"});
}

// ---------------------------------------------------------------------------- embedding

TEST(CpuNorm, EmbeddingForward) {
  const Tensor w = data({6, 4}, kFloat32, 1);
  const Vec wv = w.to_double_vector();
  for (ScalarType it : {kInt64, kInt32}) {
    const Tensor idx = tv({5, 0, 2, 2, 1, 5}, {2, 3}, it);
    const Tensor out = embedding(w, idx);
    EXPECT_EQ(out.shape(), (Shape{2, 3, 4}));
    Vec want;
    for (double i : idx.to_double_vector())
      for (int64_t j = 0; j < 4; ++j) want.push_back(wv[size_t(i) * 4 + size_t(j)]);
    expect_near(out, want, 0);
  }
  // A 0-d index, a transposed weight, integer weights and empty indices.
  EXPECT_EQ(embedding(w, tv({3}, {}, kInt64)).shape(), (Shape{4}));
  const Tensor wt = transpose(data({4, 6}, kFloat64, 2), 0, 1);  // [6, 4], column-major
  const Tensor idx = tv({1, 4}, {2}, kInt64);
  const Vec wtv = contiguous(wt).to_double_vector();
  Vec want;
  for (int64_t r : {1, 4})
    for (int64_t j = 0; j < 4; ++j) want.push_back(wtv[size_t(r * 4 + j)]);
  expect_near(embedding(wt, idx), want, 0);
  const Tensor wi = tessera::testing::seq({5, 3}, kInt16);
  expect_near(embedding(wi, idx), {3, 4, 5, 12, 13, 14}, 0);
  EXPECT_EQ(embedding(w, zeros({0}, kInt64)).shape(), (Shape{0, 4}));
  expect_error<IndexError>([&] { embedding(w, tv({6}, {1}, kInt64)); }, {"embedding", "index 6", "6"});
  expect_error<IndexError>([&] { embedding(w, tv({-1}, {1}, kInt64)); }, {"embedding", "index -1"});
  expect_error<TypeError>([&] { embedding(w, zeros({2})); }, {"embedding", "int64 or int32", "float32"});
  expect_error<ValueError>([&] { embedding(zeros({6}), idx); }, {"embedding", "2-D"});
}

TEST(CpuNorm, EmbeddingDenseBackward) {
  for (ScalarType dt : {kFloat32, kFloat64}) {
    for (bool by_freq : {false, true}) {
      for (int64_t padding : {-1, 2}) {
        const Tensor idx = tv({2, 0, 2, 4, 2, 0, 1}, {7}, kInt64);
        const Tensor g = data({7, 3}, dt, 3);
        const Tensor gw = embedding_dense_backward(g, idx, 6, padding, by_freq);
        EXPECT_EQ(gw.shape(), (Shape{6, 3}));
        const Vec iv = idx.to_double_vector(), gv = g.to_double_vector();
        Vec want(18, 0.0), count(6, 0.0);
        for (double i : iv) count[size_t(i)]++;
        for (size_t p = 0; p < iv.size(); ++p) {
          const int64_t r = int64_t(iv[p]);
          if (r == padding) continue;
          for (size_t j = 0; j < 3; ++j) want[size_t(r) * 3 + j] += gv[p * 3 + j] / (by_freq ? count[size_t(r)] : 1.0);
        }
        expect_near(gw, want, dt == kFloat32 ? 1e-6 : 1e-12);
      }
    }
  }
  // Batched indices, a non-contiguous grad, many positions over threads.
  const int64_t n = 5000, V = 37, D = 16;
  Vec iv(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) iv[size_t(i)] = double((i * 7919) % V);
  const Tensor idx = tensor_from_values(iv, {50, 100}, kInt32);
  const Tensor g = permute(data({D, 50, 100}, kFloat64, 4), {1, 2, 0});
  const Vec gv = contiguous(g).to_double_vector();
  Vec want(size_t(V * D), 0.0);
  for (int64_t p = 0; p < n; ++p)
    for (int64_t j = 0; j < D; ++j) want[size_t(int64_t(iv[size_t(p)]) * D + j)] += gv[size_t(p * D + j)];
  expect_near(embedding_dense_backward(g, idx, V, -1, false), want, 1e-12);
  expect_error<IndexError>([&] { embedding_dense_backward(zeros({2, 3}), tv({0, 9}, {2}, kInt64), 5, -1, false); },
                           {"embedding_dense_backward", "index 9"});
  expect_error<ValueError>([&] { embedding_dense_backward(zeros({3, 3}), tv({0, 1}, {2}, kInt64), 5, -1, false); },
                           {"embedding_dense_backward", "grad_output"});
}

// ---------------------------------------------------------------------------- scatter_add / index_add

Shape unravel(int64_t flat, const Shape& shape) {
  Shape i(shape.size());
  for (size_t d = shape.size(); d-- > 0;) i[d] = flat % shape[d], flat /= shape[d];
  return i;
}
int64_t ravel(const Shape& i, const Shape& shape) {
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + i[d];
  return flat;
}

Vec ref_scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  Vec out = self.to_double_vector();
  const Vec iv = index.to_double_vector(), sv = src.to_double_vector();
  for (int64_t f = 0; f < index.numel(); ++f) {
    Shape i = unravel(f, index.shape());
    const double s = sv[size_t(ravel(i, src.shape()))];
    i[size_t(dim)] = int64_t(iv[size_t(f)]);
    out[size_t(ravel(i, self.shape()))] += s;
  }
  return out;
}

Vec ref_index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source, double alpha) {
  Vec out = self.to_double_vector();
  const Vec iv = index.to_double_vector(), sv = source.to_double_vector();
  for (int64_t f = 0; f < source.numel(); ++f) {
    Shape i = unravel(f, source.shape());
    i[size_t(dim)] = int64_t(iv[size_t(i[size_t(dim)])]);
    out[size_t(ravel(i, self.shape()))] += alpha * sv[size_t(f)];
  }
  return out;
}

TEST(CpuNorm, ScatterAdd) {
  const Tensor index = tv({0, 2, 1, 2, 2, 0, 1, 1}, {2, 4}, kInt64);
  for (ScalarType dt : {kFloat32, kFloat64, kInt64, kInt32, kInt16, kInt8, kUInt8, kFloat16, kBFloat16}) {
    SCOPED_TRACE(std::string(name(dt)));
    const Tensor self = tessera::testing::seq({3, 4}, dt), src = tessera::testing::seq({2, 5}, dt, 1);
    expect_near(scatter_add(self, 0, index, src), ref_scatter_add(self, 0, index, src), 0);
    const Tensor idx1 = tv({3, 3, 0, 1, 1, 1}, {3, 2}, kInt32);
    expect_near(scatter_add(self, 1, idx1, view(src, {5, 2})), ref_scatter_add(self, 1, idx1, view(src, {5, 2})), 0);
  }
  // bool adds as logical or.
  const Tensor b = zeros({3}, kBool);
  expect_near(scatter_add(b, 0, tv({1, 1}, {2}, kInt64), tv({1, 0}, {2}, kBool)),
              {0, 1, 0}, 0);
  // In place on a non-contiguous self: version bumped, the view's base changed.
  Tensor base = zeros({4, 3}, kFloat64);
  Tensor view = transpose(base, 0, 1);  // [3, 4]
  const uint64_t v0 = base.version();
  const Tensor src = data({2, 4}, kFloat64, 5);
  const Vec want = ref_scatter_add(contiguous(view), 0, index, src);
  Tensor r = scatter_add_(view, 0, index, src);
  EXPECT_EQ(r.impl(), view.impl());
  EXPECT_GT(base.version(), v0);
  expect_near(view, want, 1e-12);
  // Large: many columns split over threads, with repeated indices.
  const int64_t R = 8, C = 20000;
  Vec iv(static_cast<size_t>(16 * C));
  for (size_t i = 0; i < iv.size(); ++i) iv[i] = double((i * 31) % R);
  const Tensor big_index = tensor_from_values(iv, {16, C}, kInt64);
  const Tensor big_src = data({16, C}, kFloat64, 6), big_self = data({R, C}, kFloat64, 7);
  expect_near(scatter_add(big_self, 0, big_index, big_src), ref_scatter_add(big_self, 0, big_index, big_src), 1e-12);
  // 0-d and empty.
  expect_near(scatter_add(tv({2}, {}, kFloat32), 0, tv({0}, {}, kInt64),
                          tv({3}, {}, kFloat32)), {5}, 0);
  expect_near(scatter_add(data({2, 2}), 0, zeros({0, 2}, kInt64), data({0, 2})), data({2, 2}).to_double_vector(), 0);
  // Errors leave self untouched.
  Tensor keep = zeros({3, 4});
  expect_error<IndexError>([&] { scatter_add_(keep, 0, tv({0, 3}, {1, 2}, kInt64), zeros({1, 2})); },
                           {"scatter_add_", "index 3", "size 3"});
  expect_near(keep, Vec(12, 0.0), 0);
  expect_error<TypeError>([&] { scatter_add(keep, 0, index, zeros({2, 4}, kFloat64)); }, {"scatter_add", "float64"});
  expect_error<TypeError>([&] { scatter_add(keep, 0, to(index, kFloat32), zeros({2, 4})); }, {"scatter_add", "int64 or int32"});
  expect_error<ValueError>([&] { scatter_add(keep, 0, index, zeros({2, 3})); }, {"scatter_add", "src"});
  expect_error<IndexError>([&] { scatter_add(keep, 2, index, zeros({2, 4})); }, {"scatter_add", "dimension 2"});
}

TEST(CpuNorm, IndexAdd) {
  for (ScalarType dt : {kFloat32, kFloat64, kInt64, kInt32, kInt16, kUInt8, kFloat16}) {
    SCOPED_TRACE(std::string(name(dt)));
    const Tensor self = tessera::testing::seq({4, 3}, dt);
    const Tensor index = tv({3, 0, 3}, {3}, kInt64);
    const Tensor src = tessera::testing::seq({3, 3}, dt, 1);
    expect_near(index_add(self, 0, index, src), ref_index_add(self, 0, index, src, 1), 0);
    expect_near(index_add(self, 0, index, src, 2), ref_index_add(self, 0, index, src, 2), 0);
    const Tensor idx1 = tv({2, 2}, {2}, kInt32);
    const Tensor src1 = tessera::testing::seq({4, 2}, dt, 1);
    expect_near(index_add(self, 1, idx1, src1), ref_index_add(self, 1, idx1, src1, 1), 0);
  }
  const Tensor self = data({5, 6, 3}, kFloat64, 1);
  const Tensor index = tv({4, 4, 1, 0}, {4}, kInt64);
  const Tensor src = permute(data({6, 4, 3}, kFloat64, 2), {1, 0, 2});  // non-contiguous [4, 6, 3]
  expect_near(index_add(self, 0, index, src, 0.5), ref_index_add(self, 0, index, src, 0.5), 1e-12);
  expect_near(index_add(self, -1, tv({2}, {}, kInt64), data({5, 6, 1}, kFloat64, 3)),
              ref_index_add(self, 2, tv({2}, {1}, kInt64), data({5, 6, 1}, kFloat64, 3), 1), 1e-12);
  // In place, and a large one (an embedding-style row update) split over threads.
  Tensor target = zeros({5, 6, 3}, kFloat64);
  const uint64_t v0 = target.version();
  index_add_(target, 0, index, src);
  EXPECT_GT(target.version(), v0);
  expect_near(target, ref_index_add(zeros({5, 6, 3}, kFloat64), 0, index, src, 1), 1e-12);
  const int64_t V = 50, D = 3000, n = 400;
  Vec iv(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) iv[size_t(i)] = double((i * 13) % V);
  const Tensor big_index = tensor_from_values(iv, {n}, kInt64);
  const Tensor big_src = data({n, D}, kFloat32, 4), big_self = zeros({V, D});
  expect_near(index_add(big_self, 0, big_index, big_src), ref_index_add(big_self, 0, big_index, big_src, 1), 1e-5);
  // Errors.
  expect_error<IndexError>([&] { index_add(self, 0, tv({5}, {1}, kInt64), data({1, 6, 3})); },
                           {"index_add", "index 5", "size 5"});
  expect_error<ValueError>([&] { index_add(self, 0, index, data({3, 6, 3})); }, {"index_add", "source", "[3, 6, 3]"});
  expect_error<ValueError>([&] { index_add(self, 0, zeros({2, 2}, kInt64), data({4, 6, 3})); }, {"index_add", "1-D"});
  expect_error<TypeError>([&] { index_add(self, 0, index, data({4, 6, 3}, kFloat32)); }, {"index_add", "float32"});
  expect_error<TypeError>([&] { index_add(zeros({3}, kInt64), 0, tv({0}, {1}, kInt64), zeros({1}, kInt64), 0.5); },
                          {"index_add", "alpha"});
}

// ---------------------------------------------------------------------------- view backwards

TEST(CpuNorm, SliceAndSelectBackward) {
  for (ScalarType dt : {kFloat32, kFloat64, kInt64, kBool}) {
    SCOPED_TRACE(std::string(name(dt)));
    const Shape sizes{4, 7};
    const Tensor g = tessera::testing::seq({4, 3}, dt, 1);
    const Tensor out = slice_backward(g, sizes, 1, 1, 7, 2);  // columns 1, 3, 5
    EXPECT_EQ(out.shape(), sizes);
    EXPECT_EQ(out.dtype(), dt);
    Vec want(28, 0.0);
    const Vec gv = g.to_double_vector();
    for (int64_t r = 0; r < 4; ++r)
      for (int64_t j = 0; j < 3; ++j) want[size_t(r * 7 + 1 + 2 * j)] = gv[size_t(r * 3 + j)];
    expect_near(out, want, 0);
    // select_backward on each dim, negative index.
    const Tensor gs = tessera::testing::seq({7}, dt, 1);
    Vec want_s(28, 0.0);
    for (int64_t j = 0; j < 7; ++j) want_s[size_t(3 * 7 + j)] = gs.to_double_vector()[size_t(j)];
    expect_near(select_backward(gs, sizes, 0, -1), want_s, 0);
  }
  // A non-contiguous grad, a 3-D select, an empty slice, and the normalisation of start / end.
  const Tensor g = transpose(data({3, 2}), 0, 1);  // [2, 3]
  const Tensor sel = select_backward(g, {2, 4, 3}, 1, 2);
  const Vec gv = contiguous(g).to_double_vector();
  Vec want(24, 0.0);
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t k = 0; k < 3; ++k) want[size_t(i * 12 + 2 * 3 + k)] = gv[size_t(i * 3 + k)];
  expect_near(sel, want, 0);
  expect_near(slice_backward(zeros({0, 3}), {4, 3}, 0, 2, 2, 1), Vec(12, 0.0), 0);
  expect_near(slice_backward(tessera::testing::seq({2}, kFloat64, 1), {5}, 0, -2, INT64_MAX, 1), {0, 0, 0, 1, 2}, 0);
  expect_error<ValueError>([] { slice_backward(zeros({2}), {5}, 0, 0, 5, 1); }, {"slice_backward", "[5]", "[2]"});
  expect_error<ValueError>([] { slice_backward(zeros({2}), {5}, 0, 0, 5, 0); }, {"slice_backward", "step"});
  expect_error<IndexError>([] { select_backward(zeros({3}), {4, 3}, 0, 4); }, {"select_backward", "index 4", "size 4"});
  expect_error<ValueError>([] { select_backward(zeros({4}), {4, 3}, 0, 1); }, {"select_backward", "[3]", "[4]"});
  expect_error<IndexError>([] { select_backward(zeros({4}), {4, 3}, 2, 1); }, {"select_backward", "dimension 2"});
}

}  // namespace

// Tests of the CPU plugin's factories (empty, zeros, ones, full, arange, linspace, eye) and
// random factories (rand, randn, randint): shapes, dtypes, values against plain references,
// reproducibility after manual_seed, simple statistics and the errors.
#include <gtest/gtest.h>

#include "test_util.h"

#include <tessera/runtime.h>
#include <tessera/tessera.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <vector>

namespace {

using tessera::testing::expect_error;

using namespace tessera;

const std::vector<ScalarType> kAllDtypes = {kBool,    kUInt8,    kInt8,    kInt16,  kInt32,
                                            kInt64,   kFloat16,  kBFloat16, kFloat32, kFloat64};
const std::vector<ScalarType> kFloatDtypes = {kFloat16, kBFloat16, kFloat32, kFloat64};


std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size());
  int64_t n = 1;
  for (size_t i = shape.size(); i-- > 0;) s[i] = n, n *= std::max<int64_t>(shape[i], 1);
  return s;
}

void expect_geometry(const Tensor& t, const std::vector<int64_t>& shape, ScalarType dtype) {
  EXPECT_EQ(t.shape(), shape);
  EXPECT_EQ(t.dtype(), dtype);
  EXPECT_TRUE(t.is_contiguous());
  auto strides = t.strides();
  EXPECT_EQ(std::vector<int64_t>(strides.begin(), strides.end()), contiguous_strides(shape));
  EXPECT_TRUE(t.device().is_cpu());
}

void expect_values(const Tensor& t, const std::vector<double>& want, double tol = 0) {
  auto got = t.to_double_vector();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "at " << i;
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s / double(v.size());
}
double stddev(const std::vector<double>& v) {
  double m = mean(v), s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / double(v.size() - 1));
}

// ---- empty, zeros, ones, full

TEST(CpuFactories, ZerosAndOnesDefaultToFloat32) {
  Tensor z = zeros({2, 3});
  expect_geometry(z, {2, 3}, kFloat32);
  expect_values(z, std::vector<double>(6, 0.0));
  Tensor o = ones({4});
  expect_geometry(o, {4}, kFloat32);
  expect_values(o, std::vector<double>(4, 1.0));
  expect_geometry(empty({3, 0, 2}), {3, 0, 2}, kFloat32);
}

TEST(CpuFactories, EveryDtype) {
  for (ScalarType dt : kAllDtypes) {
    SCOPED_TRACE(std::string(name(dt)));
    Tensor z = zeros({3, 2}, dt);
    expect_geometry(z, {3, 2}, dt);
    expect_values(z, std::vector<double>(6, 0.0));
    Tensor o = ones({5}, dt);
    expect_geometry(o, {5}, dt);
    expect_values(o, std::vector<double>(5, 1.0));
    Tensor f = full({2, 2}, 1, dt);
    expect_values(f, std::vector<double>(4, 1.0));
    expect_geometry(empty({2, 5}, dt), {2, 5}, dt);
  }
}

TEST(CpuFactories, ZeroDimAndEmptyShapes) {
  Tensor s = zeros({});
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.numel(), 1);
  EXPECT_EQ(s.item_double(), 0.0);
  EXPECT_EQ(full({}, 2.5).item_double(), 2.5);
  EXPECT_EQ(ones({0}).numel(), 0);
  EXPECT_EQ(zeros({4, 0}).shape(), (std::vector<int64_t>{4, 0}));
}

TEST(CpuFactories, FullInfersDtypeFromTheValueLikePyTorch) {
  Tensor f = full({2, 3}, 3.5);
  expect_geometry(f, {2, 3}, kFloat32);
  expect_values(f, std::vector<double>(6, 3.5));
  Tensor i = full({3}, int64_t(7));
  EXPECT_EQ(i.dtype(), kInt64);
  expect_values(i, {7, 7, 7});
  Tensor b = full({2}, true);
  EXPECT_EQ(b.dtype(), kBool);
  expect_values(b, {1, 1});
  Tensor d = full({2}, 3.5, kFloat64);
  EXPECT_EQ(d.dtype(), kFloat64);
  expect_values(d, {3.5, 3.5});
  // An int64 value beyond 2^53 stays exact.
  Tensor big = full({1}, int64_t(9007199254740993));
  EXPECT_EQ(big.item_int(), int64_t(9007199254740993));
  expect_values(full({2}, -1.5, kInt32), {-1, -1});
  expect_values(full({2}, 0.1, kFloat16), {0.0999755859375, 0.0999755859375});
}

TEST(CpuFactories, Errors) {
  expect_error<ValueError>([] { zeros({2, -1}); }, {"zeros", "non-negative", "[2, -1]"});
  expect_error<ValueError>([] { empty({-3}); }, {"empty", "non-negative"});
  expect_error<ValueError>([] { full({2}, 300, kInt8); }, {"full", "300", "int8"});
  expect_error<ValueError>([] { full({2}, -1, kUInt8); }, {"full", "uint8"});
  expect_error<ValueError>([] { full({2}, std::nan(""), kInt32); }, {"full", "int32"});
}

// ---- arange

TEST(CpuFactories, ArangeIntegerArgumentsGiveInt64) {
  Tensor a = arange(5);
  expect_geometry(a, {5}, kInt64);
  expect_values(a, {0, 1, 2, 3, 4});
  Tensor b = arange(Scalar(0), Scalar(10), Scalar(3));
  expect_geometry(b, {4}, kInt64);
  expect_values(b, {0, 3, 6, 9});
  expect_values(arange(Scalar(5), Scalar(0), Scalar(-2)), {5, 3, 1});
  expect_values(arange(Scalar(-3), Scalar(3)), {-3, -2, -1, 0, 1, 2});
  EXPECT_EQ(arange(0).numel(), 0);
  EXPECT_EQ(arange(Scalar(4), Scalar(4)).numel(), 0);
  // Exact beyond 2^53.
  Tensor big = arange(Scalar(int64_t(1) << 60), Scalar((int64_t(1) << 60) + 3));
  EXPECT_EQ(select(big, 0, 2).item_int(), (int64_t(1) << 60) + 2);
}

TEST(CpuFactories, ArangeFloatingArguments) {
  Tensor a = arange(Scalar(0.0), Scalar(1.0), Scalar(0.25));
  expect_geometry(a, {4}, kFloat32);
  expect_values(a, {0, 0.25, 0.5, 0.75});
  // The length is ceil((end - start) / step).
  EXPECT_EQ(arange(Scalar(1), Scalar(2.5), Scalar(0.5)).numel(), 3);
  EXPECT_EQ(arange(Scalar(0), Scalar(1), Scalar(0.3)).numel(), 4);
  EXPECT_EQ(arange(Scalar(0.0), Scalar(-1.0), Scalar(-0.5)).numel(), 2);
  expect_values(arange(2.5), {0, 1, 2});
  EXPECT_EQ(arange(2.5).dtype(), kFloat32);
}

TEST(CpuFactories, ArangeExplicitDtypes) {
  for (ScalarType dt : {kUInt8, kInt8, kInt16, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64}) {
    SCOPED_TRACE(std::string(name(dt)));
    Tensor a = arange(Scalar(1), Scalar(7), Scalar(2), dt);
    expect_geometry(a, {3}, dt);
    expect_values(a, {1, 3, 5});
  }
  expect_values(arange(Scalar(0), Scalar(1), Scalar(0.25), kFloat64), {0, 0.25, 0.5, 0.75});
}

TEST(CpuFactories, ArangeErrors) {
  expect_error<ValueError>([] { arange(Scalar(0), Scalar(5), Scalar(0)); }, {"arange", "step"});
  expect_error<ValueError>([] { arange(Scalar(0), Scalar(5), Scalar(-1)); }, {"arange", "sign"});
  expect_error<ValueError>([] { arange(Scalar(5), Scalar(0), Scalar(1)); }, {"arange", "sign"});
  expect_error<ValueError>([] { arange(-1); }, {"arange"});
  expect_error<TypeError>([] { arange(3, kBool); }, {"arange", "bool"});
  expect_error<ValueError>([] { arange(Scalar(0.0), Scalar(INFINITY)); }, {"arange", "finite"});
  expect_error<ValueError>([] { arange(Scalar(std::numeric_limits<int64_t>::min()), Scalar(int64_t(1))); },
                           {"arange", "too large"});
}

// ---- linspace, eye

TEST(CpuFactories, Linspace) {
  Tensor l = linspace(0, 1, 5);
  expect_geometry(l, {5}, kFloat32);
  expect_values(l, {0, 0.25, 0.5, 0.75, 1});
  expect_values(linspace(-1.0, 1.0, 3, kFloat64), {-1, 0, 1});
  expect_values(linspace(3.0, 3.0, 4), {3, 3, 3, 3});
  expect_values(linspace(2, 7, 1), {2});
  EXPECT_EQ(linspace(0, 1, 0).numel(), 0);
  expect_values(linspace(0, 10, 6, kInt64), {0, 2, 4, 6, 8, 10});
  expect_values(linspace(10, 0, 3, kInt32), {10, 5, 0});
  // The last value is exactly `end`, even where start + i * step would round past it.
  Tensor l2 = linspace(0.1, 0.7, 7, kFloat64);
  EXPECT_EQ(l2.to_double_vector().back(), 0.7);
  EXPECT_EQ(l2.to_double_vector().front(), 0.1);
  for (ScalarType dt : kFloatDtypes) expect_values(linspace(0, 2, 3, dt), {0, 1, 2});
  expect_error<ValueError>([] { linspace(0, 1, -2); }, {"linspace", "-2"});
  expect_error<TypeError>([] { linspace(0, 1, 2, kBool); }, {"linspace", "bool"});
}

TEST(CpuFactories, Eye) {
  Tensor e = eye(3);
  expect_geometry(e, {3, 3}, kFloat32);
  expect_values(e, {1, 0, 0, 0, 1, 0, 0, 0, 1});
  expect_values(eye(2, 3), {1, 0, 0, 0, 1, 0});
  expect_values(eye(3, 2), {1, 0, 0, 1, 0, 0});
  EXPECT_EQ(eye(0).shape(), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(eye(2, 0).shape(), (std::vector<int64_t>{2, 0}));
  for (ScalarType dt : kAllDtypes) {
    SCOPED_TRACE(std::string(name(dt)));
    Tensor t = eye(2, std::nullopt, dt);
    expect_geometry(t, {2, 2}, dt);
    expect_values(t, {1, 0, 0, 1});
  }
  expect_error<ValueError>([] { eye(-1); }, {"eye", "-1"});
  expect_error<ValueError>([] { eye(2, -3); }, {"eye", "-3"});
}

// ---- rand

TEST(CpuRandom, RandIsUniformInUnitInterval) {
  manual_seed(1);
  Tensor r = rand({100000});
  expect_geometry(r, {100000}, kFloat32);
  auto v = r.to_double_vector();
  EXPECT_GE(*std::min_element(v.begin(), v.end()), 0.0);
  EXPECT_LT(*std::max_element(v.begin(), v.end()), 1.0);
  EXPECT_NEAR(mean(v), 0.5, 0.01);
  EXPECT_NEAR(stddev(v), std::sqrt(1.0 / 12.0), 0.01);
  // Each tenth of [0, 1) gets about a tenth of the values.
  std::vector<int> bins(10, 0);
  for (double x : v) ++bins[size_t(x * 10)];
  for (int count : bins) EXPECT_NEAR(count, 10000, 600);
}

TEST(CpuRandom, RandEveryFloatingDtypeStaysBelowOne) {
  for (ScalarType dt : kFloatDtypes) {
    SCOPED_TRACE(std::string(name(dt)));
    manual_seed(7);
    Tensor r = rand({50000}, dt);
    expect_geometry(r, {50000}, dt);
    auto v = r.to_double_vector();
    EXPECT_GE(*std::min_element(v.begin(), v.end()), 0.0);
    EXPECT_LT(*std::max_element(v.begin(), v.end()), 1.0);
    EXPECT_NEAR(mean(v), 0.5, 0.02);
  }
}

TEST(CpuRandom, ReproducibleAfterManualSeed) {
  manual_seed(42);
  auto a1 = rand({1000}).to_double_vector();
  auto b1 = randn({3, 7}).to_double_vector();
  auto c1 = randint(100, {50}).to_double_vector();
  manual_seed(42);
  auto a2 = rand({1000}).to_double_vector();
  auto b2 = randn({3, 7}).to_double_vector();
  auto c2 = randint(100, {50}).to_double_vector();
  EXPECT_EQ(a1, a2);
  EXPECT_EQ(b1, b2);
  EXPECT_EQ(c1, c2);
  // Successive calls and other seeds differ.
  EXPECT_NE(rand({1000}).to_double_vector(), a1);
  manual_seed(43);
  EXPECT_NE(rand({1000}).to_double_vector(), a1);
}

TEST(CpuRandom, ResultDoesNotDependOnTheNumberOfThreads) {
  const int saved = get_num_threads();
  manual_seed(5);
  set_num_threads(1);
  auto one = randn({300001}).to_double_vector();
  set_num_threads(std::max(saved, 2));
  manual_seed(5);
  auto many = randn({300001}).to_double_vector();
  set_num_threads(saved);
  EXPECT_EQ(one, many);
}

TEST(CpuRandom, RandRejectsIntegerDtypes) {
  expect_error<TypeError>([] { rand({2}, kInt64); }, {"rand", "floating", "int64"});
  expect_error<TypeError>([] { randn({2}, kInt32); }, {"randn", "floating", "int32"});
  expect_error<ValueError>([] { rand({-2}); }, {"rand", "non-negative"});
}

// ---- randn

TEST(CpuRandom, RandnIsStandardNormal) {
  manual_seed(3);
  Tensor r = randn({100000});
  expect_geometry(r, {100000}, kFloat32);
  auto v = r.to_double_vector();
  EXPECT_NEAR(mean(v), 0.0, 0.015);
  EXPECT_NEAR(stddev(v), 1.0, 0.015);
  // About 68.3% within one standard deviation, 95.4% within two.
  double within1 = 0, within2 = 0;
  for (double x : v) within1 += std::abs(x) < 1, within2 += std::abs(x) < 2;
  EXPECT_NEAR(within1 / double(v.size()), 0.6827, 0.01);
  EXPECT_NEAR(within2 / double(v.size()), 0.9545, 0.005);
  for (double x : v) ASSERT_TRUE(std::isfinite(x));
}

TEST(CpuRandom, RandnDtypesAndOddSizes) {
  for (ScalarType dt : kFloatDtypes) {
    SCOPED_TRACE(std::string(name(dt)));
    manual_seed(11);
    Tensor r = randn({7, 3}, dt);  // odd count: the last Box-Muller pair is half used
    expect_geometry(r, {7, 3}, dt);
    for (double x : r.to_double_vector()) EXPECT_TRUE(std::isfinite(x));
  }
  manual_seed(9);
  auto v = randn({40001}, kFloat64).to_double_vector();
  EXPECT_NEAR(mean(v), 0.0, 0.03);
  EXPECT_NEAR(stddev(v), 1.0, 0.03);
  EXPECT_EQ(randn({0}).numel(), 0);
  EXPECT_EQ(randn({}).dim(), 0);
}

// ---- randint

TEST(CpuRandom, RandintRangeAndDtype) {
  manual_seed(2);
  Tensor r = randint(10, {20000});
  expect_geometry(r, {20000}, kInt64);
  std::vector<int> counts(10, 0);
  for (double x : r.to_double_vector()) {
    ASSERT_GE(x, 0);
    ASSERT_LT(x, 10);
    ASSERT_EQ(x, std::floor(x));
    ++counts[size_t(x)];
  }
  for (int c : counts) EXPECT_NEAR(c, 2000, 200);

  Tensor s = randint(-5, 5, {4, 1000});
  expect_geometry(s, {4, 1000}, kInt64);
  std::set<double> seen;
  for (double x : s.to_double_vector()) {
    ASSERT_GE(x, -5);
    ASSERT_LT(x, 5);
    seen.insert(x);
  }
  EXPECT_EQ(seen.size(), 10u);
}

TEST(CpuRandom, RandintOtherDtypesAndWideRanges) {
  for (ScalarType dt : {kUInt8, kInt8, kInt16, kInt32, kFloat32, kFloat64, kFloat16}) {
    SCOPED_TRACE(std::string(name(dt)));
    Tensor r = randint(1, 7, {500}, dt);
    expect_geometry(r, {500}, dt);
    for (double x : r.to_double_vector()) {
      ASSERT_GE(x, 1);
      ASSERT_LT(x, 7);
    }
  }
  Tensor b = randint(0, 2, {200}, kBool);
  std::set<double> seen;
  for (double x : b.to_double_vector()) seen.insert(x);
  EXPECT_EQ(seen, (std::set<double>{0, 1}));
  // The full int64 range minus one: no overflow in the range arithmetic.
  Tensor w = randint(std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), {100});
  EXPECT_EQ(w.numel(), 100);
}

TEST(CpuRandom, RandintErrors) {
  expect_error<ValueError>([] { randint(5, 5, {3}); }, {"randint", "low", "high"});
  expect_error<ValueError>([] { randint(0, {3}); }, {"randint", "low", "high"});
  expect_error<ValueError>([] { randint(0, 300, {3}, kUInt8); }, {"randint", "uint8"});
  expect_error<ValueError>([] { randint(-1, 3, {3}, kUInt8); }, {"randint", "uint8"});
}

}  // namespace

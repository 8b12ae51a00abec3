#pragma once
// Helpers shared by the C++ test suites.
#include <tessera/tessera.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace tessera::testing {

// Runs f and expects an error of type E whose message contains every fragment.
template <class E, class F>
void expect_error(F&& f, std::initializer_list<std::string> fragments) {
  try {
    f();
    ADD_FAILURE() << "expected an exception";
  } catch (const E& e) {
    for (const auto& fragment : fragments)
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << "'" << fragment << "' not in: " << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "unexpected exception type: " << e.what();
  }
}

inline int64_t numel_of(const std::vector<int64_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t(1), std::multiplies<>());
}

// A tensor of `shape` holding start, start+1, ... converted to dtype.
inline Tensor seq(const std::vector<int64_t>& shape, ScalarType dtype = kFloat32, double start = 0) {
  std::vector<double> v(size_t(numel_of(shape)));
  std::iota(v.begin(), v.end(), start);
  return tensor_from_values(v, shape, dtype);
}

// A reference value as a tensor of `dtype` would hold it (uint8 wraps, integers truncate).
inline double as_dtype(double v, ScalarType dtype) {
  if (dtype == kBool) return v != 0;
  if (dtype == kUInt8 && std::isfinite(v)) return double(((int64_t(v) % 256) + 256) % 256);
  if (!is_floating_point(dtype) && std::isfinite(v)) return std::trunc(v);
  return v;
}

// Relative tolerance of a result in `dtype`; float32's depends on how much the op accumulates.
inline double rtol_for(ScalarType dtype, double float32_rtol = 2e-6) {
  switch (dtype) {
    case ScalarType::Float16: return 2e-3;
    case ScalarType::BFloat16: return 1.6e-2;
    case ScalarType::Float32: return float32_rtol;
    case ScalarType::Float64: return 1e-12;
    default: return 0;
  }
}

// `values` as a tensor of `shape` and `dtype`.
inline Tensor from(const std::vector<double>& values, std::vector<int64_t> shape, ScalarType dtype = kFloat32) {
  return tensor_from_values(values, std::move(shape), dtype);
}

// Expects t's elements within tol of `expected`: relative, absolute below magnitude 1.
inline void expect_close(const Tensor& t, const std::vector<double>& expected, double tol = 1e-5) {
  std::vector<double> got = t.to_double_vector();
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], expected[i], tol * std::max(1.0, std::abs(expected[i]))) << "at element " << i;
}

// n values uniform in [-1, 1), the same for a seed.
inline std::vector<double> randoms(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> d(-1, 1);
  std::vector<double> v(n);
  for (double& x : v) x = d(gen);
  return v;
}

}  // namespace tessera::testing

// A view op that may not be registered by a given backend: skip instead of failing.
#define VIEW_OR_SKIP(var, expr)                                \
  ::tessera::Tensor var;                                       \
  try {                                                        \
    var = (expr);                                              \
  } catch (const ::tessera::NotImplementedError& e) {          \
    GTEST_SKIP() << "view kernel not available: " << e.what(); \
  }

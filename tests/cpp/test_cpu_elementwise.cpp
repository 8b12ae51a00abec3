// Tests of the CPU plugin's element-wise kernels (unary, binary, comparison, logic, where,
// clamp, masked_fill) and copies (copy_, to, contiguous, clone, fill_). Every result is checked
// against a double-precision reference computed here over the broadcast index, for broadcast
// shapes, strided views, empty tensors and each supported dtype; plus type promotion, in-place
// and out= variants, and the errors.
#include <gtest/gtest.h>

#include "test_util.h"

#include <tessera/runtime.h>
#include <tessera/tessera.h>

#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace {

using tessera::testing::expect_error;

using namespace tessera;
using Shape = std::vector<int64_t>;

const std::vector<ScalarType> kAllDtypes = {kBool,    kUInt8,     kInt8,    kInt16,  kInt32,
                                            kInt64,   kFloat16,   kBFloat16, kFloat32, kFloat64};
const std::vector<ScalarType> kFloatDtypes = {kFloat16, kBFloat16, kFloat32, kFloat64};

using tessera::testing::numel_of;

// Deterministic values every dtype holds exactly: bool 0/1, uint8 0..9, signed -5..5, floats
// multiples of 1/4 in [-3, 3]. `nonzero` avoids zeros (divisors), `positive` keeps them > 0.
Tensor make(const Shape& shape, ScalarType dtype, int seed = 0, bool nonzero = false, bool positive = false) {
  std::vector<double> v(size_t(numel_of(shape)));
  uint32_t state = 2463534242u + uint32_t(seed) * 7919u;
  for (double& x : v) {
    state ^= state << 13;
    state ^= state >> 17;
    state ^= state << 5;
    const int r = int(state % 1000);
    if (dtype == kBool) x = positive || nonzero ? 1 : r % 2;
    else if (dtype == kUInt8) x = r % 10;
    else if (!is_floating_point(dtype)) x = r % 11 - 5;
    else x = (r % 25 - 12) / 4.0;
    if (positive) x = std::abs(x);
    if ((nonzero || positive) && x == 0) x = dtype == kBool ? 1 : 2;
  }
  return tensor_from_values(v, shape, dtype);
}

// A host array: values in row-major order with their shape.
struct Ref {
  Shape shape;
  std::vector<double> v;
};
Ref ref_of(const Tensor& t) { return {t.shape(), t.to_double_vector()}; }

Shape broadcast(const Shape& a, const Shape& b) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n, 1);
  for (size_t i = 0; i < n; ++i) {
    const int64_t x = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t y = i < n - b.size() ? 1 : b[i - (n - b.size())];
    out[i] = x == 1 ? y : x;
  }
  return out;
}
// Flat index into an operand of shape `s` of element `i` of the broadcast shape `out`.
int64_t source_index(const Shape& out, const Shape& s, int64_t i) {
  int64_t idx = 0, mul = 1;
  for (int64_t d = int64_t(out.size()) - 1, sd = int64_t(s.size()) - 1; d >= 0; --d, --sd) {
    const int64_t coord = i % out[size_t(d)];
    i /= out[size_t(d)];
    if (sd >= 0) {
      if (s[size_t(sd)] != 1) idx += coord * mul;
      mul *= s[size_t(sd)];
    }
  }
  return idx;
}
template <class F> Ref ref_map(const std::vector<const Ref*>& in, F f) {
  Shape shape;
  for (const Ref* r : in) shape = broadcast(shape, r->shape);
  Ref out{shape, std::vector<double>(size_t(numel_of(shape)))};
  std::vector<double> args(in.size());
  for (int64_t i = 0; i < numel_of(shape); ++i) {
    for (size_t k = 0; k < in.size(); ++k) args[k] = in[k]->v[size_t(source_index(shape, in[k]->shape, i))];
    out.v[size_t(i)] = f(args);
  }
  return out;
}
Ref ref_unary(const Ref& a, const std::function<double(double)>& f) {
  return ref_map({&a}, [&](const std::vector<double>& x) { return f(x[0]); });
}
Ref ref_binary(const Ref& a, const Ref& b, const std::function<double(double, double)>& f) {
  return ref_map({&a, &b}, [&](const std::vector<double>& x) { return f(x[0], x[1]); });
}

using tessera::testing::as_dtype;
using tessera::testing::rtol_for;

void expect_matches(const Tensor& got, const Ref& want, ScalarType dtype, const std::string& what, double rtol = -1) {
  ASSERT_TRUE(got.defined()) << what;
  EXPECT_EQ(got.shape(), want.shape) << what;
  EXPECT_EQ(got.dtype(), dtype) << what << ": got " << name(got.dtype()) << ", want " << name(dtype);
  if (got.shape() != want.shape) return;
  const std::vector<double> g = got.to_double_vector();
  if (rtol < 0) rtol = rtol_for(dtype);
  for (size_t i = 0; i < g.size(); ++i) {
    const double w = as_dtype(want.v[i], dtype);
    if (std::isnan(w)) {
      EXPECT_TRUE(std::isnan(g[i])) << what << " [" << i << "]: got " << g[i] << ", want nan";
    } else if (std::isinf(w)) {
      EXPECT_EQ(g[i], w) << what << " [" << i << "]";
    } else {
      EXPECT_NEAR(g[i], w, 1e-6 * (rtol > 0) + rtol * std::abs(w)) << what << " [" << i << "]";
    }
  }
}



const std::vector<std::pair<Shape, Shape>> kBroadcastShapes = {
    {{3, 1}, {1, 4}}, {{2, 3, 4}, {4}}, {{}, {5}}, {{5}, {}}, {{0, 3}, {3}}, {{2, 3}, {2, 3}}};

std::string shape_name(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? "," : "") + std::to_string(s[i]);
  return r + "]";
}

// ------------------------------------------------------------------------------ binary ops

struct BinaryCase {
  std::string name;
  std::function<Tensor(const Tensor&, const Tensor&)> op;
  std::function<double(double, double)> ref;
  std::vector<ScalarType> dtypes;
  bool to_float = false;     // integral results become float32 (true division)
  bool bool_result = false;  // comparisons
  bool nonzero_rhs = false;
  bool positive_lhs = false;
};

double floor_div_ref(double a, double b) { return std::floor(a / b); }

std::vector<BinaryCase> binary_cases() {
  const std::vector<ScalarType> numeric = {kUInt8, kInt8, kInt16, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64};
  return {
      {"add", [](auto& a, auto& b) { return add(a, b); }, [](double a, double b) { return a + b; }, kAllDtypes},
      {"add_alpha", [](auto& a, auto& b) { return add(a, b, 3); }, [](double a, double b) { return a + 3 * b; }, numeric},
      {"sub", [](auto& a, auto& b) { return sub(a, b); }, [](double a, double b) { return a - b; }, numeric},
      {"sub_alpha", [](auto& a, auto& b) { return sub(a, b, 2); }, [](double a, double b) { return a - 2 * b; },
       {kInt8, kInt32, kInt64, kFloat32, kFloat64}},
      {"mul", [](auto& a, auto& b) { return mul(a, b); }, [](double a, double b) { return a * b; }, kAllDtypes},
      {"div", [](auto& a, auto& b) { return div(a, b); }, [](double a, double b) { return a / b; }, kAllDtypes, true,
       false, true},
      {"div_trunc", [](auto& a, auto& b) { return div(a, b, std::string("trunc")); },
       [](double a, double b) { return std::trunc(a / b); }, numeric, false, false, true},
      {"div_floor", [](auto& a, auto& b) { return div(a, b, std::string("floor")); }, floor_div_ref, numeric, false,
       false, true},
      {"floor_divide", [](auto& a, auto& b) { return floor_divide(a, b); }, floor_div_ref, numeric, false, false, true},
      {"pow", [](auto& a, auto& b) { return pow(a, b); }, [](double a, double b) { return std::pow(a, b); },
       numeric, false, false, false, true},
      {"maximum", [](auto& a, auto& b) { return maximum(a, b); }, [](double a, double b) { return std::max(a, b); },
       kAllDtypes},
      {"minimum", [](auto& a, auto& b) { return minimum(a, b); }, [](double a, double b) { return std::min(a, b); },
       kAllDtypes},
      {"eq", [](auto& a, auto& b) { return eq(a, b); }, [](double a, double b) { return double(a == b); }, kAllDtypes,
       false, true},
      {"ne", [](auto& a, auto& b) { return ne(a, b); }, [](double a, double b) { return double(a != b); }, kAllDtypes,
       false, true},
      {"lt", [](auto& a, auto& b) { return lt(a, b); }, [](double a, double b) { return double(a < b); }, kAllDtypes,
       false, true},
      {"le", [](auto& a, auto& b) { return le(a, b); }, [](double a, double b) { return double(a <= b); }, kAllDtypes,
       false, true},
      {"gt", [](auto& a, auto& b) { return gt(a, b); }, [](double a, double b) { return double(a > b); }, kAllDtypes,
       false, true},
      {"ge", [](auto& a, auto& b) { return ge(a, b); }, [](double a, double b) { return double(a >= b); }, kAllDtypes,
       false, true},
      {"logical_and", [](auto& a, auto& b) { return logical_and(a, b); },
       [](double a, double b) { return double(a != 0 && b != 0); }, kAllDtypes, false, true},
      {"logical_or", [](auto& a, auto& b) { return logical_or(a, b); },
       [](double a, double b) { return double(a != 0 || b != 0); }, kAllDtypes, false, true},
  };
}

ScalarType expected_dtype(const BinaryCase& c, ScalarType a, ScalarType b) {
  if (c.bool_result) return kBool;
  const ScalarType r = promote_types(a, b);
  return c.to_float && !is_floating_point(r) ? kFloat32 : r;
}

// The exponent tensor of pow: small non-negative integers (so every dtype computes exactly).
Tensor make_rhs(const BinaryCase& c, const Shape& shape, ScalarType dtype) {
  if (c.name == "pow") {
    std::vector<double> v(size_t(numel_of(shape)));
    for (size_t i = 0; i < v.size(); ++i) v[i] = double(i % 3);
    return tensor_from_values(v, shape, dtype);
  }
  return make(shape, dtype, 1, c.nonzero_rhs);
}

TEST(CpuBinary, EveryOpEveryDtypeAndBroadcastShapeMatchesReference) {
  for (const BinaryCase& c : binary_cases()) {
    for (ScalarType dt : c.dtypes) {
      for (const auto& [sa, sb] : kBroadcastShapes) {
        const Tensor a = make(sa, dt, 0, false, c.positive_lhs), b = make_rhs(c, sb, dt);
        const std::string what = c.name + " " + std::string(name(dt)) + " " + shape_name(sa) + "x" + shape_name(sb);
        expect_matches(c.op(a, b), ref_binary(ref_of(a), ref_of(b), c.ref), expected_dtype(c, dt, dt), what);
      }
    }
  }
}

TEST(CpuBinary, MixedDtypesPromoteAndMatchReference) {
  const std::vector<std::pair<ScalarType, ScalarType>> pairs = {
      {kInt32, kFloat32}, {kUInt8, kInt8},    {kBool, kInt64},     {kFloat16, kBFloat16},
      {kInt64, kFloat16}, {kInt16, kFloat64}, {kFloat32, kFloat64}, {kBool, kFloat32}};
  for (const BinaryCase& c : binary_cases()) {
    if (c.name.rfind("sub", 0) == 0 || c.name.rfind("div_", 0) == 0 || c.name == "floor_divide" || c.name == "pow")
      continue;  // bool operands are refused by these; covered below
    for (const auto& [da, db] : pairs) {
      const Tensor a = make({2, 3}, da, 2), b = make_rhs(c, {3}, db);
      const std::string what = c.name + " " + std::string(name(da)) + "x" + std::string(name(db));
      expect_matches(c.op(a, b), ref_binary(ref_of(a), ref_of(b), c.ref), expected_dtype(c, da, db), what);
    }
  }
}

TEST(CpuBinary, StridedInputsMatchReference) {
  const Tensor base = make({4, 3}, kFloat32, 3);
  VIEW_OR_SKIP(t, transpose(base, 0, 1));  // [3, 4], strides [1, 3]
  ASSERT_FALSE(t.is_contiguous());
  VIEW_OR_SKIP(s, slice(make({3, 8}, kFloat32, 4), 1, 0, 8, 2));  // [3, 4], strides [8, 2]
  for (const BinaryCase& c : binary_cases()) {
    if (std::find(c.dtypes.begin(), c.dtypes.end(), kFloat32) == c.dtypes.end()) continue;
    const Tensor rhs = c.name == "pow" ? make_rhs(c, {3, 4}, kFloat32) : c.nonzero_rhs ? make({3, 4}, kFloat32, 5, true) : s;
    expect_matches(c.op(t, rhs), ref_binary(ref_of(t), ref_of(rhs), c.ref), expected_dtype(c, kFloat32, kFloat32),
                   c.name + " strided");
    const Tensor row = c.name == "pow" ? make_rhs(c, {4}, kFloat32) : make({4}, kFloat32, 6, true);
    expect_matches(c.op(t, row), ref_binary(ref_of(t), ref_of(row), c.ref), expected_dtype(c, kFloat32, kFloat32),
                   c.name + " strided x row");
  }
  VIEW_OR_SKIP(p, permute(make({2, 3, 4}, kInt64, 7), {2, 0, 1}));
  const Tensor q = make({4, 2, 3}, kInt64, 8);
  expect_matches(add(p, q), ref_binary(ref_of(p), ref_of(q), std::plus<>()), kInt64, "add permuted");
}

TEST(CpuBinary, LargeTensorsUseTheParallelPathCorrectly) {
  // Large enough to be split across threads, with a broadcast row and a transposed operand.
  const int64_t rows = 513, cols = 257;
  const Tensor a = make({rows, cols}, kFloat32, 9), b = make({cols}, kFloat32, 10);
  expect_matches(mul(a, b), ref_binary(ref_of(a), ref_of(b), std::multiplies<>()), kFloat32, "mul large");
  VIEW_OR_SKIP(t, transpose(make({cols, rows}, kFloat64, 11), 0, 1));
  expect_matches(sub(a, t), ref_binary(ref_of(a), ref_of(t), std::minus<>()), kFloat64, "sub large transposed");
}

TEST(CpuBinary, ScalarOverloadsPromoteLikePythonNumbers) {
  const Tensor i32 = make({2, 3}, kInt32), i64 = make({4}, kInt64), f16 = make({3}, kFloat16), b = make({3}, kBool);
  // An int tensor with a float number computes in the default float32.
  expect_matches(add(i64, 2.5), ref_unary(ref_of(i64), [](double x) { return x + 2.5; }), kFloat32, "int64 + 2.5");
  // An int number keeps the tensor's dtype, even a narrower one.
  expect_matches(add(i32, 7), ref_unary(ref_of(i32), [](double x) { return x + 7; }), kInt32, "int32 + 7");
  expect_matches(mul(f16, 3), ref_unary(ref_of(f16), [](double x) { return x * 3; }), kFloat16, "f16 * 3");
  expect_matches(mul(f16, 0.5), ref_unary(ref_of(f16), [](double x) { return x * 0.5; }), kFloat16, "f16 * 0.5");
  // bool with an int number becomes int64.
  expect_matches(add(b, 1), ref_unary(ref_of(b), [](double x) { return x + 1; }), kInt64, "bool + 1");
  expect_matches(add(b, true), ref_unary(ref_of(b), [](double x) { return double(x != 0 || true); }), kBool, "bool + True");
  expect_matches(sub(i32, 2, 3), ref_unary(ref_of(i32), [](double x) { return x - 6; }), kInt32, "int32 - 3*2");
  expect_matches(div(i32, 2), ref_unary(ref_of(i32), [](double x) { return x / 2; }), kFloat32, "int32 / 2");
  expect_matches(div(f16, 4), ref_unary(ref_of(f16), [](double x) { return x / 4; }), kFloat16, "f16 / 4");
  expect_matches(pow(i32, 2), ref_unary(ref_of(i32), [](double x) { return x * x; }), kInt32, "int32 ** 2");
  expect_matches(pow(i32, 0.5), ref_unary(ref_of(i32), [](double x) { return std::pow(x, 0.5); }), kFloat32,
                 "int32 ** 0.5");
  const Tensor f32 = make({5}, kFloat32, 3, false, true);
  expect_matches(pow(f32, -1.5), ref_unary(ref_of(f32), [](double x) { return std::pow(x, -1.5); }), kFloat32,
                 "f32 ** -1.5");
  expect_matches(gt(i64, 0.5), ref_unary(ref_of(i64), [](double x) { return double(x > 0.5); }), kBool, "int64 > 0.5");
  expect_matches(eq(f16, 0.25), ref_unary(ref_of(f16), [](double x) { return double(x == 0.25); }), kBool, "f16 == 0.25");
  expect_matches(le(i32, 1), ref_unary(ref_of(i32), [](double x) { return double(x <= 1); }), kBool, "int32 <= 1");
  expect_matches(ne(b, false), ref_unary(ref_of(b), [](double x) { return double(x != 0); }), kBool, "bool != False");
  expect_matches(lt(i32, -1), ref_unary(ref_of(i32), [](double x) { return double(x < -1); }), kBool, "int32 < -1");
  expect_matches(ge(f16, 1), ref_unary(ref_of(f16), [](double x) { return double(x >= 1); }), kBool, "f16 >= 1");
}

TEST(CpuBinary, ZeroDimTensorsRankBelowDimensionedOnes) {
  const Tensor i32 = make({3}, kInt32), f16 = make({3}, kFloat16), u8 = make({3}, kUInt8);
  const double one[] = {1.5};
  const Tensor f64_0d = tensor_from_values(one, {}, kFloat64);
  const double two[] = {2};
  const Tensor i64_0d = tensor_from_values(two, {}, kInt64);
  // Same category: the dimensioned tensor's dtype wins.
  EXPECT_EQ(add(f16, f64_0d).dtype(), kFloat16);
  EXPECT_EQ(add(i32, i64_0d).dtype(), kInt32);
  // A higher category from a 0-dim tensor takes its own dtype.
  EXPECT_EQ(add(i32, f64_0d).dtype(), kFloat64);
  EXPECT_EQ(add(u8, f64_0d).dtype(), kFloat64);
  // Two 0-dim tensors promote normally.
  EXPECT_EQ(add(f64_0d, i64_0d).dtype(), kFloat64);
  EXPECT_EQ(add(f64_0d, i64_0d).shape(), Shape{});
  expect_matches(add(i32, f64_0d), ref_binary(ref_of(i32), ref_of(f64_0d), std::plus<>()), kFloat64, "int32 + 0-dim f64");
}

TEST(CpuBinary, DivisionRoundingModes) {
  const std::vector<double> a = {7, -7, 7, -7, 0, 5, -9, 6}, b = {2, 2, -2, -2, 3, 5, 4, -4};
  for (ScalarType dt : {kInt8, kInt32, kInt64, kFloat32, kFloat64}) {
    const Tensor x = tensor_from_values(a, {8}, dt), y = tensor_from_values(b, {8}, dt);
    EXPECT_EQ(div(x, y, std::string("trunc")).to_double_vector(), (std::vector<double>{3, -3, -3, 3, 0, 1, -2, -1}))
        << name(dt);
    EXPECT_EQ(div(x, y, std::string("floor")).to_double_vector(), (std::vector<double>{3, -4, -4, 3, 0, 1, -3, -2}))
        << name(dt);
    EXPECT_EQ(floor_divide(x, y).to_double_vector(), (std::vector<double>{3, -4, -4, 3, 0, 1, -3, -2})) << name(dt);
    EXPECT_EQ(div(x, y, std::nullopt).dtype(), is_floating_point(dt) ? dt : kFloat32);
  }
  // The most negative integer divided by -1 wraps instead of trapping.
  const double mn[] = {-128}, m1[] = {-1};
  EXPECT_EQ(div(tensor_from_values(mn, {1}, kInt8), tensor_from_values(m1, {1}, kInt8), std::string("trunc")).item_double(),
            -128);
  // Float division by zero follows IEEE.
  const double num[] = {1, -1, 0}, zero[] = {0, 0, 0};
  const Tensor q = div(tensor_from_values(num, {3}), tensor_from_values(zero, {3}));
  const auto qv = q.to_double_vector();
  EXPECT_EQ(qv[0], INFINITY);
  EXPECT_EQ(qv[1], -INFINITY);
  EXPECT_TRUE(std::isnan(qv[2]));
  const auto fv = div(tensor_from_values(num, {3}), tensor_from_values(zero, {3}), std::string("floor")).to_double_vector();
  EXPECT_EQ(fv[0], INFINITY);
  // Integer true division by zero is fine (it is float division).
  EXPECT_EQ(div(tensor_from_values(num, {3}, kInt32), tensor_from_values(zero, {3}, kInt32)).to_double_vector()[0],
            INFINITY);
}

TEST(CpuBinary, PowIntegerSemantics) {
  const std::vector<double> base = {2, -3, 1, -1, 5, 0}, exps = {10, 3, -4, -3, -1, 0};
  const Tensor x = tensor_from_values(base, {6}, kInt64), e = tensor_from_values(exps, {6}, kInt64);
  // Negative exponents: 1 and -1 keep their magnitude, everything else truncates to 0.
  EXPECT_EQ(pow(x, e).to_double_vector(), (std::vector<double>{1024, -27, 1, -1, 0, 1}));
  EXPECT_EQ(pow(x, 3).to_double_vector(), (std::vector<double>{8, -27, 1, -1, 125, 0}));
  expect_error<ValueError>([&] { pow(x, -2); }, {"pow", "negative"});
  expect_error<TypeError>([&] { pow(make({3}, kBool), make({3}, kBool)); }, {"pow", "bool"});
}

TEST(CpuBinary, MaximumMinimumPropagateNaN) {
  const double a[] = {1, NAN, 3, NAN}, b[] = {NAN, 2, 1, NAN};
  for (ScalarType dt : kFloatDtypes) {
    const Tensor x = tensor_from_values(a, {4}, dt), y = tensor_from_values(b, {4}, dt);
    const auto mx = maximum(x, y).to_double_vector(), mn = minimum(x, y).to_double_vector();
    EXPECT_TRUE(std::isnan(mx[0]) && std::isnan(mx[1]) && std::isnan(mx[3])) << name(dt);
    EXPECT_EQ(mx[2], 3);
    EXPECT_TRUE(std::isnan(mn[0]) && std::isnan(mn[1]) && std::isnan(mn[3])) << name(dt);
    EXPECT_EQ(mn[2], 1);
  }
}

TEST(CpuBinary, ComparisonsWithNaN) {
  const double a[] = {NAN, 1, NAN}, b[] = {NAN, NAN, 1};
  const Tensor x = tensor_from_values(a, {3}), y = tensor_from_values(b, {3});
  EXPECT_EQ(eq(x, y).to_double_vector(), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(ne(x, y).to_double_vector(), (std::vector<double>{1, 1, 1}));
  EXPECT_EQ(lt(x, y).to_double_vector(), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(ge(x, y).to_double_vector(), (std::vector<double>{0, 0, 0}));
  // Logic treats NaN as true (nonzero).
  EXPECT_EQ(logical_and(x, y).to_double_vector(), (std::vector<double>{1, 1, 1}));
  EXPECT_EQ(logical_not(x).to_double_vector(), (std::vector<double>{0, 0, 0}));
}

TEST(CpuBinary, InplaceVariants) {
  // Same dtype.
  Tensor x = make({2, 3}, kFloat32, 1);
  const Ref x0 = ref_of(x);
  const Tensor y = make({3}, kFloat32, 2, true);
  const uint64_t v0 = x.version();
  Tensor r = add_(x, y, 2);
  EXPECT_EQ(r.impl(), x.impl());
  EXPECT_GT(x.version(), v0);
  expect_matches(x, ref_binary(x0, ref_of(y), [](double a, double b) { return a + 2 * b; }), kFloat32, "add_");
  // Each in-place op against its reference.
  struct Case {
    std::string name;
    std::function<Tensor(Tensor&, const Tensor&)> op;
    std::function<double(double, double)> ref;
  };
  const std::vector<Case> cases = {
      {"sub_", [](Tensor& a, const Tensor& b) { return sub_(a, b); }, std::minus<>()},
      {"mul_", [](Tensor& a, const Tensor& b) { return mul_(a, b); }, std::multiplies<>()},
      {"div_", [](Tensor& a, const Tensor& b) { return div_(a, b); }, std::divides<>()},
      {"div_.floor", [](Tensor& a, const Tensor& b) { return div_(a, b, std::string("floor")); }, floor_div_ref},
      {"floor_divide_", [](Tensor& a, const Tensor& b) { return floor_divide_(a, b); }, floor_div_ref},
      {"pow_", [](Tensor& a, const Tensor& b) { return pow_(a, b); }, [](double a, double b) { return std::pow(a, b); }},
  };
  for (const Case& c : cases) {
    Tensor a = make({2, 3}, kFloat64, 3, false, true);
    const Ref a0 = ref_of(a);
    const Tensor b = make({2, 3}, kFloat64, 4, true, true);
    Tensor res = c.op(a, b);
    EXPECT_EQ(res.impl(), a.impl()) << c.name;
    expect_matches(a, ref_binary(a0, ref_of(b), c.ref), kFloat64, c.name);
  }
  // Scalar overloads.
  Tensor s = make({4}, kInt32, 5);
  const Ref s0 = ref_of(s);
  add_(s, 3);
  mul_(s, 2);
  sub_(s, 1, 2);
  expect_matches(s, ref_unary(s0, [](double v) { return (v + 3) * 2 - 2; }), kInt32, "scalar in-place chain");
  Tensor f = make({4}, kFloat32, 6);
  const Ref f0 = ref_of(f);
  div_(f, 4);
  pow_(f, 2);
  expect_matches(f, ref_unary(f0, [](double v) { return (v / 4) * (v / 4); }), kFloat32, "div_/pow_ scalar");
  // A float16 self with a float32 other computes in float32 and stores float16.
  Tensor h = make({3}, kFloat16, 7);
  const Ref h0 = ref_of(h);
  const Tensor g = make({3}, kFloat32, 8);
  add_(h, g);
  expect_matches(h, ref_binary(h0, ref_of(g), std::plus<>()), kFloat16, "f16 add_ f32");
  // Aliased operands: x op= x.
  Tensor z = make({5}, kInt64, 9);
  const Ref z0 = ref_of(z);
  mul_(z, z);
  expect_matches(z, ref_unary(z0, [](double v) { return v * v; }), kInt64, "x *= x");
}

TEST(CpuBinary, InplaceThroughViewsAndOverlap) {
  Tensor base = make({3, 4}, kFloat32, 1);
  const Ref b0 = ref_of(base);
  VIEW_OR_SKIP(t, transpose(base, 0, 1));
  add_(t, 10);  // writes through the transposed view
  expect_matches(base, ref_unary(b0, [](double v) { return v + 10; }), kFloat32, "add_ through a transposed view");
  // An input that partially overlaps the output is read before it is overwritten.
  Tensor m = make({3, 4}, kFloat32, 2);
  const Ref m0 = ref_of(m);
  VIEW_OR_SKIP(row0, select(m, 0, 0));
  add_(m, row0);
  Ref first{{4}, {m0.v.begin(), m0.v.begin() + 4}};
  expect_matches(m, ref_binary(m0, first, std::plus<>()), kFloat32, "x += x[0]");
  VIEW_OR_SKIP(e, expand(make({1, 4}, kFloat32), {3, 4}));
  expect_error<ValueError>([&] { add_(e, 1); }, {"add_", "memory location"});
}

TEST(CpuBinary, OutVariants) {
  const Tensor a = make({2, 3}, kFloat32, 1), b = make({3}, kFloat32, 2, true);
  const Ref ra = ref_of(a), rb = ref_of(b);
  // A correctly shaped out is written in place.
  Tensor out = empty({2, 3}, kFloat32);
  Tensor r = add_out(out, a, b);
  EXPECT_EQ(r.impl(), out.impl());
  expect_matches(out, ref_binary(ra, rb, std::plus<>()), kFloat32, "add.out");
  // A wrongly shaped out is resized.
  Tensor small = empty({1}, kFloat32);
  mul_out(small, a, b);
  expect_matches(small, ref_binary(ra, rb, std::multiplies<>()), kFloat32, "mul.out resized");
  Tensor none = empty({0}, kFloat64);
  sub_out(none, a, b, 2);  // a wider out dtype receives the float32 result
  expect_matches(none, ref_binary(ra, rb, [](double x, double y) { return x - 2 * y; }), kFloat64, "sub.out f64");
  Tensor d = empty({2, 3}, kFloat32);
  div_out(d, a, b);
  expect_matches(d, ref_binary(ra, rb, std::divides<>()), kFloat32, "div.out");
  Tensor dm = empty({2, 3}, kFloat32);
  div_out(dm, a, b, std::string("trunc"));
  expect_matches(dm, ref_binary(ra, rb, [](double x, double y) { return std::trunc(x / y); }), kFloat32,
                 "div.Tensor_mode_out");
  Tensor fd = empty({6}, kFloat32);
  floor_divide_out(fd, a, b);
  expect_matches(fd, ref_binary(ra, rb, floor_div_ref), kFloat32, "floor_divide.out");
  Tensor pw = empty({2, 3}, kFloat32), ps = empty({2, 3}, kFloat32);
  const Tensor pos = make({2, 3}, kFloat32, 3, false, true);
  pow_out(pw, pos, b);
  expect_matches(pw, ref_binary(ref_of(pos), rb, [](double x, double y) { return std::pow(x, y); }), kFloat32,
                 "pow.Tensor_Tensor_out");
  pow_out(ps, pos, 3);
  expect_matches(ps, ref_unary(ref_of(pos), [](double x) { return x * x * x; }), kFloat32, "pow.Tensor_Scalar_out");
  Tensor mx = empty({2, 3}, kFloat32), mn = empty({2, 3}, kFloat32);
  maximum_out(mx, a, b);
  minimum_out(mn, a, b);
  expect_matches(mx, ref_binary(ra, rb, [](double x, double y) { return std::max(x, y); }), kFloat32, "maximum.out");
  expect_matches(mn, ref_binary(ra, rb, [](double x, double y) { return std::min(x, y); }), kFloat32, "minimum.out");
  // Comparison and logic outs: bool results into bool or wider outs.
  Tensor c = empty({2, 3}, kBool), ci = empty({2, 3}, kInt32);
  lt_out(c, a, b);
  expect_matches(c, ref_binary(ra, rb, [](double x, double y) { return double(x < y); }), kBool, "lt.out");
  eq_out(ci, a, a);
  expect_matches(ci, ref_unary(ra, [](double) { return 1.0; }), kInt32, "eq.out int32");
  for (auto [fn, ref, nm] :
       std::vector<std::tuple<std::function<Tensor(Tensor&)>, std::function<double(double, double)>, std::string>>{
           {[&](Tensor& o) { return ne_out(o, a, b); }, [](double x, double y) { return double(x != y); }, "ne.out"},
           {[&](Tensor& o) { return le_out(o, a, b); }, [](double x, double y) { return double(x <= y); }, "le.out"},
           {[&](Tensor& o) { return gt_out(o, a, b); }, [](double x, double y) { return double(x > y); }, "gt.out"},
           {[&](Tensor& o) { return ge_out(o, a, b); }, [](double x, double y) { return double(x >= y); }, "ge.out"},
           {[&](Tensor& o) { return logical_and_out(o, a, b); },
            [](double x, double y) { return double(x != 0 && y != 0); }, "logical_and.out"},
           {[&](Tensor& o) { return logical_or_out(o, a, b); },
            [](double x, double y) { return double(x != 0 || y != 0); }, "logical_or.out"}}) {
    Tensor o = empty({0}, kBool);
    fn(o);
    expect_matches(o, ref_binary(ra, rb, ref), kBool, nm);
  }
  Tensor ln = empty({2, 3}, kFloat32);
  logical_not_out(ln, a);
  expect_matches(ln, ref_unary(ra, [](double x) { return double(x == 0); }), kFloat32, "logical_not.out float");
}

TEST(CpuBinary, Errors) {
  const Tensor f = make({2, 3}, kFloat32), i = make({2, 3}, kInt64), b = make({2, 3}, kBool), z = make({4}, kFloat32);
  expect_error<ValueError>([&] { add(f, z); }, {"add", "broadcast", "[2, 3]", "[4]"});
  expect_error<ValueError>([&] { eq(f, z); }, {"eq", "broadcast"});
  expect_error<TypeError>([&] { sub(b, b); }, {"sub", "bool"});
  expect_error<TypeError>([&] { sub(i, b); }, {"sub", "bool"});
  expect_error<TypeError>([&] { add(i, i, 1.5); }, {"add", "alpha"});
  // Integer division by zero raises instead of trapping.
  const double zs[] = {1, 0, 2};
  const Tensor iz = tensor_from_values(zs, {3}, kInt32);
  expect_error<ValueError>([&] { div(iz, iz, std::string("trunc")); }, {"div", "ZeroDivisionError"});
  expect_error<ValueError>([&] { floor_divide(iz, iz); }, {"floor_divide", "ZeroDivisionError"});
  expect_error<ValueError>([&] { div(f, f, std::string("round")); }, {"div", "rounding_mode", "round"});
  // In-place: the result must fit self's dtype and shape.
  Tensor ii = make({2, 3}, kInt64);
  expect_error<TypeError>([&] { add_(ii, f); }, {"add_", "float32", "int64"});
  expect_error<TypeError>([&] { add_(ii, 1.5); }, {"add_", "float32", "int64"});
  expect_error<TypeError>([&] { div_(ii, ii); }, {"div_", "float32", "int64"});
  Tensor row = make({3}, kFloat32);
  expect_error<ValueError>([&] { mul_(row, f); }, {"mul_", "[3]", "[2, 3]"});
  Tensor bb = make({3}, kBool);
  expect_error<TypeError>([&] { add_(bb, 2); }, {"add_", "bool"});
  // out=: the result must fit the out's dtype.
  Tensor io = empty({2, 3}, kInt32), bo = empty({2, 3}, kBool);
  expect_error<TypeError>([&] { add_out(io, f, f); }, {"add", "float32", "int32"});
  expect_error<TypeError>([&] { mul_out(bo, i, i); }, {"mul", "int64", "bool"});
  // An out= that is also an input cannot be resized under it.
  Tensor shared = make({3}, kFloat32);
  expect_error<ValueError>([&] { add_out(shared, shared, f); }, {"add", "out=", "[3]", "[2, 3]"});
  // ...but may be written in place when its shape already fits.
  Tensor fits = make({2, 3}, kFloat32, 4);
  const Ref f0 = ref_of(fits);
  add_out(fits, fits, row);
  expect_matches(fits, ref_binary(f0, ref_of(row), std::plus<>()), kFloat32, "add.out onto an input");
}

TEST(CpuBinary, EmptyTensors) {
  const Tensor e = make({0, 3}, kFloat32), r = make({3}, kFloat32);
  EXPECT_EQ(add(e, r).shape(), (Shape{0, 3}));
  EXPECT_EQ(lt(e, r).dtype(), kBool);
  EXPECT_EQ(where(lt(e, r), e, r).shape(), (Shape{0, 3}));
  Tensor out = empty({5}, kFloat32);
  add_out(out, e, r);
  EXPECT_EQ(out.shape(), (Shape{0, 3}));
  const double zs[] = {0};
  EXPECT_EQ(div(make({0}, kInt32), tensor_from_values(zs, {1}, kInt32), std::string("floor")).numel(), 0);
}

// ------------------------------------------------------------------------------ where / clamp / masked_fill

TEST(CpuSelect, WhereBroadcastsAndPromotes) {
  for (const auto& [sa, sb] : kBroadcastShapes) {
    const Tensor cond = make(sa, kBool, 1), x = make(sb, kInt32, 2), y = make({1}, kFloat32, 3);
    const Ref rc = ref_of(cond), rx = ref_of(x), ry = ref_of(y);
    const Ref want = ref_map({&rc, &rx, &ry}, [](const std::vector<double>& v) { return v[0] != 0 ? v[1] : v[2]; });
    expect_matches(where(cond, x, y), want, kFloat32, "where " + shape_name(sa) + shape_name(sb));
  }
  for (ScalarType dt : kAllDtypes) {
    const Tensor cond = make({4}, kBool, 4), x = make({4}, dt, 5), y = make({4}, dt, 6);
    const Ref rc = ref_of(cond), rx = ref_of(x), ry = ref_of(y);
    expect_matches(where(cond, x, y),
                   ref_map({&rc, &rx, &ry}, [](const std::vector<double>& v) { return v[0] != 0 ? v[1] : v[2]; }), dt,
                   "where " + std::string(name(dt)));
  }
  expect_error<TypeError>([&] { where(make({3}, kUInt8), make({3}, kFloat32), make({3}, kFloat32)); },
                          {"where", "bool", "uint8"});
}

TEST(CpuSelect, Clamp) {
  for (ScalarType dt : {kUInt8, kInt8, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64}) {
    const Tensor x = make({3, 5}, dt, 1);
    const Ref rx = ref_of(x);
    expect_matches(clamp(x, Scalar(1), Scalar(4)), ref_unary(rx, [](double v) { return std::min(std::max(v, 1.0), 4.0); }),
                   dt, "clamp both " + std::string(name(dt)));
    expect_matches(clamp(x, Scalar(2), std::nullopt), ref_unary(rx, [](double v) { return std::max(v, 2.0); }), dt,
                   "clamp min");
    expect_matches(clamp(x, std::nullopt, Scalar(0)), ref_unary(rx, [](double v) { return std::min(v, 0.0); }), dt,
                   "clamp max");
  }
  const Tensor i = make({6}, kInt64, 2);
  // min > max: everything becomes max.
  expect_matches(clamp(i, Scalar(3), Scalar(1)), ref_unary(ref_of(i), [](double) { return 1.0; }), kInt64, "min > max");
  // A float bound promotes an int tensor to float32.
  expect_matches(clamp(i, Scalar(-0.5), Scalar(2.5)),
                 ref_unary(ref_of(i), [](double v) { return std::min(std::max(v, -0.5), 2.5); }), kFloat32,
                 "int clamp with float bounds");
  const double nan_v[] = {NAN, 5, -5};
  EXPECT_TRUE(std::isnan(clamp(tensor_from_values(nan_v, {3}), Scalar(0), Scalar(1)).to_double_vector()[0]));
  // In-place and out=.
  Tensor f = make({2, 3}, kFloat32, 3);
  const Ref f0 = ref_of(f);
  clamp_(f, Scalar(-1.0), Scalar(1.0));
  expect_matches(f, ref_unary(f0, [](double v) { return std::min(std::max(v, -1.0), 1.0); }), kFloat32, "clamp_");
  Tensor out = empty({0}, kFloat64);
  clamp_out(out, make({2, 3}, kFloat32, 3), Scalar(0.0), std::nullopt);
  expect_matches(out, ref_unary(f0, [](double v) { return std::max(v, 0.0); }), kFloat64, "clamp.out");
  VIEW_OR_SKIP(t, transpose(make({3, 2}, kFloat32, 4), 0, 1));
  expect_matches(clamp(t, Scalar(-1), Scalar(1)),
                 ref_unary(ref_of(t), [](double v) { return std::min(std::max(v, -1.0), 1.0); }), kFloat32,
                 "clamp strided");
  expect_error<ValueError>([&] { clamp(f, std::nullopt, std::nullopt); }, {"clamp", "min", "max"});
  expect_error<TypeError>([&] { clamp(make({3}, kBool), Scalar(0), Scalar(1)); }, {"clamp", "bool"});
  Tensor ii = make({3}, kInt32);
  expect_error<TypeError>([&] { clamp_(ii, Scalar(0.5), std::nullopt); }, {"clamp_", "float32", "int32"});
}

TEST(CpuSelect, MaskedFill) {
  for (ScalarType dt : kAllDtypes) {
    const Tensor x = make({3, 4}, dt, 1), mask = make({4}, kBool, 2);
    const Ref rx = ref_of(x), rm = ref_of(mask);
    const double fill = dt == kBool ? 1 : 3;
    expect_matches(masked_fill(x, mask, Scalar(fill)),
                   ref_binary(rx, rm, [&](double v, double m) { return m != 0 ? fill : v; }), dt,
                   "masked_fill " + std::string(name(dt)));
  }
  // Out of place, self broadcasts against the mask too.
  const Tensor row = make({4}, kFloat32, 3), mask2 = make({3, 4}, kBool, 4);
  expect_matches(masked_fill(row, mask2, Scalar(-1.5)),
                 ref_binary(ref_of(row), ref_of(mask2), [](double v, double m) { return m != 0 ? -1.5 : v; }), kFloat32,
                 "masked_fill broadcast self");
  // A float value into an int tensor is converted.
  const Tensor ints = make({4}, kInt64, 5), m = make({4}, kBool, 6);
  expect_matches(masked_fill(ints, m, Scalar(2.7)),
                 ref_binary(ref_of(ints), ref_of(m), [](double v, double k) { return k != 0 ? 2.0 : v; }), kInt64,
                 "masked_fill int with float value");
  Tensor y = make({2, 4}, kFloat32, 7);
  const Ref y0 = ref_of(y);
  const Tensor mm = make({4}, kBool, 8);
  Tensor r = masked_fill_(y, mm, Scalar(9));
  EXPECT_EQ(r.impl(), y.impl());
  expect_matches(y, ref_binary(y0, ref_of(mm), [](double v, double k) { return k != 0 ? 9.0 : v; }), kFloat32,
                 "masked_fill_");
  expect_error<TypeError>([&] { masked_fill(y, make({4}, kUInt8), Scalar(0)); }, {"masked_fill", "bool", "uint8"});
  Tensor small = make({4}, kFloat32);
  expect_error<ValueError>([&] { masked_fill_(small, make({2, 4}, kBool), Scalar(0)); }, {"masked_fill_", "[4]"});
}

// ------------------------------------------------------------------------------ unary ops

struct UnaryCase {
  std::string name;
  std::function<Tensor(const Tensor&)> op;
  std::function<Tensor(Tensor&)> inplace;
  std::function<Tensor(Tensor&, const Tensor&)> out;  // empty: no out variant
  std::function<double(double)> ref;
  bool floating = true;       // integral inputs compute in float32
  bool positive = false;      // domain: x > 0
  bool allows_bool = true;
};

std::vector<UnaryCase> unary_cases() {
#define UNARY(NAME, REF, ...)                                                                          \
  UnaryCase {                                                                                          \
    #NAME, [](const Tensor& x) { return NAME(x); }, [](Tensor& x) { return NAME##_(x); },             \
        [](Tensor& o, const Tensor& x) { return NAME##_out(o, x); }, REF, __VA_ARGS__                  \
  }
  return {
      UNARY(exp, [](double x) { return std::exp(x); }),
      UNARY(log, [](double x) { return std::log(x); }, true, true),
      UNARY(log1p, [](double x) { return std::log1p(x); }, true, true),
      UNARY(sqrt, [](double x) { return std::sqrt(x); }, true, true),
      UNARY(rsqrt, [](double x) { return 1 / std::sqrt(x); }, true, true),
      UNARY(sin, [](double x) { return std::sin(x); }),
      UNARY(cos, [](double x) { return std::cos(x); }),
      UNARY(tanh, [](double x) { return std::tanh(x); }),
      UNARY(sigmoid, [](double x) { return 1 / (1 + std::exp(-x)); }),
      UNARY(erf, [](double x) { return std::erf(x); }),
      UNARY(neg, [](double x) { return -x; }, false, false, false),
      UNARY(abs, [](double x) { return std::abs(x); }, false),
      UNARY(sign, [](double x) { return double((x > 0) - (x < 0)); }, false),
      UnaryCase{"relu", [](const Tensor& x) { return relu(x); }, [](Tensor& x) { return relu_(x); }, nullptr,
                [](double x) { return std::max(x, 0.0); }, false, false, false},
  };
#undef UNARY
}

ScalarType unary_result(const UnaryCase& c, ScalarType dt) {
  return c.floating && !is_floating_point(dt) ? kFloat32 : dt;
}

TEST(CpuUnary, EveryOpEveryDtypeMatchesReference) {
  for (const UnaryCase& c : unary_cases()) {
    for (ScalarType dt : kAllDtypes) {
      if (dt == kBool && !c.allows_bool) continue;
      if (dt == kUInt8 && c.name == "neg") continue;  // wraps; checked separately
      for (const Shape& shape : {Shape{3, 4}, Shape{}, Shape{0, 3}, Shape{7}}) {
        const Tensor x = make(shape, dt, 1, false, c.positive);
        const std::string what = c.name + " " + std::string(name(dt)) + " " + shape_name(shape);
        // float16 results round once more than the reference: allow for it.
        expect_matches(c.op(x), ref_unary(ref_of(x), c.ref), unary_result(c, dt), what);
      }
    }
  }
  // uint8 negation wraps around.
  const double v[] = {0, 1, 200};
  EXPECT_EQ(neg(tensor_from_values(v, {3}, kUInt8)).to_double_vector(), (std::vector<double>{0, 255, 56}));
  // NaN passes through relu, and sign/abs keep bool.
  const double n[] = {NAN, -1, 2};
  EXPECT_TRUE(std::isnan(relu(tensor_from_values(n, {3})).to_double_vector()[0]));
  EXPECT_EQ(abs(make({3}, kBool, 1)).dtype(), kBool);
}

TEST(CpuUnary, StridedAndLargeInputs) {
  VIEW_OR_SKIP(t, transpose(make({5, 3}, kFloat32, 2), 0, 1));
  for (const UnaryCase& c : unary_cases()) {
    const Tensor x = c.positive ? abs(add(t, 0.125)) : t;
    expect_matches(c.op(x), ref_unary(ref_of(x), c.ref), kFloat32, c.name + " strided");
  }
  const Tensor big = make({300, 301}, kFloat64, 3);
  expect_matches(tanh(big), ref_unary(ref_of(big), [](double x) { return std::tanh(x); }), kFloat64, "tanh large");
  VIEW_OR_SKIP(bt, transpose(make({301, 300}, kFloat32, 4), 0, 1));
  expect_matches(exp(bt), ref_unary(ref_of(bt), [](double x) { return std::exp(x); }), kFloat32, "exp large strided");
}

TEST(CpuUnary, InplaceAndOutVariants) {
  for (const UnaryCase& c : unary_cases()) {
    for (ScalarType dt : {kFloat32, kFloat64, kFloat16, kInt32}) {
      if (c.floating && dt == kInt32) {
        // In-place on an int tensor cannot hold a float result.
        Tensor xi = make({4}, kInt32, 1, false, true);
        expect_error<TypeError>([&] { c.inplace(xi); }, {c.name + "_", "float32", "int32"});
        continue;
      }
      Tensor x = make({2, 3}, dt, 2, false, c.positive);
      const Ref want = ref_unary(ref_of(x), c.ref);
      const uint64_t v0 = x.version();
      Tensor r = c.inplace(x);
      EXPECT_EQ(r.impl(), x.impl()) << c.name;
      EXPECT_GT(x.version(), v0) << c.name;
      expect_matches(x, want, dt, c.name + "_ " + std::string(name(dt)));
    }
    if (!c.out) continue;
    const Tensor x = make({2, 3}, kInt64, 3, false, c.positive);
    const Ref want = ref_unary(ref_of(x), c.ref);
    Tensor out = empty({1}, kFloat64);  // resized, and receives the (float32 or int64) result widened
    Tensor r = c.out(out, x);
    EXPECT_EQ(r.impl(), out.impl()) << c.name;
    expect_matches(out, want, kFloat64, c.name + ".out", 1e-6);
    if (c.floating) {
      Tensor io = empty({2, 3}, kInt64);
      expect_error<TypeError>([&] { c.out(io, x); }, {c.name, "float32", "int64"});
    }
  }
  expect_error<TypeError>([&] { neg(make({3}, kBool)); }, {"neg", "bool"});
  expect_error<TypeError>([&] { relu(make({3}, kBool)); }, {"relu", "bool"});
}

// ------------------------------------------------------------------------------ copies

TEST(CpuCopy, CopyBroadcastsAndConvertsEveryDtypePair) {
  for (ScalarType from : kAllDtypes) {
    for (ScalarType to : kAllDtypes) {
      const Tensor src = make({3}, from, 1, false, to == kUInt8);
      Tensor dst = empty({2, 3}, to);
      const uint64_t v0 = dst.version();
      Tensor r = copy_(dst, src);
      EXPECT_EQ(r.impl(), dst.impl());
      EXPECT_GT(dst.version(), v0);
      // Values exact in every dtype (except bool targets: nonzero -> 1).
      Ref want = ref_binary(ref_of(make({2, 3}, kFloat64, 0)), ref_of(src), [](double, double s) { return s; });
      expect_matches(dst, want, to, "copy_ " + std::string(name(from)) + " -> " + std::string(name(to)));
    }
  }
}

TEST(CpuCopy, CopyStridedAndOverlapping) {
  VIEW_OR_SKIP(t, transpose(make({4, 3}, kFloat32, 1), 0, 1));
  Tensor dst = empty({3, 4}, kFloat64);
  copy_(dst, t);
  expect_matches(dst, ref_of(t), kFloat64, "copy_ from transposed");
  // Into a strided destination.
  Tensor base = zeros({3, 4}, kInt32);
  VIEW_OR_SKIP(cols, slice(base, 1, 0, 4, 2));  // [3, 2]
  const Tensor src = make({3, 2}, kInt32, 2);
  copy_(cols, src);
  const auto bv = base.to_double_vector(), sv = src.to_double_vector();
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(bv[size_t(r * 4)], sv[size_t(r * 2)]);
    EXPECT_EQ(bv[size_t(r * 4 + 2)], sv[size_t(r * 2 + 1)]);
    EXPECT_EQ(bv[size_t(r * 4 + 1)], 0);
  }
  // Overlapping source and destination (a shifted view of the same storage).
  Tensor seq = make({8}, kFloat32, 3);
  const auto s0 = seq.to_double_vector();
  VIEW_OR_SKIP(head, slice(seq, 0, 0, 6));
  VIEW_OR_SKIP(tail, slice(seq, 0, 2, 8));
  copy_(tail, head);
  const auto s1 = seq.to_double_vector();
  for (int i = 0; i < 6; ++i) EXPECT_EQ(s1[size_t(i + 2)], s0[size_t(i)]) << i;
  // Copying a tensor onto itself is a no-op.
  copy_(seq, seq);
  EXPECT_EQ(seq.to_double_vector(), s1);
  expect_error<ValueError>([&] { copy_(empty({3}), make({2, 3}, kFloat32)); }, {"copy_", "[2, 3]", "[3]"});
}

TEST(CpuCopy, ToContiguousClone) {
  const Tensor x = make({2, 3}, kFloat32, 1);
  Tensor same = to(x, kFloat32);
  EXPECT_EQ(same.impl(), x.impl());
  Tensor copied = to(x, kFloat32, false, true);
  EXPECT_NE(copied.impl(), x.impl());
  EXPECT_EQ(copied.to_double_vector(), x.to_double_vector());
  for (ScalarType dt : kAllDtypes) {
    const Tensor src = make({2, 3}, kFloat64, 2, false, dt == kUInt8);
    expect_matches(to(src, dt), ref_of(src), dt, "to " + std::string(name(dt)));
  }
  // Floats convert to ints by truncation, and to bool by "nonzero".
  const double fv[] = {2.7, -2.7, 0.0, 0.5};
  EXPECT_EQ(to(tensor_from_values(fv, {4}), kInt32).to_double_vector(), (std::vector<double>{2, -2, 0, 0}));
  EXPECT_EQ(to(tensor_from_values(fv, {4}), kBool).to_double_vector(), (std::vector<double>{1, 1, 0, 1}));
  EXPECT_EQ(contiguous(x).impl(), x.impl());
  Tensor c = clone(x);
  EXPECT_NE(c.impl(), x.impl());
  EXPECT_NE(c.data_ptr<float>(), x.data_ptr<float>());
  EXPECT_EQ(c.to_double_vector(), x.to_double_vector());
  VIEW_OR_SKIP(t, transpose(x, 0, 1));
  Tensor tc = contiguous(t);
  EXPECT_TRUE(tc.is_contiguous());
  EXPECT_EQ(tc.to_double_vector(), t.to_double_vector());
  Tensor cl = clone(t);
  EXPECT_EQ(cl.shape(), (Shape{3, 2}));
  EXPECT_EQ(cl.to_double_vector(), t.to_double_vector());
  EXPECT_EQ(clone(make({0, 3}, kInt64)).shape(), (Shape{0, 3}));
}

TEST(CpuCopy, Fill) {
  for (ScalarType dt : kAllDtypes) {
    Tensor x = empty({2, 3}, dt);
    const uint64_t v0 = x.version();
    Tensor r = fill_(x, Scalar(1));
    EXPECT_EQ(r.impl(), x.impl());
    EXPECT_GT(x.version(), v0);
    EXPECT_EQ(x.to_double_vector(), std::vector<double>(6, 1.0)) << name(dt);
  }
  Tensor f = empty({4}, kFloat16);
  fill_(f, Scalar(0.25));
  EXPECT_EQ(f.to_double_vector(), std::vector<double>(4, 0.25));
  Tensor i = empty({3}, kInt64);
  fill_(i, Scalar(-7.9));
  EXPECT_EQ(i.to_double_vector(), std::vector<double>(3, -7));
  Tensor b = empty({3}, kBool);
  fill_(b, Scalar(true));
  EXPECT_EQ(b.to_double_vector(), std::vector<double>(3, 1));
  // Through a strided view: only the view's elements change.
  Tensor base = zeros({3, 4}, kFloat32);
  VIEW_OR_SKIP(col, select(base, 1, 2));
  fill_(col, Scalar(5));
  const auto bv = base.to_double_vector();
  for (int k = 0; k < 12; ++k) EXPECT_EQ(bv[size_t(k)], k % 4 == 2 ? 5 : 0) << k;
  Tensor e = empty({0}, kFloat32);
  fill_(e, Scalar(1));
  EXPECT_EQ(e.numel(), 0);
}

}  // namespace

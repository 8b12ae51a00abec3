// Tests of the CPU plugin's reductions (sum, mean, prod, amax, amin, argmax, argmin, var, std,
// logsumexp) and softmax / log_softmax, against double-precision references computed here:
// every dim set (None, [], one, several, negative), keepdim, each dtype, strided and empty
// inputs, reductions large enough to run in parallel, out= variants and the errors.
#include <gtest/gtest.h>

#include "test_util.h"

#include <tessera/runtime.h>
#include <tessera/tessera.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace {

using tessera::testing::expect_error;

using namespace tessera;
using Shape = std::vector<int64_t>;
using Dims = std::optional<std::vector<int64_t>>;
using Group = std::vector<double>;

const std::vector<ScalarType> kAllDtypes = {kBool,    kUInt8,     kInt8,    kInt16,  kInt32,
                                            kInt64,   kFloat16,   kBFloat16, kFloat32, kFloat64};
const std::vector<ScalarType> kFloatDtypes = {kFloat16, kBFloat16, kFloat32, kFloat64};

using tessera::testing::numel_of;

// Deterministic values every dtype holds exactly (see test_cpu_elementwise.cpp).
Tensor make(const Shape& shape, ScalarType dtype, int seed = 0) {
  std::vector<double> v(size_t(numel_of(shape)));
  uint32_t state = 2463534242u + uint32_t(seed) * 7919u;
  for (double& x : v) {
    state ^= state << 13;
    state ^= state >> 17;
    state ^= state << 5;
    const int r = int(state % 1000);
    if (dtype == kBool) x = r % 2;
    else if (dtype == kUInt8) x = r % 10;
    else if (!is_floating_point(dtype)) x = r % 11 - 5;
    else x = (r % 25 - 12) / 4.0;
  }
  return tensor_from_values(v, shape, dtype);
}

struct Ref {
  Shape shape;
  std::vector<double> v;
};
Ref ref_of(const Tensor& t) { return {t.shape(), t.to_double_vector()}; }

// Reduces `in` over `dims` (none or empty: all) with f applied to each group of values, taken
// in row-major order of the reduced dims.
Ref ref_reduce(const Ref& in, const Dims& dims, bool keepdim, const std::function<double(const Group&)>& f) {
  const int64_t nd = int64_t(in.shape.size());
  std::vector<bool> mask(size_t(nd), !dims || dims->empty());
  if (dims)
    for (int64_t d : *dims) mask[size_t(d < 0 ? d + nd : d)] = true;
  Shape out_shape;
  for (int64_t d = 0; d < nd; ++d) {
    if (!mask[size_t(d)]) out_shape.push_back(in.shape[size_t(d)]);
    else if (keepdim) out_shape.push_back(1);
  }
  std::vector<Group> groups(size_t(numel_of(out_shape)));
  for (int64_t i = 0; i < numel_of(in.shape); ++i) {
    int64_t rem = i, out_index = 0, mul = 1;
    for (int64_t d = nd - 1; d >= 0; --d) {
      const int64_t c = rem % in.shape[size_t(d)];
      rem /= in.shape[size_t(d)];
      if (!mask[size_t(d)]) {
        out_index += c * mul;
        mul *= in.shape[size_t(d)];
      }
    }
    groups[size_t(out_index)].push_back(in.v[size_t(i)]);
  }
  Ref out{out_shape, {}};
  for (const Group& g : groups) out.v.push_back(f(g));
  return out;
}

double g_sum(const Group& g) {
  double s = 0;
  for (double x : g) s += x;
  return s;
}
double g_mean(const Group& g) { return g_sum(g) / double(g.size()); }
double g_prod(const Group& g) {
  double p = 1;
  for (double x : g) p *= x;
  return p;
}
double g_max(const Group& g) {
  double m = -INFINITY;
  for (double x : g) m = std::isnan(x) || std::isnan(m) ? NAN : std::max(m, x);
  return m;
}
double g_min(const Group& g) {
  double m = INFINITY;
  for (double x : g) m = std::isnan(x) || std::isnan(m) ? NAN : std::min(m, x);
  return m;
}
double g_argmax(const Group& g) {
  size_t best = 0;
  for (size_t i = 1; i < g.size(); ++i)
    if (!std::isnan(g[best]) && (g[i] > g[best] || std::isnan(g[i]))) best = i;
  return double(best);
}
double g_argmin(const Group& g) {
  size_t best = 0;
  for (size_t i = 1; i < g.size(); ++i)
    if (!std::isnan(g[best]) && (g[i] < g[best] || std::isnan(g[i]))) best = i;
  return double(best);
}
std::function<double(const Group&)> g_var(double correction, bool sqrt_of = false) {
  return [=](const Group& g) {
    const double m = g_mean(g);
    double s = 0;
    for (double x : g) s += (x - m) * (x - m);
    const double v = s / std::max(0.0, double(g.size()) - correction);
    return sqrt_of ? std::sqrt(v) : v;
  };
}
double g_logsumexp(const Group& g) {
  double m = -INFINITY;
  for (double x : g) m = std::max(m, x);
  if (std::isinf(m)) m = 0;
  double s = 0;
  for (double x : g) s += std::exp(x - m);
  return m + std::log(s);
}

using tessera::testing::as_dtype;
// Reductions accumulate: float32 results get twice the element-wise tolerance.
inline double rtol_for(ScalarType dtype) { return tessera::testing::rtol_for(dtype, 4e-6); }

void expect_matches(const Tensor& got, const Ref& want, ScalarType dtype, const std::string& what, double atol = 1e-6) {
  ASSERT_TRUE(got.defined()) << what;
  EXPECT_EQ(got.shape(), want.shape) << what;
  EXPECT_EQ(got.dtype(), dtype) << what << ": got " << name(got.dtype()) << ", want " << name(dtype);
  if (got.shape() != want.shape) return;
  const std::vector<double> g = got.to_double_vector();
  const double rtol = rtol_for(dtype);
  for (size_t i = 0; i < g.size(); ++i) {
    const double w = as_dtype(want.v[i], dtype);
    if (std::isnan(w)) EXPECT_TRUE(std::isnan(g[i])) << what << " [" << i << "]: got " << g[i] << ", want nan";
    else if (std::isinf(w)) EXPECT_EQ(g[i], w) << what << " [" << i << "]";
    else EXPECT_NEAR(g[i], w, (rtol > 0 ? atol : 0) + rtol * std::abs(w)) << what << " [" << i << "]";
  }
}



// Dim sets over a 3-d input: None, [], one dim, a negative dim, several (in any order), all.
const std::vector<Dims> kDimSets = {std::nullopt, std::vector<int64_t>{}, std::vector<int64_t>{0},
                                    std::vector<int64_t>{1}, std::vector<int64_t>{-1}, std::vector<int64_t>{0, 2},
                                    std::vector<int64_t>{2, 0}, std::vector<int64_t>{-1, 1, 0}};

std::string dims_name(const Dims& d) {
  if (!d) return "None";
  std::string s = "[";
  for (size_t i = 0; i < d->size(); ++i) s += (i ? "," : "") + std::to_string((*d)[i]);
  return s + "]";
}

ScalarType sum_dtype(ScalarType dt) { return is_floating_point(dt) ? dt : kInt64; }

// ------------------------------------------------------------------------------ sum / mean / prod

TEST(CpuReduce, SumEveryDtypeDimSetAndKeepdim) {
  for (ScalarType dt : kAllDtypes) {
    const Tensor x = make({2, 3, 4}, dt, 1);
    const Ref rx = ref_of(x);
    for (const Dims& dims : kDimSets) {
      for (bool keepdim : {false, true}) {
        const std::string what = "sum " + std::string(name(dt)) + " " + dims_name(dims) + (keepdim ? " keepdim" : "");
        expect_matches(sum(x, dims, keepdim), ref_reduce(rx, dims, keepdim, g_sum), sum_dtype(dt), what);
      }
    }
  }
}

TEST(CpuReduce, SumDtypeArgumentStridedEmptyAndZeroDim) {
  const Tensor i = make({3, 5}, kInt32, 2);
  expect_matches(sum(i, std::vector<int64_t>{1}, false, kFloat64), ref_reduce(ref_of(i), Dims{{1}}, false, g_sum),
                 kFloat64, "sum dtype=float64");
  expect_matches(sum(i, std::nullopt, false, kInt32), ref_reduce(ref_of(i), std::nullopt, false, g_sum), kInt32,
                 "sum dtype=int32");
  const Tensor f = make({4, 6}, kFloat32, 3);
  expect_matches(sum(f, std::vector<int64_t>{0}, false, kFloat16), ref_reduce(ref_of(f), Dims{{0}}, false, g_sum),
                 kFloat16, "sum dtype=float16");
  VIEW_OR_SKIP(p, permute(make({3, 4, 5}, kFloat64, 4), {2, 0, 1}));  // [5, 3, 4], not contiguous
  for (const Dims& dims : kDimSets)
    expect_matches(sum(p, dims, true), ref_reduce(ref_of(p), dims, true, g_sum), kFloat64, "sum permuted " + dims_name(dims));
  VIEW_OR_SKIP(s, slice(make({4, 10}, kInt64, 5), 1, 1, 9, 3));  // [4, 3], stride 3 along dim 1
  expect_matches(sum(s, std::vector<int64_t>{1}), ref_reduce(ref_of(s), Dims{{1}}, false, g_sum), kInt64, "sum sliced");
  // Empty inputs reduce to the identity.
  const Tensor e = make({0, 3}, kFloat32);
  expect_matches(sum(e, std::vector<int64_t>{0}), Ref{{3}, {0, 0, 0}}, kFloat32, "sum empty dim 0");
  expect_matches(sum(e, std::vector<int64_t>{1}), Ref{{0}, {}}, kFloat32, "sum empty dim 1");
  expect_matches(sum(e), Ref{{}, {0}}, kFloat32, "sum empty all");
  expect_matches(prod(e, std::vector<int64_t>{0}), Ref{{3}, {1, 1, 1}}, kFloat32, "prod empty");
  // A 0-dim tensor reduces over dim 0 / -1 to itself.
  const double v[] = {2.5};
  const Tensor z = tensor_from_values(v, {});
  expect_matches(sum(z, std::vector<int64_t>{0}), Ref{{}, {2.5}}, kFloat32, "sum 0-dim");
  expect_matches(sum(z, std::vector<int64_t>{-1}, true), Ref{{}, {2.5}}, kFloat32, "sum 0-dim keepdim");
}

TEST(CpuReduce, LargeReductionsInParallel) {
  // One output over ~1M elements: the reduction itself is split across threads.
  const Tensor big = make({1024, 1031}, kFloat32, 6);
  const Ref rb = ref_of(big);
  expect_matches(sum(big), ref_reduce(rb, std::nullopt, false, g_sum), kFloat32, "sum all large", 1e-3);
  expect_matches(sum(big, std::vector<int64_t>{1}), ref_reduce(rb, Dims{{1}}, false, g_sum), kFloat32, "sum rows large");
  expect_matches(sum(big, std::vector<int64_t>{0}), ref_reduce(rb, Dims{{0}}, false, g_sum), kFloat32, "sum cols large");
  expect_matches(amax(big), ref_reduce(rb, std::nullopt, false, g_max), kFloat32, "amax all large");
  expect_matches(argmin(big), ref_reduce(rb, std::nullopt, false, g_argmin), kInt64, "argmin all large");
  expect_matches(tessera::var(big), ref_reduce(rb, std::nullopt, false, g_var(1)), kFloat32, "var all large");
  expect_matches(logsumexp(big, {0, 1}), ref_reduce(rb, std::nullopt, false, g_logsumexp), kFloat32, "lse all large");
  // float32 sums accumulate in double: a million 0.1s stay accurate.
  Tensor tenths = empty({1 << 20}, kFloat32);
  fill_(tenths, Scalar(0.1));
  EXPECT_NEAR(sum(tenths).item_double(), 0.1f * double(1 << 20), 1e-2);
  const Tensor ints = make({1 << 20}, kInt32, 7);
  expect_matches(sum(ints), ref_reduce(ref_of(ints), std::nullopt, false, g_sum), kInt64, "sum ints large");
}

TEST(CpuReduce, MeanAndProd) {
  for (ScalarType dt : kFloatDtypes) {
    const Tensor x = make({2, 3, 4}, dt, 8);
    const Ref rx = ref_of(x);
    for (const Dims& dims : kDimSets) {
      expect_matches(mean(x, dims), ref_reduce(rx, dims, false, g_mean), dt, "mean " + dims_name(dims));
      expect_matches(mean(x, dims, true), ref_reduce(rx, dims, true, g_mean), dt, "mean keepdim " + dims_name(dims));
    }
  }
  const Tensor i = make({3, 4}, kInt64, 9);
  expect_matches(mean(i, std::vector<int64_t>{1}, false, kFloat32), ref_reduce(ref_of(i), Dims{{1}}, false, g_mean),
                 kFloat32, "mean int with dtype");
  EXPECT_TRUE(std::isnan(mean(make({0}, kFloat32)).item_double()));
  for (ScalarType dt : kAllDtypes) {
    const Tensor x = make({2, 3, 2}, dt, 10);
    for (const Dims& dims : {Dims{}, Dims{{1}}, Dims{{0, 2}}})
      expect_matches(prod(x, dims), ref_reduce(ref_of(x), dims, false, g_prod), sum_dtype(dt),
                     "prod " + std::string(name(dt)) + " " + dims_name(dims));
  }
  expect_matches(prod(i, std::vector<int64_t>{0}, true, kFloat64), ref_reduce(ref_of(i), Dims{{0}}, true, g_prod),
                 kFloat64, "prod dtype");
  expect_error<TypeError>([&] { mean(i); }, {"mean", "int64"});
  expect_error<TypeError>([&] { mean(make({3}, kBool)); }, {"mean", "bool"});
}

TEST(CpuReduce, SumAndMeanOutVariants) {
  const Tensor x = make({2, 3, 4}, kFloat32, 11);
  const Ref rx = ref_of(x);
  Tensor out = empty({1}, kFloat32);
  Tensor r = sum_out(out, x, std::vector<int64_t>{0, 2}, true);
  EXPECT_EQ(r.impl(), out.impl());
  expect_matches(out, ref_reduce(rx, Dims{{0, 2}}, true, g_sum), kFloat32, "sum.out resized");
  Tensor wide = empty({3}, kFloat64);
  sum_out(wide, x, std::vector<int64_t>{0, 2});
  expect_matches(wide, ref_reduce(rx, Dims{{0, 2}}, false, g_sum), kFloat64, "sum.out float64");
  Tensor m = empty({0}, kFloat32);
  mean_out(m, x, std::vector<int64_t>{-1});
  expect_matches(m, ref_reduce(rx, Dims{{-1}}, false, g_mean), kFloat32, "mean.out");
  Tensor io = empty({3}, kInt64);
  expect_error<TypeError>([&] { sum_out(io, x, std::vector<int64_t>{0, 2}); }, {"sum", "float32", "int64"});
  // int sums into an int64 out.
  const Tensor xi = make({4, 2}, kInt16, 12);
  sum_out(io, xi, std::vector<int64_t>{0});
  expect_matches(io, ref_reduce(ref_of(xi), Dims{{0}}, false, g_sum), kInt64, "sum.out int");
}

// ------------------------------------------------------------------------------ amax / amin / argmax / argmin

TEST(CpuReduce, AmaxAminEveryDtype) {
  for (ScalarType dt : kAllDtypes) {
    const Tensor x = make({2, 3, 4}, dt, 13);
    const Ref rx = ref_of(x);
    for (const Dims& dims : kDimSets) {
      const std::vector<int64_t> d = dims.value_or(std::vector<int64_t>{});
      for (bool keepdim : {false, true}) {
        const std::string what = std::string(name(dt)) + " " + dims_name(dims) + (keepdim ? " keepdim" : "");
        expect_matches(amax(x, d, keepdim), ref_reduce(rx, d, keepdim, g_max), dt, "amax " + what);
        expect_matches(amin(x, d, keepdim), ref_reduce(rx, d, keepdim, g_min), dt, "amin " + what);
      }
    }
  }
  VIEW_OR_SKIP(t, transpose(make({5, 3}, kInt32, 14), 0, 1));
  expect_matches(amax(t, {1}), ref_reduce(ref_of(t), Dims{{1}}, false, g_max), kInt32, "amax strided");
  expect_matches(amin(t, {0}, true), ref_reduce(ref_of(t), Dims{{0}}, true, g_min), kInt32, "amin strided");
}

TEST(CpuReduce, AmaxNaNEmptyAndOut) {
  const double v[] = {1, NAN, 3, -1, 2, 5};
  for (ScalarType dt : kFloatDtypes) {
    const Tensor x = tensor_from_values(v, {2, 3}, dt);
    expect_matches(amax(x, {1}), ref_reduce(ref_of(x), Dims{{1}}, false, g_max), dt, "amax NaN");
    expect_matches(amin(x, {0}), ref_reduce(ref_of(x), Dims{{0}}, false, g_min), dt, "amin NaN");
  }
  const Tensor e = make({0, 3}, kFloat32);
  expect_matches(amax(e, {1}), Ref{{0}, {}}, kFloat32, "amax over a nonempty dim of an empty tensor");
  expect_error<ValueError>([&] { amax(e, {0}); }, {"amax", "dim 0", "[0, 3]"});
  expect_error<ValueError>([&] { amin(e); }, {"amin", "non-zero size"});
  Tensor out = empty({7}, kFloat64);
  const Tensor x = make({3, 4}, kFloat32, 15);
  Tensor r = amax_out(out, x, {0});
  EXPECT_EQ(r.impl(), out.impl());
  expect_matches(out, ref_reduce(ref_of(x), Dims{{0}}, false, g_max), kFloat64, "amax.out");
  Tensor o2 = empty({3, 1}, kFloat32);
  amin_out(o2, x, {-1}, true);
  expect_matches(o2, ref_reduce(ref_of(x), Dims{{-1}}, true, g_min), kFloat32, "amin.out");
}

TEST(CpuReduce, ArgmaxArgmin) {
  for (ScalarType dt : {kUInt8, kInt8, kInt16, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64}) {
    const Tensor x = make({3, 4, 5}, dt, 16);  // few distinct values: many ties
    const Ref rx = ref_of(x);
    for (std::optional<int64_t> dim : {std::optional<int64_t>{}, std::optional<int64_t>{0}, std::optional<int64_t>{1},
                                       std::optional<int64_t>{-1}}) {
      const Dims dims = dim ? Dims{{*dim}} : Dims{};
      for (bool keepdim : {false, true}) {
        const std::string what = std::string(name(dt)) + (dim ? " dim " + std::to_string(*dim) : " None") +
                                 (keepdim ? " keepdim" : "");
        expect_matches(argmax(x, dim, keepdim), ref_reduce(rx, dims, keepdim, g_argmax), kInt64, "argmax " + what);
        expect_matches(argmin(x, dim, keepdim), ref_reduce(rx, dims, keepdim, g_argmin), kInt64, "argmin " + what);
      }
    }
  }
  // Ties give the first index; NaN counts as the extremum (its first occurrence).
  const double ties[] = {1, 3, 3, 0, 0, 1};
  EXPECT_EQ(argmax(tensor_from_values(ties, {6})).item_int(), 1);
  EXPECT_EQ(argmin(tensor_from_values(ties, {6})).item_int(), 3);
  const double nans[] = {1, NAN, 5, NAN};
  EXPECT_EQ(argmax(tensor_from_values(nans, {4})).item_int(), 1);
  EXPECT_EQ(argmin(tensor_from_values(nans, {4})).item_int(), 1);
  VIEW_OR_SKIP(t, transpose(make({4, 6}, kFloat32, 17), 0, 1));
  expect_matches(argmax(t, 0), ref_reduce(ref_of(t), Dims{{0}}, false, g_argmax), kInt64, "argmax strided dim 0");
  expect_matches(argmin(t), ref_reduce(ref_of(t), std::nullopt, false, g_argmin), kInt64, "argmin strided flat");
  expect_error<ValueError>([&] { argmax(make({0, 3}, kFloat32)); }, {"argmax", "empty"});
  expect_error<ValueError>([&] { argmin(make({0, 3}, kFloat32), 0); }, {"argmin", "non-zero size"});
  expect_matches(argmax(make({0, 3}, kFloat32), 1), Ref{{0}, {}}, kInt64, "argmax empty rows");
  expect_error<TypeError>([&] { argmax(make({3}, kBool)); }, {"argmax", "bool"});
  expect_error<IndexError>([&] { argmax(make({3}, kFloat32), 1); }, {"argmax", "out of range"});
}

// ------------------------------------------------------------------------------ var / std / logsumexp

TEST(CpuReduce, VarStdCorrections) {
  for (ScalarType dt : kFloatDtypes) {
    const Tensor x = make({3, 4, 5}, dt, 18);
    const Ref rx = ref_of(x);
    for (const Dims& dims : kDimSets) {
      for (double c : {1.0, 0.0, 2.0}) {
        const std::optional<Scalar> corr = c == 1.0 ? std::optional<Scalar>{} : std::optional<Scalar>{Scalar(c)};
        const std::string what = std::string(name(dt)) + " " + dims_name(dims) + " correction " + std::to_string(c);
        expect_matches(tessera::var(x, dims, corr), ref_reduce(rx, dims, false, g_var(c)), dt, "var " + what);
        expect_matches(tessera::std(x, dims, corr, true), ref_reduce(rx, dims, true, g_var(c, true)), dt, "std " + what);
      }
    }
  }
  // A fractional correction, and a single element (0 / 0 = NaN with the default correction).
  const Tensor x = make({6}, kFloat64, 19);
  expect_matches(tessera::var(x, std::nullopt, Scalar(0.5)), ref_reduce(ref_of(x), std::nullopt, false, g_var(0.5)),
                 kFloat64, "var correction 0.5");
  EXPECT_TRUE(std::isnan(tessera::var(make({1}, kFloat32)).item_double()));
  EXPECT_EQ(tessera::var(make({1}, kFloat32), std::nullopt, Scalar(0)).item_double(), 0);
  VIEW_OR_SKIP(t, transpose(make({5, 4}, kFloat32, 20), 0, 1));
  expect_matches(tessera::std(t, std::vector<int64_t>{1}), ref_reduce(ref_of(t), Dims{{1}}, false, g_var(1, true)),
                 kFloat32, "std strided");
  expect_error<TypeError>([&] { tessera::var(make({3}, kInt64)); }, {"var", "int64"});
  expect_error<TypeError>([&] { tessera::std(make({3}, kInt32)); }, {"std", "int32"});
}

TEST(CpuReduce, LogSumExpIsStable) {
  for (ScalarType dt : kFloatDtypes) {
    const Tensor x = make({3, 4, 5}, dt, 21);
    for (const std::vector<int64_t>& dims : {std::vector<int64_t>{0}, std::vector<int64_t>{-1},
                                             std::vector<int64_t>{0, 2}, std::vector<int64_t>{0, 1, 2}})
      expect_matches(logsumexp(x, dims, true), ref_reduce(ref_of(x), dims, true, g_logsumexp), dt,
                     "logsumexp " + std::string(name(dt)) + " " + dims_name(dims));
  }
  // Huge values do not overflow; infinities behave.
  const double big[] = {1000, 1000, -1000, 999, -INFINITY, -INFINITY, INFINITY, 1};
  const Tensor b = tensor_from_values(big, {4, 2}, kFloat64);
  const auto r = logsumexp(b, {1}).to_double_vector();
  EXPECT_NEAR(r[0], 1000 + std::log(2.0), 1e-12);
  EXPECT_NEAR(r[1], 999, 1e-12);
  EXPECT_EQ(r[2], -INFINITY);
  EXPECT_EQ(r[3], INFINITY);
  const Tensor bf = tensor_from_values(big, {4, 2}, kFloat32);
  EXPECT_NEAR(logsumexp(bf, {1}).to_double_vector()[0], 1000 + std::log(2.0), 1e-3);
  // Integers compute in float32; an empty reduction is -inf.
  const Tensor i = make({2, 3}, kInt64, 22);
  expect_matches(logsumexp(i, {1}), ref_reduce(ref_of(i), Dims{{1}}, false, g_logsumexp), kFloat32, "logsumexp int");
  expect_matches(logsumexp(make({2, 0}, kFloat32), {1}), Ref{{2}, {-INFINITY, -INFINITY}}, kFloat32, "logsumexp empty");
}

// ------------------------------------------------------------------------------ softmax

Ref ref_softmax(const Ref& in, int64_t dim, bool log) {
  const int64_t nd = int64_t(in.shape.size());
  if (nd == 0) return {in.shape, {log ? 0.0 : 1.0}};
  if (dim < 0) dim += nd;
  int64_t inner = 1;
  for (int64_t d = dim + 1; d < nd; ++d) inner *= in.shape[size_t(d)];
  const int64_t len = in.shape[size_t(dim)], outer = numel_of(in.shape) / std::max<int64_t>(1, len * inner);
  Ref out{in.shape, std::vector<double>(in.v.size())};
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t k = 0; k < inner; ++k) {
      auto at = [&](int64_t i) { return size_t((o * len + i) * inner + k); };
      double m = -INFINITY, s = 0;
      for (int64_t i = 0; i < len; ++i) m = std::max(m, in.v[at(i)]);
      for (int64_t i = 0; i < len; ++i) s += std::exp(in.v[at(i)] - m);
      for (int64_t i = 0; i < len; ++i)
        out.v[at(i)] = log ? in.v[at(i)] - m - std::log(s) : std::exp(in.v[at(i)] - m) / s;
    }
  }
  return out;
}

TEST(CpuSoftmax, EveryDimAndDtype) {
  for (ScalarType dt : kFloatDtypes) {
    const Tensor x = make({3, 4, 5}, dt, 23);
    for (int64_t dim : {0, 1, 2, -1, -3}) {
      const std::string what = std::string(name(dt)) + " dim " + std::to_string(dim);
      const double atol = dt == kFloat16 || dt == kBFloat16 ? 1e-3 : 1e-6;
      expect_matches(softmax(x, dim), ref_softmax(ref_of(x), dim, false), dt, "softmax " + what, atol);
      expect_matches(log_softmax(x, dim), ref_softmax(ref_of(x), dim, true), dt, "log_softmax " + what, atol);
    }
  }
  // A dtype argument casts first: float16 in, float32 out; ints need one.
  const Tensor h = make({4, 6}, kFloat16, 24);
  expect_matches(softmax(h, 1, kFloat32), ref_softmax(ref_of(h), 1, false), kFloat32, "softmax f16 -> f32");
  const Tensor i = make({4, 6}, kInt64, 25);
  expect_matches(log_softmax(i, 0, kFloat64), ref_softmax(ref_of(i), 0, true), kFloat64, "log_softmax int dtype");
  expect_error<TypeError>([&] { softmax(i, 0); }, {"softmax", "int64"});
  expect_error<IndexError>([&] { log_softmax(h, 2); }, {"log_softmax", "out of range"});
}

TEST(CpuSoftmax, StableStridedLargeEmptyAndZeroDim) {
  const double big[] = {1000, 1001, 1002, -1000, -1001, -1002};
  const Tensor b = tensor_from_values(big, {2, 3});
  expect_matches(softmax(b, 1), ref_softmax(ref_of(b), 1, false), kFloat32, "softmax huge");
  expect_matches(log_softmax(b, 1), ref_softmax(ref_of(b), 1, true), kFloat32, "log_softmax huge", 1e-3);
  VIEW_OR_SKIP(t, transpose(make({6, 5}, kFloat32, 26), 0, 1));
  expect_matches(softmax(t, 0), ref_softmax(ref_of(t), 0, false), kFloat32, "softmax strided dim 0");
  expect_matches(log_softmax(t, 1), ref_softmax(ref_of(t), 1, true), kFloat32, "log_softmax strided dim 1");
  const Tensor large = make({512, 300}, kFloat64, 27);
  expect_matches(softmax(large, 1), ref_softmax(ref_of(large), 1, false), kFloat64, "softmax large rows");
  expect_matches(log_softmax(large, 0), ref_softmax(ref_of(large), 0, true), kFloat64, "log_softmax large cols");
  EXPECT_EQ(softmax(make({0, 3}, kFloat32), 1).shape(), (Shape{0, 3}));
  EXPECT_EQ(softmax(make({3, 0}, kFloat32), 1).shape(), (Shape{3, 0}));
  const double one[] = {4};
  expect_matches(softmax(tensor_from_values(one, {}), 0), Ref{{}, {1}}, kFloat32, "softmax 0-dim");
  expect_matches(log_softmax(tensor_from_values(one, {}), -1), Ref{{}, {0}}, kFloat32, "log_softmax 0-dim");
}

// ------------------------------------------------------------------------------ dim errors

TEST(CpuReduce, DimErrors) {
  const Tensor x = make({2, 3}, kFloat32);
  expect_error<IndexError>([&] { sum(x, std::vector<int64_t>{2}); }, {"sum", "2", "out of range", "[-2, 1]"});
  expect_error<IndexError>([&] { mean(x, std::vector<int64_t>{-3}); }, {"mean", "-3", "out of range"});
  expect_error<IndexError>([&] { amax(x, {5}); }, {"amax", "out of range"});
  expect_error<IndexError>([&] { logsumexp(x, {2}); }, {"logsumexp", "out of range"});
  expect_error<IndexError>([&] { tessera::var(x, std::vector<int64_t>{3}); }, {"var", "out of range"});
  expect_error<ValueError>([&] { sum(x, std::vector<int64_t>{0, -2}); }, {"sum", "dim 0", "multiple times"});
  expect_error<ValueError>([&] { amin(x, {1, 1}); }, {"amin", "multiple times"});
  expect_error<ValueError>([&] { prod(x, std::vector<int64_t>{1, -1}); }, {"prod", "multiple times"});
}

}  // namespace

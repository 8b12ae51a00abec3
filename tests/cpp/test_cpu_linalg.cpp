// Tests of the CPU plugin's matrix products (mm, bmm, matmul, addmm and their out= forms)
// against a naive triple loop in double: many shapes including empty ones, transposed and
// strided views (read in place or copied), batched broadcasting, every supported dtype, out=
// tensors of several layouts, and the errors.
#include <gtest/gtest.h>

#include "test_util.h"

#include <tessera/runtime.h>
#include <tessera/tessera.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <vector>

namespace {

using tessera::testing::expect_error;

using namespace tessera;
using Shape = std::vector<int64_t>;


inline int64_t numel(const Shape& shape) { return tessera::testing::numel_of(shape); }

// Deterministic small values, exact in every dtype: quarters in [-1, 1] for floating dtypes,
// [-3, 3] for signed integers, [0, 3] for uint8 (so that no product of our sizes overflows).
Tensor data(const Shape& shape, ScalarType dt = kFloat32, int seed = 0) {
  std::vector<double> v(size_t(numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) {
    int64_t h = int64_t(i * 7 + size_t(seed) * 13 + i * i % 5);
    if (dt == kUInt8) v[i] = double(h % 4);
    else if (is_floating_point(dt)) v[i] = double(h % 9 - 4) / 4.0;
    else v[i] = double(h % 7 - 3);
  }
  return tensor_from_values(v, shape, dt);
}

// PyTorch's matmul rules, spelled out on row-major values.
struct Ref {
  Shape shape;
  std::vector<double> v;
};
Ref ref_matmul(const Tensor& x, const Tensor& y) {
  Shape xs = x.shape(), ys = y.shape();
  const auto xv = x.to_double_vector(), yv = y.to_double_vector();
  const bool row = xs.size() == 1, col = ys.size() == 1;
  if (row) xs.insert(xs.begin(), 1);
  if (col) ys.push_back(1);
  const int64_t M = xs[xs.size() - 2], K = xs.back(), N = ys.back();
  Shape xb(xs.begin(), xs.end() - 2), yb(ys.begin(), ys.end() - 2);
  const size_t nb = std::max(xb.size(), yb.size());
  xb.insert(xb.begin(), nb - xb.size(), 1);
  yb.insert(yb.begin(), nb - yb.size(), 1);
  Shape batch(nb);
  for (size_t d = 0; d < nb; ++d) batch[d] = xb[d] == 1 ? yb[d] : xb[d];
  Ref r;
  r.v.assign(size_t(numel(batch) * M * N), 0.0);
  for (int64_t b = 0; b < numel(batch); ++b) {
    int64_t rest = b, xo = 0, yo = 0, xm = 1, ym = 1;
    for (size_t d = nb; d-- > 0;) {
      const int64_t i = rest % batch[d];
      rest /= batch[d];
      xo += (xb[d] == 1 ? 0 : i) * xm, xm *= xb[d];
      yo += (yb[d] == 1 ? 0 : i) * ym, ym *= yb[d];
    }
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k) s += xv[size_t(xo * M * K + i * K + k)] * yv[size_t(yo * K * N + k * N + j)];
        r.v[size_t(b * M * N + i * N + j)] = s;
      }
  }
  r.shape = batch;
  if (!row) r.shape.push_back(M);
  if (!col) r.shape.push_back(N);
  return r;
}

void expect_close(const Tensor& got, const Ref& want, double rel = 1e-5) {
  ASSERT_EQ(got.shape(), want.shape);
  auto g = got.to_double_vector();
  ASSERT_EQ(g.size(), want.v.size());
  for (size_t i = 0; i < g.size(); ++i)
    ASSERT_NEAR(g[i], want.v[i], rel * (1 + std::abs(want.v[i]))) << "at flat index " << i;
}

// ---- mm

TEST(CpuLinalg, MmFloat32ManyShapes) {
  const std::vector<std::array<int64_t, 3>> shapes = {{1, 1, 1},  {2, 3, 4},  {17, 33, 9}, {64, 64, 64}, {5, 1, 7},
                                                      {1, 8, 1},  {3, 0, 4},  {0, 3, 4},   {3, 4, 0},    {130, 70, 3},
                                                      {1, 100, 7}, {9, 2, 1}};
  for (auto [m, k, n] : shapes) {
    SCOPED_TRACE(std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n));
    Tensor a = data({m, k}, kFloat32, 1), b = data({k, n}, kFloat32, 2);
    Tensor c = mm(a, b);
    EXPECT_EQ(c.dtype(), kFloat32);
    EXPECT_TRUE(c.is_contiguous());
    expect_close(c, ref_matmul(a, b));
  }
}

TEST(CpuLinalg, MmTransposedStridedAndExpandedViews) {
  const int64_t M = 13, K = 7, N = 11;
  Tensor a = data({M, K}, kFloat32, 3), b = data({K, N}, kFloat32, 4);
  Tensor at = transpose(data({K, M}, kFloat32, 5), 0, 1);  // column-major [M, K]
  Tensor bt = transpose(data({N, K}, kFloat32, 6), 0, 1);
  for (const Tensor& x : {a, at})
    for (const Tensor& y : {b, bt}) expect_close(mm(x, y), ref_matmul(x, y));
  // Row stride larger than the row (a slice of columns): read in place with a leading dim.
  Tensor wide = slice(data({M, 3 * K}, kFloat32, 7), 1, K, 2 * K);
  expect_close(mm(wide, b), ref_matmul(wide, b));
  // Steps in both dims fit neither layout: copied first.
  Tensor both = slice(slice(data({2 * M, 2 * K}, kFloat32, 8), 0, 0, 2 * M, 2), 1, 0, 2 * K, 2);
  expect_close(mm(both, bt), ref_matmul(both, bt));
  // Stride 0 (expanded) operands.
  Tensor row = expand(data({1, K}, kFloat32, 9), {M, K});
  expect_close(mm(row, b), ref_matmul(row, b));
  Tensor colb = expand(data({K, 1}, kFloat32, 10), {K, N});
  expect_close(mm(a, colb), ref_matmul(a, colb));
  // A selected plane of a 3-D tensor.
  Tensor plane = select(data({M, 3, K}, kFloat32, 11), 1, 2);
  expect_close(mm(plane, b), ref_matmul(plane, b));
}

TEST(CpuLinalg, MmEveryNumericDtype) {
  for (ScalarType dt : {kFloat64, kInt64, kInt32, kInt16, kInt8, kUInt8}) {
    SCOPED_TRACE(std::string(name(dt)));
    Tensor a = data({6, 9}, dt, 1), b = data({9, 5}, dt, 2);
    Tensor c = mm(a, b);
    EXPECT_EQ(c.dtype(), dt);
    expect_close(c, ref_matmul(a, b), 0);  // exact
    Tensor at = transpose(data({9, 6}, dt, 3), 0, 1);
    expect_close(mm(at, b), ref_matmul(at, b), 0);
  }
  for (ScalarType dt : {kFloat16, kBFloat16}) {
    SCOPED_TRACE(std::string(name(dt)));
    Tensor a = data({6, 9}, dt, 1), b = transpose(data({5, 9}, dt, 2), 0, 1);
    Tensor c = mm(a, b);
    EXPECT_EQ(c.dtype(), dt);
    expect_close(c, ref_matmul(a, b), dt == kFloat16 ? 1e-3 : 1e-2);
  }
  Tensor big = mm(data({40, 300}, kFloat64, 1), data({300, 50}, kFloat64, 2));  // blocked loop, several blocks
  expect_close(big, ref_matmul(data({40, 300}, kFloat64, 1), data({300, 50}, kFloat64, 2)), 1e-12);
}

TEST(CpuLinalg, MmOutLayouts) {
  Tensor a = data({4, 3}, kFloat32, 1), b = data({3, 5}, kFloat32, 2);
  const Ref want = ref_matmul(a, b);
  Tensor out = empty({0});
  EXPECT_EQ(mm_out(out, a, b).impl(), out.impl());
  expect_close(out, want);
  // Old contents, NaN included, do not leak into the result.
  Tensor nan = full({4, 5}, std::nan(""));
  mm_out(nan, a, b);
  expect_close(nan, want);
  // A transposed out is written column-major; a strided one through a buffer.
  Tensor t = transpose(full({5, 4}, std::nan("")), 0, 1);
  mm_out(t, a, b);
  expect_close(t, want);
  Tensor s = slice(full({4, 10}, std::nan("")), 1, 0, 10, 2);
  mm_out(s, a, b);
  expect_close(s, want);
  Tensor wrong = zeros({4, 5}, kFloat64);
  expect_error<TypeError>([&] { mm_out(wrong, a, b); }, {"mm", "float32", "float64"});
  Tensor sq = data({3, 3}, kFloat32, 3);
  expect_error<ValueError>([&] { mm_out(sq, sq, sq); }, {"mm", "overlap"});
}

TEST(CpuLinalg, MmErrors) {
  expect_error<ValueError>([] { mm(zeros({2, 3}), zeros({4, 5})); },
                           {"mm: expected mat1 columns (3) to equal mat2 rows (4), got [2, 3] and [4, 5]"});
  expect_error<ValueError>([] { mm(zeros({2, 3, 1}), zeros({3, 5})); }, {"mm", "2-D", "3-D"});
  expect_error<TypeError>([] { mm(zeros({2, 3}), zeros({3, 5}, kFloat64)); }, {"mm", "float32", "float64"});
  expect_error<TypeError>([] { mm(zeros({2, 3}, kBool), zeros({3, 5}, kBool)); }, {"mm", "bool"});
}

// ---- bmm

TEST(CpuLinalg, Bmm) {
  Tensor a = data({3, 4, 5}, kFloat32, 1), b = data({3, 5, 2}, kFloat32, 2);
  Tensor c = bmm(a, b);
  EXPECT_EQ(c.shape(), (Shape{3, 4, 2}));
  expect_close(c, ref_matmul(a, b));
  // Transposed matrices and a batch dim that is not outermost in memory.
  Tensor at = transpose(data({3, 5, 4}, kFloat32, 3), 1, 2);
  Tensor bp = permute(data({5, 3, 2}, kFloat32, 4), {1, 0, 2});
  expect_close(bmm(at, bp), ref_matmul(at, bp));
  // Many small products (run in parallel over the batch), other dtypes.
  Tensor sa = data({64, 4, 4}, kFloat32, 5), sb = data({64, 4, 4}, kFloat32, 6);
  expect_close(bmm(sa, sb), ref_matmul(sa, sb));
  Tensor ma = data({300, 16, 16}, kFloat32, 5), mb = transpose(data({300, 16, 16}, kFloat32, 6), 1, 2);
  expect_close(bmm(ma, mb), ref_matmul(ma, mb));
  Tensor da = data({300, 16, 16}, kFloat64, 5), db = data({300, 16, 16}, kFloat64, 6);
  expect_close(bmm(da, db), ref_matmul(da, db), 1e-12);
  for (ScalarType dt : {kFloat64, kInt64, kFloat16}) {
    Tensor x = data({2, 3, 4}, dt, 7), y = data({2, 4, 3}, dt, 8);
    expect_close(bmm(x, y), ref_matmul(x, y), dt == kFloat16 ? 1e-3 : 0);
  }
  EXPECT_EQ(bmm(zeros({0, 2, 3}), zeros({0, 3, 4})).shape(), (Shape{0, 2, 4}));
  expect_close(bmm(data({2, 3, 0}), data({2, 0, 4})), ref_matmul(data({2, 3, 0}), data({2, 0, 4})));
  Tensor out = zeros({1});
  bmm_out(out, a, b);
  expect_close(out, ref_matmul(a, b));
  expect_error<ValueError>([] { bmm(zeros({2, 3}), zeros({3, 4})); }, {"bmm", "3-D"});
  expect_error<ValueError>([] { bmm(zeros({2, 3, 4}), zeros({3, 4, 5})); }, {"bmm", "batch", "2", "3"});
  expect_error<ValueError>([] { bmm(zeros({2, 3, 4}), zeros({2, 5, 5})); }, {"bmm", "(4)", "(5)"});
}

// ---- matmul

TEST(CpuLinalg, MatmulFollowsPyTorchRules) {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{3}, {3}},          {{2, 3}, {3}},          {{3}, {3, 4}},       {{2, 3}, {3, 4}},
      {{5, 2, 3}, {3, 4}}, {{2, 3}, {5, 3, 4}},    {{2, 1, 3, 4}, {5, 4, 2}}, {{3}, {5, 3, 4}},
      {{5, 2, 3}, {3}},    {{1, 2, 3}, {4, 3, 2}}, {{4, 1, 2, 3}, {1, 3, 3, 2}}, {{6, 7, 8}, {6, 8, 9}},
      {{0, 2, 3}, {3, 4}}, {{2, 0}, {0, 3}}};
  for (const auto& [xs, ys] : cases) {
    SCOPED_TRACE("shapes of " + std::to_string(xs.size()) + " and " + std::to_string(ys.size()) + " dims, x0 " +
                 std::to_string(xs[0]) + " y0 " + std::to_string(ys[0]));
    Tensor x = data(xs, kFloat32, 1), y = data(ys, kFloat32, 2);
    expect_close(matmul(x, y), ref_matmul(x, y));
  }
  EXPECT_EQ(matmul(data({3}), data({3})).dim(), 0);
}

TEST(CpuLinalg, MatmulNonContiguousAndBroadcastViews) {
  // Batch rows that cannot be merged into one product (transposed batch).
  Tensor x = transpose(data({2, 5, 3}, kFloat32, 1), 0, 1);  // [5, 2, 3]
  Tensor w = data({3, 4}, kFloat32, 2);
  expect_close(matmul(x, w), ref_matmul(x, w));
  // An expanded batch (stride 0) and a transposed weight.
  Tensor e = expand(data({1, 3, 4}, kFloat32, 3), {5, 3, 4});
  Tensor wt = transpose(data({2, 4}, kFloat32, 4), 0, 1);
  expect_close(matmul(e, wt), ref_matmul(e, wt));
  // A strided 1-D operand on each side.
  Tensor v = slice(data({8}, kFloat32, 5), 0, 0, 8, 2);  // [4]
  expect_close(matmul(e, v), ref_matmul(e, v));
  Tensor u = slice(data({6}, kFloat32, 6), 0, 0, 6, 2);  // [3]
  expect_close(matmul(u, e), ref_matmul(u, e));
  // Other dtypes through the batched path.
  for (ScalarType dt : {kFloat64, kInt32, kBFloat16}) {
    Tensor a = data({2, 1, 3, 4}, dt, 7), b = data({3, 4, 2}, dt, 8);
    expect_close(matmul(a, b), ref_matmul(a, b), dt == kBFloat16 ? 1e-2 : 0);
  }
}

TEST(CpuLinalg, MatmulOut) {
  Tensor x = data({5, 2, 3}, kFloat32, 1), y = data({3, 4}, kFloat32, 2);
  Tensor out = zeros({1});
  EXPECT_EQ(matmul_out(out, x, y).impl(), out.impl());
  expect_close(out, ref_matmul(x, y));
  Tensor dot = zeros({7});
  matmul_out(dot, data({3}), data({3}, kFloat32, 1));
  EXPECT_EQ(dot.dim(), 0);
  expect_close(dot, ref_matmul(data({3}), data({3}, kFloat32, 1)));
  Tensor mv = full({2}, std::nan(""));
  matmul_out(mv, data({2, 3}), data({3}));
  expect_close(mv, ref_matmul(data({2, 3}), data({3})));
  // A transposed out of the right shape: written through its strides.
  Tensor t = transpose(zeros({4, 2}), 0, 1);
  matmul_out(t, data({2, 3}), y);
  expect_close(t, ref_matmul(data({2, 3}), y));
}

TEST(CpuLinalg, MatmulErrors) {
  expect_error<ValueError>([] { matmul(full({}, 1.0), zeros({2})); }, {"matmul", "1-D", "0-D"});
  expect_error<ValueError>([] { matmul(zeros({2, 3}), zeros({4, 5})); }, {"matmul", "(3)", "(4)", "[2, 3]", "[4, 5]"});
  expect_error<ValueError>([] { matmul(zeros({3}), zeros({4})); }, {"matmul", "(3)", "(4)"});
  expect_error<ValueError>([] { matmul(zeros({2, 2, 3}), zeros({3, 3, 4})); }, {"matmul", "broadcast"});
  expect_error<TypeError>([] { matmul(zeros({2, 3}), zeros({3, 2}, kInt64)); }, {"matmul", "float32", "int64"});
}

// ---- addmm

TEST(CpuLinalg, AddmmBroadcastsSelfWithBetaAndAlpha) {
  const int64_t M = 4, K = 3, N = 5;
  Tensor a = data({M, K}, kFloat32, 1), b = data({K, N}, kFloat32, 2);
  const Ref prod = ref_matmul(a, b);
  for (const Shape& bias_shape : {Shape{N}, Shape{M, N}, Shape{1, N}, Shape{M, 1}, Shape{}}) {
    SCOPED_TRACE("bias of " + std::to_string(bias_shape.size()) + " dims");
    Tensor bias = data(bias_shape, kFloat32, 3);
    Tensor full_bias = expand(bias, {M, N});
    auto bv = full_bias.to_double_vector();
    Ref want = prod;
    for (size_t i = 0; i < want.v.size(); ++i) want.v[i] = 0.5 * bv[i] + 2.0 * prod.v[i];
    expect_close(addmm(bias, a, b, 0.5, 2.0), want);
    Ref plain = prod;
    for (size_t i = 0; i < plain.v.size(); ++i) plain.v[i] = bv[i] + prod.v[i];
    expect_close(addmm(bias, a, b), plain);
  }
  // beta = 0: self is ignored, NaN included.
  Tensor nan = full({M, N}, std::nan(""));
  Ref twice = prod;
  for (double& v : twice.v) v *= 2;
  expect_close(addmm(nan, a, b, 0, 2), twice);
  // Transposed mat1, float64 and int64.
  Tensor at = transpose(data({K, M}, kFloat64, 4), 0, 1);
  Tensor b64 = data({K, N}, kFloat64, 5);
  Tensor bias64 = data({N}, kFloat64, 6);
  Ref want64 = ref_matmul(at, b64);
  auto bias_values = expand(bias64, {M, N}).to_double_vector();
  for (size_t i = 0; i < want64.v.size(); ++i) want64.v[i] += bias_values[i];
  expect_close(addmm(bias64, at, b64), want64, 1e-12);
  Tensor ia = data({M, K}, kInt64, 1), ib = data({K, N}, kInt64, 2), ic = data({M, N}, kInt64, 3);
  Ref wanti = ref_matmul(ia, ib);
  auto icv = ic.to_double_vector();
  for (size_t i = 0; i < wanti.v.size(); ++i) wanti.v[i] = 2 * icv[i] + 3 * wanti.v[i];
  expect_close(addmm(ic, ia, ib, 2, 3), wanti, 0);
}

TEST(CpuLinalg, AddmmOutAndErrors) {
  const int64_t M = 3, K = 2, N = 4;
  Tensor a = data({M, K}, kFloat32, 1), b = data({K, N}, kFloat32, 2), bias = data({N}, kFloat32, 3);
  Ref want = ref_matmul(a, b);
  auto bv = expand(bias, {M, N}).to_double_vector();
  for (size_t i = 0; i < want.v.size(); ++i) want.v[i] += bv[i];
  Tensor out = empty({0});
  EXPECT_EQ(addmm_out(out, bias, a, b).impl(), out.impl());
  expect_close(out, want);
  // out = self: accumulates in place.
  Tensor acc = data({M, N}, kFloat32, 4);
  auto accv = acc.to_double_vector();
  Ref want_acc = ref_matmul(a, b);
  for (size_t i = 0; i < want_acc.v.size(); ++i) want_acc.v[i] += accv[i];
  addmm_out(acc, acc, a, b);
  expect_close(acc, want_acc);
  expect_error<ValueError>([&] { addmm(data({N + 1}), a, b); }, {"addmm", "[5]", "[3, 4]"});
  expect_error<ValueError>([&] { addmm(bias, a, a); }, {"addmm", "mat1", "mat2"});
  expect_error<TypeError>([&] { addmm(data({N}, kFloat64), a, b); }, {"addmm", "float64", "float32"});
  Tensor small = data({N}, kFloat32, 5);
  expect_error<ValueError>([&] { addmm_out(small, small, a, b); }, {"addmm", "self"});
  EXPECT_EQ(small.shape(), (Shape{N}));  // refused before any resize
}

}  // namespace

// Tests of the CPU plugin's view and shape kernels (view, reshape, permute, transpose, expand,
// squeeze, unsqueeze, slice, select, narrow, flatten) and of cat/stack: values, shapes,
// strides, shared storage (writes through a view reach the base), non-contiguous inputs,
// dtypes, empty tensors and errors.
#include <gtest/gtest.h>

#include "test_util.h"

#include <tessera/runtime.h>
#include <tessera/tessera.h>

#include <numeric>
#include <string>
#include <vector>

namespace {

using tessera::testing::expect_error;

using namespace tessera;
using Shape = std::vector<int64_t>;


// 0, 1, 2, ... in `shape`.
using tessera::testing::seq;

Shape strides_of(const Tensor& t) {
  auto s = t.strides();
  return {s.begin(), s.end()};
}

std::vector<double> values(const Tensor& t) { return t.to_double_vector(); }

// True when v addresses the same storage as base, at v's storage offset.
bool shares_storage(const Tensor& v, const Tensor& base) {
  return v.impl()->storage().get() == base.impl()->storage().get();
}

// ---- view / reshape

TEST(CpuShape, ViewSplitsAndMergesSharingStorage) {
  Tensor x = seq({12});
  Tensor v = view(x, {3, 4});
  EXPECT_EQ(v.shape(), (Shape{3, 4}));
  EXPECT_EQ(strides_of(v), (Shape{4, 1}));
  EXPECT_EQ(v.data_ptr<float>(), x.data_ptr<float>());
  EXPECT_EQ(values(v), values(x));
  EXPECT_EQ(view(x, {-1, 6}).shape(), (Shape{2, 6}));
  EXPECT_EQ(view(x, {2, -1, 3}).shape(), (Shape{2, 2, 3}));
  EXPECT_EQ(view(v, {12}).shape(), (Shape{12}));
  // A write through the view is seen in the base.
  fill_(select(v, 0, 1), 100.0);
  EXPECT_EQ(values(x)[4], 100.0);
  EXPECT_EQ(values(x)[7], 100.0);
  EXPECT_EQ(values(x)[8], 8.0);
}

TEST(CpuShape, ViewOfSizeOneAndZeroDimAndEmpty) {
  Tensor s = full({}, 3.0);
  EXPECT_EQ(view(s, {1}).shape(), (Shape{1}));
  EXPECT_EQ(view(s, {1, 1, 1}).shape(), (Shape{1, 1, 1}));
  EXPECT_EQ(view(view(s, {1}), {}).dim(), 0);
  EXPECT_EQ(view(s, {-1}).shape(), (Shape{1}));
  Tensor e = zeros({0, 4});
  EXPECT_EQ(view(e, {4, 0, 2}).shape(), (Shape{4, 0, 2}));
  EXPECT_EQ(view(e, {0}).shape(), (Shape{0}));
  expect_error<ValueError>([&] { view(e, {-1, 0}); }, {"view", "infer"});
}

TEST(CpuShape, ViewOfNonContiguousWhereStridesAllow) {
  Tensor x = seq({4, 3});
  Tensor t = transpose(x, 0, 1);  // [3, 4], strides [1, 3]
  Tensor v = view(t, {3, 2, 2});  // splitting a dim always works
  EXPECT_EQ(v.shape(), (Shape{3, 2, 2}));
  EXPECT_TRUE(shares_storage(v, x));
  EXPECT_EQ(values(v), values(t));
  Tensor u = view(t, {1, 3, 4, 1});  // adding size-1 dims too
  EXPECT_EQ(values(u), values(t));
  // A slice with a step keeps merged dims viewable where they stay contiguous.
  Tensor y = seq({4, 2, 3});
  Tensor sl = slice(y, 0, 0, 4, 2);  // [2, 2, 3], strides [12, 3, 1]
  Tensor w = view(sl, {2, 6});
  EXPECT_EQ(strides_of(w), (Shape{12, 1}));
  EXPECT_EQ(values(w), values(sl));
}

TEST(CpuShape, ViewProperty_SameRowMajorValuesWheneverItSucceeds) {
  Tensor base = seq({2, 3, 4, 5});
  std::vector<Tensor> inputs = {base, transpose(base, 1, 3), permute(base, {2, 0, 3, 1}), slice(base, 3, 0, 5, 2),
                                select(base, 2, 1), expand(slice(base, 1, 0, 1), {2, 6, 4, 5})};
  std::vector<Shape> targets = {{-1}, {2, -1}, {6, -1}, {-1, 5}, {-1, 4}, {-1, 2}, {-1, 3}, {1, -1, 1}};
  int viewed = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    for (const Shape& target : targets) {
      SCOPED_TRACE("input " + std::to_string(i) + ", target of " + std::to_string(target.size()) + " dims");
      const Tensor& in = inputs[i];
      int64_t known = 1;
      for (int64_t s : target) known *= s == -1 ? 1 : s;
      if (in.numel() % known) continue;
      Tensor r = reshape(in, target);
      EXPECT_EQ(values(r), values(in));
      try {
        Tensor v = view(in, target);
        ++viewed;
        EXPECT_EQ(values(v), values(in));
        EXPECT_TRUE(shares_storage(v, base));
      } catch (const ValueError& e) {
        EXPECT_NE(std::string(e.what()).find("reshape"), std::string::npos) << e.what();
      }
    }
  }
  EXPECT_GT(viewed, 10);
}

TEST(CpuShape, ViewErrors) {
  Tensor x = seq({16});
  expect_error<ValueError>([&] { view(x, {3, 5}); }, {"view", "[3, 5]", "invalid for input of size 16"});
  expect_error<ValueError>([&] { view(x, {-1, -1}); }, {"view", "one dimension"});
  expect_error<ValueError>([&] { view(x, {-2, 8}); }, {"view", "-2"});
  expect_error<ValueError>([&] { view(x, {3, -1}); }, {"view", "invalid for input of size 16"});
  Tensor t = transpose(view(x, {4, 4}), 0, 1);
  expect_error<ValueError>([&] { view(t, {16}); }, {"view", "reshape"});
}

TEST(CpuShape, ReshapeAliasesWhenPossibleElseCopies) {
  Tensor x = seq({2, 6});
  Tensor r = reshape(x, {3, 4});
  EXPECT_EQ(r.data_ptr<float>(), x.data_ptr<float>());
  EXPECT_EQ(values(r), values(x));
  Tensor t = transpose(x, 0, 1);  // [6, 2]
  Tensor c = reshape(t, {12});
  EXPECT_FALSE(shares_storage(c, x));
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(values(c), values(t));
  EXPECT_EQ(values(c), (std::vector<double>{0, 6, 1, 7, 2, 8, 3, 9, 4, 10, 5, 11}));
  EXPECT_EQ(reshape(t, {-1, 3}).shape(), (Shape{4, 3}));
  expect_error<ValueError>([&] { reshape(x, {5, -1}); }, {"reshape", "invalid for input of size 12"});
}

// ---- permute / transpose

TEST(CpuShape, PermuteAndTranspose) {
  Tensor x = seq({2, 3, 4});
  Tensor p = permute(x, {2, 0, 1});
  EXPECT_EQ(p.shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(strides_of(p), (Shape{1, 12, 4}));
  EXPECT_EQ(p.data_ptr<float>(), x.data_ptr<float>());
  auto xv = values(x), pv = values(p);
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 2; ++j)
      for (int64_t k = 0; k < 3; ++k) EXPECT_EQ(pv[size_t(i * 6 + j * 3 + k)], xv[size_t(j * 12 + k * 4 + i)]);
  EXPECT_EQ(permute(x, {-1, 0, 1}).shape(), (Shape{4, 2, 3}));

  Tensor t = transpose(x, 0, -1);
  EXPECT_EQ(t.shape(), (Shape{4, 3, 2}));
  EXPECT_EQ(strides_of(t), (Shape{1, 4, 12}));
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(transpose(x, 1, 1).shape(), x.shape());
  EXPECT_EQ(transpose(full({}, 1.0), 0, -1).dim(), 0);

  expect_error<ValueError>([&] { permute(x, {0, 1}); }, {"permute", "3"});
  expect_error<ValueError>([&] { permute(x, {0, 1, 1}); }, {"permute", "more than once"});
  expect_error<IndexError>([&] { permute(x, {0, 1, 3}); }, {"permute", "3"});
  expect_error<IndexError>([&] { transpose(x, 0, 3); }, {"transpose", "dimension 3", "out of range"});
  expect_error<IndexError>([&] { transpose(x, -4, 0); }, {"transpose", "-4"});
}

// ---- expand

TEST(CpuShape, ExpandBroadcastsWithStrideZero) {
  Tensor x = seq({3, 1});
  Tensor e = expand(x, {3, 4});
  EXPECT_EQ(e.shape(), (Shape{3, 4}));
  EXPECT_EQ(strides_of(e), (Shape{1, 0}));
  EXPECT_EQ(values(e), (std::vector<double>{0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2}));
  Tensor l = expand(x, {2, -1, 2});
  EXPECT_EQ(l.shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(strides_of(l), (Shape{0, 1, 0}));
  EXPECT_EQ(l.data_ptr<float>(), x.data_ptr<float>());
  EXPECT_EQ(expand(full({}, 2.0), {2, 2}).shape(), (Shape{2, 2}));
  EXPECT_EQ(expand(x, {0, 3, 0}).numel(), 0);
  expect_error<ValueError>([&] { expand(x, {4, 4}); }, {"expand", "(4)", "(3)", "dimension 0"});
  expect_error<ValueError>([&] { expand(x, {4}); }, {"expand", "number of sizes"});
  expect_error<ValueError>([&] { expand(x, {-1, 3, 4}); }, {"expand", "leading"});
}

// ---- squeeze / unsqueeze

TEST(CpuShape, SqueezeAndUnsqueeze) {
  Tensor x = seq({1, 3, 1, 2});
  Tensor s = squeeze(x);
  EXPECT_EQ(s.shape(), (Shape{3, 2}));
  EXPECT_EQ(strides_of(s), (Shape{2, 1}));
  EXPECT_EQ(s.data_ptr<float>(), x.data_ptr<float>());
  EXPECT_EQ(squeeze(x, 2).shape(), (Shape{1, 3, 2}));
  EXPECT_EQ(squeeze(x, -4).shape(), (Shape{3, 1, 2}));
  EXPECT_EQ(squeeze(x, 1).shape(), x.shape());  // not size 1: unchanged
  EXPECT_EQ(squeeze(full({}, 1.0)).dim(), 0);
  EXPECT_EQ(squeeze(full({}, 1.0), 0).dim(), 0);
  expect_error<IndexError>([&] { squeeze(x, 4); }, {"squeeze", "4"});

  Tensor y = seq({2, 3});
  Tensor u0 = unsqueeze(y, 0), u1 = unsqueeze(y, 1), u2 = unsqueeze(y, -1);
  EXPECT_EQ(u0.shape(), (Shape{1, 2, 3}));
  EXPECT_EQ(u1.shape(), (Shape{2, 1, 3}));
  EXPECT_EQ(u2.shape(), (Shape{2, 3, 1}));
  EXPECT_TRUE(u0.is_contiguous() && u1.is_contiguous() && u2.is_contiguous());
  EXPECT_EQ(strides_of(u1), (Shape{3, 3, 1}));
  EXPECT_EQ(values(u1), values(y));
  EXPECT_EQ(unsqueeze(full({}, 1.0), 0).shape(), (Shape{1}));
  // On a transposed tensor the new dim keeps the others' strides.
  Tensor t = transpose(y, 0, 1);
  EXPECT_EQ(strides_of(unsqueeze(t, 1)), (Shape{1, 6, 3}));  // size(1) * stride(1)
  expect_error<IndexError>([&] { unsqueeze(y, 3); }, {"unsqueeze", "3"});
  expect_error<IndexError>([&] { unsqueeze(y, -4); }, {"unsqueeze", "-4"});
}

// ---- slice / select / narrow

TEST(CpuShape, SliceFollowsPythonRules) {
  Tensor x = seq({3, 6});
  Tensor s = slice(x, 1, 0, 4, 2);
  EXPECT_EQ(s.shape(), (Shape{3, 2}));
  EXPECT_EQ(strides_of(s), (Shape{6, 2}));
  EXPECT_EQ(values(s), (std::vector<double>{0, 2, 6, 8, 12, 14}));
  EXPECT_EQ(s.data_ptr<float>(), x.data_ptr<float>());
  Tensor n = slice(x, 1, -3);  // the last three columns
  EXPECT_EQ(n.storage_offset(), 3);
  EXPECT_EQ(values(n), (std::vector<double>{3, 4, 5, 9, 10, 11, 15, 16, 17}));
  EXPECT_EQ(values(slice(x, 0, std::nullopt, -1)), (std::vector<double>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(slice(x, 1, -100, 100).shape(), (Shape{3, 6}));  // clamps
  EXPECT_EQ(slice(x, 1, 5, 2).shape(), (Shape{3, 0}));        // end before start: empty
  EXPECT_EQ(slice(x, 1, 7, 9).shape(), (Shape{3, 0}));
  EXPECT_EQ(slice(x, 1, 1, 6, 4).shape(), (Shape{3, 2}));     // ceil(5 / 4)
  EXPECT_EQ(values(slice(x, 1, 1, 6, 4)), (std::vector<double>{1, 5, 7, 11, 13, 17}));
  expect_error<ValueError>([&] { slice(x, 1, 0, 4, 0); }, {"slice", "step", "0"});
  expect_error<ValueError>([&] { slice(x, 1, 0, 4, -1); }, {"slice", "step"});
  expect_error<IndexError>([&] { slice(x, 2); }, {"slice", "dimension 2"});
  expect_error<IndexError>([&] { slice(full({}, 1.0), 0); }, {"slice", "0-d"});
}

TEST(CpuShape, SelectSharesStorageAndWritesThrough) {
  Tensor x = seq({3, 4});
  Tensor r = select(x, 0, 1);
  EXPECT_EQ(r.shape(), (Shape{4}));
  EXPECT_EQ(r.data_ptr<float>(), x.data_ptr<float>() + 4);
  EXPECT_EQ(values(r), (std::vector<double>{4, 5, 6, 7}));
  Tensor c = select(x, 1, -1);
  EXPECT_EQ(values(c), (std::vector<double>{3, 7, 11}));
  EXPECT_EQ(strides_of(c), (Shape{4}));
  fill_(c, -1.0);
  EXPECT_EQ(values(x), (std::vector<double>{0, 1, 2, -1, 4, 5, 6, -1, 8, 9, 10, -1}));
  EXPECT_EQ(select(select(x, 0, 2), 0, 1).item_double(), 9.0);
  expect_error<IndexError>([&] { select(x, 0, 3); }, {"select", "index 3", "size 3"});
  expect_error<IndexError>([&] { select(x, 1, -5); }, {"select", "-5"});
  expect_error<IndexError>([&] { select(x, 2, 0); }, {"select", "dimension 2"});
  expect_error<IndexError>([&] { select(full({}, 1.0), 0, 0); }, {"select", "0-d"});
}

TEST(CpuShape, Narrow) {
  Tensor x = seq({3, 5});
  Tensor n = narrow(x, 1, 1, 3);
  EXPECT_EQ(n.shape(), (Shape{3, 3}));
  EXPECT_EQ(n.storage_offset(), 1);
  EXPECT_EQ(values(n), (std::vector<double>{1, 2, 3, 6, 7, 8, 11, 12, 13}));
  EXPECT_EQ(values(narrow(x, 0, -1, 1)), (std::vector<double>{10, 11, 12, 13, 14}));
  EXPECT_EQ(narrow(x, 1, 5, 0).shape(), (Shape{3, 0}));
  expect_error<ValueError>([&] { narrow(x, 1, 3, 3); }, {"narrow", "start 3", "length 3"});
  expect_error<IndexError>([&] { narrow(x, 1, 6, 0); }, {"narrow", "start 6"});
  expect_error<ValueError>([&] { narrow(x, 0, 0, -1); }, {"narrow", "length -1"});
}

TEST(CpuShape, ChainedViewsAgreeWithIndexArithmetic) {
  Tensor x = seq({4, 5, 6});
  // x.transpose(0, 2)[1:5:2].select(1, 3): element [i][k] = x[k][3][1 + 2i]
  Tensor v = select(slice(transpose(x, 0, 2), 0, 1, 5, 2), 1, 3);
  EXPECT_EQ(v.shape(), (Shape{2, 4}));
  auto got = values(v);
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t k = 0; k < 4; ++k) EXPECT_EQ(got[size_t(i * 4 + k)], double(k * 30 + 3 * 6 + 1 + 2 * i));
  fill_(v, -7.0);
  EXPECT_EQ(values(x)[size_t(2 * 30 + 3 * 6 + 3)], -7.0);
}

// ---- flatten

TEST(CpuShape, Flatten) {
  Tensor x = seq({2, 3, 4});
  Tensor f = flatten(x);
  EXPECT_EQ(f.shape(), (Shape{24}));
  EXPECT_EQ(f.data_ptr<float>(), x.data_ptr<float>());
  EXPECT_EQ(flatten(x, 1).shape(), (Shape{2, 12}));
  EXPECT_EQ(flatten(x, 0, 1).shape(), (Shape{6, 4}));
  EXPECT_EQ(flatten(x, -2, -1).shape(), (Shape{2, 12}));
  EXPECT_EQ(flatten(x, 1, 1).shape(), x.shape());
  EXPECT_EQ(flatten(full({}, 5.0)).shape(), (Shape{1}));
  Tensor t = transpose(x, 0, 2);  // not viewable as 1-D: copied
  Tensor ft = flatten(t);
  EXPECT_EQ(values(ft), values(t));
  expect_error<ValueError>([&] { flatten(x, 2, 1); }, {"flatten", "start_dim"});
  expect_error<IndexError>([&] { flatten(x, 0, 3); }, {"flatten", "3"});
}

TEST(CpuShape, ViewsOfEmptyTensors) {
  Tensor e = zeros({2, 0, 3});
  EXPECT_EQ(transpose(e, 0, 2).shape(), (Shape{3, 0, 2}));
  EXPECT_EQ(permute(e, {1, 2, 0}).shape(), (Shape{0, 3, 2}));
  EXPECT_EQ(flatten(e).shape(), (Shape{0}));
  EXPECT_EQ(flatten(e, 1).shape(), (Shape{2, 0}));
  EXPECT_EQ(reshape(transpose(e, 0, 2), {0, 6}).shape(), (Shape{0, 6}));
  EXPECT_EQ(unsqueeze(e, 1).shape(), (Shape{2, 1, 0, 3}));
  EXPECT_EQ(squeeze(unsqueeze(e, 0)).shape(), (Shape{2, 0, 3}));
  EXPECT_EQ(select(e, 2, 1).shape(), (Shape{2, 0}));
  EXPECT_EQ(narrow(e, 0, 1, 1).shape(), (Shape{1, 0, 3}));
  EXPECT_EQ(slice(e, 2, 1).shape(), (Shape{2, 0, 2}));
  EXPECT_EQ(expand(zeros({0, 1}), {0, 4}).shape(), (Shape{0, 4}));
  expect_error<IndexError>([&] { select(e, 1, 0); }, {"select", "index 0", "size 0"});
}

TEST(CpuShape, ViewsWorkForEveryDtype) {
  for (ScalarType dt : {kBool, kUInt8, kInt8, kInt16, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64}) {
    SCOPED_TRACE(std::string(name(dt)));
    Tensor x = tensor_from_values(std::vector<double>{0, 1, 1, 0, 1, 1}, {2, 3}, dt);
    Tensor t = transpose(x, 0, 1);
    EXPECT_EQ(t.dtype(), dt);
    EXPECT_EQ(values(t), (std::vector<double>{0, 0, 1, 1, 1, 1}));
    EXPECT_EQ(values(reshape(t, {6})), (std::vector<double>{0, 0, 1, 1, 1, 1}));
    EXPECT_EQ(values(select(x, 1, 2)), (std::vector<double>{1, 1}));
  }
}

// ---- cat / stack

TEST(CpuJoin, CatAlongEachDim) {
  Tensor a = seq({2, 3}), b = seq({1, 3}, kFloat32, 10), c = seq({2, 2}, kFloat32, 20);
  Tensor r0 = cat({a, b}, 0);
  EXPECT_EQ(r0.shape(), (Shape{3, 3}));
  EXPECT_TRUE(r0.is_contiguous());
  EXPECT_EQ(values(r0), (std::vector<double>{0, 1, 2, 3, 4, 5, 10, 11, 12}));
  Tensor r1 = cat({a, c}, -1);
  EXPECT_EQ(r1.shape(), (Shape{2, 5}));
  EXPECT_EQ(values(r1), (std::vector<double>{0, 1, 2, 20, 21, 3, 4, 5, 22, 23}));
  EXPECT_EQ(values(cat({a})), values(a));
  EXPECT_NE(cat({a}).data_ptr<float>(), a.data_ptr<float>());  // always a new tensor
}

TEST(CpuJoin, CatNonContiguousAndMixedDtypes) {
  Tensor a = transpose(seq({3, 2}), 0, 1);  // [2, 3] values 0 2 4 / 1 3 5
  Tensor b = tensor_from_values(std::vector<double>{7, 8}, {2, 1}, kInt64);
  Tensor r = cat({a, b}, 1);
  EXPECT_EQ(r.dtype(), kFloat32);
  EXPECT_EQ(values(r), (std::vector<double>{0, 2, 4, 7, 1, 3, 5, 8}));
  Tensor i = cat({tensor_from_values(std::vector<double>{1, 0}, {2}, kBool),
                  tensor_from_values(std::vector<double>{5}, {1}, kInt8)});
  EXPECT_EQ(i.dtype(), kInt8);
  EXPECT_EQ(values(i), (std::vector<double>{1, 0, 5}));
  Tensor d = cat({seq({2}, kFloat16), seq({2}, kFloat64)});
  EXPECT_EQ(d.dtype(), kFloat64);
  // A strided slice as input, with expanded (stride 0) input too.
  Tensor s = slice(seq({2, 6}), 1, 0, 6, 3);          // [2, 2]: 0 3 / 6 9
  Tensor e = expand(seq({1, 1}, kFloat32, 5), {2, 3});  // all 5
  EXPECT_EQ(values(cat({s, e}, 1)), (std::vector<double>{0, 3, 5, 5, 5, 6, 9, 5, 5, 5}));
}

TEST(CpuJoin, CatOfLargePermutedInputsMatchesReference) {
  // Sizes that are not multiples of the copy's tiles, an outer dim on both sides, and enough
  // elements for the copy to be split over threads.
  Tensor a = permute(seq({3, 145, 170}), {0, 2, 1});             // [3, 170, 145], transposed planes
  Tensor b = permute(seq({145, 3, 33}, kFloat32, 1e5), {1, 2, 0});  // [3, 33, 145]
  Tensor r = cat({a, b}, 1);
  ASSERT_EQ(r.shape(), (Shape{3, 203, 145}));
  auto av = values(a), bv = values(b), rv = values(r);
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 203; ++j)
      for (int64_t k = 0; k < 145; ++k) {
        const double want = j < 170 ? av[size_t((i * 170 + j) * 145 + k)] : bv[size_t((i * 33 + j - 170) * 145 + k)];
        ASSERT_EQ(rv[size_t((i * 203 + j) * 145 + k)], want) << i << " " << j << " " << k;
      }
  // And into a transposed out (the other side of the transpose).
  Tensor out = transpose(zeros({145, 203, 3}), 0, 2);
  cat_out(out, {a, b}, 1);
  EXPECT_EQ(values(out), rv);
}

TEST(CpuJoin, CatEveryDtype) {
  for (ScalarType dt : {kBool, kUInt8, kInt8, kInt16, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64}) {
    SCOPED_TRACE(std::string(name(dt)));
    Tensor a = tensor_from_values(std::vector<double>{1, 0, 1, 1}, {2, 2}, dt);
    Tensor r = cat({a, transpose(a, 0, 1)}, 1);
    EXPECT_EQ(r.dtype(), dt);
    EXPECT_EQ(values(r), (std::vector<double>{1, 0, 1, 1, 1, 1, 0, 1}));
  }
}

TEST(CpuJoin, CatSkipsEmptyOneDimTensorsAndHandlesEmpty) {
  Tensor a = seq({2, 2});
  Tensor r = cat({zeros({0}), a, zeros({0})}, 1);
  EXPECT_EQ(r.shape(), (Shape{2, 2}));
  EXPECT_EQ(values(r), values(a));
  EXPECT_EQ(cat({zeros({0}), zeros({0})}).shape(), (Shape{0}));
  EXPECT_EQ(cat({zeros({0, 3}), seq({2, 3})}).shape(), (Shape{2, 3}));
  EXPECT_EQ(cat({zeros({2, 0}), zeros({2, 0})}, 1).shape(), (Shape{2, 0}));
}

TEST(CpuJoin, CatOut) {
  Tensor a = seq({2, 2}), b = seq({2, 1}, kFloat32, 10);
  Tensor out = zeros({1});
  Tensor r = cat_out(out, {a, b}, 1);
  EXPECT_EQ(r.impl(), out.impl());
  EXPECT_EQ(out.shape(), (Shape{2, 3}));
  EXPECT_EQ(values(out), (std::vector<double>{0, 1, 10, 2, 3, 11}));
  // An out of the right shape but transposed layout is written in place.
  Tensor t = transpose(zeros({3, 2}), 0, 1);
  cat_out(t, {a, b}, 1);
  EXPECT_EQ(values(t), (std::vector<double>{0, 1, 10, 2, 3, 11}));
  Tensor other_dtype = zeros({2, 3}, kFloat64);
  cat_out(other_dtype, {a, b}, 1);
  EXPECT_EQ(values(other_dtype), (std::vector<double>{0, 1, 10, 2, 3, 11}));
  expect_error<ValueError>([&] { cat_out(a, {a, b}, 1); }, {"cat", "overlap"});
}

TEST(CpuJoin, CatErrors) {
  Tensor a = seq({2, 3});
  expect_error<ValueError>([&] { cat({}); }, {"cat", "non-empty"});
  expect_error<ValueError>([&] { cat({a, seq({2, 3, 1})}); }, {"cat", "2 dimensions", "3 dimensions", "tensor 1"});
  expect_error<ValueError>([&] { cat({a, seq({2, 4})}, 0); }, {"cat", "dimension 1", "size 3", "size 4", "tensor 1"});
  expect_error<ValueError>([&] { cat({a, full({}, 1.0)}); }, {"cat", "zero-dimensional", "position 1"});
  expect_error<IndexError>([&] { cat({a, a}, 2); }, {"cat", "dimension 2"});
}

TEST(CpuJoin, Stack) {
  Tensor a = seq({2, 3}), b = seq({2, 3}, kFloat32, 10);
  Tensor s0 = stack({a, b});
  EXPECT_EQ(s0.shape(), (Shape{2, 2, 3}));
  EXPECT_EQ(values(s0), (std::vector<double>{0, 1, 2, 3, 4, 5, 10, 11, 12, 13, 14, 15}));
  Tensor s1 = stack({a, b}, 1);
  EXPECT_EQ(s1.shape(), (Shape{2, 2, 3}));
  EXPECT_EQ(values(s1), (std::vector<double>{0, 1, 2, 10, 11, 12, 3, 4, 5, 13, 14, 15}));
  Tensor s2 = stack({a, b}, -1);
  EXPECT_EQ(s2.shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(values(s2), (std::vector<double>{0, 10, 1, 11, 2, 12, 3, 13, 4, 14, 5, 15}));
  // Scalars stack into a vector; mixed dtypes promote; non-contiguous inputs.
  Tensor v = stack({full({}, 1.0), full({}, int64_t(2))});
  EXPECT_EQ(v.shape(), (Shape{2}));
  EXPECT_EQ(v.dtype(), kFloat32);
  EXPECT_EQ(values(stack({transpose(a, 0, 1), transpose(b, 0, 1)}, 0)),
            (std::vector<double>{0, 3, 1, 4, 2, 5, 10, 13, 11, 14, 12, 15}));
  EXPECT_EQ(stack({zeros({0, 2}), zeros({0, 2})}, 1).shape(), (Shape{0, 2, 2}));
  Tensor out = empty({0});
  stack_out(out, {a, b}, 2);
  EXPECT_EQ(values(out), values(s2));
  expect_error<ValueError>([&] { stack({a, seq({3, 2})}); }, {"stack", "same shape", "[2, 3]", "[3, 2]"});
  expect_error<ValueError>([&] { stack({}); }, {"stack", "non-empty"});
  expect_error<IndexError>([&] { stack({a, b}, 3); }, {"stack", "3"});
}

}  // namespace

// Tests of the CPU plugin's indexing kernels (index_select, gather, scatter and their out= and
// in-place forms) against straightforward references computed here: int64 and int32
// indices, non-contiguous inputs, every dtype, empty indices and the errors (an out-of-range
// index names the value and the size, and leaves the target untouched).
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


inline int64_t numel(const Shape& shape) { return tessera::testing::numel_of(shape); }

using tessera::testing::seq;

Tensor idx(const std::vector<double>& v, const Shape& shape, ScalarType dtype = kInt64) {
  return tensor_from_values(v, shape, dtype);
}

std::vector<double> values(const Tensor& t) { return t.to_double_vector(); }

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

// References on row-major values.
std::vector<double> ref_index_select(const Tensor& self, int64_t dim, const Tensor& index) {
  auto sv = values(self), iv = values(index);
  Shape out_shape = self.shape();
  out_shape[size_t(dim)] = int64_t(iv.size());
  std::vector<double> out(size_t(numel(out_shape)));
  for (int64_t f = 0; f < int64_t(out.size()); ++f) {
    Shape i = unravel(f, out_shape);
    i[size_t(dim)] = int64_t(iv[size_t(i[size_t(dim)])]);
    out[size_t(f)] = sv[size_t(ravel(i, self.shape()))];
  }
  return out;
}

std::vector<double> ref_gather(const Tensor& self, int64_t dim, const Tensor& index) {
  auto sv = values(self), iv = values(index);
  std::vector<double> out(iv.size());
  for (int64_t f = 0; f < int64_t(iv.size()); ++f) {
    Shape i = unravel(f, index.shape());
    i[size_t(dim)] = int64_t(iv[size_t(f)]);
    out[size_t(f)] = sv[size_t(ravel(i, self.shape()))];
  }
  return out;
}

std::vector<double> ref_scatter(const Tensor& self, int64_t dim, const Tensor& index, const Tensor* src,
                                double value) {
  auto out = values(self), iv = values(index);
  std::vector<double> sv = src ? values(*src) : std::vector<double>{};
  for (int64_t f = 0; f < int64_t(iv.size()); ++f) {
    Shape i = unravel(f, index.shape());
    double v = src ? sv[size_t(ravel(i, src->shape()))] : value;
    i[size_t(dim)] = int64_t(iv[size_t(f)]);
    out[size_t(ravel(i, self.shape()))] = v;
  }
  return out;
}

// ---- index_select

TEST(CpuIndex, IndexSelectEachDimAndIndexType) {
  Tensor x = seq({3, 4, 5});
  for (ScalarType it : {kInt64, kInt32}) {
    for (int64_t dim = 0; dim < 3; ++dim) {
      SCOPED_TRACE("dim " + std::to_string(dim) + ", index " + std::string(name(it)));
      Tensor index = idx({2, 0, 2, 1}, {4}, it);
      Tensor r = index_select(x, dim, index);
      Shape want = x.shape();
      want[size_t(dim)] = 4;
      EXPECT_EQ(r.shape(), want);
      EXPECT_TRUE(r.is_contiguous());
      EXPECT_EQ(values(r), ref_index_select(x, dim, index));
    }
  }
  EXPECT_EQ(values(index_select(x, -1, idx({4}, {1}))), ref_index_select(x, 2, idx({4}, {1})));
}

TEST(CpuIndex, IndexSelectNonContiguousAndRowCopies) {
  Tensor x = permute(seq({4, 3, 5}), {2, 0, 1});  // [5, 4, 3]
  Tensor strided_index = slice(idx({2, 9, 0, 9, 1, 9}, {6}), 0, 0, 6, 2);  // [2, 0, 1]
  for (int64_t dim = 0; dim < 3; ++dim) {
    Tensor r = index_select(x, dim, strided_index);
    EXPECT_EQ(values(r), ref_index_select(x, dim, strided_index));
  }
  // Long rows go through the row-copy path; also from a sliced table.
  Tensor table = seq({10, 100});
  Tensor rows = idx({9, 0, 3, 3}, {4});
  EXPECT_EQ(values(index_select(table, 0, rows)), ref_index_select(table, 0, rows));
  Tensor sliced = slice(table, 1, 1, 100, 2);
  EXPECT_EQ(values(index_select(sliced, 0, rows)), ref_index_select(sliced, 0, rows));
  EXPECT_EQ(values(index_select(table, 1, rows)), ref_index_select(table, 1, rows));
}

TEST(CpuIndex, IndexSelectEveryDtype) {
  for (ScalarType dt : {kBool, kUInt8, kInt8, kInt16, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64}) {
    SCOPED_TRACE(std::string(name(dt)));
    Tensor x = tensor_from_values(std::vector<double>{1, 0, 0, 1, 1, 0}, {3, 2}, dt);
    Tensor r = index_select(x, 0, idx({2, 2, 0}, {3}));
    EXPECT_EQ(r.dtype(), dt);
    EXPECT_EQ(values(r), (std::vector<double>{1, 0, 1, 0, 1, 0}));
  }
}

TEST(CpuIndex, IndexSelectEmptyAndZeroDim) {
  Tensor x = seq({3, 4});
  EXPECT_EQ(index_select(x, 1, idx({}, {0})).shape(), (Shape{3, 0}));
  EXPECT_EQ(index_select(zeros({0, 4}), 1, idx({1}, {1})).shape(), (Shape{0, 1}));
  Tensor r = index_select(x, 0, idx({2}, {}));  // a 0-d index selects one slice
  EXPECT_EQ(r.shape(), (Shape{1, 4}));
  EXPECT_EQ(values(r), (std::vector<double>{8, 9, 10, 11}));
  Tensor s = index_select(full({}, 5.0), 0, idx({0, 0}, {2}));
  EXPECT_EQ(values(s), (std::vector<double>{5, 5}));
}

TEST(CpuIndex, IndexSelectOut) {
  Tensor x = seq({3, 4});
  Tensor index = idx({1, 0}, {2});
  Tensor out = zeros({1});
  Tensor r = index_select_out(out, x, 1, index);
  EXPECT_EQ(r.impl(), out.impl());
  EXPECT_EQ(out.shape(), (Shape{3, 2}));
  EXPECT_EQ(values(out), ref_index_select(x, 1, index));
  Tensor t = transpose(zeros({2, 3}), 0, 1);  // right shape, transposed: written in place
  index_select_out(t, x, 1, index);
  EXPECT_EQ(values(t), ref_index_select(x, 1, index));
  Tensor wrong = zeros({3, 2}, kFloat64);
  expect_error<TypeError>([&] { index_select_out(wrong, x, 1, index); }, {"index_select", "float32", "float64"});
  Tensor square = seq({3, 3});
  expect_error<ValueError>([&] { index_select_out(square, square, 1, idx({2, 1, 0}, {3})); },
                           {"index_select", "overlap"});
}

TEST(CpuIndex, IndexSelectErrors) {
  Tensor x = seq({3, 4});
  expect_error<IndexError>([&] { index_select(x, 0, idx({0, 5}, {2})); }, {"index_select", "index 5", "size 3"});
  expect_error<IndexError>([&] { index_select(x, 1, idx({-1}, {1})); }, {"index_select", "index -1", "size 4"});
  expect_error<IndexError>([&] { index_select(x, 1, idx({4}, {1}, kInt32)); }, {"index_select", "index 4"});
  expect_error<TypeError>([&] { index_select(x, 0, idx({0}, {1}, kFloat32)); }, {"index_select", "int64", "float32"});
  expect_error<ValueError>([&] { index_select(x, 0, idx({0, 1}, {1, 2})); }, {"index_select", "2 dimensions"});
  expect_error<IndexError>([&] { index_select(x, 2, idx({0}, {1})); }, {"index_select", "dimension 2"});
}

// ---- gather

TEST(CpuIndex, GatherMatchesReference) {
  Tensor x = seq({3, 4});
  Tensor i0 = idx({2, 1, 0, 0, 0, 2, 1, 2}, {2, 4});
  EXPECT_EQ(values(gather(x, 0, i0)), ref_gather(x, 0, i0));
  EXPECT_EQ(gather(x, 0, i0).shape(), (Shape{2, 4}));
  Tensor i1 = idx({3, 0, 1, 1, 2, 2}, {3, 2}, kInt32);
  EXPECT_EQ(values(gather(x, 1, i1)), ref_gather(x, 1, i1));
  EXPECT_EQ(values(gather(x, -1, i1)), ref_gather(x, 1, i1));
  // 3-D, smaller index in the other dims, non-contiguous self and index.
  Tensor y = transpose(seq({4, 3, 5}), 0, 2);  // [5, 3, 4]
  Tensor i2 = transpose(idx({0, 3, 1, 2, 2, 0, 1, 1, 3, 0, 0, 2}, {2, 3, 2}), 0, 2);  // [2, 3, 2]
  EXPECT_EQ(values(gather(y, 2, i2)), ref_gather(y, 2, i2));
  Tensor i3 = idx({4, 0, 2, 1}, {2, 1, 2});
  EXPECT_EQ(values(gather(y, 0, i3)), ref_gather(y, 0, i3));
  EXPECT_EQ(gather(x, 1, idx({}, {3, 0})).shape(), (Shape{3, 0}));
}

TEST(CpuIndex, GatherEveryDtypeAndOut) {
  for (ScalarType dt : {kBool, kUInt8, kInt8, kInt16, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64}) {
    SCOPED_TRACE(std::string(name(dt)));
    Tensor x = tensor_from_values(std::vector<double>{0, 1, 1, 0}, {2, 2}, dt);
    Tensor r = gather(x, 1, idx({1, 1, 0, 1}, {2, 2}));
    EXPECT_EQ(r.dtype(), dt);
    EXPECT_EQ(values(r), (std::vector<double>{1, 1, 1, 0}));
  }
  Tensor x = seq({3, 4});
  Tensor index = idx({2, 1, 0, 0}, {1, 4});
  Tensor out = empty({0});
  EXPECT_EQ(gather_out(out, x, 0, index).impl(), out.impl());
  EXPECT_EQ(values(out), ref_gather(x, 0, index));
  expect_error<ValueError>([&] { gather_out(x, x, 0, idx({0, 0, 0, 0}, {1, 4})); }, {"gather", "overlap"});
  EXPECT_EQ(x.shape(), (Shape{3, 4}));  // refused before any resize
}

TEST(CpuIndex, GatherErrors) {
  Tensor x = seq({3, 4});
  expect_error<IndexError>([&] { gather(x, 0, idx({0, 3}, {1, 2})); }, {"gather", "index 3", "size 3"});
  expect_error<IndexError>([&] { gather(x, 1, idx({-2}, {1, 1})); }, {"gather", "index -2"});
  expect_error<ValueError>([&] { gather(x, 0, idx({0, 1}, {2})); }, {"gather", "dimensions"});
  expect_error<ValueError>([&] { gather(x, 0, idx({0, 0, 0, 0, 0}, {1, 5})); }, {"gather", "index.size(1)"});
  expect_error<TypeError>([&] { gather(x, 0, idx({0}, {1, 1}, kInt16)); }, {"gather", "int16"});
}

// ---- scatter

TEST(CpuIndex, ScatterSrcAndValue) {
  Tensor self = zeros({3, 5});
  Tensor index = idx({0, 1, 2, 0, 1, 2, 0, 1, 2, 2}, {2, 5});  // no target written twice
  Tensor src = seq({2, 5}, kFloat32, 1);
  Tensor r = scatter(self, 0, index, src);
  EXPECT_EQ(values(r), ref_scatter(self, 0, index, &src, 0));
  EXPECT_EQ(values(self), std::vector<double>(15, 0.0));  // out of place
  EXPECT_NE(r.data_ptr<float>(), self.data_ptr<float>());
  Tensor v = scatter(self, 0, index, 2.5);
  EXPECT_EQ(values(v), ref_scatter(self, 0, index, nullptr, 2.5));
  // dim 1, int32 index, a larger src (only index's extent is read), non-contiguous self.
  Tensor base = transpose(seq({5, 3}), 0, 1);  // [3, 5]
  Tensor i1 = idx({4, 0, 3, 1, 2, 0}, {3, 2}, kInt32);
  Tensor s1 = seq({3, 4}, kFloat32, 100);
  EXPECT_EQ(values(scatter(base, 1, i1, s1)), ref_scatter(base, 1, i1, &s1, 0));
  EXPECT_EQ(values(scatter(base, -1, i1, -1.0)), ref_scatter(base, 1, i1, nullptr, -1.0));
}

TEST(CpuIndex, ScatterInPlaceWritesSelf) {
  Tensor self = seq({2, 4});
  const float* before = self.data_ptr<float>();
  const uint64_t version = self.version();
  Tensor index = idx({3, 0}, {2, 1});
  Tensor src = seq({2, 1}, kFloat32, 50);
  auto want = ref_scatter(self, 1, index, &src, 0);
  Tensor r = scatter_(self, 1, index, src);
  EXPECT_EQ(r.impl(), self.impl());
  EXPECT_EQ(self.data_ptr<float>(), before);
  EXPECT_GT(self.version(), version);
  EXPECT_EQ(values(self), want);
  scatter_(self, 0, idx({1}, {1, 1}), 7);
  EXPECT_EQ(values(self)[4], 7.0);
  // Through a view: the base sees the writes.
  Tensor big = zeros({4, 4});
  scatter_(select(big, 0, 2), 0, idx({1, 3}, {2}), 9.0);
  EXPECT_EQ(values(select(big, 0, 2)), (std::vector<double>{0, 9, 0, 9}));
}

TEST(CpuIndex, ScatterEveryDtype) {
  for (ScalarType dt : {kBool, kUInt8, kInt8, kInt16, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64}) {
    SCOPED_TRACE(std::string(name(dt)));
    Tensor self = zeros({2, 3}, dt);
    Tensor index = idx({2, 0}, {2, 1});
    Tensor r = scatter(self, 1, index, 1);
    EXPECT_EQ(r.dtype(), dt);
    EXPECT_EQ(values(r), (std::vector<double>{0, 0, 1, 1, 0, 0}));
    Tensor src = tensor_from_values(std::vector<double>{1, 1}, {2, 1}, dt);
    EXPECT_EQ(values(scatter(self, 1, index, src)), (std::vector<double>{0, 0, 1, 1, 0, 0}));
  }
}

TEST(CpuIndex, ScatterErrorsLeaveSelfUntouched) {
  Tensor self = seq({2, 3});
  auto before = values(self);
  Tensor bad = idx({0, 1, 2, 0, 1, 3}, {2, 3});  // the last index is out of range
  expect_error<IndexError>([&] { scatter_(self, 1, bad, 5.0); }, {"scatter_", "index 3", "size 3"});
  EXPECT_EQ(values(self), before);
  expect_error<IndexError>([&] { scatter(self, 0, idx({2}, {1, 1}), 1.0); }, {"scatter", "index 2", "size 2"});
  expect_error<TypeError>([&] { scatter(self, 0, idx({0}, {1, 1}), seq({1, 1}, kFloat64)); },
                          {"scatter", "float32", "float64"});
  expect_error<ValueError>([&] { scatter(self, 0, idx({0, 0}, {1, 2}), seq({1, 1})); }, {"scatter", "src"});
  expect_error<ValueError>([&] { scatter(self, 0, idx({0, 0, 0, 0}, {1, 4}), 1.0); }, {"scatter", "index.size(1)"});
  expect_error<TypeError>([&] { scatter_(self, 0, idx({0}, {1, 1}, kFloat32), 1.0); }, {"scatter_", "float32"});
  EXPECT_EQ(values(self), before);
}

}  // namespace

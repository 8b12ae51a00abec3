// Tests of the CPU plugin's advanced indexing kernels (index.Tensor, index_put / index_put_,
// nonzero, masked_select) against a reference written here on row-major values, one output
// element at a time through multi-indices: None entries, int64/int32 index tensors that
// broadcast together, bool/uint8 masks, adjacent and non-adjacent advanced indices (NumPy's
// "they go first" rule), negative indices, non-contiguous operands, every dtype, empty
// results, accumulation of duplicates and the errors.
#include <gtest/gtest.h>

#include "test_util.h"

#include <tessera/runtime.h>
#include <tessera/tessera.h>

#include <cmath>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

namespace {

using namespace tessera;
using Shape = std::vector<int64_t>;
using Values = std::vector<double>;

using tessera::testing::expect_error;

inline int64_t numel(const Shape& shape) { return tessera::testing::numel_of(shape); }

Tensor seq(const Shape& shape, ScalarType dtype = kFloat32, double start = 0) {
  Values v(size_t(numel(shape)));
  std::iota(v.begin(), v.end(), start);
  return tensor_from_values(v, shape, dtype);
}
Tensor idx(const Values& v, const Shape& shape, ScalarType dtype = kInt64) { return tensor_from_values(v, shape, dtype); }
Tensor mask(const Values& v, const Shape& shape, ScalarType dtype = kBool) { return tensor_from_values(v, shape, dtype); }
Values values(const Tensor& t) { return t.to_double_vector(); }

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

// ---- the reference

struct RefResult {
  Shape shape;
  Values values;
  std::vector<int64_t> source;  // per result element: the row-major position in self
};

// Advanced indexing on row-major values, following the NumPy rules literally.
RefResult ref_index(const Tensor& self, const std::vector<Tensor>& indices) {
  const Shape self_shape = self.shape();
  const Values sv = values(self);
  // Per consumed position: nullopt (a slice of self dim `dim`) or an index array with its shape.
  struct Entry {
    bool advanced = false;
    int64_t dim = -1;  // self dim, -1 for the new dim of a 0-d mask
    Values v;
    Shape shape;
  };
  std::vector<Entry> entries;
  int64_t d = 0;
  for (const Tensor& t : indices) {
    if (!t.defined()) {
      entries.push_back({false, d++, {}, {}});
      continue;
    }
    if (t.dtype() == kBool || t.dtype() == kUInt8) {
      const Shape ms = t.shape();
      const Values mv = values(t);
      std::vector<Shape> coords;
      for (int64_t f = 0; f < int64_t(mv.size()); ++f)
        if (mv[size_t(f)] != 0) coords.push_back(unravel(f, ms));
      const int64_t n = int64_t(coords.size());
      if (ms.empty()) {
        entries.push_back({true, -1, Values(size_t(n), 0.0), {n}});
        continue;
      }
      for (size_t k = 0; k < ms.size(); ++k) {
        Values col;
        for (const Shape& c : coords) col.push_back(double(c[k]));
        entries.push_back({true, d++, col, {n}});
      }
      continue;
    }
    entries.push_back({true, d++, values(t), t.shape()});
  }
  for (; d < int64_t(self_shape.size()); ++d) entries.push_back({false, d, {}, {}});

  // Broadcast shape of the index arrays.
  size_t nb = 0;
  for (const Entry& e : entries)
    if (e.advanced) nb = std::max(nb, e.shape.size());
  Shape b(nb, 1);
  for (const Entry& e : entries)
    if (e.advanced)
      for (size_t k = 0; k < e.shape.size(); ++k) {
        int64_t& s = b[nb - e.shape.size() + k];
        if (e.shape[k] != 1) s = e.shape[k];
      }
  std::vector<size_t> adv;
  for (size_t i = 0; i < entries.size(); ++i)
    if (entries[i].advanced) adv.push_back(i);
  const bool adjacent = adv.empty() || adv.back() - adv.front() + 1 == adv.size();

  // Result dims: each is either "B dim k" (-1 - k) or "entry i".
  std::vector<int64_t> layout;
  auto add_b = [&] { for (size_t k = 0; k < nb; ++k) layout.push_back(-1 - int64_t(k)); };
  if (!adjacent) add_b();
  bool added = !adjacent;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].advanced) {
      if (!added) add_b(), added = true;
      continue;
    }
    layout.push_back(int64_t(i));
  }
  if (!added) add_b();

  RefResult r;
  for (int64_t l : layout) r.shape.push_back(l < 0 ? b[size_t(-1 - l)] : self_shape[size_t(entries[size_t(l)].dim)]);
  for (int64_t f = 0; f < numel(r.shape); ++f) {
    const Shape oi = unravel(f, r.shape);
    Shape bi(nb), si(self_shape.size(), 0);
    for (size_t k = 0; k < layout.size(); ++k) {
      if (layout[k] < 0) bi[size_t(-1 - layout[k])] = oi[k];
      else si[size_t(entries[size_t(layout[k])].dim)] = oi[k];
    }
    for (const Entry& e : entries) {
      if (!e.advanced || e.dim < 0) continue;
      Shape ei(e.shape.size());
      for (size_t k = 0; k < e.shape.size(); ++k) ei[k] = e.shape[k] == 1 ? 0 : bi[nb - e.shape.size() + k];
      int64_t v = int64_t(e.v[size_t(ravel(ei, e.shape))]);
      if (v < 0) v += self_shape[size_t(e.dim)];
      si[size_t(e.dim)] = v;
    }
    const int64_t src = ravel(si, self_shape);
    r.source.push_back(src);
    r.values.push_back(sv[size_t(src)]);
  }
  return r;
}

void expect_index(const Tensor& self, const std::vector<Tensor>& indices) {
  RefResult want = ref_index(self, indices);
  Tensor got = index(self, indices);
  EXPECT_EQ(got.shape(), want.shape);
  EXPECT_EQ(got.dtype(), self.dtype());
  EXPECT_EQ(values(got), want.values);
}

// index_put on row-major values: values broadcast to the indexing result, written in order.
Values ref_index_put(const Tensor& self, const std::vector<Tensor>& indices, const Tensor& vals, bool accumulate) {
  RefResult r = ref_index(self, indices);
  Values out = values(self);
  const Values vv = values(vals);
  const Shape vs = vals.shape();
  for (size_t f = 0; f < r.source.size(); ++f) {
    const Shape oi = unravel(int64_t(f), r.shape);
    Shape vi(vs.size());
    for (size_t k = 0; k < vs.size(); ++k) vi[k] = vs[k] == 1 ? 0 : oi[r.shape.size() - vs.size() + k];
    const double v = vv[size_t(ravel(vi, vs))];
    double& x = out[size_t(r.source[f])];
    x = accumulate ? x + v : v;
  }
  return out;
}

Tensor none() { return Tensor(); }

// ---- index

TEST(CpuAdvancedIndex, SingleIndexTensorOnEachDim) {
  Tensor x = seq({4, 6, 5});
  for (ScalarType it : {kInt64, kInt32}) {
    SCOPED_TRACE(std::string(name(it)));
    Tensor i = idx({3, 0, -1, 2, 0}, {5}, it);  // duplicates and a negative index
    expect_index(x, {i});
    expect_index(x, {none(), i});
    expect_index(x, {none(), none(), idx({4, -5}, {2}, it)});
    EXPECT_EQ(index(x, {none(), i}).shape(), (Shape{4, 5, 5}));
  }
  // Long rows: the block-copy path.
  Tensor table = seq({6, 40});
  expect_index(table, {idx({5, 0, 5, 2}, {2, 2})});
  EXPECT_EQ(index(table, {idx({5, 0, 5, 2}, {2, 2})}).shape(), (Shape{2, 2, 40}));
}

TEST(CpuAdvancedIndex, BroadcastAdjacentAndNonAdjacent) {
  Tensor x = seq({3, 4, 5, 2});
  Tensor i = idx({0, 2, 1}, {3, 1});
  Tensor j = idx({4, 0}, {2});
  // Adjacent: B = [3, 2] takes the place of dims 1 and 2.
  expect_index(x, {none(), i, j});
  EXPECT_EQ(index(x, {none(), i, j}).shape(), (Shape{3, 3, 2, 2}));
  // Non-adjacent: B goes first.
  Tensor k = idx({1, 0}, {2});
  expect_index(x, {i, none(), none(), k});
  EXPECT_EQ(index(x, {i, none(), none(), k}).shape(), (Shape{3, 2, 4, 5}));
  expect_index(x, {k, none(), j});
  EXPECT_EQ(index(x, {k, none(), j}).shape(), (Shape{2, 4, 2}));
  // Every dim indexed: only B remains.
  expect_index(x, {idx({2}, {1}), idx({3, 1}, {2}), idx({0}, {}), idx({1, 0}, {2, 1})});
  // A 0-d index removes its dim.
  expect_index(x, {none(), idx({-1}, {})});
  EXPECT_EQ(index(x, {none(), idx({-1}, {})}).shape(), (Shape{3, 5, 2}));
  expect_index(x, {idx({1}, {}), none(), idx({0}, {})});  // 0-d and non-adjacent: B = [] first
}

TEST(CpuAdvancedIndex, Masks) {
  Tensor x = seq({3, 4});
  Tensor full_mask = mask({1, 0, 0, 1, 0, 1, 1, 0, 0, 0, 0, 1}, {3, 4});
  expect_index(x, {full_mask});
  EXPECT_EQ(values(index(x, {full_mask})), (Values{0, 3, 5, 6, 11}));
  expect_index(x, {mask({0, 1, 1}, {3})});  // rows
  EXPECT_EQ(index(x, {mask({0, 1, 1}, {3})}).shape(), (Shape{2, 4}));
  expect_index(x, {none(), mask({1, 0, 1, 1}, {4}, kUInt8)});  // columns, a uint8 mask
  expect_index(x, {mask({0, 0, 0}, {3})});                      // nothing selected
  EXPECT_EQ(index(x, {mask({0, 0, 0}, {3})}).shape(), (Shape{0, 4}));
  // A mask over the middle dims next to an index tensor, and one that is not adjacent.
  Tensor y = seq({2, 3, 4, 2});
  Tensor m = mask({1, 0, 0, 1, 0, 1, 1, 0, 0, 0, 0, 1}, {3, 4});
  expect_index(y, {none(), m});
  EXPECT_EQ(index(y, {none(), m}).shape(), (Shape{2, 5, 2}));
  expect_index(y, {idx({1}, {1}), m});
  expect_index(y, {idx({1, 0, 1, 1, 0}, {5}), m});  // broadcasts with the mask's 5 hits
  expect_index(y, {idx({1}, {1}), none(), none(), mask({0, 1}, {2})});
  expect_index(y, {mask({1, 0}, {2}), idx({2, 0, 1}, {3})});  // a mask first, then an index tensor
  // Masks of self's whole shape (the direct selection path): none, all, uint8, and large.
  EXPECT_EQ(index(x, {mask(Values(12, 0.0), {3, 4})}).shape(), (Shape{0}));
  EXPECT_EQ(values(index(x, {mask(Values(12, 1.0), {3, 4}, kUInt8)})), values(seq({12})));
  Tensor big = seq({40, 50});
  Values bits(2000);
  for (size_t i = 0; i < bits.size(); ++i) bits[i] = (i * 7919) % 3 == 0;
  expect_index(big, {mask(bits, {40, 50})});
  expect_index(transpose(big, 0, 1), {transpose(mask(bits, {40, 50}), 0, 1)});
  // 0-d masks add a dim of size 1 or 0 (as NumPy's x[True]).
  expect_index(x, {mask({1}, {})});
  EXPECT_EQ(index(x, {mask({1}, {})}).shape(), (Shape{1, 3, 4}));
  EXPECT_EQ(index(x, {mask({0}, {})}).shape(), (Shape{0, 3, 4}));
}

TEST(CpuAdvancedIndex, NonContiguousOperands) {
  Tensor x = transpose(seq({4, 6, 3}), 0, 2);  // [3, 6, 4]
  Tensor i = slice(idx({5, 9, 0, 9, 3, 9, 3, 9}, {8}), 0, 0, 8, 2);  // [5, 0, 3, 3]
  Tensor j = transpose(idx({0, 1, 2, 3, 3, 2, 1, 0}, {2, 4}), 0, 1);  // [4, 2]
  expect_index(x, {none(), i});
  expect_index(x, {none(), j});
  expect_index(x, {idx({2, 0}, {2}), none(), j});
  Tensor m = transpose(mask({1, 0, 1, 0, 0, 1, 1, 1, 0, 0, 1, 0}, {4, 3}), 0, 1);  // [3, 4]
  Tensor z = transpose(seq({4, 3}), 0, 1);
  expect_index(z, {m});
  expect_index(slice(seq({6, 4}), 0, 0, 6, 2), {idx({2, 0}, {2})});  // strided rows
}

TEST(CpuAdvancedIndex, EveryDtype) {
  for (ScalarType dt : {kBool, kUInt8, kInt8, kInt16, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64}) {
    SCOPED_TRACE(std::string(name(dt)));
    Tensor x = tensor_from_values(Values{1, 0, 0, 1, 1, 0}, {3, 2}, dt);
    Tensor r = index(x, {idx({2, 2, 0}, {3}), idx({1, 0, 0}, {3})});
    EXPECT_EQ(r.dtype(), dt);
    EXPECT_EQ(values(r), (Values{0, 1, 1}));
    expect_index(x, {mask({1, 0, 1}, {3})});
  }
}

TEST(CpuAdvancedIndex, EmptyAndDegenerate) {
  Tensor x = seq({3, 4});
  EXPECT_EQ(index(x, {idx({}, {0})}).shape(), (Shape{0, 4}));
  EXPECT_EQ(index(x, {none(), idx({}, {2, 0})}).shape(), (Shape{3, 2, 0}));
  EXPECT_EQ(index(zeros({0, 4}), {none(), idx({3, 1}, {2})}).shape(), (Shape{0, 2}));
  expect_index(x, {});        // no index: a copy
  expect_index(x, {none()});  // only slices: a copy
  Tensor c = index(x, {none()});
  EXPECT_FALSE(c.impl() == x.impl());
  // An empty index broadcast with an out-of-range one reads nothing: no error (as PyTorch).
  EXPECT_EQ(index(x, {idx({}, {0}), idx({7}, {1})}).shape(), (Shape{0}));
}

TEST(CpuAdvancedIndex, Errors) {
  Tensor x = seq({3, 4});
  expect_error<IndexError>([&] { index(x, {idx({0, 3}, {2})}); }, {"index", "index 3", "dimension 0", "size 3"});
  expect_error<IndexError>([&] { index(x, {none(), idx({-5}, {1}, kInt32)}); }, {"index -5", "dimension 1", "size 4"});
  expect_error<IndexError>([&] { index(x, {none(), none(), idx({0}, {1})}); }, {"too many indices", "dimension 2"});
  expect_error<IndexError>([&] { index(x, {mask({1, 0}, {2})}); }, {"mask", "[2]", "[3, 4]"});
  expect_error<IndexError>([&] { index(x, {idx({0, 1}, {2}), idx({0, 1, 2}, {3})}); },
                           {"shape mismatch", "[2]", "[3]"});
  expect_error<TypeError>([&] { index(x, {idx({0}, {1}, kFloat32)}); }, {"int64", "float32"});
}

// ---- index_put / index_put_

TEST(CpuAdvancedIndex, IndexPutMatchesReference) {
  struct Case {
    Shape shape;
    std::vector<Tensor> indices;
    Tensor values;
  };
  std::vector<Case> cases = {
      {{4, 3}, {idx({3, 0}, {2})}, seq({2, 3}, kFloat32, 100)},
      {{4, 3}, {idx({3, 0}, {2})}, seq({3}, kFloat32, 100)},                      // broadcast rows
      {{4, 3}, {idx({-1, 1}, {2})}, full({}, 7.0)},                               // a 0-d value
      {{4, 3}, {none(), idx({2, 0}, {2})}, seq({4, 1}, kFloat32, 50)},
      {{3, 4, 5}, {idx({0, 2}, {2, 1}), none(), idx({4, 1, 3}, {3})}, seq({2, 3, 4}, kFloat32, 10)},  // B first
      {{3, 4, 5}, {none(), idx({1, 3}, {2}), idx({0, 4}, {2})}, seq({2}, kFloat32, -9)},
      {{3, 4}, {mask({1, 0, 0, 1, 0, 1, 1, 0, 0, 0, 0, 1}, {3, 4})}, seq({5}, kFloat32, 20)},
      {{3, 4}, {mask({1, 0, 1}, {3})}, full({}, -1.0)},
      {{3, 4}, {}, seq({4}, kFloat32, 30)},  // no index: self = values (broadcast)
  };
  for (size_t c = 0; c < cases.size(); ++c) {
    SCOPED_TRACE("case " + std::to_string(c));
    const Case& k = cases[c];
    for (bool accumulate : {false, true}) {
      Tensor self = seq(k.shape);
      Values want = ref_index_put(self, k.indices, k.values, accumulate);
      Tensor functional = index_put(self, k.indices, k.values, accumulate);
      EXPECT_EQ(values(functional), want);
      EXPECT_EQ(values(self), values(seq(k.shape)));  // index_put leaves self alone
      const uint64_t v0 = self.version();
      Tensor r = index_put_(self, k.indices, k.values, accumulate);
      EXPECT_EQ(r.impl(), self.impl());
      EXPECT_GT(self.version(), v0);
      EXPECT_EQ(values(self), want);
    }
  }
}

TEST(CpuAdvancedIndex, IndexPutAccumulateSumsDuplicates) {
  Tensor x = zeros({4});
  index_put_(x, {idx({1, 1, 3, 1}, {4})}, seq({4}, kFloat32, 1), true);
  EXPECT_EQ(values(x), (Values{0, 1 + 2 + 4, 0, 3}));
  // Without accumulate a duplicate gets one of the values written to it.
  Tensor y = zeros({4});
  index_put_(y, {idx({2, 2}, {2})}, seq({2}, kFloat32, 1), false);
  EXPECT_TRUE(values(y)[2] == 1 || values(y)[2] == 2);
  for (ScalarType dt : {kBool, kUInt8, kInt8, kInt16, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64}) {
    SCOPED_TRACE(std::string(name(dt)));
    Tensor t = zeros({3}, dt);
    index_put_(t, {idx({0, 0, 2}, {3})}, ones({3}, dt), true);
    EXPECT_EQ(values(t), dt == kBool ? (Values{1, 0, 1}) : (Values{2, 0, 1}));
    Tensor u = zeros({3}, dt);
    index_put_(u, {mask({0, 1, 1}, {3})}, ones({}, dt), false);
    EXPECT_EQ(values(u), (Values{0, 1, 1}));
  }
}

TEST(CpuAdvancedIndex, IndexPutNonContiguousAndOverlapping) {
  Tensor base = seq({4, 3});
  Tensor x = transpose(base, 0, 1);  // [3, 4], writes go to base
  Tensor vals = transpose(seq({2, 3}, kFloat32, 100), 0, 1);  // [3, 2]
  Values want = ref_index_put(x, {none(), idx({3, 1}, {2})}, vals, false);
  index_put_(x, {none(), idx({3, 1}, {2})}, vals, false);
  EXPECT_EQ(values(x), want);
  // Values read from self itself: every value is read before anything is written.
  Tensor y = seq({5});
  Tensor src = index(y, {idx({0, 1, 2, 3}, {4})});
  Values want_y = ref_index_put(y, {idx({1, 2, 3, 4}, {4})}, src, false);
  index_put_(y, {idx({1, 2, 3, 4}, {4})}, slice(y, 0, 0, 4, 1), false);
  EXPECT_EQ(values(y), want_y);
}

TEST(CpuAdvancedIndex, IndexPutErrorsLeaveSelfUntouched) {
  Tensor x = seq({3, 4});
  const Values before = values(x);
  expect_error<IndexError>([&] { index_put_(x, {idx({0, 1, 3}, {3})}, full({}, 1.0), false); },
                           {"index_put_", "index 3", "size 3"});
  expect_error<ValueError>([&] { index_put_(x, {idx({0, 1}, {2})}, seq({3}), false); },
                           {"shape mismatch", "[3]", "[2, 4]"});
  expect_error<TypeError>([&] { index_put_(x, {idx({0}, {1})}, full({}, 1.0, kFloat64), false); },
                          {"float32", "float64"});
  expect_error<IndexError>([&] { index_put_(x, {mask({1, 1}, {2})}, full({}, 1.0), false); }, {"mask"});
  EXPECT_EQ(values(x), before);
}

// ---- nonzero

TEST(CpuAdvancedIndex, Nonzero) {
  Tensor x = tensor_from_values(Values{0, 1, 0, 2, 0, 0, -3, 0.5}, {2, 4});
  Tensor r = nonzero(x);
  EXPECT_EQ(r.dtype(), kInt64);
  EXPECT_EQ(r.shape(), (Shape{4, 2}));
  EXPECT_EQ(values(r), (Values{0, 1, 0, 3, 1, 2, 1, 3}));
  // Non-contiguous input: coordinates of the view, in its row-major order.
  Tensor t = transpose(x, 0, 1);  // [4, 2]
  EXPECT_EQ(values(nonzero(t)), (Values{1, 0, 2, 1, 3, 0, 3, 1}));
  EXPECT_EQ(nonzero(zeros({3, 0})).shape(), (Shape{0, 2}));
  EXPECT_EQ(nonzero(zeros({2, 2})).shape(), (Shape{0, 2}));
  EXPECT_EQ(nonzero(full({}, 3.0)).shape(), (Shape{1, 0}));
  EXPECT_EQ(nonzero(full({}, 0.0)).shape(), (Shape{0, 0}));
  EXPECT_EQ(values(nonzero(tensor_from_values(Values{NAN, 0, -0.0}, {3}))), (Values{0}));
  for (ScalarType dt : {kBool, kUInt8, kInt8, kInt16, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64}) {
    SCOPED_TRACE(std::string(name(dt)));
    EXPECT_EQ(values(nonzero(tensor_from_values(Values{0, 1, 1, 0, 1}, {5}, dt))), (Values{1, 2, 4}));
  }
}

// ---- masked_select

TEST(CpuAdvancedIndex, MaskedSelect) {
  Tensor x = seq({3, 4});
  Tensor m = mask({1, 0, 0, 1, 0, 1, 1, 0, 0, 0, 0, 1}, {3, 4});
  EXPECT_EQ(values(masked_select(x, m)), (Values{0, 3, 5, 6, 11}));
  EXPECT_EQ(values(masked_select(x, mask({0, 1, 1, 0}, {4}))), (Values{1, 2, 5, 6, 9, 10}));  // broadcast mask
  EXPECT_EQ(values(masked_select(seq({4}), mask({1, 0, 1, 0, 0, 0, 0, 1}, {2, 4}))), (Values{0, 2, 3}));
  Tensor t = transpose(seq({4, 3}), 0, 1);  // [3, 4]
  EXPECT_EQ(values(masked_select(t, m)), (Values{0, 9, 4, 7, 11}));
  EXPECT_EQ(values(masked_select(x, mask({1, 0, 0, 1}, {4}, kUInt8))), (Values{0, 3, 4, 7, 8, 11}));
  EXPECT_EQ(masked_select(x, mask({0}, {})).shape(), (Shape{0}));
  for (ScalarType dt : {kBool, kInt8, kFloat16, kBFloat16, kFloat64}) {
    Tensor r = masked_select(tensor_from_values(Values{1, 0, 1}, {3}, dt), mask({1, 1, 0}, {3}));
    EXPECT_EQ(r.dtype(), dt);
    EXPECT_EQ(values(r), (Values{1, 0}));
  }
  expect_error<TypeError>([&] { masked_select(x, seq({4})); }, {"masked_select", "bool", "float32"});
  expect_error<ValueError>([&] { masked_select(x, mask({1, 0, 1}, {3})); }, {"masked_select", "[3]", "[3, 4]"});
}

}  // namespace

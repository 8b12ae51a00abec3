// Sorting and selection along one dim: sort (stable), topk, flip, searchsorted, bincount.
// sort and topk work on rows: the dim is moved last and made contiguous (a no-op when it is
// already), each row is processed as (value, index) pairs, rows run in parallel. NaN orders as
// the largest value, as in PyTorch.
#include "kernels.h"
#include "radix_sort.h"
#include "strided.h"
#include "tensor_iterator.h"

#include <tessera/sdk/ops.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

namespace tessera::cpu {
namespace {

using sdk::fail;
using sdk::opmath_t;
namespace ops = sdk::ops;

int64_t wrap(const char* op, int64_t d, int64_t ndim) {
  int64_t n = std::max<int64_t>(ndim, 1);
  if (d < -n || d >= n)
    fail(TS_ERROR_INDEX, op, ": dimension out of range (expected to be in range of [", -n, ", ", n - 1, "], but got ", d, ")");
  return d < 0 ? d + n : d;
}

template <class M> bool is_nan(M x) {
  if constexpr (std::is_floating_point_v<M>) return std::isnan(x);
  else return false;
}
// a before b in ascending order, NaN last.
template <class M> bool less_nan_last(M a, M b) { return is_nan(b) ? !is_nan(a) : a < b; }

// `self` with `dim` last, contiguous: rows of length n.
TensorRef rows_of(const TensorRef& self, int64_t dim) {
  TensorRef t = self.dim() == 0 ? ops::reshape(self, {1}) : self;
  if (dim != t.dim() - 1) t = ops::transpose(t, dim, t.dim() - 1);
  return ops::contiguous(t);
}
// The inverse of rows_of for a result computed in that layout.
TensorRef from_rows(const TensorRef& rows, const TensorRef& self, int64_t dim) {
  TensorRef t = rows;
  if (self.dim() == 0) return ops::reshape(t, {});
  if (dim != t.dim() - 1) t = ops::contiguous(ops::transpose(t, dim, t.dim() - 1));
  return t;
}

template <class T>
void sort_rows(const TensorRef& in, TensorRef& values, TensorRef& indices, int64_t n, bool descending) {
  using M = opmath_t<T>;
  const int64_t rows = n ? in.numel() / n : 0;
  const T* src = in.data<T>();
  T* vout = values.data<T>();
  int64_t* iout = indices.data<int64_t>();
#pragma omp parallel for num_threads(strided::threads_for(in.numel() * 8)) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    if constexpr (radix::supported<T>) {
      if (n >= radix::kRadixMinLength) {  // long rows: linear-time radix sort
        radix::sort_row(src + r * n, n, descending, vout + r * n, iout + r * n);
        continue;
      }
    }
    std::vector<std::pair<M, int64_t>> row(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) row[size_t(i)] = {M(src[r * n + i]), i};
    if (descending)
      std::stable_sort(row.begin(), row.end(), [](const auto& a, const auto& b) { return less_nan_last(b.first, a.first); });
    else
      std::stable_sort(row.begin(), row.end(), [](const auto& a, const auto& b) { return less_nan_last(a.first, b.first); });
    for (int64_t i = 0; i < n; ++i) {
      vout[r * n + i] = T(row[size_t(i)].first);
      iout[r * n + i] = row[size_t(i)].second;
    }
  }
}

// sort.stable(Tensor self, *, bool? stable, int dim=-1, bool descending=False) -> (values, indices)
void sort_k(sdk::Args& a) {
  TensorRef self = a.tensor(0);
  int64_t dim = wrap("sort", a.to_int(2), self.dim());
  bool descending = a.to_bool(3);
  TensorRef rows = rows_of(self, dim);
  int64_t n = rows.size(rows.dim() - 1);
  TensorRef values = sdk::empty(a.call(), rows.sizes(), rows.dtype(), rows.device());
  TensorRef indices = sdk::empty(a.call(), rows.sizes(), TS_INT64, rows.device());
  TS_DISPATCH_ALL(rows.dtype(), fail(TS_ERROR_TYPE, "sort: unsupported dtype"),
                  sort_rows<scalar_t>(rows, values, indices, n, descending));
  a.returns({sdk::Args::tensor_value(from_rows(values, self, dim)), sdk::Args::tensor_value(from_rows(indices, self, dim))});
}

// The k best of one row (largest or smallest; NaN counts as largest; equal values keep the
// lower index first), in `before` order when sorted, else in index order. Small k: one pass
// keeping a heap of the k best so far (most elements lose one comparison with its worst), rows
// in parallel, or a long single row split over the threads and the heaps merged. Large k:
// nth_element over (value, index) pairs.
template <class M>
struct TopkOrder {
  bool largest;
  bool operator()(const std::pair<M, int64_t>& a, const std::pair<M, int64_t>& b) const {  // a ranks before b
    if (largest ? less_nan_last(b.first, a.first) : less_nan_last(a.first, b.first)) return true;
    if (largest ? less_nan_last(a.first, b.first) : less_nan_last(b.first, a.first)) return false;
    return a.second < b.second;
  }
};

template <class T, class M = opmath_t<T>>
void heap_select(const T* row, int64_t begin, int64_t end, int64_t k, const TopkOrder<M>& before,
                 std::vector<std::pair<M, int64_t>>& heap) {
  // `heap` is a max-heap under `before`: its front is the worst of the k kept.
  for (int64_t i = begin; i < end; ++i) {
    std::pair<M, int64_t> c{M(row[i]), i};
    if (int64_t(heap.size()) < k) {
      heap.push_back(c);
      std::push_heap(heap.begin(), heap.end(), before);
    } else if (before(c, heap.front())) {
      std::pop_heap(heap.begin(), heap.end(), before);
      heap.back() = c;
      std::push_heap(heap.begin(), heap.end(), before);
    }
  }
}

template <class T>
void topk_rows(const TensorRef& in, TensorRef& values, TensorRef& indices, int64_t n, int64_t k, bool largest, bool sorted) {
  using M = opmath_t<T>;
  const int64_t rows = n ? in.numel() / n : 0;
  const T* src = in.data<T>();
  T* vout = values.data<T>();
  int64_t* iout = indices.data<int64_t>();
  const TopkOrder<M> before{largest};
  const bool use_heap = k * 64 <= n;
  auto write = [&](int64_t r, std::vector<std::pair<M, int64_t>>& best) {
    if (sorted) std::sort(best.begin(), best.end(), before);
    else std::sort(best.begin(), best.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
    for (int64_t i = 0; i < k; ++i) {
      vout[r * k + i] = T(best[size_t(i)].first);
      iout[r * k + i] = best[size_t(i)].second;
    }
  };
  if (use_heap && rows == 1) {  // one long row: a heap per thread over its share, then merged
    const int threads = strided::threads_for(n);
    std::vector<std::vector<std::pair<M, int64_t>>> heaps(static_cast<size_t>(threads));
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int t = 0; t < threads; ++t)
      heap_select(src, n * t / threads, n * (t + 1) / threads, k, before, heaps[size_t(t)]);
    std::vector<std::pair<M, int64_t>> all;
    for (auto& h : heaps) all.insert(all.end(), h.begin(), h.end());
    std::nth_element(all.begin(), all.begin() + k, all.end(), before);
    all.resize(size_t(k));
    write(0, all);
    return;
  }
#pragma omp parallel for num_threads(strided::threads_for(in.numel() * 4)) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<std::pair<M, int64_t>> best;
    if (use_heap) {
      best.reserve(size_t(k));
      heap_select(src + r * n, 0, n, k, before, best);
    } else {
      best.resize(size_t(n));
      for (int64_t i = 0; i < n; ++i) best[size_t(i)] = {M(src[r * n + i]), i};
      if (k < n) std::nth_element(best.begin(), best.begin() + k, best.end(), before);
      best.resize(size_t(k));
    }
    write(r, best);
  }
}

// topk(Tensor self, int k, int dim=-1, bool largest=True, bool sorted=True) -> (values, indices)
void topk_k(sdk::Args& a) {
  TensorRef self = a.tensor(0);
  int64_t k = a.to_int(1);
  int64_t dim = wrap("topk", a.to_int(2), self.dim());
  bool largest = a.to_bool(3), sorted = a.to_bool(4);
  int64_t size = self.dim() == 0 ? 1 : self.size(dim);
  if (k < 0 || k > size) fail(TS_ERROR_INDEX, "topk: selected index k out of range (k = ", k, ", but dimension ", dim, " has size ", size, ")");
  TensorRef rows = rows_of(self, dim);
  std::vector<int64_t> shape(rows.sizes().begin(), rows.sizes().end());
  shape.back() = k;
  TensorRef values = sdk::empty(a.call(), shape, rows.dtype(), rows.device());
  TensorRef indices = sdk::empty(a.call(), shape, TS_INT64, rows.device());
  if (k > 0)
    TS_DISPATCH_ALL(rows.dtype(), fail(TS_ERROR_TYPE, "topk: unsupported dtype"),
                    topk_rows<scalar_t>(rows, values, indices, size, k, largest, sorted));
  a.returns({sdk::Args::tensor_value(from_rows(values, self, dim)), sdk::Args::tensor_value(from_rows(indices, self, dim))});
}

// flip(Tensor self, int[] dims): a contiguous copy; each output row reads one input row, reversed
// when the last dim is flipped.
void flip_k(sdk::Args& a) {
  TensorRef self = a.tensor(0);
  auto dims_arg = a.int_list(1);
  std::vector<bool> flipped(size_t(std::max<int64_t>(self.dim(), 1)));
  for (int64_t d : dims_arg) {
    int64_t w = wrap("flip", d, self.dim());
    if (flipped[size_t(w)]) fail(TS_ERROR_VALUE, "flip: dim ", w, " appears multiple times in the list of dims");
    flipped[size_t(w)] = true;
  }
  TensorRef out = sdk::empty(a.call(), self.sizes(), self.dtype(), self.device());
  if (self.numel() == 0 || self.dim() == 0) {
    ops::copy_(out, self);
    return a.return_tensor(std::move(out));
  }
  const int64_t nd = self.dim(), n = self.size(nd - 1), rows = self.numel() / n, item = self.itemsize();
  const int64_t last_stride = self.stride(nd - 1) * item;
  const bool reverse_row = flipped[size_t(nd - 1)];
  const char* src = static_cast<const char*>(self.data());
  char* dst = static_cast<char*>(out.data());
#pragma omp parallel for num_threads(strided::threads_for(self.numel())) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    int64_t rest = r, offset = 0;  // the source row of output row r
    for (int64_t d = nd - 2; d >= 0; --d) {
      int64_t i = rest % self.size(d);
      rest /= self.size(d);
      offset += (flipped[size_t(d)] ? self.size(d) - 1 - i : i) * self.stride(d) * item;
    }
    char* o = dst + r * n * item;
    const char* s = src + offset;
    for (int64_t i = 0; i < n; ++i) {
      int64_t j = reverse_row ? n - 1 - i : i;
      std::memcpy(o + i * item, s + j * last_stride, size_t(item));
    }
  }
  a.return_tensor(std::move(out));
}

template <class T>
void search_rows(const TensorRef& s, const TensorRef& v, TensorRef& out, int64_t per_row, int64_t n, bool right, bool out_int32) {
  using M = opmath_t<T>;
  const T* sp = s.data<T>();
  const T* vp = v.data<T>();
  const int64_t total = v.numel();
#pragma omp parallel for num_threads(strided::threads_for(total * 16)) schedule(static)
  for (int64_t i = 0; i < total; ++i) {
    const T* row = sp + (i / std::max<int64_t>(per_row, 1)) * n;
    M x = M(vp[i]);
    int64_t lo = 0, hi = n;
    while (lo < hi) {  // the first position whose boundary is > x (right) or >= x (left)
      int64_t mid = (lo + hi) / 2;
      M b = M(row[mid]);
      bool go_right = right ? !less_nan_last(x, b) : less_nan_last(b, x);
      if (go_right) lo = mid + 1;
      else hi = mid;
    }
    if (out_int32) out.data<int32_t>()[i] = int32_t(lo);
    else out.data<int64_t>()[i] = lo;
  }
}

// searchsorted.Tensor(sorted_sequence, self, *, out_int32, right, side, sorter): for each value,
// the index of the first boundary > value (right) or >= value (left) in its row.
void searchsorted_k(sdk::Args& a) {
  TensorRef seq = a.tensor(0), values = a.tensor(1);
  bool out_int32 = a.to_bool(2), right = a.to_bool(3);
  auto side = a.optional_str(4);
  auto sorter = a.optional_tensor(5);
  if (side) {
    if (*side != "left" && *side != "right")
      fail(TS_ERROR_VALUE, "searchsorted: side can only be 'left' or 'right' but got ", *side);
    if (right && *side == "left")
      fail(TS_ERROR_VALUE, "searchsorted: side and right can't be set to opposites, got side of left while right was True");
    right = *side == "right";
  }
  if (seq.dim() == 0) fail(TS_ERROR_VALUE, "searchsorted: boundaries tensor should be 1 dimension or the first N-1 dimensions of boundaries tensor and input value tensor must match, but we got boundaries tensor with 0 dimensions");
  if (seq.dim() > 1) {
    bool match = values.dim() == seq.dim();
    for (int64_t d = 0; match && d < seq.dim() - 1; ++d) match = seq.size(d) == values.size(d);
    if (!match)
      fail(TS_ERROR_VALUE, "searchsorted: boundaries tensor should be 1 dimension or the first N-1 dimensions of boundaries "
           "tensor and input value tensor must match");
  }
  if (sorter) seq = ops::gather(seq, -1, *sorter);
  int32_t common = sdk::promote_types(seq.dtype(), values.dtype());
  TensorRef s = ops::contiguous(ops::to(seq, common)), v = ops::contiguous(ops::to(values, common));
  TensorRef out = sdk::empty(a.call(), values.sizes(), out_int32 ? TS_INT32 : TS_INT64, values.device());
  const int64_t n = s.size(s.dim() - 1);
  const int64_t per_row = seq.dim() == 1 ? v.numel() : (v.dim() ? v.size(v.dim() - 1) : 1);
  TS_DISPATCH_ALL(common, fail(TS_ERROR_TYPE, "searchsorted: unsupported dtype"),
                  search_rows<scalar_t>(s, v, out, seq.dim() == 1 ? v.numel() : per_row, n, right, out_int32));
  a.return_tensor(std::move(out));
}

// bincount(Tensor self, Tensor? weights=None, int minlength=0)
void bincount_k(sdk::Args& a) {
  TensorRef self = a.tensor(0);
  auto weights = a.optional_tensor(1);
  int64_t minlength = a.to_int(2);
  if (self.dim() != 1 || sdk::is_floating(self.dtype()) || self.dtype() == TS_BOOL)
    fail(TS_ERROR_VALUE, "bincount: only supports 1-d non-negative integral inputs, got a ", self.dim(), "-d ",
         sdk::dtype_name(self.dtype()), " tensor");
  if (minlength < 0) fail(TS_ERROR_VALUE, "bincount: minlength should be >= 0, got ", minlength);
  if (weights && (weights->dim() != 1 || weights->numel() != self.numel()))
    fail(TS_ERROR_VALUE, "bincount: weights should be 1-d and have the same length as input (", self.numel(), "), got ",
         weights->numel());
  TensorRef idx = ops::contiguous(ops::to(self, int32_t(TS_INT64)));
  const int64_t* ip = idx.data<int64_t>();
  int64_t n = idx.numel(), bins = minlength;
  for (int64_t i = 0; i < n; ++i) {
    if (ip[i] < 0) fail(TS_ERROR_VALUE, "bincount: only supports 1-d non-negative integral inputs, got the value ", ip[i]);
    bins = std::max(bins, ip[i] + 1);
  }
  int32_t out_dtype = !weights ? int32_t(TS_INT64) : weights->dtype() == TS_FLOAT32 ? int32_t(TS_FLOAT32) : int32_t(TS_FLOAT64);
  std::vector<int64_t> shape{bins};
  TensorRef out = ops::zeros(shape, out_dtype, self.device());
  if (!weights) {
    int64_t* op = out.data<int64_t>();
    for (int64_t i = 0; i < n; ++i) op[ip[i]] += 1;
  } else {
    TensorRef w = ops::contiguous(ops::to(*weights, out_dtype));
    if (out_dtype == TS_FLOAT32) {
      for (int64_t i = 0; i < n; ++i) out.data<float>()[ip[i]] += w.data<float>()[i];
    } else {
      for (int64_t i = 0; i < n; ++i) out.data<double>()[ip[i]] += w.data<double>()[i];
    }
  }
  a.return_tensor(std::move(out));
}

}  // namespace

void register_scan_kernels(sdk::Registrar& reg, ts_dispatch_key key);  // scan.cpp

void register_sort_scan_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("sort.stable", key, sort_k);
  reg.kernel("topk", key, topk_k);
  reg.kernel("flip", key, flip_k);
  reg.kernel("searchsorted.Tensor", key, searchsorted_k);
  reg.kernel("bincount", key, bincount_k);
  register_scan_kernels(reg, key);
}

}  // namespace tessera::cpu

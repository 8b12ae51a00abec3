#pragma once
// Layout helpers shared by the CPU plugin's layout-level kernels (shape, join, index, linalg):
// dim wrapping, shapes in messages, a multi-index walker over strided operands and a
// dtype-agnostic strided copy (elements are moved as 1/2/4/8-byte words, so no dtype templates).
#include <complex>
#include <tessera/sdk/memory_overlap.h>
#include <tessera/sdk/plugin.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace tessera::cpu {
int max_threads();  // tensor_iterator.cpp: the host's setting, 1 in a forked child
}  // namespace tessera::cpu

namespace tessera::cpu::strided {

// "[2, 3]" for error messages.
inline std::string str(std::span<const int64_t> values) { return sdk::shape_text(values); }

inline int64_t numel(std::span<const int64_t> shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

// Wraps a possibly negative dim into [0, ndim). A 0-d tensor accepts 0 and -1, as in PyTorch.
inline int64_t wrap_dim(const char* op, int64_t dim, int64_t ndim) {
  int64_t n = ndim == 0 ? 1 : ndim;
  if (dim < -n || dim >= n)
    sdk::fail(TS_ERROR_INDEX, op, ": dimension ", dim, " is out of range for a tensor of ", ndim,
              " dimensions (expected a dimension in [", -n, ", ", n - 1, "])");
  return dim < 0 ? dim + n : dim;
}

// The number of threads worth using for `work` elements of simple memory-bound work.
inline int threads_for(int64_t work) {
  constexpr int64_t kMinWorkPerThread = 32768;
  if (work < 2 * kMinWorkPerThread) return 1;
  int64_t n = std::min<int64_t>(max_threads(), work / kMinWorkPerThread);
  return int(std::max<int64_t>(n, 1));
}

// Calls f(Word{}) with Word an unsigned integer of `itemsize` bytes: element moves need only
// the width, not the dtype.
template <class F>
void with_word(int64_t itemsize, F&& f) {
  switch (itemsize) {
    case 1: f(uint8_t{}); break;
    case 2: f(uint16_t{}); break;
    case 4: f(uint32_t{}); break;
    case 8: f(uint64_t{}); break;
    case 16: f(std::complex<double>{}); break;  // complex128: moved as a pair
    default: sdk::fail(TS_ERROR_TYPE, "unsupported element size ", itemsize);
  }
}

// Walks every multi-index of `shape` in row-major order and calls fn(offsets), where offsets[k]
// is the element offset of operand k under strides[k] (each of shape.size() entries).
template <size_t N, class F>
void for_each_offset(std::span<const int64_t> shape, const std::array<const int64_t*, N>& strides, F&& fn) {
  const int64_t nd = int64_t(shape.size());
  if (numel(shape) == 0) return;
  std::array<int64_t, N> off{};
  if (nd == 0) {
    fn(off);
    return;
  }
  std::array<int64_t, N> inner_stride;
  for (size_t k = 0; k < N; ++k) inner_stride[k] = strides[k][nd - 1];
  const int64_t inner = shape[nd - 1];
  std::vector<int64_t> index(size_t(nd), 0);
  for (;;) {
    std::array<int64_t, N> o = off;
    for (int64_t i = 0; i < inner; ++i) {
      fn(o);
      for (size_t k = 0; k < N; ++k) o[k] += inner_stride[k];
    }
    int64_t d = nd - 2;  // odometer over the outer dims
    for (; d >= 0; --d) {
      for (size_t k = 0; k < N; ++k) off[k] += strides[k][d];
      if (++index[size_t(d)] < shape[d]) break;
      for (size_t k = 0; k < N; ++k) off[k] -= strides[k][d] * shape[d];
      index[size_t(d)] = 0;
    }
    if (d < 0) return;
  }
}

// Copies a coalesced strided block whose dims p and the last are swapped between the two
// layouts, in square tiles of those two dims; the other dims and the tile rows of p are
// split over threads.
template <class W>
void copy_tiled(const std::vector<int64_t>& size, const std::vector<int64_t>& ds, const std::vector<int64_t>& ss,
                int64_t p, W* dst, const W* src) {
  constexpr int64_t kTile = 32;
  const int64_t nd = int64_t(size.size()), q = nd - 1;
  const int64_t outer = numel(size) / (size[size_t(p)] * size[size_t(q)]);
  const int64_t p_tiles = (size[size_t(p)] + kTile - 1) / kTile;
  const int64_t dp = ds[size_t(p)], sp = ss[size_t(p)], dq = ds[size_t(q)], sq = ss[size_t(q)];
#pragma omp parallel for num_threads(threads_for(numel(size))) schedule(static)
  for (int64_t task = 0; task < outer * p_tiles; ++task) {
    int64_t rest = task / p_tiles, doff = 0, soff = 0;
    for (int64_t d = nd - 1; d >= 0; --d) {  // the outer dims' offsets
      if (d == p || d == q) continue;
      const int64_t i = rest % size[size_t(d)];
      rest /= size[size_t(d)];
      doff += i * ds[size_t(d)];
      soff += i * ss[size_t(d)];
    }
    const int64_t i0 = (task % p_tiles) * kTile, i1 = std::min(size[size_t(p)], i0 + kTile);
    for (int64_t j0 = 0; j0 < size[size_t(q)]; j0 += kTile) {
      const int64_t j1 = std::min(size[size_t(q)], j0 + kTile);
      for (int64_t i = i0; i < i1; ++i)
        for (int64_t j = j0; j < j1; ++j) dst[doff + i * dp + j * dq] = src[soff + i * sp + j * sq];
    }
  }
}

// Copies the elements of a strided `src` into a strided `dst` of the same shape and element
// size. Dims are merged where both layouts allow, rows of contiguous elements use memcpy,
// and large copies are split over threads by rows.
inline void copy_elements(std::span<const int64_t> shape, void* dst, std::span<const int64_t> dst_strides,
                          const void* src, std::span<const int64_t> src_strides, int64_t itemsize) {
  // Drop size-1 dims, then merge neighbours that are contiguous in both layouts.
  std::vector<int64_t> size, ds, ss;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0) return;
    if (shape[d] == 1) continue;
    if (!size.empty() && ds.back() == dst_strides[d] * shape[d] && ss.back() == src_strides[d] * shape[d]) {
      size.back() *= shape[d];
      ds.back() = dst_strides[d];
      ss.back() = src_strides[d];
      continue;
    }
    size.push_back(shape[d]);
    ds.push_back(dst_strides[d]);
    ss.push_back(src_strides[d]);
  }
  if (size.empty()) {  // a single element
    std::memmove(dst, src, size_t(itemsize));
    return;
  }
  const int64_t nd = int64_t(size.size());
  const int64_t inner = size.back(), total = numel(size), rows = total / inner;
  const bool rows_contiguous = ds.back() == 1 && ss.back() == 1;
  auto* d0 = static_cast<char*>(dst);
  auto* s0 = static_cast<const char*>(src);
  // A transpose (one side contiguous along the last dim, the other along dim p) goes tile by
  // tile, so that both sides stay in cache.
  int64_t p = -1;
  if (!rows_contiguous && (ds.back() == 1 || ss.back() == 1))
    for (int64_t d = 0; d + 1 < nd; ++d)
      if ((ds.back() == 1 ? ss : ds)[size_t(d)] == 1) p = d;
  with_word(itemsize, [&](auto word) {
    using W = decltype(word);
    if (p >= 0) {
      copy_tiled(size, ds, ss, p, reinterpret_cast<W*>(d0), reinterpret_cast<const W*>(s0));
      return;
    }
#pragma omp parallel for num_threads(threads_for(total)) schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      int64_t rest = r, doff = 0, soff = 0;
      for (int64_t d = nd - 2; d >= 0; --d) {
        int64_t i = rest % size[size_t(d)];
        rest /= size[size_t(d)];
        doff += i * ds[size_t(d)];
        soff += i * ss[size_t(d)];
      }
      W* dp = reinterpret_cast<W*>(d0) + doff;
      const W* sp = reinterpret_cast<const W*>(s0) + soff;
      if (rows_contiguous) {
        std::memcpy(dp, sp, size_t(inner) * sizeof(W));
      } else {
        const int64_t dst_step = ds.back(), src_step = ss.back();
        for (int64_t i = 0; i < inner; ++i) dp[i * dst_step] = sp[i * src_step];
      }
    }
  });
}

// dst (cols x rows, row-major) = the transpose of src (rows x cols, rows src_ld elements apart):
// between row-major matrices and column-major ones (LAPACK's, a transposed BLAS operand).
template <class T>
inline void transpose(T* dst, const T* src, int64_t rows, int64_t cols, int64_t src_ld) {
  const int64_t shape[] = {rows, cols}, dst_strides[] = {1, rows}, src_strides[] = {src_ld, 1};
  copy_elements(shape, dst, dst_strides, src, src_strides, int64_t(sizeof(T)));
}

// The same for two tensors of equal shape and dtype.
inline void copy_tensor(const sdk::TensorRef& dst, const sdk::TensorRef& src) {
  copy_elements(dst.sizes(), dst.data(), dst.strides(), src.data(), src.strides(), dst.itemsize());
}

// True when the memory of two tensors may overlap (a conservative test on byte ranges), for
// refusing out= tensors that alias an input.
inline bool overlaps(const sdk::TensorRef& x, const sdk::TensorRef& y) { return sdk::may_overlap(x, y); }

// True when (shape, strides) is row-major contiguous (strides of size-1 dims do not matter).
inline bool is_contiguous(std::span<const int64_t> shape, std::span<const int64_t> strides) {
  int64_t expected = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] == 1) continue;
    if (strides[d] != expected) return false;
    expected *= shape[d];
  }
  return true;
}

// Contiguous strides of `shape` (a size-0 or size-1 dim counts as 1, like the host).
inline std::vector<int64_t> contiguous_strides(std::span<const int64_t> shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= std::max<int64_t>(shape[i], 1);
  }
  return strides;
}

}  // namespace tessera::cpu::strided

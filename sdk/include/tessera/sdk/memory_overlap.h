#pragma once
// Whether two strided views share memory, and whether a view reaches one element through two
// indices, on plain (data, sizes, strides) so the arithmetic runs anywhere, a device plugin's
// memory included (its pointers are only compared): the CPU plugin's copy and out= checks, the
// GPU plugin's copy_ (whose elements run in parallel, so an overlapping source is read in full
// before anything is written), and tests/cpp/test_cuda_memory_overlap.cpp without a device.
#include <cstddef>
#include <cstdint>
#include <span>

#include <tessera/sdk/plugin.h>

namespace tessera::sdk {

struct StridedView {
  const void* data = nullptr;
  std::span<const int64_t> sizes, strides;
  int64_t itemsize = 1;
};

inline bool is_empty(const StridedView& v) {
  for (int64_t s : v.sizes)
    if (s == 0) return true;
  return false;
}

// The bytes [lo, hi) a view can touch (a conservative range: gaps between elements count).
struct ByteExtent {
  uintptr_t lo = 0, hi = 0;
};
inline ByteExtent byte_extent(const StridedView& v) {
  const uintptr_t base = reinterpret_cast<uintptr_t>(v.data);
  if (is_empty(v)) return {base, base};
  int64_t lo = 0, hi = 0;
  for (size_t d = 0; d < v.sizes.size(); ++d) {
    const int64_t span = (v.sizes[d] - 1) * v.strides[d] * v.itemsize;
    (span < 0 ? lo : hi) += span;
  }
  return {base + uintptr_t(lo), base + uintptr_t(hi + v.itemsize)};
}

// True when the two views may share a byte.
inline bool may_overlap(const StridedView& a, const StridedView& b) {
  if (is_empty(a) || is_empty(b)) return false;
  const ByteExtent x = byte_extent(a), y = byte_extent(b);
  return x.lo < y.hi && y.lo < x.hi;
}

// True when some element is reachable through two indices (an expanded view: stride 0).
inline bool has_internal_overlap(const StridedView& v) {
  for (size_t d = 0; d < v.sizes.size(); ++d)
    if (v.sizes[d] > 1 && v.strides[d] == 0) return true;
  return false;
}

// True when `src` is `dst` itself (same first element, shape, strides, element size): copying
// it is a no-op, as on the CPU.
inline bool same_view(const StridedView& dst, const StridedView& src) {
  if (dst.data != src.data || dst.itemsize != src.itemsize || dst.sizes.size() != src.sizes.size()) return false;
  for (size_t d = 0; d < dst.sizes.size(); ++d)
    if (dst.sizes[d] != src.sizes[d] || (dst.sizes[d] > 1 && dst.strides[d] != src.strides[d])) return false;
  return true;
}

inline StridedView strided_view(const TensorRef& t) {
  return {t.data(), t.sizes(), t.strides(), int64_t(t.itemsize())};
}
inline bool may_overlap(const TensorRef& a, const TensorRef& b) { return may_overlap(strided_view(a), strided_view(b)); }
inline bool has_internal_overlap(const TensorRef& t) { return has_internal_overlap(strided_view(t)); }

}  // namespace tessera::sdk

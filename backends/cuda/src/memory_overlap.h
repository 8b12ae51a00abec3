#pragma once
// Whether two strided views share memory, and whether a view reaches one element through two
// indices: the CPU plugin's tests (backends/cpu/src/tensor_iterator.cpp: extent_of, overlaps,
// has_internal_overlap), on plain (data, sizes, strides) so the same arithmetic runs in the GPU
// plugin's copy_ and in tests/cpp/test_cuda_memory_overlap.cpp without a device. A GPU copy
// runs its elements in parallel, so an overlapping source must be read in full before anything
// is written.
#include <cstddef>
#include <cstdint>
#include <span>

namespace tessera::gpu {

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

}  // namespace tessera::gpu

#pragma once
// The geometry of view operators whose rules every device shares (diagonal, as_strided, expand,
// unsqueeze, transpose): the new
// sizes, strides and storage offset over the input's storage, checked with the same messages
// everywhere. A device plugin passes them to sdk::alias (no data moves).
#include <tessera/sdk/plugin.h>

#include <algorithm>
#include <span>
#include <vector>

namespace tessera::sdk {

struct ViewGeometry {
  std::vector<int64_t> sizes, strides;
  int64_t storage_offset = 0;
};

inline int64_t wrap_view_dim(const char* op, int64_t d, int64_t ndim) {
  TS_SDK_CHECK(d >= -ndim && d < ndim, TS_ERROR_INDEX, op, ": dimension out of range (expected to be in range of [",
               -ndim, ", ", ndim - 1, "], but got ", d, ")");
  return d < 0 ? d + ndim : d;
}

// diagonal(self, offset, dim1, dim2): dims dim1 and dim2 replaced by one last dim stepping along
// both, starting `offset` columns right (offset > 0) or -offset rows down.
inline ViewGeometry diagonal_geometry(const TensorRef& self, int64_t offset, int64_t dim1, int64_t dim2) {
  TS_SDK_CHECK(self.dim() >= 2, TS_ERROR_VALUE, "diagonal: expected a tensor with at least 2 dimensions, got ", self.dim());
  const int64_t d1 = wrap_view_dim("diagonal", dim1, self.dim()), d2 = wrap_view_dim("diagonal", dim2, self.dim());
  TS_SDK_CHECK(d1 != d2, TS_ERROR_VALUE, "diagonal: dimensions cannot be identical ", dim1, ", ", dim2);
  ViewGeometry g;
  g.storage_offset = self.storage_offset();
  int64_t length;
  if (offset >= 0) {
    length = std::max<int64_t>(0, std::min(self.size(d1), self.size(d2) - offset));
    if (length > 0) g.storage_offset += offset * self.stride(d2);
  } else {
    length = std::max<int64_t>(0, std::min(self.size(d1) + offset, self.size(d2)));
    if (length > 0) g.storage_offset -= offset * self.stride(d1);
  }
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (d == d1 || d == d2) continue;
    g.sizes.push_back(self.size(d));
    g.strides.push_back(self.stride(d));
  }
  g.sizes.push_back(length);
  g.strides.push_back(self.stride(d1) + self.stride(d2));
  return g;
}

// as_strided(self, size, stride, storage_offset): checked lengths and signs (the host checks that
// the view stays inside the storage).
inline ViewGeometry as_strided_geometry(const TensorRef& self, std::span<const int64_t> size, std::span<const int64_t> stride,
                                        std::optional<int64_t> storage_offset) {
  TS_SDK_CHECK(size.size() == stride.size(), TS_ERROR_VALUE, "as_strided: mismatch in length of strides and shape (",
               size.size(), " sizes, ", stride.size(), " strides)");
  for (size_t d = 0; d < size.size(); ++d)
    TS_SDK_CHECK(size[d] >= 0 && stride[d] >= 0, TS_ERROR_VALUE,
                 "as_strided: Negative strides and sizes are not supported, got size ", size[d], " stride ", stride[d]);
  return {{size.begin(), size.end()}, {stride.begin(), stride.end()}, storage_offset.value_or(self.storage_offset())};
}

// The views autograd's formulas use on every device (sum_to, broadcasting gradients, .T).
// expand(self, size): size-1 dims (and new leading dims) repeat at stride 0; -1 keeps a size.
inline ViewGeometry expand_geometry(const TensorRef& self, std::span<const int64_t> size) {
  const int64_t lead = int64_t(size.size()) - self.dim();
  TS_SDK_CHECK(lead >= 0, TS_ERROR_VALUE, "expand: the number of sizes provided (", size.size(),
               ") must be greater or equal to the number of dimensions in the tensor (", self.dim(), ")");
  ViewGeometry g{{size.begin(), size.end()}, std::vector<int64_t>(size.size(), 0), 0};
  for (int64_t d = 0; d < self.dim(); ++d) {
    const int64_t want = size[size_t(d + lead)];
    if (want == -1 || want == self.size(d)) {
      g.sizes[size_t(d + lead)] = self.size(d);
      g.strides[size_t(d + lead)] = self.stride(d);
    } else {
      TS_SDK_CHECK(self.size(d) == 1, TS_ERROR_VALUE, "expand: the expanded size of the tensor (", want,
                   ") must match the existing size (", self.size(d), ") at non-singleton dimension ", d + lead);
    }
  }
  for (int64_t d = 0; d < lead; ++d)
    TS_SDK_CHECK(size[size_t(d)] >= 0, TS_ERROR_VALUE, "expand: the expanded size ", size[size_t(d)],
                 " is not allowed in a leading, non-existing dimension ", d);
  return g;
}

// unsqueeze(self, dim): a size-1 dim inserted at `dim` (in [-ndim-1, ndim]).
inline ViewGeometry unsqueeze_geometry(const TensorRef& self, int64_t dim) {
  const int64_t d = wrap_view_dim("unsqueeze", dim, self.dim() + 1);
  ViewGeometry g{self.shape_vector(), {self.strides().begin(), self.strides().end()}, 0};
  g.sizes.insert(g.sizes.begin() + d, 1);
  g.strides.insert(g.strides.begin() + d, d < self.dim() ? self.stride(d) * self.size(d) : 1);
  return g;
}

// transpose(self, dim0, dim1): the two dims swapped (a 0-d tensor takes dims 0 and -1).
inline ViewGeometry transpose_geometry(const TensorRef& self, int64_t dim0, int64_t dim1) {
  ViewGeometry g{self.shape_vector(), {self.strides().begin(), self.strides().end()}, 0};
  const int64_t n = std::max<int64_t>(self.dim(), 1);
  const int64_t d0 = wrap_view_dim("transpose", dim0, n), d1 = wrap_view_dim("transpose", dim1, n);
  if (self.dim() > 0) {
    std::swap(g.sizes[size_t(d0)], g.sizes[size_t(d1)]);
    std::swap(g.strides[size_t(d0)], g.strides[size_t(d1)]);
  }
  return g;
}

}  // namespace tessera::sdk

#pragma once
// layer_norm's shape rule (PyTorch's), shared by every device's kernels so that they accept the
// same arguments and refuse bad ones with the same messages.
#include <tessera/sdk/plugin.h>

#include <span>
#include <vector>

namespace tessera::sdk {

// The input as m rows of n elements, the trailing dims being normalized_shape.
struct LayerNormRows {
  int64_t m = 1, n = 1;             // rows, elements per row
  std::vector<int64_t> stat_shape;  // of mean / rstd: the leading dims, then a 1 per normalized dim
};

inline LayerNormRows layer_norm_rows(const char* op, const TensorRef& input, std::span<const int64_t> normalized) {
  const int64_t k = int64_t(normalized.size());
  TS_SDK_CHECK(k > 0, TS_ERROR_VALUE, op, ": expected normalized_shape to be at least 1-dimensional, got []");
  const int64_t axis = input.dim() - k;
  bool ok = axis >= 0;
  for (int64_t i = 0; ok && i < k; ++i) ok = input.size(axis + i) == normalized[size_t(i)];
  TS_SDK_CHECK(ok, TS_ERROR_VALUE, op, ": expected input with shape [*, ", shape_text(normalized).substr(1),
               " (ending in normalized_shape), got input of shape ", shape_text(input.sizes()));
  LayerNormRows r;
  for (int64_t d = 0; d < axis; ++d) {
    r.m *= input.size(d);
    r.stat_shape.push_back(input.size(d));
  }
  for (int64_t d = axis; d < input.dim(); ++d) {
    r.n *= input.size(d);
    r.stat_shape.push_back(1);
  }
  return r;
}

}  // namespace tessera::sdk

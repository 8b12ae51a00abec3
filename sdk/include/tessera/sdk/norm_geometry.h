#pragma once
// The shape rules of the normalizations (PyTorch's), shared by every device's kernels so that they
// accept the same arguments and refuse bad ones with the same messages: layer_norm's rows,
// batch_norm's channels, group_norm's groups.
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

// batch_norm's view of an (N, C, *) input: N x C rows of HW elements.
struct ChannelLayout {
  int64_t n = 0, c = 0, hw = 1;
  int64_t count() const { return n * hw; }  // elements per channel
};

inline ChannelLayout channel_layout(const char* op, const TensorRef& input) {
  TS_SDK_CHECK(input.dim() >= 2, TS_ERROR_VALUE, op, ": expected input of at least 2 dimensions (N, C, *), got ",
               input.dim(), " (shape ", shape_text(input.sizes()), ")");
  ChannelLayout l{input.size(0), input.size(1), 1};
  for (int64_t d = 2; d < input.dim(); ++d) l.hw *= input.size(d);
  return l;
}

// native_batch_norm's mode rules: evaluation needs the running statistics; training needs more
// than one value per channel.
inline void check_batch_norm_mode(const char* op, bool training, bool has_running_stats, const ChannelLayout& l,
                                  const TensorRef& input) {
  TS_SDK_CHECK(training || has_running_stats, TS_ERROR_VALUE, op,
               ": expected running_mean and running_var in evaluation mode (training=False), got None");
  TS_SDK_CHECK(!training || l.count() != 1, TS_ERROR_VALUE, op,
               ": expected more than 1 value per channel when training, got input of shape ", shape_text(input.sizes()));
}

// native_batch_norm_backward's statistics: the saved ones when train, else the running ones.
inline void check_batch_norm_backward_statistics(const char* op, bool train, bool has_saved, bool has_running) {
  if (train)
    TS_SDK_CHECK(has_saved, TS_ERROR_VALUE, op, ": expected save_mean and save_invstd when train=True, got None");
  else
    TS_SDK_CHECK(has_running, TS_ERROR_VALUE, op, ": expected running_mean and running_var when train=False, got None");
}

// group_norm's view of an (N, C, *) input given as N, C, HxW and group: N x group rows of
// (C / group) * HxW elements.
struct GroupLayout {
  int64_t n = 0, c = 0, hw = 1, group = 1;
  int64_t per_group() const { return c / group; }  // channels in a group
  int64_t row() const { return per_group() * hw; }  // elements in an (n, g) row
};

inline GroupLayout group_layout(const char* op, const TensorRef& input, int64_t n, int64_t c, int64_t hw,
                                int64_t group) {
  TS_SDK_CHECK(n >= 0 && c >= 0 && hw >= 0, TS_ERROR_VALUE, op, ": expected non-negative N, C and HxW, got ", n, ", ",
               c, " and ", hw);
  TS_SDK_CHECK(group > 0 && c % group == 0, TS_ERROR_VALUE, op,
               ": expected group to be positive and to divide the number of channels C = ", c, ", got group = ", group);
  TS_SDK_CHECK(input.numel() == n * c * hw && (input.dim() < 1 || input.size(0) == n) &&
                   (input.dim() < 2 || input.size(1) == c),
               TS_ERROR_VALUE, op, ": expected input of shape (N, C, *) = (", n, ", ", c, ", ...) with ", n * c * hw,
               " elements (HxW = ", hw, "), got shape ", shape_text(input.sizes()));
  return {n, c, hw, group};
}

// native_group_norm_backward's mean and rstd: N * group elements each.
inline void check_group_statistics(const char* op, const GroupLayout& g, const TensorRef& mean, const TensorRef& rstd) {
  TS_SDK_CHECK(mean.numel() == g.n * g.group && rstd.numel() == g.n * g.group, TS_ERROR_VALUE, op,
               ": expected mean and rstd of N * group = ", g.n * g.group, " elements, got shapes ",
               shape_text(mean.sizes()), " and ", shape_text(rstd.sizes()));
}

}  // namespace tessera::sdk

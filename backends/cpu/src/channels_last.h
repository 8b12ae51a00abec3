#pragma once
// Channels-last 4-D tensors (torch.channels_last): logically NCHW, laid out NHWC in memory. The
// kernels that keep this layout (convolution, batch norm) share these helpers.
#include "kernels.h"

#include <cstdint>
#include <span>
#include <vector>

namespace tessera::cpu {

// The dense NHWC strides of a 4-D NCHW shape.
std::vector<int64_t> channels_last_strides(std::span<const int64_t> shape);
// Whether t is 4-D and dense in NHWC (dims of size 1 may hold any stride, as in PyTorch).
bool is_dense_channels_last(const sdk::TensorRef& t);
// Whether t is channels-last and not also row-major: PyTorch's suggest_memory_format.
bool is_channels_last(const sdk::TensorRef& t);
sdk::TensorRef empty_channels_last(ts_call call, std::span<const int64_t> shape, int32_t dtype);
// t in `dtype`, dense NHWC: t itself when it already is, else a copy.
sdk::TensorRef channels_last_copy(ts_call call, const sdk::TensorRef& t, int32_t dtype, const char* op);

}  // namespace tessera::cpu

#include "channels_last.h"

#include "tensor_iterator.h"

namespace tessera::cpu {

std::vector<int64_t> channels_last_strides(std::span<const int64_t> s) {
  return {s[1] * s[2] * s[3], 1, s[3] * s[1], s[1]};
}

bool is_dense_channels_last(const sdk::TensorRef& t) {
  if (t.dim() != 4) return false;
  const std::vector<int64_t> want = channels_last_strides(t.sizes());
  for (int64_t d = 0; d < 4; ++d)
    if (t.size(d) != 1 && t.stride(d) != want[size_t(d)]) return false;
  return true;
}

bool is_channels_last(const sdk::TensorRef& t) { return !t.is_contiguous() && is_dense_channels_last(t); }

sdk::TensorRef empty_channels_last(ts_call call, std::span<const int64_t> shape, int32_t dtype) {
  return sdk::empty(call, shape, dtype, kCpuDevice, channels_last_strides(shape));
}

sdk::TensorRef channels_last_copy(ts_call call, const sdk::TensorRef& t, int32_t dtype, const char* op) {
  if (t.dtype() == dtype && is_dense_channels_last(t)) return t;
  sdk::TensorRef out = empty_channels_last(call, t.sizes(), dtype);
  copy_into(call, out, t, op);  // casts too
  return out;
}

}  // namespace tessera::cpu

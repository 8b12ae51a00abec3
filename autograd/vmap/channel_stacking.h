// The batch as channels: B samples of [N, C, S...] side by side as [N, B * C, S...] (sample-major),
// and per-channel parameters [B, C] stacked as [B * C]. Convolution (with B * groups groups) and
// the channel normalisations (their statistics then per sample) run every sample in one call.
#pragma once

#include "call_frame.h"

#include <vector>

namespace tessera::vmap {

// [B, N, C, S...] -> [N, B * C, S...]: the samples' channels side by side.
inline sdk::TensorRef channels_side_by_side(const sdk::TensorRef& v) {
  std::vector<int64_t> shape{v.size(1), v.size(0) * v.size(2)};
  shape.insert(shape.end(), v.sizes().begin() + 3, v.sizes().end());
  return sdk::ops::reshape(sdk::ops::transpose(v, 0, 1), shape);
}

// [N, B * C, S...] -> [B, N, C, S...].
inline sdk::TensorRef channels_apart(const sdk::TensorRef& t, int64_t batch) {
  std::vector<int64_t> shape{t.size(0), batch, t.size(1) / batch};
  shape.insert(shape.end(), t.sizes().begin() + 2, t.sizes().end());
  return sdk::ops::transpose(sdk::ops::reshape(t, shape), 0, 1);
}

// [B, d0, d1...] -> [B * d0, d1...] and back.
inline sdk::TensorRef stacked(const sdk::TensorRef& v) {
  std::vector<int64_t> shape{v.size(0) * v.size(1)};
  shape.insert(shape.end(), v.sizes().begin() + 2, v.sizes().end());
  return sdk::ops::reshape(v, shape);
}
inline sdk::TensorRef unstacked(const sdk::TensorRef& t, int64_t batch) {
  std::vector<int64_t> shape{batch, t.size(0) / batch};
  shape.insert(shape.end(), t.sizes().begin() + 1, t.sizes().end());
  return sdk::ops::reshape(t, shape);
}

}  // namespace tessera::vmap

// flip(Tensor self, int[] dims): a contiguous copy through the engine's copy kernel, reading self
// from the far end of each flipped dim with that dim's stride negated (no kernel of its own).
#include "more_ops.h"

#include <algorithm>
#include <cstdlib>
#include <vector>

namespace tessera::gpu {
namespace {

void flip_k(sdk::Args& a) {
  TensorRef self = a.tensor(0);
  common_device("flip", {&self});
  std::vector<bool> flipped(size_t(std::max<int64_t>(self.dim(), 1)));
  for (int64_t d : a.int_list(1)) {
    const int64_t w = wrap_dim("flip", d, self.dim());
    TS_SDK_CHECK(!flipped[size_t(w)], TS_ERROR_VALUE, "flip: dim ", w, " appears multiple times in the list of dims");
    flipped[size_t(w)] = true;
  }
  TensorRef out = empty_on(a.call(), self.sizes(), self.dtype(), self.device());
  const int64_t nd = self.dim();
  // Not coalesced (a flipped dim cannot merge with its neighbours anyway), hence the limit.
  TS_SDK_CHECK(nd <= kMaxDims, TS_ERROR_VALUE, "flip: the ", kName, " kernel handles at most ", kMaxDims,
               " dims, got ", nd);
  Loop L;
  L.noperands = 2;
  L.ndim = int32_t(nd);
  L.numel = self.numel();
  L.ops[0].data = first_element(out);
  L.ops[1].data = first_element(self);
  int64_t reach_out = 0, reach_in = 0, stride_out = 1;
  for (int64_t d = nd - 1; d >= 0; --d) {
    const int64_t size = self.size(d), stride = self.stride(d);
    L.sizes[d] = size;
    L.ops[0].strides[d] = stride_out;
    L.ops[1].strides[d] = flipped[size_t(d)] ? -stride : stride;
    if (flipped[size_t(d)] && size > 0) L.ops[1].data += (size - 1) * stride * self.itemsize();
    if (size > 0) {
      reach_out += (size - 1) * stride_out;
      reach_in += (size - 1) * std::abs(stride);
    }
    stride_out *= size;
  }
  for (int k = 0; k < 2; ++k) {
    L.ops[k].dtype = self.dtype();
    L.ops[k].itemsize = int32_t(self.itemsize());
  }
  L.index32 = index32_fits(std::max({L.numel, reach_out + 1, reach_in + 1}));
  DeviceGuard guard(self.device().index);
  launch_copy(L, stream_for(self.device().index));
  a.return_tensor(std::move(out));
}
}  // namespace

void register_flip_kernels(sdk::Registrar& reg, ts_dispatch_key key) { reg.kernel("flip", key, flip_k); }

}  // namespace tessera::gpu

#pragma once
// 2-D pooling's shape rules (PyTorch's), shared by every device's kernels so that they accept the
// same arguments and refuse bad ones with the same messages: the input's planes, the parameter
// limits and the output size. Device and dtype checks stay with each plugin.
#include <tessera/sdk/plugin.h>

#include <array>
#include <vector>

namespace tessera::sdk {

// A (C, H, W) or (N, C, H, W) input as `planes` planes of h x w.
struct PoolPlanes {
  int64_t planes = 0, h = 0, w = 0;
  std::vector<int64_t> lead;  // [C] or [N, C]

  std::vector<int64_t> shape(int64_t oh, int64_t ow) const {
    std::vector<int64_t> s = lead;
    s.push_back(oh);
    s.push_back(ow);
    return s;
  }
};

// Checks that `self` is 3-D or 4-D with non-zero sizes except the batch dim, and describes it.
inline PoolPlanes pool_input_planes(const char* op, const TensorRef& self) {
  const int64_t d = self.dim();
  TS_SDK_CHECK(d == 3 || d == 4, TS_ERROR_VALUE, op, ": expected a 3-D (C, H, W) or 4-D (N, C, H, W) input, got ", d,
               "-D input of shape ", shape_text(self.sizes()));
  for (int64_t i = d - 3; i < d; ++i)
    TS_SDK_CHECK(self.size(i) != 0, TS_ERROR_VALUE, op,
                 ": expected an input with non-zero sizes in all but the batch dim, got shape ", shape_text(self.sizes()));
  PoolPlanes p;
  p.lead.assign(self.sizes().begin(), self.sizes().end() - 2);
  p.planes = 1;
  for (int64_t s : p.lead) p.planes *= s;
  p.h = self.size(d - 2);
  p.w = self.size(d - 1);
  return p;
}

// kernel > 0, stride > 0, dilation > 0, 0 <= padding <= kernel / 2 (PyTorch's limits).
inline void check_pool_params(const char* op, const std::array<int64_t, 2>& k, const std::array<int64_t, 2>& s,
                              const std::array<int64_t, 2>& pad, const std::array<int64_t, 2>& dil) {
  TS_SDK_CHECK(k[0] > 0 && k[1] > 0, TS_ERROR_VALUE, op, ": expected kernel_size > 0, got ", shape_text(k));
  TS_SDK_CHECK(s[0] > 0 && s[1] > 0, TS_ERROR_VALUE, op, ": expected stride > 0, got ", shape_text(s));
  TS_SDK_CHECK(dil[0] > 0 && dil[1] > 0, TS_ERROR_VALUE, op, ": expected dilation > 0, got ", shape_text(dil));
  TS_SDK_CHECK(pad[0] >= 0 && pad[1] >= 0, TS_ERROR_VALUE, op, ": expected padding >= 0, got ", shape_text(pad));
  TS_SDK_CHECK(pad[0] <= k[0] / 2 && pad[1] <= k[1] / 2, TS_ERROR_VALUE, op,
               ": expected padding to be at most half of kernel_size, got padding ", shape_text(pad),
               " and kernel_size ", shape_text(k));
}

// PyTorch's pooling output size; in ceil mode the last window must start inside the input or
// the left padding.
inline int64_t pooled_size(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dil, bool ceil_mode) {
  const int64_t num = in + 2 * pad - dil * (k - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  const int64_t q = num >= 0 ? num / stride : -((-num + stride - 1) / stride);  // floor division
  int64_t out = q + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

// The output's (oh, ow); ValueError when a dim would be empty.
inline std::array<int64_t, 2> pooled_plane(const char* op, const PoolPlanes& p, const std::array<int64_t, 2>& k,
                                           const std::array<int64_t, 2>& s, const std::array<int64_t, 2>& pad,
                                           const std::array<int64_t, 2>& dil, bool ceil_mode) {
  const int64_t oh = pooled_size(p.h, k[0], pad[0], s[0], dil[0], ceil_mode);
  const int64_t ow = pooled_size(p.w, k[1], pad[1], s[1], dil[1], ceil_mode);
  TS_SDK_CHECK(oh >= 1 && ow >= 1, TS_ERROR_VALUE, op, ": the output would be empty: input plane ", p.h, "x", p.w,
               " with kernel_size ", shape_text(k), ", stride ", shape_text(s), ", padding ", shape_text(pad),
               " and dilation ", shape_text(dil), " gives ", oh, "x", ow);
  return {oh, ow};
}

}  // namespace tessera::sdk

#pragma once
// Convolution's shape rules (PyTorch's: 1-D and 2-D, batched or not, stride, padding, dilation,
// groups), shared by every device's kernels so that they accept the same arguments and refuse
// bad ones with the same messages. 1-D is 2-D with a size-1 height.
#include <tessera/sdk/plugin.h>

#include <array>
#include <span>
#include <string>
#include <vector>

namespace tessera::sdk {

struct ConvGeometry {
  int64_t n = 1, c_in = 0, h = 1, w = 1;  // input [n, c_in, h, w]
  int64_t c_out = 0, kh = 1, kw = 1;      // weight [c_out, c_in / groups, kh, kw]
  int64_t sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1, groups = 1;
  int64_t oh = 1, ow = 1;                 // output [n, c_out, oh, ow]
  int64_t channel_dim = 1;                // the result's channel dim: 0 when unbatched
  std::vector<int64_t> out_shape;         // the result's shape (unbatched and 1-D kept as given)

  int64_t cg_in() const { return c_in / groups; }
  int64_t cg_out() const { return c_out / groups; }
  int64_t patch() const { return cg_in() * kh * kw; }  // one row of im2col per patch element
  int64_t out_plane() const { return oh * ow; }
};

// stride / padding / dilation: one value per spatial dim, or one for all of them.
inline std::array<int64_t, 2> conv_spatial_arg(const char* op, const char* name, std::span<const int64_t> v,
                                               int64_t dims, int64_t min) {
  TS_SDK_CHECK(v.size() == 1 || int64_t(v.size()) == dims, TS_ERROR_VALUE, op, ": expected ", name,
               dims == 1 ? " to have 1 value" : " to have 1 or 2 values", " (one per spatial dim, or one for all), got ",
               shape_text(v));
  for (int64_t x : v)
    TS_SDK_CHECK(x >= min, TS_ERROR_VALUE, op, ": expected ", name, " values >= ", min, ", got ", shape_text(v));
  if (dims == 1) return {min, v[0]};  // H: a size-1 dim with stride 1, padding 0, dilation 1
  return {v[0], v.size() == 1 ? v[0] : v[1]};
}

// Checks convolution(input, weight, stride, padding, dilation, groups) for an input of shape
// `input_sizes` and returns its geometry.
inline ConvGeometry conv_geometry(const char* op, std::span<const int64_t> input_sizes, const TensorRef& weight,
                                  std::span<const int64_t> stride, std::span<const int64_t> padding,
                                  std::span<const int64_t> dilation, int64_t groups) {
  struct Shape {  // what the checks below read of the input
    std::span<const int64_t> s;
    int64_t dim() const { return int64_t(s.size()); }
    int64_t size(int64_t d) const { return s[size_t(d)]; }
    std::span<const int64_t> sizes() const { return s; }
  } input{input_sizes};
  const int64_t wd = weight.dim();
  TS_SDK_CHECK(wd == 3 || wd == 4, TS_ERROR_VALUE, op,
               ": expected a 3-D weight (1-D convolution) or a 4-D weight (2-D convolution), got ", wd,
               "-D weight of shape ", shape_text(weight.sizes()));
  const int64_t dims = wd - 2;
  const bool batched = input.dim() == dims + 2;
  TS_SDK_CHECK(batched || input.dim() == dims + 1, TS_ERROR_VALUE, op, ": expected a ", dims + 1, "-D (unbatched) or ",
               dims + 2, "-D (batched) input for ", dims, "-D convolution with weight of shape ",
               shape_text(weight.sizes()), ", got ", input.dim(), "-D input of shape ", shape_text(input.sizes()));
  TS_SDK_CHECK(groups > 0, TS_ERROR_VALUE, op, ": expected groups > 0, got ", groups);
  ConvGeometry g;
  const int64_t lead = batched ? 1 : 0;
  g.channel_dim = lead;
  g.n = batched ? input.size(0) : 1;
  g.c_in = input.size(lead);
  g.c_out = weight.size(0);
  g.groups = groups;
  TS_SDK_CHECK(g.c_out % groups == 0, TS_ERROR_VALUE, op, ": expected the weight's out channels (", g.c_out,
               ") to be divisible by groups (", groups, "), weight of shape ", shape_text(weight.sizes()));
  TS_SDK_CHECK(weight.size(1) * groups == g.c_in, TS_ERROR_VALUE, op, ": given groups=", groups,
               " and weight of shape ", shape_text(weight.sizes()), ", expected input of shape ",
               shape_text(input.sizes()), " to have ", weight.size(1) * groups, " channels, but got ", g.c_in,
               " channels");
  const auto s = conv_spatial_arg(op, "stride", stride, dims, 1);
  const auto pad = conv_spatial_arg(op, "padding", padding, dims, 0);
  const auto dil = conv_spatial_arg(op, "dilation", dilation, dims, 1);
  g.sh = s[0], g.sw = s[1], g.ph = pad[0], g.pw = pad[1], g.dh = dil[0], g.dw = dil[1];
  g.h = dims == 2 ? input.size(lead + 1) : 1;
  g.w = input.size(lead + dims);
  g.kh = dims == 2 ? weight.size(2) : 1;
  g.kw = weight.size(wd - 1);
  TS_SDK_CHECK(g.kh > 0 && g.kw > 0, TS_ERROR_VALUE, op, ": expected a non-empty kernel, got weight of shape ",
               shape_text(weight.sizes()));
  const int64_t eh = g.dh * (g.kh - 1) + 1, ew = g.dw * (g.kw - 1) + 1;  // extents after dilation
  const int64_t ih = g.h + 2 * g.ph, iw = g.w + 2 * g.pw;
  if (ih < eh || iw < ew) {
    std::vector<int64_t> padded = dims == 2 ? std::vector<int64_t>{ih, iw} : std::vector<int64_t>{iw};
    std::vector<int64_t> kernel = dims == 2 ? std::vector<int64_t>{eh, ew} : std::vector<int64_t>{ew};
    fail(TS_ERROR_VALUE, op, ": the kernel (size after dilation ", shape_text(kernel),
         ") can't be larger than the padded input (size per channel ", shape_text(padded), "), input of shape ",
         shape_text(input.sizes()), ", weight of shape ", shape_text(weight.sizes()));
  }
  g.oh = (ih - eh) / g.sh + 1;
  g.ow = (iw - ew) / g.sw + 1;
  if (batched) g.out_shape.push_back(g.n);
  g.out_shape.push_back(g.c_out);
  if (dims == 2) g.out_shape.push_back(g.oh);
  g.out_shape.push_back(g.ow);
  return g;
}

inline ConvGeometry conv_geometry(const char* op, const TensorRef& input, const TensorRef& weight,
                                  std::span<const int64_t> stride, std::span<const int64_t> padding,
                                  std::span<const int64_t> dilation, int64_t groups) {
  return conv_geometry(op, input.sizes(), weight, stride, padding, dilation, groups);
}

}  // namespace tessera::sdk

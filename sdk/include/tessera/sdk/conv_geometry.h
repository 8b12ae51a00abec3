#pragma once
// Convolution's shape rules (PyTorch's: 1-D, 2-D and 3-D, batched or not, stride, padding,
// dilation, groups), shared by every device's kernels so that they accept the same arguments and
// refuse bad ones with the same messages. 1-D and 2-D are 3-D with size-1 leading spatial dims.
#include <tessera/sdk/plugin.h>

#include <array>
#include <span>
#include <string>
#include <vector>

namespace tessera::sdk {

struct ConvGeometry {
  int64_t spatial = 2;                            // spatial dims as given: 1, 2 or 3
  int64_t n = 1, c_in = 0, d = 1, h = 1, w = 1;   // input [n, c_in, d, h, w]
  int64_t c_out = 0, kd = 1, kh = 1, kw = 1;      // weight [c_out, c_in / groups, kd, kh, kw]
  int64_t sd = 1, sh = 1, sw = 1, pd = 0, ph = 0, pw = 0, dd = 1, dh = 1, dw = 1, groups = 1;
  int64_t od = 1, oh = 1, ow = 1;                 // output [n, c_out, od, oh, ow]
  int64_t channel_dim = 1;                        // the result's channel dim: 0 when unbatched
  std::vector<int64_t> out_shape;                 // the result's shape (unbatched and 1-D kept as given)

  int64_t cg_in() const { return c_in / groups; }
  int64_t cg_out() const { return c_out / groups; }
  int64_t kernel_volume() const { return kd * kh * kw; }
  int64_t patch() const { return cg_in() * kernel_volume(); }  // one row of im2col per patch element
  int64_t in_plane() const { return d * h * w; }              // one channel of the input
  int64_t out_plane() const { return od * oh * ow; }          // one channel of the output
};

// stride / padding / dilation: one value per spatial dim, or one for all of them. Returns
// {depth, height, width}; the dims a 1-D or 2-D convolution lacks get `min` (stride 1, padding
// 0, dilation 1: a size-1 dim).
inline std::array<int64_t, 3> conv_spatial_arg(const char* op, const char* name, std::span<const int64_t> v,
                                               int64_t dims, int64_t min) {
  TS_SDK_CHECK(v.size() == 1 || int64_t(v.size()) == dims, TS_ERROR_VALUE, op, ": expected ", name,
               dims == 1 ? " to have 1 value" : (dims == 2 ? " to have 1 or 2 values" : " to have 1 or 3 values"),
               " (one per spatial dim, or one for all), got ", shape_text(v));
  for (int64_t x : v)
    TS_SDK_CHECK(x >= min, TS_ERROR_VALUE, op, ": expected ", name, " values >= ", min, ", got ", shape_text(v));
  std::array<int64_t, 3> r{min, min, min};
  for (int64_t i = 0; i < dims; ++i) r[size_t(3 - dims + i)] = v.size() == 1 ? v[0] : v[size_t(i)];
  return r;
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
  TS_SDK_CHECK(wd >= 3 && wd <= 5, TS_ERROR_VALUE, op,
               ": expected a 3-D weight (1-D convolution), 4-D weight (2-D convolution) or 5-D weight (3-D "
               "convolution), got ",
               wd, "-D weight of shape ", shape_text(weight.sizes()));
  const int64_t dims = wd - 2;
  const bool batched = input.dim() == dims + 2;
  TS_SDK_CHECK(batched || input.dim() == dims + 1, TS_ERROR_VALUE, op, ": expected a ", dims + 1, "-D (unbatched) or ",
               dims + 2, "-D (batched) input for ", dims, "-D convolution with weight of shape ",
               shape_text(weight.sizes()), ", got ", input.dim(), "-D input of shape ", shape_text(input.sizes()));
  TS_SDK_CHECK(groups > 0, TS_ERROR_VALUE, op, ": expected groups > 0, got ", groups);
  ConvGeometry g;
  g.spatial = dims;
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
  g.sd = s[0], g.sh = s[1], g.sw = s[2];
  g.pd = pad[0], g.ph = pad[1], g.pw = pad[2];
  g.dd = dil[0], g.dh = dil[1], g.dw = dil[2];
  // {d, h, w} of the input and kernel: the dims a 1-D or 2-D convolution lacks are 1
  std::array<int64_t, 3> in{1, 1, 1}, k{1, 1, 1};
  for (int64_t i = 0; i < dims; ++i) {
    in[size_t(3 - dims + i)] = input.size(lead + 1 + i);
    k[size_t(3 - dims + i)] = weight.size(2 + i);
  }
  g.d = in[0], g.h = in[1], g.w = in[2];
  g.kd = k[0], g.kh = k[1], g.kw = k[2];
  TS_SDK_CHECK(g.kernel_volume() > 0, TS_ERROR_VALUE, op, ": expected a non-empty kernel, got weight of shape ",
               shape_text(weight.sizes()));
  const std::array<int64_t, 3> extent{g.dd * (g.kd - 1) + 1, g.dh * (g.kh - 1) + 1, g.dw * (g.kw - 1) + 1};
  const std::array<int64_t, 3> padded{g.d + 2 * g.pd, g.h + 2 * g.ph, g.w + 2 * g.pw};
  if (padded[0] < extent[0] || padded[1] < extent[1] || padded[2] < extent[2]) {
    const std::vector<int64_t> kernel(extent.end() - dims, extent.end()), sizes(padded.end() - dims, padded.end());
    fail(TS_ERROR_VALUE, op, ": the kernel (size after dilation ", shape_text(kernel),
         ") can't be larger than the padded input (size per channel ", shape_text(sizes), "), input of shape ",
         shape_text(input.sizes()), ", weight of shape ", shape_text(weight.sizes()));
  }
  g.od = (padded[0] - extent[0]) / g.sd + 1;
  g.oh = (padded[1] - extent[1]) / g.sh + 1;
  g.ow = (padded[2] - extent[2]) / g.sw + 1;
  if (batched) g.out_shape.push_back(g.n);
  g.out_shape.push_back(g.c_out);
  const int64_t out[3] = {g.od, g.oh, g.ow};
  for (int64_t i = 3 - dims; i < 3; ++i) g.out_shape.push_back(out[i]);
  return g;
}

inline ConvGeometry conv_geometry(const char* op, const TensorRef& input, const TensorRef& weight,
                                  std::span<const int64_t> stride, std::span<const int64_t> padding,
                                  std::span<const int64_t> dilation, int64_t groups) {
  return conv_geometry(op, input.sizes(), weight, stride, padding, dilation, groups);
}

}  // namespace tessera::sdk

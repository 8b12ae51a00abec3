#pragma once
// Convolution geometry shared by the generic (im2col + GEMM) path in nn_conv.cpp and the
// oneDNN float32 path in nn_conv_onednn.cpp. A 1-D convolution is a 2-D one with H = 1.
#include "nn_conv_pool.h"

#include <cstdint>

namespace tessera::cpu {

struct ConvGeometry {
  int64_t n = 1, c_in = 0, h = 1, w = 1;  // input [n, c_in, h, w]
  int64_t c_out = 0, kh = 1, kw = 1;      // weight [c_out, c_in / groups, kh, kw]
  int64_t sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1, groups = 1;
  int64_t oh = 1, ow = 1;  // output [n, c_out, oh, ow]

  int64_t cg_in() const { return c_in / groups; }
  int64_t cg_out() const { return c_out / groups; }
  int64_t patch() const { return cg_in() * kh * kw; }  // one row of im2col per patch element
  int64_t out_plane() const { return oh * ow; }
};

// float32 through oneDNN primitives (cached by geometry). Every pointer is a dense NCHW /
// OIHW buffer; every dim of `g` is non-zero; only the forward's `bias` may be null. They
// return false, having written nothing, when oneDNN has no implementation for the geometry.
bool onednn_conv_forward(const char* op, const ConvGeometry& g, const float* x, const float* w, const float* bias,
                         float* y);
bool onednn_conv_backward(const char* op, const ConvGeometry& g, const float* grad_y, const float* x, const float* w,
                          float* grad_x, float* grad_w, float* grad_bias);

}  // namespace tessera::cpu

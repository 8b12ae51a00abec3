#pragma once
// Convolution geometry shared by the generic (im2col + GEMM) path in nn_conv.cpp and the
// oneDNN float32 path in nn_conv_onednn.cpp. A 1-D convolution is a 2-D one with H = 1.
#include "nn_conv_pool.h"

#include <tessera/sdk/conv_geometry.h>

#include <cstdint>

namespace tessera::cpu {

using ConvGeometry = sdk::ConvGeometry;  // the shape rules every device shares

// How a convolution's tensors lie in memory: activations (x, y and their gradients) NCHW, or NHWC
// for channels-last tensors (torch.channels_last); weights (and their gradient) OIHW, or OHWI for
// channels-last weights (without groups).
enum class ActivationLayout { Nchw, Nhwc };
enum class WeightLayout { Oihw, Ohwi };
struct ConvLayout {
  ActivationLayout activations = ActivationLayout::Nchw;
  WeightLayout weights = WeightLayout::Oihw;
};

// float32 through oneDNN primitives (cached by geometry and layout). Every pointer is a dense
// buffer in `layout`; every dim of `g` is non-zero; only the forward's `bias` may be null. They
// return false, having written nothing, when oneDNN has no implementation for the geometry.
bool onednn_conv_forward(const char* op, const ConvGeometry& g, ConvLayout layout, const float* x, const float* w,
                         const float* bias, float* y);
bool onednn_conv_backward(const char* op, const ConvGeometry& g, ConvLayout layout, const float* grad_y,
                          const float* x, const float* w, float* grad_x, float* grad_w, float* grad_bias);
// grad_x only (a transposed convolution's forward): zero on entry.
bool onednn_conv_backward_data(const char* op, const ConvGeometry& g, const float* grad_y, const float* w,
                               float* grad_x);

// 1x1, stride 1, unpadded, ungrouped 2-D convolutions with planes large enough, on dense NCHW
// float32, as one GEMM per sample (nn_conv_pointwise.cpp): no layout conversion.
bool pointwise_conv_applies(const ConvGeometry& g);
void pointwise_conv_forward(const char* op, const ConvGeometry& g, const float* x, const float* w, const float* bias,
                            float* y);
// Writes every element of grad_x, grad_w and grad_bias.
void pointwise_conv_backward(const char* op, const ConvGeometry& g, const float* grad_y, const float* x,
                             const float* w, float* grad_x, float* grad_w, float* grad_bias);

// Unfolds one sample and group of x [C/g, H, W] into cols [C/g * kh * kw, oh * ow], its rows `ld`
// floats apart (nn_conv.cpp's im2col, for the oneDNN path's batched weight gradient).
void im2col_float(const ConvGeometry& g, const float* x, float* cols, int64_t ld);

}  // namespace tessera::cpu

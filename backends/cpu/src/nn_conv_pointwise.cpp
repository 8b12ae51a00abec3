// Pointwise (1x1) convolutions on NCHW float32 as plain GEMMs. With a 1x1 kernel, stride 1, no
// padding and no groups, sample n's output is y[n] (C_out x HW) = W (C_out x C_in) @ x[n]
// (C_in x HW), already in NCHW. No layout conversion is needed, where oneDNN's blocked kernels
// reorder the activations into and out of their layout on every call. The backward is GEMMs too:
// grad_x[n] = W^T @ grad_y[n], grad_W = sum over n of grad_y[n] @ x[n]^T.
// ResNet-50's bottlenecks are two thirds 1x1 convolutions. At 8x256x56x56 -> 64 the forward
// took 8.1 ms through oneDNN and 3.7 ms as GEMMs. Small planes do better in oneDNN (7x7: 4.3 vs
// 5.4 ms), hence kMinPlane.
#include "kernels.h"
#include "nn_conv.h"
#include "tensor_iterator.h"

#include <algorithm>

namespace tessera::cpu {

namespace {
// Output planes smaller than this stay on oneDNN (see above; 14x14 is even, 28x28 already favours GEMMs).
constexpr int64_t kMinPlane = 28 * 28;
}  // namespace

bool pointwise_conv_applies(const ConvGeometry& g) {
  return g.spatial == 2 && g.kd == 1 && g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 &&
         g.pw == 0 && g.groups == 1 && g.n > 0 && g.c_in > 0 && g.c_out > 0 && g.out_plane() >= kMinPlane;
}

void pointwise_conv_forward(const char* op, const ConvGeometry& g, const float* x, const float* w, const float* bias,
                            float* y) {
  const int64_t hw = g.out_plane();
  for (int64_t n = 0; n < g.n; ++n) {
    float* yn = y + n * g.c_out * hw;
    if (bias) {  // the bias rows first, then the product accumulated onto them
      parallel_for(g.c_out, std::max<int64_t>(1, 32768 / hw), [&](int64_t b, int64_t e) {
        for (int64_t c = b; c < e; ++c) std::fill_n(yn + c * hw, hw, bias[c]);
      });
    }
    sgemm(op, 'N', 'N', g.c_out, hw, g.c_in, 1.0f, w, g.c_in, x + n * g.c_in * hw, hw, bias ? 1.0f : 0.0f, yn, hw);
  }
}

void pointwise_conv_backward(const char* op, const ConvGeometry& g, const float* grad_y, const float* x,
                             const float* w, float* grad_x, float* grad_w, float* grad_bias) {
  const int64_t hw = g.out_plane();
  for (int64_t n = 0; n < g.n; ++n) {
    const float* gy = grad_y + n * g.c_out * hw;
    sgemm(op, 'T', 'N', g.c_in, hw, g.c_out, 1.0f, w, g.c_in, gy, hw, 0.0f, grad_x + n * g.c_in * hw, hw);
    sgemm(op, 'N', 'T', g.c_out, g.c_in, hw, 1.0f, gy, hw, x + n * g.c_in * hw, hw, n == 0 ? 0.0f : 1.0f, grad_w,
          g.c_in);
  }
  // The bias gradient: each channel's sum over samples and pixels, in float over runs of 256
  // (vectorised), in double across them: as accurate as a double sum, at float speed.
  constexpr int64_t kRun = 256;
  parallel_for(g.c_out, 1, [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) {
      double total = 0;
      for (int64_t n = 0; n < g.n; ++n) {
        const float* row = grad_y + (n * g.c_out + c) * hw;
        for (int64_t start = 0; start < hw; start += kRun) {
          const int64_t end = std::min(hw, start + kRun);
          float run = 0;
#pragma omp simd reduction(+ : run)
          for (int64_t i = start; i < end; ++i) run += row[i];
          total += run;
        }
      }
      grad_bias[c] = float(total);
    }
  });
}

}  // namespace tessera::cpu

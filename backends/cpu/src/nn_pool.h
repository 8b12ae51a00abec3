#pragma once
// Shared by the 2-D pooling kernels (nn_pool_*.cpp): the CPU's checks over the SDK's pooling
// shape rules (tessera/sdk/pool_geometry.h). Pooling runs over the last two dims of a (C, H, W) or
// (N, C, H, W) input, one plane (n, c) at a time, planes in parallel, in NCHW or (channels-last
// inputs) NHWC.
#include "channels_last.h"
#include "nn_conv_pool.h"

#include <tessera/sdk/pool_geometry.h>

#include "strided.h"
#include "tensor_iterator.h"

#include <array>
#include <vector>

namespace tessera::cpu {

using sdk::check_pool_params;
using sdk::pooled_plane;
using sdk::pooled_size;
using sdk::PoolPlanes;

// Checks `self` (cpu, floating, 3-D or 4-D, only the batch dim may be 0) and describes it.
inline PoolPlanes pool_planes(const char* op, const sdk::TensorRef& self) {
  const sdk::TensorRef* ts[] = {&self};
  check_cpu(op, ts);
  check_floating(op, "input", self);
  return sdk::pool_input_planes(op, self);
}

// Planes per parallel task so that each task has about kGrainSize elements of work.
inline int64_t plane_grain(int64_t work_per_plane) {
  return std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, work_per_plane));
}

// The gradient checks of a pooling backward: grad_output on the cpu, of self's dtype and shape `expected`.
inline void check_grad_output(const char* op, const sdk::TensorRef& grad_out, const sdk::TensorRef& self,
                              const std::vector<int64_t>& expected) {
  const sdk::TensorRef* ts[] = {&grad_out};
  check_cpu(op, ts);
  check_same_dtype(op, "grad_output", grad_out, "self", self.dtype());
  if (grad_out.shape_vector() != expected)
    sdk::fail(TS_ERROR_VALUE, op, ": expected grad_output of shape ", strided::str(expected),
              " (the pooling's output), got ", strided::str(grad_out.sizes()));
}

// The layout a pooling runs in: a 4-D channels-last input is pooled in NHWC (its output, indices
// and backward's grad_input are channels-last too, as PyTorch's), any other as NCHW planes.
struct PoolLayout {
  bool channels_last = false;
  int64_t channels = 1;  // C, when channels_last
};

inline PoolLayout pool_layout(const sdk::TensorRef& self) {
  const bool cl = is_channels_last(self);
  return {cl, cl ? self.size(1) : 1};
}
// t dense in the layout's order (itself when it already is).
inline sdk::TensorRef dense_in(ts_call call, const sdk::TensorRef& t, const PoolLayout& layout, const char* op) {
  return layout.channels_last ? channels_last_copy(call, t, t.dtype(), op) : dense(call, t);
}
inline sdk::TensorRef empty_in(ts_call call, std::span<const int64_t> shape, int32_t dtype, const PoolLayout& layout) {
  return layout.channels_last ? empty_channels_last(call, shape, dtype) : sdk::empty(call, shape, dtype, kCpuDevice);
}

// One averaging window: the input rows [h0, h1) and columns [w0, w1) it covers, and its divisor.
struct PoolWindow {
  int64_t h0, h1, w0, w1, divisor;
};

// Averaging pools (avg, adaptive avg) in NHWC: each output pixel's C channels summed over its
// window, channels innermost (contiguous, so the compiler vectorises them); rows (n, oh) in
// parallel. window(oh, ow) gives the PoolWindow; an empty one gives 0.
template <class T, class WindowOf>
void average_pool_nhwc(int64_t N, int64_t C, int64_t H, int64_t W, int64_t OH, int64_t OW, const T* x, T* y,
                       WindowOf window) {
  using M = sdk::opmath_t<T>;
  parallel_for(N * OH, plane_grain(OW * C * 4), [&](int64_t rb, int64_t re) {
    std::vector<M> acc(static_cast<size_t>(C));
    for (int64_t row = rb; row < re; ++row) {
      const int64_t n = row / OH, oh = row % OH;
      for (int64_t ow = 0; ow < OW; ++ow) {
        const PoolWindow win = window(oh, ow);
        std::fill(acc.begin(), acc.end(), M(0));
        for (int64_t ih = win.h0; ih < win.h1; ++ih)
          for (int64_t iw = win.w0; iw < win.w1; ++iw) {
            const T* xp = x + ((n * H + ih) * W + iw) * C;
            for (int64_t c = 0; c < C; ++c) acc[size_t(c)] += M(xp[c]);
          }
        T* yp = y + ((n * OH + oh) * OW + ow) * C;
        if (win.h0 >= win.h1 || win.w0 >= win.w1) {  // only padding under the window
          std::fill_n(yp, C, T(0));
          continue;
        }
        const M divisor = M(win.divisor);
        for (int64_t c = 0; c < C; ++c) yp[c] = T(acc[size_t(c)] / divisor);
      }
    }
  });
}

// Their backward: each output's gradient / divisor added over its window (float accumulation
// for 16-bit dtypes), images n in parallel (their windows overlap only within an image).
template <class T, class WindowOf>
void average_pool_backward_nhwc(int64_t N, int64_t C, int64_t H, int64_t W, int64_t OH, int64_t OW, const T* gy,
                                T* gx, WindowOf window) {
  using M = sdk::opmath_t<T>;
  parallel_for(N, 1, [&](int64_t nb, int64_t ne) {
    std::vector<M> acc(static_cast<size_t>(H * W * C));
    for (int64_t n = nb; n < ne; ++n) {
      std::fill(acc.begin(), acc.end(), M(0));
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          const PoolWindow win = window(oh, ow);
          if (win.h0 >= win.h1 || win.w0 >= win.w1) continue;
          const T* gp = gy + ((n * OH + oh) * OW + ow) * C;
          const M divisor = M(win.divisor);
          for (int64_t ih = win.h0; ih < win.h1; ++ih)
            for (int64_t iw = win.w0; iw < win.w1; ++iw) {
              M* ap = acc.data() + (ih * W + iw) * C;
              for (int64_t c = 0; c < C; ++c) ap[c] += M(gp[c]) / divisor;
            }
        }
      T* xp = gx + n * H * W * C;
      for (int64_t i = 0; i < H * W * C; ++i) xp[i] = T(acc[size_t(i)]);
    }
  });
}

// A zero-filled tensor.
inline sdk::TensorRef zeros_like_shape(ts_call call, std::span<const int64_t> shape, int32_t dtype,
                                       const PoolLayout& layout = {}) {
  sdk::TensorRef t = empty_in(call, shape, dtype, layout);
  std::fill_n(t.data<char>(), t.numel() * t.itemsize(), char(0));  // all-zero bits are 0.0 in every float dtype
  return t;
}

}  // namespace tessera::cpu

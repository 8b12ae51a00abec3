// 2-D pooling (max with indices, avg, adaptive avg) and their backwards, one thread per
// output element (forwards) or per input element (avg backwards: a gather over the windows
// that cover it, in the CPU plugin's order, so no atomics and the same rounding). Max pooling's
// backward scatters through its indices with atomics into a float32/float64 buffer.
// Computes in float (16-bit floats, float32) or double; loads/stores convert any float dtype.
#include "device_io.cuh"
#include "nn_launch.h"

#include <cmath>

namespace tessera::gpu {
namespace {

template <class C> GPU_D C in_at(const PoolArgs& a, int64_t i) {
  return load<C>(a.in + i * itemsize_of(a.in_dtype), a.in_dtype);
}
template <class C> GPU_D void out_at(const PoolArgs& a, int64_t i, C v) {
  store<C>(a.out + i * itemsize_of(a.out_dtype), a.out_dtype, v);
}

// int64 min/max of our own: CUDA and HIP differ in which integer overloads they provide.
GPU_D int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }
GPU_D int64_t imax(int64_t a, int64_t b) { return a > b ? a : b; }

#define GRID_STRIDE(i, n) \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); i += int64_t(gridDim.x) * blockDim.x)

// The first maximum of a window wins; a NaN wins and the last NaN's index is kept (PyTorch).
template <class C> __global__ void max_forward(PoolArgs a) {
  const int64_t n = a.planes * a.oh * a.ow;
  GRID_STRIDE(i, n) {
    const int64_t ow = i % a.ow, oh = (i / a.ow) % a.oh, p = i / (a.ow * a.oh);
    int64_t h0 = oh * a.sh - a.ph, w0 = ow * a.sw - a.pw;
    const int64_t h1 = imin(h0 + int64_t(a.kh - 1) * a.dh + 1, a.h), w1 = imin(w0 + int64_t(a.kw - 1) * a.dw + 1, a.w);
    while (h0 < 0) h0 += a.dh;
    while (w0 < 0) w0 += a.dw;
    int64_t best = h0 < h1 && w0 < w1 ? h0 * a.w + w0 : -1;  // -1: a window over padding only
    C val = -C(INFINITY);
    const int64_t base = p * a.h * a.w;
    for (int64_t ih = h0; ih < h1; ih += a.dh)
      for (int64_t iw = w0; iw < w1; iw += a.dw) {
        const C v = in_at<C>(a, base + ih * a.w + iw);
        if (v > val || v != v) {
          val = v;
          best = ih * a.w + iw;
        }
      }
    out_at<C>(a, i, val);
    a.indices[i] = best;
  }
}

// out (float32/float64 of the compute type, zeroed) [p, idx] += grad_output. Indices outside
// the plane (not from max_pool2d_with_indices) are skipped rather than written out of bounds.
template <class C> __global__ void max_backward(PoolArgs a) {
  const int64_t n = a.planes * a.oh * a.ow, plane = a.h * a.w;
  C* out = reinterpret_cast<C*>(a.out);
  GRID_STRIDE(i, n) {
    const int64_t idx = a.indices[i];
    if (idx < 0 || idx >= plane) continue;
    atomicAdd(out + (i / (a.oh * a.ow)) * plane + idx, in_at<C>(a, i));
  }
}

// An avg window: rows [h0, h1), columns [w0, w1) of the input, and its divisor.
struct Window {
  int64_t h0, h1, w0, w1, divisor;
};
GPU_D Window avg_window(const PoolArgs& a, int64_t oh, int64_t ow) {
  int64_t h0 = oh * a.sh - a.ph, w0 = ow * a.sw - a.pw;
  int64_t h1 = imin(h0 + a.kh, a.h + a.ph), w1 = imin(w0 + a.kw, a.w + a.pw);
  const int64_t padded = (h1 - h0) * (w1 - w0);
  h0 = imax(h0, 0), w0 = imax(w0, 0);
  h1 = imin(h1, a.h), w1 = imin(w1, a.w);
  const int64_t divisor = a.divisor ? a.divisor : a.count_include_pad ? padded : imax(0, (h1 - h0) * (w1 - w0));
  return {h0, h1, w0, w1, divisor};
}

template <class C> __global__ void avg_forward(PoolArgs a) {
  const int64_t n = a.planes * a.oh * a.ow;
  GRID_STRIDE(i, n) {
    const int64_t ow = i % a.ow, oh = (i / a.ow) % a.oh, p = i / (a.ow * a.oh);
    const Window win = avg_window(a, oh, ow);
    if (win.h0 >= win.h1 || win.w0 >= win.w1) {  // only padding under the window
      out_at<C>(a, i, C(0));
      continue;
    }
    C sum = 0;
    const int64_t base = p * a.h * a.w;
    for (int64_t ih = win.h0; ih < win.h1; ++ih)
      for (int64_t iw = win.w0; iw < win.w1; ++iw) sum += in_at<C>(a, base + ih * a.w + iw);
    out_at<C>(a, i, sum / C(win.divisor));
  }
}

// grad_input[p, ih, iw] = sum over the windows covering (ih, iw) of grad_output / divisor.
template <class C> __global__ void avg_backward(PoolArgs a) {
  const int64_t n = a.planes * a.h * a.w;
  GRID_STRIDE(i, n) {
    const int64_t iw = i % a.w, ih = (i / a.w) % a.h, p = i / (a.w * a.h);
    // Windows start at o * s - pad and span k: those with o * s - pad <= ih < o * s - pad + k.
    const int64_t oh0 = ih + a.ph < a.kh ? 0 : (ih + a.ph - a.kh) / a.sh + 1, oh1 = imin((ih + a.ph) / a.sh + 1, a.oh);
    const int64_t ow0 = iw + a.pw < a.kw ? 0 : (iw + a.pw - a.kw) / a.sw + 1, ow1 = imin((iw + a.pw) / a.sw + 1, a.ow);
    C acc = 0;
    const int64_t base = p * a.oh * a.ow;
    for (int64_t oh = oh0; oh < oh1; ++oh)
      for (int64_t ow = ow0; ow < ow1; ++ow) {
        const Window win = avg_window(a, oh, ow);
        if (ih < win.h0 || ih >= win.h1 || iw < win.w0 || iw >= win.w1) continue;
        acc += in_at<C>(a, base + oh * a.ow + ow) / C(win.divisor);
      }
    out_at<C>(a, i, acc);
  }
}

// Adaptive cells: output o of a dim of size `out` covers input [floor(o in / out), ceil((o + 1) in / out)).
GPU_D int64_t start_index(int64_t o, int64_t out, int64_t in) { return o * in / out; }
GPU_D int64_t end_index(int64_t o, int64_t out, int64_t in) { return ((o + 1) * in + out - 1) / out; }

template <class C> __global__ void adaptive_forward(PoolArgs a) {
  const int64_t n = a.planes * a.oh * a.ow;
  GRID_STRIDE(i, n) {
    const int64_t ow = i % a.ow, oh = (i / a.ow) % a.oh, p = i / (a.ow * a.oh);
    const int64_t h0 = start_index(oh, a.oh, a.h), h1 = end_index(oh, a.oh, a.h);
    const int64_t w0 = start_index(ow, a.ow, a.w), w1 = end_index(ow, a.ow, a.w);
    C sum = 0;
    const int64_t base = p * a.h * a.w;
    for (int64_t ih = h0; ih < h1; ++ih)
      for (int64_t iw = w0; iw < w1; ++iw) sum += in_at<C>(a, base + ih * a.w + iw);
    out_at<C>(a, i, sum / C((h1 - h0) * (w1 - w0)));
  }
}

// The cells covering input row ih are [start_index(ih, H, OH), end_index(ih, H, OH)) (the
// same formula with in and out swapped); containment is checked anyway.
template <class C> __global__ void adaptive_backward(PoolArgs a) {
  const int64_t n = a.planes * a.h * a.w;
  GRID_STRIDE(i, n) {
    const int64_t iw = i % a.w, ih = (i / a.w) % a.h, p = i / (a.w * a.h);
    const int64_t oh0 = start_index(ih, a.h, a.oh), oh1 = imin(end_index(ih, a.h, a.oh), a.oh);
    const int64_t ow0 = start_index(iw, a.w, a.ow), ow1 = imin(end_index(iw, a.w, a.ow), a.ow);
    C acc = 0;
    const int64_t base = p * a.oh * a.ow;
    for (int64_t oh = oh0; oh < oh1; ++oh) {
      const int64_t h0 = start_index(oh, a.oh, a.h), h1 = end_index(oh, a.oh, a.h);
      if (ih < h0 || ih >= h1) continue;
      for (int64_t ow = ow0; ow < ow1; ++ow) {
        const int64_t w0 = start_index(ow, a.ow, a.w), w1 = end_index(ow, a.ow, a.w);
        if (iw < w0 || iw >= w1) continue;
        acc += in_at<C>(a, base + oh * a.ow + ow) / C((h1 - h0) * (w1 - w0));
      }
    }
    out_at<C>(a, i, acc);
  }
}

template <class C> void launch_typed(PoolOp op, const PoolArgs& a, gpuStream_t s) {
  const bool per_input = op == PoolOp::AvgBackward || op == PoolOp::AdaptiveBackward;
  const int64_t n = a.planes * (per_input ? a.h * a.w : a.oh * a.ow);
  if (n == 0) return;
  const unsigned grid = blocks_for(n);
  switch (op) {
    case PoolOp::MaxForward: max_forward<C><<<grid, kThreads, 0, s>>>(a); break;
    case PoolOp::MaxBackward: max_backward<C><<<grid, kThreads, 0, s>>>(a); break;
    case PoolOp::AvgForward: avg_forward<C><<<grid, kThreads, 0, s>>>(a); break;
    case PoolOp::AvgBackward: avg_backward<C><<<grid, kThreads, 0, s>>>(a); break;
    case PoolOp::AdaptiveForward: adaptive_forward<C><<<grid, kThreads, 0, s>>>(a); break;
    case PoolOp::AdaptiveBackward: adaptive_backward<C><<<grid, kThreads, 0, s>>>(a); break;
  }
  check_launch("a pooling kernel");
}
}  // namespace

void launch_pool(PoolOp op, Compute c, const PoolArgs& a, gpuStream_t s) {
  if (c == Compute::Double) launch_typed<double>(op, a, s);
  else launch_typed<float>(op, a, s);
}

}  // namespace tessera::gpu

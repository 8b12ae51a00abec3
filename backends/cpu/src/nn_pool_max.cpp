// max_pool2d_with_indices and its backward (PyTorch semantics). The first maximum of a window
// wins; a NaN counts as a maximum (it propagates). Indices are int64, flat over each plane's H * W.
#include "nn_pool.h"
#include "simd_table.h"

#include <cmath>
#include <limits>
#include <type_traits>

namespace tessera::cpu {
namespace {

using sdk::Args;
using sdk::fail;
using sdk::TensorRef;

struct MaxPool {
  PoolPlanes in;
  std::array<int64_t, 2> k, s, pad, dil, out;
  PoolLayout layout;
};

MaxPool plan_max_pool(const char* op, const TensorRef& self, const Args& a, int first, bool stride_may_be_empty) {
  MaxPool m;
  m.in = pool_planes(op, self);
  m.k = int_pair(op, "kernel_size", a.int_list(first));
  m.s = int_pair(op, "stride", a.int_list(first + 1), stride_may_be_empty ? &m.k : nullptr);
  m.pad = int_pair(op, "padding", a.int_list(first + 2));
  m.dil = int_pair(op, "dilation", a.int_list(first + 3));
  check_pool_params(op, m.k, m.s, m.pad, m.dil);
  m.out = pooled_plane(op, m.in, m.k, m.s, m.pad, m.dil, a.to_bool(first + 4));
  m.layout = pool_layout(self);
  return m;
}

// Output (oh, ow)'s window: input rows h0, h0 + dil, ... below h1, columns likewise. It holds no
// input element (possible only with dilation) when h0 >= h1 or w0 >= w1.
struct MaxWindow {
  int64_t h0, h1, w0, w1;
  bool empty() const { return h0 >= h1 || w0 >= w1; }
};
MaxWindow max_window(const MaxPool& m, int64_t oh, int64_t ow) {
  int64_t h0 = oh * m.s[0] - m.pad[0], w0 = ow * m.s[1] - m.pad[1];
  const int64_t h1 = std::min(h0 + (m.k[0] - 1) * m.dil[0] + 1, m.in.h);
  const int64_t w1 = std::min(w0 + (m.k[1] - 1) * m.dil[1] + 1, m.in.w);
  while (h0 < 0) h0 += m.dil[0];
  while (w0 < 0) w0 += m.dil[1];
  return {h0, h1, w0, w1};
}

template <class T>
void max_pool_forward(const MaxPool& m, const T* x, T* y, int64_t* idx) {
  using M = sdk::opmath_t<T>;
  const int64_t W = m.in.w, OH = m.out[0], OW = m.out[1];
  parallel_for(m.in.planes, plane_grain(OH * OW * m.k[0] * m.k[1]), [&](int64_t pb, int64_t pe) {
    for (int64_t p = pb; p < pe; ++p) {
      const T* xp = x + p * m.in.h * W;
      T* yp = y + p * OH * OW;
      int64_t* ip = idx + p * OH * OW;
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          const MaxWindow win = max_window(m, oh, ow);
          // An empty window gives -inf and index -1.
          int64_t best = win.empty() ? -1 : win.h0 * W + win.w0;
          M val = -std::numeric_limits<M>::infinity();
          for (int64_t ih = win.h0; ih < win.h1; ih += m.dil[0])
            for (int64_t iw = win.w0; iw < win.w1; iw += m.dil[1]) {
              const M v = M(xp[ih * W + iw]);
              if (v > val || std::isnan(v)) {  // as PyTorch: a NaN wins, the last NaN's index
                val = v;
                best = ih * W + iw;
              }
            }
          yp[oh * OW + ow] = T(val);
          ip[oh * OW + ow] = best;
        }
    }
  });
}

// NCHW float32 planes through the vector table (max_update), positions carried as floats (exact:
// planes under 2^24 elements). Max pooling with PyTorch's tie rule is separable when rows come
// after columns: the first maximum in row-major order lies in the first window row holding the
// window's maximum, at that row's first maximum; the last NaN lies in the last row holding one,
// at its last. So each input row is first reduced over every window's columns (contiguous
// candidates from a -inf padded copy of the row, every column start computed and the strided
// ones picked), then each output row over its window's rows. The branchy scalar kernel lost
// most of its time to mispredicted compares (8x64x112x112, 3x3 stride 2: 22 -> 5.7 ms; torch 25).
// Planes narrower than this take the scalar kernel: with few outputs a row, the vector passes
// fixed costs outweigh what they save (32x16x8x8, 2x2: 163 us vector, 49 us scalar; torch 71).
constexpr int64_t kVectorPoolMinWidth = 16;

void max_pool_forward_vector(const MaxPool& m, const float* x, float* y, int64_t* idx) {
  const simd::Table& vec = simd::vec();
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  // Rows are padded to whole vectors of the widest ISA, so max_update never takes its scalar tail
  // (the lanes past a row's end compute on -inf and are not read).
  constexpr int64_t kLanes = 16;
  auto whole_vectors = [](int64_t n) { return (n + kLanes - 1) / kLanes * kLanes; };
  const int64_t H = m.in.h, W = m.in.w, OH = m.out[0], OW = m.out[1];
  const int64_t sw = m.s[1], dw = m.dil[1], pw = m.pad[1];
  // Padded columns where some window starts (every sw-th of them), and the padded row's length.
  const int64_t starts = whole_vectors((OW - 1) * sw + 1), padded = starts + (m.k[1] - 1) * dw;
  const int64_t out_stride = whole_vectors(OW);
  std::vector<float> column(static_cast<size_t>(starts));  // the input column of padded column j
  for (int64_t j = 0; j < starts; ++j) column[size_t(j)] = float(j - pw);
  parallel_for(m.in.planes, plane_grain(OH * OW * m.k[0] * m.k[1]), [&](int64_t pb, int64_t pe) {
    std::vector<float> row(static_cast<size_t>(padded), kNegInf);
    std::vector<float> row_max(static_cast<size_t>(starts)), row_at(static_cast<size_t>(starts));
    std::vector<float> win_max(static_cast<size_t>(H * out_stride)), win_at(static_cast<size_t>(H * out_stride));
    std::vector<float> best(static_cast<size_t>(out_stride)), at(static_cast<size_t>(out_stride));
    const int64_t copy_begin = std::min(pw, padded), copy_end = std::min(pw + W, padded);
    for (int64_t p = pb; p < pe; ++p) {
      const float* xp = x + p * H * W;
      for (int64_t ih = 0; ih < H; ++ih) {  // each row's maximum over every window's columns
        std::copy(xp + ih * W, xp + ih * W + (copy_end - copy_begin), row.begin() + copy_begin);
        std::fill(row_max.begin(), row_max.end(), kNegInf);
        std::fill(row_at.begin(), row_at.end(), -1.0f);
        for (int64_t kw = 0; kw < m.k[1]; ++kw)
          vec.max_update(row_max.data(), row_at.data(), row.data() + kw * dw, column.data(), float(kw * dw), starts);
        float *win_max_row = win_max.data() + ih * out_stride, *win_at_row = win_at.data() + ih * out_stride;
        for (int64_t ow = 0; ow < OW; ++ow) {
          win_max_row[ow] = row_max[size_t(ow * sw)];
          win_at_row[ow] = row_at[size_t(ow * sw)];
        }
      }
      float* yp = y + p * OH * OW;
      int64_t* ip = idx + p * OH * OW;
      for (int64_t oh = 0; oh < OH; ++oh) {  // then over each window's rows
        const MaxWindow rows = max_window(m, oh, 0);
        std::fill(best.begin(), best.end(), kNegInf);
        std::fill(at.begin(), at.end(), -1.0f);
        for (int64_t ih = rows.h0; ih < rows.h1; ih += m.dil[0])
          vec.max_update(best.data(), at.data(), win_max.data() + ih * out_stride, win_at.data() + ih * out_stride,
                         float(ih * W), out_stride);
        for (int64_t ow = 0; ow < OW; ++ow) {
          yp[oh * OW + ow] = best[size_t(ow)];
          if (at[size_t(ow)] >= 0) {
            ip[oh * OW + ow] = int64_t(at[size_t(ow)]);
          } else {  // no element above -inf: the window's first element, as the scalar kernel (-1 if empty)
            const MaxWindow win = max_window(m, oh, ow);
            ip[oh * OW + ow] = win.empty() ? -1 : win.h0 * W + win.w0;
          }
        }
      }
    }
  });
}

// NHWC: each output pixel's C channels at once, channels innermost: branch-free selects over
// float maxima and positions of type P (int32 when the plane allows: equal widths, so the
// compiler vectorises them); rows (n, oh) in parallel.
template <class T, class P>
void max_pool_forward_nhwc(const MaxPool& m, const T* x, T* y, int64_t* idx) {
  using M = sdk::opmath_t<T>;
  const int64_t C = m.layout.channels, N = m.in.planes / C, H = m.in.h, W = m.in.w, OH = m.out[0], OW = m.out[1];
  parallel_for(N * OH, plane_grain(OW * C * m.k[0] * m.k[1]), [&](int64_t rb, int64_t re) {
    std::vector<M> best_buffer(static_cast<size_t>(C));
    std::vector<P> at_buffer(static_cast<size_t>(C));
    M* __restrict best = best_buffer.data();
    P* __restrict best_at = at_buffer.data();
    for (int64_t row = rb; row < re; ++row) {
      const int64_t n = row / OH, oh = row % OH;
      for (int64_t ow = 0; ow < OW; ++ow) {
        const MaxWindow win = max_window(m, oh, ow);
        std::fill_n(best, C, -std::numeric_limits<M>::infinity());
        std::fill_n(best_at, C, P(win.empty() ? -1 : win.h0 * W + win.w0));  // as the plane kernel
        for (int64_t ih = win.h0; ih < win.h1; ih += m.dil[0])
          for (int64_t iw = win.w0; iw < win.w1; iw += m.dil[1]) {
            const T* __restrict xp = x + ((n * H + ih) * W + iw) * C;
            const P at = P(ih * W + iw);
            for (int64_t c = 0; c < C; ++c) {
              const M v = M(xp[c]);
              const bool take = v > best[c] || v != v;  // a NaN wins, the last NaN's index
              best[c] = take ? v : best[c];
              best_at[c] = take ? at : best_at[c];
            }
          }
        const int64_t o = ((n * OH + oh) * OW + ow) * C;
        for (int64_t c = 0; c < C; ++c) y[o + c] = T(best[c]);
        for (int64_t c = 0; c < C; ++c) idx[o + c] = best_at[c];
      }
    }
  });
}

template <class T>
void max_pool_backward(const char* op, const MaxPool& m, const T* gy, const int64_t* idx, T* gx) {
  using M = sdk::opmath_t<T>;
  const int64_t HW = m.in.h * m.in.w, O = m.out[0] * m.out[1];
  parallel_for(m.in.planes, plane_grain(O), [&](int64_t pb, int64_t pe) {
    for (int64_t p = pb; p < pe; ++p)
      for (int64_t o = 0; o < O; ++o) {
        const int64_t i = idx[p * O + o];
        if (i == -1) continue;  // an empty window (see the forward)
        if (i < 0 || i >= HW)
          fail(TS_ERROR_INDEX, op, ": index ", i, " in indices is out of range for an input plane of ", m.in.h, "x",
               m.in.w, " (expected indices in [0, ", HW, "))");
        gx[p * HW + i] = T(M(gx[p * HW + i]) + M(gy[p * O + o]));
      }
  });
}

// NHWC backward: each output pixel's C gradients added at their indices, reading gradients and
// indices contiguously; images in parallel (the windows of an image overlap, images do not).
template <class T>
void max_pool_backward_nhwc(const char* op, const MaxPool& m, const T* gy, const int64_t* idx, T* gx) {
  using M = sdk::opmath_t<T>;
  const int64_t C = m.layout.channels, N = m.in.planes / C, HW = m.in.h * m.in.w, O = m.out[0] * m.out[1];
  parallel_for(N, 1, [&](int64_t nb, int64_t ne) {
    for (int64_t n = nb; n < ne; ++n) {
      T* xp = gx + n * HW * C;
      for (int64_t o = 0; o < O; ++o) {
        const int64_t* ip = idx + (n * O + o) * C;
        const T* gp = gy + (n * O + o) * C;
        for (int64_t c = 0; c < C; ++c) {
          const int64_t i = ip[c];
          if (i == -1) continue;  // an empty window (see the forward)
          if (i < 0 || i >= HW)
            fail(TS_ERROR_INDEX, op, ": index ", i, " in indices is out of range for an input plane of ", m.in.h,
                 "x", m.in.w, " (expected indices in [0, ", HW, "))");
          xp[i * C + c] = T(M(xp[i * C + c]) + M(gp[c]));
        }
      }
    }
  });
}

// max_pool2d_with_indices(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0,
//                         int[2] dilation=1, bool ceil_mode=False) -> (Tensor, Tensor)
void max_pool2d_kernel(Args& a) {
  const char* op = "max_pool2d_with_indices";
  TensorRef self = a.tensor(0);
  const MaxPool m = plan_max_pool(op, self, a, 1, true);
  const TensorRef x = dense_in(a.call(), self, m.layout, op);
  const std::vector<int64_t> shape = m.in.shape(m.out[0], m.out[1]);
  TensorRef y = empty_in(a.call(), shape, self.dtype(), m.layout);
  TensorRef idx = empty_in(a.call(), shape, TS_INT64, m.layout);
  const bool int32_positions = m.in.h * m.in.w <= std::numeric_limits<int32_t>::max();
  TS_DISPATCH_FLOAT(self.dtype(), fail(TS_ERROR_TYPE, op, ": unsupported dtype"), {
    scalar_t* yp = y.data<scalar_t>();
    if (!m.layout.channels_last && std::is_same_v<scalar_t, float> && m.in.w >= kVectorPoolMinWidth &&
        m.in.h * m.in.w < (int64_t(1) << 24))
      max_pool_forward_vector(m, reinterpret_cast<const float*>(x.data<scalar_t>()), reinterpret_cast<float*>(yp),
                              idx.data<int64_t>());
    else if (!m.layout.channels_last)
      max_pool_forward<scalar_t>(m, x.data<scalar_t>(), yp, idx.data<int64_t>());
    else if (int32_positions)
      max_pool_forward_nhwc<scalar_t, int32_t>(m, x.data<scalar_t>(), yp, idx.data<int64_t>());
    else
      max_pool_forward_nhwc<scalar_t, int64_t>(m, x.data<scalar_t>(), yp, idx.data<int64_t>());
  });
  a.returns({Args::tensor_value(std::move(y)), Args::tensor_value(std::move(idx))});
}

// max_pool2d_with_indices_backward(Tensor grad_output, Tensor self, int[2] kernel_size, int[2] stride,
//                                  int[2] padding, int[2] dilation, bool ceil_mode, Tensor indices) -> Tensor
void max_pool2d_backward_kernel(Args& a) {
  const char* op = "max_pool2d_with_indices_backward";
  TensorRef grad_out = a.tensor(0), self = a.tensor(1), indices = a.tensor(7);
  const MaxPool m = plan_max_pool(op, self, a, 2, true);
  const std::vector<int64_t> shape = m.in.shape(m.out[0], m.out[1]);
  check_grad_output(op, grad_out, self, shape);
  const TensorRef* ts[] = {&indices};
  check_cpu(op, ts);
  if (indices.dtype() != TS_INT64)
    fail(TS_ERROR_TYPE, op, ": expected indices of dtype int64, got ", sdk::dtype_name(indices.dtype()));
  if (indices.shape_vector() != shape)
    fail(TS_ERROR_VALUE, op, ": expected indices of shape ", strided::str(shape), " (like grad_output), got ",
         strided::str(indices.sizes()));
  const TensorRef gy = dense_in(a.call(), grad_out, m.layout, op);
  const TensorRef idx = dense_in(a.call(), indices, m.layout, op);
  TensorRef gx = zeros_like_shape(a.call(), self.sizes(), self.dtype(), m.layout);
  TS_DISPATCH_FLOAT(self.dtype(), fail(TS_ERROR_TYPE, op, ": unsupported dtype"), {
    if (m.layout.channels_last)
      max_pool_backward_nhwc<scalar_t>(op, m, gy.data<scalar_t>(), idx.data<int64_t>(), gx.data<scalar_t>());
    else
      max_pool_backward<scalar_t>(op, m, gy.data<scalar_t>(), idx.data<int64_t>(), gx.data<scalar_t>());
  });
  a.return_tensor(std::move(gx));
}

}  // namespace

void register_max_pool_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("max_pool2d_with_indices", key, max_pool2d_kernel);
  reg.kernel("max_pool2d_with_indices_backward", key, max_pool2d_backward_kernel);
}

}  // namespace tessera::cpu

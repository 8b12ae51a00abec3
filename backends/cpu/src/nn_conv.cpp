// convolution and convolution_backward (PyTorch semantics): 1-D, 2-D and 3-D, batched or not,
// with stride, padding, dilation and groups.
//
// float32 runs on oneDNN (nn_conv_onednn.cpp); float64 (what gradcheck uses) on a plain path:
// per sample and group, im2col unfolds the input into a [C/g * kd * kh * kw, od * oh * ow] matrix and a
// blocked GEMM multiplies the weights by it. float16 / bfloat16 compute in float32.
#include "nn_conv.h"

#include "channels_last.h"
#include "strided.h"
#include "tensor_iterator.h"

#include <algorithm>
#include <vector>

namespace tessera::cpu {
namespace {

using sdk::Args;
using sdk::fail;
using sdk::TensorRef;
using strided::str;

// ---- geometry and checks

void check_operands(const char* op, const TensorRef& input, const TensorRef& weight) {
  const TensorRef* ts[] = {&input, &weight};
  check_cpu(op, ts);
  check_floating(op, "input", input);
  check_same_dtype(op, "weight", weight, "input", input.dtype());
}

// The dtype a convolution computes in.
int32_t compute_dtype(int32_t dtype) { return dtype == TS_FLOAT64 ? TS_FLOAT64 : TS_FLOAT32; }

// Dense, in the compute dtype.
TensorRef prepared(ts_call call, const TensorRef& t, const char* op) {
  return dense(call, to_dtype(call, t, compute_dtype(t.dtype()), op));
}

void fill_zeros(TensorRef& t) {
  std::fill_n(t.data<char>(), t.numel() * t.itemsize(), char(0));  // all-zero bits are 0.0
}

// ---- channels-last (NHWC) activations (channels_last.h)

// As PyTorch: a 2-D convolution whose input or weight is channels-last works and answers in NHWC.
// (A 4-D input is also an unbatched 3-D convolution's; that one is NCDHW.)
ActivationLayout layout_of(const ConvGeometry& g, const TensorRef& input, const TensorRef& weight) {
  if (g.spatial != 2) return ActivationLayout::Nchw;
  return is_channels_last(input) || is_channels_last(weight) ? ActivationLayout::Nhwc : ActivationLayout::Nchw;
}

// An empty activation tensor of `shape` in `layout`.
TensorRef empty_activation(ts_call call, std::span<const int64_t> shape, int32_t dtype, ActivationLayout layout) {
  if (layout == ActivationLayout::Nchw || shape.size() != 4) return sdk::empty(call, shape, dtype, kCpuDevice);
  return empty_channels_last(call, shape, dtype);
}

// t in the compute dtype, dense in `layout` (a copy unless it already is).
TensorRef prepared_as(ts_call call, const TensorRef& t, ActivationLayout layout, const char* op) {
  if (layout == ActivationLayout::Nchw) return prepared(call, t, op);
  return channels_last_copy(call, t, compute_dtype(t.dtype()), op);
}

// The layout of an NHWC convolution: OHWI weights when the weight is channels-last too (read and
// its gradient written in place; oneDNN has no grouped OHWI), else dense OIHW ones.
ConvLayout nhwc_layout(const ConvGeometry& g, const TensorRef& weight) {
  const bool ohwi = g.groups == 1 && is_channels_last(weight);
  return {ActivationLayout::Nhwc, ohwi ? WeightLayout::Ohwi : WeightLayout::Oihw};
}

TensorRef prepared_weight(ts_call call, const TensorRef& weight, ConvLayout layout, const char* op) {
  return layout.weights == WeightLayout::Ohwi ? prepared_as(call, weight, ActivationLayout::Nhwc, op)
                                              : prepared(call, weight, op);
}

// `result` (NCHW, from the generic path) laid out in `layout`.
TensorRef in_layout(ts_call call, const TensorRef& result, ActivationLayout layout, const char* op) {
  if (layout == ActivationLayout::Nchw || result.dim() != 4) return result;
  return channels_last_copy(call, result, result.dtype(), op);
}

// ---- the generic path

// cols[(c, a, i, j), (od, oh, ow)] = x[c, od * sd - pd + a * dd, oh * sh - ph + i * dh,
// ow * sw - pw + j * dw] (0 in the padding); cols' rows are `ld` apart (the output's plane size
// when they are packed). 1-D and 2-D convolutions have kd = od = 1 (and kh = oh = 1 for 1-D).
template <class T>
void im2col(const ConvGeometry& g, const T* x, T* cols, int64_t ld) {
  const int64_t out_slice = g.oh * g.ow;
  for (int64_t c = 0; c < g.cg_in(); ++c)
    for (int64_t a = 0; a < g.kd; ++a)
      for (int64_t i = 0; i < g.kh; ++i)
        for (int64_t j = 0; j < g.kw; ++j) {
          T* row = cols + (((c * g.kd + a) * g.kh + i) * g.kw + j) * ld;
          for (int64_t od = 0; od < g.od; ++od) {
            const int64_t id = od * g.sd - g.pd + a * g.dd;
            T* slice = row + od * out_slice;
            if (id < 0 || id >= g.d) {
              std::fill_n(slice, out_slice, T(0));
              continue;
            }
            const T* xs = x + (c * g.d + id) * g.h * g.w;
            for (int64_t oh = 0; oh < g.oh; ++oh) {
              T* r = slice + oh * g.ow;
              const int64_t ih = oh * g.sh - g.ph + i * g.dh;
              if (ih < 0 || ih >= g.h) {
                std::fill_n(r, g.ow, T(0));
                continue;
              }
              const T* xr = xs + ih * g.w;
              for (int64_t ow = 0; ow < g.ow; ++ow) {
                const int64_t iw = ow * g.sw - g.pw + j * g.dw;
                r[ow] = iw >= 0 && iw < g.w ? xr[iw] : T(0);
              }
            }
          }
        }
}

}  // namespace

void im2col_float(const ConvGeometry& g, const float* x, float* cols, int64_t ld) { im2col(g, x, cols, ld); }

namespace {

// The adjoint of im2col: x += fold(cols).
template <class T>
void col2im(const ConvGeometry& g, const T* cols, T* x) {
  const int64_t P = g.out_plane(), out_slice = g.oh * g.ow;
  for (int64_t c = 0; c < g.cg_in(); ++c)
    for (int64_t a = 0; a < g.kd; ++a)
      for (int64_t i = 0; i < g.kh; ++i)
        for (int64_t j = 0; j < g.kw; ++j) {
          const T* row = cols + (((c * g.kd + a) * g.kh + i) * g.kw + j) * P;
          for (int64_t od = 0; od < g.od; ++od) {
            const int64_t id = od * g.sd - g.pd + a * g.dd;
            if (id < 0 || id >= g.d) continue;
            T* xs = x + (c * g.d + id) * g.h * g.w;
            for (int64_t oh = 0; oh < g.oh; ++oh) {
              const int64_t ih = oh * g.sh - g.ph + i * g.dh;
              if (ih < 0 || ih >= g.h) continue;
              const T* r = row + od * out_slice + oh * g.ow;
              T* xr = xs + ih * g.w;
              for (int64_t ow = 0; ow < g.ow; ++ow) {
                const int64_t iw = ow * g.sw - g.pw + j * g.dw;
                if (iw >= 0 && iw < g.w) xr[iw] += r[ow];
              }
            }
          }
        }
}

// C[M, N] += A[M, K] @ B[K, N]; A(i, k) = a[i * ars + k * acs], B and C row-major. i-k-j
// order keeps the inner loop on contiguous rows (it vectorises); blocks keep B's panel in cache.
template <class T>
void gemm_acc(int64_t M, int64_t N, int64_t K, const T* a, int64_t ars, int64_t acs, const T* b, T* c) {
  constexpr int64_t kBlockK = 64, kBlockN = 256;
  for (int64_t k0 = 0; k0 < K; k0 += kBlockK) {
    const int64_t k1 = std::min(K, k0 + kBlockK);
    for (int64_t j0 = 0; j0 < N; j0 += kBlockN) {
      const int64_t j1 = std::min(N, j0 + kBlockN);
      for (int64_t i = 0; i < M; ++i) {
        T* crow = c + i * N;
        for (int64_t k = k0; k < k1; ++k) {
          const T aik = a[i * ars + k * acs];
          const T* brow = b + k * N;
          for (int64_t j = j0; j < j1; ++j) crow[j] += aik * brow[j];
        }
      }
    }
  }
}

// C[M, N] += A[M, K] @ B[N, K]^T, all row-major: dot products of rows.
template <class T>
void gemm_nt_acc(int64_t M, int64_t N, int64_t K, const T* a, const T* b, T* c) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      const T* ar = a + i * K;
      const T* br = b + j * K;
      T s0 = 0, s1 = 0, s2 = 0, s3 = 0;  // four chains: no dependency stall on each add
      int64_t k = 0;
      for (; k + 4 <= K; k += 4) {
        s0 += ar[k] * br[k];
        s1 += ar[k + 1] * br[k + 1];
        s2 += ar[k + 2] * br[k + 2];
        s3 += ar[k + 3] * br[k + 3];
      }
      for (; k < K; ++k) s0 += ar[k] * br[k];
      c[i * N + j] += (s0 + s1) + (s2 + s3);
    }
}

template <class T>
void forward_generic(const ConvGeometry& g, const T* x, const T* w, const T* bias, T* y) {
  const int64_t P = g.out_plane(), K = g.patch(), cgo = g.cg_out();
  const int64_t plane_in = g.cg_in() * g.in_plane();
  parallel_for(g.n * g.groups, 1, [&](int64_t tb, int64_t te) {
    std::vector<T> cols(size_t(K * P));
    for (int64_t t = tb; t < te; ++t) {
      const int64_t n = t / g.groups, gi = t % g.groups;
      T* yg = y + (n * g.c_out + gi * cgo) * P;
      for (int64_t oc = 0; oc < cgo; ++oc) std::fill_n(yg + oc * P, P, bias ? bias[gi * cgo + oc] : T(0));
      im2col(g, x + (n * g.groups + gi) * plane_in, cols.data(), P);
      gemm_acc(cgo, P, K, w + gi * cgo * K, K, 1, cols.data(), yg);
    }
  });
}

// grad_x and grad_w (both zero on entry) and grad_bias. Samples are split into fixed chunks,
// each with its own grad_w partial, summed in chunk order (deterministic for a thread count).
template <class T>
void backward_generic(const ConvGeometry& g, const T* gy, const T* x, const T* w, T* gx, T* gw, T* gb) {
  const int64_t P = g.out_plane(), K = g.patch(), cgo = g.cg_out();
  const int64_t plane_in = g.cg_in() * g.in_plane(), wsize = g.c_out * K;
  const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(max_threads(), g.n));
  std::vector<std::vector<T>> partial(static_cast<size_t>(chunks));
  parallel_for(chunks, 1, [&](int64_t cb, int64_t ce) {
    std::vector<T> cols(size_t(K * P)), gcols(size_t(K * P));
    for (int64_t c = cb; c < ce; ++c) {
      std::vector<T>& acc = partial[size_t(c)];
      acc.assign(size_t(wsize), T(0));
      for (int64_t n = g.n * c / chunks; n < g.n * (c + 1) / chunks; ++n)
        for (int64_t gi = 0; gi < g.groups; ++gi) {
          const T* gyg = gy + (n * g.c_out + gi * cgo) * P;
          const T* wg = w + gi * cgo * K;
          im2col(g, x + (n * g.groups + gi) * plane_in, cols.data(), P);
          gemm_nt_acc(cgo, K, P, gyg, cols.data(), acc.data() + gi * cgo * K);
          std::fill(gcols.begin(), gcols.end(), T(0));
          gemm_acc(K, P, cgo, wg, 1, K, gyg, gcols.data());  // W_g^T @ gy_g
          col2im(g, gcols.data(), gx + (n * g.groups + gi) * plane_in);
        }
    }
  });
  for (const auto& acc : partial)
    for (int64_t i = 0; i < wsize; ++i) gw[i] += acc[size_t(i)];
  for (int64_t oc = 0; oc < g.c_out; ++oc) {
    T s = 0;
    for (int64_t n = 0; n < g.n; ++n) {
      const T* r = gy + (n * g.c_out + oc) * P;
      for (int64_t p = 0; p < P; ++p) s += r[p];
    }
    gb[oc] = s;
  }
}

// grad_x (zero on entry) alone: a transposed convolution's forward.
template <class T>
void backward_data_generic(const ConvGeometry& g, const T* gy, const T* w, T* gx) {
  const int64_t P = g.out_plane(), K = g.patch(), cgo = g.cg_out();
  const int64_t plane_in = g.cg_in() * g.in_plane();
  parallel_for(g.n * g.groups, 1, [&](int64_t tb, int64_t te) {
    std::vector<T> gcols(size_t(K * P));
    for (int64_t t = tb; t < te; ++t) {
      const int64_t n = t / g.groups, gi = t % g.groups;
      std::fill(gcols.begin(), gcols.end(), T(0));
      gemm_acc(K, P, cgo, w + gi * cgo * K, 1, K, gy + (n * g.c_out + gi * cgo) * P, gcols.data());  // W_g^T @ gy_g
      col2im(g, gcols.data(), gx + (n * g.groups + gi) * plane_in);
    }
  });
}

// Calls f(T{}) with T the C type of a compute dtype (float32 or float64).
template <class F>
void with_compute_type(int32_t dtype, F&& f) {
  if (dtype == TS_FLOAT64) f(double{});
  else f(float{});
}

// oneDNN needs every dim non-zero; empty problems take the generic path.
bool use_onednn(const ConvGeometry& g, int32_t dtype) {
  return dtype == TS_FLOAT32 && g.n > 0 && g.c_in > 0 && g.c_out > 0;
}

// ---- kernels

// convolution(Tensor input, Tensor weight, Tensor? bias, int[] stride, int[] padding, int[] dilation, int groups)
void convolution_kernel(Args& a) {
  const char* op = "convolution";
  TensorRef input = a.tensor(0), weight = a.tensor(1);
  std::optional<TensorRef> bias = a.optional_tensor(2);
  check_operands(op, input, weight);
  const ConvGeometry g = sdk::conv_geometry(op, input, weight, a.int_list(3), a.int_list(4), a.int_list(5), a.to_int(6));
  if (bias) {
    const TensorRef* ts[] = {&*bias};
    check_cpu(op, ts);
    check_same_dtype(op, "bias", *bias, "input", input.dtype());
    if (bias->dim() != 1 || bias->size(0) != g.c_out)
      fail(TS_ERROR_VALUE, op, ": expected bias of shape [", g.c_out, "] (the weight's out channels), got ",
           str(bias->sizes()));
  }
  const int32_t dtype = input.dtype(), cdt = compute_dtype(dtype);
  const ActivationLayout layout = layout_of(g, input, weight);
  TensorRef b = bias ? prepared(a.call(), *bias, op) : TensorRef();
  if (layout == ActivationLayout::Nhwc && use_onednn(g, cdt) && g.out_plane() > 0) {
    const ConvLayout cl = nhwc_layout(g, weight);
    TensorRef x = prepared_as(a.call(), input, layout, op), w = prepared_weight(a.call(), weight, cl, op);
    TensorRef y = empty_activation(a.call(), g.out_shape, cdt, layout);
    if (onednn_conv_forward(op, g, cl, x.data<float>(), w.data<float>(), b.defined() ? b.data<float>() : nullptr,
                            y.data<float>()))
      return a.return_tensor(to_dtype(a.call(), y, dtype, op));
  }
  TensorRef x = prepared(a.call(), input, op), w = prepared(a.call(), weight, op);
  TensorRef y = sdk::empty(a.call(), g.out_shape, cdt, kCpuDevice);
  if (y.numel() > 0 && cdt == TS_FLOAT32 && pointwise_conv_applies(g)) {
    pointwise_conv_forward(op, g, x.data<float>(), w.data<float>(), b.defined() ? b.data<float>() : nullptr,
                           y.data<float>());
  } else if (y.numel() > 0) {
    if (!use_onednn(g, cdt) ||
        !onednn_conv_forward(op, g, ConvLayout{}, x.data<float>(), w.data<float>(),
                             b.defined() ? b.data<float>() : nullptr, y.data<float>())) {
      with_compute_type(cdt, [&](auto zero) {
        using T = decltype(zero);
        forward_generic<T>(g, x.data<T>(), w.data<T>(), b.defined() ? b.data<T>() : nullptr, y.data<T>());
      });
    }
  }
  a.return_tensor(to_dtype(a.call(), in_layout(a.call(), y, layout, op), dtype, op));
}

// convolution_backward(Tensor grad_output, Tensor input, Tensor weight, int[] stride, int[] padding,
//                      int[] dilation, int groups) -> (grad_input, grad_weight, grad_bias)
void convolution_backward_kernel(Args& a) {
  const char* op = "convolution_backward";
  TensorRef grad_out = a.tensor(0), input = a.tensor(1), weight = a.tensor(2);
  check_operands(op, input, weight);
  {
    const TensorRef* ts[] = {&grad_out};
    check_cpu(op, ts);
  }
  check_same_dtype(op, "grad_output", grad_out, "input", input.dtype());
  const ConvGeometry g = sdk::conv_geometry(op, input, weight, a.int_list(3), a.int_list(4), a.int_list(5), a.to_int(6));
  if (grad_out.shape_vector() != g.out_shape)
    fail(TS_ERROR_VALUE, op, ": expected grad_output of shape ", str(g.out_shape),
         " (the convolution's output), got ", str(grad_out.sizes()));
  const int32_t dtype = input.dtype(), cdt = compute_dtype(dtype);
  const ActivationLayout layout = layout_of(g, input, weight);
  if (layout == ActivationLayout::Nhwc && use_onednn(g, cdt) && g.out_plane() > 0) {
    const ConvLayout cl = nhwc_layout(g, weight);
    TensorRef gy = prepared_as(a.call(), grad_out, layout, op), x = prepared_as(a.call(), input, layout, op);
    TensorRef w = prepared_weight(a.call(), weight, cl, op);
    TensorRef gx = empty_activation(a.call(), input.sizes(), cdt, layout);
    // the weight's gradient in the weight's layout, as PyTorch's
    TensorRef gw = empty_activation(a.call(), weight.sizes(), cdt,
                                    cl.weights == WeightLayout::Ohwi ? ActivationLayout::Nhwc : ActivationLayout::Nchw);
    const int64_t bias_shape[1] = {g.c_out};
    TensorRef gb = sdk::empty(a.call(), bias_shape, cdt, kCpuDevice);
    if (onednn_conv_backward(op, g, cl, gy.data<float>(), x.data<float>(), w.data<float>(), gx.data<float>(),
                             gw.data<float>(), gb.data<float>()))
      return a.returns({Args::tensor_value(to_dtype(a.call(), gx, dtype, op)),
                        Args::tensor_value(to_dtype(a.call(), gw, dtype, op)),
                        Args::tensor_value(to_dtype(a.call(), gb, dtype, op))});
  }
  TensorRef gy = prepared(a.call(), grad_out, op), x = prepared(a.call(), input, op),
            w = prepared(a.call(), weight, op);
  // oneDNN writes every element; the generic path accumulates into zeros.
  TensorRef gx = sdk::empty(a.call(), input.sizes(), cdt, kCpuDevice),
            gw = sdk::empty(a.call(), weight.sizes(), cdt, kCpuDevice);
  const int64_t bias_shape[1] = {g.c_out};
  TensorRef gb = sdk::empty(a.call(), bias_shape, cdt, kCpuDevice);
  if (cdt == TS_FLOAT32 && pointwise_conv_applies(g)) {
    pointwise_conv_backward(op, g, gy.data<float>(), x.data<float>(), w.data<float>(), gx.data<float>(),
                            gw.data<float>(), gb.data<float>());
  } else if (!use_onednn(g, cdt) || !onednn_conv_backward(op, g, ConvLayout{}, gy.data<float>(), x.data<float>(),
                                                     w.data<float>(), gx.data<float>(), gw.data<float>(),
                                                     gb.data<float>())) {
    for (TensorRef* t : {&gx, &gw, &gb}) fill_zeros(*t);
    with_compute_type(cdt, [&](auto zero) {
      using T = decltype(zero);
      backward_generic<T>(g, gy.data<T>(), x.data<T>(), w.data<T>(), gx.data<T>(), gw.data<T>(), gb.data<T>());
    });
  }
  a.returns({Args::tensor_value(to_dtype(a.call(), in_layout(a.call(), gx, layout, op), dtype, op)),
             Args::tensor_value(to_dtype(a.call(), gw, dtype, op)),
             Args::tensor_value(to_dtype(a.call(), gb, dtype, op))});
}

// convolution_backward_input(Tensor grad_output, Tensor weight, int[] input_size, int[] stride,
//   int[] padding, int[] dilation, int groups) -> grad_input: the gradient of a convolution with
// respect to its input, alone; a transposed convolution's forward.
void convolution_backward_input_kernel(Args& a) {
  const char* op = "convolution_backward_input";
  TensorRef grad_out = a.tensor(0), weight = a.tensor(1);
  const std::span<const int64_t> input_size = a.int_list(2);
  {
    const TensorRef* ts[] = {&grad_out, &weight};
    check_cpu(op, ts);
  }
  check_floating(op, "grad_output", grad_out);
  check_same_dtype(op, "weight", weight, "grad_output", grad_out.dtype());
  for (int64_t s : input_size)
    if (s < 0) fail(TS_ERROR_VALUE, op, ": expected a non-negative input_size, got ", str(input_size));
  const ConvGeometry g = sdk::conv_geometry(op, input_size, weight, a.int_list(3), a.int_list(4), a.int_list(5),
                                            a.to_int(6));
  if (grad_out.shape_vector() != g.out_shape)
    fail(TS_ERROR_VALUE, op, ": expected grad_output of shape ", str(g.out_shape), " (the output of a convolution of an ",
         str(input_size), " input), got ", str(grad_out.sizes()));
  const int32_t dtype = grad_out.dtype(), cdt = compute_dtype(dtype);
  TensorRef gy = prepared(a.call(), grad_out, op), w = prepared(a.call(), weight, op);
  TensorRef gx = sdk::empty(a.call(), input_size, cdt, kCpuDevice);
  const bool empty = gx.numel() == 0 || gy.numel() == 0;
  const bool by_onednn = !empty && use_onednn(g, cdt) &&
                         onednn_conv_backward_data(op, g, gy.data<float>(), w.data<float>(), gx.data<float>());
  if (!by_onednn) {
    fill_zeros(gx);  // the generic path accumulates; an empty grad_output leaves zeros
    if (!empty)
      with_compute_type(cdt, [&](auto zero) {
        using T = decltype(zero);
        backward_data_generic<T>(g, gy.data<T>(), w.data<T>(), gx.data<T>());
      });
  }
  a.return_tensor(to_dtype(a.call(), gx, dtype, op));
}

}  // namespace

void register_conv_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("convolution", key, convolution_kernel);
  reg.kernel("convolution_backward", key, convolution_backward_kernel);
  reg.kernel("convolution_backward_input", key, convolution_backward_input_kernel);
}

}  // namespace tessera::cpu

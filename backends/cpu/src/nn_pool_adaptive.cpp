// adaptive_avg_pool2d and its backward (PyTorch semantics): output cell o of a dim of size
// `out` averages input [floor(o * in / out), ceil((o + 1) * in / out)).
#include "nn_pool.h"

namespace tessera::cpu {
namespace {

using sdk::Args;
using sdk::fail;
using sdk::TensorRef;

int64_t start_index(int64_t o, int64_t out, int64_t in) { return o * in / out; }
int64_t end_index(int64_t o, int64_t out, int64_t in) { return ((o + 1) * in + out - 1) / out; }

// Output cell (oh, ow)'s window over an H x W plane pooled to OH x OW.
auto adaptive_window(int64_t H, int64_t W, int64_t OH, int64_t OW) {
  return [=](int64_t oh, int64_t ow) {
    const int64_t h0 = start_index(oh, OH, H), h1 = end_index(oh, OH, H);
    const int64_t w0 = start_index(ow, OW, W), w1 = end_index(ow, OW, W);
    return PoolWindow{h0, h1, w0, w1, (h1 - h0) * (w1 - w0)};
  };
}

template <class T>
void adaptive_forward(const PoolPlanes& in, int64_t OH, int64_t OW, const T* x, T* y) {
  using M = sdk::opmath_t<T>;
  const int64_t H = in.h, W = in.w;
  parallel_for(in.planes, plane_grain(std::max(H * W, OH * OW)), [&](int64_t pb, int64_t pe) {
    for (int64_t p = pb; p < pe; ++p) {
      const T* xp = x + p * H * W;
      T* yp = y + p * OH * OW;
      for (int64_t oh = 0; oh < OH; ++oh) {
        const int64_t h0 = start_index(oh, OH, H), h1 = end_index(oh, OH, H);
        for (int64_t ow = 0; ow < OW; ++ow) {
          const int64_t w0 = start_index(ow, OW, W), w1 = end_index(ow, OW, W);
          M sum = 0;
          for (int64_t ih = h0; ih < h1; ++ih)
            for (int64_t iw = w0; iw < w1; ++iw) sum += M(xp[ih * W + iw]);
          yp[oh * OW + ow] = T(sum / M((h1 - h0) * (w1 - w0)));
        }
      }
    }
  });
}

template <class T>
void adaptive_backward(const PoolPlanes& in, int64_t OH, int64_t OW, const T* gy, T* gx) {
  using M = sdk::opmath_t<T>;
  const int64_t H = in.h, W = in.w;
  parallel_for(in.planes, plane_grain(std::max(H * W, OH * OW)), [&](int64_t pb, int64_t pe) {
    std::vector<M> acc(size_t(H * W));  // 16-bit gradients accumulate in float
    for (int64_t p = pb; p < pe; ++p) {
      std::fill(acc.begin(), acc.end(), M(0));
      const T* gp = gy + p * OH * OW;
      for (int64_t oh = 0; oh < OH; ++oh) {
        const int64_t h0 = start_index(oh, OH, H), h1 = end_index(oh, OH, H);
        for (int64_t ow = 0; ow < OW; ++ow) {
          const int64_t w0 = start_index(ow, OW, W), w1 = end_index(ow, OW, W);
          const M g = M(gp[oh * OW + ow]) / M((h1 - h0) * (w1 - w0));
          for (int64_t ih = h0; ih < h1; ++ih)
            for (int64_t iw = w0; iw < w1; ++iw) acc[size_t(ih * W + iw)] += g;
        }
      }
      T* xp = gx + p * H * W;
      for (int64_t i = 0; i < H * W; ++i) xp[i] = T(acc[size_t(i)]);
    }
  });
}

// adaptive_avg_pool2d(Tensor self, int[2] output_size) -> Tensor
void adaptive_avg_pool2d_kernel(Args& a) {
  const char* op = "adaptive_avg_pool2d";
  TensorRef self = a.tensor(0);
  const PoolPlanes in = pool_planes(op, self);
  const auto out = int_pair(op, "output_size", a.int_list(1));
  if (out[0] < 0 || out[1] < 0)
    fail(TS_ERROR_VALUE, op, ": expected output_size >= 0, got ", strided::str(out));
  const PoolLayout layout = pool_layout(self);
  const TensorRef x = dense_in(a.call(), self, layout, op);
  TensorRef y = empty_in(a.call(), in.shape(out[0], out[1]), self.dtype(), layout);
  if (y.numel() > 0)
    TS_DISPATCH_FLOAT(self.dtype(), fail(TS_ERROR_TYPE, op, ": unsupported dtype"), {
      if (layout.channels_last)
        average_pool_nhwc(in.planes / layout.channels, layout.channels, in.h, in.w, out[0], out[1],
                          x.data<scalar_t>(), y.data<scalar_t>(), adaptive_window(in.h, in.w, out[0], out[1]));
      else
        adaptive_forward<scalar_t>(in, out[0], out[1], x.data<scalar_t>(), y.data<scalar_t>());
    });
  a.return_tensor(std::move(y));
}

// adaptive_avg_pool2d_backward(Tensor grad_output, Tensor self) -> Tensor: the output size is
// grad_output's last two dims.
void adaptive_avg_pool2d_backward_kernel(Args& a) {
  const char* op = "adaptive_avg_pool2d_backward";
  TensorRef grad_out = a.tensor(0), self = a.tensor(1);
  const PoolPlanes in = pool_planes(op, self);
  if (grad_out.dim() != self.dim())
    fail(TS_ERROR_VALUE, op, ": expected grad_output with as many dims as self (", self.dim(), "), got shape ",
         strided::str(grad_out.sizes()));
  const int64_t d = grad_out.dim();
  check_grad_output(op, grad_out, self, in.shape(grad_out.size(d - 2), grad_out.size(d - 1)));
  const int64_t OH = grad_out.size(d - 2), OW = grad_out.size(d - 1);
  const PoolLayout layout = pool_layout(self);
  const TensorRef gy = dense_in(a.call(), grad_out, layout, op);
  TensorRef gx = zeros_like_shape(a.call(), self.sizes(), self.dtype(), layout);
  if (gy.numel() > 0)
    TS_DISPATCH_FLOAT(self.dtype(), fail(TS_ERROR_TYPE, op, ": unsupported dtype"), {
      if (layout.channels_last)
        average_pool_backward_nhwc(in.planes / layout.channels, layout.channels, in.h, in.w, OH, OW,
                                   gy.data<scalar_t>(), gx.data<scalar_t>(), adaptive_window(in.h, in.w, OH, OW));
      else
        adaptive_backward<scalar_t>(in, OH, OW, gy.data<scalar_t>(), gx.data<scalar_t>());
    });
  a.return_tensor(std::move(gx));
}

}  // namespace

void register_adaptive_pool_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("adaptive_avg_pool2d", key, adaptive_avg_pool2d_kernel);
  reg.kernel("adaptive_avg_pool2d_backward", key, adaptive_avg_pool2d_backward_kernel);
}

}  // namespace tessera::cpu

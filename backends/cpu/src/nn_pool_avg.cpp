// avg_pool2d and its backward (PyTorch semantics). A window's divisor is divisor_override when
// given, else its size including the padding (count_include_pad; windows are cut at the
// padded edge in ceil mode) or only the input elements it covers.
#include "nn_pool.h"

namespace tessera::cpu {
namespace {

using sdk::Args;
using sdk::fail;
using sdk::TensorRef;

struct AvgPool {
  PoolPlanes in;
  std::array<int64_t, 2> k, s, pad, out;
  bool count_include_pad = true;
  std::optional<int64_t> divisor;
  PoolLayout layout;
};

// Arguments from `first`: kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override.
AvgPool plan_avg_pool(const char* op, const TensorRef& self, const Args& a, int first) {
  AvgPool m;
  m.in = pool_planes(op, self);
  m.k = int_pair(op, "kernel_size", a.int_list(first));
  m.s = int_pair(op, "stride", a.int_list(first + 1), &m.k);
  m.pad = int_pair(op, "padding", a.int_list(first + 2));
  check_pool_params(op, m.k, m.s, m.pad, {1, 1});
  m.out = pooled_plane(op, m.in, m.k, m.s, m.pad, {1, 1}, a.to_bool(first + 3));
  m.count_include_pad = a.to_bool(first + 4);
  m.divisor = a.optional_int(first + 5);
  if (m.divisor && *m.divisor == 0) fail(TS_ERROR_VALUE, op, ": expected a non-zero divisor_override, got 0");
  m.layout = pool_layout(self);
  return m;
}

using Window = PoolWindow;

Window window(const AvgPool& m, int64_t oh, int64_t ow) {
  int64_t h0 = oh * m.s[0] - m.pad[0], w0 = ow * m.s[1] - m.pad[1];
  int64_t h1 = std::min(h0 + m.k[0], m.in.h + m.pad[0]), w1 = std::min(w0 + m.k[1], m.in.w + m.pad[1]);
  const int64_t padded_size = (h1 - h0) * (w1 - w0);
  h0 = std::max<int64_t>(h0, 0), w0 = std::max<int64_t>(w0, 0);
  h1 = std::min(h1, m.in.h), w1 = std::min(w1, m.in.w);
  const int64_t divisor =
      m.divisor ? *m.divisor : m.count_include_pad ? padded_size : std::max<int64_t>(0, (h1 - h0) * (w1 - w0));
  return {h0, h1, w0, w1, divisor};
}

template <class T>
void avg_pool_forward(const AvgPool& m, const T* x, T* y) {
  using M = sdk::opmath_t<T>;
  const int64_t H = m.in.h, W = m.in.w, OH = m.out[0], OW = m.out[1];
  parallel_for(m.in.planes, plane_grain(OH * OW * m.k[0] * m.k[1]), [&](int64_t pb, int64_t pe) {
    for (int64_t p = pb; p < pe; ++p) {
      const T* xp = x + p * H * W;
      T* yp = y + p * OH * OW;
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          const Window win = window(m, oh, ow);
          if (win.h0 >= win.h1 || win.w0 >= win.w1) {  // only padding under the window
            yp[oh * OW + ow] = T(0);
            continue;
          }
          M sum = 0;
          for (int64_t ih = win.h0; ih < win.h1; ++ih)
            for (int64_t iw = win.w0; iw < win.w1; ++iw) sum += M(xp[ih * W + iw]);
          yp[oh * OW + ow] = T(sum / M(win.divisor));
        }
    }
  });
}

template <class T>
void avg_pool_backward(const AvgPool& m, const T* gy, T* gx) {
  using M = sdk::opmath_t<T>;
  const int64_t H = m.in.h, W = m.in.w, OH = m.out[0], OW = m.out[1];
  parallel_for(m.in.planes, plane_grain(OH * OW * m.k[0] * m.k[1]), [&](int64_t pb, int64_t pe) {
    std::vector<M> acc(size_t(H * W));  // 16-bit gradients accumulate in float
    for (int64_t p = pb; p < pe; ++p) {
      std::fill(acc.begin(), acc.end(), M(0));
      const T* gp = gy + p * OH * OW;
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          const Window win = window(m, oh, ow);
          if (win.h0 >= win.h1 || win.w0 >= win.w1) continue;
          const M g = M(gp[oh * OW + ow]) / M(win.divisor);
          for (int64_t ih = win.h0; ih < win.h1; ++ih)
            for (int64_t iw = win.w0; iw < win.w1; ++iw) acc[size_t(ih * W + iw)] += g;
        }
      T* xp = gx + p * H * W;
      for (int64_t i = 0; i < H * W; ++i) xp[i] = T(acc[size_t(i)]);
    }
  });
}

// avg_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, bool ceil_mode=False,
//            bool count_include_pad=True, int? divisor_override=None) -> Tensor
void avg_pool2d_kernel(Args& a) {
  const char* op = "avg_pool2d";
  TensorRef self = a.tensor(0);
  const AvgPool m = plan_avg_pool(op, self, a, 1);
  const TensorRef x = dense_in(a.call(), self, m.layout, op);
  TensorRef y = empty_in(a.call(), m.in.shape(m.out[0], m.out[1]), self.dtype(), m.layout);
  TS_DISPATCH_FLOAT(self.dtype(), fail(TS_ERROR_TYPE, op, ": unsupported dtype"), {
    if (m.layout.channels_last)
      average_pool_nhwc(m.in.planes / m.layout.channels, m.layout.channels, m.in.h, m.in.w, m.out[0], m.out[1],
                        x.data<scalar_t>(), y.data<scalar_t>(), [&](int64_t oh, int64_t ow) { return window(m, oh, ow); });
    else
      avg_pool_forward<scalar_t>(m, x.data<scalar_t>(), y.data<scalar_t>());
  });
  a.return_tensor(std::move(y));
}

// avg_pool2d_backward(Tensor grad_output, Tensor self, int[2] kernel_size, int[2] stride, int[2] padding,
//                     bool ceil_mode, bool count_include_pad, int? divisor_override) -> Tensor
void avg_pool2d_backward_kernel(Args& a) {
  const char* op = "avg_pool2d_backward";
  TensorRef grad_out = a.tensor(0), self = a.tensor(1);
  const AvgPool m = plan_avg_pool(op, self, a, 2);
  check_grad_output(op, grad_out, self, m.in.shape(m.out[0], m.out[1]));
  const TensorRef gy = dense_in(a.call(), grad_out, m.layout, op);
  TensorRef gx = empty_in(a.call(), self.sizes(), self.dtype(), m.layout);
  TS_DISPATCH_FLOAT(self.dtype(), fail(TS_ERROR_TYPE, op, ": unsupported dtype"), {
    if (m.layout.channels_last)
      average_pool_backward_nhwc(m.in.planes / m.layout.channels, m.layout.channels, m.in.h, m.in.w, m.out[0],
                                 m.out[1], gy.data<scalar_t>(), gx.data<scalar_t>(),
                                 [&](int64_t oh, int64_t ow) { return window(m, oh, ow); });
    else
      avg_pool_backward<scalar_t>(m, gy.data<scalar_t>(), gx.data<scalar_t>());
  });
  a.return_tensor(std::move(gx));
}

}  // namespace

void register_avg_pool_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("avg_pool2d", key, avg_pool2d_kernel);
  reg.kernel("avg_pool2d_backward", key, avg_pool2d_backward_kernel);
}

}  // namespace tessera::cpu

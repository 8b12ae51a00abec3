// Element-wise losses and their reductions: mse_loss (+ backward), l1_loss (its backward is
// composite) and binary_cross_entropy_with_logits in PyTorch's numerically stable form. The
// element-wise part runs through the TensorIterator (broadcasting, promotion, threads); mean
// and sum fold the element losses in fixed blocks, in double, so the result does not depend on
// the thread count. reduction: 0 none, 1 mean, 2 sum.
#include "kernels.h"
#include "tensor_iterator.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace tessera::cpu {
namespace {

using sdk::fail;
using sdk::opmath_t;

constexpr int64_t kNone = 0, kMean = 1;

int64_t read_reduction(const char* op, int64_t r) {
  if (r < 0 || r > 2) fail(TS_ERROR_VALUE, op, ": expected reduction 0 (none), 1 (mean) or 2 (sum), got ", r);
  return r;
}

void require_floating(const char* op, const TensorIterator& it, const TensorRef& x, const TensorRef& y) {
  if (!sdk::is_floating(it.common_dtype()))
    fail(TS_ERROR_TYPE, op, ": expected input and target of a floating point dtype, got ", sdk::dtype_name(x.dtype()),
         " and ", sdk::dtype_name(y.dtype()));
}

// The sum of a contiguous tensor's elements in double.
template <class T> double sum_contiguous(const TensorRef& t) {
  const T* p = t.data<T>();
  const int64_t n = t.numel(), blocks = (n + kGrainSize - 1) / kGrainSize;
  std::vector<double> part(size_t(blocks), 0.0);
  parallel_for(blocks, 1, [&](int64_t bb, int64_t be) {
    for (int64_t b = bb; b < be; ++b) {
      double s = 0;
      for (int64_t i = b * kGrainSize, e = std::min(n, i + kGrainSize); i < e; ++i) s += double(opmath_t<T>(p[i]));
      part[size_t(b)] = s;
    }
  });
  double s = 0;
  for (double v : part) s += v;
  return s;
}

// The element losses reduced as asked: themselves, or a 0-dim mean / sum (the mean of no
// element is NaN).
TensorRef reduce_loss(ts_call call, const char* op, const TensorRef& loss, int64_t reduction) {
  if (reduction == kNone) return loss;
  TensorRef out = sdk::empty(call, {}, loss.dtype(), kCpuDevice);
  TS_DISPATCH_FLOAT(loss.dtype(), fail(TS_ERROR_TYPE, op, ": unsupported dtype"), {
    double s = sum_contiguous<scalar_t>(loss);
    if (reduction == kMean) s = loss.numel() ? s / double(loss.numel()) : std::numeric_limits<double>::quiet_NaN();
    *out.data<scalar_t>() = scalar_t(opmath_t<scalar_t>(s));
  });
  return out;
}

// loss = f(x, y) element-wise over input and target, broadcast and promoted, then reduced.
template <class F>
void binary_loss(sdk::Args& a, const char* op, F f) {
  TensorRef x = a.tensor(0), y = a.tensor(1);
  const int64_t reduction = read_reduction(op, a.to_int(2));
  TensorIterator it = IterConfig(a.call(), op).output(TensorRef(), false).input(x).input(y).build();
  require_floating(op, it, x, y);
  TS_DISPATCH_FLOAT(it.common_dtype(), fail(TS_ERROR_TYPE, op, ": unsupported dtype"), {
    using M = opmath_t<scalar_t>;
    it.run([&f](char** d, const int64_t* s, int64_t n) {
      binary_row<scalar_t, scalar_t, scalar_t>(d, s, n, [&f](scalar_t u, scalar_t v) { return scalar_t(f(M(u), M(v))); });
    });
  });
  a.return_tensor(reduce_loss(a.call(), op, it.result(), reduction));
}

// mse_loss(Tensor self, Tensor target, int reduction=1)
void mse_loss_k(sdk::Args& a) {
  binary_loss(a, "mse_loss", [](auto x, auto y) { return (x - y) * (x - y); });
}

// l1_loss(Tensor self, Tensor target, int reduction=1)
void l1_loss_k(sdk::Args& a) {
  binary_loss(a, "l1_loss", [](auto x, auto y) { return std::abs(x - y); });
}

// mse_loss_backward(Tensor grad_output, Tensor self, Tensor target, int reduction):
// grad * 2 (x - y), divided by the element count for mean.
void mse_loss_backward_k(sdk::Args& a) {
  const char* op = "mse_loss_backward";
  TensorRef g = a.tensor(0), x = a.tensor(1), y = a.tensor(2);
  const int64_t reduction = read_reduction(op, a.to_int(3));
  const std::vector<int64_t> shapes[] = {x.shape_vector(), y.shape_vector()};
  int64_t count = 1;
  for (int64_t s : broadcast_shapes(op, shapes)) count *= s;
  if (reduction != kNone && g.numel() != 1)
    fail(TS_ERROR_VALUE, op, ": expected grad_output with one element for a reduced loss, got shape ",
         shape_str(g.sizes()));
  const double norm = reduction == kMean ? 2.0 / double(count) : 2.0;
  TensorIterator it = IterConfig(a.call(), op).output(TensorRef(), false).input(x).input(y).input(g).build();
  require_floating(op, it, x, y);
  TS_DISPATCH_FLOAT(it.common_dtype(), fail(TS_ERROR_TYPE, op, ": unsupported dtype"), {
    using M = opmath_t<scalar_t>;
    const M k = M(norm);
    it.run([k](char** d, const int64_t* s, int64_t n) {
      map_row<scalar_t, scalar_t, scalar_t, scalar_t>(
          d, s, n, [k](scalar_t u, scalar_t v, scalar_t gv) { return scalar_t(k * (M(u) - M(v)) * M(gv)); });
    });
  });
  a.return_argument(it.result());
}

// -log(sigmoid(x)) * lw + (1 - t) x, stable for any x: -log(sigmoid(x)) = max(-x, 0) + log1p(exp(-|x|)).
template <class M> M bce_logits(M x, M t, M lw) {
  return (M(1) - t) * x + lw * (std::log1p(std::exp(-std::abs(x))) + std::max(-x, M(0)));
}

// Runs the loss over inputs (x, t[, weight][, pos_weight]); the log-weight with pos_weight p
// is (p - 1) t + 1.
template <class T, bool W, bool PW> void bce_run(TensorIterator& it) {
  using M = opmath_t<T>;
  it.run([](char** d, const int64_t* s, int64_t n) {
    if constexpr (!W && !PW)
      map_row<T, T, T>(d, s, n, [](T x, T t) { return T(bce_logits(M(x), M(t), M(1))); });
    else if constexpr (W && !PW)
      map_row<T, T, T, T>(d, s, n, [](T x, T t, T w) { return T(M(w) * bce_logits(M(x), M(t), M(1))); });
    else if constexpr (!W && PW)
      map_row<T, T, T, T>(d, s, n, [](T x, T t, T p) {
        return T(bce_logits(M(x), M(t), (M(p) - M(1)) * M(t) + M(1)));
      });
    else
      map_row<T, T, T, T, T>(d, s, n, [](T x, T t, T w, T p) {
        return T(M(w) * bce_logits(M(x), M(t), (M(p) - M(1)) * M(t) + M(1)));
      });
  });
}

// binary_cross_entropy_with_logits(Tensor self, Tensor target, Tensor? weight=None,
//                                  Tensor? pos_weight=None, int reduction=1)
void bce_with_logits_k(sdk::Args& a) {
  const char* op = "binary_cross_entropy_with_logits";
  TensorRef x = a.tensor(0), t = a.tensor(1);
  const std::optional<TensorRef> w = a.optional_tensor(2), pw = a.optional_tensor(3);
  const int64_t reduction = read_reduction(op, a.to_int(4));
  if (x.shape_vector() != t.shape_vector())
    fail(TS_ERROR_VALUE, op, ": expected target of the input's shape ", shape_str(x.sizes()), ", got ",
         shape_str(t.sizes()));
  IterConfig cfg(a.call(), op);
  cfg.output(TensorRef(), false).input(x).input(t);
  if (w) cfg.input(*w);
  if (pw) cfg.input(*pw);
  TensorIterator it = cfg.build();
  require_floating(op, it, x, t);
  TS_DISPATCH_FLOAT(it.common_dtype(), fail(TS_ERROR_TYPE, op, ": unsupported dtype"), {
    if (w && pw) bce_run<scalar_t, true, true>(it);
    else if (w) bce_run<scalar_t, true, false>(it);
    else if (pw) bce_run<scalar_t, false, true>(it);
    else bce_run<scalar_t, false, false>(it);
  });
  a.return_tensor(reduce_loss(a.call(), op, it.result(), reduction));
}

}  // namespace

void register_pointwise_loss_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("mse_loss", key, mse_loss_k);
  reg.kernel("mse_loss_backward", key, mse_loss_backward_k);
  reg.kernel("l1_loss", key, l1_loss_k);
  reg.kernel("binary_cross_entropy_with_logits", key, bce_with_logits_k);
}

}  // namespace tessera::cpu

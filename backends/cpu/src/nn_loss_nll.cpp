// The negative log-likelihood loss and its backward, PyTorch's nll_loss_forward /
// nll_loss_backward. Input (C), (N, C) or (N, C, d1, ...) of log-probabilities, target () / (N)
// / (N, d1, ...) of int64 class indices; weight (C) optional; targets equal to ignore_index
// count for nothing. reduction: 0 none, 1 mean (divided by the summed weight), 2 sum.
// total_weight is the summed weight of the targets not ignored, for every reduction.
// The target's elements are walked with a LoopGeometry whose other operands are the input (and
// gradient) with the class dim left out: a row reads x[t * class_stride].
#include "kernels.h"
#include "tensor_iterator.h"

#include <cstring>
#include <string>
#include <vector>

namespace tessera::cpu {
namespace {

using sdk::fail;
using sdk::opmath_t;

constexpr int64_t kNone = 0, kMean = 1, kSum = 2;

// The checked layout of one call.
struct NllProblem {
  int64_t classes = 0;
  int64_t class_dim = 0;               // in self
  std::vector<int64_t> batch;          // the target's shape: self's without the class dim
  TensorRef weight;                    // contiguous, self's dtype; undefined when None
};

NllProblem check_nll(ts_call call, const char* op, const TensorRef& self, const TensorRef& target,
                     const std::optional<TensorRef>& weight, int64_t reduction) {
  const TensorRef* ts[] = {&self, &target, weight ? &*weight : nullptr};
  check_cpu(op, ts);
  if (reduction < 0 || reduction > 2)
    fail(TS_ERROR_VALUE, op, ": expected reduction 0 (none), 1 (mean) or 2 (sum), got ", reduction);
  if (!sdk::is_floating(self.dtype()))
    fail(TS_ERROR_TYPE, op, ": expected input of a floating point dtype, got ", sdk::dtype_name(self.dtype()));
  if (target.dtype() != TS_INT64)
    fail(TS_ERROR_TYPE, op, ": expected target of dtype int64 (class indices), got ", sdk::dtype_name(target.dtype()));
  if (self.dim() == 0) fail(TS_ERROR_VALUE, op, ": expected input of 1 or more dimensions, got a 0-dim tensor");
  NllProblem p;
  p.class_dim = self.dim() == 1 ? 0 : 1;
  p.classes = self.size(p.class_dim);
  for (int64_t d = 0; d < self.dim(); ++d)
    if (d != p.class_dim) p.batch.push_back(self.size(d));
  if (target.shape_vector() != p.batch)
    fail(TS_ERROR_VALUE, op, ": expected target of shape ", shape_str(p.batch), " for input of shape ",
         shape_str(self.sizes()), ", got ", shape_str(target.sizes()));
  if (weight) {
    if (weight->dim() != 1 || weight->size(0) != p.classes)
      fail(TS_ERROR_VALUE, op, ": expected weight of shape [", p.classes, "] (one per class), got ",
           shape_str(weight->sizes()));
    p.weight = weight->dtype() == self.dtype() && weight->is_contiguous() ? *weight
                                                                           : convert(call, *weight, self.dtype(), op);
  }
  return p;
}

// A loop over the target's elements: operand 0 the target, then `full` operands of self's shape
// seen without the class dim (the input, its gradient), then `batch` operands of the target's
// shape or broadcast from one element (the loss, its gradient).
LoopGeometry target_loop(const NllProblem& p, const TensorRef& target, std::initializer_list<const TensorRef*> full,
                         std::initializer_list<const TensorRef*> batch) {
  LoopGeometry g(1 + int(full.size() + batch.size()), p.batch);
  g.set_operand(0, target.sizes(), target.strides(), target.itemsize());
  int k = 1;
  for (const TensorRef* t : full) {
    std::vector<int64_t> strides;
    for (int64_t d = 0; d < t->dim(); ++d)
      if (d != p.class_dim) strides.push_back(t->stride(d));
    g.set_operand(k++, p.batch, strides, t->itemsize());
  }
  for (const TensorRef* t : batch) g.set_operand(k++, t->sizes(), t->strides(), t->itemsize());
  g.coalesce();
  return g;
}

[[noreturn]] void out_of_bounds(const char* op, int64_t t, int64_t classes, int64_t ignore_index) {
  fail(TS_ERROR_INDEX, op, ": target ", t, " is out of bounds: expected a class index in [0, ", classes,
       ") or ignore_index (", ignore_index, ")");
}

// Reads a one-element tensor as double.
double item(const char* op, const char* what, const TensorRef& t) {
  if (t.numel() != 1) fail(TS_ERROR_VALUE, op, ": expected ", what, " with one element, got shape ", shape_str(t.sizes()));
  double v = 0;
  TS_DISPATCH_ALL(t.dtype(), fail(TS_ERROR_TYPE, op, ": unsupported dtype"),
                  v = double(opmath_t<scalar_t>(*t.data<scalar_t>())));
  return v;
}

template <class T>
void nll_forward(const char* op, const NllProblem& p, const TensorRef& self, const TensorRef& target,
                 int64_t reduction, int64_t ignore_index, TensorRef& out, TensorRef& total_weight) {
  const bool none = reduction == kNone;
  LoopGeometry g = none ? target_loop(p, target, {&self}, {&out}) : target_loop(p, target, {&self}, {});
  const int64_t n = g.numel();
  const int64_t cstride = self.stride(p.class_dim) * self.itemsize();
  const T* w = p.weight.defined() ? p.weight.data<T>() : nullptr;
  // Fixed-size blocks summed in order: the result does not depend on the thread count.
  const int64_t blocks = (n + kGrainSize - 1) / kGrainSize;
  std::vector<double> loss_part(size_t(blocks), 0.0), weight_part(size_t(blocks), 0.0);
  char* base[3] = {static_cast<char*>(target.data()), static_cast<char*>(self.data()),
                   none ? static_cast<char*>(out.data()) : nullptr};
  parallel_for(blocks, 1, [&](int64_t bb, int64_t be) {
    for (int64_t b = bb; b < be; ++b) {
      double loss_sum = 0, weight_sum = 0;
      g.run_range(base, b * kGrainSize, std::min(n, (b + 1) * kGrainSize), [&](char** d, const int64_t* s, int64_t m) {
        for (int64_t i = 0; i < m; ++i) {
          const int64_t t = *reinterpret_cast<const int64_t*>(d[0] + i * s[0]);
          double loss = 0;
          if (t != ignore_index) {
            if (t < 0 || t >= p.classes) out_of_bounds(op, t, p.classes, ignore_index);
            const double wt = w ? double(opmath_t<T>(w[t])) : 1.0;
            loss = -wt * double(opmath_t<T>(*reinterpret_cast<const T*>(d[1] + i * s[1] + t * cstride)));
            loss_sum += loss;
            weight_sum += wt;
          }
          if (none) *reinterpret_cast<T*>(d[2] + i * s[2]) = T(opmath_t<T>(loss));
        }
      });
      loss_part[size_t(b)] = loss_sum;
      weight_part[size_t(b)] = weight_sum;
    }
  });
  double loss = 0, weight = 0;
  for (int64_t b = 0; b < blocks; ++b) loss += loss_part[size_t(b)], weight += weight_part[size_t(b)];
  *total_weight.data<T>() = T(opmath_t<T>(weight));
  if (!none) *out.data<T>() = T(opmath_t<T>(reduction == kMean ? loss / weight : loss));
}

// nll_loss_forward(Tensor self, Tensor target, Tensor? weight, int reduction, int ignore_index)
//   -> (Tensor output, Tensor total_weight)
void nll_loss_forward_k(sdk::Args& a) {
  const char* op = "nll_loss_forward";
  TensorRef self = a.tensor(0), target = a.tensor(1);
  const std::optional<TensorRef> weight = a.optional_tensor(2);
  const int64_t reduction = a.to_int(3), ignore_index = a.to_int(4);
  const NllProblem p = check_nll(a.call(), op, self, target, weight, reduction);
  TensorRef out = reduction == kNone ? sdk::empty(a.call(), p.batch, self.dtype(), kCpuDevice)
                                     : sdk::empty(a.call(), {}, self.dtype(), kCpuDevice);
  TensorRef total_weight = sdk::empty(a.call(), {}, self.dtype(), kCpuDevice);
  TS_DISPATCH_FLOAT(self.dtype(), fail(TS_ERROR_TYPE, op, ": unsupported dtype"),
                    nll_forward<scalar_t>(op, p, self, target, reduction, ignore_index, out, total_weight));
  a.returns({sdk::Args::tensor_value(std::move(out)), sdk::Args::tensor_value(std::move(total_weight))});
}

template <class T>
void nll_backward(const char* op, const NllProblem& p, const TensorRef& grad_out, const TensorRef& target,
                  int64_t reduction, int64_t ignore_index, double total_weight, TensorRef& grad_in) {
  const bool none = reduction == kNone;
  LoopGeometry g = target_loop(p, target, {&grad_in}, {&grad_out});
  const int64_t cstride = grad_in.stride(p.class_dim) * grad_in.itemsize();
  const T* w = p.weight.defined() ? p.weight.data<T>() : nullptr;
  // Mean divides by the summed weight (0 when every target is ignored: NaN, as PyTorch).
  const double scale = none || reduction == kSum ? 1.0 : 1.0 / total_weight;
  char* base[3] = {static_cast<char*>(target.data()), static_cast<char*>(grad_in.data()),
                   static_cast<char*>(grad_out.data())};
  g.run(base, [&](char** d, const int64_t* s, int64_t m) {
    for (int64_t i = 0; i < m; ++i) {
      const int64_t t = *reinterpret_cast<const int64_t*>(d[0] + i * s[0]);
      if (t == ignore_index) continue;
      if (t < 0 || t >= p.classes) out_of_bounds(op, t, p.classes, ignore_index);
      const double wt = w ? double(opmath_t<T>(w[t])) : 1.0;
      const double go = double(opmath_t<T>(*reinterpret_cast<const T*>(d[2] + i * s[2])));
      *reinterpret_cast<T*>(d[1] + i * s[1] + t * cstride) = T(opmath_t<T>(-wt * go * scale));
    }
  });
}

// nll_loss_backward(Tensor grad_output, Tensor self, Tensor target, Tensor? weight, int reduction,
//                   int ignore_index, Tensor total_weight) -> Tensor
void nll_loss_backward_k(sdk::Args& a) {
  const char* op = "nll_loss_backward";
  TensorRef grad_out = a.tensor(0), self = a.tensor(1), target = a.tensor(2);
  const std::optional<TensorRef> weight = a.optional_tensor(3);
  const int64_t reduction = a.to_int(4), ignore_index = a.to_int(5);
  TensorRef total = a.tensor(6);
  const TensorRef* ts[] = {&grad_out, &total};
  check_cpu(op, ts);
  const NllProblem p = check_nll(a.call(), op, self, target, weight, reduction);
  if (reduction == kNone ? grad_out.shape_vector() != p.batch : grad_out.numel() != 1)
    fail(TS_ERROR_VALUE, op, ": expected grad_output of shape ",
         reduction == kNone ? shape_str(p.batch) : std::string("[] (one element)"), ", got ",
         shape_str(grad_out.sizes()));
  const double total_weight = item(op, "total_weight", total);
  const TensorRef go = to_dtype(a.call(), grad_out, self.dtype(), op);
  TensorRef grad_in = sdk::empty(a.call(), self.sizes(), self.dtype(), kCpuDevice);
  std::memset(grad_in.data(), 0, size_t(grad_in.numel() * grad_in.itemsize()));  // 0 bits are 0.0
  if (grad_in.numel() > 0)
    TS_DISPATCH_FLOAT(self.dtype(), fail(TS_ERROR_TYPE, op, ": unsupported dtype"),
                      nll_backward<scalar_t>(op, p, go, target, reduction, ignore_index, total_weight, grad_in));
  a.return_tensor(std::move(grad_in));
}

}  // namespace

void register_nll_loss_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("nll_loss_forward", key, nll_loss_forward_k);
  reg.kernel("nll_loss_backward", key, nll_loss_backward_k);
}

}  // namespace tessera::cpu

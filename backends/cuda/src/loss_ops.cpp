// The losses and softmax backwards autograd calls (the CPU plugin's semantics, checks and
// messages): nll_loss_forward / nll_loss_backward, mse_loss (+ backward), l1_loss,
// binary_cross_entropy_with_logits, _softmax_backward_data, _log_softmax_backward_data.
// reduction: 0 none, 1 mean, 2 sum. Reduced element-wise losses are summed in double by the
// reduction kernel (one block, in a fixed order). Out-of-range nll targets are found on the
// device and raised here after reading the flag back (a synchronisation, as the CPU raises).
// Kernels: loss.cu, softmax_backward.cu.
#include "cuda_plugin.h"
#include "nn_launch.h"

#include <cmath>
#include <optional>
#include <string>

namespace tessera::gpu {
namespace {

constexpr int64_t kNone = 0, kMean = 1, kSum = 2;

int64_t read_reduction(const char* op, int64_t r) {
  TS_SDK_CHECK(r >= 0 && r <= 2, TS_ERROR_VALUE, op, ": expected reduction 0 (none), 1 (mean) or 2 (sum), got ", r);
  return r;
}

// ---- nll_loss

struct NllProblem {
  int64_t outer = 1, classes = 0, inner = 1;
  std::vector<int64_t> batch;  // the target's shape: self's without the class dim
  TensorRef weight;            // contiguous, self's dtype; undefined when None
};

NllProblem check_nll(ts_call call, const char* op, const TensorRef& self, const TensorRef& target,
                     const std::optional<TensorRef>& weight, int64_t reduction) {
  common_device(op, {&self, &target});
  if (weight) common_device(op, {&self, &*weight});
  read_reduction(op, reduction);
  TS_SDK_CHECK(sdk::is_floating(self.dtype()), TS_ERROR_TYPE, op, ": expected input of a floating point dtype, got ",
               sdk::dtype_name(self.dtype()));
  TS_SDK_CHECK(target.dtype() == TS_INT64, TS_ERROR_TYPE, op, ": expected target of dtype int64 (class indices), got ",
               sdk::dtype_name(target.dtype()));
  TS_SDK_CHECK(self.dim() > 0, TS_ERROR_VALUE, op, ": expected input of 1 or more dimensions, got a 0-dim tensor");
  NllProblem p;
  const int64_t class_dim = self.dim() == 1 ? 0 : 1;
  p.classes = self.size(class_dim);
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (d == class_dim) continue;
    p.batch.push_back(self.size(d));
    if (d < class_dim) p.outer *= self.size(d);
    else p.inner *= self.size(d);
  }
  TS_SDK_CHECK(std::equal(p.batch.begin(), p.batch.end(), target.sizes().begin(), target.sizes().end()),
               TS_ERROR_VALUE, op, ": expected target of shape ", shape_text(p.batch), " for input of shape ",
               shape_text(self.sizes()), ", got ", shape_text(target.sizes()));
  if (weight) {
    TS_SDK_CHECK(weight->dim() == 1 && weight->size(0) == p.classes, TS_ERROR_VALUE, op, ": expected weight of shape [",
                 p.classes, "] (one per class), got ", shape_text(weight->sizes()));
    p.weight = contiguous(call, *weight, self.dtype());
  }
  return p;
}

void raise_bad_target(const char* op, const TensorRef& flag, int64_t classes, int64_t ignore_index) {
  int64_t t = 0;
  TS_SDK_CHECK(!read_bad_index(flag, t), TS_ERROR_INDEX, op, ": target ", t,
               " is out of bounds: expected a class index in [0, ", classes, ") or ignore_index (", ignore_index, ")");
}

// nll_loss_forward(Tensor self, Tensor target, Tensor? weight, int reduction, int ignore_index)
//   -> (Tensor output, Tensor total_weight)
void nll_loss_forward_k(sdk::Args& a) {
  const char* op = "nll_loss_forward";
  const TensorRef self = a.tensor(0), target = a.tensor(1);
  const std::optional<TensorRef> weight = a.optional_tensor(2);
  const int64_t reduction = a.to_int(3), ignore_index = a.to_int(4);
  DeviceGuard guard(self.device().index);
  const NllProblem p = check_nll(a.call(), op, self, target, weight, reduction);
  const TensorRef x = contiguous(a.call(), self, self.dtype()), t = contiguous(a.call(), target, TS_INT64);
  TensorRef out = empty_on(a.call(), reduction == kNone ? std::span<const int64_t>(p.batch) : std::span<const int64_t>(),
                           self.dtype(), self.device());
  TensorRef total_weight = empty_on(a.call(), {}, self.dtype(), self.device());
  const int64_t partial_shape[] = {2 * kLossBlocks};
  TensorRef partial = empty_on(a.call(), partial_shape, TS_FLOAT64, self.device());
  TensorRef flag = bad_index_flag(a.call(), self.device());
  NllArgs n;
  n.self = first_element(x), n.self_dtype = x.dtype();
  n.target = first_element(t);
  if (p.weight.defined()) n.weight = first_element(p.weight), n.w_dtype = p.weight.dtype();
  n.out = first_element(out), n.out_dtype = out.dtype();
  n.total_weight_out = first_element(total_weight);
  n.partial = reinterpret_cast<double*>(first_element(partial));
  n.bad = reinterpret_cast<int64_t*>(first_element(flag));
  n.outer = p.outer, n.classes = p.classes, n.inner = p.inner, n.ignore_index = ignore_index, n.reduction = reduction;
  launch_nll_loss(n, stream_for(self.device().index));
  raise_bad_target(op, flag, p.classes, ignore_index);
  a.returns({sdk::Args::tensor_value(std::move(out)), sdk::Args::tensor_value(std::move(total_weight))});
}

// nll_loss_backward(Tensor grad_output, Tensor self, Tensor target, Tensor? weight, int reduction,
//                   int ignore_index, Tensor total_weight) -> Tensor
void nll_loss_backward_k(sdk::Args& a) {
  const char* op = "nll_loss_backward";
  const TensorRef grad_out = a.tensor(0), self = a.tensor(1), target = a.tensor(2);
  const std::optional<TensorRef> weight = a.optional_tensor(3);
  const int64_t reduction = a.to_int(4), ignore_index = a.to_int(5);
  const TensorRef total = a.tensor(6);
  common_device(op, {&grad_out, &self, &total});
  DeviceGuard guard(self.device().index);
  const NllProblem p = check_nll(a.call(), op, self, target, weight, reduction);
  const bool shape_ok = reduction == kNone ? std::equal(p.batch.begin(), p.batch.end(), grad_out.sizes().begin(),
                                                        grad_out.sizes().end())
                                           : grad_out.numel() == 1;
  TS_SDK_CHECK(shape_ok, TS_ERROR_VALUE, op, ": expected grad_output of shape ",
               reduction == kNone ? shape_text(p.batch) : std::string("[] (one element)"), ", got ",
               shape_text(grad_out.sizes()));
  TS_SDK_CHECK(total.numel() == 1, TS_ERROR_VALUE, op, ": expected total_weight with one element, got shape ",
               shape_text(total.sizes()));
  const TensorRef go = contiguous(a.call(), grad_out, self.dtype()), t = contiguous(a.call(), target, TS_INT64);
  const TensorRef tw = contiguous(a.call(), total, total.dtype());
  TensorRef grad_in = empty_on(a.call(), self.sizes(), self.dtype(), self.device());
  if (grad_in.numel() == 0) {
    a.return_tensor(std::move(grad_in));
    return;
  }
  const gpuStream_t stream = stream_for(self.device().index);
  check(gpuMemsetAsync(grad_in.data(), 0, size_t(grad_in.numel() * grad_in.itemsize()), stream), op);  // 0 bits are 0.0
  TensorRef flag = bad_index_flag(a.call(), self.device());
  NllArgs n;
  n.target = first_element(t);
  if (p.weight.defined()) n.weight = first_element(p.weight), n.w_dtype = p.weight.dtype();
  n.grad_out = first_element(go), n.go_dtype = go.dtype(), n.go_one = reduction != kNone;
  n.total_weight = first_element(tw), n.tw_dtype = tw.dtype();
  n.grad_in = first_element(grad_in), n.self_dtype = grad_in.dtype();
  n.bad = reinterpret_cast<int64_t*>(first_element(flag));
  n.outer = p.outer, n.classes = p.classes, n.inner = p.inner, n.ignore_index = ignore_index, n.reduction = reduction;
  launch_nll_loss_backward(n, stream);
  raise_bad_target(op, flag, p.classes, ignore_index);
  a.return_tensor(std::move(grad_in));
}

// ---- element-wise losses

void require_floating(const char* op, int32_t dtype, const TensorRef& x, const TensorRef& y) {
  TS_SDK_CHECK(sdk::is_floating(dtype), TS_ERROR_TYPE, op, ": expected input and target of a floating point dtype, got ",
               sdk::dtype_name(x.dtype()), " and ", sdk::dtype_name(y.dtype()));
}

// The element losses reduced as asked: themselves, or a 0-dim mean / sum (the mean of no
// element is NaN).
TensorRef reduce_loss(ts_call call, const TensorRef& loss, int64_t reduction) {
  if (reduction == kNone) return loss;
  TensorRef out = empty_on(call, {}, loss.dtype(), loss.device());
  Reduction r;
  r.ndim_kept = 0, r.ndim_reduced = 1;
  r.sizes[0] = loss.numel(), r.in.strides[0] = 1;
  r.kept = 1, r.reduced = loss.numel();
  r.in.data = first_element(loss), r.in.dtype = loss.dtype(), r.in.itemsize = int32_t(loss.itemsize());
  r.out.data = first_element(out), r.out.dtype = out.dtype(), r.out.itemsize = int32_t(out.itemsize());
  if (reduction == kMean) r.scale = loss.numel() ? 1.0 / double(loss.numel()) : NAN;
  run_reduction(ReduceOp::Sum, Compute::Double, r, loss.device().index);
  return out;
}

// loss = f(x, y) element-wise over input and target, broadcast and promoted, then reduced.
void binary_loss(sdk::Args& a, const char* op, PointwiseLoss f) {
  const TensorRef x = a.tensor(0), y = a.tensor(1);
  const int64_t reduction = read_reduction(op, a.to_int(2));
  common_device(op, {&x, &y});
  const int32_t dtype = sdk::promote_types(x.dtype(), y.dtype());
  require_floating(op, dtype, x, y);
  DeviceGuard guard(x.device().index);
  const auto shape = broadcast_shapes(op, x.sizes(), y.sizes());
  TensorRef loss = empty_on(a.call(), shape, dtype, x.device());
  const Loop L = make_loop(op, shape, {&loss, &x, &y});
  launch_pointwise_loss(f, compute_for(dtype), L, stream_for(x.device().index));
  a.return_tensor(reduce_loss(a.call(), loss, reduction));
}

void mse_loss_k(sdk::Args& a) { binary_loss(a, "mse_loss", PointwiseLoss::Mse); }
void l1_loss_k(sdk::Args& a) { binary_loss(a, "l1_loss", PointwiseLoss::L1); }

// mse_loss_backward(Tensor grad_output, Tensor self, Tensor target, int reduction):
// grad * 2 (x - y), divided by the element count for mean.
void mse_loss_backward_k(sdk::Args& a) {
  const char* op = "mse_loss_backward";
  const TensorRef g = a.tensor(0), x = a.tensor(1), y = a.tensor(2);
  const int64_t reduction = read_reduction(op, a.to_int(3));
  common_device(op, {&g, &x, &y});
  const auto xy = broadcast_shapes(op, x.sizes(), y.sizes());
  int64_t count = 1;
  for (int64_t s : xy) count *= s;
  TS_SDK_CHECK(reduction == kNone || g.numel() == 1, TS_ERROR_VALUE, op,
               ": expected grad_output with one element for a reduced loss, got shape ", shape_text(g.sizes()));
  const int32_t dtype = sdk::promote_types(sdk::promote_types(x.dtype(), y.dtype()), g.dtype());
  require_floating(op, dtype, x, y);
  DeviceGuard guard(x.device().index);
  const auto shape = broadcast_shapes(op, xy, g.sizes());
  TensorRef out = empty_on(a.call(), shape, dtype, x.device());
  Loop L = make_loop(op, shape, {&out, &x, &y, &g});
  L.scalar_d = reduction == kMean ? 2.0 / double(count) : 2.0;
  launch_pointwise_loss(PointwiseLoss::MseBackward, compute_for(dtype), L, stream_for(x.device().index));
  a.return_tensor(std::move(out));
}

// binary_cross_entropy_with_logits(Tensor self, Tensor target, Tensor? weight=None,
//                                  Tensor? pos_weight=None, int reduction=1)
// The loss with pos_weight on the loop, then times weight (a second element-wise pass: loops
// hold at most four operands).
void bce_with_logits_k(sdk::Args& a) {
  const char* op = "binary_cross_entropy_with_logits";
  const TensorRef x = a.tensor(0), t = a.tensor(1);
  const std::optional<TensorRef> w = a.optional_tensor(2), pw = a.optional_tensor(3);
  const int64_t reduction = read_reduction(op, a.to_int(4));
  common_device(op, {&x, &t});
  if (w) common_device(op, {&x, &*w});
  if (pw) common_device(op, {&x, &*pw});
  TS_SDK_CHECK(std::equal(x.sizes().begin(), x.sizes().end(), t.sizes().begin(), t.sizes().end()), TS_ERROR_VALUE, op,
               ": expected target of the input's shape ", shape_text(x.sizes()), ", got ", shape_text(t.sizes()));
  int32_t dtype = sdk::promote_types(x.dtype(), t.dtype());
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  for (const std::optional<TensorRef>* o : {&w, &pw})
    if (*o) {
      dtype = sdk::promote_types(dtype, (*o)->dtype());
      shape = broadcast_shapes(op, shape, (*o)->sizes());
    }
  require_floating(op, dtype, x, t);
  DeviceGuard guard(x.device().index);
  const gpuStream_t stream = stream_for(x.device().index);
  TensorRef loss = empty_on(a.call(), shape, dtype, x.device());
  if (pw) launch_pointwise_loss(PointwiseLoss::BceLogitsPosWeight, compute_for(dtype),
                                make_loop(op, shape, {&loss, &x, &t, &*pw}), stream);
  else launch_pointwise_loss(PointwiseLoss::BceLogits, compute_for(dtype), make_loop(op, shape, {&loss, &x, &t}), stream);
  if (w) launch_binary(BinaryOp::Mul, compute_for(dtype), make_loop(op, shape, {&loss, &loss, &*w}), stream);
  a.return_tensor(reduce_loss(a.call(), loss, reduction));
}

// ---- softmax backwards

// _softmax_backward_data / _log_softmax_backward_data
//   (Tensor grad_output, Tensor output, int dim, ScalarType input_dtype)
// Computes in the promoted dtype of grad_output and output; the result has input_dtype.
template <bool Log>
void softmax_backward_k(sdk::Args& a) {
  const char* op = Log ? "_log_softmax_backward_data" : "_softmax_backward_data";
  const TensorRef g = a.tensor(0), y = a.tensor(1);
  common_device(op, {&g, &y});
  TS_SDK_CHECK(std::equal(g.sizes().begin(), g.sizes().end(), y.sizes().begin(), y.sizes().end()), TS_ERROR_VALUE, op,
               ": expected grad_output and output of the same shape, got ", shape_text(g.sizes()), " and ",
               shape_text(y.sizes()));
  const int64_t dim = wrap_dim(op, a.to_int(2), g.dim());
  const std::optional<int32_t> input_dtype = a.optional_dtype(3);
  TS_SDK_CHECK(input_dtype.has_value(), TS_ERROR_TYPE, op, ": expected input_dtype to be a dtype, got None");
  const int32_t dtype = sdk::promote_types(g.dtype(), y.dtype());
  TS_SDK_CHECK(sdk::is_floating(dtype), TS_ERROR_TYPE, op,
               ": expected grad_output and output of a floating point dtype, got ", sdk::dtype_name(g.dtype()), " and ",
               sdk::dtype_name(y.dtype()));
  TS_SDK_CHECK(sdk::is_floating(*input_dtype), TS_ERROR_TYPE, op, ": expected a floating point input_dtype, got ",
               sdk::dtype_name(*input_dtype));
  DeviceGuard guard(g.device().index);
  const TensorRef gc = contiguous(a.call(), g, dtype), yc = contiguous(a.call(), y, dtype);
  TensorRef out = empty_on(a.call(), g.sizes(), *input_dtype, g.device());
  SoftmaxBackwardArgs s;
  s.grad = first_element(gc), s.grad_dtype = dtype;
  s.y = first_element(yc), s.y_dtype = dtype;
  s.out = first_element(out), s.out_dtype = *input_dtype;
  s.log = Log;
  for (int64_t d = 0; d < g.dim(); ++d) {
    if (d < dim) s.outer *= g.size(d);
    else if (d > dim) s.inner *= g.size(d);
  }
  s.dim = g.dim() ? g.size(dim) : 1;
  launch_softmax_backward(compute_for(dtype), s, stream_for(g.device().index));
  a.return_tensor(std::move(out));
}
}  // namespace

void register_loss_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("nll_loss_forward", key, nll_loss_forward_k);
  reg.kernel("nll_loss_backward", key, nll_loss_backward_k);
  reg.kernel("mse_loss", key, mse_loss_k);
  reg.kernel("mse_loss_backward", key, mse_loss_backward_k);
  reg.kernel("l1_loss", key, l1_loss_k);
  reg.kernel("binary_cross_entropy_with_logits", key, bce_with_logits_k);
  reg.kernel("_softmax_backward_data", key, softmax_backward_k<false>);
  reg.kernel("_log_softmax_backward_data", key, softmax_backward_k<true>);
}

}  // namespace tessera::gpu

// native_layer_norm and native_layer_norm_backward (the CPU plugin's semantics and checks):
// the input seen as M contiguous rows of the normalized_shape's N elements; mean / rstd have
// the input's leading dims and a 1 per normalized dim, in float32 for the 16-bit floats and
// the input's dtype otherwise. Kernels: norm.cu.
#include "cuda_plugin.h"
#include "nn_launch.h"
#include "reduction_plan.h"
#include "workspace.h"

#include <tessera/sdk/norm_geometry.h>

#include <algorithm>
#include <optional>

namespace tessera::gpu {
namespace {

using Rows = sdk::LayerNormRows;

using sdk::require_floating;
using sdk::require_shape;
// An affine parameter: checked, on our device, contiguous (or undefined when None).
TensorRef param(sdk::Args& a, const char* op, const TensorRef& input, const std::optional<TensorRef>& t,
                std::span<const int64_t> shape, const char* what) {
  if (!t) return TensorRef();
  common_device(op, {&input, &*t});
  require_floating(op, *t, what);
  require_shape(op, *t, shape, what);
  return contiguous(a.call(), *t, t->dtype());
}
const char* ptr(const TensorRef& t) { return t.defined() ? first_element(t) : nullptr; }
int32_t stat_dtype(int32_t dtype) { return dtype == TS_FLOAT16 || dtype == TS_BFLOAT16 ? TS_FLOAT32 : dtype; }

// native_layer_norm(Tensor input, int[] normalized_shape, Tensor? weight, Tensor? bias, float eps)
void layer_norm_k(sdk::Args& a) {
  const char* op = "native_layer_norm";
  TensorRef input = a.tensor(0);
  const std::vector<int64_t> normalized(a.int_list(1).begin(), a.int_list(1).end());
  const std::optional<TensorRef> weight = a.optional_tensor(2), bias = a.optional_tensor(3);
  const double eps = a.to_double(4);
  common_device(op, {&input});
  require_floating(op, input, "input");
  const Rows r = sdk::layer_norm_rows(op, input, normalized);
  DeviceGuard guard(input.device().index);
  TensorRef w = param(a, op, input, weight, normalized, "weight"), b = param(a, op, input, bias, normalized, "bias");
  TensorRef x = contiguous(a.call(), input, input.dtype());
  TensorRef out = empty_on(a.call(), input.sizes(), input.dtype(), input.device());
  const int32_t sd = stat_dtype(input.dtype());
  TensorRef mean = empty_on(a.call(), r.stat_shape, sd, input.device());
  TensorRef rstd = empty_on(a.call(), r.stat_shape, sd, input.device());
  LayerNormArgs l;
  l.x = first_element(x), l.x_dtype = x.dtype();
  l.weight = ptr(w), l.w_dtype = w.defined() ? w.dtype() : 0;
  l.bias = ptr(b), l.b_dtype = b.defined() ? b.dtype() : 0;
  l.out = first_element(out), l.out_dtype = out.dtype();
  l.mean = first_element(mean), l.rstd = first_element(rstd), l.stat_dtype = sd;
  l.m = r.m, l.n = r.n, l.eps = eps;
  launch_layer_norm(l, stream_for(input.device().index));
  a.returns({sdk::Args::tensor_value(std::move(out)), sdk::Args::tensor_value(std::move(mean)),
             sdk::Args::tensor_value(std::move(rstd))});
}

// native_layer_norm_backward(Tensor grad_out, Tensor input, int[] normalized_shape, Tensor mean,
//   Tensor rstd, Tensor? weight, Tensor? bias) -> (grad_input, grad_weight, grad_bias)
// grad_weight / grad_bias are empty [0] tensors when weight / bias is None.
void layer_norm_backward_k(sdk::Args& a) {
  const char* op = "native_layer_norm_backward";
  TensorRef grad_out = a.tensor(0), input = a.tensor(1);
  const std::vector<int64_t> normalized(a.int_list(2).begin(), a.int_list(2).end());
  TensorRef mean_t = a.tensor(3), rstd_t = a.tensor(4);
  const std::optional<TensorRef> weight = a.optional_tensor(5), bias = a.optional_tensor(6);
  common_device(op, {&grad_out, &input, &mean_t, &rstd_t});
  require_floating(op, input, "input");
  require_floating(op, grad_out, "grad_out");
  require_shape(op, grad_out, input.sizes(), "grad_out");
  const Rows r = sdk::layer_norm_rows(op, input, normalized);
  require_floating(op, mean_t, "mean");
  require_floating(op, rstd_t, "rstd");
  TS_SDK_CHECK(mean_t.numel() == r.m && rstd_t.numel() == r.m, TS_ERROR_VALUE, op, ": expected mean and rstd of ", r.m,
               " elements (shape ", shape_text(r.stat_shape), "), got shapes ", shape_text(mean_t.sizes()), " and ",
               shape_text(rstd_t.sizes()));
  const int32_t index = input.device().index;
  DeviceGuard guard(index);
  TensorRef w = param(a, op, input, weight, normalized, "weight");
  if (bias) param(a, op, input, bias, normalized, "bias");  // checked only: the formula does not use it
  // mean / rstd must have one statistic per row: a common dtype keeps the kernel's args simple.
  const int32_t sd = sdk::promote_types(mean_t.dtype(), rstd_t.dtype());
  TensorRef mean = contiguous(a.call(), mean_t, sd), rstd = contiguous(a.call(), rstd_t, sd);
  TensorRef x = contiguous(a.call(), input, input.dtype()), dy = contiguous(a.call(), grad_out, grad_out.dtype());
  TensorRef grad_input = empty_on(a.call(), input.sizes(), input.dtype(), input.device());
  const int64_t none[] = {0};
  TensorRef grad_weight = weight ? empty_on(a.call(), normalized, weight->dtype(), input.device())
                                 : empty_on(a.call(), none, input.dtype(), input.device());
  TensorRef grad_bias = bias ? empty_on(a.call(), normalized, bias->dtype(), input.device())
                             : empty_on(a.call(), none, input.dtype(), input.device());
  LayerNormArgs l;
  l.x = first_element(x), l.x_dtype = x.dtype();
  l.grad = first_element(dy), l.grad_dtype = dy.dtype();
  l.weight = ptr(w), l.w_dtype = w.defined() ? w.dtype() : 0;
  l.out = first_element(grad_input), l.out_dtype = grad_input.dtype();
  l.mean = first_element(mean), l.rstd = first_element(rstd), l.stat_dtype = sd;
  if (weight) l.grad_weight = first_element(grad_weight), l.gw_dtype = grad_weight.dtype();
  if (bias) l.grad_bias = first_element(grad_bias), l.gb_dtype = grad_bias.dtype();
  l.m = r.m, l.n = r.n;
  // Few columns: their sums over the rows are split by rows too (each column block a split).
  const int64_t column_blocks = (r.n + kThreads - 1) / kThreads;
  l.row_splits = weight || bias ? reduction_splits(column_blocks, r.m * kThreads, multiprocessor_count(index)) : 1;
  std::optional<Workspace> partials;  // given back once the kernels are queued (stream-ordered)
  if (l.row_splits > 1) {
    partials.emplace(index, size_t(2 * l.row_splits * r.n) * sizeof(double), stream_for(index));
    if (partials->ok) l.column_partials = static_cast<double*>(partials->ptr);
    else l.row_splits = 1;
  }
  launch_layer_norm_backward(l, stream_for(index));
  a.returns({sdk::Args::tensor_value(std::move(grad_input)), sdk::Args::tensor_value(std::move(grad_weight)),
             sdk::Args::tensor_value(std::move(grad_bias))});
}
}  // namespace

void register_norm_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("native_layer_norm", key, layer_norm_k);
  reg.kernel("native_layer_norm_backward", key, layer_norm_backward_k);
}

}  // namespace tessera::gpu

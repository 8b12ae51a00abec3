// native_batch_norm, native_group_norm and their backwards (the CPU plugin's semantics, checks
// and messages): the input made contiguous and seen as (N, C, HW); statistics in float32 for
// the 16-bit floats and the input's dtype otherwise; batch norm's save_mean / save_invstd are
// empty [0] tensors in evaluation mode. Kernels: channel_norm.cu.
#include "cuda_plugin.h"
#include "nn_launch.h"
#include "reduction_plan.h"
#include "workspace.h"

#include <tessera/sdk/norm_geometry.h>

#include <algorithm>
#include <optional>

namespace tessera::gpu {
namespace {

using sdk::require_floating;
using sdk::require_shape;
// An optional per-channel tensor: checked, on our device, contiguous (undefined when None).
TensorRef channel_param(ts_call call, const char* op, const TensorRef& input, const std::optional<TensorRef>& t,
                        int64_t c, const char* what) {
  if (!t) return TensorRef();
  common_device(op, {&input, &*t});
  require_floating(op, *t, what);
  const int64_t shape[] = {c};
  require_shape(op, *t, shape, what);
  return contiguous(call, *t, t->dtype());
}
const char* ptr(const TensorRef& t) { return t.defined() ? first_element(t) : nullptr; }
int32_t dtype_or_0(const TensorRef& t) { return t.defined() ? t.dtype() : 0; }
int32_t stat_dtype(int32_t dtype) { return dtype == TS_FLOAT16 || dtype == TS_BFLOAT16 ? TS_FLOAT32 : dtype; }
// Few channels of many elements: batch norm's channel sums are split over several blocks per
// channel (reduction_plan.h), their partial statistics in `partials` (given back once queued).
void split_channel_sums(ChannelNormArgs& c, int32_t index, std::optional<Workspace>& partials) {
  c.splits = reduction_splits(c.c, c.n * c.hw, multiprocessor_count(index));
  if (c.splits <= 1) return;
  partials.emplace(index, size_t(3 * c.c * c.splits) * sizeof(double), stream_for(index));
  if (partials->ok) c.split_stats = static_cast<double*>(partials->ptr);
  else c.splits = 1;
}
TensorRef scratch(ts_call call, int64_t n, ts_device device) {
  const int64_t shape[] = {n};
  return empty_on(call, shape, TS_FLOAT64, device);
}
void return3(sdk::Args& a, TensorRef&& x, TensorRef&& y, TensorRef&& z) {
  a.returns({sdk::Args::tensor_value(std::move(x)), sdk::Args::tensor_value(std::move(y)),
             sdk::Args::tensor_value(std::move(z))});
}

using Layout = sdk::ChannelLayout;  // N x C rows of HW elements
using Groups = sdk::GroupLayout;   // N x group rows of (C / group) * HxW elements

// native_batch_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor? running_mean,
//                   Tensor? running_var, bool training, float momentum, float eps)
void batch_norm_k(sdk::Args& a) {
  const char* op = "native_batch_norm";
  const TensorRef input = a.tensor(0);
  const std::optional<TensorRef> weight = a.optional_tensor(1), bias = a.optional_tensor(2);
  const std::optional<TensorRef> running_mean = a.optional_tensor(3), running_var = a.optional_tensor(4);
  const bool training = a.to_bool(5);
  const double momentum = a.to_double(6), eps = a.to_double(7);
  common_device(op, {&input});
  require_floating(op, input, "input");
  const Layout l = sdk::channel_layout(op, input);
  DeviceGuard guard(input.device().index);
  const TensorRef w = channel_param(a.call(), op, input, weight, l.c, "weight");
  const TensorRef b = channel_param(a.call(), op, input, bias, l.c, "bias");
  const TensorRef rm = channel_param(a.call(), op, input, running_mean, l.c, "running_mean");
  const TensorRef rv = channel_param(a.call(), op, input, running_var, l.c, "running_var");
  sdk::check_batch_norm_mode(op, training, running_mean && running_var, l, input);
  const TensorRef x = contiguous(a.call(), input, input.dtype());
  TensorRef out = empty_on(a.call(), input.sizes(), input.dtype(), input.device());
  const int32_t sd = stat_dtype(input.dtype());
  const int64_t channels[] = {l.c}, none[] = {0};
  TensorRef save_mean = empty_on(a.call(), training ? channels : none, sd, input.device());
  TensorRef save_invstd = empty_on(a.call(), training ? channels : none, sd, input.device());
  TensorRef s = scratch(a.call(), 2 * l.c, input.device());
  ChannelNormArgs c;
  c.x = first_element(x), c.x_dtype = x.dtype();
  c.weight = ptr(w), c.w_dtype = dtype_or_0(w);
  c.bias = ptr(b), c.b_dtype = dtype_or_0(b);
  c.out = first_element(out), c.out_dtype = out.dtype();
  c.scratch = reinterpret_cast<double*>(first_element(s));
  c.n = l.n, c.c = l.c, c.hw = l.hw, c.training = training, c.eps = eps, c.momentum = momentum;
  if (training) {
    c.save_a = first_element(save_mean), c.save_b = first_element(save_invstd), c.save_dtype = sd;
    // The running estimates are updated in place: in a contiguous copy when they are not so.
    if (rm.defined()) c.running_mean = first_element(rm), c.rm_dtype = rm.dtype();
    if (rv.defined()) c.running_var = first_element(rv), c.rv_dtype = rv.dtype();
  } else {
    c.stat_a = first_element(rm), c.a_dtype = rm.dtype();
    c.stat_b = first_element(rv), c.bvar_dtype = rv.dtype(), c.b_is_var = true;
  }
  std::optional<Workspace> partials;
  if (training) split_channel_sums(c, input.device().index, partials);
  launch_batch_norm(c, stream_for(input.device().index));
  if (training) {
    for (auto [given, used] : {std::pair{&running_mean, &rm}, std::pair{&running_var, &rv}}) {
      if (!*given) continue;
      if ((*given)->handle() != used->handle()) copy_into(op, **given, *used);
      (*given)->bump_version();
    }
  }
  return3(a, std::move(out), std::move(save_mean), std::move(save_invstd));
}

// native_batch_norm_backward(Tensor grad_out, Tensor input, Tensor? weight, Tensor? running_mean,
//   Tensor? running_var, Tensor? save_mean, Tensor? save_invstd, bool train, float eps)
// -> (grad_input, grad_weight, grad_bias); grad_weight is [0] when weight is None.
void batch_norm_backward_k(sdk::Args& a) {
  const char* op = "native_batch_norm_backward";
  const TensorRef grad_out = a.tensor(0), input = a.tensor(1);
  const std::optional<TensorRef> weight = a.optional_tensor(2);
  const std::optional<TensorRef> running_mean = a.optional_tensor(3), running_var = a.optional_tensor(4);
  const std::optional<TensorRef> save_mean = a.optional_tensor(5), save_invstd = a.optional_tensor(6);
  const bool train = a.to_bool(7);
  const double eps = a.to_double(8);
  common_device(op, {&grad_out, &input});
  require_floating(op, input, "input");
  require_floating(op, grad_out, "grad_out");
  require_shape(op, grad_out, input.sizes(), "grad_out");
  const Layout l = sdk::channel_layout(op, input);
  DeviceGuard guard(input.device().index);
  const TensorRef w = channel_param(a.call(), op, input, weight, l.c, "weight");
  TensorRef mean, invstd;
  sdk::check_batch_norm_backward_statistics(op, train, save_mean && save_invstd, running_mean && running_var);
  if (train) {
    mean = channel_param(a.call(), op, input, save_mean, l.c, "save_mean");
    invstd = channel_param(a.call(), op, input, save_invstd, l.c, "save_invstd");
  } else {
    mean = channel_param(a.call(), op, input, running_mean, l.c, "running_mean");
    invstd = channel_param(a.call(), op, input, running_var, l.c, "running_var");
  }
  const TensorRef x = contiguous(a.call(), input, input.dtype());
  const TensorRef dy = contiguous(a.call(), grad_out, input.dtype());  // as the CPU: grad in the input's dtype
  TensorRef grad_input = empty_on(a.call(), input.sizes(), input.dtype(), input.device());
  const int64_t channels[] = {l.c}, none[] = {0};
  const int32_t param_dtype = weight ? weight->dtype() : input.dtype();
  TensorRef grad_weight = empty_on(a.call(), weight ? channels : none, param_dtype, input.device());
  TensorRef grad_bias = empty_on(a.call(), channels, param_dtype, input.device());
  TensorRef s = scratch(a.call(), 4 * l.c, input.device());
  ChannelNormArgs c;
  c.x = first_element(x), c.x_dtype = x.dtype();
  c.grad = first_element(dy), c.grad_dtype = dy.dtype();
  c.weight = ptr(w), c.w_dtype = dtype_or_0(w);
  c.stat_a = first_element(mean), c.a_dtype = mean.dtype();
  c.stat_b = first_element(invstd), c.bvar_dtype = invstd.dtype(), c.b_is_var = !train;
  c.out = first_element(grad_input), c.out_dtype = grad_input.dtype();
  if (weight) c.grad_weight = first_element(grad_weight), c.gw_dtype = param_dtype;
  c.grad_bias = first_element(grad_bias), c.gb_dtype = param_dtype;
  c.scratch = reinterpret_cast<double*>(first_element(s));
  c.n = l.n, c.c = l.c, c.hw = l.hw, c.training = train, c.eps = eps;
  std::optional<Workspace> partials;
  split_channel_sums(c, input.device().index, partials);
  launch_batch_norm_backward(c, stream_for(input.device().index));
  return3(a, std::move(grad_input), std::move(grad_weight), std::move(grad_bias));
}

// native_group_norm(Tensor input, Tensor? weight, Tensor? bias, int N, int C, int HxW, int group,
//                   float eps) -> (out, mean (N, group), rstd (N, group))
void group_norm_k(sdk::Args& a) {
  const char* op = "native_group_norm";
  const TensorRef input = a.tensor(0);
  const std::optional<TensorRef> weight = a.optional_tensor(1), bias = a.optional_tensor(2);
  common_device(op, {&input});
  require_floating(op, input, "input");
  const Groups g = sdk::group_layout(op, input, a.to_int(3), a.to_int(4), a.to_int(5), a.to_int(6));
  const double eps = a.to_double(7);
  DeviceGuard guard(input.device().index);
  const TensorRef w = channel_param(a.call(), op, input, weight, g.c, "weight");
  const TensorRef b = channel_param(a.call(), op, input, bias, g.c, "bias");
  const TensorRef x = contiguous(a.call(), input, input.dtype());
  TensorRef out = empty_on(a.call(), input.sizes(), input.dtype(), input.device());
  const int32_t sd = stat_dtype(input.dtype());
  const int64_t stat_shape[] = {g.n, g.group};
  TensorRef mean = empty_on(a.call(), stat_shape, sd, input.device());
  TensorRef rstd = empty_on(a.call(), stat_shape, sd, input.device());
  TensorRef s = scratch(a.call(), 2 * g.n * g.group, input.device());
  ChannelNormArgs c;
  c.x = first_element(x), c.x_dtype = x.dtype();
  c.weight = ptr(w), c.w_dtype = dtype_or_0(w);
  c.bias = ptr(b), c.b_dtype = dtype_or_0(b);
  c.out = first_element(out), c.out_dtype = out.dtype();
  c.save_a = first_element(mean), c.save_b = first_element(rstd), c.save_dtype = sd;
  c.scratch = reinterpret_cast<double*>(first_element(s));
  c.n = g.n, c.c = g.c, c.hw = g.hw, c.group = g.group, c.eps = eps;
  launch_group_norm(c, stream_for(input.device().index));
  return3(a, std::move(out), std::move(mean), std::move(rstd));
}

// native_group_norm_backward(Tensor grad_out, Tensor input, Tensor mean, Tensor rstd, Tensor? weight,
//   int N, int C, int HxW, int group) -> (grad_input, grad_weight, grad_bias)
void group_norm_backward_k(sdk::Args& a) {
  const char* op = "native_group_norm_backward";
  const TensorRef grad_out = a.tensor(0), input = a.tensor(1), mean_t = a.tensor(2), rstd_t = a.tensor(3);
  const std::optional<TensorRef> weight = a.optional_tensor(4);
  common_device(op, {&grad_out, &input, &mean_t, &rstd_t});
  require_floating(op, input, "input");
  require_floating(op, grad_out, "grad_out");
  require_shape(op, grad_out, input.sizes(), "grad_out");
  const Groups g = sdk::group_layout(op, input, a.to_int(5), a.to_int(6), a.to_int(7), a.to_int(8));
  DeviceGuard guard(input.device().index);
  const TensorRef w = channel_param(a.call(), op, input, weight, g.c, "weight");
  require_floating(op, mean_t, "mean");
  require_floating(op, rstd_t, "rstd");
  sdk::check_group_statistics(op, g, mean_t, rstd_t);
  const TensorRef mean = contiguous(a.call(), mean_t, mean_t.dtype()), rstd = contiguous(a.call(), rstd_t, rstd_t.dtype());
  const TensorRef x = contiguous(a.call(), input, input.dtype());
  const TensorRef dy = contiguous(a.call(), grad_out, input.dtype());
  TensorRef grad_input = empty_on(a.call(), input.sizes(), input.dtype(), input.device());
  const int64_t channels[] = {g.c}, none[] = {0};
  const int32_t param_dtype = weight ? weight->dtype() : input.dtype();
  TensorRef grad_weight = empty_on(a.call(), weight ? channels : none, param_dtype, input.device());
  TensorRef grad_bias = empty_on(a.call(), channels, param_dtype, input.device());
  TensorRef s = scratch(a.call(), 4 * g.n * g.group, input.device());
  ChannelNormArgs c;
  c.x = first_element(x), c.x_dtype = x.dtype();
  c.grad = first_element(dy), c.grad_dtype = dy.dtype();
  c.weight = ptr(w), c.w_dtype = dtype_or_0(w);
  c.stat_a = first_element(mean), c.a_dtype = mean.dtype();
  c.stat_b = first_element(rstd), c.bvar_dtype = rstd.dtype();
  c.out = first_element(grad_input), c.out_dtype = grad_input.dtype();
  if (weight) c.grad_weight = first_element(grad_weight), c.gw_dtype = param_dtype;
  c.grad_bias = first_element(grad_bias), c.gb_dtype = param_dtype;
  c.scratch = reinterpret_cast<double*>(first_element(s));
  c.n = g.n, c.c = g.c, c.hw = g.hw, c.group = g.group;
  launch_group_norm_backward(c, stream_for(input.device().index));
  return3(a, std::move(grad_input), std::move(grad_weight), std::move(grad_bias));
}
}  // namespace

void register_channel_norm_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("native_batch_norm", key, batch_norm_k);
  reg.kernel("native_batch_norm_backward", key, batch_norm_backward_k);
  reg.kernel("native_group_norm", key, group_norm_k);
  reg.kernel("native_group_norm_backward", key, group_norm_backward_k);
}

}  // namespace tessera::gpu

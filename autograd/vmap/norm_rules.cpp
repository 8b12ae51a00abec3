// Batching rules for batch norm and group norm, forward and backward: the batch as channels
// (channel_stacking.h), so each sample gets its own statistics over its own N and spatial dims
// (torch.func's semantics) in one call, with per-sample or shared weights and running statistics.
#include "call_frame.h"
#include "channel_stacking.h"

namespace tessera::vmap {
namespace {

using sdk::TensorRef;

ts_tensor optional_tensor(const ts_value& v) { return v.tag == TS_VALUE_TENSOR ? v.u.tensor : nullptr; }

// A per-channel argument ([C], or [0] for "none") stacked for the B samples: [B * C].
TensorRef stacked_parameter(const CallFrame& f, ts_tensor t) {
  return t ? stacked(f.batched_or_expanded(t)) : TensorRef();
}

// A per-channel result of the stacked call back per sample: [B * C] -> [B, C] ([0] -> [B, 0]).
TensorRef per_sample(const TensorRef& t, int64_t batch) {
  if (t.numel() == 0) return sdk::ops::zeros({batch, 0}, t.dtype(), t.device());
  return unstacked(t, batch);
}

// Returns an input-shaped result of the stacked call ([N, B * C, S...]) and two per-channel ones
// ([B * C]), each back per sample: batch norm's outputs and both norms' gradients.
void return_per_sample(CallFrame& f, TensorRef input_like, TensorRef first, TensorRef second) {
  const int64_t B = f.batch_size();
  {
    BelowLevel below(f.level());
    input_like = channels_apart(input_like, B);
    first = per_sample(first, B);
    second = per_sample(second, B);
  }
  f.return_tensors({input_like, first, second});
}

// Group statistics [N, B * G] <-> [B, N, G].
TensorRef statistics_apart(const TensorRef& t, int64_t batch) {
  return sdk::ops::transpose(sdk::ops::reshape(t, {t.size(0), batch, t.size(1) / batch}), 0, 1);
}
TensorRef statistics_side_by_side(const TensorRef& v) {
  return sdk::ops::reshape(sdk::ops::transpose(v, 0, 1), {v.size(1), v.size(0) * v.size(2)});
}

// native_group_norm(input, weight?, bias?, N, C, HxW, group, eps)
bool group_norm_rule(CallFrame& f) {
  const auto& a = f.args();
  if (rank_of(a[0].u.tensor) < 2) return false;
  const int64_t B = f.batch_size();
  TensorRef x = f.batched_or_expanded(a[0].u.tensor);
  TensorRef w = stacked_parameter(f, optional_tensor(a[1])), b = stacked_parameter(f, optional_tensor(a[2]));
  TensorRef out, mean, rstd;
  {
    BelowLevel below(f.level());
    std::tie(out, mean, rstd) = sdk::ops::native_group_norm(channels_side_by_side(x), w, b, a[3].u.i, a[4].u.i * B,
                                                            a[5].u.i, a[6].u.i * B, a[7].u.d);
    out = channels_apart(out, B);
    mean = statistics_apart(mean, B);
    rstd = statistics_apart(rstd, B);
  }
  f.return_tensors({out, mean, rstd});
  return true;
}

// native_group_norm_backward(grad_out, input, mean, rstd, weight?, N, C, HxW, group)
bool group_norm_backward_rule(CallFrame& f) {
  const auto& a = f.args();
  if (rank_of(a[1].u.tensor) < 2) return false;
  const int64_t B = f.batch_size();
  TensorRef go = f.batched_or_expanded(a[0].u.tensor), x = f.batched_or_expanded(a[1].u.tensor);
  TensorRef mean = f.batched_or_expanded(a[2].u.tensor), rstd = f.batched_or_expanded(a[3].u.tensor);
  TensorRef w = stacked_parameter(f, optional_tensor(a[4]));
  TensorRef gi, gw, gb;
  {
    BelowLevel below(f.level());
    std::tie(gi, gw, gb) = sdk::ops::native_group_norm_backward(
        channels_side_by_side(go), channels_side_by_side(x), statistics_side_by_side(mean),
        statistics_side_by_side(rstd), w, a[5].u.i, a[6].u.i * B, a[7].u.i, a[8].u.i * B);
  }
  return_per_sample(f, gi, gw, gb);
  return true;
}

// Running statistics updated in place must be batched: every sample has its own.
void require_batched_running_stats(const CallFrame& f, ts_tensor mean, ts_tensor var) {
  if ((mean && !f.is_batched(mean)) || (var && !f.is_batched(var)))
    sdk::fail(TS_ERROR, "Batch norm got a batched tensor as input while the running_mean or running_var, which will "
              "be updated in place, were not batched.\nIf you are using a module and do not need eval mode, please "
              "set `track_running_stats` to be False. If you are using a prebuilt module and do not need eval mode, "
              "please see the functorch website for resources on how to patch your module to work with vmap");
}

// native_batch_norm(input, weight?, bias?, running_mean?, running_var?, training, momentum, eps)
bool batch_norm_rule(CallFrame& f) {
  const auto& a = f.args();
  if (rank_of(a[0].u.tensor) < 2) return false;
  const bool training = a[5].u.b;
  ts_tensor running_mean = optional_tensor(a[3]), running_var = optional_tensor(a[4]);
  if (training) require_batched_running_stats(f, running_mean, running_var);
  const int64_t B = f.batch_size();
  TensorRef x = f.batched_or_expanded(a[0].u.tensor);
  TensorRef w = stacked_parameter(f, optional_tensor(a[1])), b = stacked_parameter(f, optional_tensor(a[2]));
  TensorRef rm = stacked_parameter(f, running_mean), rv = stacked_parameter(f, running_var);
  TensorRef out, save_mean, save_invstd;
  {
    BelowLevel below(f.level());
    std::tie(out, save_mean, save_invstd) =
        sdk::ops::native_batch_norm(channels_side_by_side(x), w, b, rm, rv, training, a[6].u.d, a[7].u.d);
    // The kernel updated the stacked running statistics; where stacking had to copy (a value whose
    // batch is not its outer dim), the samples' own statistics take the update.
    if (training) {
      for (auto [stat, arg] : {std::pair{rm, running_mean}, std::pair{rv, running_var}}) {
        if (!arg) continue;
        TensorRef value = f.value(arg);
        if (stat.view().data != value.view().data || stat.storage_offset() != value.storage_offset())
          sdk::ops::copy_(value, unstacked(stat, B));
      }
    }
  }
  return_per_sample(f, out, save_mean, save_invstd);
  return true;
}

// native_batch_norm_backward(grad_out, input, weight?, running_mean?, running_var?, save_mean?,
// save_invstd?, train, eps)
bool batch_norm_backward_rule(CallFrame& f) {
  const auto& a = f.args();
  if (rank_of(a[1].u.tensor) < 2) return false;
  TensorRef go = f.batched_or_expanded(a[0].u.tensor), x = f.batched_or_expanded(a[1].u.tensor);
  TensorRef params[5];
  for (int i = 0; i < 5; ++i) params[i] = stacked_parameter(f, optional_tensor(a[size_t(2 + i)]));
  TensorRef gi, gw, gb;
  {
    BelowLevel below(f.level());
    std::tie(gi, gw, gb) = sdk::ops::native_batch_norm_backward(channels_side_by_side(go), channels_side_by_side(x),
                                                                params[0], params[1], params[2], params[3], params[4],
                                                                a[7].u.b, a[8].u.d);
  }
  return_per_sample(f, gi, gw, gb);
  return true;
}

}  // namespace

bool run_norm_rule(CallFrame& f) {
  const std::string_view op = f.op_name();
  if (op == "native_group_norm") return group_norm_rule(f);
  if (op == "native_group_norm_backward") return group_norm_backward_rule(f);
  if (op == "native_batch_norm") return batch_norm_rule(f);
  if (op == "native_batch_norm_backward") return batch_norm_backward_rule(f);
  return false;
}

}  // namespace tessera::vmap

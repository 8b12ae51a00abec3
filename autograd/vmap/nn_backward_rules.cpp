// Batching rules for the backward primitives that vmap(grad) of a network reaches: layer norm,
// the MSE and NLL losses and embedding. Each computes every sample's result in one physical call
// (or a few whole-batch operators) instead of the per-sample loop.
#include "call_frame.h"

namespace tessera::vmap {
namespace {

using sdk::TensorRef;

// The value (batch in front) of a tensor argument, expanded when it is not batched, with
// singleton dims after the batch up to `rank` logical dims (for broadcasting against it).
TensorRef aligned(const CallFrame& f, ts_tensor t, int64_t rank) {
  return pad_after_batch(f.batched_or_expanded(t), rank - rank_of(t));
}

std::vector<int64_t> range(int64_t first, int64_t end) {
  std::vector<int64_t> dims;
  for (int64_t d = first; d < end; ++d) dims.push_back(d);
  return dims;
}

// native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight?, bias?):
// the batch is one more leading dim of the input. A batched weight is multiplied into the
// gradient first (the kernel then runs without one); the weight and bias gradients are each
// sample's sums over its own leading dims.
bool layer_norm_backward_rule(CallFrame& f) {
  const auto& a = f.args();
  ts_tensor weight = a[5].tag == TS_VALUE_TENSOR ? a[5].u.tensor : nullptr;
  ts_tensor bias = a[6].tag == TS_VALUE_TENSOR ? a[6].u.tensor : nullptr;
  const std::vector<int64_t> normalized = ints_of(a[2]);
  const int64_t rank = rank_of(a[1].u.tensor), k = int64_t(normalized.size()), B = f.batch_size();
  TensorRef go = aligned(f, a[0].u.tensor, rank), x = aligned(f, a[1].u.tensor, rank);
  TensorRef mean = aligned(f, a[3].u.tensor, rank), rstd = aligned(f, a[4].u.tensor, rank);
  TensorRef w = weight && f.is_batched(weight) ? f.value(weight) : TensorRef();
  TensorRef gi, gw, gb;
  {
    BelowLevel below(f.level());
    TensorRef kernel_weight = weight && !w.defined() ? TensorRef::borrow(weight) : TensorRef();
    TensorRef g = go;
    if (w.defined()) {  // [B, norm...] against [B, lead..., norm...]
      std::vector<int64_t> shape{B};
      for (int64_t d = 0; d < rank - k; ++d) shape.push_back(1);
      shape.insert(shape.end(), normalized.begin(), normalized.end());
      g = sdk::ops::mul(go, sdk::ops::reshape(w, shape));
    }
    gi = std::get<0>(sdk::ops::native_layer_norm_backward(g, x, normalized, mean, rstd, kernel_weight, TensorRef()));
    const std::vector<int64_t> lead = range(1, 1 + rank - k);
    auto per_sample_sum = [&](const TensorRef& t) { return lead.empty() ? t : sdk::ops::sum(t, lead); };
    const std::vector<int64_t> none{B, 0};
    gw = weight ? per_sample_sum(sdk::ops::mul(go, sdk::ops::mul(sdk::ops::sub(x, mean), rstd)))
                : sdk::ops::zeros(none, x.dtype(), x.device());
    gb = bias ? per_sample_sum(go) : sdk::ops::zeros(none, x.dtype(), x.device());
  }
  f.return_tensors({gi, gw, gb});
  return true;
}

// mse_loss_backward(grad_output, self, target, reduction) = 2 (self - target) grad [/ numel].
bool mse_loss_backward_rule(CallFrame& f) {
  const auto& a = f.args();
  const int64_t rank = std::max(rank_of(a[1].u.tensor), rank_of(a[2].u.tensor));
  TensorRef go = aligned(f, a[0].u.tensor, rank), self = aligned(f, a[1].u.tensor, rank);
  TensorRef target = aligned(f, a[2].u.tensor, rank);
  int64_t numel = 1;
  for (int64_t s : sdk::TensorRef::borrow(a[1].u.tensor).sizes()) numel *= s;
  TensorRef out;
  {
    BelowLevel below(f.level());
    const double scale = a[3].u.i == 1 ? 2.0 / double(std::max<int64_t>(numel, 1)) : 2.0;
    out = sdk::ops::mul(sdk::ops::mul(sdk::ops::sub(self, target), go), sdk::Scalar(scale));
  }
  f.return_tensors({out});
  return true;
}

// nll_loss_backward(grad_output, self, target, weight?, reduction, ignore_index, total_weight):
// every sample's rows at once, each row's gradient -w[target] * grad [/ its sample's total weight]
// scattered at its target.
bool nll_loss_backward_rule(CallFrame& f) {
  const auto& a = f.args();
  ts_tensor weight = a[3].tag == TS_VALUE_TENSOR ? a[3].u.tensor : nullptr;
  if ((weight && f.is_batched(weight)) || rank_of(a[1].u.tensor) > 2) return false;
  const int64_t reduction = a[4].u.i, ignore = a[5].u.i, B = f.batch_size();
  const bool per_row = rank_of(a[1].u.tensor) == 2;
  TensorRef self = f.batched_or_expanded(a[1].u.tensor), target = f.batched_or_expanded(a[2].u.tensor);
  TensorRef go = f.batched_or_expanded(a[0].u.tensor), total = f.batched_or_expanded(a[6].u.tensor);
  TensorRef out;
  {
    BelowLevel below(f.level());
    const int64_t C = self.size(self.dim() - 1), rows_per_sample = per_row ? self.size(1) : 1;
    const std::vector<int64_t> rows{-1}, per_sample{B, rows_per_sample};
    TensorRef t = sdk::ops::reshape(target, rows);
    TensorRef kept = sdk::ops::ne(t, sdk::Scalar(ignore));
    TensorRef safe = sdk::ops::mul(t, kept);
    TensorRef w = weight ? sdk::ops::mul(sdk::ops::index_select(TensorRef::borrow(weight), 0, safe), kept)
                         : sdk::ops::to(kept, self.dtype());
    // grad_output: one value per row (reduction none) or per sample (mean, sum).
    TensorRef g = reduction == 0 ? sdk::ops::reshape(go, rows)
                                 : sdk::ops::reshape(sdk::ops::expand(sdk::ops::reshape(go, {B, 1}), per_sample), rows);
    TensorRef value = sdk::ops::neg(sdk::ops::mul(w, g));
    if (reduction == 1)
      value = sdk::ops::div(value, sdk::ops::reshape(sdk::ops::expand(sdk::ops::reshape(total, {B, 1}), per_sample), rows));
    TensorRef grad = sdk::ops::zeros({B * rows_per_sample, C}, self.dtype(), self.device());
    grad = sdk::ops::scatter(grad, 1, sdk::ops::unsqueeze(safe, 1), sdk::ops::unsqueeze(value, 1));
    out = sdk::ops::reshape(grad, self.shape_vector());
  }
  f.return_tensors({out});
  return true;
}

// embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq):
// sample b's indices are offset by b * num_weights, so one call fills every sample's table
// (frequencies are then counted per sample too); padding rows are masked out first.
bool embedding_backward_rule(CallFrame& f) {
  const auto& a = f.args();
  const int64_t num_weights = a[2].u.i, padding = a[3].u.i, B = f.batch_size();
  const int64_t index_rank = rank_of(a[1].u.tensor);
  TensorRef go = f.batched_or_expanded(a[0].u.tensor), idx = f.batched_or_expanded(a[1].u.tensor);
  TensorRef out;
  {
    BelowLevel below(f.level());
    const int64_t D = go.size(go.dim() - 1);
    std::vector<int64_t> offset_shape{B};
    for (int64_t d = 0; d < index_rank; ++d) offset_shape.push_back(1);
    TensorRef offsets = sdk::ops::reshape(
        sdk::ops::arange(sdk::Scalar(int64_t(0)), sdk::Scalar(B * num_weights), sdk::Scalar(num_weights), idx.dtype(),
                         idx.device()),
        offset_shape);
    TensorRef flat_idx = sdk::ops::reshape(sdk::ops::add(idx, offsets), {-1});
    TensorRef rows = sdk::ops::reshape(go, {-1, D});
    if (padding >= 0)
      rows = sdk::ops::mul(rows, sdk::ops::to(sdk::ops::unsqueeze(sdk::ops::ne(sdk::ops::reshape(idx, {-1}),
                                                                               sdk::Scalar(padding)), 1), rows.dtype()));
    out = sdk::ops::embedding_dense_backward(rows, flat_idx, B * num_weights, -1, a[4].u.b);
    out = sdk::ops::reshape(out, {B, num_weights, D});
  }
  f.return_tensors({out});
  return true;
}

}  // namespace

bool run_nn_backward_rule(CallFrame& f) {
  const std::string_view op = f.op_name();
  if (op == "native_layer_norm_backward") return layer_norm_backward_rule(f);
  if (op == "mse_loss_backward") return mse_loss_backward_rule(f);
  if (op == "nll_loss_backward") return nll_loss_backward_rule(f);
  if (op == "embedding_dense_backward") return embedding_backward_rule(f);
  return false;
}

}  // namespace tessera::vmap

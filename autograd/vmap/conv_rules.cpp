// Batching rules for convolution with a batched weight, and for its two backward primitives.
//
// The batch becomes groups: B samples of a convolution with `groups` groups are one convolution
// with B * groups groups, the samples' channels side by side ([N, B * C, ...], sample-major) and
// their weights stacked along the weight's first dim. One grouped call then computes every
// sample's output, and convolution_backward on that grouped call gives each sample its own
// weight gradient (per-sample gradients of a CNN, or an ensemble of CNNs, in one primitive call).
#include "call_frame.h"
#include "channel_stacking.h"

namespace tessera::vmap {
namespace {

using sdk::TensorRef;

// Inputs and gradients must carry their N dim (the functional API adds it before the primitive).
bool has_batch_dim(ts_tensor t, ts_tensor weight) { return rank_of(t) == rank_of(weight); }

// convolution(input, weight, bias?, stride, padding, dilation, groups) with the weight or bias batched.
bool grouped_convolution(CallFrame& f) {
  const auto& a = f.args();
  ts_tensor input = a[0].u.tensor, weight = a[1].u.tensor;
  ts_tensor bias = a[2].tag == TS_VALUE_TENSOR ? a[2].u.tensor : nullptr;
  if (!has_batch_dim(input, weight)) return false;
  const int64_t B = f.batch_size();
  TensorRef x = f.batched_or_expanded(input), w = f.batched_or_expanded(weight);
  TensorRef b = bias ? f.batched_or_expanded(bias) : TensorRef();
  TensorRef out;
  {
    BelowLevel below(f.level());
    out = sdk::ops::convolution(channels_side_by_side(x), stacked(w), b.defined() ? stacked(b) : TensorRef(),
                                ints_of(a[3]), ints_of(a[4]), ints_of(a[5]), a[6].u.i * B);
    out = channels_apart(out, B);
  }
  f.return_tensors({out});
  return true;
}

// convolution_backward(grad_output, input, weight, stride, padding, dilation, groups): the grouped
// call's backward. Each sample's weight gradient is its own block of the grouped weight's.
bool convolution_backward_rule(CallFrame& f) {
  const auto& a = f.args();
  ts_tensor grad = a[0].u.tensor, input = a[1].u.tensor, weight = a[2].u.tensor;
  if (!has_batch_dim(grad, weight) || !has_batch_dim(input, weight)) return false;
  const int64_t B = f.batch_size();
  TensorRef g = f.batched_or_expanded(grad), x = f.batched_or_expanded(input), w = f.batched_or_expanded(weight);
  TensorRef gi, gw, gb;
  {
    BelowLevel below(f.level());
    std::tie(gi, gw, gb) = sdk::ops::convolution_backward(channels_side_by_side(g), channels_side_by_side(x), stacked(w),
                                                          ints_of(a[3]), ints_of(a[4]), ints_of(a[5]), a[6].u.i * B);
    gi = channels_apart(gi, B);
    gw = unstacked(gw, B);
    gb = unstacked(gb, B);
  }
  f.return_tensors({gi, gw, gb});
  return true;
}

// convolution_backward_input(grad_output, weight, input_size, stride, padding, dilation, groups)
// (also the transposed convolution's forward): with the weight unbatched the batch folds into N;
// with it batched, the grouped call.
bool convolution_backward_input_rule(CallFrame& f) {
  const auto& a = f.args();
  ts_tensor grad = a[0].u.tensor, weight = a[1].u.tensor;
  std::vector<int64_t> input_size = ints_of(a[2]);
  if (!has_batch_dim(grad, weight) || int64_t(input_size.size()) != rank_of(weight)) return false;
  const int64_t B = f.batch_size();
  TensorRef g = f.batched_or_expanded(grad), out;
  if (!f.is_batched(weight)) {
    BelowLevel below(f.level());
    std::vector<int64_t> folded{B * g.size(1)};
    folded.insert(folded.end(), g.sizes().begin() + 2, g.sizes().end());
    input_size[0] *= B;
    out = sdk::ops::convolution_backward_input(sdk::ops::reshape(g, folded), TensorRef::borrow(weight), input_size,
                                               ints_of(a[3]), ints_of(a[4]), ints_of(a[5]), a[6].u.i);
    out = unstacked(out, B);
  } else {
    TensorRef w = f.value(weight);
    BelowLevel below(f.level());
    input_size[1] *= B;
    out = sdk::ops::convolution_backward_input(channels_side_by_side(g), stacked(w), input_size, ints_of(a[3]),
                                               ints_of(a[4]), ints_of(a[5]), a[6].u.i * B);
    out = channels_apart(out, B);
  }
  f.return_tensors({out});
  return true;
}

}  // namespace

bool run_convolution_rule(CallFrame& f) {
  const std::string_view op = f.op_name();
  if (op == "convolution") return grouped_convolution(f);
  if (op == "convolution_backward") return convolution_backward_rule(f);
  if (op == "convolution_backward_input") return convolution_backward_input_rule(f);
  return false;
}

}  // namespace tessera::vmap

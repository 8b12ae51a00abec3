// The batching rules a schema decides (RuleKind), and the for-loop fallback.
#include "call_frame.h"

#include <mutex>
#include <set>
#include <string>

namespace tessera::vmap {
namespace {

void drop_returns(std::vector<ts_value>& values) {
  for (ts_value& v : values)
    if (v.tag == TS_VALUE_TENSOR && v.u.tensor) sdk::host().tensor_release(v.u.tensor);
  values.clear();
}

bool writes_self(const CallFrame& f) {
  std::string_view name = f.op_name();
  name = name.substr(0, name.find('.'));
  return name.size() > 1 && name.back() == '_' && !name.starts_with("__");
}

void check_inplace(const CallFrame& f) {
  if (!f.args().empty() && f.args()[0].tag == TS_VALUE_TENSOR && !f.is_batched(f.args()[0].u.tensor) &&
      f.any_batched(~1u))
    inplace_error(f);
}

void finish(CallFrame& f, const RuleSpec& spec, std::vector<ts_value>& returns) {
  if (spec.inplace) {
    drop_returns(returns);
    f.return_argument(0);
  } else {
    f.return_wrapped(returns);
  }
}

void pointwise(CallFrame& f, const RuleSpec& spec) {
  const auto& args = f.args();
  if (spec.inplace) check_inplace(f);
  int64_t rank = 0;
  for (size_t i = 0; i < args.size(); ++i)
    if ((spec.expand_mask >> i) & 1 && args[i].tag == TS_VALUE_TENSOR && args[i].u.tensor)
      rank = std::max(rank, rank_of(args[i].u.tensor));
  std::vector<ts_value> values(args);
  for (size_t i = 0; i < args.size(); ++i) {
    if (!((spec.expand_mask >> i) & 1) || args[i].tag != TS_VALUE_TENSOR || !f.is_batched(args[i].u.tensor)) continue;
    ts_tensor t = args[i].u.tensor;
    values[i] = f.hold(pad_after_batch(f.value(t), rank - rank_of(t)));
  }
  f.run_physical(values);
  finish(f, spec, values);
}

void check_randomness(const CallFrame& f, const Level& level) {
  if (level.randomness == Randomness::Error)
    sdk::fail(TS_ERROR, "vmap: called random operation while in randomness error mode. Please either use the "
              "'same' or 'different' randomness flags on vmap or perform the randomness operation out of vmap (",
              f.op_name(), ")");
}

// native_dropout with randomness="same": one mask for every sample.
void dropout_same(CallFrame& f) {
  sdk::TensorRef value = f.value(f.arg(0).u.tensor);
  std::vector<ts_value> values(f.args());
  {
    BelowLevel below(f.level());
    sdk::TensorRef sample = sdk::ops::select(value, 0, 0);
    values[0] = f.hold(sdk::ops::full_like(sample, 1.0));
  }
  f.run_physical("native_dropout", values);
  sdk::TensorRef scale = sdk::TensorRef::adopt(values[0].u.tensor);
  sdk::TensorRef mask = sdk::TensorRef::adopt(values[1].u.tensor);
  sdk::TensorRef out, mask_batch;
  {
    BelowLevel below(f.level());
    out = sdk::ops::mul(value, scale);
    mask_batch = expand_batch(mask, f.batch_size());
  }
  const sdk::TensorRef returns[] = {out, mask_batch};
  f.return_tensors(returns);
}

void leading(CallFrame& f, const RuleSpec& spec) {
  if (f.any_batched(spec.pass_mask)) return run_loop(f, true);
  if (spec.inplace) check_inplace(f);
  // native_dropout(input, p, train): not random when not training.
  const bool random = spec.random && !(f.args().size() > 2 && f.arg(2).tag == TS_VALUE_BOOL && !f.arg(2).u.b);
  if (random) {
    const Level& level = *find_level(f.level());
    check_randomness(f, level);
    if (level.randomness == Randomness::Same) return dropout_same(f);
  }
  const auto& args = f.args();
  std::vector<ts_value> values(args);
  int64_t rank = -1;
  int first = -1;
  for (size_t i = 0; i < args.size(); ++i) {
    if (!((spec.expand_mask >> i) & 1)) continue;
    const ts_value& v = args[i];
    if (v.tag == TS_VALUE_TENSOR && v.u.tensor) {
      if (rank < 0) rank = rank_of(v.u.tensor), first = int(i);
      values[i] = f.hold(f.batched_or_expanded(v.u.tensor));
    } else if (v.tag == TS_VALUE_TENSOR_LIST) {
      std::vector<sdk::TensorRef> list;
      for (int64_t j = 0; j < v.u.tensors.size; ++j) {
        ts_tensor t = v.u.tensors.data[j];
        if (rank < 0 && t) rank = rank_of(t);
        list.push_back(t ? f.batched_or_expanded(t) : sdk::TensorRef());
      }
      values[i] = f.hold_list(std::move(list));
    }
  }
  rank = std::max<int64_t>(rank, 0);
  int64_t dim_rank = rank + (spec.rank_plus_one ? 1 : 0);
  // slice_backward / select_backward: their dims index the size argument (the input's sizes).
  if (spec.int_arg >= 0 && args[size_t(spec.int_arg)].tag == TS_VALUE_INT_LIST)
    dim_rank = args[size_t(spec.int_arg)].u.ints.size;
  // A 0-dim sample given a dim (softmax(x, 0) of a scalar): PyTorch treats it as 1-dim, which the
  // batched value is not; each sample runs on its own.
  if (rank == 0 && spec.dim_mask && !(spec.int_arg >= 0)) {
    for (size_t i = 0; i < args.size(); ++i)
      if ((spec.dim_mask >> i) & 1 && (args[i].tag == TS_VALUE_INT || (args[i].tag == TS_VALUE_INT_LIST && args[i].u.ints.size)))
        return run_loop(f, false);
  }
  bool squeeze_scalar_result = false;
  for (size_t i = 0; i < args.size(); ++i) {
    if (!((spec.dim_mask >> i) & 1)) continue;
    const ts_value& v = args[i];
    const bool all = v.tag == TS_VALUE_NONE || (v.tag == TS_VALUE_INT_LIST && v.u.ints.size == 0);
    if (v.tag == TS_VALUE_INT) {
      values[i] = sdk::value(wrap_dim(f, v.u.i, dim_rank) + 1);
    } else if (!all && v.tag == TS_VALUE_INT_LIST) {
      std::vector<int64_t> dims;
      for (int64_t j = 0; j < v.u.ints.size; ++j) dims.push_back(wrap_dim(f, v.u.ints.data[j], dim_rank) + 1);
      values[i] = f.hold_ints(std::move(dims));
    } else if (all && spec.none_dims == NoneDims::All) {
      std::vector<int64_t> dims;
      for (int64_t d = 1; d <= rank; ++d) dims.push_back(d);
      if (rank == 0 && first >= 0) {  // a 0-dim sample: reduce a singleton dim, then drop it
        values[size_t(first)] = f.hold(sdk::ops::unsqueeze(sdk::TensorRef::borrow(values[size_t(first)].u.tensor), 1));
        dims.push_back(1);
        squeeze_scalar_result = true;
      }
      values[i] = f.hold_ints(std::move(dims));
    } else if (all && spec.none_dims == NoneDims::Flatten && first >= 0) {
      const std::vector<int64_t> shape{f.batch_size(), -1};
      values[size_t(first)] = f.hold(sdk::ops::reshape(sdk::TensorRef::borrow(values[size_t(first)].u.tensor), shape));
      values[i] = sdk::value(int64_t(1));
    }
  }
  if (spec.int_arg >= 0 && args[size_t(spec.int_arg)].tag == TS_VALUE_INT_LIST) {
    const ts_value& v = args[size_t(spec.int_arg)];
    std::vector<int64_t> size{f.batch_size()};
    size.insert(size.end(), v.u.ints.data, v.u.ints.data + v.u.ints.size);
    values[size_t(spec.int_arg)] = f.hold_ints(std::move(size));
  }
  f.run_physical(values);
  if (squeeze_scalar_result)
    for (ts_value& v : values)
      if (v.tag == TS_VALUE_TENSOR && v.u.tensor) {
        sdk::TensorRef t = sdk::TensorRef::adopt(v.u.tensor);
        if (t.dim() == 2) {
          BelowLevel below(f.level());
          const std::vector<int64_t> shape{f.batch_size()};
          t = sdk::ops::reshape(t, shape);
        }
        v.u.tensor = t.new_reference();
      }
  finish(f, spec, values);
}

void fold(CallFrame& f, const RuleSpec& spec) {
  if (f.any_batched(spec.pass_mask)) {  // a batched weight: convolution's grouped rule, else the loop
    if (!run_special(f, spec)) run_loop(f, true);
    return;
  }
  const auto& args = f.args();
  const int64_t spatial = spec.spatial_rank ? spec.spatial_rank : rank_of(args[1].u.tensor) - 2;
  int64_t rank = -1;
  for (size_t i = 0; i < args.size() && rank < 0; ++i)
    if ((spec.expand_mask >> i) & 1 && args[i].tag == TS_VALUE_TENSOR && args[i].u.tensor) rank = rank_of(args[i].u.tensor);
  const bool folded = rank == spatial + 2;  // else the logical input is unbatched and the batch is its N
  std::vector<ts_value> values(args);
  int64_t n = 1;
  {
    BelowLevel below(f.level());
    for (size_t i = 0; i < args.size(); ++i) {
      if (!((spec.expand_mask >> i) & 1) || args[i].tag != TS_VALUE_TENSOR || !args[i].u.tensor) continue;
      sdk::TensorRef v = f.batched_or_expanded(args[i].u.tensor);
      if (folded) {
        n = v.size(1);
        std::vector<int64_t> shape{f.batch_size() * n};
        shape.insert(shape.end(), v.sizes().begin() + 2, v.sizes().end());
        v = sdk::ops::reshape(v, shape);
      }
      values[i] = f.hold(v);
    }
  }
  f.run_physical(values);
  std::vector<sdk::TensorRef> outs;
  for (ts_value& v : values) {
    if (v.tag != TS_VALUE_TENSOR || !v.u.tensor) continue;
    sdk::TensorRef t = sdk::TensorRef::adopt(v.u.tensor);
    if (folded) {
      BelowLevel below(f.level());
      std::vector<int64_t> shape{f.batch_size(), n};
      shape.insert(shape.end(), t.sizes().begin() + 1, t.sizes().end());
      t = sdk::ops::reshape(t, shape);
    }
    outs.push_back(std::move(t));
  }
  f.return_tensors(outs);
}

void loss(CallFrame& f, const RuleSpec& spec) {
  const auto& args = f.args();
  std::vector<ts_value> values(args);
  int64_t rank = 0;  // operands broadcast element-wise: batched ones are padded to the widest rank
  for (size_t i = 0; i < args.size(); ++i)
    if ((spec.expand_mask >> i) & 1 && args[i].tag == TS_VALUE_TENSOR && args[i].u.tensor)
      rank = std::max(rank, rank_of(args[i].u.tensor));
  for (size_t i = 0; i < args.size(); ++i)
    if ((spec.expand_mask >> i) & 1 && args[i].tag == TS_VALUE_TENSOR && args[i].u.tensor)
      values[i] = f.hold(pad_after_batch(f.batched_or_expanded(args[i].u.tensor), rank - rank_of(args[i].u.tensor)));
  const int64_t reduction = args[size_t(spec.int_arg)].u.i;
  values[size_t(spec.int_arg)] = sdk::value(int64_t(0));
  f.run_physical(values);
  sdk::TensorRef out = sdk::TensorRef::adopt(values[0].u.tensor);
  if (reduction != 0 && out.dim() > 1) {
    BelowLevel below(f.level());
    std::vector<int64_t> dims;
    for (int64_t d = 1; d < out.dim(); ++d) dims.push_back(d);
    out = reduction == 1 ? sdk::ops::mean(out, dims) : sdk::ops::sum(out, dims);
  }
  const sdk::TensorRef returns[] = {out};
  f.return_tensors(returns);
}

// out= variants: the functional operator through the Batched rules, then copied into `out`.
void out_variant(CallFrame& f, const RuleSpec& spec) {
  const auto& args = f.args();
  ts_operator functional = sdk::host().find_operator(spec.functional);
  if (!functional) return run_loop(f, true);
  std::vector<ts_value> values(args.begin(), args.end() - 1);
  values.resize(std::max<size_t>(values.size(), 4), sdk::none());
  ts_stack s{sizeof(ts_stack), values.data(), int32_t(args.size() - 1), int32_t(values.size())};
  sdk::check_host(sdk::host().call_operator(f.call(), functional, &s));
  sdk::TensorRef result = sdk::TensorRef::adopt(values[0].u.tensor);
  sdk::TensorRef out = sdk::TensorRef::borrow(args.back().u.tensor);
  if (out.shape_vector() != result.shape_vector()) {
    if (f.is_batched(out.handle()) || out.numel() != 0)
      sdk::fail(TS_ERROR, "vmap: ", f.op_name(), ": the out= tensor of shape ", sdk::shape_text(out.sizes()),
                " cannot take a result of shape ", sdk::shape_text(result.sizes()));
    sdk::resize(f.call(), out, result.sizes());
  }
  sdk::ops::copy_(out, result);
  f.return_argument(args.size() - 1);
}

}  // namespace

void run_rule(CallFrame& f, const RuleSpec& spec) {
  switch (spec.kind) {
    case RuleKind::Pointwise: return pointwise(f, spec);
    case RuleKind::Leading: return leading(f, spec);
    case RuleKind::Fold: return fold(f, spec);
    case RuleKind::Loss: return loss(f, spec);
    case RuleKind::Out: return out_variant(f, spec);
    case RuleKind::DataDependent:
      sdk::fail(TS_ERROR, "vmap: ", f.op_name(), " returns a tensor whose shape depends on the values of its input, "
                "which vmap cannot batch (each sample could give a different shape)");
    case RuleKind::Special:
      if (!run_special(f, spec)) run_loop(f, true);
      return;
    case RuleKind::RandomFactory:
    case RuleKind::NoTensors: return run_loop(f, false);  // never batched: they take no tensor
  }
}

void run_loop(CallFrame& f, bool warn) {
  if (warn) {
    static std::mutex mutex;
    static std::set<std::string> warned;
    std::lock_guard lock(mutex);
    if (warned.insert(f.op_name()).second)
      sdk::host().warn(f.call(), sdk::cat("There is a performance drop because we have not yet implemented the batching "
                                          "rule for ", f.op_name(), ". vmap runs it once per sample.").c_str());
  }
  const bool inplace = writes_self(f);
  if (inplace) check_inplace(f);
  const auto& args = f.args();
  const int64_t batch = f.batch_size();
  if (batch == 0)
    sdk::fail(TS_ERROR, "vmap: ", f.op_name(), " has no batching rule, and its per-sample loop cannot run over a "
              "batch of size 0");
  std::vector<std::vector<sdk::TensorRef>> results;
  int32_t inplace_returns = 0;  // an in-place operator returning () (a fused optimizer step)
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<ts_value> values(args);
    std::vector<sdk::TensorRef> keep;
    std::deque<std::vector<ts_tensor>> lists;
    {
      BelowLevel below(f.level());
      for (size_t i = 0; i < args.size(); ++i) {
        const ts_value& v = args[i];
        if (v.tag == TS_VALUE_TENSOR && f.is_batched(v.u.tensor)) {
          keep.push_back(sdk::ops::select(f.value(v.u.tensor), 0, b));
          values[i] = sdk::value(keep.back());
        } else if (v.tag == TS_VALUE_TENSOR_LIST) {
          std::vector<ts_tensor> handles;
          for (int64_t j = 0; j < v.u.tensors.size; ++j) {
            ts_tensor t = v.u.tensors.data[j];
            if (f.is_batched(t)) {
              keep.push_back(sdk::ops::select(f.value(t), 0, b));
              t = keep.back().handle();
            }
            handles.push_back(t);
          }
          lists.push_back(std::move(handles));
          values[i].u.tensors.data = lists.back().data();
        }
      }
    }
    f.run_physical(values);
    if (inplace) {
      inplace_returns = int32_t(values.size());
      drop_returns(values);
      continue;
    }
    if (results.empty()) results.resize(values.size());
    for (size_t r = 0; r < values.size(); ++r) {
      if (values[r].tag != TS_VALUE_TENSOR || !values[r].u.tensor) {
        drop_returns(values);
        sdk::fail(TS_ERROR, "vmap: ", f.op_name(), " returns a value read out of a tensor (a number or a list), "
                  "which vmap cannot batch: it is data-dependent. Rewrite the function without it, or call it "
                  "outside vmap");
      }
      results[r].push_back(sdk::TensorRef::adopt(values[r].u.tensor));
    }
  }
  if (inplace) return inplace_returns ? f.return_argument(0) : f.return_raw({});
  std::vector<sdk::TensorRef> stacked;
  {
    BelowLevel below(f.level());
    for (auto& samples : results) {
      for (const auto& s : samples)
        if (s.shape_vector() != samples[0].shape_vector())
          sdk::fail(TS_ERROR, "vmap: ", f.op_name(), " returned tensors of shapes ", sdk::shape_text(samples[0].sizes()),
                    " and ", sdk::shape_text(s.sizes()), " for different samples: a data-dependent shape, which vmap "
                    "cannot batch");
      stacked.push_back(sdk::ops::stack(samples, 0));
    }
  }
  f.return_tensors(stacked);
}

}  // namespace tessera::vmap

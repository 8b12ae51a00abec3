// vmap over autograd's control operators. Autograd sits below Batched, so it records the
// physical calls: a batched tensor's gradient state is its value's. Two cases for grad/backward:
//  - outputs batched (vmap of grad, per-sample gradients): the engine runs on the values, with
//    each batched output's gradient seed batched too;
//  - only the seeds batched (jacrev, vjp under vmap): the engine runs on the unbatched graph
//    with batched seeds, so each backward formula it calls is batched in its turn.
#include "autograd_rules.h"

#include "call_frame.h"

namespace tessera::vmap {
namespace {

bool any_in_list(const CallFrame& f, const ts_value& v) {
  if (v.tag != TS_VALUE_TENSOR_LIST) return false;
  for (int64_t j = 0; j < v.u.tensors.size; ++j)
    if (f.is_batched(v.u.tensors.data[j])) return true;
  return false;
}

std::vector<sdk::TensorRef> values_of(const CallFrame& f, const ts_value& v) {
  std::vector<sdk::TensorRef> out;
  if (v.tag != TS_VALUE_TENSOR_LIST) return out;
  for (int64_t j = 0; j < v.u.tensors.size; ++j) {
    ts_tensor t = v.u.tensors.data[j];
    out.push_back(!t ? sdk::TensorRef() : f.is_batched(t) ? f.value(t) : sdk::TensorRef::borrow(t));
  }
  return out;
}

// The seeds of batched outputs: batched seeds unwrap, unbatched ones expand, missing ones are ones.
std::vector<sdk::TensorRef> seeds_for(const CallFrame& f, const ts_value& outputs, const ts_value& seeds) {
  std::vector<sdk::TensorRef> out;
  for (int64_t j = 0; j < outputs.u.tensors.size; ++j) {
    ts_tensor o = outputs.u.tensors.data[j];
    ts_tensor g = seeds.tag == TS_VALUE_TENSOR_LIST && j < seeds.u.tensors.size ? seeds.u.tensors.data[j] : nullptr;
    if (g && f.is_batched(g)) {
      out.push_back(f.value(g));
    } else if (!f.is_batched(o)) {
      out.push_back(g ? sdk::TensorRef::borrow(g) : sdk::TensorRef());
    } else {
      BelowLevel below(f.level());
      sdk::TensorRef value = f.value(o);
      out.push_back(g ? expand_batch(sdk::TensorRef::borrow(g), f.batch_size()) : sdk::ops::full_like(value, 1.0));
    }
  }
  return out;
}

ts_status seeds_only(ts_call call, ts_keyset keys, ts_stack* stack) { return pass_below(call, keys, stack); }

void grad_rule(CallFrame& f) {
  const auto& args = f.args();
  std::vector<ts_value> values(args);
  values[0] = f.hold_list(values_of(f, args[0]));
  values[2] = f.hold_list(seeds_for(f, args[0], args[2]));
  values[1] = f.hold_list(values_of(f, args[1]));
  f.run_physical(values);
  // Tensor[]: each input's gradient, batched where the input is.
  thread_local std::vector<ts_tensor> list_buffer;
  std::vector<ts_tensor> grads(values[0].u.tensors.data, values[0].u.tensors.data + values[0].u.tensors.size);
  const ts_value& inputs = args[1];
  for (size_t j = 0; j < grads.size(); ++j) {
    if (!grads[j] || !f.is_batched(inputs.u.tensors.data[j])) continue;
    sdk::TensorRef value = sdk::TensorRef::adopt(grads[j]);
    grads[j] = wrap(f.call(), value, f.level()).new_reference();
  }
  list_buffer = std::move(grads);
  values[0].u.tensors.data = list_buffer.data();
  values[0].u.tensors.size = int64_t(list_buffer.size());
  f.return_raw(values);
}

// Seeds batched at this level, outputs at an enclosing one (jacrev or vjp under vmap): the graph
// was recorded on the enclosing level's values, so the engine runs on those with each seed
// batched here over the enclosing batch too, and the gradients are nested back (this level outside).
void nested_grad_rule(CallFrame& f, int64_t inner) {
  const auto& args = f.args();
  const Level* l = find_level(inner);
  const int64_t inner_size = l->batch_size;
  auto peel = [&](const ts_value& list) {
    std::vector<sdk::TensorRef> out;
    for (int64_t j = 0; j < list.u.tensors.size; ++j) {
      ts_tensor t = list.u.tensors.data[j];
      out.push_back(!t ? sdk::TensorRef() : batched_at(t, inner) ? value_of(t) : sdk::TensorRef::borrow(t));
    }
    return out;
  };
  std::vector<sdk::TensorRef> seeds;
  for (int64_t j = 0; j < args[0].u.tensors.size; ++j) {
    ts_tensor o = args[0].u.tensors.data[j];
    ts_tensor g = args[2].tag == TS_VALUE_TENSOR_LIST && j < args[2].u.tensors.size ? args[2].u.tensors.data[j] : nullptr;
    if (!g || !f.is_batched(g) || !batched_at(o, inner)) {
      seeds.push_back(!g ? sdk::TensorRef() : batched_at(o, inner) ? expand_batch(sdk::TensorRef::borrow(g), inner_size)
                                                                   : sdk::TensorRef::borrow(g));
      continue;
    }
    // This level's values [N, ...] (or, batched at `inner` too, [B, N, ...] inside) -> [N, B, ...].
    sdk::TensorRef v = f.value(g);
    if (batched_at(v.handle(), inner)) {
      v = sdk::ops::transpose(value_of(v.handle()), 0, 1);
    } else {
      std::vector<int64_t> size = v.shape_vector();
      size.insert(size.begin() + 1, inner_size);
      v = sdk::ops::expand(sdk::ops::unsqueeze(v, 1), size);
    }
    seeds.push_back(wrap(f.call(), v, f.level()));
  }
  std::vector<ts_value> values(args);
  values[0] = f.hold_list(peel(args[0]));
  values[1] = f.hold_list(peel(args[1]));
  values[2] = f.hold_list(std::move(seeds));
  values.resize(std::max<size_t>(values.size(), 8), sdk::none());
  ts_stack s{sizeof(ts_stack), values.data(), int32_t(args.size()), int32_t(values.size())};
  sdk::check_host(pass_below(f.call(), f.keys(), &s));
  thread_local std::vector<ts_tensor> list_buffer;
  std::vector<ts_tensor> grads(values[0].u.tensors.data, values[0].u.tensors.data + values[0].u.tensors.size);
  for (size_t j = 0; j < grads.size(); ++j) {
    if (!grads[j] || !batched_at(args[1].u.tensors.data[j], inner)) continue;
    sdk::TensorRef r = sdk::TensorRef::adopt(grads[j]);
    if (f.is_batched(r.handle())) {  // [N, B, ...] here -> batched at `inner` inside, this level outside
      sdk::TensorRef inner_value = sdk::ops::transpose(f.value(r.handle()), 0, 1);
      r = wrap(f.call(), wrap(f.call(), inner_value, inner), f.level());
    } else {
      r = wrap(f.call(), r, inner);
    }
    grads[j] = r.new_reference();
  }
  list_buffer = std::move(grads);
  values[0].u.tensors.data = list_buffer.data();
  values[0].u.tensors.size = int64_t(list_buffer.size());
  values.resize(size_t(s.size));
  f.return_raw(values);
}

// The enclosing level the outputs of a grad call are batched at (0: none), when it is one level.
int64_t enclosing_level(const CallFrame& f) {
  int64_t found = 0;
  for (int i : {0, 1})
    for (int64_t j = 0; j < f.arg(size_t(i)).u.tensors.size; ++j) {
      const int64_t l = level_of(f.arg(size_t(i)).u.tensors.data[j]);
      if (l == 0) continue;
      if (found && l != found)
        sdk::fail(TS_ERROR, "autograd.grad under vmap: the outputs and inputs are batched by more than one enclosing "
                  "vmap, which vjp/jacrev under nested vmaps does not support yet");
      found = l;
    }
  if (found) {
    for (int64_t j = 0; j < f.arg(0).u.tensors.size; ++j) {
      ts_tensor t = f.arg(0).u.tensors.data[j];
      if (t && batched(t) && level_of(value_of(t).handle()) != 0)
        sdk::fail(TS_ERROR, "autograd.grad under vmap: an output is batched by nested vmaps below the seeds' vmap, "
                  "which vjp/jacrev under nested vmaps does not support yet");
    }
  }
  return found;
}

void backward_rule(CallFrame& f) {
  const auto& args = f.args();
  std::vector<ts_value> values(args);
  values[1] = f.hold_list(seeds_for(f, args[0], args[1]));
  values[0] = f.hold_list(values_of(f, args[0]));
  if (args.size() > 4 && args[4].tag == TS_VALUE_TENSOR_LIST) values[4] = f.hold_list(values_of(f, args[4]));
  f.run_physical(values);
  f.return_raw(values);
}

// Operators that read or set a tensor's autograd state: they act on the value.
void on_value(CallFrame& f, bool wrap_result, bool returns_self) {
  std::vector<ts_value> values(f.args());
  values[0] = f.hold(f.value(f.arg(0).u.tensor));
  f.run_physical(values);
  if (returns_self) {
    for (ts_value& v : values)
      if (v.tag == TS_VALUE_TENSOR && v.u.tensor) sdk::host().tensor_release(v.u.tensor);
    return f.return_argument(0);
  }
  if (wrap_result) return f.return_wrapped(values);
  f.return_raw(values);
}

// make_dual with a batched primal: the dual is made on the values (the tangent expanded to the
// batch when it is not batched itself), so the operators below see a dual with a batch dim.
// With only the tangent batched (jacfwd: one primal, a batch of directions) the call passes
// below unchanged and the plain dual carries the batched tangent, so the primal is computed once.
void make_dual_rule(CallFrame& f) {
  std::vector<ts_value> values(f.args());
  values[0] = f.hold(f.batched_or_expanded(f.arg(0).u.tensor));
  values[1] = f.hold(f.batched_or_expanded(f.arg(1).u.tensor));
  f.run_physical(values);
  f.return_wrapped(values);
}

}  // namespace

ts_status autograd_kernel(void* data, ts_call call, ts_keyset keys, ts_stack* stack) noexcept {
  return guarded_rule(call, [&] {
    const auto which = static_cast<AutogradOp>(reinterpret_cast<intptr_t>(data));
    const int64_t level = call_level(stack);
    if (level == 0) return sdk::check_host(pass_below(call, keys, stack));
    CallFrame f(call, keys, stack, level);
    switch (which) {
      case AutogradOp::Grad:
        if (!any_in_list(f, f.arg(0)) && !any_in_list(f, f.arg(1))) {
          if (const int64_t inner = enclosing_level(f)) return nested_grad_rule(f, inner);
          return sdk::check_host(seeds_only(call, keys, stack));
        }
        return grad_rule(f);
      case AutogradOp::Backward:
        if (!any_in_list(f, f.arg(0))) return sdk::check_host(seeds_only(call, keys, stack));
        return backward_rule(f);
      case AutogradOp::ReadState: return on_value(f, false, false);
      case AutogradOp::ReadTensor: return on_value(f, true, false);
      case AutogradOp::SetState: return on_value(f, false, true);
      case AutogradOp::MakeDual:
        // A plain primal with a batched tangent passes below (the primal is computed once). A
        // primal batched at a lower level is expanded here: a dual is batched as a whole, at one
        // level, so its tangent never sits below its primal's batch (vmap of jacfwd).
        if (!f.is_batched(f.arg(0).u.tensor) && !batched(f.arg(0).u.tensor))
          return sdk::check_host(pass_below(call, keys, stack));
        return make_dual_rule(f);
    }
  });
}

void register_autograd_rules(sdk::Registrar& reg, ts_dispatch_key key) {
  if (!sdk::host().find_operator("autograd::grad")) return;  // autograd is not loaded: nothing to batch
  const std::pair<const char*, AutogradOp> ops[] = {
      {"autograd::grad", AutogradOp::Grad},
      {"autograd::backward", AutogradOp::Backward},
      {"autograd::requires_grad", AutogradOp::ReadState},
      {"autograd::is_leaf", AutogradOp::ReadState},
      {"autograd::grad_fn_name", AutogradOp::ReadState},
      {"autograd::retains_grad", AutogradOp::ReadState},
      {"autograd::version", AutogradOp::ReadState},
      {"autograd::retain_grad", AutogradOp::ReadState},
      {"autograd::get_grad", AutogradOp::ReadTensor},
      {"autograd::detach", AutogradOp::ReadTensor},
      {"autograd::requires_grad_", AutogradOp::SetState},
      {"autograd::make_dual", AutogradOp::MakeDual},
      {"autograd::primal_of", AutogradOp::ReadTensor},
      {"autograd::tangent_of", AutogradOp::ReadTensor},
  };
  for (const auto& [name, which] : ops)
    if (sdk::host().find_operator(name))
      reg.boxed_kernel(name, key, autograd_kernel, reinterpret_cast<void*>(static_cast<intptr_t>(which)));
}

}  // namespace tessera::vmap

// The boxed fallback under the Autograd keys: an operator without a derivative formula still
// runs; if an input requires grad, its floating outputs get a node whose backward raises,
// naming the operator (PyTorch's "derivative for X is not implemented"); a tangent reaching it is an
// error at once (forward mode has no formula to run).
#include "forward_ad.h"
#include "kernel_support.h"

namespace tessera::autograd {
namespace {

ts_status autograd_fallback(void*, ts_call call, ts_keyset, ts_stack* stack) noexcept {
  return run_guarded(call, [&] {
    ts_operator op = sdk::host().call_operator_of(call);
    if (!op) throw sdk::Error(TS_ERROR, "autograd fallback: the host did not say which operator is running");
    std::vector<ts_tensor> inputs;
    for (int32_t i = 0; i < stack->size; ++i) {
      const ts_value& v = stack->values[i];
      if (v.tag == TS_VALUE_TENSOR && v.u.tensor) inputs.push_back(v.u.tensor);
      if (v.tag == TS_VALUE_TENSOR_LIST)
        for (int64_t k = 0; k < v.u.tensors.size; ++k)
          if (v.u.tensors.data[k]) inputs.push_back(v.u.tensors.data[k]);
    }
    bool need = any_requires_grad(inputs);
    const bool tangents_in = forward_ad_active() && any_has_tangent(inputs);
    redispatch_below(op, stack);
    if (tangents_in)  // a floating output would need a tangent (comparisons and indices do not)
      for (int32_t j = 0; j < stack->size; ++j)
        if (ts_tensor out = tensor_arg(stack->values[j]); out && is_differentiable_dtype(TensorRef::borrow(out).dtype()))
          raise_no_jvp(sdk::host().operator_name(op));
    if (!need) return;
    auto node = std::make_shared<NotImplementedBackward>(sdk::host().operator_name(op));
    for (ts_tensor t : inputs) node->next_edges.push_back(gradient_edge(t));
    for (int32_t j = 0; j < stack->size; ++j) {
      ts_tensor out = tensor_arg(stack->values[j]);
      if (!out || !is_differentiable_dtype(TensorRef::borrow(out).dtype())) continue;
      set_history(TensorRef::borrow(out), node, uint32_t(j));  // in-place outputs too: their history changed
    }
  });
}

}  // namespace

void register_autograd_fallback(sdk::Registrar& reg, const std::vector<ts_dispatch_key>& keys) {
  for (ts_dispatch_key k : keys) sdk::check_host(sdk::host().register_fallback(reg.raw(), k, autograd_fallback, nullptr));
}

}  // namespace tessera::autograd

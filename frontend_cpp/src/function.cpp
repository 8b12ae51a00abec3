// The non-template half of tessera::autograd::Function<T>: the backward callback and the node.
#include "autograd_calls.h"

#include <tessera/callbacks.h>
#include <tessera/cpp/function.h>
#include <tessera/ops.h>

#include <boost/core/demangle.hpp>

namespace tessera::autograd {

std::string FunctionSupport::demangle(const char* name) {
  std::string s = boost::core::demangle(name);
  auto colon = s.rfind("::");  // "ns::Exp" -> "Exp", as torch names nodes
  return colon == std::string::npos ? s : s.substr(colon + 2);
}

void FunctionSupport::attach(const std::shared_ptr<AutogradContext>& ctx, const std::vector<Tensor>& inputs,
                             const std::vector<size_t>& positions, size_t args, std::vector<Tensor>& outputs,
                             std::string name, BackwardFn backward) {
  // An input returned as is gets a fresh view, so the input keeps its own history.
  for (Tensor& o : outputs)
    for (const Tensor& in : inputs)
      if (o.defined() && o.impl() == in.impl()) o = o.view_as(o);
  // Saved outputs are held without history: the node would otherwise keep itself alive.
  for (Tensor& s : ctx->saved_)
    for (const Tensor& o : outputs)
      if (s.defined() && s.impl() == o.impl()) s = s.detach();

  struct Spec {
    std::vector<int64_t> shape;
    ScalarType dtype;
    Device device;
  };
  std::vector<Spec> specs;  // not the outputs themselves: they hold the node, which holds this callback
  std::vector<Tensor> differentiable;
  for (const Tensor& o : outputs) {
    if (!o.defined()) raise<ValueError>("{}: forward returned an undefined tensor", name);
    specs.push_back({o.shape(), o.dtype(), o.device()});
    differentiable.push_back(o);
  }

  int64_t id = register_callback([ctx, backward = std::move(backward), specs, positions, args, name](ts_stack* stack) {
    std::vector<Tensor> grads;
    if (stack->size >= 1 && stack->values[0].tag == TS_VALUE_TENSOR_LIST) {
      const ts_value& v = stack->values[0];
      for (int64_t k = 0; k < v.u.tensors.size; ++k)
        grads.push_back(v.u.tensors.data[k] ? cpp_detail::borrow(v.u.tensors.data[k]) : Tensor());
    }
    grads.resize(specs.size());
    if (ctx->materialize_grads_)
      for (size_t k = 0; k < grads.size(); ++k)
        if (!grads[k].defined()) grads[k] = zeros(specs[k].shape, specs[k].dtype, specs[k].device);
    std::vector<Tensor> result = backward(ctx.get(), std::move(grads));
    if (result.size() != args)
      raise<RuntimeError>("{}: backward returned {} gradients, expected {} (one per argument of forward)", name,
                          result.size(), args);
    if (int64_t(positions.size()) > stack->capacity)
      raise<RuntimeError>("{}: {} gradients do not fit the stack's {} slots", name, positions.size(), stack->capacity);
    for (size_t k = 0; k < positions.size(); ++k) {  // one per tensor input; the plugin adopts each
      Tensor g = result[positions[k]];
      stack->values[k] = ts_value{};
      stack->values[k].tag = g.defined() ? TS_VALUE_TENSOR : TS_VALUE_NONE;
      stack->values[k].u.tensor = g.defined() ? g.release_handle() : nullptr;
    }
    stack->size = int32_t(positions.size());
  });
  // attach_function owns the callback id from here on (its node releases it).
  cpp_detail::BoxedCall().arg(inputs).arg(differentiable).arg(id).arg(name).call(cpp_detail::autograd_op("attach_function"));
}

}  // namespace tessera::autograd

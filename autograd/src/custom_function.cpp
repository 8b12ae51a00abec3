#include "custom_function.h"

namespace tessera::autograd {

GradList CustomFunctionNode::apply(GradList&& grads) {
  std::vector<ts_tensor> handles;
  for (const TensorRef& g : grads) handles.push_back(g.handle());
  size_t n = std::max<size_t>(next_edges.size(), 1);
  std::vector<ts_value> values(n);
  values[0].tag = TS_VALUE_TENSOR_LIST;
  values[0].u.tensors.data = handles.data();
  values[0].u.tensors.size = int64_t(handles.size());
  ts_stack stack{sizeof(ts_stack), values.data(), 1, int32_t(n)};
  sdk::check_host(sdk::host().invoke_callback(sdk::current_call(), callback_, &stack));
  GradList out(next_edges.size());
  std::vector<TensorRef> owned;  // adopt every returned tensor first, so none leaks on an error
  for (int32_t i = 0; i < stack.size; ++i)
    owned.push_back(values[size_t(i)].tag == TS_VALUE_TENSOR ? TensorRef::adopt(values[size_t(i)].u.tensor) : TensorRef());
  if (size_t(stack.size) != next_edges.size())
    throw sdk::Error(TS_ERROR, sdk::cat(name_, ".backward returned ", stack.size, " gradients, expected ",
                                        next_edges.size(), " (one per tensor input of forward)"));
  for (size_t i = 0; i < out.size(); ++i) out[i] = std::move(owned[i]);
  return out;
}

}  // namespace tessera::autograd

#pragma once
// Running one node of a graph (tessera/sdk/graph_ir.h) through the dispatcher, for compiler
// plugins: whatever a compiler does not generate code for is one call_node away.
#include <tessera/sdk/graph_ir.h>
#include <tessera/sdk/plugin.h>

#include <algorithm>
#include <vector>

namespace tessera::sdk::graph {

// Calls `op` (the node's operator, resolved once with host().find_operator(node.op)) with the
// node's arguments, reading tensors from `env` (indexed by value id), and stores its tensor
// results in `env` under the node's output ids.
inline void call_node(ts_call call, ts_operator op, const Node& node, std::vector<TensorRef>& env) {
  std::vector<ts_value> values(std::max(node.args.size(), node.outputs.size()) + 1);
  std::vector<std::vector<ts_tensor>> lists;  // Tensor[] arguments, alive through the call
  lists.reserve(node.args.size());
  for (size_t i = 0; i < node.args.size(); ++i) {
    const Arg& a = node.args[i];
    ts_value& v = values[i];
    using K = Arg::Kind;
    switch (a.kind) {
      case K::None: v = none(); break;
      case K::Tensor: v = value(env[size_t(a.tensor)]); break;
      case K::TensorList: {
        auto& l = lists.emplace_back();
        for (int64_t id : a.tensors) l.push_back(id < 0 ? nullptr : env[size_t(id)].handle());
        v = ts_value{TS_VALUE_TENSOR_LIST, 0, {}};
        v.u.tensors.data = l.data();
        v.u.tensors.size = int64_t(l.size());
        break;
      }
      case K::Int: v = value(a.i); break;
      case K::Double: v = value(a.d); break;
      case K::Bool: v = value(a.i != 0); break;
      case K::Ints: v = int_list_value(a.ints); break;
      case K::Doubles:
        v = ts_value{TS_VALUE_DOUBLE_LIST, 0, {}};
        v.u.doubles.data = a.doubles.data();
        v.u.doubles.size = int64_t(a.doubles.size());
        break;
      case K::Str: v = ts_value{TS_VALUE_STRING, 0, {}}, v.u.str = a.str.c_str(); break;
      case K::Dtype: v = dtype_value(int32_t(a.i)); break;
      case K::Device: v = ts_value{TS_VALUE_DEVICE, 0, {}}, v.u.device = a.device; break;
    }
  }
  ts_stack stack{sizeof(ts_stack), values.data(), int32_t(node.args.size()), int32_t(values.size())};
  check_host(host().call_operator(call, op, &stack));
  for (size_t r = 0; r < node.outputs.size() && int32_t(r) < stack.size; ++r) {
    const ts_value& out = values[r];
    if (out.tag == TS_VALUE_TENSOR_LIST) {
      for (int64_t j = 0; j < out.u.tensors.size; ++j) {
        TensorRef t = TensorRef::adopt(out.u.tensors.data[j]);  // Tensor[] elements are ours at once
        if (size_t(j) < node.outputs[r].size() && node.outputs[r][size_t(j)] >= 0)
          env[size_t(node.outputs[r][size_t(j)])] = std::move(t);
      }
    } else if (out.tag == TS_VALUE_TENSOR) {
      TensorRef t = TensorRef::adopt(out.u.tensor);
      if (node.outputs[r][0] >= 0) env[size_t(node.outputs[r][0])] = std::move(t);
    }
  }
}

}  // namespace tessera::sdk::graph

#include "fusion_plan.h"
#include "pointwise_ops.h"

#include <set>

namespace tessera::inductor {
namespace {

namespace g = sdk::graph;

bool broadcasts_to(const std::vector<int64_t>& from, const std::vector<int64_t>& to) {
  if (from.size() > to.size()) return false;
  for (size_t k = 0; k < from.size(); ++k) {
    const int64_t f = from[from.size() - 1 - k], t = to[to.size() - 1 - k];
    if (f != t && f != 1) return false;
  }
  return true;
}

// Can `node` join a kernel computing `dtype` values of `shape` on the CPU?
bool fusible(const g::Graph& graph, const g::Node& node) {
  if (!is_pointwise(node.op) || node.in_place() || node.outputs.size() != 1 || node.outputs[0].size() != 1) return false;
  const g::Value& out = graph.value(node.outputs[0][0]);
  if (out.device.type != 0 || (out.dtype != TS_FLOAT32 && out.dtype != TS_FLOAT64)) return false;
  if (!out.is_contiguous() || out.alias_of >= 0 || out.numel() == 0) return false;
  for (size_t i = 0; i < node.args.size(); ++i) {
    const g::Arg& a = node.args[i];
    if (a.kind == g::Arg::Kind::TensorList) return false;
    if (a.kind != g::Arg::Kind::Tensor) continue;
    const g::Value& v = graph.value(a.tensor);
    const bool condition = node.op == "where.self" && i == 0;
    if (v.device.type != 0 || !broadcasts_to(v.shape, out.shape)) return false;
    if (condition ? v.dtype != TS_BOOL : v.dtype != out.dtype) return false;
  }
  // A lowering must exist for these very arguments.
  return lower_pointwise(node, [](int) { return std::string("x"); }, "float").has_value();
}

}  // namespace

FusionPlan plan_fusion(const g::Graph& graph) {
  FusionPlan plan;
  // Where each value is used: by which node, or as a graph output.
  std::vector<std::vector<size_t>> users(graph.values.size());
  std::vector<bool> is_output(graph.values.size(), false);
  for (size_t n = 0; n < graph.nodes.size(); ++n)
    for (const g::Arg& a : graph.nodes[n].args) {
      if (a.kind == g::Arg::Kind::Tensor) users[size_t(a.tensor)].push_back(n);
      for (int64_t id : a.tensors)
        if (id >= 0) users[size_t(id)].push_back(n);
    }
  for (int64_t id : graph.outputs) is_output[size_t(id)] = true;
  for (auto [position, id] : graph.mutated_inputs) is_output[size_t(id)] = true;

  auto close = [&](FusedKernel& k) {
    if (k.nodes.empty()) return;
    std::set<size_t> members(k.nodes.begin(), k.nodes.end());
    std::set<int64_t> produced;
    for (size_t n : k.nodes) produced.insert(graph.nodes[n].outputs[0][0]);
    for (size_t n : k.nodes) {
      for (const g::Arg& a : graph.nodes[n].args)
        if (a.kind == g::Arg::Kind::Tensor && !produced.count(a.tensor) &&
            std::find(k.inputs.begin(), k.inputs.end(), a.tensor) == k.inputs.end())
          k.inputs.push_back(a.tensor);
      const int64_t out = graph.nodes[n].outputs[0][0];
      bool escapes = is_output[size_t(out)];
      for (size_t u : users[size_t(out)]) escapes |= !members.count(u);
      if (escapes) k.outputs.push_back(out);
    }
    plan.steps.push_back({Step::Kind::Fused, plan.kernels.size()});
    plan.kernels.push_back(std::move(k));
    k = FusedKernel{};
  };

  FusedKernel current;
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const g::Node& node = graph.nodes[n];
    if (fusible(graph, node)) {
      const g::Value& out = graph.value(node.outputs[0][0]);
      if (!current.nodes.empty() && (out.shape != current.shape || out.dtype != current.dtype)) close(current);
      if (current.nodes.empty()) current.shape = out.shape, current.dtype = out.dtype;
      current.nodes.push_back(n);
      continue;
    }
    close(current);
    plan.steps.push_back({Step::Kind::Extern, n});
  }
  close(current);
  return plan;
}

}  // namespace tessera::inductor

#include "library_epilogues.h"

#include "decompositions.h"  // value_uses

#include <tessera/sdk/plugin.h>

#include <optional>
#include <string>
#include <vector>

namespace tessera::inductor {
namespace {
namespace g = sdk::graph;
using Kind = g::Arg::Kind;

bool tensor_at(const g::Node& n, size_t i) { return i < n.args.size() && n.args[i].kind == Kind::Tensor; }

bool float_on_cpu(const g::Value& v) { return v.dtype == TS_FLOAT32 && v.device.type == 0; }

// The one node reading `value` (its index), when `value` has exactly one reader and it is a node.
std::optional<size_t> sole_reader(const g::Graph& graph, const std::vector<int>& uses, int64_t value, size_t after) {
  if (uses[size_t(value)] != 1) return std::nullopt;
  for (size_t i = after + 1; i < graph.nodes.size(); ++i)
    for (const g::Arg& a : graph.nodes[i].args)
      if (a.kind == Kind::Tensor && a.tensor == value) return i;
  return std::nullopt;  // a graph output or a mutated input's contents
}

// add.Tensor(product, bias) or add.Tensor(bias, product) with alpha 1 and a dense [N] bias: the bias id.
std::optional<int64_t> bias_of(const g::Graph& graph, const g::Node& add, int64_t product, int64_t n) {
  if (add.op != "add.Tensor" || add.in_place() || !tensor_at(add, 0) || !tensor_at(add, 1)) return std::nullopt;
  if (add.args.size() > 2) {
    const g::Arg& alpha = add.args[2];
    const bool one = (alpha.kind == Kind::Int && alpha.i == 1) || (alpha.kind == Kind::Double && alpha.d == 1.0);
    if (!one) return std::nullopt;
  }
  const int64_t other = add.args[0].tensor == product ? add.args[1].tensor : add.args[0].tensor;
  if (other == product) return std::nullopt;  // product + product
  const g::Value& bias = graph.value(other);
  if (!float_on_cpu(bias) || bias.shape != std::vector<int64_t>{n} || !bias.is_contiguous()) return std::nullopt;
  return other;
}

// The post-op name of an activation node (its input is argument 0), or nullopt.
std::optional<std::string> activation_of(const g::Node& node) {
  if (node.in_place() || !tensor_at(node, 0)) return std::nullopt;
  if (node.op == "relu" || node.op == "tanh" || node.op == "sigmoid" || node.op == "silu") return node.op;
  if (node.op == "gelu") {
    if (node.args.size() < 2 || node.args[1].kind != Kind::Str || node.args[1].str == "none") return std::string("gelu");
    if (node.args[1].str == "tanh") return std::string("gelu_tanh");
  }
  return std::nullopt;
}

}  // namespace

g::Graph fold_library_epilogues(g::Graph graph, const FusionTarget& target) {
  if (target.device_type != 0 || !target.cpu_epilogues || !sdk::host().find_operator(kLinearEpilogueOp)) return graph;
  const std::vector<int> uses = value_uses(graph);
  std::vector<bool> removed(graph.nodes.size(), false);
  for (size_t m = 0; m < graph.nodes.size(); ++m) {
    const g::Node& mm = graph.nodes[m];
    if (mm.op != "matmul" || mm.in_place() || !tensor_at(mm, 0) || !tensor_at(mm, 1) || mm.output() < 0) continue;
    const g::Value &x = graph.value(mm.args[0].tensor), &w = graph.value(mm.args[1].tensor);
    // The product recorded as float32 too: under autocast the dispatcher runs matmul in a lower
    // precision at replay (the recorded output says so), which the folded call would not.
    if (!float_on_cpu(x) || !float_on_cpu(w) || !float_on_cpu(graph.value(mm.output())) || x.shape.size() < 2 ||
        w.shape.size() != 2 || !x.is_contiguous() || w.shape[0] == 0)
      continue;
    const int64_t n = w.shape[1];
    std::vector<size_t> folded{m};  // node indices, in order
    int64_t result = mm.output();
    std::optional<int64_t> bias;
    std::string activation = "none";
    if (auto reader = sole_reader(graph, uses, result, m)) {
      if ((bias = bias_of(graph, graph.nodes[*reader], result, n))) {
        folded.push_back(*reader);
        result = graph.nodes[*reader].output();
      }
    }
    if (auto reader = sole_reader(graph, uses, result, folded.back())) {
      const g::Node& next = graph.nodes[*reader];
      if (auto act = activation_of(next); act && next.args[0].tensor == result && next.output() >= 0) {
        activation = *act;
        folded.push_back(*reader);
        result = next.output();
      }
    }
    // Only with an activation: a bias alone saves no pass, since the add fuses into the kernel
    // after it anyway, and oneDNN's matmul was slower than its sgemm there (the GPT training step,
    // whose pre-activations are saved for the backward: 1-2% slower with bias-only folds).
    const size_t last = folded.back();
    if (activation == "none" || !graph.value(result).is_contiguous() || graph.value(result).dtype != TS_FLOAT32)
      continue;
    // The product moves to the last node folded, where every input exists and before every
    // reader. Nothing between may write in place: the move would let the product see the write.
    bool writes_between = false;
    for (size_t i = m + 1; i < last; ++i) writes_between = writes_between || graph.nodes[i].in_place();
    if (writes_between) continue;
    g::Node fused;
    fused.op = kLinearEpilogueOp;
    fused.grad_enabled = mm.grad_enabled;
    fused.outputs = {{result}};
    g::Arg operand;
    operand.kind = Kind::Tensor;
    operand.tensor = x.id;
    fused.args.push_back(operand);
    operand.tensor = w.id;
    fused.args.push_back(operand);
    g::Arg bias_arg;  // None without a bias
    if (bias) {
      bias_arg.kind = Kind::Tensor;
      bias_arg.tensor = *bias;
    }
    fused.args.push_back(bias_arg);
    g::Arg activation_arg;
    activation_arg.kind = Kind::Str;
    activation_arg.str = activation;
    fused.args.push_back(activation_arg);
    for (size_t i : folded) removed[i] = i != last;
    graph.nodes[last] = std::move(fused);
  }
  std::vector<g::Node> kept;
  kept.reserve(graph.nodes.size());
  for (size_t i = 0; i < graph.nodes.size(); ++i)
    if (!removed[i]) kept.push_back(std::move(graph.nodes[i]));
  graph.nodes = std::move(kept);
  return graph;
}

}  // namespace tessera::inductor

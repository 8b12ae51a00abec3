#include "decompositions.h"

#include "pointwise_ops.h"

#include <algorithm>
#include <string>
#include <utility>

namespace tessera::inductor {
namespace {
namespace g = sdk::graph;
using Kind = g::Arg::Kind;

g::Arg tensor_arg(int64_t id) {
  g::Arg a;
  a.kind = Kind::Tensor;
  a.tensor = id;
  return a;
}
g::Arg int_arg(int64_t i) {
  g::Arg a;
  a.kind = Kind::Int;
  a.i = i;
  return a;
}
g::Arg double_arg(double d) {
  g::Arg a;
  a.kind = Kind::Double;
  a.d = d;
  return a;
}
g::Arg ints_arg(std::vector<int64_t> v) {
  g::Arg a;
  a.kind = Kind::Ints;
  a.ints = std::move(v);
  return a;
}

// Appends nodes to `out`, making new values in `graph` like `like` (device, dtype) of `shape`.
class Emitter {
 public:
  Emitter(g::Graph& graph, std::vector<g::Node>& out, const g::Node& origin)
      : graph_(graph), out_(out), grad_enabled_(origin.grad_enabled) {}

  int64_t value(const g::Value& like, std::vector<int64_t> shape, int64_t alias_of = -1) {
    g::Value v;
    v.id = int64_t(graph_.values.size());
    v.kind = g::ValueKind::Node;
    v.dtype = like.dtype;
    v.device = like.device;
    v.strides = g::contiguous_strides(shape);
    v.shape = std::move(shape);
    v.alias_of = alias_of;
    graph_.values.push_back(v);
    return v.id;
  }
  // A node of `op` writing `result` (a new value id, or an existing one to keep its consumers).
  int64_t node(const std::string& op, std::vector<g::Arg> args, int64_t result) {
    g::Node n;
    n.op = op;
    n.args = std::move(args);
    n.outputs = {{result}};
    n.grad_enabled = grad_enabled_;
    out_.push_back(std::move(n));
    return result;
  }

 private:
  g::Graph& graph_;
  std::vector<g::Node>& out_;
  bool grad_enabled_;
};

bool is_tensor(const g::Node& n, size_t i) { return i < n.args.size() && n.args[i].kind == Kind::Tensor; }

// native_batch_norm(input, weight?, bias?, running_mean?, running_var?, training, momentum, eps)
// -> (out, save_mean, save_invstd), when it is an evaluation-mode one this rewrite covers.
bool is_evaluation_batch_norm(const g::Graph& graph, const g::Node& n, const std::vector<int>& uses) {
  if (n.op != "native_batch_norm" || n.args.size() != 8 || n.outputs.size() != 3 || n.in_place()) return false;
  if (!is_tensor(n, 0) || !is_tensor(n, 3) || !is_tensor(n, 4) || n.args[5].kind != Kind::Bool || n.args[5].i != 0 ||
      n.args[7].kind != Kind::Double)
    return false;
  for (size_t k = 1; k < 3; ++k)  // the saved statistics must be unused (a backward would read them)
    for (int64_t id : n.outputs[k])
      if (uses[size_t(id)] > 0) return false;
  const g::Value& x = graph.value(n.args[0].tensor);
  if ((x.dtype != TS_FLOAT32 && x.dtype != TS_FLOAT64) || x.shape.size() < 2 || !x.is_contiguous() ||
      n.outputs[0].size() != 1 || !graph.value(n.outputs[0][0]).is_contiguous())
    return false;  // (the kernels' products are laid out contiguously)
  for (size_t i : {1, 2, 3, 4}) {
    if (!is_tensor(n, i)) continue;  // weight and bias may be None
    const g::Value& v = graph.value(n.args[i].tensor);
    if (v.dtype != x.dtype || v.shape != std::vector<int64_t>{x.shape[1]} || v.device.type != x.device.type ||
        v.device.index != x.device.index)
      return false;
  }
  return true;
}

void decompose_batch_norm(g::Graph& graph, const g::Node& n, std::vector<g::Node>& out) {
  Emitter e(graph, out, n);
  const g::Value x = graph.value(n.args[0].tensor);
  const int64_t channels = x.shape[1];
  const std::vector<int64_t> per_channel{channels};
  std::vector<int64_t> broadcast(x.shape.size() - 1, 1);  // [C, 1, ..., 1]: aligns with x's dim 1
  broadcast[0] = channels;
  const int64_t mean = n.args[3].tensor, var = n.args[4].tensor;
  const double eps = n.args[7].d;

  int64_t scale = e.node("rsqrt", {tensor_arg(e.node("add.Scalar", {tensor_arg(var), double_arg(eps), int_arg(1)},
                                                     e.value(x, per_channel)))},
                         e.value(x, per_channel));
  if (is_tensor(n, 1)) scale = e.node("mul.Tensor", {tensor_arg(scale), tensor_arg(n.args[1].tensor)}, e.value(x, per_channel));
  const int64_t mean_scaled = e.node("mul.Tensor", {tensor_arg(mean), tensor_arg(scale)}, e.value(x, per_channel));
  const int64_t shift =
      is_tensor(n, 2)
          ? e.node("sub.Tensor", {tensor_arg(n.args[2].tensor), tensor_arg(mean_scaled), int_arg(1)}, e.value(x, per_channel))
          : e.node("neg", {tensor_arg(mean_scaled)}, e.value(x, per_channel));
  const int64_t scale_view = e.node("view", {tensor_arg(scale), ints_arg(broadcast)}, e.value(x, broadcast, scale));
  const int64_t shift_view = e.node("view", {tensor_arg(shift), ints_arg(broadcast)}, e.value(x, broadcast, shift));
  const int64_t scaled = e.node("mul.Tensor", {tensor_arg(x.id), tensor_arg(scale_view)}, e.value(x, x.shape));
  e.node("add.Tensor", {tensor_arg(scaled), tensor_arg(shift_view), int_arg(1)}, n.outputs[0][0]);
}

// "relu_" -> "relu", "add_.Tensor" -> "add.Tensor"; "" when `op` is no in-place name.
std::string out_of_place_name(const std::string& op) {
  const size_t dot = op.find('.');
  std::string base = op.substr(0, dot);
  if (base.size() < 2 || base.back() != '_' || base[base.size() - 2] == '_') return "";
  base.pop_back();
  return dot == std::string::npos ? base : base + op.substr(dot);
}

// Node `i` writes an element-wise result over its first argument, a value the graph made that
// nothing views and nothing reads afterwards: computing it out of place changes nothing but lets
// it fuse (a ReLU(inplace=True) after a batch norm otherwise stays a pass of its own).
bool functionalizable(const g::Graph& graph, size_t i, const std::vector<std::vector<size_t>>& readers,
                      const std::vector<int>& views) {
  const g::Node& n = graph.nodes[i];
  if (n.mutates != std::vector<int>{0} || !is_tensor(n, 0) || n.outputs.size() != 1 || n.outputs[0].size() != 1)
    return false;
  const std::string functional = out_of_place_name(n.op);
  if (functional.empty() || !is_pointwise(functional)) return false;
  const int64_t target = n.args[0].tensor;
  const g::Value& t = graph.value(target);
  // Not a view, viewed by nothing but this node's output, laid out as the kernels write
  if (t.kind != g::ValueKind::Node || t.alias_of >= 0 || views[size_t(target)] > 1 || !t.is_contiguous()) return false;
  for (size_t reader : readers[size_t(target)])
    if (reader > i) return false;  // would read the written contents under the old id
  for (int64_t id : graph.outputs)
    if (id == target) return false;
  return true;
}

void functionalize_in_place(g::Graph& graph) {
  std::vector<std::vector<size_t>> readers(graph.values.size());
  for (size_t i = 0; i < graph.nodes.size(); ++i)
    for (const g::Arg& a : graph.nodes[i].args) {
      if (a.kind == Kind::Tensor) readers[size_t(a.tensor)].push_back(i);
      for (int64_t id : a.tensors)
        if (id >= 0) readers[size_t(id)].push_back(i);
    }
  std::vector<int> views(graph.values.size(), 0);  // values aliasing each value
  for (const g::Value& v : graph.values)
    if (v.alias_of >= 0) ++views[size_t(v.alias_of)];
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    if (!functionalizable(graph, i, readers, views)) continue;
    g::Node& n = graph.nodes[i];
    n.op = out_of_place_name(n.op);
    n.mutates.clear();
    graph.values[size_t(n.outputs[0][0])].alias_of = -1;  // a new tensor, as the functional operator makes
  }
}

// ---- a sum of slice_backwards that tile a dim is a cat
// The backward of split / chunk / narrow pieces that together cover a dim (q, k, v from one
// projection): each slice_backward writes a zero tensor of the full size with its piece in
// place, and the adds sum them: three zero fills and a three-way add where a cat writes the
// result once.

struct Piece {
  int64_t grad, start, end;
};

// Collects the slice_backward pieces summed into `value` (a tree of adds of slice_backwards, each
// value read once) and the tree's nodes; false when the tree holds anything else.
bool collect_pieces(const g::Graph& graph, const std::vector<int>& uses, const std::vector<int64_t>& producer,
                    int64_t value, std::vector<Piece>& pieces, std::vector<size_t>& nodes, const g::Node*& first) {
  const int64_t at = producer[size_t(value)];
  if (at < 0) return false;
  const g::Node& n = graph.nodes[size_t(at)];
  if (n.in_place()) return false;
  if (n.op == "slice_backward") {
    if (n.args.size() != 6 || !is_tensor(n, 0) || n.args[1].kind != Kind::Ints || n.args[5].i != 1) return false;
    if (first && (first->args[1].ints != n.args[1].ints || first->args[2].i != n.args[2].i)) return false;
    if (!first) first = &n;
    pieces.push_back({n.args[0].tensor, n.args[3].i, n.args[4].i});
    nodes.push_back(size_t(at));
    return true;
  }
  if (n.op != "add.Tensor" || !is_tensor(n, 0) || !is_tensor(n, 1)) return false;
  if (n.args.size() > 2 && !(n.args[2].kind == Kind::Int && n.args[2].i == 1)) return false;
  nodes.push_back(size_t(at));
  for (size_t k = 0; k < 2; ++k) {
    const int64_t operand = n.args[k].tensor;
    if (uses[size_t(operand)] != 1 || !collect_pieces(graph, uses, producer, operand, pieces, nodes, first))
      return false;
  }
  return true;
}

void slices_to_cat(g::Graph& graph) {
  const std::vector<int> uses = value_uses(graph);
  std::vector<int64_t> producer(graph.values.size(), -1);
  for (size_t i = 0; i < graph.nodes.size(); ++i)
    for (const auto& out : graph.nodes[i].outputs)
      for (int64_t id : out) producer[size_t(id)] = int64_t(i);
  std::vector<bool> removed(graph.nodes.size(), false);
  for (size_t i = graph.nodes.size(); i-- > 0;) {  // roots first: an inner add is taken with its root
    g::Node& root = graph.nodes[i];
    if (removed[i] || root.op != "add.Tensor" || root.output() < 0) continue;
    std::vector<Piece> pieces;
    std::vector<size_t> nodes;
    const g::Node* first = nullptr;
    if (!collect_pieces(graph, uses, producer, root.output(), pieces, nodes, first) || pieces.size() < 2) continue;
    const std::vector<int64_t>& sizes = first->args[1].ints;
    const int64_t dim = first->args[2].i < 0 ? first->args[2].i + int64_t(sizes.size()) : first->args[2].i;
    if (dim < 0 || dim >= int64_t(sizes.size())) continue;
    std::sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) { return a.start < b.start; });
    bool tiles = pieces.front().start == 0 && pieces.back().end == sizes[size_t(dim)];
    for (size_t k = 0; k + 1 < pieces.size() && tiles; ++k) tiles = pieces[k].end == pieces[k + 1].start;
    for (const Piece& p : pieces) tiles = tiles && graph.value(p.grad).shape.size() == sizes.size() &&
                                          graph.value(p.grad).shape[size_t(dim)] == p.end - p.start;
    if (!tiles) continue;
    g::Node cat;
    cat.op = "cat";
    cat.grad_enabled = root.grad_enabled;
    cat.outputs = root.outputs;
    g::Arg list;
    list.kind = Kind::TensorList;
    for (const Piece& p : pieces) list.tensors.push_back(p.grad);
    cat.args = {list, int_arg(dim)};
    for (size_t node : nodes) removed[node] = node != i;
    root = std::move(cat);
  }
  std::vector<g::Node> kept;
  kept.reserve(graph.nodes.size());
  for (size_t i = 0; i < graph.nodes.size(); ++i)
    if (!removed[i]) kept.push_back(std::move(graph.nodes[i]));
  graph.nodes = std::move(kept);
}

}  // namespace

std::vector<int> value_uses(const g::Graph& graph) {
  std::vector<int> uses(graph.values.size(), 0);
  auto use = [&](int64_t id) {
    if (id >= 0 && size_t(id) < uses.size()) ++uses[size_t(id)];
  };
  for (int64_t id : graph.outputs) use(id);
  for (const auto& [position, id] : graph.mutated_inputs) use(id);
  for (const g::Node& n : graph.nodes)
    for (const g::Arg& a : n.args) {
      if (a.kind == Kind::Tensor) use(a.tensor);
      for (int64_t id : a.tensors) use(id);
    }
  return uses;
}

g::Graph decompose_for_fusion(g::Graph graph) {
  functionalize_in_place(graph);
  slices_to_cat(graph);
  const std::vector<int> uses = value_uses(graph);
  std::vector<g::Node> nodes;
  nodes.reserve(graph.nodes.size());
  for (g::Node& n : graph.nodes) {
    if (is_evaluation_batch_norm(graph, n, uses)) decompose_batch_norm(graph, n, nodes);
    else nodes.push_back(std::move(n));
  }
  graph.nodes = std::move(nodes);
  return graph;
}

}  // namespace tessera::inductor

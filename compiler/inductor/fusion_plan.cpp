#include "fusion_plan.h"
#include "pointwise_ops.h"

#include <algorithm>
#include <climits>
#include <optional>
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

// Can `node` join a kernel computing `dtype` values of `shape` on devices of `device_type`?
bool fusible(const g::Graph& graph, const g::Node& node, int32_t device_type) {
  if (!is_pointwise(node.op) || node.in_place() || node.outputs.size() != 1 || node.outputs[0].size() != 1) return false;
  const g::Value& out = graph.value(node.outputs[0][0]);
  if (out.device.type != device_type || (out.dtype != TS_FLOAT32 && out.dtype != TS_FLOAT64)) return false;
  if (!out.is_contiguous() || out.alias_of >= 0 || out.numel() == 0) return false;
  for (size_t i = 0; i < node.args.size(); ++i) {
    const g::Arg& a = node.args[i];
    if (a.kind == g::Arg::Kind::TensorList) return false;
    if (a.kind != g::Arg::Kind::Tensor) continue;
    const g::Value& v = graph.value(a.tensor);
    const bool condition = bool_argument(node.op) == int(i);
    if (v.device.type != out.device.type || v.device.index != out.device.index || !broadcasts_to(v.shape, out.shape))
      return false;
    if (condition ? v.dtype != TS_BOOL : v.dtype != out.dtype) return false;
  }
  // A lowering must exist for these very arguments.
  return lower_pointwise(node, [](int) { return std::string("x"); }, "float").has_value();
}

// A softmax, log_softmax or layer_norm over the last dimension of a contiguous CPU float tensor.
RowHead row_head(const g::Graph& graph, const g::Node& node) {
  RowHead head = RowHead::None;
  if (node.op == "_softmax_backward_data" || node.op == "_log_softmax_backward_data") {
    // (grad_output, output, dim, input_dtype): both rows contiguous, of one shape and dtype
    if (node.args.size() < 4 || node.args[0].kind != g::Arg::Kind::Tensor || node.args[1].kind != g::Arg::Kind::Tensor ||
        node.args[2].kind != g::Arg::Kind::Int || node.in_place())
      return RowHead::None;
    const g::Value& grad = graph.value(node.args[0].tensor);
    const g::Value& out = graph.value(node.args[1].tensor);
    const int64_t nd = int64_t(out.shape.size());
    const int64_t dim = node.args[2].i < 0 ? node.args[2].i + nd : node.args[2].i;
    if (grad.shape != out.shape || grad.dtype != out.dtype || !grad.is_contiguous() || !out.is_contiguous() ||
        out.device.type != 0 || grad.device.type != 0 || (out.dtype != TS_FLOAT32 && out.dtype != TS_FLOAT64) ||
        nd == 0 || dim != nd - 1 || out.numel() == 0 ||
        (node.args[3].kind == g::Arg::Kind::Dtype && node.args[3].i != out.dtype))
      return RowHead::None;
    return node.op == "_softmax_backward_data" ? RowHead::SoftmaxBackward : RowHead::LogSoftmaxBackward;
  }
  if (node.op == "softmax.int" || node.op == "_softmax") head = RowHead::Softmax;
  else if (node.op == "log_softmax.int" || node.op == "_log_softmax") head = RowHead::LogSoftmax;
  else if (node.op == "native_layer_norm") head = RowHead::LayerNorm;
  if (head == RowHead::None || node.in_place() || node.args.empty() || node.args[0].kind != g::Arg::Kind::Tensor)
    return RowHead::None;
  const g::Value& x = graph.value(node.args[0].tensor);
  if (x.device.type != 0 || (x.dtype != TS_FLOAT32 && x.dtype != TS_FLOAT64) || x.shape.empty() ||
      !x.is_contiguous() || x.numel() == 0)
    return RowHead::None;
  const int64_t nd = int64_t(x.shape.size());
  if (head == RowHead::LayerNorm) {
    if (node.args.size() < 5 || node.args[1].kind != g::Arg::Kind::Ints || node.args[1].ints.size() != 1 ||
        node.args[1].ints[0] != x.shape.back())
      return RowHead::None;
    for (size_t i : {2, 3}) {  // weight and bias: None or [D] contiguous of x's dtype
      const g::Arg& a = node.args[i];
      if (a.kind == g::Arg::Kind::None) continue;
      if (a.kind != g::Arg::Kind::Tensor) return RowHead::None;
      const g::Value& w = graph.value(a.tensor);
      if (w.shape != std::vector<int64_t>{x.shape.back()} || w.strides != std::vector<int64_t>{1} ||
          w.dtype != x.dtype || w.device.type != 0)
        return RowHead::None;
    }
    return node.args[4].kind == g::Arg::Kind::Double ? head : RowHead::None;
  }
  if (node.args.size() < 3 || node.args[1].kind != g::Arg::Kind::Int) return RowHead::None;
  const int64_t dim = node.args[1].i < 0 ? node.args[1].i + nd : node.args[1].i;
  const bool keeps_dtype = node.args[2].kind == g::Arg::Kind::None ||
                           (node.args[2].kind == g::Arg::Kind::Bool && node.args[2].i == 0);
  return dim == nd - 1 && keeps_dtype ? head : RowHead::None;
}

// The dims of an nd-dim tensor not in `dims`, in order (never empty here: `dims` is not all).
std::vector<int64_t> kept_dims(const std::set<int64_t>& dims, int64_t nd) {
  std::vector<int64_t> kept;
  for (int64_t d = 0; d < nd; ++d)
    if (!dims.count(d)) kept.push_back(d);
  return kept;
}

// A sum, mean, amax or amin of a contiguous float tensor over a layout a kernel can generate
// (Reduction::Over), without a dtype change; nullopt otherwise.
std::optional<Reduction> reduction(const g::Graph& graph, const g::Node& node) {
  Reduction r;
  if (node.op == "sum.dim_IntList") r.op = Reduction::Op::Sum;
  else if (node.op == "mean.dim") r.op = Reduction::Op::Mean;
  else if (node.op == "amax") r.op = Reduction::Op::Max;
  else if (node.op == "amin") r.op = Reduction::Op::Min;
  else return std::nullopt;
  const bool has_dtype = r.op == Reduction::Op::Sum || r.op == Reduction::Op::Mean;
  if (node.in_place() || node.args.size() < (has_dtype ? 4u : 3u) || node.args[0].kind != g::Arg::Kind::Tensor ||
      (has_dtype && node.args[3].kind != g::Arg::Kind::None) || node.outputs.size() != 1)
    return std::nullopt;
  const g::Value& x = graph.value(node.args[0].tensor);
  const g::Value& out = graph.value(node.outputs[0][0]);
  if (x.device.type != 0 || (x.dtype != TS_FLOAT32 && x.dtype != TS_FLOAT64) || out.dtype != x.dtype ||
      !x.is_contiguous() || !out.is_contiguous() || x.numel() == 0 || x.shape.empty())
    return std::nullopt;
  const int64_t nd = int64_t(x.shape.size());
  std::set<int64_t> dims;
  if (node.args[1].kind == g::Arg::Kind::Ints) {
    for (int64_t d : node.args[1].ints) dims.insert(d < 0 ? d + nd : d);
  } else if (node.args[1].kind != g::Arg::Kind::None) {
    return std::nullopt;
  }
  if (dims.empty() || int64_t(dims.size()) == nd) r.over = Reduction::Over::All;
  else if (dims == std::set<int64_t>{nd - 1}) r.over = Reduction::Over::Rows;
  else if (int64_t(dims.size()) == nd - 1 && !dims.count(nd - 1)) r.over = Reduction::Over::Columns;
  else if (!dims.count(nd - 1) && *dims.rbegin() - *dims.begin() + 1 == int64_t(dims.size())) {
    r.over = Reduction::Over::Middle;  // one block of dims, the last dim after it
    for (int64_t d = 0; d < nd; ++d)
      (d < *dims.begin() ? r.outer : dims.count(d) ? r.middle : r.inner) *= x.shape[size_t(d)];
  } else if (std::vector<int64_t> kept = kept_dims(dims, nd);
             dims.count(nd - 1) && kept.back() - kept.front() + 1 == int64_t(kept.size())) {
    r.over = Reduction::Over::Around;  // every dim but one block, the last dim reduced
    for (int64_t d = 0; d < nd; ++d)
      (d < kept.front() ? r.outer : d <= kept.back() ? r.middle : r.inner) *= x.shape[size_t(d)];
  } else {
    return std::nullopt;
  }
  r.input_shape = x.shape;
  return r;
}

// The values the open kernel `k` produces so far (its head's outputs and its nodes').
std::set<int64_t> open_values(const g::Graph& graph, const FusedKernel& k) {
  std::set<int64_t> ids;
  auto add = [&](size_t n) {
    for (const auto& out : graph.nodes[n].outputs)
      for (int64_t id : out) ids.insert(id);
  };
  for (size_t n : k.prologue) add(n);
  if (k.head != RowHead::None) add(k.head_node);
  for (size_t n : k.nodes) add(n);
  return ids;
}

// Every tensor the open run's nodes read from memory has its shape and is contiguous (a
// reduction over all dims indexes them by the flat element index alone).
bool dense_inputs(const g::Graph& graph, const FusedKernel& k) {
  std::set<int64_t> made;
  for (size_t n : k.nodes)
    for (int64_t id : graph.nodes[n].outputs[0]) made.insert(id);
  for (size_t n : k.nodes)
    for (const g::Arg& a : graph.nodes[n].args)
      if (a.kind == g::Arg::Kind::Tensor && !made.count(a.tensor)) {
        const g::Value& v = graph.value(a.tensor);
        if (v.shape != k.shape || !v.is_contiguous()) return false;
      }
  return true;
}

bool reads_any(const g::Node& node, const std::set<int64_t>& ids) {
  for (const g::Arg& a : node.args) {
    if (a.kind == g::Arg::Kind::Tensor && ids.count(a.tensor)) return true;
    for (int64_t id : a.tensors)
      if (ids.count(id)) return true;
  }
  return false;
}

// A node after a reduction reads the reduced values, or tensors in memory of exactly the reduced
// shape (contiguous): the kernel indexes them by the reduced element's index.
bool reads_reduced_values_only(const g::Graph& graph, const g::Node& node, const FusedKernel& k) {
  const std::set<int64_t> open = open_values(graph, k);
  for (const g::Arg& a : node.args) {
    if (a.kind != g::Arg::Kind::Tensor || open.count(a.tensor)) continue;
    const g::Value& v = graph.value(a.tensor);
    if (v.shape != k.shape || !v.is_contiguous()) return false;
  }
  // The prologue's values have the reduction's input shape: a node reading one is not of this kernel.
  std::set<int64_t> prologue;
  for (size_t n : k.prologue)
    for (int64_t id : graph.nodes[n].outputs[0]) prologue.insert(id);
  for (const g::Arg& a : node.args)
    if (a.kind == g::Arg::Kind::Tensor && prologue.count(a.tensor)) return false;
  return true;
}

}  // namespace

FusionPlan plan_fusion(const g::Graph& graph, const FusionTarget& target) {
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

  // The plan step that computes each value (-1: the graph's inputs and constants; kOpen: the
  // kernel still open), and the last step that writes a tensor in place: horizontal fusion
  // moves a node into an earlier kernel only past steps that write nothing.
  constexpr int64_t kOpen = INT64_MAX;
  std::vector<int64_t> made_at(graph.values.size(), -1);
  int64_t last_write_step = -1;
  auto made = [&](size_t n, int64_t step) {
    for (const auto& ids : graph.nodes[n].outputs)
      for (int64_t id : ids)
        if (id >= 0) made_at[size_t(id)] = step;
  };
  auto push_extern = [&](size_t n) {
    made(n, int64_t(plan.steps.size()));
    if (graph.nodes[n].in_place()) last_write_step = int64_t(plan.steps.size());
    plan.steps.push_back({Step::Kind::Extern, n});
  };
  auto close = [&](FusedKernel& k) {
    if (k.nodes.empty() && k.head == RowHead::None) return;
    if (k.nodes.empty() && k.prologue.empty()) {  // a row reduction alone: the library's kernel is as good
      push_extern(k.head_node);
      k = FusedKernel{};
      return;
    }
    const int64_t step = int64_t(plan.steps.size());
    for (size_t n : k.prologue) made(n, step);
    if (k.head != RowHead::None) made(k.head_node, step);
    for (size_t n : k.nodes) made(n, step);
    plan.steps.push_back({Step::Kind::Fused, plan.kernels.size()});
    plan.kernels.push_back(std::move(k));
    k = FusedKernel{};
  };
  // Horizontal fusion: an element-wise node that starts no run of the open kernel joins a recent
  // plain kernel of its shape and dtype when everything it reads exists by then (it is then
  // computed in that kernel's loop, reading shared inputs once). Only a few steps back, so a
  // value is not made long before it is needed.
  constexpr size_t kLookBack = 8;
  auto join_earlier = [&](size_t n) {
    const g::Node& node = graph.nodes[n];
    const g::Value& out = graph.value(node.outputs[0][0]);
    for (size_t s = plan.steps.size(); s-- > 0 && plan.steps.size() - s <= kLookBack && int64_t(s) > last_write_step;) {
      bool ready = true;
      for (const g::Arg& a : node.args)
        if (a.kind == g::Arg::Kind::Tensor) ready &= made_at[size_t(a.tensor)] <= int64_t(s);
      if (!ready) return false;  // an earlier kernel would be earlier still than what it reads
      if (plan.steps[s].kind != Step::Kind::Fused) continue;
      FusedKernel& k = plan.kernels[plan.steps[s].index];
      if (k.head != RowHead::None || k.shape != out.shape || k.dtype != out.dtype) continue;
      k.nodes.push_back(n);
      made(n, int64_t(s));
      return true;
    }
    return false;
  };
  // A kernel's inputs (read from memory) and outputs (values something outside it reads).
  auto finish = [&](FusedKernel& k) {
    std::set<size_t> members(k.nodes.begin(), k.nodes.end());
    std::set<int64_t> produced;
    std::vector<size_t> all = k.prologue;
    if (k.head != RowHead::None) {
      all.push_back(k.head_node);
      members.insert(k.head_node);
    }
    all.insert(all.end(), k.nodes.begin(), k.nodes.end());
    members.insert(k.prologue.begin(), k.prologue.end());
    for (size_t n : all)
      for (const auto& ids : graph.nodes[n].outputs)
        for (int64_t id : ids)
          if (id >= 0) produced.insert(id);
    for (size_t n : all) {
      for (const g::Arg& a : graph.nodes[n].args)
        if (a.kind == g::Arg::Kind::Tensor && !produced.count(a.tensor) &&
            std::find(k.inputs.begin(), k.inputs.end(), a.tensor) == k.inputs.end())
          k.inputs.push_back(a.tensor);
      for (const auto& ids : graph.nodes[n].outputs)
        for (int64_t out : ids) {
          if (out < 0) continue;
          bool escapes = is_output[size_t(out)];
          for (size_t u : users[size_t(out)]) escapes |= !members.count(u);
          if (escapes) k.outputs.push_back(out);
        }
    }
  };

  FusedKernel current;
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const g::Node& node = graph.nodes[n];
    if (auto r = target.row_heads ? reduction(graph, node) : std::nullopt; r) {
      // The open element-wise run computes the reduction's input: the reduction ends the run,
      // which becomes its prologue (the reduced tensor's input never goes to memory unless
      // something else reads it). A reduction of a tensor in memory stays the library's kernel.
      const bool feeds = current.head == RowHead::None && !current.nodes.empty() && current.shape == r->input_shape &&
                         current.dtype == graph.value(node.args[0].tensor).dtype &&
                         open_values(graph, current).count(node.args[0].tensor) &&
                         (!r->reads_flat() || dense_inputs(graph, current));
      if (feeds) {
        current.prologue = std::move(current.nodes);
        current.nodes.clear();
        current.head = RowHead::Reduction;
        current.head_node = n;
        current.reduction = *r;
        current.shape = graph.value(node.outputs[0][0]).shape;
        made(n, kOpen);
        continue;
      }
    }
    if (RowHead head = target.row_heads ? row_head(graph, node) : RowHead::None; head != RowHead::None) {
      const g::Value& out = graph.value(node.outputs[0][0]);
      // An open element-wise run of the head's shape that computes its row input becomes the
      // head's prologue: the row is computed in each pass instead of read from a buffer.
      const std::set<int64_t> open = open_values(graph, current);
      const bool feeds = current.head == RowHead::None && !current.nodes.empty() && current.shape == out.shape &&
                         current.dtype == out.dtype && open.count(node.args[0].tensor);
      if (feeds) {
        current.prologue = std::move(current.nodes);
        current.nodes.clear();
      } else {
        close(current);
      }
      current.head = head;
      current.head_node = n;
      current.shape = out.shape;
      current.dtype = out.dtype;
      made(n, kOpen);
      continue;
    }
    if (fusible(graph, node, target.device_type)) {
      const g::Value& out = graph.value(node.outputs[0][0]);
      const bool open = !current.nodes.empty() || current.head != RowHead::None;
      const bool joins = open && out.shape == current.shape && out.dtype == current.dtype &&
                         (current.head != RowHead::Reduction || reads_reduced_values_only(graph, node, current));
      if (!joins && join_earlier(n)) continue;
      if (open && !joins) close(current);
      if (current.nodes.empty() && current.head == RowHead::None) current.shape = out.shape, current.dtype = out.dtype;
      current.nodes.push_back(n);
      made(n, kOpen);
      continue;
    }
    // A call that reads nothing the open kernel computes, and writes nothing, can run before
    // that kernel: the kernel then goes on past it (a causal mask built between the scaling
    // of the scores and the masked_fill does not split them into two kernels).
    if (!node.in_place() && !reads_any(node, open_values(graph, current))) {
      push_extern(n);
      continue;
    }
    close(current);
    push_extern(n);
  }
  close(current);
  for (FusedKernel& k : plan.kernels) finish(k);
  return plan;
}

}  // namespace tessera::inductor

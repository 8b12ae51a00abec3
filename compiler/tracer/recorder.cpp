#include "recorder.h"

#include <algorithm>
#include <set>

namespace tessera::tracer {
namespace {

namespace g = sdk::graph;

// What the Tracer slot of a tensor holds: the trace that gave it a value, and the value.
struct SlotTag {
  uint64_t trace;
  int64_t value;
};

const SlotTag* tag_of(ts_tensor t) { return static_cast<const SlotTag*>(sdk::host().tensor_get_slot(t, TS_SLOT_TRACER)); }

void set_tag(ts_tensor t, uint64_t trace, int64_t value) {
  sdk::check_host(sdk::host().tensor_set_slot(t, TS_SLOT_TRACER, new SlotTag{trace, value},
                                              [](void* p) { delete static_cast<SlotTag*>(p); }));
}

}  // namespace

std::string Recorder::geometry_key(ts_tensor t) {
  sdk::TensorRef ref = sdk::TensorRef::borrow(t);
  std::string key = sdk::cat(ref.view().data, ":", ref.storage_offset(), ":", ref.dtype(), ":");
  for (int64_t s : ref.sizes()) key += sdk::cat(s, ",");
  key += ":";
  for (int64_t s : ref.strides()) key += sdk::cat(s, ",");
  return key;
}

int64_t Recorder::new_value(ts_tensor t, g::ValueKind kind) {
  sdk::TensorRef ref = sdk::TensorRef::borrow(t);
  g::Value v;
  v.id = int64_t(graph_.values.size());
  v.kind = kind;
  v.dtype = ref.dtype();
  v.shape = ref.shape_vector();
  v.strides.assign(ref.strides().begin(), ref.strides().end());
  v.storage_offset = ref.storage_offset();
  v.device = ref.device();
  graph_.values.push_back(std::move(v));
  set_tag(t, trace_id_, graph_.values.back().id);
  if (ref.view().data) by_geometry_[geometry_key(t)] = graph_.values.back().id;
  return graph_.values.back().id;
}

void Recorder::add_input(ts_tensor t) {
  const int64_t id = new_value(t, g::ValueKind::Input);
  graph_.inputs.push_back(id);
  input_tensors_.push_back(t);
}

int64_t Recorder::value_of(ts_tensor t) {
  if (const SlotTag* tag = tag_of(t); tag && tag->trace == trace_id_) return tag->value;
  if (sdk::TensorRef::borrow(t).view().data)
    if (auto it = by_geometry_.find(geometry_key(t)); it != by_geometry_.end()) {
      set_tag(t, trace_id_, it->second);
      return it->second;
    }
  const int64_t id = new_value(t, g::ValueKind::Constant);
  graph_.constants.push_back(id);
  constants_.push_back(sdk::TensorRef::retain(t));
  return id;
}

g::Arg Recorder::encode(const ts_value& v) {
  using K = g::Arg::Kind;
  g::Arg a;
  switch (v.tag) {
    case TS_VALUE_NONE: a.kind = K::None; break;
    case TS_VALUE_TENSOR:
      if (!v.u.tensor) break;  // an undefined optional tensor: None
      a.kind = K::Tensor;
      a.tensor = value_of(v.u.tensor);
      break;
    case TS_VALUE_TENSOR_LIST:
      a.kind = K::TensorList;
      for (int64_t j = 0; j < v.u.tensors.size; ++j)
        a.tensors.push_back(v.u.tensors.data[j] ? value_of(v.u.tensors.data[j]) : -1);
      break;
    case TS_VALUE_INT: a.kind = K::Int, a.i = v.u.i; break;
    case TS_VALUE_DOUBLE: a.kind = K::Double, a.d = v.u.d; break;
    case TS_VALUE_BOOL: a.kind = K::Bool, a.i = v.u.b; break;
    case TS_VALUE_INT_LIST: a.kind = K::Ints, a.ints.assign(v.u.ints.data, v.u.ints.data + v.u.ints.size); break;
    case TS_VALUE_DOUBLE_LIST:
      a.kind = K::Doubles, a.doubles.assign(v.u.doubles.data, v.u.doubles.data + v.u.doubles.size);
      break;
    case TS_VALUE_STRING: a.kind = K::Str, a.str = v.u.str ? v.u.str : ""; break;
    case TS_VALUE_DTYPE: a.kind = K::Dtype, a.i = v.u.i; break;
    case TS_VALUE_DEVICE: a.kind = K::Device, a.device = v.u.device; break;
    default: sdk::fail(TS_ERROR, "tracer: an argument has an unknown value tag ", v.tag);
  }
  return a;
}

namespace {

// An operator that writes an argument without reading it: an uninitialised tensor it fills
// was initialised by the graph, not by the host.
bool writes_without_reading(std::string_view op, size_t argument, const std::vector<int>& mutates) {
  if (std::find(mutates.begin(), mutates.end(), int(argument)) == mutates.end()) return false;
  if (op.find(".out") != std::string_view::npos) return true;  // an out= variant's out
  static constexpr std::string_view fills[] = {"fill_", "zero_", "normal_", "uniform_", "random_", "bernoulli_",
                                               "exponential_", "geometric_", "cauchy_", "log_normal_"};
  for (std::string_view f : fills)
    if (op.substr(0, f.size()) == f) return true;
  return op.substr(0, 5) == "copy_" && argument == 0;
}

}  // namespace

void Recorder::snapshot_unwritten(const std::vector<ts_value>& arguments) {
  pending_snapshots_.clear();
  if (unwritten_.empty()) return;
  auto visit = [&](ts_tensor t) {
    const SlotTag* tag = t ? tag_of(t) : nullptr;
    if (tag && tag->trace == trace_id_ && unwritten_.count(tag->value) && !pending_snapshots_.count(tag->value))
      pending_snapshots_.emplace(tag->value, snapshot_(t));
  };
  for (const ts_value& a : arguments) {
    if (a.tag == TS_VALUE_TENSOR) visit(a.u.tensor);
    if (a.tag == TS_VALUE_TENSOR_LIST)
      for (int64_t j = 0; j < a.u.tensors.size; ++j) visit(a.u.tensors.data[j]);
  }
}

int64_t Recorder::lift(int64_t id, ts_tensor t, bool written_here) {
  // The factory's node goes: the constant stands for what it made.
  auto& nodes = graph_.nodes;
  nodes.erase(std::remove_if(nodes.begin(), nodes.end(),
                             [&](const g::Node& n) {
                               return n.outputs.size() == 1 && n.outputs[0].size() == 1 && n.outputs[0][0] == id;
                             }),
              nodes.end());
  unwritten_.erase(id);
  auto pending = pending_snapshots_.find(id);  // the contents before this call wrote them
  sdk::TensorRef contents = pending != pending_snapshots_.end() ? pending->second : snapshot_(t);
  const int64_t constant = new_value(t, g::ValueKind::Constant);
  graph_.constants.push_back(constant);
  constants_.push_back(std::move(contents));
  if (!written_here) return constant;
  // The call writes it in place (t.add_(1)): each replay starts from a fresh copy of the
  // constant, so the writes do not accumulate over replays.
  g::Node copy;
  copy.op = "clone";
  g::Arg self;
  self.kind = g::Arg::Kind::Tensor;
  self.tensor = constant;
  copy.args = {self};
  const int64_t fresh = new_value(t, g::ValueKind::Node);
  copy.outputs = {{fresh}};
  graph_.nodes.push_back(std::move(copy));
  return fresh;
}

void Recorder::lift_host_written(g::Node& node, const std::vector<ts_value>& arguments) {
  if (unwritten_.empty()) return;
  for (size_t i = 0; i < node.args.size(); ++i) {
    g::Arg& a = node.args[i];
    if (a.kind == g::Arg::Kind::Tensor && unwritten_.count(a.tensor)) {
      if (writes_without_reading(node.op, i, node.mutates))
        unwritten_.erase(a.tensor);
      else
        a.tensor = lift(a.tensor, arguments[i].u.tensor,
                        std::find(node.mutates.begin(), node.mutates.end(), int(i)) != node.mutates.end());
    } else if (a.kind == g::Arg::Kind::TensorList) {
      for (size_t j = 0; j < a.tensors.size(); ++j)
        if (a.tensors[j] >= 0 && unwritten_.count(a.tensors[j]))
          a.tensors[j] = lift(a.tensors[j], arguments[i].u.tensors.data[j], false);
    }
  }
}

void Recorder::record(const char* op_name, const std::vector<ts_value>& arguments,
                      const std::vector<uint64_t>& versions, const ts_stack* stack, bool grad_enabled) {
  g::Node node;
  node.op = op_name;
  node.grad_enabled = grad_enabled;
  for (const ts_value& v : arguments) node.args.push_back(encode(v));
  for (size_t i = 0; i < arguments.size(); ++i)  // written in place without being returned
    if (arguments[i].tag == TS_VALUE_TENSOR && arguments[i].u.tensor &&
        sdk::host().tensor_version(arguments[i].u.tensor) != versions[i])
      node.mutates.push_back(int(i));
  lift_host_written(node, arguments);
  // Storage identity of the tensor arguments: an output sharing one is a view or in-place result.
  auto storage_of = [](ts_tensor t) { return sdk::TensorRef::borrow(t).view().data; };
  for (int32_t r = 0; r < stack->size; ++r) {
    const ts_value& out = stack->values[r];
    std::vector<ts_tensor> tensors;
    if (out.tag == TS_VALUE_TENSOR && out.u.tensor) tensors.push_back(out.u.tensor);
    else if (out.tag == TS_VALUE_TENSOR_LIST) tensors.assign(out.u.tensors.data, out.u.tensors.data + out.u.tensors.size);
    else if (out.tag == TS_VALUE_TENSOR) {
      node.outputs.push_back({-1});  // an undefined optional tensor
      continue;
    } else {
      // A number read from a tensor (_local_scalar_dense): the graph cannot hold it.
      note_data_dependent_read(op_name);
      return;
    }
    std::vector<int64_t> ids;
    for (ts_tensor t : tensors) {
      int mutated = -1;
      int64_t alias = -1;
      for (size_t i = 0; i < arguments.size(); ++i) {
        const ts_value& a = arguments[i];
        if (a.tag != TS_VALUE_TENSOR || !a.u.tensor) continue;
        if (a.u.tensor == t) mutated = int(i);
        if (alias < 0 && storage_of(a.u.tensor) && storage_of(a.u.tensor) == storage_of(t))
          alias = node.args[i].tensor;
      }
      if (mutated >= 0 && std::find(node.mutates.begin(), node.mutates.end(), mutated) == node.mutates.end())
        node.mutates.push_back(mutated);
      const int64_t id = new_value(t, g::ValueKind::Node);  // an in-place result is a new SSA value
      graph_.values[size_t(id)].alias_of = alias;
      ids.push_back(id);
    }
    node.outputs.push_back(std::move(ids));
  }
  if (node.op.rfind("empty", 0) == 0 || node.op.rfind("new_empty", 0) == 0)
    for (const auto& ids : node.outputs)
      for (int64_t id : ids) unwritten_.insert(id);
  graph_.nodes.push_back(std::move(node));
}

void Recorder::record_resizes(const std::vector<ts_value>& arguments) {
  for (const ts_value& a : arguments) {
    if (a.tag != TS_VALUE_TENSOR || !a.u.tensor) continue;
    const SlotTag* tag = tag_of(a.u.tensor);
    if (!tag || tag->trace != trace_id_) continue;
    sdk::TensorRef t = sdk::TensorRef::borrow(a.u.tensor);
    const g::Value& known = graph_.values[size_t(tag->value)];
    if (std::ranges::equal(t.sizes(), known.shape) && std::ranges::equal(t.strides(), known.strides)) continue;
    g::Node node;
    node.op = "tracer::resize_";
    g::Arg self;
    self.kind = g::Arg::Kind::Tensor;
    self.tensor = tag->value;
    g::Arg size;
    size.kind = g::Arg::Kind::Ints;
    size.ints = t.shape_vector();
    node.args = {self, size};
    node.mutates = {0};
    const int64_t alias = tag->value;
    const int64_t id = new_value(a.u.tensor, g::ValueKind::Node);
    graph_.values[size_t(id)].alias_of = alias;
    node.outputs = {{id}};
    graph_.nodes.push_back(std::move(node));
  }
}

std::string Recorder::finish(const std::vector<ts_tensor>& outputs) {
  for (ts_tensor t : outputs) graph_.outputs.push_back(value_of(t));
  std::set<int64_t> written;  // values written in place without a new SSA value
  for (const g::Node& n : graph_.nodes)
    for (int i : n.mutates) written.insert(n.args[size_t(i)].tensor);
  for (size_t i = 0; i < input_tensors_.size(); ++i) {
    const SlotTag* tag = tag_of(input_tensors_[i]);
    if (tag && tag->trace == trace_id_ && (tag->value != graph_.inputs[i] || written.count(graph_.inputs[i])))
      graph_.mutated_inputs.emplace_back(int64_t(i), tag->value);
  }
  return g::to_json(graph_);
}

}  // namespace tessera::tracer

// The backward engine. The graph is walked once to count each node's dependencies, then nodes
// run from a ready queue (latest recorded first) as soon as every gradient they wait for has
// arrived. The calling thread is the CPU worker and keeps all the bookkeeping; the formulas of
// nodes whose gradients live on another device type run on one worker thread per device type
// (started for the backward call that needs it), so a device's work overlaps the CPU's.
// Separate graphs on separate threads run independently.
#include "engine.h"

#include "custom_function.h"
#include "device_workers.h"

#include <tessera/sdk/ops.h>

#include <algorithm>
#include <queue>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace tessera::autograd {
namespace {

std::string shape_text(std::span<const int64_t> s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// Makes a gradient fit the input it flows into: same dtype (a float64 grad into a float32
// input is cast), same shape (a mismatch is the formula's bug, reported clearly).
TensorRef conform(const TensorRef& g, const InputMeta& meta, const Node& node, size_t i) {
  TensorRef out = g;
  if (out.dtype() != meta.dtype) out = sdk::ops::to(out, meta.dtype);
  auto shape = out.sizes();
  if (!std::equal(shape.begin(), shape.end(), meta.shape.begin(), meta.shape.end()))
    throw sdk::Error(TS_ERROR_VALUE, sdk::cat("autograd: ", node.name(), " (", node.op_name(), ") received a gradient of shape ",
                                              shape_text(shape), " for its output ", i, " of shape ",
                                              shape_text(meta.shape)));
  return out;
}

bool has_nan(const TensorRef& t) {
  if (!t.defined() || !is_differentiable_dtype(t.dtype()) || t.numel() == 0) return false;
  TensorRef bad = sdk::ops::sum(sdk::ops::ne(t, t), std::nullopt, false, std::nullopt);  // NaN != NaN
  TensorRef host_copy = sdk::ops::to(bad, TS_INT64);
  if (host_copy.device().type != 0) return false;  // checked on host-accessible devices only
  return *host_copy.data<int64_t>() != 0;
}

struct ByNewestFirst {
  bool operator()(const Node* a, const Node* b) const { return a->sequence_nr < b->sequence_nr; }
};

// Where a node's formula runs: on the worker of the device type its gradients live on. Nodes
// that call back into a frontend (a leaf's hooks in AccumulateGrad, a custom Function's
// backward) stay on the calling thread, where the frontend expects them.
int32_t worker_device_type(const Node* n) {
  if (n->input_meta.empty() || n->input_meta[0].device.type == kCpuDeviceType) return kCpuDeviceType;
  if (dynamic_cast<const AccumulateGrad*>(n) || dynamic_cast<const CustomFunctionNode*>(n)) return kCpuDeviceType;
  return n->input_meta[0].device.type;
}

}  // namespace

GradList apply_node(Node* n, GradList grads) {
  GradList outputs;
  // PyTorch's name for a backward node's range, so traces read the same.
  const std::string range = sdk::observing() ? sdk::cat("autograd::engine::evaluate_function: ", n->name()) : "";
  sdk::ObservedRange observed(range.c_str(), int64_t(n->sequence_nr));
  try {
    outputs = n->apply(std::move(grads));
  } catch (const sdk::Error& e) {
    if (!anomaly_mode_enabled()) throw;
    throw sdk::Error(e.status(), sdk::cat(e.what(), " [anomaly mode: in the backward of '", n->op_name(), "' (",
                                          n->name(), ")]"));
  }
  if (anomaly_mode_enabled())
    for (size_t j = 0; j < outputs.size(); ++j)
      if (has_nan(outputs[j]))
        throw sdk::Error(TS_ERROR, sdk::cat("Function '", n->name(), "' returned nan values in its ", j,
                                            "th output; the forward operator was '", n->op_name(), "'"));
  return outputs;
}

TensorRef run_hooks(const std::vector<int64_t>& ids, TensorRef grad) {
  for (int64_t id : ids) {
    ts_value values[1] = {grad.defined() ? sdk::value(grad) : sdk::none()};
    ts_stack stack{sizeof(ts_stack), values, 1, 1};
    sdk::check_host(sdk::host().invoke_callback(sdk::current_call(), id, &stack));
    if (stack.size >= 1 && values[0].tag == TS_VALUE_TENSOR && values[0].u.tensor)
      grad = TensorRef::adopt(values[0].u.tensor);  // the hook's replacement
  }
  return grad;
}

void run_post_accumulate_hooks(const std::vector<int64_t>& ids, const TensorRef& leaf) {
  for (int64_t id : ids) {
    ts_value values[1] = {sdk::value(leaf)};
    ts_stack stack{sizeof(ts_stack), values, 1, 1};
    sdk::check_host(sdk::host().invoke_callback(sdk::current_call(), id, &stack));
    if (stack.size >= 1 && values[0].tag == TS_VALUE_TENSOR && values[0].u.tensor)
      sdk::host().tensor_release(values[0].u.tensor);  // a return is ignored, as in torch
  }
}

namespace {
// The callbacks queued during the backward passes running on this thread (innermost last).
struct FinalCallbacks {
  std::vector<std::vector<int64_t>> passes;
};
FinalCallbacks& final_callbacks() {
  thread_local FinalCallbacks callbacks;
  return callbacks;
}
// Runs the pass's queued callbacks when it ends without an error; drops them when it fails.
class FinalCallbackScope {
 public:
  FinalCallbackScope() { final_callbacks().passes.emplace_back(); }
  ~FinalCallbackScope() {
    auto ids = std::move(final_callbacks().passes.back());
    final_callbacks().passes.pop_back();
    for (int64_t id : ids) sdk::host().release_callback(id);
  }
  void run() {
    // A callback may queue another: run until the list is empty.
    for (size_t i = 0; i < final_callbacks().passes.back().size(); ++i) {
      int64_t id = final_callbacks().passes.back()[i];
      ts_value values[1] = {sdk::none()};
      ts_stack stack{sizeof(ts_stack), values, 0, 1};  // room for the None a Python callback returns
      sdk::check_host(sdk::host().invoke_callback(sdk::current_call(), id, &stack));
      if (stack.size >= 1 && values[0].tag == TS_VALUE_TENSOR && values[0].u.tensor)
        sdk::host().tensor_release(values[0].u.tensor);
    }
  }
};
}  // namespace

void queue_final_callback(int64_t id) {
  if (final_callbacks().passes.empty()) {
    sdk::host().release_callback(id);
    throw sdk::Error(TS_ERROR, "queue_callback: no backward pass is running on this thread (call it from a hook)");
  }
  final_callbacks().passes.back().push_back(id);
}

std::vector<TensorRef> run_backward(const std::vector<TensorRef>& roots, std::vector<TensorRef> root_grads,
                                    const std::vector<TensorRef>& inputs, const BackwardOptions& options) {
  FinalCallbackScope final_callbacks_scope;
  if (root_grads.size() != roots.size())
    throw sdk::Error(TS_ERROR_VALUE, sdk::cat("backward: got ", roots.size(), " tensors but ", root_grads.size(),
                                              " gradients"));
  GradModeGuard mode(options.create_graph);

  // Root edges and their seed gradients.
  std::vector<Edge> root_edges;
  for (size_t i = 0; i < roots.size(); ++i) {
    const TensorRef& r = roots[i];
    Edge e = gradient_edge(r.handle());
    if (!e.valid())
      throw sdk::Error(TS_ERROR, sdk::cat("element ", i, " of tensors does not require grad and does not have a grad_fn"));
    if (!root_grads[i].defined()) {
      if (r.numel() != 1)
        throw sdk::Error(TS_ERROR, sdk::cat("grad can be implicitly created only for scalar outputs (got a tensor of shape ",
                                            shape_text(r.sizes()), "); pass a gradient"));
      root_grads[i] = sdk::ops::ones(r.shape_vector(), r.dtype(), r.device());
    } else if (!std::equal(root_grads[i].sizes().begin(), root_grads[i].sizes().end(), r.sizes().begin(),
                           r.sizes().end())) {
      throw sdk::Error(TS_ERROR_VALUE, sdk::cat("backward: gradient ", i, " has shape ", shape_text(root_grads[i].sizes()),
                                                " but its tensor has shape ", shape_text(r.sizes())));
    }
    root_edges.push_back(e);
  }

  // Capture targets (autograd.grad / backward(inputs=...)).
  std::vector<Edge> targets;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Edge e = gradient_edge(inputs[i].handle());
    if (!e.valid())
      throw sdk::Error(TS_ERROR, sdk::cat("input ", i, " does not require grad: it cannot receive a gradient"));
    targets.push_back(e);
  }

  // Dependencies: how many gradients each node waits for.
  std::unordered_map<Node*, int> deps;
  std::vector<Node*> order;  // every reachable node
  {
    std::vector<Node*> stack;
    std::unordered_set<Node*> seen;
    for (const Edge& e : root_edges)
      if (seen.insert(e.fn.get()).second) stack.push_back(e.fn.get());
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      order.push_back(n);
      for (const Edge& e : n->next_edges) {
        if (!e.valid()) continue;
        ++deps[e.fn.get()];
        if (seen.insert(e.fn.get()).second) stack.push_back(e.fn.get());
      }
    }
  }

  // With targets, only nodes on a path to a target run.
  std::unordered_set<Node*> needed;
  std::unordered_map<Node*, std::vector<size_t>> target_at;  // node -> target indices
  for (size_t k = 0; k < targets.size(); ++k) target_at[targets[k].fn.get()].push_back(k);
  if (!targets.empty()) {
    bool changed = true;  // fixed point over the (acyclic) graph, children before parents
    for (auto& [n, ks] : target_at) needed.insert(n);
    while (changed) {
      changed = false;
      for (Node* n : order) {
        if (needed.count(n)) continue;
        for (const Edge& e : n->next_edges)
          if (e.valid() && needed.count(e.fn.get())) { needed.insert(n); changed = true; break; }
      }
    }
  }

  std::unordered_map<Node*, GradList> buffers;
  // Buffers holding a tensor only the engine refers to (a sum it made, or a region gradient's
  // fresh output): a region gradient may be added into them in place.
  std::set<std::pair<Node*, uint32_t>> owned;
  auto add_to = [&](Node* n, uint32_t nr, TensorRef g, bool fresh) {
    GradList& buf = buffers[n];
    if (buf.size() <= nr) buf.resize(std::max<size_t>(nr + 1, n->input_meta.size()));
    if (!g.defined()) return;
    // (an empty slot has no owned entry: entries go with the buffer when its node runs)
    if (buf[nr].defined()) {
      buf[nr] = sdk::ops::add(buf[nr], g);
      owned.insert({n, nr});
    } else {
      buf[nr] = std::move(g);
      if (fresh) owned.insert({n, nr});
    }
  };
  // A region gradient (a slice's) with an owned buffer to go into: added there in place. Not
  // when recording the backward (create_graph), nor in anomaly mode (which checks the outputs).
  auto add_in_place = [&](Node* n, const GradList& grads) {
    // (the node's own hooks have run on grads already)
    if (!n->region_gradient() || options.create_graph || anomaly_mode_enabled() || grads.size() != 1 ||
        !grads[0].defined() || n->next_edges.size() != 1 || !n->next_edges[0].valid())
      return false;
    const Edge& e = n->next_edges[0];
    auto it = buffers.find(e.fn.get());
    if (it == buffers.end() || it->second.size() <= e.input_nr || !owned.count({e.fn.get(), e.input_nr}))
      return false;
    TensorRef& into = it->second[e.input_nr];
    const InputMeta& meta = e.fn->input_meta[e.input_nr];  // the shape the pieces are regions of
    if (into.dtype() != grads[0].dtype() || into.device().type != grads[0].device().type ||
        into.device().index != grads[0].device().index || !std::ranges::equal(into.sizes(), meta.shape))
      return false;
    const std::string range = sdk::observing() ? sdk::cat("autograd::engine::evaluate_function: ", n->name()) : "";
    sdk::ObservedRange observed(range.c_str(), int64_t(n->sequence_nr));
    n->add_into_region(grads[0], into);
    return true;
  };
  std::priority_queue<Node*, std::vector<Node*>, ByNewestFirst> ready;
  for (size_t i = 0; i < root_edges.size(); ++i)
    add_to(root_edges[i].fn.get(), root_edges[i].input_nr, root_grads[i], false);
  for (const Edge& e : root_edges) {
    // A root that is also reached from another root waits for that gradient too.
    if (deps[e.fn.get()] == 0) {
      deps[e.fn.get()] = -1;  // queued
      ready.push(e.fn.get());
    }
  }

  // After a node ran (or was skipped): release what it saved, pass its outputs along its edges.
  auto finish = [&](Node* n, bool ran, GradList& outputs) {
    if (ran && !options.keep_graph) {
      n->release_saved();
      n->released = true;
    }
    for (size_t j = 0; j < n->next_edges.size(); ++j) {
      const Edge& e = n->next_edges[j];
      if (!e.valid()) continue;
      if (ran && j < outputs.size()) add_to(e.fn.get(), e.input_nr, std::move(outputs[j]), n->region_gradient());
      if (--deps[e.fn.get()] == 0) {
        deps[e.fn.get()] = -1;
        ready.push(e.fn.get());
      }
    }
  };

  DeviceWorkers workers;  // declared after everything its threads touch: joined first on unwinding
  std::vector<TensorRef> captured(targets.size());
  while (!ready.empty() || workers.in_flight()) {
    while (auto r = workers.poll()) finish(r->node, true, r->outputs);
    if (ready.empty()) {  // only device work is left: wait for a node to come back
      DeviceWorkers::Result r = workers.wait();
      finish(r.node, true, r.outputs);
      continue;
    }
    Node* n = ready.top();
    ready.pop();
    GradList grads = std::move(buffers[n]);
    buffers.erase(n);
    for (auto o = owned.lower_bound({n, 0}); o != owned.end() && o->first == n;) o = owned.erase(o);
    if (grads.size() < n->input_meta.size()) grads.resize(n->input_meta.size());

    for (auto& [nr, id] : n->pre_hooks)
      if (nr < grads.size()) grads[nr] = run_hooks({id}, std::move(grads[nr]));
    for (auto& [nr, slot] : n->retained)
      if (auto p = slot.lock(); p && nr < grads.size() && grads[nr].defined())
        *p = p->defined() ? sdk::ops::add(*p, grads[nr]) : sdk::ops::clone(grads[nr]);
    if (auto it = target_at.find(n); it != target_at.end())
      for (size_t k : it->second)
        if (targets[k].input_nr < grads.size()) captured[k] = grads[targets[k].input_nr];

    bool is_leaf_sink = dynamic_cast<AccumulateGrad*>(n) != nullptr;
    bool run = targets.empty() ? true
               : is_leaf_sink  ? (options.accumulate && target_at.count(n))
                               : std::any_of(n->next_edges.begin(), n->next_edges.end(),
                                             [&](const Edge& e) { return e.valid() && needed.count(e.fn.get()); });
    GradList outputs;
    if (run) {
      bool any = false;
      for (size_t i = 0; i < grads.size(); ++i) {
        if (grads[i].defined()) {
          any = true;
          if (i < n->input_meta.size()) grads[i] = conform(grads[i], n->input_meta[i], *n, i);
        }
      }
      if (any) {
        // Formulas may assume every output's gradient: the unused ones are zeros.
        for (size_t i = 0; i < grads.size(); ++i)
          if (!grads[i].defined() && i < n->input_meta.size() && grads.size() > 1) {
            const InputMeta& m = n->input_meta[i];
            grads[i] = sdk::ops::zeros(m.shape, m.dtype, m.device);
          }
        if (int32_t type = worker_device_type(n); type != kCpuDeviceType) {
          workers.submit(type, n, std::move(grads));  // finished when its result comes back
          continue;
        }
        if (add_in_place(n, grads)) {
          GradList added_already;
          finish(n, true, added_already);
          continue;
        }
        outputs = apply_node(n, std::move(grads));
      }
    }
    finish(n, run, outputs);
  }

  for (size_t k = 0; k < captured.size(); ++k)
    if (!captured[k].defined() && !options.allow_unused && !options.accumulate)
      throw sdk::Error(TS_ERROR, sdk::cat("One of the differentiated Tensors (input ", k,
                                          ") appears to not have been used in the graph. Set allow_unused=True if "
                                          "this is the desired behavior."));
  final_callbacks_scope.run();
  return captured;
}

}  // namespace tessera::autograd

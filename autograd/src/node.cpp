#include "node.h"

#include "engine.h"
#include "forward_ad.h"
#include "saved_hooks.h"

#include <tessera/sdk/ops.h>

#include <algorithm>
#include <cstddef>

namespace tessera::autograd {
namespace {
std::atomic<uint64_t> next_sequence_nr{0};

std::string describe(const TensorRef& t) {
  std::string shape;
  for (int64_t d = 0; d < t.dim(); ++d) shape += (d ? ", " : "") + std::to_string(t.size(d));
  return sdk::cat(sdk::dtype_name(t.dtype()), " [", shape, "]");
}
}  // namespace

Node::Node() : sequence_nr(next_sequence_nr.fetch_add(1, std::memory_order_relaxed)) {
  sdk::observe_sequence_nr(int64_t(sequence_nr));  // the profiler links the running operator to this node
}

Node::~Node() {
  for (auto& [nr, id] : pre_hooks) sdk::host().release_callback(id);
  // Release the graph behind this node iteratively: a long chain (x = x + 1 a million times)
  // would otherwise destroy node by node recursively and overflow the stack.
  thread_local std::vector<std::shared_ptr<Node>> pending;
  thread_local bool draining = false;
  for (Edge& e : next_edges)
    if (e.fn) pending.push_back(std::move(e.fn));
  if (draining) return;
  draining = true;
  while (!pending.empty()) {
    std::shared_ptr<Node> next = std::move(pending.back());
    pending.pop_back();
    next.reset();  // if this was the last reference, its destructor queues its own edges
  }
  draining = false;
}

bool is_differentiable_dtype(int32_t dtype) {
  return sdk::is_floating(dtype) || sdk::is_complex(dtype);
}

InputMeta input_meta_of(const TensorRef& t) { return InputMeta{t.shape_vector(), t.dtype(), t.device()}; }

TensorRef alias_of(const TensorRef& t) {
  std::vector<int64_t> strides(t.strides().begin(), t.strides().end());
  std::vector<int64_t> shape = t.shape_vector();
  ts_tensor out = nullptr;
  sdk::check_host(sdk::host().tensor_alias(sdk::current_call(), t.handle(), int32_t(shape.size()), shape.data(),
                                           strides.data(), sdk::host().tensor_storage_offset(t.handle()), &out));
  return TensorRef::adopt(out);
}

AccumulateGrad::AccumulateGrad(TensorRef leaf) : variable(std::move(leaf)) {}

namespace {
// `g` is held by the caller alone (use count 1: the engine moved its reference here) and has the
// leaf's dtype, device, sizes and strides, so keeping it as .grad copies nothing and aliases nothing
// anyone else can reach.
bool can_take_as_grad(const TensorRef& g, const TensorRef& leaf) {
  const ts_host_api& h = sdk::host();
  if (h.struct_size <= offsetof(ts_host_api, tensor_use_count) || !h.tensor_use_count) return false;  // a 1.7 host
  if (h.tensor_use_count(g.handle()) != 1) return false;
  if (g.dtype() != leaf.dtype() || !std::ranges::equal(g.sizes(), leaf.sizes()) ||
      !std::ranges::equal(g.strides(), leaf.strides()))
    return false;
  const ts_device a = g.device(), b = leaf.device();
  return a.type == b.type && a.index == b.index;
}
}  // namespace

GradList AccumulateGrad::apply(GradList&& grads) {
  AutogradMeta& m = ensure_meta(variable.handle());
  TensorRef g = run_hooks(m.hooks, std::move(grads[0]));  // leaf hooks run before accumulation
  if (!g.defined()) return {};
  if (!m.grad.defined()) {
    // Without create_graph, .grad must be a tensor of its own: the incoming one may be shared
    // with another leaf's gradient (add's backward passes the same tensor to both inputs). One
    // that nobody else holds, laid out as the leaf, is taken as it is (torch's AccumulateGrad
    // steals it too); any other is copied.
    m.grad = grad_mode_enabled() || can_take_as_grad(g, variable) ? g : sdk::ops::clone(g);
  } else if (grad_mode_enabled()) {
    m.grad = sdk::ops::add(m.grad, g);  // create_graph: keep the sum differentiable
  } else {
    m.grad = sdk::ops::add(m.grad, g);  // out of place: a user may hold the old .grad
  }
  run_post_accumulate_hooks(m.post_accumulate_hooks, variable);
  return {};
}

GradList NotImplementedBackward::apply(GradList&&) {
  throw sdk::Error(TS_ERROR_NOT_IMPLEMENTED,
                   sdk::cat("the derivative of '", op_, "' is not implemented (autograd/derivatives.yaml has no "
                            "formula for it); compute it without gradients (detach() or no_grad)"));
}

SavedTensor::SavedTensor(const TensorRef& t, bool is_output) : is_output_(is_output), defined_(t.defined()) {
  if (!defined_) return;
  if ((packed_ = pack_saved(t))) {  // saved_tensors_hooks: the pack hook's result stands in for t
    if (is_output)
      if (AutogradMeta* m = meta_of(t.handle())) output_nr_ = m->output_nr;
    return;
  }
  version_ = sdk::host().tensor_version(t.handle());
  if (is_output) {
    if (AutogradMeta* m = meta_of(t.handle())) output_nr_ = m->output_nr;
    data_ = alias_of(t);
    // The alias keeps the output's tangent: a backward formula reading it (exp's result) then
    // computes its own tangent, which forward-over-reverse (jacfwd of jacrev) needs.
    if (TensorRef tangent = tangent_of(t.handle()); tangent.defined()) set_tangent(data_.handle(), tangent, "saved output");
  } else {
    data_ = t;
  }
}

TensorRef SavedTensor::unpack(Node* owner, const char* what) const {
  if (!defined_) return TensorRef();
  if (released_)
    throw sdk::Error(TS_ERROR, sdk::cat("Trying to backward through the graph a second time (or to use saved tensors "
                                        "after they were freed): ", owner->name(), " has released '", what,
                                        "'. Call backward(retain_graph=True) the first time if you need to."));
  // Through saved_tensors_hooks: what the unpack hook gives (torch checks no version then either).
  const TensorRef data = packed_ ? unpack_saved(*packed_) : data_;
  if (!packed_) {
    uint64_t now = sdk::host().tensor_version(data_.handle());
    if (now != version_)
      throw sdk::Error(TS_ERROR, sdk::cat("one of the variables needed for gradient computation has been modified by "
                                          "an inplace operation: '", what, "' (", describe(data_), ") of operator '",
                                          owner->op_name(), "' (", owner->name(), ") is at version ", now,
                                          "; expected version ", version_, " instead"));
  }
  if (!is_output_ || !grad_mode_enabled()) return data;
  // create_graph: the saved output is differentiable again, through this very node.
  TensorRef out = alias_of(data);
  if (TensorRef tangent = tangent_of(data.handle()); tangent.defined()) set_tangent(out.handle(), tangent, "saved output");
  AutogradMeta& m = ensure_meta(out.handle());
  m.grad_fn = owner->shared_from_this();
  m.output_nr = output_nr_;
  return out;
}

Edge gradient_edge(ts_tensor t) {
  AutogradMeta* m = t ? meta_of(t) : nullptr;
  if (!m) return {};
  if (m->grad_fn) return Edge{m->grad_fn, m->output_nr};
  if (!m->requires_grad) return {};
  std::shared_ptr<Node> acc = m->grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(TensorRef::retain(t));
    acc->input_meta.push_back(input_meta_of(TensorRef::borrow(t)));
    m->grad_accumulator = acc;
  }
  return Edge{acc, 0};
}

void set_history(const TensorRef& t, const std::shared_ptr<Node>& node, uint32_t nr) {
  AutogradMeta& m = ensure_meta(t.handle());
  m.grad_fn = node;
  m.output_nr = nr;
  m.requires_grad = false;
  if (node->input_meta.size() <= nr) node->input_meta.resize(nr + 1);
  node->input_meta[nr] = input_meta_of(t);
}

}  // namespace tessera::autograd

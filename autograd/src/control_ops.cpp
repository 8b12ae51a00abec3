// The autograd:: operators: how frontends (Python, C++) drive autograd. They are operators like
// any other, so both frontends reach them through the dispatcher; their kernels are registered
// under every key, since they work on any tensor.
#include "custom_function.h"
#include "device_workers.h"
#include "engine.h"
#include "forward_ad.h"
#include "kernel_support.h"
#include "saved_hooks.h"

#include <tessera/sdk/ops.h>

#include <algorithm>

namespace tessera::autograd {
namespace {

using sdk::Args;

void check_floating(const TensorRef& t, const char* op) {
  if (!is_differentiable_dtype(t.dtype()))
    throw sdk::Error(TS_ERROR, sdk::cat(op, ": only Tensors of floating point and complex dtype can require gradients, got ",
                                        sdk::dtype_name(t.dtype())));
}

void requires_grad_(Args& a) {
  TensorRef self = a.tensor(0);
  bool flag = a.to_bool(1);
  AutogradMeta* m = meta_of(self.handle());
  if (m && m->grad_fn) {
    if (!flag)
      throw sdk::Error(TS_ERROR, "requires_grad_: you can only change requires_grad flags of leaf variables. If you "
                                 "want to use a computed variable in a subgraph that doesn't require differentiation "
                                 "use var_no_grad = var.detach().");
  } else if (flag) {
    check_floating(self, "requires_grad_");
    ensure_meta(self.handle()).requires_grad = true;
  } else if (m) {
    m->requires_grad = false;
  }
  a.return_argument(self);
}

void requires_grad(Args& a) { a.returns({sdk::value(autograd::requires_grad(a.tensor(0).handle()))}); }

void is_leaf(Args& a) {
  AutogradMeta* m = meta_of(a.tensor(0).handle());
  a.returns({sdk::value(!(m && m->grad_fn))});
}

void get_grad(Args& a) {
  AutogradMeta* m = meta_of(a.tensor(0).handle());
  TensorRef g;
  if (m) g = m->grad_fn ? (m->retained_grad ? *m->retained_grad : TensorRef()) : m->grad;
  if (g.defined()) a.return_argument(g);
  else a.returns({sdk::none()});
}

void set_grad(Args& a) {
  TensorRef self = a.tensor(0);
  std::optional<TensorRef> g = a.optional_tensor(1);
  if (g) {
    auto s = self.sizes(), gs = g->sizes();
    if (!std::equal(s.begin(), s.end(), gs.begin(), gs.end()))
      throw sdk::Error(TS_ERROR_VALUE, "set_grad: assigned grad has data of a different size than the tensor");
    if (g->dtype() != self.dtype())
      throw sdk::Error(TS_ERROR_TYPE, sdk::cat("set_grad: assigned grad has dtype ", sdk::dtype_name(g->dtype()),
                                               ", the tensor has ", sdk::dtype_name(self.dtype())));
    if (g->device().type != self.device().type || g->device().index != self.device().index)
      throw sdk::Error(TS_ERROR_VALUE, "set_grad: assigned grad is on a different device than the tensor");
  }
  AutogradMeta* m = g ? &ensure_meta(self.handle()) : meta_of(self.handle());
  if (m) {
    if (m->grad_fn) {
      if (!m->retained_grad) m->retained_grad = std::make_shared<TensorRef>();
      *m->retained_grad = g ? *g : TensorRef();
    } else {
      m->grad = g ? *g : TensorRef();
    }
  }
  a.returns({});
}

void grad_fn_name(Args& a) {
  AutogradMeta* m = meta_of(a.tensor(0).handle());
  ts_value v{TS_VALUE_STRING, 0, {}};
  v.u.str = m && m->grad_fn ? m->grad_fn->name() : "";
  a.returns({v});
}

void detach(Args& a) {
  TensorRef out = alias_of(a.tensor(0));
  a.return_tensor(std::move(out));
}

void retain_grad(Args& a) {
  ts_tensor t = a.tensor(0).handle();
  AutogradMeta* m = meta_of(t);
  if (!m || (!m->grad_fn && !m->requires_grad))
    throw sdk::Error(TS_ERROR, "retain_grad: can't retain_grad on Tensor that has requires_grad=False");
  if (m->grad_fn && !m->retained_grad) {
    m->retained_grad = std::make_shared<TensorRef>();
    m->grad_fn->retained.push_back({m->output_nr, m->retained_grad});
  }
  a.returns({});
}

void retains_grad(Args& a) {
  AutogradMeta* m = meta_of(a.tensor(0).handle());
  a.returns({sdk::value(bool(m && m->retained_grad))});
}

// The callback id's hold passes to autograd (released when the tensor or node dies, or on remove).
void register_hook(Args& a) {
  ts_tensor t = a.tensor(0).handle();
  int64_t id = a.to_int(1);
  AutogradMeta* m = meta_of(t);
  if (!m || (!m->grad_fn && !m->requires_grad)) {
    sdk::host().release_callback(id);
    throw sdk::Error(TS_ERROR, "register_hook: cannot register a hook on a tensor that doesn't require gradient");
  }
  if (m->grad_fn) m->grad_fn->pre_hooks.push_back({m->output_nr, id});
  else m->hooks.push_back(id);
  a.returns({});
}

// torch's Tensor.register_post_accumulate_grad_hook: leaves only; hook(leaf) after .grad changed.
void register_post_accumulate_grad_hook(Args& a) {
  ts_tensor t = a.tensor(0).handle();
  int64_t id = a.to_int(1);
  AutogradMeta* m = meta_of(t);
  if (!m || !m->requires_grad || m->grad_fn) {
    sdk::host().release_callback(id);
    throw sdk::Error(TS_ERROR, m && m->grad_fn ? "post accumulate grad hooks cannot be registered on non-leaf tensors"
                                              : "register_post_accumulate_grad_hook: cannot register a hook on a "
                                                "tensor that doesn't require gradient");
  }
  m->post_accumulate_hooks.push_back(id);
  a.returns({});
}

void push_saved_tensors_hooks(Args& a) {
  push_saved_hooks(a.to_int(0));
  a.returns({});
}

void pop_saved_tensors_hooks(Args& a) {
  pop_saved_hooks();
  a.returns({});
}

void queue_callback(Args& a) {
  queue_final_callback(a.to_int(0));
  a.returns({});
}

void remove_hook(Args& a) {
  ts_tensor t = a.tensor(0).handle();
  int64_t id = a.to_int(1);
  AutogradMeta* m = meta_of(t);
  if (!m) return a.returns({});
  auto& hooks = m->hooks;
  auto& post = m->post_accumulate_hooks;
  if (auto it = std::find(hooks.begin(), hooks.end(), id); it != hooks.end()) {
    hooks.erase(it);
    sdk::host().release_callback(id);
  } else if (auto it3 = std::find(post.begin(), post.end(), id); it3 != post.end()) {
    post.erase(it3);
    sdk::host().release_callback(id);
  } else if (m->grad_fn) {
    auto& pre = m->grad_fn->pre_hooks;
    auto it2 = std::find_if(pre.begin(), pre.end(), [&](const auto& p) { return p.second == id; });
    if (it2 != pre.end()) {
      pre.erase(it2);
      sdk::host().release_callback(id);
    }
  }
  a.returns({});
}

std::vector<TensorRef> optional_list(const Args& a, int i) {
  std::vector<TensorRef> out;
  const ts_value& v = a.value(i);
  if (v.tag != TS_VALUE_TENSOR_LIST) return out;
  for (int64_t k = 0; k < v.u.tensors.size; ++k)
    out.push_back(v.u.tensors.data[k] ? TensorRef::borrow(v.u.tensors.data[k]) : TensorRef());
  return out;
}

void backward(Args& a) {
  std::vector<TensorRef> roots = a.tensor_list(0);
  std::vector<TensorRef> grads = optional_list(a, 1);
  if (grads.empty()) grads.resize(roots.size());
  BackwardOptions o;
  o.keep_graph = a.to_bool(2);
  o.create_graph = a.to_bool(3);
  std::vector<TensorRef> inputs = a.is_none(4) ? std::vector<TensorRef>{} : a.tensor_list(4);
  std::vector<TensorRef> captured = run_backward(roots, std::move(grads), inputs, o);
  // backward(inputs=[...]) accumulates into .grad of non-leaf inputs too (leaves got theirs).
  for (size_t i = 0; i < inputs.size(); ++i) {
    AutogradMeta* m = meta_of(inputs[i].handle());
    if (!m || !m->grad_fn || !captured[i].defined()) continue;
    if (!m->retained_grad) m->retained_grad = std::make_shared<TensorRef>();
    *m->retained_grad = m->retained_grad->defined() ? sdk::ops::add(*m->retained_grad, captured[i]) : captured[i];
  }
  a.returns({});
}

// Tensor[] returns stay valid until this thread's next call into the plugin (ABI 1.2).
thread_local std::vector<ts_tensor> returned_list;

void grad(Args& a) {
  std::vector<TensorRef> outputs = a.tensor_list(0);
  std::vector<TensorRef> inputs = a.tensor_list(1);
  std::vector<TensorRef> grads = optional_list(a, 2);
  if (grads.empty()) grads.resize(outputs.size());
  BackwardOptions o;
  o.keep_graph = a.to_bool(3);
  o.create_graph = a.to_bool(4);
  o.allow_unused = a.to_bool(5);
  o.accumulate = false;
  if (inputs.empty()) throw sdk::Error(TS_ERROR_VALUE, "grad requires at least one input");
  std::vector<TensorRef> result = run_backward(outputs, std::move(grads), inputs, o);
  returned_list.clear();
  for (TensorRef& g : result) returned_list.push_back(g.defined() ? g.new_reference() : nullptr);
  ts_value v{TS_VALUE_TENSOR_LIST, 0, {}};
  v.u.tensors.data = returned_list.data();
  v.u.tensors.size = int64_t(returned_list.size());
  a.returns({v});
}

void set_grad_enabled(Args& a) {
  bool previous = grad_mode_enabled();
  set_grad_mode(a.to_bool(0));
  a.returns({sdk::value(previous)});
}

void is_grad_enabled(Args& a) { a.returns({sdk::value(grad_mode_enabled())}); }

void set_anomaly_enabled(Args& a) {
  bool previous = anomaly_mode_enabled();
  set_anomaly_mode(a.to_bool(0));
  a.returns({sdk::value(previous)});
}

void attach_function(Args& a) {
  std::vector<TensorRef> inputs = a.tensor_list(0);
  std::vector<TensorRef> outputs = a.tensor_list(1);
  int64_t id = a.to_int(2);
  auto node = std::make_shared<CustomFunctionNode>(id, std::string(a.optional_str(3).value_or("function")));  // owns the callback from here
  for (const TensorRef& in : inputs) node->next_edges.push_back(gradient_edge(in.handle()));
  for (size_t j = 0; j < outputs.size(); ++j) {
    for (const TensorRef& in : inputs)
      if (in.handle() == outputs[j].handle())
        throw sdk::Error(TS_ERROR_VALUE, sdk::cat(std::string(a.optional_str(3).value_or("function")), ": forward returned input tensor ", j,
                                                  " as is; return a new tensor (x.clone() or x.view_as(x))"));
    if (is_differentiable_dtype(outputs[j].dtype())) set_history(outputs[j], node, uint32_t(j));
  }
  a.returns({});
}

// Forward mode (forward_ad.h): the dual level and dual tensors, as torch.autograd.forward_ad.
void enter_dual_level(Args& a) { a.returns({sdk::value(autograd::enter_dual_level())}); }

void exit_dual_level(Args& a) {
  autograd::exit_dual_level(a.to_int(0));
  a.returns({});
}

void check_level(int64_t level, const char* op) {
  if (current_dual_level() == 0)
    throw sdk::Error(TS_ERROR, sdk::cat(op, ": Trying to create a dual Tensor for forward AD but no level exists, make "
                                            "sure to enter_dual_level() first."));
  if (level != current_dual_level())
    throw sdk::Error(TS_ERROR, sdk::cat(op, ": level ", level, " is not the open dual level ", current_dual_level(),
                                        " (one level at a time)"));
}

// A view of `primal` (sharing its data and its reverse-mode history) carrying `tangent`.
void make_dual(Args& a) {
  TensorRef primal = a.tensor(0), tangent = a.tensor(1);
  check_level(a.to_int(2), "make_dual");
  if (!is_differentiable_dtype(primal.dtype()) || !is_differentiable_dtype(tangent.dtype()))
    throw sdk::Error(TS_ERROR_VALUE, sdk::cat("make_dual: Expected both tensor and its forward grad to be floating point "
                                              "or complex, got ", sdk::dtype_name(primal.dtype()), " and ",
                                              sdk::dtype_name(tangent.dtype())));
  if (primal.shape_vector() != tangent.shape_vector())
    throw sdk::Error(TS_ERROR, sdk::cat("make_dual: Trying to set a forward gradient that has a different size than "
                                        "that of the original Tensor, this is not supported. Tensor is of size ",
                                        sdk::shape_text(primal.sizes()), " while the given forward gradient is of size ",
                                        sdk::shape_text(tangent.sizes()), "."));
  if (tangent.device().type != primal.device().type || tangent.device().index != primal.device().index)
    throw sdk::Error(TS_ERROR_VALUE, "make_dual: Expected tangent to be on the same device as the primal");
  TensorRef dual;
  {
    HideTangents primal_only;  // the view carries the new tangent, not a view of an older one
    dual = sdk::ops::alias(primal);
  }
  if (tangent.dtype() != primal.dtype()) tangent = sdk::ops::to(tangent, primal.dtype());
  set_tangent(dual.handle(), tangent, "make_dual");
  a.return_tensor(std::move(dual));
}

// unpack_dual's two halves: the primal as a view without the tangent, and the tangent (None when
// the tensor has none at `level`).
void primal_of(Args& a) {
  TensorRef t = a.tensor(0);
  TensorRef primal;
  {
    HideTangents primal_only;
    primal = sdk::ops::alias(t);
  }
  a.return_tensor(std::move(primal));
}

void tangent_at(Args& a) {
  TensorRef t = a.tensor(0);
  const int64_t level = a.to_int(1);
  TensorRef tangent = level == current_dual_level() ? tangent_of(t.handle()) : TensorRef();
  if (tangent.defined()) a.return_argument(tangent);
  else a.returns({sdk::none()});
}

// How many backward nodes ran on device workers (device_workers.h) since the plugin loaded.
void device_worker_nodes(Args& a) { a.returns({sdk::value(int64_t(DeviceWorkers::nodes_run()))}); }

void version(Args& a) {
  a.returns({sdk::value(int64_t(sdk::host().tensor_version(a.tensor(0).handle())))});
}

}  // namespace

void register_control_ops(sdk::Registrar& reg, const std::vector<ts_dispatch_key>& keys) {
  struct Op {
    const char* schema;
    const char* name;
    sdk::KernelFn fn;
  };
  const Op control_ops[] = {
      {"autograd::requires_grad_(Tensor(a!) self, bool requires_grad=True) -> Tensor(a!)", "autograd::requires_grad_", requires_grad_},
      {"autograd::requires_grad(Tensor self) -> bool", "autograd::requires_grad", requires_grad},
      {"autograd::is_leaf(Tensor self) -> bool", "autograd::is_leaf", is_leaf},
      {"autograd::get_grad(Tensor self) -> Tensor?", "autograd::get_grad", get_grad},
      {"autograd::set_grad(Tensor self, Tensor? grad) -> ()", "autograd::set_grad", set_grad},
      {"autograd::grad_fn_name(Tensor self) -> str", "autograd::grad_fn_name", grad_fn_name},
      {"autograd::detach(Tensor(a) self) -> Tensor(a)", "autograd::detach", detach},
      {"autograd::retain_grad(Tensor self) -> ()", "autograd::retain_grad", retain_grad},
      {"autograd::retains_grad(Tensor self) -> bool", "autograd::retains_grad", retains_grad},
      {"autograd::register_hook(Tensor self, int callback) -> ()", "autograd::register_hook", register_hook},
      {"autograd::register_post_accumulate_grad_hook(Tensor self, int callback) -> ()",
       "autograd::register_post_accumulate_grad_hook", register_post_accumulate_grad_hook},
      {"autograd::queue_callback(int callback) -> ()", "autograd::queue_callback", queue_callback},
      {"autograd::push_saved_tensors_hooks(int callback) -> ()", "autograd::push_saved_tensors_hooks",
       push_saved_tensors_hooks},
      {"autograd::pop_saved_tensors_hooks() -> ()", "autograd::pop_saved_tensors_hooks", pop_saved_tensors_hooks},
      {"autograd::remove_hook(Tensor self, int callback) -> ()", "autograd::remove_hook", remove_hook},
      {"autograd::backward(Tensor[] tensors, Tensor?[] grad_tensors, bool retain_graph=False, bool create_graph=False, "
       "Tensor[]? inputs=None) -> ()", "autograd::backward", backward},
      {"autograd::grad(Tensor[] outputs, Tensor[] inputs, Tensor?[] grad_outputs, bool retain_graph=False, "
       "bool create_graph=False, bool allow_unused=False) -> Tensor[]", "autograd::grad", grad},
      {"autograd::set_grad_enabled(bool enabled) -> bool", "autograd::set_grad_enabled", set_grad_enabled},
      {"autograd::is_grad_enabled() -> bool", "autograd::is_grad_enabled", is_grad_enabled},
      {"autograd::set_anomaly_enabled(bool enabled) -> bool", "autograd::set_anomaly_enabled", set_anomaly_enabled},
      {"autograd::attach_function(Tensor[] inputs, Tensor[] outputs, int callback, str name) -> ()",
       "autograd::attach_function", attach_function},
      {"autograd::version(Tensor self) -> int", "autograd::version", version},
      {"autograd::device_worker_nodes() -> int", "autograd::device_worker_nodes", device_worker_nodes},
      {"autograd::enter_dual_level() -> int", "autograd::enter_dual_level", enter_dual_level},
      {"autograd::exit_dual_level(int level) -> ()", "autograd::exit_dual_level", exit_dual_level},
      {"autograd::make_dual(Tensor(a) primal, Tensor tangent, int level) -> Tensor(a)", "autograd::make_dual", make_dual},
      {"autograd::primal_of(Tensor(a) self) -> Tensor(a)", "autograd::primal_of", primal_of},
      {"autograd::tangent_of(Tensor self, int level) -> Tensor?", "autograd::tangent_of", tangent_at},
  };
  for (const Op& op : control_ops) {
    reg.def(op.schema);
    for (ts_dispatch_key k : keys) reg.kernel(op.name, k, op.fn);
  }
}

}  // namespace tessera::autograd

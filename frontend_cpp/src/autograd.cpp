// tessera::autograd: grad mode, backward, grad and hooks over the autograd plugin's operators.
#include "autograd_calls.h"

#include <tessera/callbacks.h>
#include <tessera/cpp/autograd.h>
#include <tessera/runtime.h>


namespace tessera {
namespace cpp_detail {

OperatorHandle autograd_op(std::string_view name, bool load) {
  std::string full = fmt::format("autograd::{}", name);
  init();
  OperatorHandle op = Dispatcher::instance().find(full);
  if (op || !load) return op;
  autograd::ensure_loaded();
  return Dispatcher::instance().find_or_throw(full);
}

}  // namespace cpp_detail

namespace autograd {
using cpp_detail::autograd_op;
using cpp_detail::BoxedCall;

void ensure_loaded() {
  if (is_loaded()) return;
  require_lazy_loading("autograd", "autograd (requires_grad, backward)");
  if (!load_named_plugin("autograd"))
    raise<RuntimeError>("autograd is not available: libtessera_autograd.so is not on the plugin search path [{}]",
                        plugin_search_path_text());
}

bool is_loaded() { return autograd_op("is_grad_enabled", false) != nullptr; }

bool is_grad_enabled() {
  OperatorHandle op = autograd_op("is_grad_enabled", false);
  if (!op) return true;  // nothing records without the plugin; the mode is on by default
  return detail::unbox<bool>(BoxedCall().call(op).ret(0));
}

bool set_grad_enabled(bool enabled) {
  return detail::unbox<bool>(BoxedCall().arg(enabled).call(autograd_op("set_grad_enabled")).ret(0));
}

NoGradGuard::NoGradGuard() : previous_(set_grad_enabled(false)) {}
NoGradGuard::~NoGradGuard() { set_grad_enabled(previous_); }
EnableGradGuard::EnableGradGuard() : previous_(set_grad_enabled(true)) {}
EnableGradGuard::~EnableGradGuard() { set_grad_enabled(previous_); }

namespace {
// An empty list of gradients means "implicit" (ones for one-element roots): the plugin takes an
// empty Tensor?[] for that.
void check_pairs(const char* fname, const char* what, size_t n, size_t m) {
  if (m != 0 && m != n)
    raise<ValueError>("{}: expected one {} per tensor ({}), got {}", fname, what, n, m);
}
}  // namespace

void backward(const std::vector<Tensor>& tensors, const std::vector<Tensor>& grad_tensors, bool retain_graph,
              bool create_graph, const std::vector<Tensor>& inputs) {
  check_pairs("backward", "gradient", tensors.size(), grad_tensors.size());
  for (const Tensor& t : tensors)
    if (!t.defined()) raise<ValueError>("backward: got an undefined tensor");
  BoxedCall c;
  c.arg(tensors).arg(grad_tensors).arg(retain_graph).arg(create_graph);
  if (inputs.empty()) c.arg(Tensor());  // None
  else c.arg(inputs);
  c.call(autograd_op("backward"));
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, bool retain_graph, bool create_graph,
                         bool allow_unused) {
  check_pairs("grad", "grad_output", outputs.size(), grad_outputs.size());
  BoxedCall c;
  c.arg(outputs).arg(inputs).arg(grad_outputs).arg(retain_graph).arg(create_graph).arg(allow_unused);
  c.call(autograd_op("grad"));
  const ts_value& v = c.ret(0);
  std::vector<Tensor> result;  // new references (ABI 1.2)
  for (int64_t i = 0; i < v.u.tensors.size; ++i)
    result.push_back(v.u.tensors.data[i] ? Tensor::adopt(v.u.tensors.data[i]) : Tensor());
  return result;
}

int64_t register_hook(const Tensor& t, Hook hook) {
  if (!hook) raise<ValueError>("register_hook: expected a callable hook, got an empty std::function");
  // The stack holds the gradient (borrowed); the hook's result, if defined, replaces it.
  int64_t id = register_callback([hook = std::move(hook)](ts_stack* stack) {
    Tensor g = stack->size > 0 && stack->values[0].tag == TS_VALUE_TENSOR ? cpp_detail::borrow(stack->values[0].u.tensor)
                                                                         : Tensor();
    Tensor r = hook(g);
    stack->values[0] = ts_value{};
    stack->values[0].tag = r.defined() ? TS_VALUE_TENSOR : TS_VALUE_NONE;
    stack->values[0].u.tensor = r.defined() ? r.release_handle() : nullptr;  // a new reference for the plugin
    stack->size = 1;
  });
  // The operator takes over our hold on the id (and releases it when it raises).
  BoxedCall().arg(t).arg(id).call(autograd_op("register_hook"));
  return id;
}

void remove_hook(const Tensor& t, int64_t id) { BoxedCall().arg(t).arg(id).call(autograd_op("remove_hook")); }

}  // namespace autograd
}  // namespace tessera

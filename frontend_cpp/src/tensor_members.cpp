// The hand-written members of tessera::Tensor (include/tessera/cpp/tensor_members.inc).
#include "autograd_calls.h"

#include <tessera/cpp/autograd.h>
#include <tessera/cpp/function.h>
#include <tessera/ops.h>
#include <tessera/runtime.h>
#include <tessera/stream.h>

namespace tessera {
using cpp_detail::autograd_op;
using cpp_detail::BoxedCall;

namespace {
const Tensor& defined_or_raise(const Tensor& t, const char* fname) {
  if (!t.defined()) raise<ValueError>("Tensor.{}: called on an undefined tensor", fname);
  return t;
}

// A move to another device, recorded by autograd: the gradient moves back to the source device.
struct ToDevice : autograd::Function<ToDevice> {
  static Tensor forward(autograd::AutogradContext* ctx, const Tensor& x, Device device) {
    ctx->saved_data["source"] = x.device();
    return to_device(x, device);
  }
  static std::vector<Tensor> backward(autograd::AutogradContext* ctx, std::vector<Tensor> grads) {
    return {to_device(grads[0], std::any_cast<Device>(ctx->saved_data["source"])), Tensor()};
  }
};
}  // namespace

const Tensor& Tensor::requires_grad_(bool requires_grad) const {
  defined_or_raise(*this, "requires_grad_");
  if (!requires_grad && !autograd::is_loaded()) return *this;  // nothing requires grad yet
  BoxedCall c;
  c.arg(*this).arg(requires_grad).call(autograd_op("requires_grad_"));
  c.tensor(0);  // drops the returned reference to *this
  return *this;
}

bool Tensor::requires_grad() const {
  OperatorHandle op = autograd_op("requires_grad", false);
  return op && detail::unbox<bool>(BoxedCall().arg(defined_or_raise(*this, "requires_grad")).call(op).ret(0));
}

bool Tensor::is_leaf() const {
  OperatorHandle op = autograd_op("is_leaf", false);
  return !op || detail::unbox<bool>(BoxedCall().arg(defined_or_raise(*this, "is_leaf")).call(op).ret(0));
}

Tensor Tensor::grad() const {
  OperatorHandle op = autograd_op("get_grad", false);
  if (!op) return Tensor();
  return BoxedCall().arg(defined_or_raise(*this, "grad")).call(op).tensor(0);
}

void Tensor::set_grad(const Tensor& grad) const {
  BoxedCall().arg(defined_or_raise(*this, "set_grad")).arg(grad).call(autograd_op("set_grad"));
}

void Tensor::backward(const Tensor& gradient, bool retain_graph, bool create_graph) const {
  defined_or_raise(*this, "backward");
  if (!gradient.defined() && numel() != 1)
    raise<RuntimeError>("grad can be implicitly created only for scalar outputs (got a tensor of {} elements); "
                        "pass a gradient to backward()", numel());
  std::vector<Tensor> grads;
  if (gradient.defined()) grads.push_back(gradient);
  autograd::backward({*this}, grads, retain_graph, create_graph);
}

Tensor Tensor::detach() const {
  defined_or_raise(*this, "detach");
  OperatorHandle op = autograd_op("detach", false);
  if (!op) return *this;  // without the plugin no tensor has history
  return BoxedCall().arg(*this).call(op).tensor(0);
}

void Tensor::retain_grad() const { BoxedCall().arg(defined_or_raise(*this, "retain_grad")).call(autograd_op("retain_grad")); }

std::string Tensor::grad_fn_name() const {
  OperatorHandle op = autograd_op("grad_fn_name", false);
  if (!op) return "";
  BoxedCall call;  // owns the returned value: it must outlive `v`
  const ts_value& v = call.arg(defined_or_raise(*this, "grad_fn_name")).call(op).ret(0);
  return v.tag == TS_VALUE_STRING && v.u.str ? v.u.str : "";
}

Tensor Tensor::to(Device device, bool non_blocking) const {
  defined_or_raise(*this, "to");
  if (this->device() == device) return *this;
  return requires_grad() ? ToDevice::apply(*this, device) : to_device(*this, device, non_blocking);
}

Tensor Tensor::pin_memory(std::string_view device_type) const {
  return ::tessera::pin_memory(defined_or_raise(*this, "pin_memory"), device_type);
}

bool Tensor::is_pinned() const { return ::tessera::is_pinned(defined_or_raise(*this, "is_pinned")); }

void Tensor::record_stream(const Stream& stream) const {
  ::tessera::record_stream(defined_or_raise(*this, "record_stream"), stream);
}

Tensor Tensor::cpu() const { return to(Device()); }

Tensor Tensor::view_as(const Tensor& other) const { return view(defined_or_raise(other, "view_as").shape()); }
Tensor Tensor::reshape_as(const Tensor& other) const { return reshape(defined_or_raise(other, "reshape_as").shape()); }

}  // namespace tessera

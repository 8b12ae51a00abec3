#include "kernel_support.h"
#include "view_inplace.h"

#include <tessera/sdk/memory_overlap.h>

namespace tessera::autograd {

void redispatch_below(ts_operator op, ts_stack* stack) {
  sdk::ExcludeKeysGuard below(all_autograd_keys());
  sdk::check_host(sdk::host().call_operator(sdk::current_call(), op, stack));
}

std::vector<ts_tensor> tensor_list_arg(const ts_value& v) {
  if (v.tag != TS_VALUE_TENSOR_LIST) return {};
  return {v.u.tensors.data, v.u.tensors.data + v.u.tensors.size};
}

IntList int_list_arg(const ts_value& v) {
  if (v.tag == TS_VALUE_INT_LIST) return {v.u.ints.data, v.u.ints.data + v.u.ints.size};
  if (v.tag == TS_VALUE_INT) return {v.u.i};
  return {};
}

std::optional<IntList> optional_int_list_arg(const ts_value& v) {
  if (v.tag == TS_VALUE_NONE) return std::nullopt;
  return int_list_arg(v);
}

std::vector<double> double_list_arg(const ts_value& v) {
  if (v.tag != TS_VALUE_DOUBLE_LIST) return {};
  return {v.u.doubles.data, v.u.doubles.data + v.u.doubles.size};
}

sdk::Scalar scalar_arg(const ts_value& v) {
  if (v.tag == TS_VALUE_DOUBLE) return sdk::Scalar(v.u.d);
  if (v.tag == TS_VALUE_BOOL) return sdk::Scalar(v.u.b != 0);
  return sdk::Scalar(v.u.i);
}

std::optional<sdk::Scalar> optional_scalar_arg(const ts_value& v) {
  if (v.tag == TS_VALUE_NONE) return std::nullopt;
  return scalar_arg(v);
}

IntList sizes_of(ts_tensor t) {
  if (!t) return {};
  return TensorRef::borrow(t).shape_vector();
}

bool any_requires_grad(std::initializer_list<ts_tensor> tensors) {
  if (grad_recording_suppressed()) return false;
  for (ts_tensor t : tensors)
    if (requires_grad(t)) return true;
  return false;
}

bool any_requires_grad(const std::vector<ts_tensor>& tensors) {
  if (grad_recording_suppressed()) return false;
  for (ts_tensor t : tensors)
    if (requires_grad(t)) return true;
  return false;
}

void check_inplace(ts_tensor self, const char* op) {
  AutogradMeta* m = meta_of(self);
  if (!m) return;
  if (m->requires_grad && !m->grad_fn)
    throw sdk::Error(TS_ERROR, sdk::cat(op, ": a leaf Variable that requires grad is being used in an in-place "
                                        "operation (do it under no_grad(), or on a clone)"));
  if (!m->is_view) return;
  AutogradMeta* base = m->base.defined() ? meta_of(m->base.handle()) : nullptr;
  if (base && base->requires_grad && !base->grad_fn)
    throw sdk::Error(TS_ERROR, sdk::cat(op, ": a view of a leaf Variable that requires grad is being used in an "
                                        "in-place operation (do it under no_grad(), or on a clone)"));
  if (sdk::has_internal_overlap(TensorRef::borrow(self)))
    throw sdk::Error(TS_ERROR, sdk::cat(op, ": unsupported operation: more than one element of the written-to tensor "
                                        "refers to a single memory location (an expanded view); clone() it first"));
}

void raise_out_requires_grad(const char* op) {
  throw sdk::Error(TS_ERROR, sdk::cat(op, ": functions with out=... arguments don't support automatic "
                                      "differentiation, but one of the arguments requires grad"));
}

void record_output(ts_tensor t, const std::shared_ptr<Node>& node, uint32_t nr,
                   std::initializer_list<ts_tensor> inputs, bool is_view) {
  if (!t) return;
  for (ts_tensor in : inputs)
    if (in == t) return;  // returned as is (contiguous of a contiguous tensor, say)
  TensorRef out = TensorRef::borrow(t);
  if (!is_differentiable_dtype(out.dtype())) return;
  set_history(out, node, nr);
  if (is_view && inputs.size() > 0 && *inputs.begin()) record_view(out, TensorRef::borrow(*inputs.begin()));
}

std::vector<TensorRef> unpack_list(const std::vector<SavedTensor>& saved, Node* owner, const char* what) {
  std::vector<TensorRef> out;
  out.reserve(saved.size());
  for (const SavedTensor& s : saved) out.push_back(s.unpack(owner, what));
  return out;
}

}  // namespace tessera::autograd

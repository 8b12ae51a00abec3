#include "kernel_support.h"

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
  for (ts_tensor t : tensors)
    if (requires_grad(t)) return true;
  return false;
}

bool any_requires_grad(const std::vector<ts_tensor>& tensors) {
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
  if (m->is_view)
    throw sdk::Error(TS_ERROR_NOT_IMPLEMENTED,
                     sdk::cat(op, ": in-place operation on a view of a tensor that autograd tracks is not supported; "
                                  "use the out-of-place operator, or clone() the view first"));
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
  if (!is_floating(out.dtype())) return;
  set_history(out, node, nr);
  if (is_view) ensure_meta(t).is_view = true;
}

std::vector<TensorRef> unpack_list(const std::vector<SavedTensor>& saved, Node* owner, const char* what) {
  std::vector<TensorRef> out;
  out.reserve(saved.size());
  for (const SavedTensor& s : saved) out.push_back(s.unpack(owner, what));
  return out;
}

}  // namespace tessera::autograd

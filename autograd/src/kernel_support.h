#pragma once
// What the generated Autograd kernels share: reading boxed arguments, redispatching below the
// Autograd keys, the in-place checks, and the kernel edge (no exception leaves a kernel).
#include "node.h"

#include <optional>
#include <string>
#include <vector>

namespace tessera::autograd {

using IntList = std::vector<int64_t>;

// Runs `f` as a kernel body: exceptions become a status plus a message on `call`.
template <class F>
ts_status run_guarded(ts_call call, F&& f) noexcept {
  ts_call saved = std::exchange(sdk::current_call(), call);
  ts_status status = TS_OK;
  try {
    f();
  } catch (const sdk::HostFailure& e) {
    status = e.status;
  } catch (const sdk::Error& e) {
    sdk::host().set_error(call, e.what());
    status = e.status();
  } catch (const std::bad_alloc&) {
    sdk::host().set_error(call, "out of memory in autograd");
    status = TS_ERROR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    sdk::host().set_error(call, e.what());
    status = TS_ERROR;
  }
  sdk::current_call() = saved;
  return status;
}

// Calls `op` on the stack with the Autograd keys excluded: the backend (or the next transform)
// runs it, and operators that kernel calls are not recorded either.
void redispatch_below(ts_operator op, ts_stack* stack);

// Argument readers.
inline ts_tensor tensor_arg(const ts_value& v) { return v.tag == TS_VALUE_TENSOR ? v.u.tensor : nullptr; }
std::vector<ts_tensor> tensor_list_arg(const ts_value& v);
IntList int_list_arg(const ts_value& v);
std::optional<IntList> optional_int_list_arg(const ts_value& v);
std::vector<double> double_list_arg(const ts_value& v);
sdk::Scalar scalar_arg(const ts_value& v);
std::optional<sdk::Scalar> optional_scalar_arg(const ts_value& v);
inline int64_t int_arg(const ts_value& v) { return v.tag == TS_VALUE_DOUBLE ? int64_t(v.u.d) : v.u.i; }
inline std::optional<int64_t> optional_int_arg(const ts_value& v) {
  return v.tag == TS_VALUE_NONE ? std::nullopt : std::optional<int64_t>(int_arg(v));
}
inline double double_arg(const ts_value& v) { return v.tag == TS_VALUE_DOUBLE ? v.u.d : double(v.u.i); }
inline std::optional<double> optional_double_arg(const ts_value& v) {
  return v.tag == TS_VALUE_NONE ? std::nullopt : std::optional<double>(double_arg(v));
}
inline bool bool_arg(const ts_value& v) { return v.u.b != 0; }
inline std::optional<bool> optional_bool_arg(const ts_value& v) {
  return v.tag == TS_VALUE_NONE ? std::nullopt : std::optional<bool>(v.u.b != 0);
}
inline std::string string_arg(const ts_value& v) { return v.tag == TS_VALUE_STRING && v.u.str ? v.u.str : ""; }
inline std::optional<std::string> optional_string_arg(const ts_value& v) {
  return v.tag == TS_VALUE_STRING && v.u.str ? std::optional<std::string>(v.u.str) : std::nullopt;
}
inline int32_t dtype_arg(const ts_value& v) { return int32_t(v.u.i); }
inline std::optional<int32_t> optional_dtype_arg(const ts_value& v) {
  return v.tag == TS_VALUE_NONE ? std::nullopt : std::optional<int32_t>(int32_t(v.u.i));
}

IntList sizes_of(ts_tensor t);
inline int32_t dtype_of(ts_tensor t) { return t ? TensorRef::borrow(t).dtype() : TS_FLOAT32; }

bool any_requires_grad(std::initializer_list<ts_tensor> tensors);
bool any_requires_grad(const std::vector<ts_tensor>& tensors);

// Raises when an in-place operator may not modify `self` (a leaf that requires grad, or a view
// of a tensor that autograd tracks).
void check_inplace(ts_tensor self, const char* op);
// Raises for out= variants when gradients would be needed.
[[noreturn]] void raise_out_requires_grad(const char* op);

// Records `node` as the history of output `t` (number `nr`) unless `t` carries no gradient
// (an integer dtype) or is one of the inputs returned as is (then it keeps its own history).
void record_output(ts_tensor t, const std::shared_ptr<Node>& node, uint32_t nr,
                   std::initializer_list<ts_tensor> inputs, bool is_view);

// Unpacks saved tensors for a formula.
std::vector<TensorRef> unpack_list(const std::vector<SavedTensor>& saved, Node* owner, const char* what);

// Registers every generated kernel (autograd_kernels.cpp) under `keys`.
void register_generated_kernels(sdk::Registrar& reg, const std::vector<ts_dispatch_key>& keys);

}  // namespace tessera::autograd

// vmap for a plugin's own operators: a batching rule.
//
// Optional: under vmap, an operator without a rule runs once per sample (vmap's for-loop
// fallback, with a one-time performance warning). A rule is a kernel registered under the
// "Batched" dispatch key. vmap reaches it when an argument is batched, and also while a vmap is
// open with no argument batched (then it only passes the call on: `redispatch_below`).
//
//   void scale_rows_batched(sdk::Args& a) {
//     namespace vb = sdk::batching;
//     const int64_t level = std::max(vb::level(a.tensor(0)), vb::level(a.tensor(1)));
//     if (level == 0) return vb::redispatch_below(a);
//     // Values carry the batch at dim 0; an unbatched argument is expanded (or used as it is).
//     sdk::TensorRef x = vb::value_or_expand(a.tensor(0), level), s = vb::value_or_expand(a.tensor(1), level);
//     a.return_tensor(vb::wrap(my_kernel_on_values(x, s), level));
//   }
//   reg.kernel("vendor::scale_rows", batched_key /* find_dispatch_key("Batched") */, scale_rows_batched);
//
// Calling operators on the values is fine (even your own operator): a value is batched at lower
// levels only, so nested vmaps unwind one level per call.
#pragma once

#include <tessera/sdk/plugin.h>

#include <algorithm>
#include <vector>

namespace tessera::sdk::batching {

namespace detail {
inline ts_operator vmap_op(const char* name) {
  ts_operator op = host().find_operator(name);
  TS_SDK_CHECK(op, TS_ERROR, "batching: operator '", name, "' does not exist (is the vmap plugin loaded?)");
  return op;
}
inline ts_value call(const char* name, std::initializer_list<ts_value> args) {
  ts_value values[4];
  int n = 0;
  for (const ts_value& v : args) values[n++] = v;
  ts_stack stack{sizeof(ts_stack), values, n, 4};
  check_host(host().call_operator(current_call(), vmap_op(name), &stack));
  return values[0];
}
}  // namespace detail

// The vmap level a tensor is batched at (the innermost, for nested vmaps); 0 when it is not batched.
inline int64_t level(const TensorRef& t) {
  ts_dispatch_key batched = -1;
  if (host().find_dispatch_key("Batched", &batched) != TS_OK || !(host().tensor_keys(t.handle()) & (ts_keyset(1) << batched)))
    return 0;
  return detail::call("vmap::level", {value(t)}).u.i;
}

// The batched values of a tensor batched at some level: the batch is dim 0.
inline TensorRef batched_value(const TensorRef& t) {
  return TensorRef::adopt(detail::call("vmap::unwrap", {value(t)}).u.tensor);
}

// The values of `t` at `level`: its own if batched there, else `t` expanded to the batch (no copy).
inline TensorRef value_or_expand(const TensorRef& t, int64_t level_id) {
  TensorRef batched = TensorRef::adopt(detail::call("vmap::promote", {value(t), value(level_id)}).u.tensor);
  return batched_value(batched);
}

// Values (batch at dim 0) as a tensor batched at `level`: what a rule returns.
inline TensorRef wrap(const TensorRef& values, int64_t level_id) {
  return TensorRef::adopt(detail::call("vmap::add_batch_dim", {value(values), value(int64_t(0)), value(level_id)}).u.tensor);
}

// Passes a call with no batched argument on to the keys below Batched.
inline void redispatch_below(Args& a) {
  ts_dispatch_key batched = -1;
  check_host(host().find_dispatch_key("Batched", &batched));
  const ts_operator op = host().call_operator_of(a.call());
  // Args does not expose the stack: rebuild it from the arguments (a rule's operator has few).
  std::vector<ts_value> values;
  for (int i = 0; i < a.size(); ++i) values.push_back(a.value(i));
  values.resize(std::max<size_t>(values.size(), 8), none());
  ts_stack stack{sizeof(ts_stack), values.data(), a.size(), int32_t(values.size())};
  check_host(host().redispatch(a.call(), op, a.keys() & ~(ts_keyset(1) << batched), &stack));
  a.returns_values({values.data(), size_t(stack.size)});
}

}  // namespace tessera::sdk::batching

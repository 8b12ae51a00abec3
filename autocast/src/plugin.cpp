// libtessera_autocast.so: mixed precision as a transform plugin on the Autocast key.
// While autocast is on for a device type on a thread, the thread's included keys hold Autocast,
// so every operator call reaches this plugin first. Operators on the policy lists (policy.cpp)
// get their floating tensor arguments cast, on the tensors' device, then run below the key:
//   lower precision (matrix products, convolutions): float32 -> the autocast dtype;
//   float32 (reductions, losses, norms, exp/log...): float16 / bfloat16 -> float32.
// The casts run below Autocast and above Autograd, so gradients flow back through them to the
// float32 parameters. Every other operator passes through unchanged.
// Frontends drive it with the autocast:: operators defined here (per thread, per device type).
#include "policy.h"

#include <tessera/sdk/ops.h>
#include <tessera/sdk/plugin.h>

#include <map>
#include <string>
#include <vector>

namespace tessera::autocast {
namespace {

ts_dispatch_key autocast_key = -1;
ts_keyset autocast_bit() { return ts_keyset(1) << autocast_key; }

struct DeviceState {
  bool enabled = false;
  int32_t dtype = -1;
};
thread_local std::map<int32_t, DeviceState> states;  // by device type id

int32_t device_type_of(const char* op, const std::string& name) {
  const int32_t type = sdk::host().device_type_id(name.c_str());
  if (type < 0) sdk::fail(TS_ERROR_VALUE, op, ": unknown device type '", name, "' (no loaded plugin registers it)");
  return type;
}

// The thread's included keys hold Autocast while any device type has it on.
void update_key() {
  bool any = false;
  for (const auto& [type, s] : states) any = any || s.enabled;
  ts_keyset included = 0, excluded = 0;
  sdk::host().tls_keys(&included, &excluded);
  sdk::host().set_tls_keys(any ? included | autocast_bit() : included & ~autocast_bit(), excluded);
}

// autocast::set_state(str device_type, bool enabled, ScalarType dtype) -> ()
void set_state(sdk::Args& a) {
  const char* op = "autocast::set_state";
  const int32_t type = device_type_of(op, std::string(a.optional_str(0).value_or("")));
  const int32_t dtype = a.optional_dtype(2).value_or(-1);
  if (dtype != TS_FLOAT16 && dtype != TS_BFLOAT16 && dtype != TS_FLOAT32)
    sdk::fail(TS_ERROR_VALUE, op, ": autocast runs in float16, bfloat16 (or float32: no casts), got ",
              sdk::dtype_name(dtype));
  states[type] = DeviceState{a.to_bool(1), dtype};
  update_key();
  a.returns({});
}

// autocast::is_enabled(str device_type) -> bool ; autocast::get_dtype(str device_type) -> ScalarType
void is_enabled(sdk::Args& a) {
  auto it = states.find(device_type_of("autocast::is_enabled", std::string(a.optional_str(0).value_or(""))));
  ts_value v{TS_VALUE_BOOL, 0, {}};
  v.u.b = it != states.end() && it->second.enabled;
  a.returns({v});
}

// A tensor argument `cast` would convert for `policy` with the device's autocast dtype.
bool eligible(Policy policy, int32_t from, int32_t to) {
  if (policy == Policy::LowerPrecision) return from == TS_FLOAT32 && to != TS_FLOAT32;
  return from == TS_FLOAT16 || from == TS_BFLOAT16;  // Policy::Float32
}

// The Autocast kernel of a policy-list operator: casts, then runs the operator below the key.
ts_status cast_kernel(void* data, ts_call call, ts_keyset keys, ts_stack* stack) noexcept {
  const ts_host_api& host = sdk::host();
  ts_operator op = host.call_operator_of(call);
  const Policy policy = Policy(reinterpret_cast<intptr_t>(data));
  std::vector<sdk::TensorRef> casts;  // alive until the call returns; the stack borrows them
  try {
    // The policy follows the device of the first tensor argument (as PyTorch's does).
    const DeviceState* state = nullptr;
    int32_t device_type = -1;
    for (int32_t i = 0; i < stack->size && device_type < 0; ++i)
      if (stack->values[i].tag == TS_VALUE_TENSOR && stack->values[i].u.tensor)
        device_type = sdk::TensorRef::borrow(stack->values[i].u.tensor).device().type;
    if (auto it = states.find(device_type); it != states.end() && it->second.enabled) state = &it->second;
    if (state) {
      const int32_t to = policy == Policy::LowerPrecision ? state->dtype : TS_FLOAT32;
      sdk::ExcludeKeysGuard below(autocast_bit());  // the casts themselves: recorded by autograd
      casts.reserve(size_t(stack->size));
      for (int32_t i = 0; i < stack->size; ++i) {
        ts_value& v = stack->values[i];
        if (v.tag != TS_VALUE_TENSOR || !v.u.tensor) continue;
        sdk::TensorRef t = sdk::TensorRef::borrow(v.u.tensor);
        if (t.device().type != device_type || !eligible(policy, t.dtype(), to)) continue;
        casts.push_back(sdk::ops::to(t, to));
        v.u.tensor = casts.back().handle();
      }
    }
  } catch (const sdk::HostFailure& e) {
    return e.status;
  } catch (const std::exception& e) {
    host.set_error(call, e.what());
    return TS_ERROR;
  }
  return host.redispatch(call, op, keys & (autocast_bit() - 1), stack);
}

// Every other operator: straight below the key.
ts_status pass_through(void*, ts_call call, ts_keyset keys, ts_stack* stack) noexcept {
  const ts_host_api& host = sdk::host();
  return host.redispatch(call, host.call_operator_of(call), keys & (autocast_bit() - 1), stack);
}

void register_autocast(sdk::Registrar& reg) {
  sdk::check_host(sdk::host().find_dispatch_key("Autocast", &autocast_key));
  reg.def("autocast::set_state(str device_type, bool enabled, ScalarType dtype) -> ()");
  reg.kernel("autocast::set_state", TS_KEY_CATCH_ALL, set_state);
  reg.def("autocast::is_enabled(str device_type) -> bool");
  reg.kernel("autocast::is_enabled", TS_KEY_CATCH_ALL, is_enabled);
  sdk::check_host(sdk::host().register_fallback(reg.raw(), autocast_key, pass_through, nullptr));
  for (const auto& [name, policy] : policy_list())
    if (sdk::host().find_operator(name))  // operators of plugins not loaded (yet) are skipped
      reg.boxed_kernel(name, autocast_key, cast_kernel, reinterpret_cast<void*>(intptr_t(policy)));
}

}  // namespace
}  // namespace tessera::autocast

// Needs host ABI 1.6 (device_type_id).
TESSERA_PLUGIN("autocast", "0.1.0", 6, tessera::autocast::register_autocast)

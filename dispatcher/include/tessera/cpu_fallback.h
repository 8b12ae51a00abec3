#pragma once
// CPU fallback for device plugins: an operator without a kernel for a device's backend key
// (CUDA, HIP, or a dynamically registered vendor device) runs on the CPU kernel instead, with
// its tensor arguments copied to the CPU and its results copied back. A warning is printed
// once per (operator, device). On by default; TESSERA_CPU_FALLBACK=0 in the environment or
// set_cpu_fallback(false) turns it off, and then a missing kernel is a NotImplementedError
// that lists what the device does register.
#include <tessera/dispatcher.h>

namespace tessera {

// Turns the fallback on or off for the whole process; this overrides the environment.
void set_cpu_fallback(bool enabled);
// Forgets set_cpu_fallback(): the environment (TESSERA_CPU_FALLBACK) decides again.
void reset_cpu_fallback();
// True unless set_cpu_fallback(false), or TESSERA_CPU_FALLBACK=0 without an override.
bool cpu_fallback_enabled();

namespace detail {
// View operators that may return a copy by contract (PyTorch documents reshape, flatten,
// contiguous and to as "a view or a copy"); the others must alias their input, which a CPU
// result copied back cannot do, so they never fall back.
bool view_may_copy(const FunctionSchema& s);
// Whether the fallback can run `op` at all: the CPU has a kernel and it is not an aliasing view.
bool cpu_fallback_can_run(OperatorHandle op);
// Whether `key` is a backend key the fallback serves (CUDA, HIP, dynamic vendor devices).
bool is_fallback_backend_key(int32_t key);
// Called by the dispatcher where a call of `op` found no kernel at backend `key`. Runs the
// call on CPU and returns true; returns false when the fallback does not apply to `key`, so
// the dispatcher raises its usual error; raises NotImplementedError itself when the fallback
// applies but is off or the CPU has no kernel either.
bool run_cpu_fallback(OperatorHandle op, int32_t key, ts_stack* stack);
// Installed by init(): until then the dispatcher never falls back.
void install_cpu_fallback();
}  // namespace detail

}  // namespace tessera

#pragma once
// Derived in-place and out= variants. ops.yaml derives `name_` and `name.out` from a functional
// operator; a device plugin that registers only the functional kernel still runs the variants
// on its device: the functional kernel computes the result and the device's copy_ writes it into
// self (in place) or into out (resized first, as PyTorch does). A vendor writes one kernel per
// operator, not three, and never pays the CPU fallback's copies for a variant.
#include <tessera/dispatcher.h>

namespace tessera::detail {

// Whether a call of `op` at backend `key`, which has no kernel of its own there, can run as
// its functional operator's kernel at `key` plus a copy.
bool can_derive_variant(OperatorHandle op, int32_t key);
// Runs it (the caller checked can_derive_variant). Raises TypeError when the result's dtype
// cannot be cast to the target's, RuntimeError when an in-place result has another shape.
void run_derived_variant(OperatorHandle op, int32_t key, ts_stack* stack);

}  // namespace tessera::detail

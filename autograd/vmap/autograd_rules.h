// vmap over autograd's control operators (grad, backward, requires_grad_, .grad, ...).
#pragma once

#include <tessera/sdk/plugin.h>

namespace tessera::vmap {

enum class AutogradOp : intptr_t { Grad, Backward, ReadState, ReadTensor, SetState, MakeDual };

ts_status autograd_kernel(void* data, ts_call call, ts_keyset keys, ts_stack* stack) noexcept;
// Registers the kernels when the autograd plugin is loaded (it must load first).
void register_autograd_rules(sdk::Registrar& reg, ts_dispatch_key key);

}  // namespace tessera::vmap

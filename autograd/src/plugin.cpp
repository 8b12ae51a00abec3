// libtessera_autograd.so: reverse-mode automatic differentiation as a transform plugin.
#include "kernel_support.h"

namespace tessera::autograd {

void register_control_ops(sdk::Registrar& reg, const std::vector<ts_dispatch_key>& keys);
void register_autograd_fallback(sdk::Registrar& reg, const std::vector<ts_dispatch_key>& keys);

namespace {

void register_autograd(sdk::Registrar& reg) {
  const std::vector<ts_dispatch_key> autograd_keys{40, 41, 42, 43};  // AutogradCPU, CUDA, HIP, Other
  register_generated_kernels(reg, autograd_keys);
  register_autograd_fallback(reg, autograd_keys);
  // The autograd:: operators work on any tensor of any device: one catch-all kernel each.
  register_control_ops(reg, {TS_KEY_CATCH_ALL});
}

}  // namespace
}  // namespace tessera::autograd

// Needs host ABI 1.2 (extension slots, tensor keys, thread keys, callbacks).
TESSERA_PLUGIN("autograd", "0.1.0", 2, tessera::autograd::register_autograd)

// Registers the activation, softmax-backward and loss kernels (one family per file).
#include "kernels.h"

namespace tessera::cpu {

void register_activation_kernels(sdk::Registrar& reg, ts_dispatch_key key);        // nn_activation.cpp
void register_softmax_backward_kernels(sdk::Registrar& reg, ts_dispatch_key key);  // nn_activation_softmax_backward.cpp
void register_nll_loss_kernels(sdk::Registrar& reg, ts_dispatch_key key);          // nn_loss_nll.cpp
void register_pointwise_loss_kernels(sdk::Registrar& reg, ts_dispatch_key key);    // nn_loss_pointwise.cpp

void register_activation_loss_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  register_activation_kernels(reg, key);
  register_softmax_backward_kernels(reg, key);
  register_nll_loss_kernels(reg, key);
  register_pointwise_loss_kernels(reg, key);
}

}  // namespace tessera::cpu

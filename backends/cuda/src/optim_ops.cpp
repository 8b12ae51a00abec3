// _fused_adam_ on the GPU (sdk/adam_step.h's rules and coefficients, as the CPU plugin's): one
// kernel launch per parameter, reading and writing each element once. Kernel: optim.cu.
#include "cuda_plugin.h"
#include "nn_launch.h"

#include <tessera/sdk/adam_step.h>

namespace tessera::gpu {
namespace {

void fused_adam_k(sdk::Args& a) {
  const char* op = "_fused_adam_";
  const sdk::AdamStep s = sdk::adam_step(op, a);
  if (s.max_sq) common_device(op, {&s.param, &s.exp_avg, &s.exp_avg_sq, &s.grad, &*s.max_sq});
  else common_device(op, {&s.param, &s.exp_avg, &s.exp_avg_sq, &s.grad});
  DeviceGuard guard(s.param.device().index);
  AdamArgs k;
  k.param = first_element(s.param), k.exp_avg = first_element(s.exp_avg), k.exp_avg_sq = first_element(s.exp_avg_sq);
  k.grad = first_element(s.grad);
  k.max_sq = s.max_sq ? first_element(*s.max_sq) : nullptr;
  k.dtype = s.dtype, k.n = s.param.numel();
  k.sign = s.sign, k.decay = s.decay, k.coupled_decay = s.coupled_decay, k.beta2 = s.beta2;
  k.one_minus_beta1 = s.one_minus_beta1, k.one_minus_beta2 = s.one_minus_beta2, k.eps = s.eps;
  k.step_size = s.step_size, k.inv_bc2_sqrt = s.inv_bc2_sqrt;
  launch_fused_adam(k, stream_for(s.param.device().index));
  a.returns({});
}

}  // namespace

void register_optim_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("_fused_adam_", key, fused_adam_k);
}

}  // namespace tessera::gpu

// A custom operator the plugin defines: <device>::fused_axpy(x, y, alpha) = alpha * x + y.
// The namespace is the device name, so two builds of this plugin (simdev, simdev2) can be
// loaded together without defining the same operator twice. It has a kernel for this device
// and one for the CPU, so it works wherever the tensors are.
#include "simdev.h"

namespace simdev {

namespace {
void fused_axpy(sdk::Args& a) {
  sdk::TensorRef x = a.tensor(0), y = a.tensor(1);
  sdk::ScalarArg alpha = a.scalar(2);
  // y + alpha * x, through the shared element-wise path (broadcasting, promotion, device checks).
  a.return_tensor(binary(SIMDEV_NAME "::fused_axpy", a.call(), y, BinaryRhs{&x, {}}, BinaryOp::Add, alpha));
}
}  // namespace

void register_custom_ops(Registrar& reg, ts_dispatch_key key) {
  reg.def(SIMDEV_NAME "::fused_axpy(Tensor x, Tensor y, Scalar alpha=1) -> Tensor");
  ts_dispatch_key cpu = -1;
  sdk::check_host(sdk::host().find_dispatch_key("CPU", &cpu));
  reg.kernel(SIMDEV_NAME "::fused_axpy", key, fused_axpy);
  reg.kernel(SIMDEV_NAME "::fused_axpy", cpu, fused_axpy);
}

}  // namespace simdev

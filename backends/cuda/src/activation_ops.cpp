// The activations' backward operators autograd calls (gelu_backward with approximate 'none' or
// 'tanh', silu_backward, sigmoid_backward, tanh_backward, threshold_backward): grad and x
// broadcast and promoted as the CPU plugin does; the arithmetic runs in activation.cu.
// (gelu, silu and the other forwards are in elementwise_ops.cpp.)
#include "cuda_plugin.h"
#include "nn_launch.h"

#include <string>

namespace tessera::gpu {
namespace {

// out = f(grad, x): `second` names x in messages.
void backward(sdk::Args& a, const char* op, const char* second, ActivationBackward f) {
  TensorRef grad = a.tensor(0), x = a.tensor(1);
  common_device(op, {&grad, &x});
  const int32_t dtype = sdk::promote_types(grad.dtype(), x.dtype());
  TS_SDK_CHECK(sdk::is_floating(dtype), TS_ERROR_TYPE, op, ": expected grad_output and ", second,
               " of a floating point dtype, got ", sdk::dtype_name(grad.dtype()), " and ", sdk::dtype_name(x.dtype()));
  auto shape = broadcast_shapes(op, grad.sizes(), x.sizes());
  TensorRef out = empty_on(a.call(), shape, dtype, grad.device());
  Loop L = make_loop(op, shape, {&out, &grad, &x});
  DeviceGuard guard(grad.device().index);
  launch_activation_backward(f, compute_for(dtype), L, false, stream_for(grad.device().index));
  a.return_tensor(std::move(out));
}

// gelu_backward(Tensor grad_output, Tensor self, *, str approximate='none')
void gelu_backward_k(sdk::Args& a) {
  auto approx = a.optional_str(2).value_or("none");
  TS_SDK_CHECK(approx == "none" || approx == "tanh", TS_ERROR_VALUE,
               "gelu_backward: expected approximate to be 'none' or 'tanh', got '", std::string(approx), "'");
  backward(a, "gelu_backward", "self", approx == "tanh" ? ActivationBackward::GeluTanh : ActivationBackward::Gelu);
}
void silu_backward_k(sdk::Args& a) { backward(a, "silu_backward", "self", ActivationBackward::Silu); }
void sigmoid_backward_k(sdk::Args& a) { backward(a, "sigmoid_backward", "output", ActivationBackward::Sigmoid); }
void tanh_backward_k(sdk::Args& a) { backward(a, "tanh_backward", "output", ActivationBackward::Tanh); }

// threshold_backward(Tensor grad_output, Tensor self, Scalar threshold): grad where self >
// threshold, else 0 (relu's backward with threshold 0). Any numeric dtype, as relu.
void threshold_backward_k(sdk::Args& a) {
  const char* op = "threshold_backward";
  TensorRef grad = a.tensor(0), x = a.tensor(1);
  const ScalarArg th = a.scalar(2);
  common_device(op, {&grad, &x});
  const int32_t dtype = sdk::promote_types(grad.dtype(), x.dtype());
  TS_SDK_CHECK(dtype != TS_BOOL, TS_ERROR_TYPE, op, ": expected numeric tensors, got bool");
  auto shape = broadcast_shapes(op, grad.sizes(), x.sizes());
  TensorRef out = empty_on(a.call(), shape, dtype, grad.device());
  Loop L = make_loop(op, shape, {&out, &grad, &x});
  L.scalar_d = th.to_double();
  L.scalar_i = th.to_int();
  DeviceGuard guard(grad.device().index);
  launch_activation_backward(ActivationBackward::Threshold, compute_for(dtype), L, th.kind != ScalarArg::Double,
                             stream_for(grad.device().index));
  a.return_tensor(std::move(out));
}
}  // namespace

void register_activation_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("gelu_backward", key, gelu_backward_k);
  reg.kernel("silu_backward", key, silu_backward_k);
  reg.kernel("sigmoid_backward", key, sigmoid_backward_k);
  reg.kernel("tanh_backward", key, tanh_backward_k);
  reg.kernel("threshold_backward", key, threshold_backward_k);
}

}  // namespace tessera::gpu

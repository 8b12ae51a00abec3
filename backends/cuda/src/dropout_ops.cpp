// native_dropout and native_dropout_backward (the CPU plugin's semantics, checks and messages).
// Each training call with 0 < p takes one seed from the host's generator of this device (so
// manual_seed makes masks reproducible); evaluation mode and p == 0 return a copy and an
// all-true mask; p == 1 drops everything (scale 0). Kernels: dropout.cu.
#include "cuda_plugin.h"
#include "nn_launch.h"

namespace tessera::gpu {
namespace {

using sdk::require_floating;

// native_dropout(Tensor input, float p, bool? train) -> (Tensor output, Tensor mask); train None: True.
void dropout_k(sdk::Args& a) {
  const char* op = "native_dropout";
  const TensorRef input = a.tensor(0);
  const double p = a.to_double(1);
  const bool train = a.is_none(2) ? true : a.to_bool(2);
  common_device(op, {&input});
  require_floating(op, input, "input");
  TS_SDK_CHECK(p >= 0 && p <= 1, TS_ERROR_VALUE, op, ": expected a dropout probability p in [0, 1], got ", p);
  DeviceGuard guard(input.device().index);
  const gpuStream_t stream = stream_for(input.device().index);
  TensorRef out = empty_on(a.call(), input.sizes(), input.dtype(), input.device());
  TensorRef mask = empty_on(a.call(), input.sizes(), TS_BOOL, input.device());
  const int64_t n = input.numel();
  if (n == 0) {
  } else if (!train || p == 0) {
    copy_into(op, out, input);
    check(gpuMemsetAsync(mask.data(), 1, size_t(n), stream), op);  // bool true is the byte 1
  } else {
    const TensorRef x = contiguous(a.call(), input, input.dtype());
    DropoutArgs d;
    d.in = first_element(x), d.out = first_element(out), d.mask = first_element(mask);
    d.dtype = input.dtype(), d.n = n;
    refuse_random_while_capturing(op, input.device());
    d.seed = sdk::host().next_random_seed(input.device());
    d.keep = 1 - p, d.scale = d.keep == 0 ? 0.0 : 1.0 / d.keep;
    launch_dropout(d, stream);
  }
  a.returns({sdk::Args::tensor_value(std::move(out)), sdk::Args::tensor_value(std::move(mask))});
}

// native_dropout_backward(Tensor grad_output, Tensor mask, float scale) -> grad_output * mask * scale
void dropout_backward_k(sdk::Args& a) {
  const char* op = "native_dropout_backward";
  const TensorRef grad = a.tensor(0), mask_t = a.tensor(1);
  const double scale = a.to_double(2);
  common_device(op, {&grad, &mask_t});
  require_floating(op, grad, "grad_output");
  TS_SDK_CHECK(mask_t.dtype() == TS_BOOL, TS_ERROR_TYPE, op, ": expected mask of dtype bool, got ",
               sdk::dtype_name(mask_t.dtype()));
  TS_SDK_CHECK(std::equal(grad.sizes().begin(), grad.sizes().end(), mask_t.sizes().begin(), mask_t.sizes().end()),
               TS_ERROR_VALUE, op, ": expected mask (grad_output's shape) of shape ", shape_text(grad.sizes()), ", got ",
               shape_text(mask_t.sizes()));
  DeviceGuard guard(grad.device().index);
  const TensorRef g = contiguous(a.call(), grad, grad.dtype()), mask = contiguous(a.call(), mask_t, TS_BOOL);
  TensorRef out = empty_on(a.call(), grad.sizes(), grad.dtype(), grad.device());
  DropoutArgs d;
  d.in = first_element(g), d.out = first_element(out), d.mask_in = first_element(mask);
  d.dtype = grad.dtype(), d.n = grad.numel(), d.scale = scale;
  launch_dropout_backward(d, stream_for(grad.device().index));
  a.return_tensor(std::move(out));
}
}  // namespace

void register_dropout_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("native_dropout", key, dropout_k);
  reg.kernel("native_dropout_backward", key, dropout_backward_k);
}

}  // namespace tessera::gpu

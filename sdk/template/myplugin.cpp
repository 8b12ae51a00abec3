// A minimal Tessera plugin: one custom operator, myplugin::scale(Tensor x, float factor) -> Tensor,
// with a kernel registered under the CPU key. A device plugin also registers a device
// (see sdk/examples/simdevice). Replace the kernel with your own; keep the shape.
#include <tessera/sdk/plugin.h>

namespace sdk = tessera::sdk;

namespace {

// Arguments arrive in schema order on the boxed stack; Args gives typed access.
// Throwing sdk::Error (via TS_SDK_CHECK / sdk::fail) becomes a status + message for the host.
void scale(sdk::Args& a) {
  sdk::TensorRef x = a.tensor(0);
  double factor = a.to_double(1);
  TS_SDK_CHECK(x.dtype() == TS_FLOAT32, TS_ERROR_TYPE, "scale: expected a float32 tensor, got ",
               sdk::dtype_name(x.dtype()));
  TS_SDK_CHECK(x.is_contiguous(), TS_ERROR_VALUE, "scale: expected a contiguous tensor");
  // A new tensor on the input's device; the return slot takes over the reference.
  sdk::TensorRef out = sdk::empty(a.call(), x.sizes(), x.dtype(), x.device());
  const float* src = x.data<float>();
  float* dst = out.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) dst[i] = float(src[i] * factor);
  a.return_tensor(std::move(out));
}

// Called once, inside tessera_plugin_init. Nothing is visible to the host until it returns;
// if anything here fails, the whole plugin is refused and leaves nothing behind.
void register_myplugin(sdk::Registrar& reg) {
  reg.def("myplugin::scale(Tensor x, float factor) -> Tensor");
  ts_dispatch_key cpu = -1;
  sdk::check_host(sdk::host().find_dispatch_key("CPU", &cpu));
  reg.kernel("myplugin::scale", cpu, scale);
}

}  // namespace

// name, version, oldest host ABI minor accepted (of this major), register function.
TESSERA_PLUGIN("myplugin", "0.1.0", 0, register_myplugin)

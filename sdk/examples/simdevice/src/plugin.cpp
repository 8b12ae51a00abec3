// The plugin's one entry point: register the device, then its kernels under the key the host
// hands back. Built with -DSIMDEV_NAME=\"simdev2\" it is a second, independent device.
#include "simdev.h"

namespace {
void register_simdev(tessera::sdk::Registrar& sdk_reg) {
  simdev::Registrar reg(sdk_reg);
  ts_dispatch_key key = reg.device(simdev::device_desc());
  simdev::state().key = key;
  // Our device type id (ts_device.type of our tensors): the host says it since ABI 1.6. On an
  // older host (this plugin accepts any), the type id of a plugin's device equals its key.
  simdev::state().type = TS_STRUCT_HAS(&tessera::sdk::host(), ts_host_api, device_type_id)
                             ? sdk_reg.device_type(SIMDEV_NAME)
                             : key;
  simdev::register_factories(reg, key);
  simdev::register_elementwise(reg, key);
  simdev::register_reductions(reg, key);
  simdev::register_linalg(reg, key);
  simdev::register_copies_and_views(reg, key);
  simdev::register_custom_ops(reg, key);
  simdev::register_stream_ops(reg);
}
}  // namespace

// Accepts any 1.x host (min minor 0): on a 1.0 host default_float_dtype falls back to float32.
TESSERA_PLUGIN(SIMDEV_NAME, "0.1.0", 0, register_simdev)

#pragma once
// The device's own contract, beyond its kernels: copies, and (ABI 1.3) streams, events,
// record_stream, pinned memory and non-blocking copies. A function the plugin does not offer is
// reported as such, not failed: each is optional in the ABI.
#include <tessera/tessera.h>

#include <string>
#include <vector>

namespace tessera::conformance {

struct DeviceCheck {
  std::string name;
  bool passed = true;
  std::string detail;  // why it failed, or a note ("not offered")
};
std::vector<DeviceCheck> check_device_functions(Device device);

}  // namespace tessera::conformance

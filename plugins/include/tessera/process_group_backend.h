#pragma once
// The process-group backends that plugins registered (ABI 1.7: Gloo, NCCL, a vendor's), by name.
// The distributed library (libtessera-distributed) drives them; the host only keeps the table.
#include <tessera/abi.h>

#include <string>
#include <vector>

namespace tessera {

struct ProcessGroupBackendEntry {
  ts_process_group_backend desc{};  // copied at registration; its strings are the plugin's statics
  std::string name;
  std::string plugin;
  std::vector<std::string> device_types;  // desc.device_types, split
};

// Backend `name`, loading libtessera_<name>.so first when it is not registered yet (and lazy
// loading allows it). Raises ValueError naming the backends that are available otherwise.
const ProcessGroupBackendEntry& process_group_backend(const std::string& name);
// The names registered so far.
std::vector<std::string> process_group_backend_names();
// The message a backend function left with host->set_error(NULL, ...) on this thread, taken.
std::string take_backend_error();

namespace host {
// Adds backends whose plugin was accepted (called at commit, under the plugin host's lock).
void add_process_group_backend(const ts_process_group_backend& desc, const std::string& plugin);
bool has_process_group_backend(const std::string& name);
}  // namespace host

}  // namespace tessera

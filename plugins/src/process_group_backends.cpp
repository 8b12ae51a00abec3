// The table of process-group backends (ABI 1.7), filled when a backend's plugin is committed.
#include <tessera/device_registry.h>
#include <tessera/error.h>
#include <tessera/process_group_backend.h>
#include <tessera/runtime.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <deque>
#include <mutex>
#include <sstream>

namespace tessera {

namespace {
struct BackendTable {
  std::mutex mutex;
  std::deque<ProcessGroupBackendEntry> entries;  // a deque: references stay valid as it grows
};
BackendTable& table() {
  static BackendTable t;
  return t;
}
const ProcessGroupBackendEntry* find(const std::string& name) {
  auto& t = table();
  std::lock_guard lock(t.mutex);
  for (auto& e : t.entries)
    if (e.name == name) return &e;
  return nullptr;
}
}  // namespace

void host::add_process_group_backend(const ts_process_group_backend& desc, const std::string& plugin) {
  ProcessGroupBackendEntry entry;
  entry.desc = desc;
  entry.name = desc.name;
  entry.plugin = plugin;
  std::stringstream types(desc.device_types ? desc.device_types : "");
  for (std::string t; std::getline(types, t, ',');)
    if (!t.empty()) entry.device_types.push_back(t);
  auto& t = table();
  std::lock_guard lock(t.mutex);
  t.entries.push_back(std::move(entry));
}

bool host::has_process_group_backend(const std::string& name) { return find(name) != nullptr; }

std::vector<std::string> process_group_backend_names() {
  auto& t = table();
  std::lock_guard lock(t.mutex);
  std::vector<std::string> names;
  for (auto& e : t.entries) names.push_back(e.name);
  return names;
}

const ProcessGroupBackendEntry& process_group_backend(const std::string& name) {
  init();
  if (auto* e = find(name)) return *e;
  bool lowercase_word = !name.empty();
  for (char c : name) lowercase_word &= (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  if (lowercase_word && !is_plugin_loaded(name)) {
    require_lazy_loading(name, fmt::format("the process-group backend '{}'", name));
    load_named_plugin(name);
    if (auto* e = find(name)) return *e;
  }
  auto known = process_group_backend_names();
  raise<ValueError>("unknown process-group backend '{}': registered backends are [{}] (a backend is a plugin, "
                    "libtessera_<name>.so, searched in {})", name, fmt::join(known, ", "), plugin_search_path_text());
}

// set_error(NULL, ...) outside init lands where device functions' messages do.
std::string take_backend_error() { return std::exchange(device_function_error(), {}); }

}  // namespace tessera

// Loading plugins with Boost.DLL: discovery, the two-sided version handshake, staged
// registration (a refused plugin leaves nothing behind), lazy loading by device name.
#include "host_state.h"

#include <tessera/process_group_backend.h>

#include <tessera/device_registry.h>
#include <tessera/runtime.h>

#include <boost/dll/runtime_symbol_info.hpp>
#include <boost/dll/shared_library.hpp>
#include <fmt/ranges.h>

#include <atomic>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <mutex>
#include <set>
#include <utility>

namespace fs = std::filesystem;

namespace tessera {
namespace {

struct LoadedPlugin {
  PluginInfo info;
  boost::dll::shared_library library;  // kept open for the life of the process
};

struct PluginHost {
  std::recursive_mutex mutex;
  std::deque<LoadedPlugin> plugins;
  std::set<std::string> lazy_attempted;
};

PluginHost& plugin_host() {
  static PluginHost* h = new PluginHost;  // never destroyed: plugin code may run at exit
  return *h;
}

// "libtessera_cpu.so" -> "cpu": a provisional name until the plugin names itself.
std::string name_from_path(const fs::path& p) {
  std::string stem = p.stem().string();
  for (std::string_view prefix : {"libtessera_", "lib"})
    if (stem.starts_with(prefix)) return stem.substr(prefix.size());
  return stem;
}

std::string abi_string(int major, int minor) { return fmt::format("{}.{}", major, minor); }

void check_versions(const ts_plugin_info& info, const std::string& name, const std::string& path) {
  std::string host_abi = abi_string(TESSERA_ABI_MAJOR, TESSERA_ABI_MINOR);
  std::string plugin_abi = abi_string(info.abi_major, info.abi_minor);
  if (info.abi_major != TESSERA_ABI_MAJOR)
    raise<PluginError>("plugin '{}' ({}) refused: it was built against Tessera ABI {}, this host speaks ABI {}; the "
                       "major versions differ, so rebuild the plugin against this host's SDK", name, path, plugin_abi,
                       host_abi);
  if (info.abi_minor > TESSERA_ABI_MINOR)
    raise<PluginError>("plugin '{}' ({}) refused: it was built against Tessera ABI {}, newer than this host's ABI {}; "
                       "upgrade Tessera or rebuild the plugin against an SDK of ABI {} or older", name, path,
                       plugin_abi, host_abi, host_abi);
  if (info.min_host_abi_minor > TESSERA_ABI_MINOR)
    raise<PluginError>("plugin '{}' ({}) refused: it needs a host of ABI {}.{} or newer, this host speaks ABI {}",
                       name, path, info.abi_major, info.min_host_abi_minor, host_abi);
}

// The handshake after the entry point is found: calls init with a staging registrar, checks
// the versions and the name, validates every registration, then commits them all at once.
// Caller holds host.mutex. `path` is what messages show.
template <class InitFn>
LoadedPlugin& register_plugin(PluginHost& host, InitFn&& init_fn, const std::string& path) {
  ts_registrar_s registrar;
  registrar.plugin = name_from_path(fs::path(path));
  // Device names staged by a plugin that is then refused give their type ids back.
  struct ForgetRefusedDevices {
    ts_registrar_s& r;
    bool committed = false;
    ~ForgetRefusedDevices() {
      if (!committed)
        for (auto& d : r.device_names) DeviceRegistry::instance().forget_unregistered(d);
    }
  } forget_on_refusal{registrar};
  ts_plugin_info info{};
  info.struct_size = sizeof info;
  ts_status status;
  bool threw = false;
  {
    auto* saved = host::current_registrar();
    host::current_registrar() = &registrar;
    // The contract (docs/design.md, ABI rule 6): no C++ exception crosses tessera_plugin_init. One
    // that does anyway is caught here when the unwinder can carry it (same Itanium C++ ABI, the
    // plugin's entry not noexcept, unwind tables present) and refuses the plugin like a failed
    // init; what it staged is dropped. A plugin whose exception hits a noexcept frame or has no
    // unwind tables terminates inside the plugin, which no host can catch.
    auto escaped = [&](const std::string& what) {
      threw = true;
      status = TS_ERROR;
      std::string earlier = std::exchange(registrar.error, {});
      registrar.error = fmt::format("a C++ exception escaped tessera_plugin_init: {}{}", what,
                                    earlier.empty() ? "" : fmt::format(" (it had reported: {})", earlier));
    };
    try {
      status = init_fn(host::api_table(), reinterpret_cast<ts_registrar>(&registrar), &info);
    } catch (const std::exception& e) {
      escaped(e.what());
    } catch (...) {
      escaped("an exception that is not a std::exception");
    }
    host::current_registrar() = saved;
  }

  std::string name = info.name && *info.name ? info.name : registrar.plugin;
  // An init that threw may not have filled in its versions yet: report the exception instead.
  if (!threw) check_versions(info, name, path);
  if (status != TS_OK)
    raise<PluginError>("plugin '{}' ({}) failed to initialise (status {}): {}", name, path, status,
                       registrar.error.empty() ? "no message" : registrar.error);
  for (auto& p : host.plugins)
    if (p.info.name == name)
      raise<PluginError>("plugin '{}' ({}) refused: a plugin of that name is already loaded from {}", name,
                         path, p.info.path);

  // Validate everything first, then apply: a refusal leaves nothing half-registered.
  for (auto& r : registrar.batch) r.entry.plugin = name;
  try {
    Dispatcher::instance().validate(registrar.batch);
    for (auto& d : registrar.device_names)
      if (DeviceRegistry::instance().find(d))
        raise<PluginError>("plugin '{}' registers device '{}', which is already registered", name, d);
  } catch (const PluginError& e) {
    raise<PluginError>("plugin '{}' ({}) refused: {}", name, path, e.what());
  }

  PluginInfo record;
  record.name = name;
  record.version = info.version ? info.version : "?";
  record.path = path;
  record.abi_major = info.abi_major;
  record.abi_minor = info.abi_minor;
  for (auto& d : registrar.devices) {
    DeviceRegistry::instance().add(d, name, fmt::format("{}", fmt::join(registrar.warnings, "; ")));
    record.devices.push_back(d.name);
  }
  Dispatcher::instance().commit(registrar.batch);
  for (auto& b : registrar.process_group_backends) host::add_process_group_backend(b, name);
  forget_on_refusal.committed = true;
  LoadedPlugin& loaded = host.plugins.emplace_back();
  loaded.info = std::move(record);
  for (auto& r : registrar.batch) {
    if (r.kind == Registration::Kind::Def) {
      FunctionSchema schema = parse_schema(r.op_name);
      loaded.info.operators_defined.push_back(schema.ns.empty() ? schema.name : schema.ns + "::" + schema.name);
    }
    if (r.kind == Registration::Kind::Kernel) ++loaded.info.kernels;
    if (r.kind == Registration::Kind::Fallback) ++loaded.info.fallbacks;
  }
  return loaded;
}

}  // namespace

const PluginInfo& load_plugin(const std::string& path_text) {
  init();
  auto& host = plugin_host();
  std::lock_guard lock(host.mutex);
  std::error_code fs_error;
  fs::path path = fs::weakly_canonical(fs::path(path_text), fs_error);
  if (fs_error) path = path_text;
  for (auto& p : host.plugins)
    if (p.info.path == path.string()) return p.info;
  if (!fs::exists(path)) raise<PluginError>("cannot load plugin '{}': no such file", path_text);

  boost::dll::shared_library library;
  std::error_code ec;
  library.load(path, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local, ec);
  if (ec) {
    const char* why = dlerror();
    raise<PluginError>("cannot load plugin '{}': {}", path.string(), why ? why : ec.message());
  }
  if (!library.has(TESSERA_PLUGIN_ENTRY_NAME))
    raise<PluginError>("'{}' is not a Tessera plugin: it does not export '{}'", path.string(),
                       TESSERA_PLUGIN_ENTRY_NAME);
  auto init_fn = library.get<ts_status(const ts_host_api*, ts_registrar, ts_plugin_info*)>(TESSERA_PLUGIN_ENTRY_NAME);
  LoadedPlugin& loaded = register_plugin(host, init_fn, path.string());
  loaded.library = std::move(library);
  return loaded.info;
}

const PluginInfo& load_plugin_from_entry(ts_plugin_init_fn init_fn, const std::string& path) {
  init();
  if (!init_fn) raise<PluginError>("cannot load plugin '{}': its entry point is null", path);
  auto& host = plugin_host();
  std::lock_guard lock(host.mutex);
  return register_plugin(host, init_fn, path).info;
}

std::vector<std::string> plugin_search_path() {
  std::vector<std::string> paths;
  if (const char* env = std::getenv("TESSERA_PLUGIN_PATH")) {
    std::string_view rest = env;
    while (!rest.empty()) {
      auto colon = rest.find(':');
      auto part = rest.substr(0, colon);
      if (!part.empty()) paths.emplace_back(part);
      if (colon == std::string_view::npos) break;
      rest.remove_prefix(colon + 1);
    }
  }
  // The install's plugin folder, next to this library: <libdir>/tessera/plugins.
  std::error_code ec;
  auto self = boost::dll::symbol_location(plugin_search_path, ec);
  if (!ec) paths.push_back((self.parent_path() / "tessera" / "plugins").string());
  return paths;
}

std::string plugin_search_path_text() { return fmt::format("{}", fmt::join(plugin_search_path(), ", ")); }

namespace {
std::atomic<bool> g_lazy_loading{true};
}

void set_lazy_loading(bool enabled) { g_lazy_loading.store(enabled, std::memory_order_relaxed); }
bool lazy_loading_enabled() { return g_lazy_loading.load(std::memory_order_relaxed); }

void require_lazy_loading(const std::string& plugin, const std::string& what) {
  if (lazy_loading_enabled()) return;
  raise<PluginError>("{} needs plugin '{}' (libtessera_{}.so), which is not loaded, and lazy loading is off "
                     "(tessera::set_lazy_loading(false), RuntimeOptions::lazy_loading = false, or "
                     "ts.plugins.set_lazy_loading(False)): load it first, e.g. RuntimeOptions::plugins = {{\"{}\"}} "
                     "or ts.plugins.load_named(\"{}\")",
                     what, plugin, plugin, plugin, plugin);
}

bool load_plugin_for_device(const std::string& device_name) {
  auto& host = plugin_host();
  std::lock_guard lock(host.mutex);
  // Registered already, maybe by a thread that loaded it while this one waited for the lock:
  // true, so that a caller that found no kernel or no device looks again instead of failing
  // (first use of "cpu" from 8 threads at once: 7 used to get "no kernel for CPU").
  if (DeviceRegistry::instance().find(device_name)) return true;
  require_lazy_loading(device_name, fmt::format("device type '{}'", device_name));
  if (!host.lazy_attempted.insert(device_name).second) return false;
  for (auto& dir : plugin_search_path()) {
    fs::path candidate = fs::path(dir) / fmt::format("libtessera_{}.so", device_name);
    if (fs::exists(candidate)) {
      load_plugin(candidate.string());
      return DeviceRegistry::instance().find(device_name) != nullptr;
    }
  }
  return false;
}

bool is_plugin_loaded(const std::string& name) {
  auto& host = plugin_host();
  std::lock_guard lock(host.mutex);
  for (const LoadedPlugin& p : host.plugins)
    if (p.info.name == name) return true;
  return false;
}

bool load_named_plugin(const std::string& name) {
  if (is_plugin_loaded(name)) return true;
  for (auto& dir : plugin_search_path()) {
    fs::path candidate = fs::path(dir) / fmt::format("libtessera_{}.so", name);
    if (fs::exists(candidate)) {
      load_plugin(candidate.string());
      return true;
    }
  }
  return false;
}

std::vector<std::string> load_all_plugins() {
  std::vector<std::string> refusals;
  for (auto& dir : plugin_search_path()) {
    std::error_code ec;
    for (auto& entry : fs::directory_iterator(dir, ec)) {
      auto file = entry.path().filename().string();
      if (!file.starts_with("libtessera_") || entry.path().extension() != ".so") continue;
      try {
        load_plugin(entry.path().string());
      } catch (const PluginError& e) {
        refusals.push_back(e.what());
      }
    }
  }
  return refusals;
}

std::vector<PluginInfo> loaded_plugins() {
  auto& host = plugin_host();
  std::lock_guard lock(host.mutex);
  std::vector<PluginInfo> out;
  for (auto& p : host.plugins) out.push_back(p.info);
  return out;
}

std::string describe_plugins() {
  std::string text = fmt::format("{:<12} {:<8} {:<5} {:<16} {:>7} {:>8}  {}\n", "plugin", "version", "abi", "devices",
                                 "kernels", "new ops", "path");
  for (auto& p : loaded_plugins())
    text += fmt::format("{:<12} {:<8} {:<5} {:<16} {:>7} {:>8}  {}\n", p.name, p.version,
                        abi_string(p.abi_major, p.abi_minor), fmt::format("{}", fmt::join(p.devices, ",")), p.kernels,
                        p.operators_defined.size(), p.path);
  return text;
}

const ts_host_api* host_api() { return host::api_table(); }

}  // namespace tessera

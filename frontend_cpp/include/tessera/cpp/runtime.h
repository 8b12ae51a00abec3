#pragma once
// tessera::Runtime: what an embedder sets up once. It selects plugins by name or path, extends
// the search path, and lists what is loaded:
//
//   tessera::Runtime rt({.plugins = {"cpu"}});          // eager: the CPU plugin now
//   tessera::Runtime rt({.search_path = {"/opt/my/plugins"}});  // lazy: loaded on first use
//
// Plugins not named still load lazily when first needed (a device's plugin on its first tensor,
// autograd on the first requires_grad_), unless `.lazy_loading = false`: then only the named
// plugins load, and a need for another raises PluginError naming it. The host is process-wide: a
// Runtime is a view of it, and destroying one unloads nothing.
//
//   tessera::Runtime rt({.plugins = {"cpu", "autograd"}, .lazy_loading = false});  // strict
#include <tessera/runtime.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tessera {

struct RuntimeOptions {
  // Each entry: a plugin name ("cpu", "autograd": libtessera_<name>.so on the search path) or a
  // path to a plugin file (anything with a '/' or ending in ".so"). Loaded now, in order.
  std::vector<std::string> plugins;
  // Folders searched before TESSERA_PLUGIN_PATH and the install's plugin folder.
  std::vector<std::string> search_path;
  // Loads every plugin on the search path (refusals raise).
  bool load_all = false;
  // Seeds the random generators when set.
  std::optional<uint64_t> seed;
  // Threads kernels may use; 0 keeps the default (the hardware's).
  int num_threads = 0;
  // false: load no plugin that is not named (set after `plugins` load; process-wide, see
  // tessera::set_lazy_loading). A Runtime made later with true turns it back on.
  bool lazy_loading = true;
};

class Runtime {
 public:
  // Raises PluginError naming the plugin when one cannot be found or is refused.
  explicit Runtime(const RuntimeOptions& options = {});

  // Loads one more plugin by name or path (as in RuntimeOptions::plugins).
  PluginInfo load(const std::string& name_or_path);
  std::vector<PluginInfo> plugins() const;
  bool is_loaded(const std::string& name) const;
  std::vector<std::string> search_path() const;
  std::string describe() const;
};

}  // namespace tessera

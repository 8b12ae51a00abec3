// tessera::Runtime over the host runtime (plugins/include/tessera/runtime.h).
#include <tessera/cpp/runtime.h>
#include <tessera/error.h>

#include <fmt/ranges.h>

#include <cstdlib>
#include <mutex>

namespace tessera {
namespace {

bool is_path(const std::string& s) { return s.find('/') != std::string::npos || s.ends_with(".so"); }

// The host reads TESSERA_PLUGIN_PATH on every search, so prepending to it extends the search path.
void prepend_search_path(const std::vector<std::string>& dirs) {
  static std::mutex mutex;
  std::lock_guard lock(mutex);
  std::string value = fmt::format("{}", fmt::join(dirs, ":"));
  if (const char* old = std::getenv("TESSERA_PLUGIN_PATH"); old && *old) value += fmt::format(":{}", old);
  setenv("TESSERA_PLUGIN_PATH", value.c_str(), 1);
}

}  // namespace

Runtime::Runtime(const RuntimeOptions& options) {
  init();
  if (!options.search_path.empty()) prepend_search_path(options.search_path);
  for (const std::string& p : options.plugins) load(p);
  if (options.load_all) {
    std::vector<std::string> refusals = load_all_plugins();
    if (!refusals.empty()) raise<PluginError>("Runtime: {} plugin(s) refused:\n{}", refusals.size(), fmt::join(refusals, "\n"));
  }
  set_lazy_loading(options.lazy_loading);
  if (options.seed) manual_seed(*options.seed);
  if (options.num_threads < 0) raise<ValueError>("Runtime: num_threads must be >= 0, got {}", options.num_threads);
  if (options.num_threads > 0) set_num_threads(options.num_threads);
}

PluginInfo Runtime::load(const std::string& name) {
  if (name.empty()) raise<ValueError>("Runtime: a plugin name or path is empty");
  if (is_path(name)) return load_plugin(name);
  if (!load_named_plugin(name))
    raise<PluginError>("Runtime: no plugin named '{}' (libtessera_{}.so) on the search path [{}]", name, name,
                       plugin_search_path_text());
  for (PluginInfo& p : loaded_plugins())
    if (p.name == name) return p;
  raise<PluginError>("Runtime: loaded '{}', but no plugin of that name registered (its file declares another name)", name);
}

std::vector<PluginInfo> Runtime::plugins() const { return loaded_plugins(); }

bool Runtime::is_loaded(const std::string& name) const {
  for (const PluginInfo& p : loaded_plugins())
    if (p.name == name) return true;
  return false;
}

std::vector<std::string> Runtime::search_path() const { return plugin_search_path(); }
std::string Runtime::describe() const { return describe_plugins(); }

}  // namespace tessera

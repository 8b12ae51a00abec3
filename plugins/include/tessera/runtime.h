#pragma once
// The host runtime: start-up, plugin loading and listing, random seeds, threads.
#include <tessera/tensor.h>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tessera {

// What a loaded plugin is and what it registered.
struct PluginInfo {
  std::string name;
  std::string version;
  std::string path;
  int abi_major = 0;
  int abi_minor = 0;
  std::vector<std::string> devices;
  std::vector<std::string> operators_defined;
  int kernels = 0;
  int fallbacks = 0;
};

// Initialises the host once (defines the built-in operators, installs lazy plugin loading).
// Every entry point calls it; calling it again does nothing.
void init();

// Loads the plugin at `path` (a no-op if that file is loaded already). Raises PluginError,
// naming the plugin and the reason, when the plugin is refused; the host stays usable.
const PluginInfo& load_plugin(const std::string& path);
// The same handshake for an entry point already in memory (a plugin linked into the program,
// or a test driving the handshake): `path` only names it in messages. Never deduplicated by path.
const PluginInfo& load_plugin_from_entry(ts_plugin_init_fn init_fn, const std::string& path);
// Loads libtessera_<device>.so from the search path, if it is there and not loaded yet; true
// when the device is registered afterwards (by this call or an earlier or concurrent one).
bool load_plugin_for_device(const std::string& device_name);
// Loads libtessera_<name>.so from the search path unless a plugin of that name is loaded (a
// transform such as "autograd"); false when it is not there. Raises PluginError when refused.
bool load_named_plugin(const std::string& name);
// Whether a plugin of that name is loaded.
bool is_plugin_loaded(const std::string& name);
// Lazy loading: by default the host loads a plugin by itself when it is first needed (a device's
// plugin on the first use of the device's name, autograd on the first requires_grad_). An embedder
// that wants only the plugins it names turns it off (process-wide): each such need then raises
// PluginError naming the plugin it wanted, instead of loading it.
void set_lazy_loading(bool enabled);
bool lazy_loading_enabled();
// Raises that PluginError when lazy loading is off: libtessera_<plugin>.so was wanted for `what`.
void require_lazy_loading(const std::string& plugin, const std::string& what);
// Loads every plugin found on the search path; returns the refusals as messages.
std::vector<std::string> load_all_plugins();
std::vector<PluginInfo> loaded_plugins();
// Folders searched for plugins: each entry of TESSERA_PLUGIN_PATH (':'-separated), then the
// install's plugin folder, lib/tessera/plugins next to libtessera.so.
std::vector<std::string> plugin_search_path();
// The same folders as one line for messages ("/a, /b/lib/tessera/plugins").
std::string plugin_search_path_text();
// A human-readable table of the loaded plugins.
std::string describe_plugins();

// The host API table handed to plugins (for tests and embedders that load plugins by hand).
const ts_host_api* host_api();

// Reseeds the default generator of every device type (PyTorch's torch.manual_seed).
void manual_seed(uint64_t seed);
uint64_t next_random_seed(Device device);

// The dtype of floating results no input decides (PyTorch's default dtype): float32 at start.
// Raises TypeError for a non-floating dtype.
void set_default_dtype(ScalarType dtype);
ScalarType get_default_dtype();

// Where plugins' warnings go. `at_load` marks what a plugin said while it loaded (a device
// plugin finding no device, say): those are kept with the device type and shown in full where
// that device is requested, so by default they are not printed (set TESSERA_PLUGIN_WARNINGS=1
// to print them as they come). Warnings from kernels print to stderr by default. The Python
// package installs a handler that turns them into Python warnings and log records.
using WarningHandler = void (*)(const char* where, const char* message, bool at_load);
void set_warning_handler(WarningHandler handler);  // nullptr: the default

// Number of threads kernels may use (default: the hardware's).
void set_num_threads(int n);
int get_num_threads();

// A copy of `t` on `device` (same shape and dtype, contiguous), made with the two device
// plugins' copy functions: through host memory when neither side is host-accessible.
// non_blocking: a copy between a device and page-locked CPU memory of that device (pin_memory)
// is queued on the device's current stream and may still run when this returns; a device to
// CPU copy then lands in page-locked memory. Synchronize the stream before reading it, as in
// PyTorch. Other copies are synchronous whatever non_blocking says.
Tensor to_device(const Tensor& t, Device device, bool non_blocking = false);

// A copy of CPU tensor `t` in page-locked memory of `device_type`'s plugin (PyTorch's
// Tensor.pin_memory), which that device copies to and from asynchronously. Returns `t` if it is
// pinned already. Raises ValueError for a non-CPU tensor, NotImplementedError when the device
// offers no page-locked memory.
Tensor pin_memory(const Tensor& t, std::string_view device_type = "cuda");
// True when `t` lives in page-locked memory of some device plugin.
bool is_pinned(const Tensor& t);

// A CPU tensor holding `values` converted to `dtype`, with `shape` (numel must match).
Tensor tensor_from_values(std::span<const double> values, std::vector<int64_t> shape, ScalarType dtype = kFloat32);

}  // namespace tessera

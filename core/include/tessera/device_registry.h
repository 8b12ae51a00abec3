#pragma once
// The device types known to the host: registered by device plugins through the C ABI.
// Lookups by type id are lock-free (a fixed table of atomic pointers); names go through a map.
#include <tessera/device.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace tessera {

struct DeviceTypeEntry {
  std::string name;
  int32_t type = -1;
  int32_t key = -1;  // its backend dispatch key
  ts_device_desc desc{};
  std::string plugin;
  std::string load_notes;  // what the plugin warned while loading (why it sees no device, say)
};

// The message a device function (a ts_device_desc function, which has no call) left with
// set_error(NULL, ...) on this thread before failing (ABI 1.3).
std::string& device_function_error();
// Does nothing for TS_OK; otherwise raises the matching error naming the device, the function
// and the plugin's message.
void check_device_call(const DeviceTypeEntry& entry, int32_t index, const char* function, ts_status status);

// Raises ValueError when `index` is not one of the device type's devices (as counted by its
// plugin's device_count; a plugin without device_count is not checked).
void check_device_index(const DeviceTypeEntry& entry, int32_t index);

class DeviceRegistry {
 public:
  static constexpr int kMaxDeviceTypes = 32;
  static DeviceRegistry& instance();

  // The type id a name has or will have. "cpu" is 0, "cuda" 1, "hip" 2; others are assigned
  // in order of first mention. Does not require the device to be registered.
  int32_t type_id(std::string_view name);
  // The type id of a name that has one (registered or reserved), else -1; reserves nothing.
  int32_t find_type_id(std::string_view name) const;
  // The backend dispatch key reserved for a device type name.
  int32_t backend_key(std::string_view name);
  // Registers the device a plugin provides. Raises PluginError if the name is taken.
  const DeviceTypeEntry& add(const ts_device_desc& desc, const std::string& plugin, std::string load_notes = {});
  void remove(std::string_view name);  // undoes add (used when a plugin is refused)
  // Gives back the type id (and key) a name reserved without ever being registered: a
  // refused plugin's device names must not use up the dynamic keys.
  void forget_unregistered(std::string_view name);
  // nullptr when the type is not registered (yet).
  const DeviceTypeEntry* find(int32_t type) const;
  const DeviceTypeEntry* find(std::string_view name) const;
  // Like find, but first asks the lazy loader to load the plugin of that device type.
  const DeviceTypeEntry& require(int32_t type);
  std::string name_of(int32_t type) const;
  std::vector<std::string> names() const;

  // Set by the plugin host: loads the plugin that provides device `name`; true on success.
  // `searched` says where it looked (the folders), for the error when it finds nothing.
  void set_lazy_loader(std::function<bool(const std::string&)> loader, std::function<std::string()> searched) {
    lazy_loader_ = std::move(loader);
    lazy_searched_ = std::move(searched);
  }
  bool try_lazy_load(const std::string& name) const { return lazy_loader_ && lazy_loader_(name); }
  // The folders the lazy loader searches, for error messages.
  std::string lazy_search_folders() const { return lazy_searched_ ? lazy_searched_() : "none (no plugin host)"; }

 private:
  DeviceRegistry();
  struct Impl;
  Impl* impl_;
  std::function<bool(const std::string&)> lazy_loader_;
  std::function<std::string()> lazy_searched_;
};

}  // namespace tessera

#include <tessera/device_registry.h>
#include <tessera/dispatch_key.h>
#include <tessera/error.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <atomic>
#include <map>
#include <mutex>
#include <utility>

namespace tessera {

struct DeviceRegistry::Impl {
  mutable std::mutex mutex;
  std::map<std::string, int32_t, std::less<>> type_ids{{"cpu", 0}, {"cuda", 1}, {"hip", 2}};
  std::array<std::atomic<DeviceTypeEntry*>, kMaxDeviceTypes> entries{};
  std::array<std::string, kMaxDeviceTypes> names{"cpu", "cuda", "hip"};
};

std::string& device_function_error() {
  thread_local std::string message;
  return message;
}

void check_device_call(const DeviceTypeEntry& entry, int32_t index, const char* function, ts_status status) {
  if (status == TS_OK) return;
  std::string said = std::exchange(device_function_error(), {});
  raise_for_status(status, fmt::format("{}:{}: {} failed: {} [plugin '{}']", entry.name, index, function,
                                       said.empty() ? "the plugin gave no message" : said, entry.plugin));
}

void check_device_index(const DeviceTypeEntry& entry, int32_t index) {
  if (!entry.desc.device_count) return;
  int32_t count = entry.desc.device_count(entry.desc.device_data);
  if (index < 0 || index >= count)
    raise<ValueError>("device index {} is out of range: device type '{}' (plugin '{}') has {} device{}{}", index,
                      entry.name, entry.plugin, count, count == 1 ? "" : "s",
                      count > 0 ? fmt::format(", valid indices are 0..{}", count - 1)
                      : entry.load_notes.empty() ? std::string()
                                                 : fmt::format(" (when it loaded, the plugin said: {})", entry.load_notes));
}

DeviceRegistry::DeviceRegistry() : impl_(new Impl) {}  // lives for the process

DeviceRegistry& DeviceRegistry::instance() {
  static DeviceRegistry* registry = new DeviceRegistry;  // never destroyed: plugins may outlive statics
  return *registry;
}

int32_t DeviceRegistry::type_id(std::string_view name) {
  std::lock_guard lock(impl_->mutex);
  if (auto it = impl_->type_ids.find(name); it != impl_->type_ids.end()) return it->second;
  // The lowest free id: forgotten names leave holes to reuse.
  int32_t id = 3;
  while (id < kMaxDeviceTypes && !impl_->names[size_t(id)].empty()) ++id;
  if (id >= kMaxDeviceTypes)
    raise<PluginError>("cannot add device type '{}': the host supports at most {} device types", name,
                       kMaxDeviceTypes);
  impl_->type_ids.emplace(std::string(name), id);
  impl_->names[size_t(id)] = std::string(name);
  return id;
}

int32_t DeviceRegistry::find_type_id(std::string_view name) const {
  std::lock_guard lock(impl_->mutex);
  auto it = impl_->type_ids.find(name);
  return it == impl_->type_ids.end() ? -1 : it->second;
}

int32_t DeviceRegistry::backend_key(std::string_view name) {
  int32_t id = type_id(name);
  if (id <= 2) return id;  // CPU, CUDA, HIP keys equal their type ids
  int32_t key = int32_t(DispatchKey::FirstDynamicBackend) + (id - 3);
  if (key > int32_t(DispatchKey::LastDynamicBackend)) {
    forget_unregistered(name);
    raise<PluginError>("cannot give device '{}' a dispatch key: all {} dynamic backend keys are taken", name,
                       int32_t(DispatchKey::LastDynamicBackend) - int32_t(DispatchKey::FirstDynamicBackend) + 1);
  }
  return key;
}

const DeviceTypeEntry& DeviceRegistry::add(const ts_device_desc& desc, const std::string& plugin,
                                           std::string load_notes) {
  if (!desc.name || !*desc.name) raise<PluginError>("plugin '{}' registers a device without a name", plugin);
  if (!desc.allocate || !desc.deallocate || !desc.copy_to_host || !desc.copy_from_host)
    raise<PluginError>("plugin '{}' registers device '{}' without allocate/deallocate/copy_to_host/copy_from_host",
                       plugin, desc.name);
  int32_t id = type_id(desc.name);
  int32_t key = backend_key(desc.name);
  std::lock_guard lock(impl_->mutex);
  if (auto* existing = impl_->entries[size_t(id)].load())
    raise<PluginError>("plugin '{}' registers device '{}', which plugin '{}' already registered", plugin,
                       desc.name, existing->plugin);
  auto* entry = new DeviceTypeEntry{desc.name, id, key, {}, plugin, std::move(load_notes)};
  // Copy only what the plugin's struct holds; newer fields stay zero (= optional default).
  std::memcpy(&entry->desc, &desc, std::min(desc.struct_size, sizeof(ts_device_desc)));
  entry->desc.struct_size = sizeof(ts_device_desc);
  entry->desc.name = entry->name.c_str();
  impl_->entries[size_t(id)].store(entry, std::memory_order_release);
  return *entry;
}

void DeviceRegistry::remove(std::string_view name) {
  std::lock_guard lock(impl_->mutex);
  auto it = impl_->type_ids.find(name);
  if (it == impl_->type_ids.end()) return;
  // The entry is leaked on purpose: a racing reader may still hold it.
  impl_->entries[size_t(it->second)].store(nullptr, std::memory_order_release);
}

void DeviceRegistry::forget_unregistered(std::string_view name) {
  std::lock_guard lock(impl_->mutex);
  auto it = impl_->type_ids.find(name);
  if (it == impl_->type_ids.end()) return;
  int32_t id = it->second;
  if (id <= 2 || impl_->entries[size_t(id)].load()) return;  // built-in names and live devices stay
  impl_->names[size_t(id)].clear();
  impl_->type_ids.erase(it);
}

const DeviceTypeEntry* DeviceRegistry::find(int32_t type) const {
  if (type < 0 || type >= kMaxDeviceTypes) return nullptr;
  return impl_->entries[size_t(type)].load(std::memory_order_acquire);
}

const DeviceTypeEntry* DeviceRegistry::find(std::string_view name) const {
  int32_t id;
  {
    std::lock_guard lock(impl_->mutex);
    auto it = impl_->type_ids.find(name);
    if (it == impl_->type_ids.end()) return nullptr;
    id = it->second;
  }
  return find(id);
}

const DeviceTypeEntry& DeviceRegistry::require(int32_t type) {
  if (auto* e = find(type)) return *e;
  std::string name = name_of(type);
  if (try_lazy_load(name))
    if (auto* e = find(type)) return *e;
  raise<RuntimeError>("device type '{}' is not available: no loaded plugin registers it, and no plugin "
                      "libtessera_{}.so was found on TESSERA_PLUGIN_PATH or in the install's plugin folder "
                      "(searched: {})",
                      name, name, lazy_search_folders());
}

std::string DeviceRegistry::name_of(int32_t type) const {
  std::lock_guard lock(impl_->mutex);
  if (type < 0 || type >= kMaxDeviceTypes || impl_->names[size_t(type)].empty())
    return fmt::format("<device type {}>", type);
  return impl_->names[size_t(type)];
}

std::vector<std::string> DeviceRegistry::names() const {
  std::vector<std::string> out;
  for (int i = 0; i < kMaxDeviceTypes; ++i)
    if (auto* e = find(i)) out.push_back(e->name);
  return out;
}

}  // namespace tessera

#include <tessera/device_registry.h>
#include <tessera/dispatch_key.h>

#include <fmt/format.h>

#include <map>

namespace tessera {

namespace {
const std::map<int32_t, std::string_view>& fixed_key_names() {
  static const std::map<int32_t, std::string_view> names{
      {int32_t(DispatchKey::CPU), "CPU"},
      {int32_t(DispatchKey::CUDA), "CUDA"},
      {int32_t(DispatchKey::HIP), "HIP"},
      {int32_t(DispatchKey::AutogradCPU), "AutogradCPU"},
      {int32_t(DispatchKey::AutogradCUDA), "AutogradCUDA"},
      {int32_t(DispatchKey::AutogradHIP), "AutogradHIP"},
      {int32_t(DispatchKey::AutogradOther), "AutogradOther"},
      {int32_t(DispatchKey::Autocast), "Autocast"},
      {int32_t(DispatchKey::Batched), "Batched"},
      {int32_t(DispatchKey::Tracer), "Tracer"},
      {int32_t(DispatchKey::Python), "Python"},
  };
  return names;
}
}  // namespace

std::string dispatch_key_name(int32_t key) {
  auto& fixed = fixed_key_names();
  if (auto it = fixed.find(key); it != fixed.end()) return std::string(it->second);
  if (key >= int32_t(DispatchKey::FirstDynamicBackend) && key <= int32_t(DispatchKey::LastDynamicBackend))
    return DeviceRegistry::instance().name_of(key - int32_t(DispatchKey::FirstDynamicBackend) + 3);
  return fmt::format("Key{}", key);
}

DispatchKey dispatch_key_from_name(std::string_view name) {
  for (auto& [key, key_name] : fixed_key_names())
    if (key_name == name) return DispatchKey(key);
  if (name == "Autograd") return DispatchKey::AutogradCPU;
  auto& registry = DeviceRegistry::instance();
  if (auto* entry = registry.find(name)) return DispatchKey(entry->key);
  return DispatchKey::Undefined;
}

}  // namespace tessera

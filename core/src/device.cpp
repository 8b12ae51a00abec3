#include <tessera/device.h>
#include <tessera/device_registry.h>
#include <tessera/error.h>

#include <tessera/runtime.h>

#include <charconv>

namespace tessera {

Device::Device(std::string_view spec) {
  std::string_view name = spec;
  int32_t index = 0;
  if (auto colon = spec.find(':'); colon != std::string_view::npos) {
    name = spec.substr(0, colon);
    auto digits = spec.substr(colon + 1);
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (ec != std::errc() || end != digits.data() + digits.size() || index < 0)
      raise<ValueError>("device '{}': expected 'type' or 'type:index' with a non-negative index, got index '{}'",
                        spec, digits);
  }
  if (name.empty()) raise<ValueError>("device '{}': expected a device type name such as 'cpu'", spec);
  init();  // installs lazy loading of device plugins
  auto& registry = DeviceRegistry::instance();
  if (!registry.find(name) && !registry.try_lazy_load(std::string(name))) {
    auto known = registry.names();
    raise<ValueError>("unknown device type '{}': no loaded plugin registers it and no plugin libtessera_{}.so was "
                      "found (searched: {}; loaded device types: {})",
                      name, name, registry.lazy_search_folders(), fmt::join(known, ", "));
  }
  type_ = registry.type_id(name);
  index_ = index;
  // Like torch.device("cpu:1"), an index the device type does not have is refused when parsed.
  if (const DeviceTypeEntry* entry = registry.find(type_)) {
    try {
      check_device_index(*entry, index);
    } catch (const ValueError& e) {
      raise<ValueError>("device '{}': {}", spec, e.what());
    }
  }
}

std::string Device::type_name() const { return DeviceRegistry::instance().name_of(type_); }

std::string Device::str() const {
  if (type_ == kCpuType) return "cpu";
  return fmt::format("{}:{}", type_name(), index_);
}

}  // namespace tessera

#pragma once
// A device: a device type (registered by name by a device plugin) and an index.
#include <tessera/abi.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace tessera {

class Device {
 public:
  static constexpr int32_t kCpuType = 0;  // "cpu" is always type 0

  constexpr Device() = default;
  constexpr Device(int32_t type, int32_t index) : type_(type), index_(index) {}
  // Parses "cpu", "cuda", "cuda:1", or any registered device name. Loads the device's
  // plugin on first use of its name; raises ValueError for an unknown device.
  Device(std::string_view spec);  // NOLINT: implicit, like torch.device("cpu")
  Device(const char* spec) : Device(std::string_view(spec)) {}  // NOLINT

  constexpr int32_t type() const { return type_; }
  constexpr int32_t index() const { return index_; }
  constexpr bool is_cpu() const { return type_ == kCpuType; }
  std::string type_name() const;
  std::string str() const;  // "cpu", "cuda:0"
  constexpr ts_device to_abi() const { return ts_device{type_, index_}; }
  static constexpr Device from_abi(ts_device d) { return Device(d.type, d.index); }
  constexpr bool operator==(const Device&) const = default;

 private:
  int32_t type_ = kCpuType;
  int32_t index_ = 0;
};

}  // namespace tessera

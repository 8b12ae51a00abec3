#pragma once
// Dispatch keys and key sets. A key is a bit index; a higher bit has higher priority.
// The order, top down (docs/design.md): Python, Tracer, Batched, Autocast, Autograd, backends.
#include <tessera/abi.h>

#include <bit>
#include <cstdint>
#include <string>

namespace tessera {

enum class DispatchKey : int32_t {
  Undefined = -1,
  // Backend keys. Vendors get keys from the dynamic range at run time.
  CPU = 0,
  CUDA = 1,
  HIP = 2,
  FirstDynamicBackend = 3,
  LastDynamicBackend = 23,
  // Autograd: one per backend family.
  AutogradCPU = 40,
  AutogradCUDA = 41,
  AutogradHIP = 42,
  AutogradOther = 43,  // every dynamically registered device
  Autocast = 50,
  Batched = 55,
  Tracer = 60,
  Python = 62,
};
inline constexpr int kNumDispatchKeys = 64;

// The name of a key; dynamic backend keys are named after their device (see DeviceRegistry).
std::string dispatch_key_name(int32_t key);
// Inverse of dispatch_key_name; returns Undefined when unknown.
DispatchKey dispatch_key_from_name(std::string_view name);

class DispatchKeySet {
 public:
  constexpr DispatchKeySet() = default;
  constexpr explicit DispatchKeySet(uint64_t raw) : bits_(raw) {}
  constexpr DispatchKeySet(DispatchKey k) : bits_(k == DispatchKey::Undefined ? 0 : bit(int32_t(k))) {}  // NOLINT
  static constexpr uint64_t bit(int32_t k) { return uint64_t(1) << k; }

  constexpr uint64_t raw() const { return bits_; }
  constexpr bool empty() const { return bits_ == 0; }
  constexpr bool has(DispatchKey k) const { return (bits_ & bit(int32_t(k))) != 0; }
  constexpr DispatchKeySet operator|(DispatchKeySet o) const { return DispatchKeySet(bits_ | o.bits_); }
  constexpr DispatchKeySet operator&(DispatchKeySet o) const { return DispatchKeySet(bits_ & o.bits_); }
  constexpr DispatchKeySet remove(DispatchKey k) const { return DispatchKeySet(bits_ & ~bit(int32_t(k))); }
  // The highest-priority key, or -1 when empty.
  constexpr int32_t highest() const { return bits_ ? 63 - std::countl_zero(bits_) : -1; }
  // Every key strictly below `k`: what a transform redispatches to.
  constexpr DispatchKeySet below(int32_t k) const { return DispatchKeySet(bits_ & (bit(k) - 1)); }
  constexpr bool operator==(const DispatchKeySet&) const = default;

 private:
  uint64_t bits_ = 0;
};

}  // namespace tessera

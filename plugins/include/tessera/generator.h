#pragma once
// Random number generators (PyTorch's torch.Generator): a seedable stream of kernel seeds. Every
// random kernel asks the host for a seed per call (ts_host_api.next_random_seed); the host takes
// it from the generator made current on the calling thread (GeneratorGuard), else from the
// process's default generator of the device type. So a generator serves every device plugin and
// every random composite without any plugin knowing of it.
#include <tessera/device.h>

#include <cstdint>
#include <memory>
#include <string>

namespace tessera {

class Generator {
 public:
  // A new generator of `device`'s type, seeded from std::random_device (as torch.Generator()).
  explicit Generator(Device device = Device(0, 0));  // type 0 is the CPU
  Device device() const;
  // Reseeds; the sequence that follows depends on `seed` only.
  Generator& manual_seed(uint64_t seed);
  // Reseeds from std::random_device and returns the seed.
  uint64_t seed();
  uint64_t initial_seed() const;
  // The next kernel seed of this generator's stream.
  uint64_t next();
  // The whole state as bytes, and its restoration (ValueError for bytes that are not a state).
  std::string state() const;
  void set_state(const std::string& bytes);

  struct Impl;

 private:
  friend class GeneratorGuard;
  friend Generator default_generator(Device device);
  explicit Generator(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<Impl> impl_;
};

// The default generator of `device`'s type (ts.manual_seed reseeds them all).
Generator default_generator(Device device);

// Makes `g` the source of kernel seeds on this thread while it lives (nests).
class GeneratorGuard {
 public:
  explicit GeneratorGuard(const Generator& g);
  ~GeneratorGuard();
  GeneratorGuard(const GeneratorGuard&) = delete;
  GeneratorGuard& operator=(const GeneratorGuard&) = delete;

 private:
  std::shared_ptr<Generator::Impl> saved_;
};

}  // namespace tessera

// Generators: a mutex-guarded mt19937_64 per generator, the default one per device type, and
// the thread's current generator that next_random_seed reads.
#include <tessera/error.h>
#include <tessera/generator.h>
#include <tessera/runtime.h>

#include <array>
#include <mutex>
#include <random>
#include <sstream>

namespace tessera {

struct Generator::Impl {
  Device device;
  mutable std::mutex mutex;
  std::mt19937_64 engine;
  uint64_t initial_seed = 0;
  Impl(Device d, uint64_t seed) : device(d), engine(seed), initial_seed(seed) {}
};

namespace {
thread_local std::shared_ptr<Generator::Impl> current_generator;
constexpr uint64_t kDefaultSeed = 67280421310721ULL;  // PyTorch's default_rng_seed_val

struct Defaults {
  std::mutex mutex;
  std::array<std::shared_ptr<Generator::Impl>, 64> by_type;
  bool seeded = false;
  uint64_t seed = 0;
};
Defaults& defaults() {
  static auto* d = new Defaults;  // never destroyed: kernels may draw at exit
  return *d;
}
uint64_t random_seed() { return (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}(); }
}  // namespace

Generator::Generator(Device device) : impl_(std::make_shared<Impl>(device, random_seed())) {}
Device Generator::device() const { return impl_->device; }

Generator& Generator::manual_seed(uint64_t seed) {
  std::lock_guard lock(impl_->mutex);
  impl_->engine.seed(seed);
  impl_->initial_seed = seed;
  return *this;
}

uint64_t Generator::seed() {
  uint64_t s = random_seed();
  manual_seed(s);
  return s;
}

uint64_t Generator::initial_seed() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->initial_seed;
}

uint64_t Generator::next() {
  std::lock_guard lock(impl_->mutex);
  return impl_->engine();
}

std::string Generator::state() const {
  std::lock_guard lock(impl_->mutex);
  std::ostringstream out;
  out << "tessera-mt19937_64 " << impl_->initial_seed << ' ' << impl_->engine;
  return out.str();
}

void Generator::set_state(const std::string& bytes) {
  std::istringstream in(bytes);
  std::string tag;
  uint64_t initial = 0;
  std::mt19937_64 engine;
  in >> tag >> initial >> engine;
  if (tag != "tessera-mt19937_64" || in.fail())
    raise<ValueError>("Generator.set_state: expected a state from Generator.get_state ({} bytes starting "
                      "'tessera-mt19937_64'), got {} bytes that do not parse", state().size(), bytes.size());
  std::lock_guard lock(impl_->mutex);
  impl_->engine = engine;
  impl_->initial_seed = initial;
}

Generator default_generator(Device device) {
  auto& d = defaults();
  std::lock_guard lock(d.mutex);
  auto& slot = d.by_type[size_t(device.type()) % d.by_type.size()];
  if (!slot) slot = std::make_shared<Generator::Impl>(Device(device.type(), 0), d.seeded ? d.seed : random_seed());
  return Generator(slot);
}

GeneratorGuard::GeneratorGuard(const Generator& g) : saved_(current_generator) { current_generator = g.impl_; }
GeneratorGuard::~GeneratorGuard() { current_generator = saved_; }

// ---- runtime.h's seeding functions
void manual_seed(uint64_t seed) {
  auto& d = defaults();
  std::lock_guard lock(d.mutex);
  d.seeded = true;
  d.seed = seed;
  for (auto& g : d.by_type)
    if (g) {
      std::lock_guard glock(g->mutex);
      g->engine.seed(seed);
      g->initial_seed = seed;
    }
}

uint64_t next_random_seed(Device device) {
  if (auto g = current_generator) {
    std::lock_guard lock(g->mutex);
    return g->engine();
  }
  return default_generator(device).next();
}

}  // namespace tessera

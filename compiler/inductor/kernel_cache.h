#pragma once
// Builds generated C++ into a shared object with the system C++ compiler found at run time,
// and keeps it in an on-disk cache ($TESSERA_CACHE_DIR, default ~/.cache/tessera, under
// inductor/). An entry is named by a hash of the source, the flags, the compiler's version and
// the CPU's features; it is written to a temporary file and renamed into place, so two
// processes building the same entry at once both end with a whole file. An entry that fails
// to load, or whose embedded key differs from its name (a truncated or foreign file), is
// rebuilt.
#include <cstdint>
#include <mutex>
#include <string>

namespace tessera::inductor {

struct LoadedLibrary {
  void* handle = nullptr;
  std::string path;
  bool from_cache = false;  // found on disk rather than compiled now
};

class KernelCache {
 public:
  static KernelCache& instance();
  // The compiled and loaded library of `source`; throws std::runtime_error naming what failed
  // (no compiler on PATH, a compile error with the compiler's output, an unwritable cache).
  LoadedLibrary load(const std::string& source);
  // A library built elsewhere (an export archive's ahead-of-time kernels), loaded only when it
  // was built from exactly `source` (its embedded tessera_source_key); no compiler is needed.
  LoadedLibrary load_prebuilt(const std::string& path, const std::string& source);
  // The "flags" line of /proc/cpuinfo: what -march=native compiled for.
  const std::string& cpu_features() const { return cpu_features_; }
  std::string directory() const;
  bool vector_math_available() const { return vector_math_; }

 private:
  KernelCache();
  void find_compiler();
  std::once_flag compiler_found_;
  std::string compiler_, compiler_version_, cpu_features_, flags_, timeout_;
  bool vector_math_ = false;
};

// mkdir -p; throws std::runtime_error naming the part that could not be made.
void make_directories(const std::string& path);

// A stable 64-bit FNV-1a hash (std::hash differs between builds; a cache key must not).
uint64_t stable_hash(const std::string& text, uint64_t seed = 1469598103934665603ull);

}  // namespace tessera::inductor

#include "kernel_cache.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>

namespace tessera::inductor {
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// The first of `names` that is an executable on PATH (a name with a '/' is taken as a path).
std::string find_executable(const std::vector<std::string>& names) {
  std::string path = env("PATH");
  for (const std::string& name : names) {
    if (name.empty()) continue;
    if (name.find('/') != std::string::npos) {
      if (access(name.c_str(), X_OK) == 0) return name;
      continue;
    }
    std::istringstream dirs(path);
    for (std::string dir; std::getline(dirs, dir, ':');) {
      const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
      if (access(candidate.c_str(), X_OK) == 0) return candidate;
    }
  }
  return "";
}

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs a shell command; returns (exit status, combined output).
std::pair<int, std::string> run(const std::string& command) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) throw std::runtime_error("inductor: could not run '" + command + "'");
  std::string output;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, pipe)) output.append(buf, n);
  const int status = pclose(pipe);
  return {status, output};
}

std::string cpu_flags() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("flags", 0) == 0) return line;
  return "unknown-cpu";
}

}  // namespace

void make_directories(const std::string& path) {
  std::string partial;
  std::istringstream parts(path);
  for (std::string part; std::getline(parts, part, '/');) {
    partial += part + "/";
    if (partial == "/") continue;
    if (mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST)
      throw std::runtime_error("inductor: cannot create the cache directory '" + partial + "': " + std::strerror(errno));
  }
}

uint64_t stable_hash(const std::string& text, uint64_t seed) {
  uint64_t h = seed;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

KernelCache& KernelCache::instance() {
  static KernelCache cache;
  return cache;
}

KernelCache::KernelCache() {
  timeout_ = find_executable({"timeout"});
  cpu_features_ = cpu_flags();
  flags_ = "-O3 -march=native -fopenmp -fno-math-errno -fno-trapping-math -ffp-contract=off -shared -fPIC -w";
  if (cpu_features_.find(" avx512f") != std::string::npos) flags_ += " -mprefer-vector-width=512";
  // SLEEF's GNU-vector-ABI library supplies _ZGV*_sinf and friends for `omp declare simd`.
  if (void* h = dlopen("libsleefgnuabi.so.3", RTLD_LAZY | RTLD_LOCAL)) {
    vector_math_ = true;
    dlclose(h);
  }
}

std::string KernelCache::directory() const {
  std::string base = env("TESSERA_CACHE_DIR");
  if (base.empty()) {
    const std::string xdg = env("XDG_CACHE_HOME");
    base = !xdg.empty() ? xdg + "/tessera" : env("HOME").empty() ? "/tmp/tessera-cache" : env("HOME") + "/.cache/tessera";
  }
  return base + "/inductor";
}

// Only compiling needs the compiler: prebuilt kernels (an export archive's) load without
// running `c++ --version` first, on machines that have no compiler at all.
void KernelCache::find_compiler() {
  std::call_once(compiler_found_, [this] {
    compiler_ = find_executable({env("TESSERA_CXX"), env("CXX"), "c++", "g++", "clang++"});
    if (!compiler_.empty()) {
      auto [status, version] = run((timeout_.empty() ? "" : quote(timeout_) + " 30 ") + quote(compiler_) + " --version");
      compiler_version_ = status == 0 ? version.substr(0, version.find('\n')) : "unknown";
    }
  });
}

LoadedLibrary KernelCache::load(const std::string& source) {
  find_compiler();
  if (compiler_.empty())
    throw std::runtime_error("inductor: no C++ compiler found (looked for $TESSERA_CXX, $CXX, c++, g++ and clang++ on "
                             "PATH)");
  const std::string link = vector_math_ ? " -lsleefgnuabi" : "";
  const uint64_t key = stable_hash(source + "\n" + flags_ + link + "\n" + compiler_version_ + "\n" + cpu_features_);
  char name[32];
  std::snprintf(name, sizeof name, "%016llx", static_cast<unsigned long long>(key));
  const std::string dir = directory();
  const std::string so = dir + "/" + name + ".so";
  // The source carries its key, so a loaded file proves it is the entry it claims to be; and the
  // hash of the source alone, which a prebuilt library (load_prebuilt) is checked against.
  char key_fn[192];
  std::snprintf(key_fn, sizeof key_fn,
                "\nextern \"C\" uint64_t tessera_cache_key() { return 0x%016llxull; }\n"
                "extern \"C\" uint64_t tessera_source_key() { return 0x%016llxull; }\n",
                static_cast<unsigned long long>(key), static_cast<unsigned long long>(stable_hash(source)));
  auto try_load = [&](bool from_cache) -> LoadedLibrary {
    void* h = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) return {};
    auto stored = reinterpret_cast<uint64_t (*)()>(dlsym(h, "tessera_cache_key"));
    if (!stored || stored() != key) {
      dlclose(h);
      return {};
    }
    return {h, so, from_cache};
  };
  if (access(so.c_str(), R_OK) == 0) {
    if (LoadedLibrary lib = try_load(true); lib.handle) return lib;
    std::remove(so.c_str());  // corrupt or foreign: rebuild it
  }
  make_directories(dir);
  std::random_device rd;
  const std::string tmp_tag = "." + std::to_string(getpid()) + "." + std::to_string(rd()) + ".tmp";
  const std::string cpp = dir + "/" + name + ".cpp";
  const std::string cpp_tmp = cpp + tmp_tag, so_tmp = so + tmp_tag;
  {
    std::ofstream out(cpp_tmp);
    out << source << key_fn;
    if (!out) throw std::runtime_error("inductor: cannot write '" + cpp_tmp + "' in the cache directory");
  }
  std::rename(cpp_tmp.c_str(), cpp.c_str());
  std::string command = quote(compiler_) + " " + flags_ + " " + quote(cpp) + " -o " + quote(so_tmp) + link;
  // No wait without a limit: coreutils' timeout stops a compiler that hangs.
  const int limit = env("TESSERA_COMPILE_TIMEOUT").empty() ? 300 : std::atoi(env("TESSERA_COMPILE_TIMEOUT").c_str());
  if (!timeout_.empty()) command = quote(timeout_) + " --kill-after=10 " + std::to_string(limit) + " " + command;
  auto [status, output] = run(command);
  if (!timeout_.empty() && WIFEXITED(status) && (WEXITSTATUS(status) == 124 || WEXITSTATUS(status) == 137)) {
    std::remove(so_tmp.c_str());
    throw std::runtime_error("inductor: the C++ compiler did not finish compiling '" + cpp + "' within " +
                             std::to_string(limit) + " s (TESSERA_COMPILE_TIMEOUT)");
  }
  if (status != 0) {
    std::remove(so_tmp.c_str());
    throw std::runtime_error("inductor: the C++ compiler failed on '" + cpp + "':\n" + command + "\n" +
                             output.substr(0, 4000));
  }
  if (std::rename(so_tmp.c_str(), so.c_str()) != 0) {
    std::remove(so_tmp.c_str());
    throw std::runtime_error("inductor: cannot move the compiled kernel into the cache at '" + so + "'");
  }
  LoadedLibrary lib = try_load(false);
  if (!lib.handle) throw std::runtime_error(std::string("inductor: cannot load '") + so + "': " + dlerror());
  return lib;
}

LoadedLibrary KernelCache::load_prebuilt(const std::string& path, const std::string& source) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) throw std::runtime_error("inductor: cannot load the prebuilt kernels '" + path + "': " + dlerror());
  auto stored = reinterpret_cast<uint64_t (*)()>(dlsym(h, "tessera_source_key"));
  if (!stored || stored() != stable_hash(source)) {
    dlclose(h);
    throw std::runtime_error("inductor: the prebuilt kernels '" + path + "' were not generated from this graph by "
                             "this version of the inductor");
  }
  return {h, path, true};
}

}  // namespace tessera::inductor

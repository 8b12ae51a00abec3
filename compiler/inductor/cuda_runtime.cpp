#include "cuda_runtime.h"
#include "cpp_codegen.h"
#include "cuda_codegen.h"
#include "kernel_cache.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace tessera::inductor {
namespace {

// The few NVRTC and driver entry points used, declared here (their headers are not needed to
// build the plugin). Results are ints: 0 is success in both libraries.
using nvrtcProgram = void*;
using NvrtcCreate = int (*)(nvrtcProgram*, const char*, const char*, int, const char* const*, const char* const*);
using NvrtcSize = int (*)(nvrtcProgram, size_t*);
using NvrtcGet = int (*)(nvrtcProgram, char*);
using NvrtcDestroy = int (*)(nvrtcProgram*);
using NvrtcError = const char* (*)(int);
using NvrtcVersion = int (*)(int*, int*);

void* open_first(const std::vector<std::string>& names) {
  for (const std::string& n : names)
    if (void* h = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
  return nullptr;
}

template <class F>
F symbol(void* lib, const char* name) {
  F f = reinterpret_cast<F>(dlsym(lib, name));
  if (!f) throw std::runtime_error(std::string("inductor: ") + name + " is missing from the CUDA library");
  return f;
}

struct Driver {
  void* lib = nullptr;
  int (*init)(unsigned) = nullptr;
  int (*device_get)(int*, int) = nullptr;
  int (*attribute)(int*, int, int) = nullptr;
  int (*retain)(void**, int) = nullptr;
  int (*push)(void*) = nullptr;
  int (*pop)(void**) = nullptr;
  int (*load)(void**, const void*) = nullptr;
  int (*unload)(void*) = nullptr;
  int (*function)(void**, void*, const char*) = nullptr;
  int (*launch)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*, void**,
                void**) = nullptr;
  int (*error)(int, const char**) = nullptr;

  static const Driver& get() {
    static const Driver d = [] {
      Driver d;
      d.lib = open_first({"libcuda.so.1", "libcuda.so"});
      if (!d.lib) throw std::runtime_error("inductor: the CUDA driver (libcuda.so.1) is not installed");
      d.init = symbol<decltype(d.init)>(d.lib, "cuInit");
      d.device_get = symbol<decltype(d.device_get)>(d.lib, "cuDeviceGet");
      d.attribute = symbol<decltype(d.attribute)>(d.lib, "cuDeviceGetAttribute");
      d.retain = symbol<decltype(d.retain)>(d.lib, "cuDevicePrimaryCtxRetain");
      d.push = symbol<decltype(d.push)>(d.lib, "cuCtxPushCurrent_v2");
      d.pop = symbol<decltype(d.pop)>(d.lib, "cuCtxPopCurrent_v2");
      d.load = symbol<decltype(d.load)>(d.lib, "cuModuleLoadData");
      d.unload = symbol<decltype(d.unload)>(d.lib, "cuModuleUnload");
      d.function = symbol<decltype(d.function)>(d.lib, "cuModuleGetFunction");
      d.launch = symbol<decltype(d.launch)>(d.lib, "cuLaunchKernel");
      d.error = symbol<decltype(d.error)>(d.lib, "cuGetErrorString");
      d.check(d.init(0), "cuInit");
      return d;
    }();
    return d;
  }

  void check(int result, const char* what) const {
    if (result == 0) return;
    const char* text = nullptr;
    if (error) error(result, &text);
    throw std::runtime_error(std::string("inductor: ") + what + " failed: " + (text ? text : "error ") +
                             (text ? "" : std::to_string(result)));
  }
};

// The device's primary context current on this thread for the scope (the CUDA runtime makes
// it current lazily; a thread that has not touched the runtime yet has none).
struct ContextScope {
  const Driver& d;
  explicit ContextScope(const Driver& driver, void* context) : d(driver) { d.check(d.push(context), "cuCtxPushCurrent"); }
  ~ContextScope() {
    void* popped = nullptr;
    d.pop(&popped);
  }
};

}  // namespace

Nvrtc::Nvrtc() {
  lib_ = open_first({"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12", "/usr/local/cuda/lib64/libnvrtc.so"});
  if (!lib_) {
    missing_ = "NVRTC (libnvrtc.so) is not installed";
    return;
  }
  compile_ = reinterpret_cast<CompileFn>(dlsym(lib_, "nvrtcCompileProgram"));
  if (!compile_) missing_ = "libnvrtc.so has no nvrtcCompileProgram";
}

const Nvrtc& Nvrtc::instance() {
  static const Nvrtc nvrtc;
  return nvrtc;
}

std::string Nvrtc::version() const {
  int major = 0, minor = 0;
  if (auto v = lib_ ? reinterpret_cast<NvrtcVersion>(dlsym(lib_, "nvrtcVersion")) : nullptr) v(&major, &minor);
  return std::to_string(major) + "." + std::to_string(minor);
}

std::string Nvrtc::compile(const std::string& source, const std::string& arch) const {
  if (!available()) throw std::runtime_error("inductor: " + missing_);
  auto create = symbol<NvrtcCreate>(lib_, "nvrtcCreateProgram");
  auto destroy = symbol<NvrtcDestroy>(lib_, "nvrtcDestroyProgram");
  auto error = symbol<NvrtcError>(lib_, "nvrtcGetErrorString");
  nvrtcProgram program = nullptr;
  if (int r = create(&program, source.c_str(), "tessera_kernels.cu", 0, nullptr, nullptr); r != 0)
    throw std::runtime_error(std::string("inductor: nvrtcCreateProgram failed: ") + error(r));
  struct Destroy {
    NvrtcDestroy destroy;
    nvrtcProgram* program;
    ~Destroy() { destroy(program); }
  } cleanup{destroy, &program};
  // No contraction beyond the explicit fmas, as on the CPU, so fused results match eager's.
  const std::string arch_flag = "--gpu-architecture=" + arch;
  const char* options[] = {arch_flag.c_str(), "--std=c++17", "--fmad=false", "-default-device"};
  const int result = compile_(program, 4, options);
  if (result != 0) {
    size_t size = 0;
    symbol<NvrtcSize>(lib_, "nvrtcGetProgramLogSize")(program, &size);
    std::string log(size, '\0');
    symbol<NvrtcGet>(lib_, "nvrtcGetProgramLog")(program, log.data());
    throw std::runtime_error(std::string("inductor: NVRTC could not compile the generated CUDA C (") + error(result) +
                             "):\n" + log);
  }
  size_t size = 0;
  symbol<NvrtcSize>(lib_, "nvrtcGetPTXSize")(program, &size);
  std::string ptx(size, '\0');
  symbol<NvrtcGet>(lib_, "nvrtcGetPTX")(program, ptx.data());
  while (!ptx.empty() && ptx.back() == '\0') ptx.pop_back();
  return source_key_line(source) + ptx;
}

std::string source_key_line(const std::string& source) {
  char line[64];
  std::snprintf(line, sizeof line, "// tessera source key %016llx\n",
                static_cast<unsigned long long>(stable_hash(source)));
  return line;
}

std::string prebuilt_ptx(const std::string& path, const std::string& source) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  const std::string ptx = text.str();
  if (!in) throw std::runtime_error("inductor: cannot read the prebuilt CUDA kernels '" + path + "'");
  const std::string key = source_key_line(source);
  if (ptx.compare(0, key.size(), key) != 0)
    throw std::runtime_error("inductor: the prebuilt CUDA kernels '" + path + "' were not generated from this graph "
                             "by this inductor");
  return ptx;
}

std::string Nvrtc::cached_compile(const std::string& source, const std::string& arch) const {
  char name[32];
  std::snprintf(name, sizeof name, "%016llx",
                static_cast<unsigned long long>(stable_hash(source + "\n" + arch + "\n" + version())));
  const std::string key = std::string("// tessera key ") + name + "\n";
  const std::string dir = KernelCache::instance().directory();
  const std::string path = dir + "/" + name + ".ptx";
  {
    std::ifstream in(path, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    const std::string ptx = text.str();
    if (in && ptx.size() > key.size() && ptx.compare(ptx.size() - key.size(), key.size(), key) == 0)
      return ptx.substr(0, ptx.size() - key.size());
  }
  const std::string ptx = compile(source, arch);
  try {
    make_directories(dir);
  } catch (const std::runtime_error&) {
    return ptx;  // an unwritable cache costs the next process this compile, nothing more
  }
  const std::string tmp = path + ".tmp" + std::to_string(getpid());
  std::ofstream out(tmp, std::ios::binary);
  out << ptx << key;
  out.close();
  if (!out || std::rename(tmp.c_str(), path.c_str()) != 0) std::remove(tmp.c_str());  // uncached, still correct
  return ptx;
}

CudaModule::CudaModule(const std::string& ptx, int32_t device_index, size_t kernels) : device_(device_index) {
  const Driver& d = Driver::get();
  int device = 0;
  d.check(d.device_get(&device, device_index), "cuDeviceGet");
  d.check(d.retain(&context_, device), "cuDevicePrimaryCtxRetain");
  ContextScope scope(d, context_);
  d.check(d.load(&module_, ptx.c_str()), "cuModuleLoadData");
  for (size_t k = 0; k < kernels; ++k) {
    void* f = nullptr;
    d.check(d.function(&f, module_, kernel_symbol(k).c_str()), "cuModuleGetFunction");
    functions_.push_back(f);
  }
}

CudaModule::~CudaModule() {
  if (!module_) return;
  const Driver& d = Driver::get();
  if (d.push(context_) == 0) {
    d.unload(module_);
    void* popped = nullptr;
    d.pop(&popped);
  }
}

void CudaModule::launch(size_t k, std::vector<void*>& args, int64_t numel, void* stream) const {
  const Driver& d = Driver::get();
  std::vector<void*> params;
  for (void*& a : args) params.push_back(&a);
  const int64_t blocks = std::clamp<int64_t>((numel + kCudaBlock - 1) / kCudaBlock, 1, int64_t(1) << 20);
  ContextScope scope(d, context_);
  d.check(d.launch(functions_[k], unsigned(blocks), 1, 1, kCudaBlock, 1, 1, 0, stream, params.data(), nullptr),
          "cuLaunchKernel");
}

std::string CudaModule::architecture(int32_t device_index) {
  const Driver& d = Driver::get();
  int device = 0, major = 0, minor = 0;
  d.check(d.device_get(&device, device_index), "cuDeviceGet");
  d.check(d.attribute(&major, 75, device), "cuDeviceGetAttribute");  // COMPUTE_CAPABILITY_MAJOR
  d.check(d.attribute(&minor, 76, device), "cuDeviceGetAttribute");  // COMPUTE_CAPABILITY_MINOR
  return "compute_" + std::to_string(major) + std::to_string(minor);
}

}  // namespace tessera::inductor

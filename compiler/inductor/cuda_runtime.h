#pragma once
// NVRTC (CUDA C -> PTX) and the CUDA driver (PTX -> a module, kernel launches), both opened
// with dlopen on first use, so the inductor plugin loads and runs CPU graphs on machines
// without CUDA. The PTX of a source is kept in the kernel cache's directory, named by a hash of
// the source, the architecture and NVRTC's version, written whole and renamed into place; a
// file that does not end with its key (a truncated write) is compiled again.
#include <cstdint>
#include <string>
#include <vector>

namespace tessera::inductor {

class Nvrtc {
 public:
  static const Nvrtc& instance();
  bool available() const { return compile_ != nullptr; }
  // Why NVRTC is not available ("" when it is).
  const std::string& missing() const { return missing_; }
  // PTX of `source` for virtual architecture `arch` ("compute_80"); throws std::runtime_error
  // with NVRTC's log when the source does not compile.
  std::string compile(const std::string& source, const std::string& arch) const;
  // compile(), through the on-disk cache.
  std::string cached_compile(const std::string& source, const std::string& arch) const;
  std::string version() const;

 private:
  Nvrtc();
  void* lib_ = nullptr;
  std::string missing_;
  using CompileFn = int (*)(void*, int, const char* const*);
  CompileFn compile_ = nullptr;
};

// "// tessera source key <hash>\n": the first line of the PTX Nvrtc::compile returns, naming the
// generated source it came from (PTX allows comments), so prebuilt PTX is checked as the CPU's
// prebuilt libraries are.
std::string source_key_line(const std::string& source);
// The PTX in file `path` (an export archive's ahead-of-time kernels) when it was compiled from
// exactly `source`; throws std::runtime_error otherwise. No NVRTC is needed.
std::string prebuilt_ptx(const std::string& path, const std::string& source);

// The kernels of one PTX module, loaded on a CUDA device (its primary context, the one the
// CUDA runtime and so the CUDA plugin use) and launched on a stream of that device.
class CudaModule {
 public:
  CudaModule(const std::string& ptx, int32_t device_index, size_t kernels);
  ~CudaModule();
  CudaModule(const CudaModule&) = delete;
  CudaModule& operator=(const CudaModule&) = delete;
  // Kernel k over `numel` elements (grid-stride, kCudaBlock threads a block); `args` are the
  // kernel's pointer parameters in order; `stream` a CUstream (nullptr: the legacy default).
  void launch(size_t k, std::vector<void*>& args, int64_t numel, void* stream) const;
  // "compute_<major><minor>" of the device.
  static std::string architecture(int32_t device_index);

 private:
  int32_t device_;
  void* context_ = nullptr;
  void* module_ = nullptr;
  std::vector<void*> functions_;
};

}  // namespace tessera::inductor

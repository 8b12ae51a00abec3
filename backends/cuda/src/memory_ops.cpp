// The plugin's own operators (namespace "cuda", or "hip" in the ROCm build): device count,
// properties and selection, synchronisation, the caching allocator's statistics and cache, GEMM switches.
// They take no tensors, so they are registered as catch-all kernels that serve any key.
#include "caching_allocator.h"
#include "cuda_plugin.h"

#include <string>

namespace tessera::gpu {

CachingAllocator& allocator();  // runtime.cpp

namespace {
// Messages leave the operator's name to the host, which prefixes it.
int32_t checked_index(int64_t device) {
  require_device(nullptr);
  TS_SDK_CHECK(device >= 0 && device < runtime().device_count, TS_ERROR_INDEX, "device index ", device,
               " is out of range, there are ", runtime().device_count, " ", kName, " devices");
  return int32_t(device);
}
ts_value int_value(int64_t i) { return sdk::value(i); }

void device_count_k(sdk::Args& a) { a.returns({int_value(runtime().device_count)}); }
void is_available_k(sdk::Args& a) { a.returns({sdk::value(runtime().device_count > 0)}); }

void synchronize_k(sdk::Args& a) {
  int32_t index = checked_index(a.is_none(0) ? 0 : a.to_int(0));
  DeviceGuard guard(index);
  check(gpuDeviceSynchronize(), "synchronize");  // every stream of the device, as torch.cuda.synchronize
  a.returns({});
}

// (name, major, minor, total_memory, multi_processor_count), as torch.cuda.get_device_properties.
void device_properties_k(sdk::Args& a) {
  thread_local std::string name;  // the returned string points here until the next call
  const int32_t index = checked_index(a.is_none(0) ? 0 : a.to_int(0));
  gpuDeviceProp p{};
  check(gpuGetDeviceProperties(&p, index), "get_device_properties");
  name = p.name;
  ts_value text{TS_VALUE_STRING, 0, {}};
  text.u.str = name.c_str();
  a.returns({text, int_value(p.major), int_value(p.minor), int_value(int64_t(p.totalGlobalMem)),
             int_value(p.multiProcessorCount)});
}

void set_device_k(sdk::Args& a) {
  int32_t index = checked_index(a.to_int(0));
  check(gpuSetDevice(index), "set_device");
  a.returns({});
}

void current_device_k(sdk::Args& a) {
  require_device(nullptr);
  int d = 0;
  check(gpuGetDevice(&d), "current_device");
  a.returns({int_value(d)});
}

// [allocated, reserved, peak_allocated, peak_reserved, num_allocations, num_cache_hits,
//  num_device_allocations, num_ooms, num_deferred_frees, pending_frees] in bytes and counts. Zeros on a machine without devices.
void memory_stats_k(sdk::Args& a) {
  thread_local std::vector<int64_t> values;  // the returned list points here until the next call
  int64_t device = a.is_none(0) ? 0 : a.to_int(0);
  TS_SDK_CHECK(device >= 0, TS_ERROR_INDEX, "expected a device index >= 0, got ", device);
  values = allocator().stats(int32_t(device)).to_vector();
  a.returns({sdk::int_list_value(values)});
}

void empty_cache_k(sdk::Args& a) {
  if (runtime().device_count > 0)
    for (int32_t d = 0; d < runtime().device_count; ++d) (void)gpuStreamSynchronize(stream_for(d));
  allocator().empty_cache(-1);
  a.returns({});
}

void reset_peak_k(sdk::Args& a) {
  allocator().reset_peaks(int32_t(a.is_none(0) ? 0 : a.to_int(0)));
  a.returns({});
}

void set_allow_tf32_k(sdk::Args& a) {
  set_allow_tf32(a.to_bool(0));
  a.returns({});
}
void allow_tf32_k(sdk::Args& a) { a.returns({sdk::value(allow_tf32())}); }

void set_use_vendor_blas_k(sdk::Args& a) {
  set_use_vendor_blas(a.to_bool(0));
  a.returns({});
}
}  // namespace

void register_memory_ops(sdk::Registrar& reg) {
  const PluginOp ops[] = {
      {"device_count", "() -> int", device_count_k},
      {"is_available", "() -> bool", is_available_k},
      {"synchronize", "(int device=0) -> ()", synchronize_k},
      {"set_device", "(int device) -> ()", set_device_k},
      {"current_device", "() -> int", current_device_k},
      {"get_device_properties", "(int device=0) -> (str, int, int, int, int)", device_properties_k},
      {"memory_stats", "(int device=0) -> int[]", memory_stats_k},
      {"empty_cache", "() -> ()", empty_cache_k},
      {"reset_peak_memory_stats", "(int device=0) -> ()", reset_peak_k},
      {"set_allow_tf32", "(bool allow) -> ()", set_allow_tf32_k},
      {"allow_tf32", "() -> bool", allow_tf32_k},
      // false: matmuls use our tiled kernel instead of cuBLAS (the ROCm build always does).
      {"set_use_vendor_blas", "(bool enabled) -> ()", set_use_vendor_blas_k},
  };
  register_plugin_ops(reg, ops);
}

void register_plugin_ops(sdk::Registrar& reg, std::span<const PluginOp> ops) {
  for (const PluginOp& op : ops) {
    std::string name = sdk::cat(kName, "::", op.name);
    reg.def((name + op.signature).c_str());
    reg.kernel(name.c_str(), TS_KEY_CATCH_ALL, op.fn);
  }
}

}  // namespace tessera::gpu

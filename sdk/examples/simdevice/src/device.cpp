// The device itself: its arenas, the ts_device_desc memory functions the host calls, and the
// tensor-to-bytes mapping the kernels use.
#include "simdev.h"

#include <cstdio>
#include <cstring>
#include <string>

namespace simdev {

DeviceState& state() {
  static DeviceState s;
  return s;
}

namespace {
// Distinct tags per device name and index, so a handle of one simulated device handed to
// another is caught by map() too. Never 0 or 0xFFFF (those would be canonical addresses).
uint16_t tag_for(int32_t index) {
  uint32_t h = 2166136261u;
  for (const char* c = SIMDEV_NAME; *c; ++c) h = (h ^ uint8_t(*c)) * 16777619u;
  return uint16_t(0x1000 + (h % 0xE000) + uint32_t(index));
}

Arena* arenas() {
  static Arena* a = [] {
    auto* all = static_cast<Arena*>(::operator new(sizeof(Arena) * kDeviceCount));
    for (int32_t i = 0; i < kDeviceCount; ++i) new (&all[i]) Arena(tag_for(i), size_t(SIMDEV_MEMORY_MB) << 20);
    return all;  // never destroyed: the host may free storages at exit
  }();
  return a;
}

// Device functions cannot hand a message to the host (they have no call), so they print it.
ts_status report(const char* what, const std::exception& e) {
  std::fprintf(stderr, "[%s] %s failed: %s\n", SIMDEV_NAME, what, e.what());
  return TS_ERROR_VALUE;
}
}  // namespace

Arena& arena(int32_t index) {
  TS_SDK_CHECK(index >= 0 && index < kDeviceCount, TS_ERROR_INDEX, SIMDEV_NAME, ": device index ", index,
               " out of range, this device has ", kDeviceCount);
  return arenas()[index];
}

bool is_this_device(ts_device d) { return state().type >= 0 && d.type == state().type; }

std::string device_str(ts_device d) {
  if (is_this_device(d)) return sdk::cat(SIMDEV_NAME, ":", d.index);
  return d.type == 0 ? std::string("cpu") : sdk::cat("device type ", d.type, ":", d.index);
}

char* bytes(const sdk::TensorRef& t) {
  if (t.numel() == 0) return nullptr;
  // The bytes from element 0 to the farthest element the strides reach.
  int64_t span = 1;
  for (int64_t d = 0; d < t.dim(); ++d) span += (t.size(d) - 1) * t.stride(d);
  char* first = static_cast<char*>(t.view().data) + t.view().byte_offset;  // handle arithmetic, no dereference
  if (is_this_device(t.device())) return arena(t.device().index).map(first, size_t(span * t.itemsize()));
  TS_SDK_CHECK(t.device().type == 0, TS_ERROR_VALUE, SIMDEV_NAME, " kernels read only ", SIMDEV_NAME,
               " and cpu tensors, got a tensor on ", device_str(t.device()));
  return first;
}

void check_same_device(const char* op, ts_device device, std::initializer_list<const sdk::TensorRef*> tensors) {
  int i = 0;
  for (const sdk::TensorRef* t : tensors) {
    ts_device d = t->device();
    bool cpu_scalar = d.type == 0 && t->dim() == 0;
    TS_SDK_CHECK((d.type == device.type && d.index == device.index) || cpu_scalar, TS_ERROR_VALUE, op,
                 ": expected all tensors on ", device_str(device), ", got tensor ", i, " on ", device_str(d),
                 " (move it with .to(\"", SIMDEV_NAME, "\"))");
    ++i;
  }
}

double load_double(const char* p, int32_t dtype) {
  double v = 0;
  TS_DISPATCH_ALL(dtype, sdk::fail(TS_ERROR_TYPE, "invalid dtype ", dtype),
                  v = double(static_cast<sdk::opmath_t<scalar_t>>(*reinterpret_cast<const scalar_t*>(p))));
  return v;
}

int64_t load_int(const char* p, int32_t dtype) {
  int64_t v = 0;
  TS_DISPATCH_ALL(dtype, sdk::fail(TS_ERROR_TYPE, "invalid dtype ", dtype),
                  v = int64_t(static_cast<sdk::opmath_t<scalar_t>>(*reinterpret_cast<const scalar_t*>(p))));
  return v;
}

void store(char* p, int32_t dtype, double v) {
  if (dtype == TS_BOOL) { *reinterpret_cast<bool*>(p) = v != 0; return; }
  TS_DISPATCH_ALL(dtype, sdk::fail(TS_ERROR_TYPE, "invalid dtype ", dtype),
                  *reinterpret_cast<scalar_t*>(p) = static_cast<scalar_t>(static_cast<sdk::opmath_t<scalar_t>>(v)));
}

void store(char* p, int32_t dtype, int64_t v) {
  if (dtype == TS_BOOL) { *reinterpret_cast<bool*>(p) = v != 0; return; }
  TS_DISPATCH_ALL(dtype, sdk::fail(TS_ERROR_TYPE, "invalid dtype ", dtype),
                  *reinterpret_cast<scalar_t*>(p) = static_cast<scalar_t>(static_cast<sdk::opmath_t<scalar_t>>(v)));
}

int64_t numel_of(std::span<const int64_t> shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

std::vector<int64_t> contiguous_strides(std::span<const int64_t> shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t s = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    strides[d] = s;
    s *= shape[d] > 0 ? shape[d] : 1;
  }
  return strides;
}

std::vector<int64_t> broadcast_shapes(const char* op, std::span<const int64_t> a, std::span<const int64_t> b) {
  size_t n = std::max(a.size(), b.size());
  std::vector<int64_t> out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t x = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t y = i < n - b.size() ? 1 : b[i - (n - b.size())];
    TS_SDK_CHECK(x == y || x == 1 || y == 1, TS_ERROR_VALUE, op, ": the size of tensor a (", x,
                 ") must match the size of tensor b (", y, ") at non-singleton dimension ", i);
    out[i] = x == 1 ? y : x;
  }
  return out;
}

Operand broadcast_operand(const char* op, const sdk::TensorRef& t, std::span<const int64_t> shape) {
  Operand o;
  o.data = bytes(t);
  o.dtype = t.dtype();
  o.itemsize = t.itemsize();
  o.strides.assign(shape.size(), 0);
  size_t lead = shape.size() - size_t(t.dim());
  TS_SDK_CHECK(size_t(t.dim()) <= shape.size(), TS_ERROR_VALUE, op, ": cannot broadcast a ", t.dim(),
               "-d tensor to ", shape.size(), " dimensions");
  for (size_t d = 0; d < size_t(t.dim()); ++d) {
    TS_SDK_CHECK(t.size(int64_t(d)) == shape[lead + d] || t.size(int64_t(d)) == 1, TS_ERROR_VALUE, op,
                 ": cannot broadcast size ", t.size(int64_t(d)), " to ", shape[lead + d], " at dimension ", lead + d);
    o.strides[lead + d] = t.size(int64_t(d)) == 1 ? 0 : t.stride(int64_t(d));
  }
  return o;
}

// ---- the ts_device_desc functions
namespace {
int32_t device_count(void*) { return kDeviceCount; }

void* allocate(void*, int32_t index, size_t nbytes) {
  if (index < 0 || index >= kDeviceCount) return nullptr;
  return arenas()[index].allocate(nbytes);
}

void deallocate(void*, int32_t index, void* ptr, size_t) {
  if (index >= 0 && index < kDeviceCount) arenas()[index].release(ptr);
}

ts_status copy_to_host(void*, int32_t index, void* host_dst, const void* src, size_t nbytes) {
  try {
    wait_current_stream(index);  // a blocking copy sees the results of the work queued before it
    if (nbytes) std::memcpy(host_dst, arena(index).map(src, nbytes), nbytes);
    return TS_OK;
  } catch (const std::exception& e) {
    return report("copy_to_host", e);
  }
}

ts_status copy_from_host(void*, int32_t index, void* dst, const void* host_src, size_t nbytes) {
  try {
    if (nbytes) std::memcpy(arena(index).map(dst, nbytes), host_src, nbytes);
    return TS_OK;
  } catch (const std::exception& e) {
    return report("copy_from_host", e);
  }
}

ts_status copy_within(void*, int32_t index, void* dst, const void* src, size_t nbytes) {
  try {
    if (nbytes) std::memmove(arena(index).map(dst, nbytes), arena(index).map(src, nbytes), nbytes);
    return TS_OK;
  } catch (const std::exception& e) {
    return report("copy_within", e);
  }
}

// Waits for the simulated clocks of all the device's streams (streams.cpp).
ts_status synchronize(void*, int32_t index) {
  if (index < 0 || index >= kDeviceCount) return TS_ERROR_INDEX;
  wait_device(index);
  return TS_OK;
}
// A kernel registered through simdev::Registrar: the work it did is queued on the current
// stream of the device its first result (or argument) lives on.
ts_status timed_kernel(void* fn, ts_call call, ts_keyset keys, ts_stack* stack) {
  ts_status status = sdk::detail::run_kernel(fn, call, keys, stack);
  if (status != TS_OK) return status;
  for (int32_t i = 0; i < stack->size; ++i) {
    const ts_value& v = stack->values[i];
    if (v.tag != TS_VALUE_TENSOR || !v.u.tensor) continue;
    ts_tensor_view view{};
    view.struct_size = sizeof view;
    if (sdk::host().tensor_get_view(v.u.tensor, &view) == TS_OK && is_this_device(view.device)) {
      note_kernel(view.device.index);
      break;
    }
  }
  return status;
}
}  // namespace

void Registrar::kernel(const char* op, ts_dispatch_key key, sdk::KernelFn fn) {
  boxed_kernel(op, key, timed_kernel, reinterpret_cast<void*>(fn));
}

ts_device_desc device_desc() {
  ts_device_desc desc{};
  desc.struct_size = sizeof desc;
  desc.name = SIMDEV_NAME;
  desc.host_accessible = 0;  // the point of this device: the host must go through the copies
  desc.device_count = device_count;
  desc.allocate = allocate;
  desc.deallocate = deallocate;
  desc.copy_to_host = copy_to_host;
  desc.copy_from_host = copy_from_host;
  desc.copy_within = copy_within;
  desc.synchronize = synchronize;
  add_stream_functions(desc);
  return desc;
}

}  // namespace simdev

// The device itself: probing the runtime, the caching allocator behind the ts_device_desc
// callbacks (streams and events: streams.cpp), and the host-side helpers every kernel family uses.
#include "caching_allocator.h"
#include "cuda_plugin.h"

#include <algorithm>
#include <cstdio>
#include <mutex>

namespace tessera::gpu {

Runtime& runtime() {
  static Runtime r;
  return r;
}

void probe_runtime() {
  Runtime& r = runtime();
  int count = 0;
  gpuError_t e = gpuGetDeviceCount(&count);
  if (e != gpuSuccess) {
    r.device_count = 0;
    r.unavailable_reason = sdk::cat("no ", kName, " driver/device was found: ", GPU_BACKEND_NAME,
                                    "GetDeviceCount failed with ", gpuGetErrorName(e), " (", gpuGetErrorString(e), ")");
    (void)gpuGetLastError();  // clear the sticky error so later calls report their own
  } else if (count == 0) {
    r.unavailable_reason = sdk::cat("no ", kName, " device was found: the driver reports 0 devices");
  } else {
    r.device_count = count;
  }
}

void require_device(const char* op) {
  const Runtime& r = runtime();
  if (r.device_count > 0) return;
  if (op) sdk::fail(TS_ERROR, op, ": ", r.unavailable_reason);
  sdk::fail(TS_ERROR, r.unavailable_reason);  // the host names the operator
}

void check(gpuError_t e, const char* what) {
  // A failed call leaves its error as the runtime's last error: clear it, so the next kernel
  // launch check does not report it again (sticky errors stay whatever we do).
  if (e != gpuSuccess) (void)gpuGetLastError();
  TS_SDK_CHECK(e == gpuSuccess, e == gpuErrorMemoryAllocation ? TS_ERROR_OUT_OF_MEMORY : TS_ERROR, kName, ": ", what,
               " failed: ", gpuGetErrorName(e), " (", gpuGetErrorString(e), ")");
}

// ---- the current device
DeviceGuard::DeviceGuard(int32_t index) {
  int current = 0;
  check(gpuGetDevice(&current), "reading the current device");
  if (current != index) {
    check(gpuSetDevice(index), "selecting the device");
    previous_ = current;
  }
}
DeviceGuard::~DeviceGuard() {
  if (previous_ >= 0) (void)gpuSetDevice(previous_);
}

// ---- the allocator and the ts_device_desc callbacks
namespace {
void* raw_allocate(void*, int32_t device, size_t nbytes, std::string* error) {
  int previous = 0;
  (void)gpuGetDevice(&previous);
  (void)gpuSetDevice(device);
  void* ptr = nullptr;
  // A graph capture forbids cudaMalloc in its default mode; the allocation is not captured work
  // (the caching allocator files the block under the capture's private pool), so relax the mode.
  gpuStreamCaptureMode mode = gpuStreamCaptureModeRelaxed;
  (void)gpuThreadExchangeStreamCaptureMode(&mode);
  gpuError_t e = gpuMalloc(&ptr, nbytes);
  (void)gpuThreadExchangeStreamCaptureMode(&mode);
  (void)gpuSetDevice(previous);
  if (e != gpuSuccess) {
    *error = sdk::cat(gpuGetErrorName(e), " (", gpuGetErrorString(e), ")");
    (void)gpuGetLastError();
    return nullptr;
  }
  return ptr;
}
void raw_release(void*, int32_t device, void* ptr) {
  int previous = 0;
  (void)gpuGetDevice(&previous);
  (void)gpuSetDevice(device);
  (void)gpuFree(ptr);
  (void)gpuSetDevice(previous);
}

// The allocator's event functions (stream-ordered frees), over the pooled events below.
void* raw_record_event(void*, int32_t device, uintptr_t stream, std::string* error) {
  try {
    return record_pooled_event(device, reinterpret_cast<gpuStream_t>(stream));
  } catch (const std::exception& e) {
    *error = e.what();
    return nullptr;
  }
}
bool raw_event_done(void*, int32_t, void* event) { return pooled_event_done(static_cast<gpuEvent_t>(event)); }
void raw_event_wait(void*, int32_t, void* event) {
  if (gpuEventSynchronize(static_cast<gpuEvent_t>(event)) != gpuSuccess) (void)gpuGetLastError();
}
void raw_event_release(void*, int32_t device, void* event) { release_pooled_event(device, static_cast<gpuEvent_t>(event)); }

// Reused per device: every deferred free and every async copy from pinned memory records one.
struct EventPool {
  std::mutex mutex;
  std::vector<std::vector<gpuEvent_t>> free;  // per device
};
EventPool& event_pool() {
  static EventPool* p = new EventPool;
  return *p;
}
}  // namespace

gpuEvent_t record_pooled_event(int32_t device, gpuStream_t stream) {
  gpuEvent_t event = nullptr;
  {
    EventPool& pool = event_pool();
    std::lock_guard lock(pool.mutex);
    if (size_t(device) < pool.free.size() && !pool.free[size_t(device)].empty()) {
      event = pool.free[size_t(device)].back();
      pool.free[size_t(device)].pop_back();
    }
  }
  DeviceGuard guard(device);
  if (!event) check(gpuEventCreateWithFlags(&event, gpuEventDisableTiming), "creating an event");
  gpuError_t e = gpuEventRecord(event, stream);
  if (e != gpuSuccess) (void)gpuEventDestroy(event);
  check(e, "recording an event");
  return event;
}

bool pooled_event_done(gpuEvent_t event) {
  gpuError_t e = gpuEventQuery(event);
  if (e != gpuSuccess) (void)gpuGetLastError();
  return e != gpuErrorNotReady;  // an error: nothing more will run before it
}

void release_pooled_event(int32_t device, gpuEvent_t event) {
  EventPool& pool = event_pool();
  std::lock_guard lock(pool.mutex);
  if (pool.free.size() <= size_t(device)) pool.free.resize(size_t(device) + 1);
  pool.free[size_t(device)].push_back(event);
}

CachingAllocator& allocator() {
  static CachingAllocator* a = [] {
    RawAllocator raw{raw_allocate, raw_release, nullptr};
    raw.record_event = raw_record_event;
    raw.event_done = raw_event_done;
    raw.event_wait = raw_event_wait;
    raw.event_release = raw_event_release;
    return new CachingAllocator(raw);
  }();
  return *a;
}

namespace {
// Device callbacks have no call to report on: a 1.3 host takes the reason with
// set_error(NULL, ...) and raises it. It is printed where it may not be raised: by an older
// host, or for allocate (the host raises its own out-of-memory error).
ts_status report(const char* what, const std::string& why, bool print = false) {
  const ts_host_api& h = sdk::host();
  bool takes_errors = h.abi_major == TESSERA_ABI_MAJOR && h.abi_minor >= 3;
  if (takes_errors) h.set_error(nullptr, sdk::cat(what, ": ", why).c_str());
  if (print || !takes_errors) std::fprintf(stderr, "[%s] %s failed: %s\n", kName, what, why.c_str());
  return TS_ERROR;
}
bool valid_index(int32_t index) { return index >= 0 && index < runtime().device_count; }

int32_t device_count_cb(void*) { return runtime().device_count; }

void* allocate_cb(void*, int32_t index, size_t nbytes) {
  if (!valid_index(index)) {
    report("allocate", runtime().device_count ? sdk::cat("device index ", index, " out of range")
                                              : runtime().unavailable_reason, true);
    return nullptr;
  }
  try {
    void* p = allocator().allocate(index, nbytes, reinterpret_cast<uintptr_t>(stream_for(index)));
    if (!p) report("allocate", allocator().last_error(), true);
    if (p && sdk::observing())  // the profiler's memory events (ABI 1.6)
      sdk::observe_memory(ts_device{runtime().key, index}, p, int64_t(nbytes), allocator().stats(index).allocated);
    return p;
  } catch (const std::exception& e) {
    report("allocate", e.what(), true);
    return nullptr;
  }
}

void deallocate_cb(void*, int32_t index, void* ptr, size_t nbytes) {
  allocator().deallocate(ptr);
  if (ptr && sdk::observing())
    sdk::observe_memory(ts_device{runtime().key, index}, ptr, -int64_t(nbytes), allocator().stats(index).allocated);
}

ts_status copy_cb(const char* what, int32_t index, void* dst, const void* src, size_t nbytes, int kind, bool wait) {
  if (!nbytes) return TS_OK;
  if (!valid_index(index)) return report(what, runtime().unavailable_reason);
  try {
    DeviceGuard guard(index);
    gpuStream_t s = stream_for(index);
    check(gpuMemcpyAsync(dst, src, nbytes, static_cast<decltype(gpuMemcpyHostToDevice)>(kind), s), what);
    // Host memory may be reused as soon as we return: host copies complete before returning.
    if (wait) check(gpuStreamSynchronize(s), what);
    return TS_OK;
  } catch (const std::exception& e) {
    return report(what, e.what());
  }
}
ts_status copy_to_host_cb(void*, int32_t index, void* dst, const void* src, size_t n) {
  return copy_cb("copy_to_host", index, dst, src, n, gpuMemcpyDeviceToHost, true);
}
ts_status copy_from_host_cb(void*, int32_t index, void* dst, const void* src, size_t n) {
  return copy_cb("copy_from_host", index, dst, src, n, gpuMemcpyHostToDevice, true);
}
ts_status copy_within_cb(void*, int32_t index, void* dst, const void* src, size_t n) {
  return copy_cb("copy_within", index, dst, src, n, gpuMemcpyDeviceToDevice, false);
}
// The whole device, every stream of it (torch.cuda.synchronize).
ts_status synchronize_cb(void*, int32_t index) {
  if (!valid_index(index)) return report("synchronize", runtime().unavailable_reason);
  try {
    DeviceGuard guard(index);
    check(gpuDeviceSynchronize(), "synchronizing the device");
    report_finished_kernel_spans();  // every span of this device is complete now
    return TS_OK;
  } catch (const std::exception& e) {
    return report("synchronize", e.what());
  }
}
}  // namespace

ts_device_desc device_desc() {
  ts_device_desc d{};
  d.struct_size = sizeof d;
  d.name = kName;
  d.host_accessible = 0;
  d.device_count = device_count_cb;
  d.allocate = allocate_cb;
  d.deallocate = deallocate_cb;
  d.copy_to_host = copy_to_host_cb;
  d.copy_from_host = copy_from_host_cb;
  d.copy_within = copy_within_cb;
  d.synchronize = synchronize_cb;
  add_stream_functions(d);
  return d;
}

// ---- helpers
bool is_ours(ts_device d) { return d.type == runtime().key; }

std::string device_str(ts_device d) {
  if (is_ours(d)) return sdk::cat(kName, ":", d.index);
  return d.type == 0 ? std::string("cpu") : sdk::cat("device type ", d.type, ":", d.index);
}

ts_device common_device(const char* op, std::initializer_list<const TensorRef*> tensors) {
  const TensorRef* first = *tensors.begin();
  ts_device dev = first->device();
  int i = 0;
  for (const TensorRef* t : tensors) {
    ts_device d = t->device();
    TS_SDK_CHECK(is_ours(d) && d.index == dev.index, TS_ERROR_VALUE, op, ": expected all tensors on ",
                 device_str(dev), ", got tensor ", i, " on ", device_str(d), " (move it with .to(\"", device_str(dev),
                 "\"))");
    ++i;
  }
  return dev;
}

int64_t wrap_dim(const char* op, int64_t dim, int64_t ndim) {
  int64_t n = std::max<int64_t>(ndim, 1);
  TS_SDK_CHECK(dim >= -n && dim < n, TS_ERROR_INDEX, op, ": dimension out of range (expected to be in range of [",
               -n, ", ", n - 1, "], but got ", dim, ")");
  return dim < 0 ? dim + n : dim;
}

std::vector<int64_t> contiguous_strides(std::span<const int64_t> shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t s = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    strides[d] = s;
    s *= std::max<int64_t>(shape[d], 1);
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
                 ") must match the size of tensor b (", y, ") at non-singleton dimension ", i, " (shapes ",
                 shape_text(a), " and ", shape_text(b), ")");
    out[i] = x == 1 ? y : x;
  }
  return out;
}

Compute compute_for(int32_t dtype) {
  if (dtype == TS_FLOAT64) return Compute::Double;
  return sdk::is_floating(dtype) ? Compute::Float : Compute::Int64;
}

Loop make_loop(const char* op, std::span<const int64_t> shape, std::initializer_list<const TensorRef*> operands) {
  Loop L;
  L.noperands = int32_t(operands.size());
  std::vector<int64_t> sizes(shape.begin(), shape.end());
  std::vector<std::vector<int64_t>> strides;
  int k = 0;
  for (const TensorRef* t : operands) {
    std::vector<int64_t> s(shape.size(), 0);
    if (t) {
      L.ops[k].data = first_element(*t);
      L.ops[k].dtype = t->dtype();
      L.ops[k].itemsize = int32_t(t->itemsize());
      size_t lead = shape.size() - size_t(t->dim());
      TS_SDK_CHECK(size_t(t->dim()) <= shape.size(), TS_ERROR_VALUE, op, ": cannot broadcast shape ",
                   shape_text(t->sizes()), " to ", shape_text(shape));
      for (size_t d = 0; d < size_t(t->dim()); ++d) {
        int64_t sz = t->size(int64_t(d));
        TS_SDK_CHECK(sz == shape[lead + d] || sz == 1, TS_ERROR_VALUE, op, ": cannot broadcast shape ",
                     shape_text(t->sizes()), " to ", shape_text(shape));
        s[lead + d] = sz == 1 ? 0 : t->stride(int64_t(d));
      }
    }
    strides.push_back(std::move(s));
    ++k;
  }
  // Coalesce: drop size-1 dims, merge a dim into the next when every operand steps through
  // both as one run.
  std::vector<int64_t> cs;
  std::vector<std::vector<int64_t>> cst(strides.size());
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 1) continue;
    bool merge = !cs.empty();
    for (size_t o = 0; merge && o < strides.size(); ++o)
      merge = cst[o].back() == strides[o][d] * sizes[d];
    if (merge) {
      cs.back() *= sizes[d];
      for (size_t o = 0; o < strides.size(); ++o) cst[o].back() = strides[o][d];
    } else {
      cs.push_back(sizes[d]);
      for (size_t o = 0; o < strides.size(); ++o) cst[o].push_back(strides[o][d]);
    }
  }
  TS_SDK_CHECK(cs.size() <= size_t(kMaxDims), TS_ERROR_VALUE, op, ": the ", kName, " kernels handle at most ",
               kMaxDims, " non-mergeable dims, got ", cs.size(), " (make the inputs contiguous first)");
  L.ndim = int32_t(cs.size());
  L.numel = 1;
  for (size_t d = 0; d < cs.size(); ++d) {
    L.sizes[d] = cs[d];
    L.numel *= cs[d];
  }
  if (shape.size() && L.numel) {
    for (int64_t s : shape) if (s == 0) L.numel = 0;
  }
  int64_t max_offset = L.numel;
  for (size_t o = 0; o < strides.size(); ++o) {
    int64_t reach = 0;
    for (size_t d = 0; d < cs.size(); ++d) {
      L.ops[o].strides[d] = cst[o][d];
      reach += (cs[d] - 1) * (cst[o][d] < 0 ? -cst[o][d] : cst[o][d]);
    }
    max_offset = std::max(max_offset, reach + 1);
  }
  L.index32 = index32_fits(max_offset);
  return L;
}

TensorRef empty_on(ts_call call, std::span<const int64_t> shape, int32_t dtype, ts_device device) {
  return sdk::empty(call, shape, dtype, device);
}

void copy_into(const char* op, const TensorRef& dst, const TensorRef& src) {
  auto shape = dst.shape_vector();
  Loop L = make_loop(op, shape, {&dst, &src});
  DeviceGuard guard(dst.device().index);
  launch_copy(L, stream_for(dst.device().index));
}

TensorRef bad_index_flag(ts_call call, ts_device device) {
  const int64_t shape[] = {2};
  TensorRef flag = empty_on(call, shape, TS_INT64, device);
  check(gpuMemsetAsync(flag.data(), 0, 2 * sizeof(int64_t), stream_for(device.index)), "zeroing an index check");
  return flag;
}

bool read_bad_index(const TensorRef& flag, int64_t& value) {
  int64_t host[2] = {0, 0};
  copy_host(flag.device().index, host, flag.data(), sizeof(host), gpuMemcpyDeviceToHost, false, "reading an index check");
  value = host[1];
  return host[0] != 0;
}

TensorRef contiguous(ts_call call, const TensorRef& t, int32_t dtype) {
  if (t.is_contiguous() && t.dtype() == dtype) return t;
  TensorRef out = empty_on(call, t.sizes(), dtype, t.device());
  copy_into("contiguous", out, t);
  return out;
}

TensorRef restride(ts_call call, const TensorRef& base, std::span<const int64_t> shape,
                   std::span<const int64_t> strides, int64_t storage_offset) {
  return sdk::alias(call, base, shape, strides, storage_offset);
}

}  // namespace tessera::gpu

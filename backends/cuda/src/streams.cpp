// Streams, events, page-locked host memory and the async copies that use it (the ts_device_desc
// functions of ABI 1.3), and each thread's current stream per device: the stream every kernel,
// GEMM and copy of this plugin queues its work on (stream_for).
#include "caching_allocator.h"
#include "cuda_plugin.h"
#include "pinned_blocks.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>

namespace tessera::gpu {

CachingAllocator& allocator();  // runtime.cpp

namespace {

// The handles the host holds (ts_stream, ts_event) point to these: each knows its device.
struct Stream {
  int32_t device;
  gpuStream_t stream;
  int32_t priority;
};
struct Event {
  int32_t device;
  int32_t flags;  // TS_EVENT_*
  gpuEvent_t event = nullptr;
  std::atomic<bool> recorded{false};
};

// The default stream of each device (the NULL ts_stream): a non-blocking stream made on first
// use, so the plugin's work never serialises with other libraries' legacy default stream.
struct DefaultStreams {
  std::mutex mutex;
  std::vector<gpuStream_t> per_device;
};
DefaultStreams& default_streams() {
  static DefaultStreams* s = new DefaultStreams;  // never destroyed: the host frees storages at exit
  return *s;
}

// The calling thread's current stream of each device; nullptr: the default stream.
std::vector<gpuStream_t>& current_streams() {
  thread_local std::vector<gpuStream_t> current;
  return current;
}

// Raises the runtime's reason when there is no device, and a clear error for a bad index.
void require_index(int32_t index) {
  require_device(nullptr);
  TS_SDK_CHECK(index >= 0 && index < runtime().device_count, TS_ERROR_INDEX, "device index ", index,
               " is out of range, there are ", runtime().device_count, " ", kName, " devices");
}

// The stream `s` names on device `index`: NULL is the device's default stream.
gpuStream_t resolve(int32_t index, ts_stream s) {
  if (!s) return default_stream(index);
  const Stream& st = *reinterpret_cast<const Stream*>(s);
  TS_SDK_CHECK(st.device == index, TS_ERROR_VALUE, "expected a stream of ", kName, ":", index, ", got a stream of ",
               kName, ":", st.device);
  return st.stream;
}

Event& event_of(ts_event e) {
  TS_SDK_CHECK(e, TS_ERROR_VALUE, "expected an event, got NULL");
  return *reinterpret_cast<Event*>(e);
}

template <class T>
void require_out(T* out) {
  TS_SDK_CHECK(out, TS_ERROR_VALUE, "expected a pointer to write the result to, got NULL");
}

// A query: done (1), not yet (0; cudaErrorNotReady is not an error, and is cleared), or raises.
int32_t done_or_raise(gpuError_t e, const char* what) {
  if (e == gpuErrorNotReady) {
    (void)gpuGetLastError();
    return 0;
  }
  check(e, what);
  return 1;
}

// ---- streams

ts_status stream_create_cb(void*, int32_t index, int32_t priority, ts_stream* out) {
  return sdk::device_call("stream_create", [&] {
    require_index(index);
    require_out(out);
    DeviceGuard guard(index);
    int least = 0, greatest = 0;
    check(gpuDeviceGetStreamPriorityRange(&least, &greatest), "reading the device's stream priority range");
    // Lower numbers are more urgent (greatest <= least, e.g. -5 .. 0): clamp into the range.
    int p = std::clamp(int(priority), std::min(least, greatest), std::max(least, greatest));
    auto handle = std::make_unique<Stream>(Stream{index, nullptr, p});
    check(gpuStreamCreateWithPriority(&handle->stream, gpuStreamNonBlocking, p), "creating a stream");
    *out = reinterpret_cast<ts_stream>(handle.release());
  });
}

void stream_destroy_cb(void*, int32_t, ts_stream stream) {
  if (!stream) return;  // the default stream lives as long as the process
  std::unique_ptr<Stream> s(reinterpret_cast<Stream*>(stream));
  auto& current = current_streams();  // the host never destroys a current stream; be safe anyway
  std::replace(current.begin(), current.end(), s->stream, gpuStream_t(nullptr));
  int previous = 0;
  (void)gpuGetDevice(&previous);
  (void)gpuSetDevice(s->device);
  // Its work finishes first: the allocator pools blocks by stream handle, and a new stream that
  // reused this handle must not get blocks still in use here. Blocks recorded on it (record_stream)
  // then need not wait for it, and must not record events on a dead stream when freed.
  (void)gpuStreamSynchronize(s->stream);
  allocator().forget_stream(reinterpret_cast<uintptr_t>(s->stream));
  (void)gpuStreamDestroy(s->stream);
  (void)gpuSetDevice(previous);
  (void)gpuGetLastError();  // nothing to report from a void function: leave no stale error
}

ts_status set_current_stream_cb(void*, int32_t index, ts_stream stream) {
  return sdk::device_call("set_current_stream", [&] {
    require_index(index);
    gpuStream_t s = stream ? resolve(index, stream) : nullptr;
    auto& current = current_streams();
    if (current.size() <= size_t(index)) current.resize(size_t(index) + 1, nullptr);
    current[size_t(index)] = s;
  });
}

ts_status stream_synchronize_cb(void*, int32_t index, ts_stream stream) {
  return sdk::device_call("stream_synchronize", [&] {
    require_index(index);
    gpuStream_t s = resolve(index, stream);
    DeviceGuard guard(index);
    check(gpuStreamSynchronize(s), "synchronizing the stream");
  });
}

ts_status stream_query_cb(void*, int32_t index, ts_stream stream, int32_t* done) {
  return sdk::device_call("stream_query", [&] {
    require_index(index);
    require_out(done);
    gpuStream_t s = resolve(index, stream);
    DeviceGuard guard(index);
    *done = done_or_raise(gpuStreamQuery(s), "querying the stream");
  });
}

ts_status stream_wait_event_cb(void*, int32_t index, ts_stream stream, ts_event event) {
  return sdk::device_call("stream_wait_event", [&] {
    require_index(index);
    gpuStream_t s = resolve(index, stream);
    Event& e = event_of(event);
    if (!e.recorded) return;  // as in PyTorch: nothing to wait for
    DeviceGuard guard(index);  // the event may be another device's: CUDA allows waiting across devices
    check(gpuStreamWaitEvent(s, e.event, 0), "making the stream wait for the event");
  });
}

// ---- events

ts_status event_create_cb(void*, int32_t index, int32_t flags, ts_event* out) {
  return sdk::device_call("event_create", [&] {
    require_index(index);
    require_out(out);
    TS_SDK_CHECK((flags & ~int32_t(TS_EVENT_TIMING)) == 0, TS_ERROR_VALUE,
                 "expected flags TS_EVENT_DEFAULT (0) or TS_EVENT_TIMING (1), got ", flags);
    DeviceGuard guard(index);
    auto handle = std::make_unique<Event>();
    handle->device = index;
    handle->flags = flags;
    // Timing costs on every record and synchronize: only when asked for, as in PyTorch.
    check(gpuEventCreateWithFlags(&handle->event, (flags & TS_EVENT_TIMING) ? gpuEventDefault : gpuEventDisableTiming),
          "creating an event");
    *out = reinterpret_cast<ts_event>(handle.release());
  });
}

void event_destroy_cb(void*, int32_t, ts_event event) {
  if (!event) return;
  std::unique_ptr<Event> e(reinterpret_cast<Event*>(event));
  int previous = 0;
  (void)gpuGetDevice(&previous);
  (void)gpuSetDevice(e->device);
  (void)gpuEventDestroy(e->event);  // safe while recorded work runs: resources go when it completes
  (void)gpuSetDevice(previous);
  (void)gpuGetLastError();
}

ts_status event_record_cb(void*, int32_t index, ts_event event, ts_stream stream) {
  return sdk::device_call("event_record", [&] {
    require_index(index);
    Event& e = event_of(event);
    gpuStream_t s = resolve(index, stream);
    TS_SDK_CHECK(e.device == index, TS_ERROR_VALUE, "expected a stream of ", kName, ":", e.device,
                 " (the event's device), got a stream of ", kName, ":", index);
    DeviceGuard guard(index);
    check(gpuEventRecord(e.event, s), "recording the event");
    e.recorded = true;
  });
}

ts_status event_synchronize_cb(void*, int32_t index, ts_event event) {
  return sdk::device_call("event_synchronize", [&] {
    require_index(index);
    Event& e = event_of(event);
    if (!e.recorded) return;  // never recorded: nothing to wait for
    DeviceGuard guard(e.device);
    check(gpuEventSynchronize(e.event), "waiting for the event");
  });
}

ts_status event_query_cb(void*, int32_t index, ts_event event, int32_t* done) {
  return sdk::device_call("event_query", [&] {
    require_index(index);
    require_out(done);
    Event& e = event_of(event);
    if (!e.recorded) {
      *done = 1;
      return;
    }
    DeviceGuard guard(e.device);
    *done = done_or_raise(gpuEventQuery(e.event), "querying the event");
  });
}

ts_status event_elapsed_ms_cb(void*, int32_t index, ts_event start, ts_event end, double* ms) {
  return sdk::device_call("event_elapsed_ms", [&] {
    require_index(index);
    require_out(ms);
    Event& a = event_of(start);
    Event& b = event_of(end);
    for (const Event* e : {&a, &b}) {
      const char* which = e == &a ? "start" : "end";
      TS_SDK_CHECK(e->flags & TS_EVENT_TIMING, TS_ERROR_VALUE,
                   "expected both events created with timing (TS_EVENT_TIMING, enable_timing=True), but the ", which,
                   " event was created without timing");
      TS_SDK_CHECK(e->recorded, TS_ERROR_VALUE, "expected both events recorded, but the ", which,
                   " event was never recorded");
    }
    TS_SDK_CHECK(a.device == b.device, TS_ERROR_VALUE, "expected both events on the same device, got ", kName, ":",
                 a.device, " and ", kName, ":", b.device);
    DeviceGuard guard(a.device);
    float f = 0;
    gpuError_t e = gpuEventElapsedTime(&f, a.event, b.event);
    if (e == gpuErrorNotReady) {
      (void)gpuGetLastError();
      sdk::fail(TS_ERROR, "expected both events completed, but the work before one of them is still running "
                          "(synchronize the end event first)");
    }
    check(e, "measuring the time between the events");
    *ms = double(f);
  });
}

// ---- memory

ts_status record_stream_cb(void*, int32_t index, void* ptr, ts_stream stream) {
  return sdk::device_call("record_stream", [&] {
    require_index(index);
    gpuStream_t s = resolve(index, stream);
    TS_SDK_CHECK(allocator().record_stream(ptr, reinterpret_cast<uintptr_t>(s)), TS_ERROR_VALUE,
                 "expected a block in use from the ", kName, " caching allocator, got ", ptr,
                 " (not allocated by it, or freed already)");
  });
}

// Page-locked blocks from host_allocate and the async copies using them (pinned_blocks.h).
bool pinned_event_done(void*, int32_t, void* event) { return pooled_event_done(static_cast<gpuEvent_t>(event)); }
void pinned_event_release(void*, int32_t device, void* event) {
  release_pooled_event(device, static_cast<gpuEvent_t>(event));
}
void pinned_free_host(void*, void* ptr) {
  if (gpuFreeHost(ptr) != gpuSuccess) (void)gpuGetLastError();
}
PinnedBlocks& pinned_blocks() {
  static PinnedBlocks* p = new PinnedBlocks(PinnedEvents{pinned_event_done, pinned_event_release, pinned_free_host});
  return *p;
}

void* host_allocate_cb(void*, size_t nbytes) {
  void* ptr = nullptr;
  sdk::device_call("host_allocate", [&] {
    require_device(nullptr);
    PinnedBlocks& p = pinned_blocks();
    std::lock_guard lock(p.mutex);
    p.collect();
    // Portable: page-locked for every device, not just the current one. 0 bytes get 1, so every
    // pinned tensor has a distinct non-null pointer (cudaHostAlloc of 0 gives none).
    check(gpuHostAlloc(&ptr, std::max<size_t>(nbytes, 1), gpuHostAllocPortable),
          sdk::cat("allocating ", nbytes, " bytes of page-locked host memory").c_str());
    p.add(ptr, std::max<size_t>(nbytes, 1));
  });
  return ptr;
}

void host_deallocate_cb(void*, void* ptr, size_t) {
  if (!ptr) return;
  PinnedBlocks& p = pinned_blocks();
  std::lock_guard lock(p.mutex);
  (void)p.free(ptr);  // now, or once the copies using it are done; not ours: nothing to free
}

// The runtime's stream behind a handle (ABI 1.7), for NCCL: NULL on any failure.
void* native_stream_cb(void*, int32_t index, ts_stream stream) {
  try {
    return reinterpret_cast<void*>(resolve(index, stream));
  } catch (...) {
    return nullptr;
  }
}

// copy_to_host_async / copy_from_host_async: the host passes memory from host_allocate.
ts_status copy_to_host_async_cb(void*, int32_t index, void* dst, const void* src, size_t nbytes) {
  return sdk::device_call("copy_to_host_async", [&] {
    require_index(index);
    copy_host(index, dst, src, nbytes, gpuMemcpyDeviceToHost, true, "copying to the host");
  });
}
ts_status copy_from_host_async_cb(void*, int32_t index, void* dst, const void* src, size_t nbytes) {
  return sdk::device_call("copy_from_host_async", [&] {
    require_index(index);
    copy_host(index, dst, src, nbytes, gpuMemcpyHostToDevice, true, "copying from the host");
  });
}

}  // namespace

gpuStream_t default_stream(int32_t index) {
  DefaultStreams& s = default_streams();
  std::lock_guard lock(s.mutex);
  if (s.per_device.size() <= size_t(index)) s.per_device.resize(size_t(index) + 1, nullptr);
  gpuStream_t& st = s.per_device[size_t(index)];
  if (!st) {
    int previous = 0;
    (void)gpuGetDevice(&previous);
    check(gpuSetDevice(index), "selecting the device");
    gpuError_t e = gpuStreamCreateWithFlags(&st, gpuStreamNonBlocking);
    (void)gpuSetDevice(previous);
    check(e, "creating the device's stream");
  }
  return st;
}

gpuStream_t stream_for(int32_t index) {
  const auto& current = current_streams();
  if (size_t(index) < current.size() && current[size_t(index)]) return current[size_t(index)];
  return default_stream(index);
}

bool is_pinned_host(const void* ptr) {
  if (!ptr || runtime().device_count == 0) return false;
  gpuPointerAttributes attr{};
  // Some runtimes (HIP, CUDA before 11) fail on pageable memory instead of saying so.
  if (gpuPointerGetAttributes(&attr, ptr) != gpuSuccess) {
    (void)gpuGetLastError();
    return false;
  }
  return GPU_POINTER_MEMORY_TYPE(attr) == gpuMemoryTypeHost;
}

void copy_host(int32_t index, void* dst, const void* src, size_t nbytes, decltype(gpuMemcpyHostToDevice) kind,
               bool non_blocking, const char* what) {
  if (!nbytes) return;
  const auto host = reinterpret_cast<uintptr_t>(kind == gpuMemcpyHostToDevice ? src : dst);
  DeviceGuard guard(index);
  gpuStream_t s = stream_for(index);
  if (non_blocking) {
    PinnedBlocks& p = pinned_blocks();
    std::lock_guard lock(p.mutex);
    if (p.holds(reinterpret_cast<const void*>(host), nbytes)) {
      check(gpuMemcpyAsync(dst, src, nbytes, kind, s), what);
      try {  // the block stays allocated until the copy is done
        p.add_use(reinterpret_cast<const void*>(host), index, record_pooled_event(index, s));
      } catch (const std::exception&) {
        check(gpuStreamSynchronize(s), what);  // cannot mark it: wait instead
      }
      return;
    }
  }
  check(gpuMemcpyAsync(dst, src, nbytes, kind, s), what);
  // Page-locked memory not from host_allocate (cudaHostRegister, say) is the caller's to keep.
  if (non_blocking && is_pinned_host(reinterpret_cast<const void*>(host))) return;
  check(gpuStreamSynchronize(s), what);
}

void add_stream_functions(ts_device_desc& d) {
  d.stream_create = stream_create_cb;
  d.stream_destroy = stream_destroy_cb;
  d.set_current_stream = set_current_stream_cb;
  d.stream_synchronize = stream_synchronize_cb;
  d.stream_query = stream_query_cb;
  d.stream_wait_event = stream_wait_event_cb;
  d.event_create = event_create_cb;
  d.event_destroy = event_destroy_cb;
  d.event_record = event_record_cb;
  d.event_synchronize = event_synchronize_cb;
  d.event_query = event_query_cb;
  d.event_elapsed_ms = event_elapsed_ms_cb;
  d.record_stream = record_stream_cb;
  d.host_allocate = host_allocate_cb;
  d.host_deallocate = host_deallocate_cb;
  d.copy_to_host_async = copy_to_host_async_cb;
  d.copy_from_host_async = copy_from_host_async_cb;
  d.native_stream = native_stream_cb;
}

}  // namespace tessera::gpu

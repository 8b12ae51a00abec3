// Streams, events and page-locked host memory of the simulated device (ABI 1.3).
//
// Kernels compute their results at once, on the calling thread, but every stream keeps a
// simulated clock: the time at which its queued work would be done. Each kernel moves the
// current stream's clock on by a simulated duration (the custom op <device>::set_kernel_time_us,
// 0 by default), so queries, waits and event timings behave as on an asynchronous device,
// deterministically and without threads. Blocking copies to the host wait for the clock.
#include "simdev.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>

namespace simdev {

namespace {
using Clock = std::chrono::steady_clock;

struct Stream {
  int32_t index;
  int32_t priority;
  Clock::time_point busy_until;  // when the work queued so far is done
};

struct Event {
  int32_t index;
  bool timing;
  bool recorded = false;
  Clock::time_point done_at;  // when the work it marks is done
};

struct Streams {
  std::mutex mutex;
  std::array<Stream, kDeviceCount> defaults{};
  std::set<Stream*> created;
  std::set<Event*> events;
  std::map<const void*, size_t> pinned;  // page-locked host blocks: start -> size
  std::chrono::microseconds kernel_time{0};
};
Streams& streams() {
  static Streams* s = [] {
    auto* all = new Streams;  // never destroyed: the host may free streams at exit
    for (int32_t i = 0; i < kDeviceCount; ++i) all->defaults[size_t(i)].index = i;
    return all;
  }();
  return *s;
}

// The calling thread's current stream per device index (nullptr: the default stream).
thread_local std::array<Stream*, kDeviceCount> current{};

void check_index(int32_t index) {
  TS_SDK_CHECK(index >= 0 && index < kDeviceCount, TS_ERROR_INDEX, SIMDEV_NAME, ": device index ", index,
               " out of range, this device has ", kDeviceCount);
}

// The stream a handle names on device `index` (NULL: its default stream). Caller holds the mutex.
Stream& stream_of(int32_t index, ts_stream handle) {
  check_index(index);
  if (!handle) return streams().defaults[size_t(index)];
  auto* s = reinterpret_cast<Stream*>(handle);
  TS_SDK_CHECK(streams().created.count(s), TS_ERROR_VALUE, "unknown stream handle ", static_cast<void*>(handle),
               " (destroyed, or not one of ", SIMDEV_NAME, "'s)");
  TS_SDK_CHECK(s->index == index, TS_ERROR_VALUE, "the stream belongs to ", SIMDEV_NAME, ":", s->index,
               ", not to ", SIMDEV_NAME, ":", index);
  return *s;
}

Event& event_of(int32_t index, ts_event handle) {
  check_index(index);
  auto* e = reinterpret_cast<Event*>(handle);
  TS_SDK_CHECK(e && streams().events.count(e), TS_ERROR_VALUE, "unknown event handle ",
               static_cast<void*>(handle), " (destroyed, or not one of ", SIMDEV_NAME, "'s)");
  return *e;
}

void sleep_until(Clock::time_point t) {
  if (t > Clock::now()) std::this_thread::sleep_until(t);
}

ts_status stream_create(void*, int32_t index, int32_t priority, ts_stream* out) {
  return sdk::device_call("stream_create", [&] {
    check_index(index);
    TS_SDK_CHECK(out, TS_ERROR_VALUE, "null output pointer");
    auto* s = new Stream{index, priority, Clock::now()};
    std::lock_guard lock(streams().mutex);
    streams().created.insert(s);
    *out = reinterpret_cast<ts_stream>(s);
  });
}

void stream_destroy(void*, int32_t, ts_stream handle) {
  auto* s = reinterpret_cast<Stream*>(handle);
  std::lock_guard lock(streams().mutex);
  if (streams().created.erase(s)) delete s;
}

ts_status set_current_stream(void*, int32_t index, ts_stream handle) {
  return sdk::device_call("set_current_stream", [&] {
    std::lock_guard lock(streams().mutex);
    Stream& s = stream_of(index, handle);
    current[size_t(index)] = handle ? &s : nullptr;
  });
}

ts_status stream_synchronize(void*, int32_t index, ts_stream handle) {
  return sdk::device_call("stream_synchronize", [&] {
    Clock::time_point until;
    {
      std::lock_guard lock(streams().mutex);
      until = stream_of(index, handle).busy_until;
    }
    sleep_until(until);
  });
}

ts_status stream_query(void*, int32_t index, ts_stream handle, int32_t* done) {
  return sdk::device_call("stream_query", [&] {
    std::lock_guard lock(streams().mutex);
    *done = stream_of(index, handle).busy_until <= Clock::now();
  });
}

ts_status stream_wait_event(void*, int32_t index, ts_stream handle, ts_event event) {
  return sdk::device_call("stream_wait_event", [&] {
    std::lock_guard lock(streams().mutex);
    Stream& s = stream_of(index, handle);
    const Event& e = event_of(index, event);
    if (e.recorded) s.busy_until = std::max(s.busy_until, e.done_at);
  });
}

ts_status event_create(void*, int32_t index, int32_t flags, ts_event* out) {
  return sdk::device_call("event_create", [&] {
    check_index(index);
    TS_SDK_CHECK(out, TS_ERROR_VALUE, "null output pointer");
    auto* e = new Event{index, (flags & TS_EVENT_TIMING) != 0};
    std::lock_guard lock(streams().mutex);
    streams().events.insert(e);
    *out = reinterpret_cast<ts_event>(e);
  });
}

void event_destroy(void*, int32_t, ts_event handle) {
  auto* e = reinterpret_cast<Event*>(handle);
  std::lock_guard lock(streams().mutex);
  if (streams().events.erase(e)) delete e;
}

ts_status event_record(void*, int32_t index, ts_event event, ts_stream stream) {
  return sdk::device_call("event_record", [&] {
    std::lock_guard lock(streams().mutex);
    Event& e = event_of(index, event);
    TS_SDK_CHECK(e.index == index, TS_ERROR_VALUE, "the event belongs to ", SIMDEV_NAME, ":", e.index);
    e.done_at = std::max(Clock::now(), stream_of(index, stream).busy_until);
    e.recorded = true;
  });
}

ts_status event_synchronize(void*, int32_t index, ts_event event) {
  return sdk::device_call("event_synchronize", [&] {
    Clock::time_point until;
    {
      std::lock_guard lock(streams().mutex);
      const Event& e = event_of(index, event);
      until = e.recorded ? e.done_at : Clock::now();
    }
    sleep_until(until);
  });
}

ts_status event_query(void*, int32_t index, ts_event event, int32_t* done) {
  return sdk::device_call("event_query", [&] {
    std::lock_guard lock(streams().mutex);
    const Event& e = event_of(index, event);
    *done = !e.recorded || e.done_at <= Clock::now();
  });
}

ts_status event_elapsed_ms(void*, int32_t index, ts_event start, ts_event end, double* ms) {
  return sdk::device_call("event_elapsed_ms", [&] {
    std::lock_guard lock(streams().mutex);
    const Event& a = event_of(index, start);
    const Event& b = event_of(index, end);
    TS_SDK_CHECK(a.timing && b.timing, TS_ERROR_VALUE, "both events must be created with timing, got ",
                 a.timing ? "" : "a start event without it", a.timing || b.timing ? "" : " and ",
                 b.timing ? "" : "an end event without it");
    TS_SDK_CHECK(a.recorded && b.recorded, TS_ERROR_VALUE, "both events must be recorded");
    Clock::time_point now = Clock::now();
    TS_SDK_CHECK(a.done_at <= now && b.done_at <= now, TS_ERROR_VALUE,
                 "the events have not completed yet (synchronize the end event first)");
    *ms = std::chrono::duration<double, std::milli>(b.done_at - a.done_at).count();
  });
}

ts_status record_stream(void*, int32_t index, void* ptr, ts_stream stream) {
  return sdk::device_call("record_stream", [&] {
    arena(index).map(ptr, 0);  // the host must hand back a pointer it got from allocate
    std::lock_guard lock(streams().mutex);
    stream_of(index, stream);  // the arena is not stream-ordered: checking the stream is all there is
  });
}

void* host_allocate(void*, size_t nbytes) {
  void* p = std::malloc(nbytes ? nbytes : 1);
  if (!p) {
    sdk::host().set_error(nullptr, sdk::cat("host_allocate: out of host memory for ", nbytes, " bytes").c_str());
    return nullptr;
  }
  std::lock_guard lock(streams().mutex);
  streams().pinned[p] = nbytes;
  return p;
}

void host_deallocate(void*, void* ptr, size_t) {
  {
    std::lock_guard lock(streams().mutex);
    if (!streams().pinned.erase(ptr)) return;
  }
  std::free(ptr);
}

// The host may give an asynchronous copy only page-locked memory: say so loudly otherwise.
void check_pinned(const char* what, const void* host, size_t nbytes) {
  std::lock_guard lock(streams().mutex);
  auto& pinned = streams().pinned;
  auto it = pinned.upper_bound(host);
  bool inside = it != pinned.begin() && [&] {
    --it;
    auto start = static_cast<const char*>(it->first);
    return static_cast<const char*>(host) + nbytes <= start + std::max<size_t>(it->second, 1);
  }();
  TS_SDK_CHECK(inside, TS_ERROR_VALUE, what, ": host memory ", host, " (", nbytes,
               " bytes) is not inside a block from host_allocate");
}

ts_status copy_to_host_async(void*, int32_t index, void* host_dst, const void* src, size_t nbytes) {
  return sdk::device_call("copy_to_host_async", [&] {
    check_pinned("copy_to_host_async", host_dst, nbytes);
    if (nbytes) std::memcpy(host_dst, arena(index).map(src, nbytes), nbytes);
    note_kernel(index);
  });
}

ts_status copy_from_host_async(void*, int32_t index, void* dst, const void* host_src, size_t nbytes) {
  return sdk::device_call("copy_from_host_async", [&] {
    check_pinned("copy_from_host_async", host_src, nbytes);
    if (nbytes) std::memcpy(arena(index).map(dst, nbytes), host_src, nbytes);
    note_kernel(index);
  });
}

// <device>::set_kernel_time_us(int us) -> int: the simulated time of each kernel from now on;
// returns the previous one.
void set_kernel_time_us(sdk::Args& a) {
  int64_t us = a.to_int(0);
  TS_SDK_CHECK(us >= 0, TS_ERROR_VALUE, SIMDEV_NAME "::set_kernel_time_us: expected a time >= 0, got ", us);
  std::lock_guard lock(streams().mutex);
  int64_t previous = std::exchange(streams().kernel_time, std::chrono::microseconds(us)).count();
  a.returns({sdk::value(previous)});
}
}  // namespace

void note_kernel(int32_t index) {
  if (index < 0 || index >= kDeviceCount) return;
  std::lock_guard lock(streams().mutex);
  Stream* s = current[size_t(index)];
  Stream& stream = s ? *s : streams().defaults[size_t(index)];
  stream.busy_until = std::max(stream.busy_until, Clock::now()) + streams().kernel_time;
}

void wait_current_stream(int32_t index) {
  if (index < 0 || index >= kDeviceCount) return;
  Clock::time_point until;
  {
    std::lock_guard lock(streams().mutex);
    Stream* s = current[size_t(index)];
    until = (s ? *s : streams().defaults[size_t(index)]).busy_until;
  }
  sleep_until(until);
}

void wait_device(int32_t index) {
  Clock::time_point until;
  {
    std::lock_guard lock(streams().mutex);
    until = streams().defaults[size_t(index)].busy_until;
    for (const Stream* s : streams().created)
      if (s->index == index) until = std::max(until, s->busy_until);
  }
  sleep_until(until);
}

void add_stream_functions(ts_device_desc& desc) {
  desc.stream_create = stream_create;
  desc.stream_destroy = stream_destroy;
  desc.set_current_stream = set_current_stream;
  desc.stream_synchronize = stream_synchronize;
  desc.stream_query = stream_query;
  desc.stream_wait_event = stream_wait_event;
  desc.event_create = event_create;
  desc.event_destroy = event_destroy;
  desc.event_record = event_record;
  desc.event_synchronize = event_synchronize;
  desc.event_query = event_query;
  desc.event_elapsed_ms = event_elapsed_ms;
  desc.record_stream = record_stream;
  desc.host_allocate = host_allocate;
  desc.host_deallocate = host_deallocate;
  desc.copy_to_host_async = copy_to_host_async;
  desc.copy_from_host_async = copy_from_host_async;
}

void register_stream_ops(Registrar& reg) {
  reg.def(SIMDEV_NAME "::set_kernel_time_us(int us) -> int");
  reg.untimed_kernel(SIMDEV_NAME "::set_kernel_time_us", TS_KEY_CATCH_ALL, set_kernel_time_us);
}

}  // namespace simdev

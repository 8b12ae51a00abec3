// Streams, events, pinned memory and non-blocking copies (ABI 1.3), host side: the CPU (a device
// without streams), and a test device whose stream functions log what the host asks of them.
#include "test_util.h"

#include <tessera/device_registry.h>
#include <tessera/stream.h>

#include <chrono>
#include <cstring>
#include <map>
#include <set>
#include <thread>

using namespace tessera;
using tessera::testing::expect_error;

namespace {

// ---- a device whose memory is host memory and whose streams are counters
struct Log {
  std::vector<std::string> calls;
  std::set<void*> live_streams, live_events, pinned;
  std::map<void*, int> recorded_events;
  int next_id = 1;
  int clock = 0;
  bool fail_queries = false;
  ts_stream current = nullptr;
  void* last_recorded_ptr = nullptr;
};
Log& log() {
  static Log l;
  return l;
}
const ts_host_api* g_host = nullptr;

void* new_id() { return reinterpret_cast<void*>(uintptr_t(log().next_id++) << 4); }

ts_device_desc streamdev_desc(const char* name, bool with_streams) {
  ts_device_desc d{};
  d.struct_size = with_streams ? sizeof d : offsetof(ts_device_desc, stream_create);  // a 1.2 plugin's size
  d.name = name;
  d.host_accessible = 1;
  d.device_count = [](void*) { return int32_t(2); };
  d.allocate = [](void*, int32_t, size_t n) { return std::malloc(n ? n : 1); };
  d.deallocate = [](void*, int32_t, void* p, size_t) { std::free(p); };
  auto copy = [](void*, int32_t, void* dst, const void* src, size_t n) -> ts_status {
    log().calls.push_back("copy");
    std::memmove(dst, src, n);
    return TS_OK;
  };
  d.copy_to_host = copy;
  d.copy_from_host = copy;
  d.copy_within = copy;
  // Filled even for the 1.2 device: the host must not read past struct_size.
  d.stream_create = [](void*, int32_t index, int32_t priority, ts_stream* out) -> ts_status {
    *out = static_cast<ts_stream>(new_id());
    log().live_streams.insert(*out);
    log().calls.push_back("stream_create " + std::to_string(index) + " " + std::to_string(priority));
    return TS_OK;
  };
  d.stream_destroy = [](void*, int32_t, ts_stream s) {
    log().live_streams.erase(s);
    log().calls.push_back("stream_destroy");
  };
  d.set_current_stream = [](void*, int32_t, ts_stream s) -> ts_status {
    log().current = s;
    log().calls.push_back(s ? "set_current" : "set_current default");
    return TS_OK;
  };
  d.stream_synchronize = [](void*, int32_t, ts_stream) -> ts_status { return TS_OK; };
  d.stream_query = [](void*, int32_t, ts_stream, int32_t* done) -> ts_status {
    if (log().fail_queries) {
      g_host->set_error(nullptr, "stream_query: the queue exploded");
      return TS_ERROR_VALUE;
    }
    *done = 1;
    return TS_OK;
  };
  d.stream_wait_event = [](void*, int32_t, ts_stream, ts_event) -> ts_status {
    log().calls.push_back("wait_event");
    return TS_OK;
  };
  d.event_create = [](void*, int32_t, int32_t flags, ts_event* out) -> ts_status {
    *out = static_cast<ts_event>(new_id());
    log().live_events.insert(*out);
    log().calls.push_back("event_create " + std::to_string(flags));
    return TS_OK;
  };
  d.event_destroy = [](void*, int32_t, ts_event e) { log().live_events.erase(e); };
  d.event_record = [](void*, int32_t, ts_event e, ts_stream) -> ts_status {
    log().recorded_events[e] = log().clock++;  // a logical time
    return TS_OK;
  };
  d.event_synchronize = [](void*, int32_t, ts_event) -> ts_status { return TS_OK; };
  d.event_query = [](void*, int32_t, ts_event, int32_t* done) -> ts_status {
    *done = 1;
    return TS_OK;
  };
  d.event_elapsed_ms = [](void*, int32_t, ts_event a, ts_event b, double* ms) -> ts_status {
    *ms = double(log().recorded_events[b] - log().recorded_events[a]);
    return TS_OK;
  };
  d.record_stream = [](void*, int32_t, void* ptr, ts_stream) -> ts_status {
    log().last_recorded_ptr = ptr;
    return TS_OK;
  };
  d.host_allocate = [](void*, size_t n) {
    void* p = std::malloc(n ? n : 1);
    log().pinned.insert(p);
    return p;
  };
  d.host_deallocate = [](void*, void* p, size_t) {
    log().pinned.erase(p);
    std::free(p);
  };
  d.copy_to_host_async = [](void*, int32_t, void* dst, const void* src, size_t n) -> ts_status {
    log().calls.push_back("copy_to_host_async");
    std::memmove(dst, src, n);
    return TS_OK;
  };
  d.copy_from_host_async = [](void*, int32_t, void* dst, const void* src, size_t n) -> ts_status {
    log().calls.push_back("copy_from_host_async");
    std::memmove(dst, src, n);
    return TS_OK;
  };
  return d;
}

template <bool WithStreams>
ts_status streamdev_init(const ts_host_api* host, ts_registrar reg, ts_plugin_info* info) {
  g_host = host;
  info->name = WithStreams ? "streamdev" : "oldstreamdev";
  info->version = "0";
  info->abi_major = TESSERA_ABI_MAJOR;
  info->abi_minor = WithStreams ? TESSERA_ABI_MINOR : 2;
  info->min_host_abi_minor = 0;
  static ts_device_desc desc = streamdev_desc(info->name, WithStreams);
  ts_dispatch_key key = -1;
  return host->register_device(reg, &desc, &key);
}

Device streamdev(int index = 0) {
  static bool loaded = [] {
    init();
    load_plugin_from_entry(streamdev_init<true>, "<test>/streamdev");
    load_plugin_from_entry(streamdev_init<false>, "<test>/oldstreamdev");
    return true;
  }();
  (void)loaded;
  return Device(DeviceRegistry::instance().type_id("streamdev"), index);
}

bool called(const std::string& what) {
  auto& c = log().calls;
  return std::find(c.begin(), c.end(), what) != c.end();
}

}  // namespace

TEST(Streams, CpuHasOnlyItsDefaultStreamAndHostClockEvents) {
  init();
  Device cpu;
  Stream s = Stream::create(cpu, -1);
  EXPECT_TRUE(s.is_default());
  EXPECT_EQ(s, Stream::current(cpu));
  EXPECT_TRUE(s.query());
  s.synchronize();
  Event start(true), end(true);
  start.record(s);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  end.record(s);
  EXPECT_TRUE(end.query());
  double ms = start.elapsed_time(end);
  EXPECT_GE(ms, 15.0);
  EXPECT_LT(ms, 5000.0);
  expect_error<NotImplementedError>([] { pin_memory(tensor_from_values(std::vector<double>{1, 2}, {2}, kFloat32), "cpu"); },
                                    {"pin_memory", "device 'cpu'", "no page-locked host memory"});
}

TEST(Streams, CurrentStreamIsKeptAliveAndTheDeviceIsTold) {
  Device dev = streamdev();
  log().calls.clear();
  {
    StreamGuard guard(Stream::create(dev, 3));  // the only Stream object is the guard's argument
    EXPECT_TRUE(called("stream_create 0 3"));
    EXPECT_TRUE(called("set_current"));
    Stream current = Stream::current(dev);
    EXPECT_FALSE(current.is_default());
    EXPECT_EQ(current.priority(), 3);
    EXPECT_EQ(static_cast<void*>(current.handle()), static_cast<void*>(log().current));
    EXPECT_EQ(log().live_streams.size(), 1u);  // alive while current
    EXPECT_TRUE(Stream::current(streamdev(1)).is_default());  // per device index
  }
  EXPECT_TRUE(called("set_current default"));
  EXPECT_EQ(log().current, nullptr);
  EXPECT_TRUE(log().live_streams.empty());  // destroyed once nobody holds it
  EXPECT_TRUE(Stream::current(dev).is_default());
}

TEST(Streams, CurrentStreamIsPerThread) {
  Device dev = streamdev();
  Stream s = Stream::create(dev);
  StreamGuard guard(s);
  Stream seen_elsewhere(dev);
  std::thread([&] { seen_elsewhere = Stream::current(dev); }).join();
  EXPECT_TRUE(seen_elsewhere.is_default());
  EXPECT_EQ(Stream::current(dev), s);
}

TEST(Streams, EventsAreMadeAtTheFirstRecordAndTimed) {
  Device dev = streamdev();
  log().calls.clear();
  Stream s = Stream::create(dev);
  Event start(true), end(true), plain;
  EXPECT_TRUE(start.query());  // never recorded
  EXPECT_FALSE(start.recorded());
  EXPECT_TRUE(log().live_events.empty());
  start.record(s);
  end.record(s);
  EXPECT_TRUE(called("event_create 1"));
  EXPECT_EQ(start.device(), dev);
  EXPECT_DOUBLE_EQ(start.elapsed_time(end), 1.0);  // the test device's logical clock
  Stream other = Stream::create(dev);
  other.wait(end);
  EXPECT_TRUE(called("wait_event"));
  plain.record(s);
  expect_error<ValueError>([&] { plain.elapsed_time(end); }, {"elapsed_time", "enable_timing=True"});
  expect_error<RuntimeError>([&] { Event(true).elapsed_time(end); }, {"elapsed_time", "must be recorded"});
  expect_error<ValueError>([&] { start.record(Stream::create(streamdev(1))); },
                           {"Event.record", "belongs to streamdev:0", "streamdev:1"});
  expect_error<ValueError>([] { Event().device(); }, {"Event.device", "not been recorded"});
}

TEST(Streams, DeviceFunctionErrorsCarryThePluginsMessage) {
  Device dev = streamdev();
  Stream s = Stream::create(dev);
  log().fail_queries = true;
  expect_error<ValueError>([&] { s.query(); },
                           {"streamdev:0", "stream_query failed", "the queue exploded", "plugin 'streamdev'"});
  log().fail_queries = false;
  EXPECT_TRUE(s.query());
  EXPECT_TRUE(device_function_error().empty());  // taken by the error, not left for the next one
}

TEST(Streams, OlderPluginsWithoutStreamsAreSynchronous) {
  streamdev();
  Device old(DeviceRegistry::instance().type_id("oldstreamdev"), 0);
  log().calls.clear();
  Stream s = Stream::create(old);
  EXPECT_TRUE(s.is_default());
  StreamGuard guard(s);
  EXPECT_TRUE(s.query());
  Event e(true);
  e.record(s);
  EXPECT_TRUE(e.query());
  EXPECT_TRUE(log().calls.empty()) << "the host called a 1.3 function of a 1.2 plugin: " << log().calls.front();
  expect_error<NotImplementedError>([] { pin_memory(tensor_from_values(std::vector<double>{1}, {1}, kFloat32), "oldstreamdev"); },
                                    {"no page-locked host memory"});
}

TEST(Streams, PinnedMemoryAndNonBlockingCopies) {
  Device dev = streamdev();
  Tensor host = tensor_from_values(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3}, kFloat32);
  EXPECT_FALSE(is_pinned(host));
  Tensor pinned = pin_memory(host, "streamdev");
  EXPECT_TRUE(is_pinned(pinned));
  EXPECT_TRUE(pinned.device().is_cpu());
  EXPECT_TRUE(log().pinned.count(pinned.impl()->storage()->data()));
  EXPECT_EQ(pinned.to_double_vector(), host.to_double_vector());
  EXPECT_TRUE(pin_memory(pinned, "streamdev").impl() == pinned.impl());  // already pinned: itself

  log().calls.clear();
  Tensor on_dev = to_device(pinned, dev, /*non_blocking=*/true);
  EXPECT_TRUE(called("copy_from_host_async"));
  log().calls.clear();
  to_device(host, dev, /*non_blocking=*/true);  // not pinned: the synchronous copy
  EXPECT_FALSE(called("copy_from_host_async"));
  log().calls.clear();
  Tensor back = to_device(on_dev, Device(), /*non_blocking=*/true);
  EXPECT_TRUE(called("copy_to_host_async"));
  EXPECT_TRUE(is_pinned(back));
  EXPECT_EQ(back.to_double_vector(), host.to_double_vector());
  Tensor blocking = to_device(on_dev, Device());
  EXPECT_FALSE(is_pinned(blocking));

  void* block = pinned.impl()->storage()->data();
  pinned = Tensor();
  back = Tensor();
  EXPECT_FALSE(log().pinned.count(block));  // freed through host_deallocate

  Stream s = Stream::create(dev);
  record_stream(on_dev, s);
  EXPECT_EQ(log().last_recorded_ptr, on_dev.impl()->storage()->data());
  expect_error<ValueError>([&] { record_stream(host, s); }, {"record_stream", "tensor is on cpu", "streamdev:0"});
}

TEST(Streams, PluginsPassTheCallersStreamToTheirOwnThreads) {
  Device dev = streamdev();
  const ts_host_api* api = host_api();
  ASSERT_TRUE(TS_STRUCT_HAS(api, ts_host_api, set_current_stream));
  Stream s = Stream::create(dev);
  StreamGuard guard(s);
  ts_stream handle = api->current_stream(dev.to_abi());
  EXPECT_EQ(handle, s.handle());
  Stream seen(dev);
  ts_status status = TS_ERROR;
  std::thread([&] {  // a plugin's worker thread takes over the caller's stream by handle
    status = api->set_current_stream(nullptr, dev.to_abi(), handle);
    seen = Stream::current(dev);
  }).join();
  EXPECT_EQ(status, TS_OK);
  EXPECT_EQ(seen, s);
  EXPECT_EQ(api->current_stream(streamdev(1).to_abi()), nullptr);  // another index: its default
  int bogus = 0;
  EXPECT_NE(api->set_current_stream(nullptr, dev.to_abi(), reinterpret_cast<ts_stream>(&bogus)), TS_OK);
  expect_error<ValueError>([&] { Stream::from_handle(streamdev(1), handle); }, {"no live stream", "streamdev:1"});
}

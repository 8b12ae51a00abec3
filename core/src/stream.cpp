#include <tessera/device_registry.h>
#include <tessera/error.h>
#include <tessera/stream.h>
#include <tessera/tensor.h>
#include <tessera/tensor_impl.h>

#include <map>
#include <mutex>
#include <utility>

namespace tessera {

namespace {
const DeviceTypeEntry& entry_of(Device device) {
  const DeviceTypeEntry& entry = DeviceRegistry::instance().require(device.type());
  check_device_index(entry, device.index());
  return entry;
}

bool has_streams(const DeviceTypeEntry& entry) { return entry.desc.stream_create != nullptr; }

// Each thread's current streams, by (device type, index). Holding them here keeps a stream
// alive while it is current, whatever happens to the Stream the user made current.
std::map<std::pair<int32_t, int32_t>, Stream>& current_streams() {
  thread_local std::map<std::pair<int32_t, int32_t>, Stream> streams;
  return streams;
}
}  // namespace

// ---------------------------------------------------------------------------------- Stream

struct Stream::Owned {
  const DeviceTypeEntry* entry;
  int32_t index;
  ts_stream handle;
  int32_t priority;
  ~Owned();
};

namespace {
// Every live stream the host created, by handle: plugins name streams by handle (from_handle).
struct LiveStreams {
  std::mutex mutex;
  std::map<ts_stream, std::weak_ptr<Stream::Owned>> by_handle;
};
LiveStreams& live_streams() {
  static LiveStreams* live = new LiveStreams;  // never destroyed: streams may die at exit
  return *live;
}
}  // namespace

Stream::Owned::~Owned() {
  {
    std::lock_guard lock(live_streams().mutex);
    live_streams().by_handle.erase(handle);
  }
  entry->desc.stream_destroy(entry->desc.device_data, index, handle);
}

Stream::Stream(Device device) : device_(device) { entry_of(device); }

Stream Stream::create(Device device, int32_t priority) {
  const DeviceTypeEntry& entry = entry_of(device);
  if (!has_streams(entry)) return Stream(device);
  ts_stream handle = nullptr;
  check_device_call(entry, device.index(), "stream_create",
                    entry.desc.stream_create(entry.desc.device_data, device.index(), priority, &handle));
  auto owned = std::shared_ptr<Owned>(new Owned{&entry, device.index(), handle, priority});  // no temporary Owned to destroy
  std::lock_guard lock(live_streams().mutex);
  live_streams().by_handle[handle] = owned;
  return Stream(device, std::move(owned));
}

Stream Stream::from_handle(Device device, ts_stream handle) {
  if (!handle) return Stream(device);
  std::shared_ptr<Owned> owned;
  {
    std::lock_guard lock(live_streams().mutex);
    if (auto it = live_streams().by_handle.find(handle); it != live_streams().by_handle.end()) owned = it->second.lock();
  }
  if (!owned || !(Device(owned->entry->type, owned->index) == device))
    raise<ValueError>("no live stream {} on {}", static_cast<void*>(handle), device.str());
  return Stream(device, std::move(owned));
}

Stream Stream::current(Device device) {
  auto& streams = current_streams();
  if (auto it = streams.find({device.type(), device.index()}); it != streams.end()) return it->second;
  return Stream(device);
}

Stream Stream::set_current(const Stream& stream) {
  Device device = stream.device_;
  const DeviceTypeEntry& entry = entry_of(device);
  Stream previous = current(device);
  if (has_streams(entry))
    check_device_call(entry, device.index(), "set_current_stream",
                      entry.desc.set_current_stream(entry.desc.device_data, device.index(), stream.handle()));
  if (stream.is_default()) current_streams().erase({device.type(), device.index()});
  else current_streams().insert_or_assign({device.type(), device.index()}, stream);
  return previous;
}

int32_t Stream::priority() const { return owned_ ? owned_->priority : 0; }

ts_stream Stream::handle() const { return owned_ ? owned_->handle : nullptr; }

void Stream::synchronize() const {
  const DeviceTypeEntry& entry = entry_of(device_);
  const ts_device_desc& d = entry.desc;
  if (has_streams(entry))
    check_device_call(entry, device_.index(), "stream_synchronize", d.stream_synchronize(d.device_data, device_.index(), handle()));
  else if (d.synchronize)
    check_device_call(entry, device_.index(), "synchronize", d.synchronize(d.device_data, device_.index()));
}

bool Stream::query() const {
  const DeviceTypeEntry& entry = entry_of(device_);
  if (!has_streams(entry)) return true;
  int32_t done = 0;
  check_device_call(entry, device_.index(), "stream_query",
                    entry.desc.stream_query(entry.desc.device_data, device_.index(), handle(), &done));
  return done != 0;
}

void Stream::wait(const Event& event) const {
  if (!event.recorded()) return;  // as in PyTorch: nothing to wait for
  const DeviceTypeEntry& entry = entry_of(device_);
  if (!has_streams(entry)) return;  // this device's work is synchronous: it never starts early
  if (event.device().type() != device_.type()) {
    event.synchronize();  // another device type's event: only the host can wait for it
    return;
  }
  check_device_call(entry, device_.index(), "stream_wait_event",
                    entry.desc.stream_wait_event(entry.desc.device_data, device_.index(), handle(), event.handle()));
}

void Stream::wait(const Stream& other) const {
  Event marker;
  marker.record(other);
  wait(marker);
}

// ---------------------------------------------------------------------------------- Event

struct Event::State {
  bool timing = false;
  bool recorded = false;
  Device device;
  const DeviceTypeEntry* entry = nullptr;
  ts_event handle = nullptr;
  std::chrono::steady_clock::time_point host_time;  // devices without streams
  ~State() {
    if (handle) entry->desc.event_destroy(entry->desc.device_data, device.index(), handle);
  }
};

Event::Event(bool enable_timing) : state_(std::make_shared<State>()) { state_->timing = enable_timing; }

void Event::record(const Stream& stream) {
  State& s = *state_;
  Device device = stream.device();
  if (s.recorded && !(s.device == device))
    raise<ValueError>("Event.record: the event belongs to {} and cannot be recorded on a stream of {}",
                      s.device.str(), device.str());
  const DeviceTypeEntry& entry = entry_of(device);
  const ts_device_desc& d = entry.desc;
  if (has_streams(entry)) {
    if (!s.handle) {
      check_device_call(entry, device.index(), "event_create",
                        d.event_create(d.device_data, device.index(), s.timing ? TS_EVENT_TIMING : TS_EVENT_DEFAULT, &s.handle));
      s.entry = &entry;
      s.device = device;
    }
    check_device_call(entry, device.index(), "event_record",
                      d.event_record(d.device_data, device.index(), s.handle, stream.handle()));
  } else {
    stream.synchronize();  // a device without streams may still finish asynchronously
    s.host_time = std::chrono::steady_clock::now();
  }
  s.entry = &entry;
  s.device = device;
  s.recorded = true;
}

bool Event::recorded() const { return state_->recorded; }
bool Event::enable_timing() const { return state_->timing; }
ts_event Event::handle() const { return state_->handle; }

Device Event::device() const {
  if (!state_->recorded) raise<ValueError>("Event.device: the event has not been recorded yet, so it has no device");
  return state_->device;
}

bool Event::query() const {
  const State& s = *state_;
  if (!s.handle) return true;  // never recorded, or recorded on a synchronous device
  int32_t done = 0;
  check_device_call(*s.entry, s.device.index(), "event_query",
                    s.entry->desc.event_query(s.entry->desc.device_data, s.device.index(), s.handle, &done));
  return done != 0;
}

void Event::synchronize() const {
  const State& s = *state_;
  if (!s.handle) return;
  check_device_call(*s.entry, s.device.index(), "event_synchronize",
                    s.entry->desc.event_synchronize(s.entry->desc.device_data, s.device.index(), s.handle));
}

double Event::elapsed_time(const Event& end) const {
  const State& a = *state_;
  const State& b = *end.state_;
  if (!a.timing || !b.timing)
    raise<ValueError>("Event.elapsed_time: both events must be created with enable_timing=True, got {} and {}",
                      a.timing, b.timing);
  if (!a.recorded || !b.recorded)
    raise<RuntimeError>("Event.elapsed_time: both events must be recorded before calculating elapsed time "
                        "(start recorded: {}, end recorded: {})", a.recorded, b.recorded);
  if (!(a.device == b.device))
    raise<ValueError>("Event.elapsed_time: the events were recorded on different devices, {} and {}", a.device.str(),
                      b.device.str());
  if (!a.handle) return std::chrono::duration<double, std::milli>(b.host_time - a.host_time).count();
  double ms = 0;
  check_device_call(*a.entry, a.device.index(), "event_elapsed_ms",
                    a.entry->desc.event_elapsed_ms(a.entry->desc.device_data, a.device.index(), a.handle, b.handle, &ms));
  return ms;
}

// ---------------------------------------------------------------------------------- devices and tensors

void synchronize(Device device) {
  const DeviceTypeEntry& entry = entry_of(device);
  if (entry.desc.synchronize)
    check_device_call(entry, device.index(), "synchronize", entry.desc.synchronize(entry.desc.device_data, device.index()));
}

void record_stream(const Tensor& t, const Stream& stream) {
  const Storage& storage = t.impl()->storage();
  if (!(storage->device() == stream.device()))
    raise<ValueError>("record_stream: the tensor is on {}, the stream on {}", storage->device().str(),
                      stream.device().str());
  const DeviceTypeEntry& entry = entry_of(stream.device());
  if (!entry.desc.record_stream || !storage->data()) return;
  check_device_call(entry, stream.device().index(), "record_stream",
                    entry.desc.record_stream(entry.desc.device_data, stream.device().index(), storage->data(),
                                             stream.handle()));
}

}  // namespace tessera

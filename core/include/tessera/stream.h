#pragma once
// Streams and events of a device (ABI 1.3). A stream is an ordered queue of work on one device;
// an event marks a point in a stream that other streams and the host can wait for or time.
// Each thread has a current stream per device (its default stream until set): the device's
// kernels and copies called from that thread queue their work there.
// A device whose plugin offers no streams (the CPU, plugins older than 1.3) has only its default
// stream; everything here is synchronous for it and its events carry the host clock.
#include <tessera/device.h>

#include <chrono>
#include <memory>

namespace tessera {

class Event;
class Tensor;

class Stream {
 public:
  // The default stream of `device`.
  explicit Stream(Device device);
  // A new stream (lower priority numbers are more urgent, as in CUDA; 0 is normal). On a
  // device without streams this is its default stream.
  static Stream create(Device device, int32_t priority = 0);
  // The calling thread's current stream of `device`.
  static Stream current(Device device);
  // Makes `stream` the calling thread's current stream of its device; returns the previous one.
  static Stream set_current(const Stream& stream);
  // The live stream of `device` with this handle (NULL: the default stream); ValueError if none.
  static Stream from_handle(Device device, ts_stream handle);

  Device device() const { return device_; }
  bool is_default() const { return !owned_; }
  int32_t priority() const;
  ts_stream handle() const;
  // Blocks until the work queued so far has finished.
  void synchronize() const;
  // True when all queued work has finished; does not block.
  bool query() const;
  // Work queued on this stream from now on starts after `event` completes.
  void wait(const Event& event) const;
  // Work queued on this stream from now on starts after the work queued on `other` so far.
  void wait(const Stream& other) const;
  bool operator==(const Stream& other) const { return device_ == other.device_ && handle() == other.handle(); }

  struct Owned;  // a stream the host created: destroyed with its last Stream (stream.cpp)

 private:
  Stream(Device device, std::shared_ptr<Owned> owned) : device_(device), owned_(std::move(owned)) {}
  Device device_;
  std::shared_ptr<Owned> owned_;
};

// Sets the calling thread's current stream of `stream`'s device for a scope.
class StreamGuard {
 public:
  explicit StreamGuard(const Stream& stream) : previous_(Stream::set_current(stream)) {}
  ~StreamGuard() { Stream::set_current(previous_); }
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  Stream previous_;
};

// Copies share the event. The device's event is made at the first record, on the device of
// that record's stream, as in PyTorch.
class Event {
 public:
  explicit Event(bool enable_timing = false);

  // Marks the work queued on `stream` so far: the event completes when it has.
  void record(const Stream& stream);
  bool recorded() const;
  bool enable_timing() const;
  // The device of the stream it was recorded on; ValueError before the first record.
  Device device() const;
  // True when the marked work has finished (and when never recorded); does not block.
  bool query() const;
  // Blocks until the marked work has finished.
  void synchronize() const;
  // Milliseconds from this event to `end`; both recorded with timing and completed.
  double elapsed_time(const Event& end) const;
  // Work queued on `stream` from now on starts after this event completes.
  void wait(const Stream& stream) const { stream.wait(*this); }
  ts_event handle() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

// Waits until the work queued on every stream of `device` has finished.
void synchronize(Device device);

// Tells `t`'s allocator that its memory is used by work queued on `stream` (PyTorch's
// Tensor.record_stream): freed, it is not reused before that work is done.
void record_stream(const Tensor& t, const Stream& stream);

}  // namespace tessera

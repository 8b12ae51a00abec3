#pragma once
// What the profiler records: per-thread buffers of events, written by the thread that did the
// work (one uncontended lock per event) and read when the trace is written.
#include <tessera/abi.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace tessera::profiler {

enum class EventKind : uint8_t { Op, UserRange, Backward, Memory, DeviceSpan };

struct Event {
  EventKind kind;
  int64_t begin_ns = 0, end_ns = -1;  // end_ns -1: still open (instant events: begin only)
  int64_t sequence_nr = -1;           // Op: the autograd node it created; Backward: the node
  std::string name;
  std::string input_dims, input_types;  // JSON arrays, when shapes are recorded
  ts_device device{0, 0};               // Memory, DeviceSpan
  int64_t bytes = 0, allocated = 0;     // Memory
  uintptr_t address = 0;                // Memory
};

struct ThreadBuffer {
  int64_t tid;
  std::mutex mutex;
  std::vector<Event> events;
  std::vector<size_t> open;  // indices of the ranges and operators not yet ended, innermost last
};

// The calling thread's buffer (created and listed on first use).
ThreadBuffer& this_thread_buffer();
// Every buffer, for reading (each is locked while read) and for clearing at start.
std::vector<std::shared_ptr<ThreadBuffer>> all_buffers();
// Device spans have no thread of their own: one shared list.
void add_device_span(Event e);
std::vector<Event> device_spans();
void clear_all();

int64_t now_ns();

}  // namespace tessera::profiler

// The observer: turns the host's reports into events in the calling thread's buffer.
#include "recorder.h"

#include <tessera/sdk/plugin.h>

#include <atomic>

namespace tessera::profiler {
namespace {

std::atomic<bool> g_record_shapes{false};
std::atomic<bool> g_profile_memory{false};

void append_dims(std::string& dims, std::string& types, const ts_value& v) {
  if (!dims.empty()) dims += ", ", types += ", ";
  if (v.tag == TS_VALUE_TENSOR && v.u.tensor) {
    ts_tensor_view view{};
    view.struct_size = sizeof view;
    if (sdk::host().tensor_get_view(v.u.tensor, &view) != TS_OK) return void(dims += "[]"), void(types += "\"\"");
    dims += '[';
    for (int32_t d = 0; d < view.ndim; ++d) {
      if (d) dims += ", ";
      dims += std::to_string(view.shape[d]);
    }
    dims += ']';
    types += '"';
    types += sdk::dtype_name(view.dtype);
    types += '"';
    return;
  }
  dims += "[]";
  switch (v.tag) {
    case TS_VALUE_INT: case TS_VALUE_DOUBLE: case TS_VALUE_BOOL: types += "\"Scalar\""; break;
    case TS_VALUE_TENSOR_LIST: types += "\"TensorList\""; break;
    case TS_VALUE_INT_LIST: case TS_VALUE_DOUBLE_LIST: types += "\"ScalarList\""; break;
    default: types += "\"\""; break;
  }
}

// Opens an event on this thread; ended by close().
void open(Event e) {
  ThreadBuffer& b = this_thread_buffer();
  std::lock_guard lock(b.mutex);
  b.open.push_back(b.events.size());
  b.events.push_back(std::move(e));
}

// Ends this thread's innermost open event when it is of kind `kind` (an end whose begin was
// recorded before the profile started, or was cleared, is dropped).
void close(EventKind kind) {
  const int64_t t = now_ns();
  ThreadBuffer& b = this_thread_buffer();
  std::lock_guard lock(b.mutex);
  if (b.open.empty() || b.events[b.open.back()].kind != kind) return;
  b.events[b.open.back()].end_ns = t;
  b.open.pop_back();
}

void on_op_enter(void*, ts_operator op, const ts_stack* arguments) {
  Event e{EventKind::Op};
  e.name = sdk::host().operator_name(op);
  if (g_record_shapes.load(std::memory_order_relaxed) && arguments) {
    e.input_dims.reserve(32);
    for (int32_t i = 0; i < arguments->size; ++i) append_dims(e.input_dims, e.input_types, arguments->values[i]);
  }
  e.begin_ns = now_ns();  // last, so that recording the shapes is not counted in the call
  open(std::move(e));
}

void on_op_exit(void*, ts_operator) { close(EventKind::Op); }

void on_range(void*, int32_t phase, const char* name, int64_t sequence_nr) {
  const EventKind kind = sequence_nr >= 0 ? EventKind::Backward : EventKind::UserRange;
  if (phase != 0) {
    // The end of a range says nothing of its kind: close the innermost open range of either.
    const int64_t t = now_ns();
    ThreadBuffer& b = this_thread_buffer();
    std::lock_guard lock(b.mutex);
    if (b.open.empty()) return;
    Event& top = b.events[b.open.back()];
    if (top.kind != EventKind::UserRange && top.kind != EventKind::Backward) return;
    top.end_ns = t;
    b.open.pop_back();
    return;
  }
  Event e{kind};
  e.name = name;
  e.sequence_nr = sequence_nr;
  e.begin_ns = now_ns();
  open(std::move(e));
}

void on_sequence_nr(void*, int64_t sequence_nr) {
  ThreadBuffer& b = this_thread_buffer();
  std::lock_guard lock(b.mutex);
  if (b.open.empty()) return;
  Event& top = b.events[b.open.back()];
  if (top.kind == EventKind::Op && top.sequence_nr < 0) top.sequence_nr = sequence_nr;
}

void on_memory(void*, ts_device device, const void* ptr, int64_t nbytes, int64_t allocated) {
  if (!g_profile_memory.load(std::memory_order_relaxed)) return;
  Event e{EventKind::Memory};
  e.begin_ns = now_ns();
  e.device = device;
  e.address = reinterpret_cast<uintptr_t>(ptr);
  e.bytes = nbytes;
  e.allocated = allocated;
  ThreadBuffer& b = this_thread_buffer();
  std::lock_guard lock(b.mutex);
  b.events.push_back(std::move(e));
}

void on_device_span(void*, ts_device device, const char* name, int64_t begin_ns, int64_t end_ns) {
  Event e{EventKind::DeviceSpan};
  e.name = name;
  e.device = device;
  e.begin_ns = begin_ns;
  e.end_ns = end_ns;
  add_device_span(std::move(e));
}

int g_observer_identity;  // the observer's data pointer: tells the host that a second start is ours

}  // namespace

void start_recording(bool record_shapes, bool profile_memory) {
  if (recording()) sdk::fail(TS_ERROR, "profiler::start: a profile is already recording; stop it first");
  clear_all();
  g_record_shapes.store(record_shapes);
  g_profile_memory.store(profile_memory);
  ts_observer o{};
  o.struct_size = sizeof o;
  o.data = &g_observer_identity;
  o.op_enter = on_op_enter;
  o.op_exit = on_op_exit;
  o.range = on_range;
  o.sequence_nr = on_sequence_nr;
  o.memory = on_memory;
  o.device_span = on_device_span;
  sdk::check_host(sdk::host().set_observer(nullptr, &o));
}

void stop_recording() { sdk::check_host(sdk::host().set_observer(nullptr, nullptr)); }

bool recording() { return sdk::host().observing() != 0; }

}  // namespace tessera::profiler

#include "chrome_trace.h"

#include "events.h"

#include <algorithm>
#include <cstdio>
#include <unordered_map>

#include <unistd.h>

namespace tessera::profiler {
namespace {

void append_escaped(std::string& out, const std::string& s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += char(c);
        }
    }
  }
  out += '"';
}

// Microseconds with nanosecond digits, from integers (no rounding, so nesting is kept exactly).
void append_us(std::string& out, int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%s%lld.%03lld", ns < 0 ? "-" : "", (long long)(std::llabs(ns) / 1000),
                (long long)(std::llabs(ns) % 1000));
  out += buf;
}

// PyTorch's profiler names operators "aten::add" (no overload); ours without a namespace read
// the same, so tables group add.Tensor and add.Scalar together as PyTorch's do.
std::string display_name(const std::string& op) {
  if (op.find("::") != std::string::npos) return op;
  return "aten::" + op.substr(0, op.find('.'));
}

struct Writer {
  std::string out;
  int64_t base_ns;
  bool first = true;
  void begin_event() {
    out += first ? "\n  {" : ",\n  {";
    first = false;
  }
};

}  // namespace

std::string chrome_trace_json() {
  const int64_t pid = ::getpid();
  struct Row {
    int64_t tid;
    Event e;
  };
  std::vector<Row> rows;
  int64_t base = now_ns();
  for (auto& buffer : all_buffers()) {
    std::lock_guard lock(buffer->mutex);
    // Events still open end now: after every event this buffer holds, so nesting is kept.
    const int64_t snapshot_ns = now_ns();
    for (const Event& e : buffer->events) {
      if (e.kind == EventKind::Op && e.name.starts_with("profiler::")) continue;  // the profiler's own calls
      rows.push_back({buffer->tid, e});
      if (rows.back().e.end_ns < 0 && e.kind != EventKind::Memory) rows.back().e.end_ns = snapshot_ns;
      base = std::min(base, e.begin_ns);
    }
  }
  for (const Event& e : device_spans()) {
    rows.push_back({-1, e});
    base = std::min(base, e.begin_ns);
  }
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.e.begin_ns < b.e.begin_ns; });

  Writer w{{}, base};
  w.out.reserve(rows.size() * 160 + 256);
  w.out += "{\"schemaVersion\": 1, \"displayTimeUnit\": \"ms\", \"traceName\": \"tessera\", \"traceEvents\": [";
  std::unordered_map<int64_t, const Row*> forward_of;  // sequence number -> the operator that created the node
  for (const Row& r : rows)
    if (r.e.kind == EventKind::Op && r.e.sequence_nr >= 0) forward_of.emplace(r.e.sequence_nr, &r);
  std::unordered_map<int64_t, bool> device_tracks;

  for (const Row& r : rows) {
    const Event& e = r.e;
    const int64_t end = std::max(e.end_ns, e.begin_ns);
    const int64_t ts = e.begin_ns - base;
    w.begin_event();
    switch (e.kind) {
      case EventKind::Op:
      case EventKind::UserRange:
      case EventKind::Backward: {
        w.out += "\"ph\": \"X\", \"cat\": ";
        w.out += e.kind == EventKind::UserRange ? "\"user_annotation\"" : "\"cpu_op\"";
        w.out += ", \"name\": ";
        append_escaped(w.out, e.kind == EventKind::Op ? display_name(e.name) : e.name);
        w.out += ", \"pid\": " + std::to_string(pid) + ", \"tid\": " + std::to_string(r.tid) + ", \"ts\": ";
        append_us(w.out, ts);
        w.out += ", \"dur\": ";
        append_us(w.out, end - e.begin_ns);
        w.out += ", \"args\": {";
        bool comma = false;
        if (e.kind == EventKind::Op && (!e.input_dims.empty() || !e.input_types.empty())) {
          w.out += "\"Input Dims\": [" + e.input_dims + "], \"Input type\": [" + e.input_types + "]";
          comma = true;
        }
        if (e.sequence_nr >= 0) {
          w.out += std::string(comma ? ", " : "") + "\"Sequence number\": " + std::to_string(e.sequence_nr);
          if (e.kind == EventKind::Backward)
            if (auto it = forward_of.find(e.sequence_nr); it != forward_of.end())
              w.out += ", \"Fwd thread id\": " + std::to_string(it->second->tid);
        }
        w.out += "}}";
        // The flow: from the forward operator to this backward node.
        if (e.kind == EventKind::Backward)
          if (auto it = forward_of.find(e.sequence_nr); it != forward_of.end()) {
            const Row& fwd = *it->second;
            w.begin_event();
            w.out += "\"ph\": \"s\", \"cat\": \"fwdbwd\", \"name\": \"fwdbwd\", \"id\": " +
                     std::to_string(e.sequence_nr) + ", \"pid\": " + std::to_string(pid) +
                     ", \"tid\": " + std::to_string(fwd.tid) + ", \"ts\": ";
            append_us(w.out, fwd.e.begin_ns - base);
            w.out += "}";
            w.begin_event();
            w.out += "\"ph\": \"f\", \"bp\": \"e\", \"cat\": \"fwdbwd\", \"name\": \"fwdbwd\", \"id\": " +
                     std::to_string(e.sequence_nr) + ", \"pid\": " + std::to_string(pid) +
                     ", \"tid\": " + std::to_string(r.tid) + ", \"ts\": ";
            append_us(w.out, ts);
            w.out += "}";
          }
        break;
      }
      case EventKind::Memory: {
        w.out += "\"ph\": \"i\", \"s\": \"t\", \"cat\": \"cpu_instant_event\", \"name\": \"[memory]\", \"pid\": " +
                 std::to_string(pid) + ", \"tid\": " + std::to_string(r.tid) + ", \"ts\": ";
        append_us(w.out, ts);
        w.out += ", \"args\": {\"Device Type\": " + std::to_string(e.device.type) +
                 ", \"Device Id\": " + std::to_string(e.device.index) + ", \"Addr\": " + std::to_string(e.address) +
                 ", \"Bytes\": " + std::to_string(e.bytes) + ", \"Total Allocated\": " + std::to_string(e.allocated) +
                 "}}";
        break;
      }
      case EventKind::DeviceSpan: {
        // One process track per device: pid 1000 + 16 * type + index, named by a metadata event.
        const int64_t track = 1000 + 16 * int64_t(e.device.type) + e.device.index;
        w.out += "\"ph\": \"X\", \"cat\": \"kernel\", \"name\": ";
        append_escaped(w.out, e.name);
        w.out += ", \"pid\": " + std::to_string(track) + ", \"tid\": 0, \"ts\": ";
        append_us(w.out, ts);
        w.out += ", \"dur\": ";
        append_us(w.out, end - e.begin_ns);
        w.out += ", \"args\": {\"device\": " + std::to_string(e.device.index) +
                 ", \"device_type\": " + std::to_string(e.device.type) + "}}";
        if (!device_tracks[track]) {
          device_tracks[track] = true;
          w.begin_event();
          w.out += "\"ph\": \"M\", \"name\": \"process_name\", \"pid\": " + std::to_string(track) +
                   ", \"tid\": 0, \"args\": {\"name\": \"device " + std::to_string(e.device.type) + ":" +
                   std::to_string(e.device.index) + "\"}}";
        }
        break;
      }
    }
  }
  w.out += "\n]}\n";
  return w.out;
}

}  // namespace tessera::profiler

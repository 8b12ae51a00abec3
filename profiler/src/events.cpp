#include "events.h"

#include <chrono>

#include <unistd.h>
#include <sys/syscall.h>

namespace tessera::profiler {
namespace {
struct Registry {
  std::mutex mutex;
  std::vector<std::shared_ptr<ThreadBuffer>> buffers;
  std::vector<Event> device_spans;
};
Registry& registry() {
  static auto* r = new Registry;  // never destroyed: threads may record during static teardown
  return *r;
}
}  // namespace

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

ThreadBuffer& this_thread_buffer() {
  // The registry keeps the buffer alive after its thread exits, so its events reach the trace.
  thread_local std::shared_ptr<ThreadBuffer> buffer = [] {
    auto b = std::make_shared<ThreadBuffer>();
    b->tid = int64_t(::syscall(SYS_gettid));
    std::lock_guard lock(registry().mutex);
    registry().buffers.push_back(b);
    return b;
  }();
  return *buffer;
}

std::vector<std::shared_ptr<ThreadBuffer>> all_buffers() {
  std::lock_guard lock(registry().mutex);
  return registry().buffers;
}

void add_device_span(Event e) {
  std::lock_guard lock(registry().mutex);
  registry().device_spans.push_back(std::move(e));
}

std::vector<Event> device_spans() {
  std::lock_guard lock(registry().mutex);
  return registry().device_spans;
}

void clear_all() {
  for (auto& b : all_buffers()) {
    std::lock_guard lock(b->mutex);
    b->events.clear();
    b->open.clear();
  }
  std::lock_guard lock(registry().mutex);
  registry().device_spans.clear();
}

}  // namespace tessera::profiler

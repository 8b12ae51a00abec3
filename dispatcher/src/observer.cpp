#include <tessera/error.h>
#include <tessera/observer.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <mutex>

namespace tessera {

namespace detail {
std::atomic<const ts_observer*> g_observer{nullptr};
}

namespace {
// A stable copy of `o` (the fields a possibly older, shorter ts_observer has; the rest NULL).
// Copies are kept for the life of the process (another thread may still be inside a callback
// of a removed observer); installing the same observer again reuses its copy. Called under the
// set_observer lock.
const ts_observer* copy_of(const ts_observer* o) {
  static auto* copies = new std::deque<ts_observer>;
  ts_observer copy{};
  std::memcpy(&copy, o, std::min(o->struct_size, sizeof(ts_observer)));
  copy.struct_size = sizeof(ts_observer);
  for (const ts_observer& c : *copies)
    if (std::memcmp(&c, &copy, sizeof copy) == 0) return &c;
  return &copies->emplace_back(copy);
}
}  // namespace

void set_observer(const ts_observer* o) {
  static std::mutex m;
  std::lock_guard lock(m);
  if (!o) {
    detail::g_observer.store(nullptr, std::memory_order_release);
    return;
  }
  if (o->struct_size < offsetof(ts_observer, op_enter))
    raise<ValueError>("set_observer: struct_size {} is too small for a ts_observer", o->struct_size);
  if (const ts_observer* now = observer(); now && now->data != o->data)
    raise<ValueError>("set_observer: another observer is installed; remove it first (set_observer(NULL))");
  detail::g_observer.store(copy_of(o), std::memory_order_release);
}

void observe_range(int32_t phase, const char* name, int64_t sequence_nr) {
  if (const ts_observer* o = observer(); o && o->range) o->range(o->data, phase, name ? name : "", sequence_nr);
}

void observe_sequence_nr(int64_t sequence_nr) {
  if (const ts_observer* o = observer(); o && o->sequence_nr) o->sequence_nr(o->data, sequence_nr);
}

void observe_memory(ts_device device, const void* ptr, int64_t nbytes, int64_t allocated) {
  if (const ts_observer* o = observer(); o && o->memory) o->memory(o->data, device, ptr, nbytes, allocated);
}

void observe_device_span(ts_device device, const char* name, int64_t begin_ns, int64_t end_ns) {
  if (const ts_observer* o = observer(); o && o->device_span)
    o->device_span(o->data, device, name ? name : "", begin_ns, end_ns);
}

}  // namespace tessera

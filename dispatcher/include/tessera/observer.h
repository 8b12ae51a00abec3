#pragma once
// The process's one observer (ABI 1.6; the profiler plugin installs it): the dispatcher tells it
// about every operator call from an entry point, and anyone may report ranges, autograd
// sequence numbers, memory and device activity. Without an observer each report is one atomic
// load and a branch, so an inactive profiler costs nothing measurable.
#include <tessera/abi.h>

#include <atomic>

namespace tessera {

namespace detail {
extern std::atomic<const ts_observer*> g_observer;
}

// The installed observer, or nullptr.
inline const ts_observer* observer() { return detail::g_observer.load(std::memory_order_acquire); }
// Installs a copy of `o` (nullptr removes the present one). Raises ValueError when one is
// installed already and `o` is another.
void set_observer(const ts_observer* o);

void observe_range(int32_t phase, const char* name, int64_t sequence_nr);
void observe_sequence_nr(int64_t sequence_nr);
void observe_memory(ts_device device, const void* ptr, int64_t nbytes, int64_t allocated);
void observe_device_span(ts_device device, const char* name, int64_t begin_ns, int64_t end_ns);

// op_enter now, op_exit when it goes out of scope (also when the call throws).
class ObservedCall {
 public:
  ObservedCall(const ts_observer* o, ts_operator op, const ts_stack* arguments) : o_(o), op_(op) {
    if (o_->op_enter) o_->op_enter(o_->data, op, arguments);
  }
  ~ObservedCall() {
    if (o_->op_exit) o_->op_exit(o_->data, op_);
  }
  ObservedCall(const ObservedCall&) = delete;
  ObservedCall& operator=(const ObservedCall&) = delete;

 private:
  const ts_observer* o_;
  ts_operator op_;
};

}  // namespace tessera

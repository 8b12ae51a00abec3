// Kernel spans for the profiler (ABI 1.6): while somebody observes, every kernel of this plugin
// records a timing event before and after its work on the current stream; once the work is
// done, the span goes to the host's observer on the host clock. Each device has an origin: an
// event recorded and waited for at a known host time, so an event's time is the origin's host
// time plus the GPU time elapsed since it (cudaEventElapsedTime). Finished spans are reported
// when the next kernel ends and when the device is synchronized (torch.cuda.synchronize() before
// leaving the profile makes every span complete).
#include "cuda_plugin.h"

#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace tessera::gpu {
namespace {

struct Span {
  std::string name;
  int32_t device;
  gpuEvent_t start, stop;
};

struct Origin {
  gpuEvent_t event;
  int64_t host_ns;
};

struct Spans {
  std::mutex mutex;
  std::vector<Span> pending;
  std::map<int32_t, Origin> origins;
};
Spans& spans() {
  static auto* s = new Spans;  // never destroyed: kernels may end during static teardown
  return *s;
}

int64_t host_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

gpuEvent_t timing_event() {
  gpuEvent_t e = nullptr;
  check(gpuEventCreateWithFlags(&e, gpuEventDefault), "creating a timing event for the profiler");
  return e;
}

// The device the kernel works on: its first tensor's (ours), else a Device argument, else the
// thread's current device.
int32_t device_of(const ts_stack* arguments) {
  for (int32_t i = 0; arguments && i < arguments->size; ++i) {
    const ts_value& v = arguments->values[i];
    if (v.tag == TS_VALUE_TENSOR && v.u.tensor) {
      ts_tensor_view view{};
      view.struct_size = sizeof view;
      if (sdk::host().tensor_get_view(v.u.tensor, &view) == TS_OK && view.device.type == runtime().key)
        return view.device.index;
    } else if (v.tag == TS_VALUE_DEVICE && v.u.device.type == runtime().key) {
      return v.u.device.index;
    }
  }
  int device = 0;
  return gpuGetDevice(&device) == gpuSuccess ? device : -1;
}

const Origin& origin_locked(int32_t device) {
  auto it = spans().origins.find(device);
  if (it != spans().origins.end()) return it->second;
  gpuEvent_t e = timing_event();
  check(gpuEventRecord(e, stream_for(device)), "recording the profiler's origin event");
  check(gpuEventSynchronize(e), "waiting for the profiler's origin event");
  return spans().origins.emplace(device, Origin{e, host_now_ns()}).first->second;
}

// Reports (and frees) every pending span whose work is done; a span that failed is dropped.
void report_finished_locked() {
  auto& pending = spans().pending;
  size_t kept = 0;
  for (Span& s : pending) {
    const gpuError_t state = gpuEventQuery(s.stop);
    if (state == gpuErrorNotReady) {
      pending[kept++] = std::move(s);
      continue;
    }
    float begin_ms = 0, end_ms = 0;
    const Origin& o = spans().origins.at(s.device);
    if (state == gpuSuccess && gpuEventElapsedTime(&begin_ms, o.event, s.start) == gpuSuccess &&
        gpuEventElapsedTime(&end_ms, o.event, s.stop) == gpuSuccess)
      sdk::observe_device_span(ts_device{runtime().key, s.device}, s.name.c_str(),
                               o.host_ns + int64_t(double(begin_ms) * 1e6), o.host_ns + int64_t(double(end_ms) * 1e6));
    gpuEventDestroy(s.start);
    gpuEventDestroy(s.stop);
  }
  pending.resize(kept);
}

void* begin_kernel(ts_call call, const ts_stack* arguments) {
  try {
    const int32_t device = device_of(arguments);
    if (device < 0 || device >= runtime().device_count) return nullptr;
    DeviceGuard guard(device);
    {
      std::lock_guard lock(spans().mutex);
      origin_locked(device);
    }
    auto* span = new Span{sdk::host().operator_name(sdk::host().call_operator_of(call)), device, timing_event(),
                          timing_event()};
    check(gpuEventRecord(span->start, stream_for(device)), "recording a kernel's start for the profiler");
    return span;
  } catch (...) {  // the profiler must never fail a kernel
    return nullptr;
  }
}

void end_kernel(ts_call, void* token) {
  if (!token) return;
  auto* span = static_cast<Span*>(token);
  try {
    DeviceGuard guard(span->device);
    check(gpuEventRecord(span->stop, stream_for(span->device)), "recording a kernel's end for the profiler");
    std::lock_guard lock(spans().mutex);
    spans().pending.push_back(std::move(*span));
    report_finished_locked();
  } catch (...) {
    gpuEventDestroy(span->start);
    gpuEventDestroy(span->stop);
  }
  delete span;
}

}  // namespace

void report_finished_kernel_spans() {
  std::lock_guard lock(spans().mutex);
  if (!spans().pending.empty()) report_finished_locked();
}

void install_kernel_timer() {
  static const sdk::KernelTimer timer{begin_kernel, end_kernel};
  sdk::set_kernel_timer(&timer);
}

}  // namespace tessera::gpu

// libtessera_profiler.so: the profiler:: operators through which frontends (ts.profiler,
// tessera::profiler) start and stop recording and read the trace.
#include "chrome_trace.h"
#include "recorder.h"

#include <tessera/sdk/plugin.h>

namespace tessera::profiler {
namespace {

using sdk::Args;

void start(Args& a) {
  start_recording(a.to_bool(0), a.to_bool(1));
  a.returns({});
}

void stop(Args& a) {
  stop_recording();
  a.returns({});
}

void is_active(Args& a) { a.returns({sdk::value(recording())}); }

void trace_json(Args& a) {
  thread_local std::string text;  // a str return lives until this thread's next call here
  text = chrome_trace_json();
  ts_value v{TS_VALUE_STRING, 0, {}};
  v.u.str = text.c_str();
  a.returns({v});
}

void register_profiler(sdk::Registrar& reg) {
  struct Op {
    const char* schema;
    const char* name;
    sdk::KernelFn fn;
  };
  const Op ops[] = {
      {"profiler::start(bool record_shapes=False, bool profile_memory=False) -> ()", "profiler::start", start},
      {"profiler::stop() -> ()", "profiler::stop", stop},
      {"profiler::is_active() -> bool", "profiler::is_active", is_active},
      {"profiler::trace_json() -> str", "profiler::trace_json", trace_json},
  };
  for (const Op& op : ops) {
    reg.def(op.schema);
    reg.kernel(op.name, TS_KEY_CATCH_ALL, op.fn);
  }
}

}  // namespace
}  // namespace tessera::profiler

// Needs host ABI 1.6 (the observer).
TESSERA_PLUGIN("profiler", "0.1.0", 6, tessera::profiler::register_profiler)

// tessera::profiler over the profiler plugin's operators ("profiler::<name>").
#include "autograd_calls.h"

#include <tessera/cpp/profiler.h>
#include <tessera/observer.h>
#include <tessera/runtime.h>

#include <fstream>

namespace tessera::profiler {
namespace {

OperatorHandle profiler_op(std::string_view name) {
  init();
  if (!is_plugin_loaded("profiler")) {
    require_lazy_loading("profiler", "the profiler (tessera::profiler)");
    load_named_plugin("profiler");
  }
  if (!is_plugin_loaded("profiler"))
    raise<RuntimeError>("profiler is not available: libtessera_profiler.so is not on the plugin search path [{}]",
                        plugin_search_path_text());
  return Dispatcher::instance().find_or_throw(fmt::format("profiler::{}", name));
}

}  // namespace

void start(const Options& options) {
  cpp_detail::BoxedCall().arg(options.record_shapes).arg(options.profile_memory).call(profiler_op("start"));
}

void stop() { cpp_detail::BoxedCall().call(profiler_op("stop")); }

bool is_active() { return observer() != nullptr; }

std::string trace_json() {
  cpp_detail::BoxedCall call;
  call.call(profiler_op("trace_json"));
  return call.ret(0).u.str;
}

void export_chrome_trace(const std::string& path) {
  const std::string text = trace_json();
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) raise<RuntimeError>("profiler::export_chrome_trace: cannot write '{}'", path);
}

Profile::Profile(const Options& options) { start(options); }
Profile::~Profile() {
  if (active_) {
    try {
      profiler::stop();
    } catch (...) {  // a destructor must not throw; the observer is removed by the plugin anyway
    }
  }
}
void Profile::stop() {
  if (active_) profiler::stop();
  active_ = false;
}

RecordFunction::RecordFunction(const std::string& name) : open_(observer() != nullptr) {
  if (open_) observe_range(0, name.c_str(), -1);
}
RecordFunction::~RecordFunction() {
  if (open_) observe_range(1, "", -1);
}

}  // namespace tessera::profiler

#pragma once
// tessera::profiler: the profiler plugin (libtessera_profiler.so) from C++. Record while a
// Profile lives (or between start() and stop()), mark ranges with RecordFunction, then write the
// Chrome trace (Trace Event JSON: Perfetto, chrome://tracing) or read it as text.
//
//   tessera::profiler::Profile prof({.record_shapes = true, .profile_memory = true});
//   { tessera::profiler::RecordFunction step("train_step"); train_step(); }
//   prof.stop();
//   prof.export_chrome_trace("trace.json");
#include <string>

namespace tessera::profiler {

struct Options {
  bool record_shapes = false;   // operators keep their arguments' shapes and dtypes
  bool profile_memory = false;  // allocation and free events with sizes
};

// Loads the plugin (once) and starts recording; raises RuntimeError when it is not installed
// or a profile is already recording.
void start(const Options& options = {});
// Stops recording (what was recorded stays readable until the next start).
void stop();
bool is_active();
// The recorded events as Chrome trace JSON.
std::string trace_json();
// Writes trace_json() to `path`; raises RuntimeError when it cannot be written.
void export_chrome_trace(const std::string& path);

// Records from construction until stop() or destruction.
class Profile {
 public:
  explicit Profile(const Options& options = {});
  ~Profile();
  void stop();
  std::string trace_json() const { return profiler::trace_json(); }
  void export_chrome_trace(const std::string& path) const { profiler::export_chrome_trace(path); }
  Profile(const Profile&) = delete;
  Profile& operator=(const Profile&) = delete;

 private:
  bool active_ = true;
};

// A labelled range from construction to destruction (free when nothing records).
class RecordFunction {
 public:
  explicit RecordFunction(const std::string& name);
  ~RecordFunction();
  RecordFunction(const RecordFunction&) = delete;
  RecordFunction& operator=(const RecordFunction&) = delete;

 private:
  bool open_;
};

}  // namespace tessera::profiler

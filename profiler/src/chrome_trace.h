#pragma once
// The recorded events as a Chrome trace (Trace Event JSON), which Perfetto and chrome://tracing
// open: complete events ("X") per thread, strictly nested; flows ("s"/"f", category fwdbwd) from
// each forward operator to the backward node it created; memory as instant events named
// "[memory]" with PyTorch's arguments; device spans on a process track per device.
#include <string>

namespace tessera::profiler {

// Events still open (a profile stopped inside an operator or range) end when the trace is read.
std::string chrome_trace_json();

}  // namespace tessera::profiler

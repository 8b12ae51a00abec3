#pragma once
// Installing and removing the profiler's observer (ABI 1.6).
#include "events.h"

namespace tessera::profiler {

// Clears what the last profile recorded and installs the observer. record_shapes: operators
// keep their arguments' shapes and dtypes; profile_memory: allocator events are kept.
void start_recording(bool record_shapes, bool profile_memory);
void stop_recording();
bool recording();

}  // namespace tessera::profiler

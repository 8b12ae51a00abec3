#pragma once
// Callbacks a frontend registers with the host so that a plugin can call back into it by id
// (ts_host_api.invoke_callback): a Python tensor hook, the backward of a custom function.
// A callback lives while someone holds it: its registrant until it calls release_callback,
// and every plugin that said so with retain_callback (plugins release through the ABI).
#include <tessera/abi.h>

#include <cstdint>
#include <functional>

namespace tessera {

// Runs with the boxed stack (arguments in, returns out); raises a tessera Error on failure.
using Callback = std::function<void(ts_stack* stack)>;

// Registers `fn`; the id is held once (by the caller).
int64_t register_callback(Callback fn);
// Adds a holder to `id` (a plugin that keeps the id in a graph node, say).
void retain_callback(int64_t id);
// Drops one holder; the callback is destroyed with the last one. Unknown ids are ignored.
void release_callback(int64_t id);
// Calls callback `id`; raises ValueError when it does not exist.
void invoke_callback(int64_t id, ts_stack* stack);
// Number of live callbacks (for leak tests).
int64_t live_callbacks();

}  // namespace tessera

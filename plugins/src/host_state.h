#pragma once
// Internal to the host: the staging area of a plugin being initialised, and error plumbing
// between C++ exceptions and C ABI statuses.
#include <tessera/dispatcher.h>
#include <tessera/error.h>

#include <string>
#include <vector>

struct ts_registrar_s {
  std::string plugin;  // provisional name (from the file name) until init reports its own
  std::vector<tessera::Registration> batch;
  std::vector<ts_device_desc> devices;  // staged device descriptions
  std::vector<std::string> device_names;
  std::vector<ts_process_group_backend> process_group_backends;  // staged (1.7)
  std::vector<std::string> warnings;  // host->warn(NULL, ...) during init
  std::string error;
};

namespace tessera::host {

// The ts_status that matches an Error kind, and back.
ts_status status_of(const Error& e);

// Runs `f`, turning any exception into a status and a message on the call (or the current
// plugin initialisation when `call` is null).
template <class F>
ts_status guarded(ts_call call, F&& f) noexcept;

void set_call_error(ts_call call, std::string message);

// The registrar of the plugin being initialised on this thread (for set_error(NULL, ...)).
ts_registrar_s*& current_registrar();

const ts_host_api* api_table();

template <class F>
ts_status guarded(ts_call call, F&& f) noexcept {
  try {
    f();
    return TS_OK;
  } catch (const Error& e) {
    set_call_error(call, e.what());
    return status_of(e);
  } catch (const std::bad_alloc&) {
    set_call_error(call, "out of memory");
    return TS_ERROR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    set_call_error(call, e.what());
    return TS_ERROR;
  }
}

}  // namespace tessera::host

// What every store shares: the wait-timeout message and the C ABI view lent to backends.
#include <tessera/distributed/store.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <tessera/device_registry.h>
#include <tessera/error.h>

namespace tessera::distributed {

void raise_wait_timeout(const char* store, const std::vector<std::string>& keys, Milliseconds timeout) {
  throw DistStoreError(fmt::format("{}: timed out after {} ms waiting for key{} [{}]", store, timeout.count(),
                                   keys.size() == 1 ? "" : "s", fmt::join(keys, ", ")));
}

namespace {

// The ts_store functions: no exception crosses the C ABI; the message goes where the host's
// set_error(NULL, ...) puts it, and ProcessGroup reads it from there (take_backend_error).
template <class F>
ts_status guarded(F&& f) noexcept {
  try {
    f();
    return TS_OK;
  } catch (const std::exception& e) {
    device_function_error() = e.what();
    return TS_ERROR;
  }
}

ts_status abi_set(void* data, const char* key, const void* value, size_t size) {
  return guarded([&] {
    auto* v = static_cast<const uint8_t*>(value);
    static_cast<Store*>(data)->set(key, Bytes(v, v + size));
  });
}

ts_status abi_get(void* data, const char* key, int64_t timeout_ms,
                  void (*sink)(void*, const void*, size_t), void* sink_data) {
  return guarded([&] {
    auto* store = static_cast<Store*>(data);
    Bytes value = store->get(key, timeout_ms < 0 ? store->timeout() : Milliseconds(timeout_ms));
    if (sink) sink(sink_data, value.data(), value.size());
  });
}

ts_status abi_add(void* data, const char* key, int64_t delta, int64_t* value) {
  return guarded([&] {
    int64_t sum = static_cast<Store*>(data)->add(key, delta);
    if (value) *value = sum;
  });
}

}  // namespace

ts_store Store::abi_view() {
  ts_store view{};
  view.struct_size = sizeof view;
  view.data = this;
  view.set = abi_set;
  view.get = abi_get;
  view.add = abi_add;
  return view;
}

}  // namespace tessera::distributed

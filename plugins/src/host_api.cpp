// The host side of the C ABI: the functions of ts_host_api.
#include "host_state.h"

#include <tessera/callbacks.h>
#include <tessera/device_registry.h>
#include <tessera/observer.h>
#include <tessera/process_group_backend.h>
#include <tessera/runtime.h>
#include <tessera/stream.h>
#include <tessera/tensor_impl.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <cstring>
#include <thread>

namespace tessera::host {

ts_status status_of(const Error& e) {
  switch (e.kind()) {
    case Error::Kind::Type: return TS_ERROR_TYPE;
    case Error::Kind::Value: return TS_ERROR_VALUE;
    case Error::Kind::Index: return TS_ERROR_INDEX;
    case Error::Kind::NotImplemented: return TS_ERROR_NOT_IMPLEMENTED;
    case Error::Kind::OutOfMemory: return TS_ERROR_OUT_OF_MEMORY;
    default: return TS_ERROR;
  }
}

ts_registrar_s*& current_registrar() {
  thread_local ts_registrar_s* reg = nullptr;
  return reg;
}

void set_call_error(ts_call call, std::string message) {
  if (call) {
    reinterpret_cast<CallContext*>(call)->error = std::move(message);
  } else if (auto* reg = current_registrar()) {
    reg->error = std::move(message);
  } else {
    device_function_error() = std::move(message);  // a ts_device_desc function about to fail (1.3)
  }
}

namespace {

void api_set_error(ts_call call, const char* message) { set_call_error(call, message ? message : "(no message)"); }

void default_warning_handler(const char* where, const char* message, bool at_load) {
  static const bool print_load_warnings = [] {
    const char* v = std::getenv("TESSERA_PLUGIN_WARNINGS");
    return v && *v && std::string_view(v) != "0";
  }();
  if (at_load && !print_load_warnings) return;  // kept with the device type; shown when it is requested
  std::fprintf(stderr, "[tessera warning] %s: %s\n", where, message);
}

std::atomic<WarningHandler> g_warning_handler{default_warning_handler};

void api_warn(ts_call call, const char* message) {
  std::string where = call ? reinterpret_cast<CallContext*>(call)->op->name() : "plugin init";
  std::string text = message ? message : "";
  if (!call) {
    auto* reg = current_registrar();
    if (reg) {
      reg->warnings.push_back(text);  // kept for errors later
      where = "plugin '" + reg->plugin + "'";
    }
  }
  g_warning_handler.load(std::memory_order_acquire)(where.c_str(), text.c_str(), call == nullptr);
}

}  // namespace

void install_warning_handler(WarningHandler handler) {
  g_warning_handler.store(handler ? handler : default_warning_handler, std::memory_order_release);
}

namespace {

ts_registrar_s* checked(ts_registrar reg) {
  if (!reg) raise<PluginError>("registration outside tessera_plugin_init: the registrar is only valid during init");
  return reinterpret_cast<ts_registrar_s*>(reg);
}

ts_status api_def_operator(ts_registrar reg, const char* schema) {
  return guarded(nullptr, [&] {
    auto* r = checked(reg);
    if (!schema) raise<PluginError>("plugin '{}' defines an operator with a null schema", r->plugin);
    parse_schema(schema);  // reject a malformed schema now, with the parser's message
    r->batch.push_back({Registration::Kind::Def, schema, -1, KernelEntry{nullptr, nullptr, r->plugin, false}});
  });
}

ts_status api_register_kernel(ts_registrar reg, const char* op, ts_dispatch_key key, ts_kernel_fn fn, void* data) {
  return guarded(nullptr, [&] {
    auto* r = checked(reg);
    if (!op || !fn) raise<PluginError>("plugin '{}' registers a kernel with a null operator name or function", r->plugin);
    r->batch.push_back({Registration::Kind::Kernel, op, key, KernelEntry{fn, data, r->plugin, false}});
  });
}

ts_status api_register_fallthrough(ts_registrar reg, const char* op, ts_dispatch_key key) {
  return guarded(nullptr, [&] {
    auto* r = checked(reg);
    r->batch.push_back({Registration::Kind::Fallthrough, op ? op : "", key, KernelEntry{nullptr, nullptr, r->plugin, true}});
  });
}

ts_status api_register_fallback(ts_registrar reg, ts_dispatch_key key, ts_kernel_fn fn, void* data) {
  return guarded(nullptr, [&] {
    auto* r = checked(reg);
    if (!fn) raise<PluginError>("plugin '{}' registers a null fallback", r->plugin);
    r->batch.push_back({Registration::Kind::Fallback, "", key, KernelEntry{fn, data, r->plugin, false}});
  });
}

ts_status api_register_device(ts_registrar reg, const ts_device_desc* desc, ts_dispatch_key* key) {
  return guarded(nullptr, [&] {
    auto* r = checked(reg);
    if (!desc || desc->struct_size < offsetof(ts_device_desc, copy_within))
      raise<PluginError>("plugin '{}' registers a device with a missing or too small ts_device_desc ({} bytes, "
                         "at least {} expected)", r->plugin, desc ? desc->struct_size : 0,
                         offsetof(ts_device_desc, copy_within));
    if (!desc->name || !*desc->name) raise<PluginError>("plugin '{}' registers a device without a name", r->plugin);
    std::string name = desc->name;
    // Checked here, while staging: DeviceRegistry::add runs at commit, too late to refuse cleanly.
    if (!desc->allocate || !desc->deallocate || !desc->copy_to_host || !desc->copy_from_host)
      raise<PluginError>("plugin '{}' registers device '{}' without allocate/deallocate/copy_to_host/copy_from_host",
                         r->plugin, name);
    if (!key) raise<PluginError>("plugin '{}' registers device '{}' with a null key pointer", r->plugin, name);
    if (std::find(r->device_names.begin(), r->device_names.end(), name) != r->device_names.end())
      raise<PluginError>("plugin '{}' registers device '{}' twice", r->plugin, name);
    if (DeviceRegistry::instance().find(name))
      raise<PluginError>("plugin '{}' registers device '{}', which is already registered", r->plugin, name);
    ts_device_desc copy{};
    std::memcpy(&copy, desc, std::min(desc->struct_size, sizeof copy));
    *key = DeviceRegistry::instance().backend_key(name);  // may refuse: stage only after it
    r->devices.push_back(copy);
    r->device_names.push_back(name);
  });
}

ts_status api_register_process_group_backend(ts_registrar reg, const ts_process_group_backend* desc) {
  return guarded(nullptr, [&] {
    auto* r = checked(reg);
    // A 1.7 description ends before work_source_rank (1.8); the fields it lacks stay NULL.
    constexpr size_t kSize17 = offsetof(ts_process_group_backend, work_source_rank);
    if (!desc || desc->struct_size < kSize17)
      raise<PluginError>("plugin '{}' registers a process-group backend with a missing or too small description "
                         "({} bytes, at least {} expected)", r->plugin, desc ? desc->struct_size : 0, kSize17);
    ts_process_group_backend copy{};
    std::memcpy(&copy, desc, std::min(desc->struct_size, sizeof copy));
    copy.struct_size = sizeof copy;
    desc = &copy;
    if (!desc->name || !*desc->name)
      raise<PluginError>("plugin '{}' registers a process-group backend without a name", r->plugin);
    if (!desc->create || !desc->destroy || !desc->start || !desc->work_wait || !desc->work_is_completed ||
        !desc->work_release)
      raise<PluginError>("plugin '{}' registers process-group backend '{}' without create/destroy/start/work_wait/"
                         "work_is_completed/work_release", r->plugin, desc->name);
    if (has_process_group_backend(desc->name))
      raise<PluginError>("plugin '{}' registers process-group backend '{}', which is already registered", r->plugin,
                         desc->name);
    r->process_group_backends.push_back(*desc);
  });
}

void* api_native_stream(ts_device device, ts_stream stream) {
  try {
    const DeviceTypeEntry* entry = DeviceRegistry::instance().find(device.type);
    if (!entry || !entry->desc.native_stream) return nullptr;
    return entry->desc.native_stream(entry->desc.device_data, device.index, stream);
  } catch (...) {
    return nullptr;
  }
}

ts_status api_find_dispatch_key(const char* name, ts_dispatch_key* key) {
  return guarded(nullptr, [&] {
    if (!key) raise<ValueError>("find_dispatch_key: null key pointer");
    DispatchKey k = dispatch_key_from_name(name ? name : "");
    if (k == DispatchKey::Undefined) raise<ValueError>("unknown dispatch key '{}'", name ? name : "");
    *key = int32_t(k);
  });
}

ts_operator api_find_operator(const char* name) {
  if (!name) return nullptr;
  init();
  return reinterpret_cast<ts_operator>(const_cast<OperatorEntry*>(Dispatcher::instance().find(name)));
}

ts_status api_call_operator(ts_call call, ts_operator op, ts_stack* stack) {
  return guarded(call, [&] {
    if (!op || !stack) raise<ValueError>("call_operator: null operator or stack");
    auto handle = reinterpret_cast<OperatorHandle>(op);
    // A kernel calling its own operator (below its key, through the thread's excluded keys) is
    // the same call continuing: the observer saw it already.
    const bool same_call = call && reinterpret_cast<const CallContext*>(call)->op == handle;
    Dispatcher::instance().call(handle, stack, !same_call);
  });
}

ts_status api_redispatch(ts_call call, ts_operator op, ts_keyset keys, ts_stack* stack) {
  return guarded(call, [&] {
    if (!op || !stack) raise<ValueError>("redispatch: null operator or stack");
    Dispatcher::instance().call_with_keys(reinterpret_cast<OperatorHandle>(op), DispatchKeySet(keys), stack);
  });
}

int64_t api_tensor_use_count(ts_tensor t) { return t ? from_handle(t)->use_count() : 0; }

void api_tensor_retain(ts_tensor t) {
  if (t) from_handle(t)->retain();
}
void api_tensor_release(ts_tensor t) {
  if (t && from_handle(t)->release_ref()) delete from_handle(t);
}

ts_status api_tensor_get_view(ts_tensor t, ts_tensor_view* view) {
  if (!t || !view || view->struct_size < offsetof(ts_tensor_view, numel)) return TS_ERROR_VALUE;
  from_handle(t)->fill_view(view);
  return TS_OK;
}

// Elements a geometry touches, from its first element: 1 + sum (size-1)*stride.
int64_t span_elements(IntArrayRef sizes, IntArrayRef strides, std::string_view what) {
  int64_t span = 1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 0) return 0;
    if (strides[i] < 0) raise<ValueError>("{}: negative strides are not supported, got stride {} at dim {}", what, strides[i], i);
    int64_t extent;
    if (__builtin_mul_overflow(sizes[i] - 1, strides[i], &extent) || __builtin_add_overflow(span, extent, &span))
      raise<ValueError>("{}: the extent of sizes [{}] with strides [{}] overflows int64", what, fmt::join(sizes, ", "),
                        fmt::join(strides, ", "));
  }
  return span;
}

ts_status api_tensor_empty(ts_call call, int32_t ndim, const int64_t* shape, const int64_t* strides, int32_t dtype,
                           ts_device device, ts_tensor* out) {
  return guarded(call, [&] {
    if (!sdk::dtype_valid(dtype)) raise<TypeError>("empty: invalid dtype code {}", dtype);
    if (ndim < 0 || (ndim > 0 && !shape)) raise<ValueError>("empty: invalid shape (ndim {})", ndim);
    IntArrayRef sizes(shape, size_t(ndim));
    int64_t numel = checked_numel(sizes, "empty");
    IntArrayRef stride_ref = strides ? IntArrayRef(strides, size_t(ndim)) : IntArrayRef();
    int64_t elements = strides ? span_elements(sizes, stride_ref, "empty") : numel;
    int64_t nbytes;
    if (__builtin_mul_overflow(elements, sdk::dtype_itemsize(dtype), &nbytes))
      raise<ValueError>("empty: {} elements of {} overflow the byte size", elements, sdk::dtype_name(dtype));
    Storage storage = Storage::adopt(new StorageImpl(Device::from_abi(device), size_t(nbytes)));
    *out = to_handle(new TensorImpl(std::move(storage), ScalarType(dtype), sizes, stride_ref, 0));
  });
}

ts_status api_tensor_alias_dtype(ts_call call, ts_tensor base, int32_t ndim, const int64_t* shape,
                                 const int64_t* strides, int64_t offset, int32_t dtype, ts_tensor* out) {
  return guarded(call, [&] {
    if (!base || ndim < 0 || (ndim > 0 && (!shape || !strides))) raise<ValueError>("alias: invalid arguments");
    if (!sdk::dtype_valid(dtype)) raise<TypeError>("alias: invalid dtype code {}", dtype);
    auto* b = from_handle(base);
    IntArrayRef sizes(shape, size_t(ndim)), stride_ref(strides, size_t(ndim));
    checked_numel(sizes, "alias");
    int64_t elements = span_elements(sizes, stride_ref, "alias");
    int64_t isz = sdk::dtype_itemsize(dtype);
    if (offset < 0 || (elements > 0 && (offset + elements) * isz > int64_t(b->storage()->nbytes())))
      raise<IndexError>("alias: a view of sizes [{}], strides [{}] at offset {} reaches past its storage of {} bytes",
                        fmt::join(sizes, ", "), fmt::join(stride_ref, ", "), offset, b->storage()->nbytes());
    auto* t = new TensorImpl(b->storage(), ScalarType(dtype), sizes, stride_ref, offset);
    t->set_key_set(b->key_set());
    *out = to_handle(t);
  });
}

ts_status api_tensor_alias(ts_call call, ts_tensor base, int32_t ndim, const int64_t* shape, const int64_t* strides,
                           int64_t offset, ts_tensor* out) {
  const int32_t dtype = base ? int32_t(from_handle(base)->dtype()) : 0;
  return api_tensor_alias_dtype(call, base, ndim, shape, strides, offset, dtype, out);
}

int64_t api_tensor_storage_offset(ts_tensor t) { return t ? from_handle(t)->storage_offset() : 0; }

ts_status api_tensor_resize(ts_call call, ts_tensor t, int32_t ndim, const int64_t* shape) {
  return guarded(call, [&] {
    if (!t || ndim < 0 || (ndim > 0 && !shape)) raise<ValueError>("resize: invalid arguments");
    from_handle(t)->resize(IntArrayRef(shape, size_t(ndim)), "resize");
  });
}

void api_tensor_bump_version(ts_tensor t) {
  if (t) from_handle(t)->bump_version();
}

uint64_t api_next_random_seed(ts_device device) { return next_random_seed(Device::from_abi(device)); }
int32_t api_num_threads() { return get_num_threads(); }
int32_t api_default_float_dtype() { return int32_t(get_default_dtype()); }

// --- 1.2: transforms
constexpr uint64_t kBackendKeys = (uint64_t(1) << TS_FIRST_TRANSFORM_KEY) - 1;

void* api_tensor_get_slot(ts_tensor t, int32_t slot) {
  if (!t || slot < 0 || slot >= kNumExtensionSlots) return nullptr;
  return from_handle(t)->extension(slot).data;
}

ts_status api_tensor_set_slot(ts_tensor t, int32_t slot, void* data, void (*destroy)(void*)) {
  return guarded(nullptr, [&] {
    if (!t) raise<ValueError>("tensor_set_slot: null tensor");
    if (slot < 0 || slot >= kNumExtensionSlots)
      raise<IndexError>("tensor_set_slot: slot {} is out of range [0, {})", slot, kNumExtensionSlots);
    ExtensionSlot& s = from_handle(t)->extension(slot);
    ExtensionSlot old = s;
    s = ExtensionSlot{data, destroy};
    if (old.data && old.destroy && old.data != data) old.destroy(old.data);
  });
}

ts_keyset api_tensor_keys(ts_tensor t) { return t ? from_handle(t)->key_set().raw() : 0; }

ts_status api_tensor_update_keys(ts_tensor t, ts_keyset add, ts_keyset remove) {
  return guarded(nullptr, [&] {
    if (!t) raise<ValueError>("tensor_update_keys: null tensor");
    if ((add | remove) & kBackendKeys)
      raise<ValueError>("tensor_update_keys: only transform keys (>= {}) may change, got add={:#x} remove={:#x}",
                        TS_FIRST_TRANSFORM_KEY, add, remove);
    auto* impl = from_handle(t);
    impl->set_key_set(DispatchKeySet((impl->key_set().raw() | add) & ~remove));
  });
}

uint64_t api_tensor_version(ts_tensor t) { return t ? from_handle(t)->version() : 0; }

void api_tls_keys(ts_keyset* included, ts_keyset* excluded) {
  const LocalDispatchKeySet& tls = local_dispatch_keys();
  if (included) *included = tls.included;
  if (excluded) *excluded = tls.excluded;
}

void api_set_tls_keys(ts_keyset included, ts_keyset excluded) {
  LocalDispatchKeySet& tls = local_dispatch_keys();
  tls.included = included;
  tls.excluded = excluded;
}

ts_status api_invoke_callback(ts_call call, int64_t id, ts_stack* stack) {
  return guarded(call, [&] {
    if (!stack) raise<ValueError>("invoke_callback: null stack");
    invoke_callback(id, stack);
  });
}

void api_release_callback(int64_t id) { release_callback(id); }

ts_operator api_call_operator_of(ts_call call) {
  if (!call) return nullptr;
  return reinterpret_cast<ts_operator>(const_cast<OperatorEntry*>(reinterpret_cast<CallContext*>(call)->op));
}

const char* api_operator_name(ts_operator op) {
  return op ? reinterpret_cast<const OperatorEntry*>(op)->name().c_str() : "";
}

ts_stream api_current_stream(ts_device device) {
  try {
    return Stream::current(Device::from_abi(device)).handle();
  } catch (const std::exception&) {
    return nullptr;  // an unknown device has only a default stream to speak of
  }
}

ts_status api_set_current_stream(ts_call call, ts_device device, ts_stream stream) {
  return guarded(call, [&] { Stream::set_current(Stream::from_handle(Device::from_abi(device), stream)); });
}

ts_status api_set_observer(ts_call call, const ts_observer* observer) {
  return guarded(call, [&] { set_observer(observer); });
}
int32_t api_observing() { return observer() ? 1 : 0; }

int32_t api_device_type_id(const char* name) {
  if (!name) return -1;
  try {
    return DeviceRegistry::instance().find_type_id(name);
  } catch (...) {
    return -1;
  }
}

const ts_host_api kHostApi = {
    sizeof(ts_host_api),
    TESSERA_ABI_MAJOR,
    TESSERA_ABI_MINOR,
    "0.1.0",
    api_set_error,
    api_warn,
    api_def_operator,
    api_register_kernel,
    api_register_fallthrough,
    api_register_fallback,
    api_register_device,
    api_find_dispatch_key,
    api_find_operator,
    api_call_operator,
    api_redispatch,
    api_tensor_retain,
    api_tensor_release,
    api_tensor_get_view,
    api_tensor_empty,
    api_tensor_alias,
    api_tensor_storage_offset,
    api_tensor_resize,
    api_tensor_bump_version,
    api_next_random_seed,
    api_num_threads,
    api_default_float_dtype,
    api_tensor_get_slot,
    api_tensor_set_slot,
    api_tensor_keys,
    api_tensor_update_keys,
    api_tensor_version,
    api_tls_keys,
    api_set_tls_keys,
    api_invoke_callback,
    api_release_callback,
    api_call_operator_of,
    api_operator_name,
    api_current_stream,
    api_set_current_stream,
    api_tensor_alias_dtype,
    api_set_observer,
    api_observing,
    observe_range,
    observe_sequence_nr,
    observe_memory,
    observe_device_span,
    api_device_type_id,
    api_register_process_group_backend,
    api_native_stream,
    api_tensor_use_count,
};

}  // namespace

const ts_host_api* api_table() { return &kHostApi; }

}  // namespace tessera::host

namespace tessera {
void set_warning_handler(WarningHandler handler) { host::install_warning_handler(handler); }
}  // namespace tessera

// Host start-up, the built-in operators, random seeds, threads, and small tensor helpers.
#include <tessera/boxing.h>
#include <tessera/cpu_fallback.h>
#include <tessera/device_registry.h>
#include <tessera/ops.h>
#include <tessera/runtime.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>

namespace tessera {

namespace detail {
extern const char* const kBuiltinSchemas[];
extern const size_t kNumBuiltinSchemas;
extern const unsigned char kBuiltinKinds[];
extern const int kBuiltinFunctionalOf[];

OperatorHandle builtin_operator(std::string_view name) {
  init();
  return Dispatcher::instance().find_or_throw(name);
}

void call(OperatorHandle op, ts_stack* stack, int n_returns) {
  Dispatcher::instance().call(op, stack);
  if (stack->size != n_returns)
    raise<RuntimeError>("{}: the kernel left {} values on the stack, the schema declares {} returns", op->name(),
                        stack->size, n_returns);
}
}  // namespace detail

void init() {
  static std::once_flag once;
  std::call_once(once, [] {
    auto& dispatcher = Dispatcher::instance();
    std::vector<OperatorEntry*> builtins(detail::kNumBuiltinSchemas);
    for (size_t i = 0; i < detail::kNumBuiltinSchemas; ++i) {
      builtins[i] = const_cast<OperatorEntry*>(dispatcher.def(detail::kBuiltinSchemas[i], "core"));
      builtins[i]->set_kind(OperatorKind(detail::kBuiltinKinds[i]));
    }
    for (size_t i = 0; i < detail::kNumBuiltinSchemas; ++i)
      if (int f = detail::kBuiltinFunctionalOf[i]; f >= 0) builtins[i]->set_functional(builtins[size_t(f)]);
    DeviceRegistry::instance().set_lazy_loader([](const std::string& name) { return load_plugin_for_device(name); },
                                               plugin_search_path_text);
    // A backend key without kernels: load the plugin of that device (type id == backend key).
    dispatcher.set_missing_kernel_hook([](int32_t key) {
      return load_plugin_for_device(DeviceRegistry::instance().name_of(key));
    });
    // A composite operator with no decomposition registered: load the plugin that has them.
    dispatcher.set_missing_composite_hook([] {
      require_lazy_loading("composites", "the decompositions of composite operators (core/ops.yaml)");
      return load_named_plugin("composites");
    });
    detail::install_cpu_fallback();  // from now on, a device's missing kernel may run on CPU
  });
}

namespace {
std::atomic<int> num_threads{0};
std::atomic<ScalarType> default_dtype{kFloat32};
}  // namespace

void set_default_dtype(ScalarType dtype) {
  if (!is_floating_point(dtype))
    raise<TypeError>("set_default_dtype: only floating-point types are supported as the default type, got {}",
                     name(dtype));
  default_dtype.store(dtype, std::memory_order_relaxed);
}

ScalarType get_default_dtype() { return default_dtype.load(std::memory_order_relaxed); }

// manual_seed and next_random_seed: generator.cpp.

void set_num_threads(int n) {
  if (n < 1) raise<ValueError>("set_num_threads: expected a positive number of threads, got {}", n);
  num_threads = n;
}

int get_num_threads() {
  // hardware_concurrency reads /sys on every call: ask once.
  static const int hardware = int(std::max(1u, std::thread::hardware_concurrency()));
  int n = num_threads.load(std::memory_order_relaxed);
  return n > 0 ? n : hardware;
}

namespace {
// A contiguous CPU tensor in page-locked memory from `entry`'s plugin.
Tensor empty_pinned(IntArrayRef shape, ScalarType dtype, const DeviceTypeEntry& entry) {
  const ts_device_desc& d = entry.desc;
  if (!d.host_allocate || !d.host_deallocate)
    raise<NotImplementedError>("pin_memory: device '{}' (plugin '{}') offers no page-locked host memory", entry.name,
                               entry.plugin);
  if (d.device_count && d.device_count(d.device_data) == 0)
    raise<RuntimeError>("pin_memory: device type '{}' (plugin '{}') has no devices{}", entry.name, entry.plugin,
                        entry.load_notes.empty() ? "" : fmt::format(" (when it loaded, the plugin said: {})", entry.load_notes));
  int64_t numel = 1;
  for (int64_t s : shape) numel *= s;
  size_t nbytes = size_t(numel * itemsize(dtype));
  void* data = d.host_allocate(d.device_data, nbytes);
  if (!data)
    raise<OutOfMemoryError>("pin_memory: {} could not allocate {} bytes of page-locked host memory: {}", entry.name,
                            nbytes, std::exchange(device_function_error(), {}));
  auto release = [&d, data, nbytes] { d.host_deallocate(d.device_data, data, nbytes); };
  Storage storage = Storage::adopt(new StorageImpl(Device(Device::kCpuType, 0), data, nbytes, release));
  storage->set_pinned_by(entry.type);
  return Tensor(IntrusivePtr<TensorImpl>::adopt(new TensorImpl(std::move(storage), dtype, shape, {}, 0)));
}
}  // namespace

Tensor to_device(const Tensor& t, Device device, bool non_blocking) {
  if (t.device() == device) return t;
  Tensor src = t.is_contiguous() ? t : contiguous(t);  // made contiguous on its own device
  auto& registry = DeviceRegistry::instance();
  const DeviceTypeEntry& from_entry = registry.require(src.device().type());
  const DeviceTypeEntry& to_entry = registry.require(device.type());
  const auto& from = from_entry.desc;
  const auto& to = to_entry.desc;
  // Device -> CPU without blocking lands in page-locked memory, which the copy may still fill.
  bool async_out = non_blocking && device.is_cpu() && from.copy_to_host_async && from.host_allocate;
  bool async_in = non_blocking && src.device().is_cpu() && to.copy_from_host_async &&
                  src.impl()->storage()->pinned_by() == device.type();
  Tensor out = async_out ? empty_pinned(src.sizes(), src.dtype(), from_entry) : empty(src.shape(), src.dtype(), device);
  size_t nbytes = size_t(src.numel() * itemsize(src.dtype()));
  if (nbytes == 0) return out;
  const void* s = src.impl()->data();
  void* d = out.impl()->data();
  auto check = [&](const DeviceTypeEntry& entry, Device on, ts_status status, const char* what) {
    if (status != TS_OK)
      check_device_call(entry, on.index(), fmt::format("{} of {} bytes from {} to {}", what, nbytes,
                                                       src.device().str(), device.str()).c_str(), status);
  };
  if (async_in) {
    check(to_entry, device, to.copy_from_host_async(to.device_data, device.index(), d, s, nbytes), "copy_from_host_async");
  } else if (async_out) {
    check(from_entry, src.device(), from.copy_to_host_async(from.device_data, src.device().index(), d, s, nbytes),
          "copy_to_host_async");
  } else if (from.host_accessible && to.host_accessible) {
    std::memcpy(d, s, nbytes);
  } else if (from.host_accessible) {
    check(to_entry, device, to.copy_from_host(to.device_data, device.index(), d, s, nbytes), "copy_from_host");
  } else if (to.host_accessible) {
    check(from_entry, src.device(), from.copy_to_host(from.device_data, src.device().index(), d, s, nbytes), "copy_to_host");
  } else {
    std::vector<char> staging(nbytes);
    check(from_entry, src.device(), from.copy_to_host(from.device_data, src.device().index(), staging.data(), s, nbytes),
          "copy_to_host");
    check(to_entry, device, to.copy_from_host(to.device_data, device.index(), d, staging.data(), nbytes), "copy_from_host");
  }
  return out;
}

Tensor pin_memory(const Tensor& t, std::string_view device_type) {
  if (!t.device().is_cpu())
    raise<ValueError>("pin_memory: only CPU tensors can be pinned, got a tensor on {}", t.device().str());
  if (is_pinned(t)) return t;
  // By type name, not Device(...): pinning needs the plugin, not a device index that exists.
  auto& registry = DeviceRegistry::instance();
  const DeviceTypeEntry* entry = registry.find(device_type);
  if (!entry && registry.try_lazy_load(std::string(device_type))) entry = registry.find(device_type);
  if (!entry) raise<ValueError>("pin_memory: no device type '{}' is loaded or found on the plugin path", device_type);
  Tensor src = t.is_contiguous() ? t : contiguous(t);
  Tensor out = empty_pinned(src.sizes(), src.dtype(), *entry);
  if (src.numel() > 0) std::memcpy(out.impl()->data(), src.impl()->data(), size_t(src.numel() * itemsize(src.dtype())));
  return out;
}

bool is_pinned(const Tensor& t) { return t.impl()->storage()->pinned_by() >= 0; }

Tensor tensor_from_values(std::span<const double> values, std::vector<int64_t> shape, ScalarType dtype) {
  int64_t numel = checked_numel(shape, "tensor_from_values");
  if (numel != int64_t(values.size()))
    raise<ValueError>("tensor_from_values: shape [{}] holds {} elements, got {} values", fmt::join(shape, ", "), numel,
                      values.size());
  Tensor t = empty(shape, dtype, Device(Device::kCpuType, 0));
  char* out = static_cast<char*>(t.host_data());
  int64_t isz = itemsize(dtype);
  for (int64_t i = 0; i < numel; ++i) {
    TS_DISPATCH_ALL(int32_t(dtype), raise<TypeError>("tensor_from_values: invalid dtype"),
                    *reinterpret_cast<scalar_t*>(out + i * isz) = static_cast<scalar_t>(
                        static_cast<sdk::opmath_t<scalar_t>>(values[size_t(i)])));
  }
  return t;
}

}  // namespace tessera

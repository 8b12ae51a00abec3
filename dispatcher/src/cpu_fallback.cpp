// The CPU fallback: runs an operator that a device plugin lacks on the CPU, with copies.
// The host does every transfer itself through the device's copy functions (never through
// the device's own kernels, except `copy_` for writing into a strided out= tensor), so a
// device that registers almost nothing can still run every operator the CPU has.
#include <tessera/cpu_fallback.h>
#include <tessera/device_registry.h>
#include <tessera/ops.h>
#include <tessera/runtime.h>

#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <string_view>

namespace tessera {

namespace {
std::atomic<int> override_state{-1};  // -1: the environment decides; 0 off; 1 on
std::atomic<bool> installed{false};

constexpr int32_t kCpuKey = int32_t(DispatchKey::CPU);
const Device kCpu(Device::kCpuType, 0);

bool environment_enabled() {
  const char* v = std::getenv("TESSERA_CPU_FALLBACK");
  if (!v) return true;
  std::string_view s(v);
  return !(s == "0" || s == "false" || s == "off" || s == "no");
}


const ts_device_desc& desc_of(Device d) { return DeviceRegistry::instance().require(d.type()).desc; }

void check_copy(ts_status status, const char* what, size_t nbytes, Device device) {
  if (status != TS_OK)
    raise<RuntimeError>("CPU fallback: {} of {} bytes on device '{}' failed with status {}", what, nbytes,
                        device.str(), status);
}

// Host -> device bytes, or a plain memcpy when the device memory is host memory.
void bytes_to_device(Device device, void* dst, const void* src, size_t nbytes) {
  if (nbytes == 0) return;
  const auto& d = desc_of(device);
  if (d.host_accessible) std::memcpy(dst, src, nbytes);
  else check_copy(d.copy_from_host(d.device_data, device.index(), dst, src, nbytes), "copy_from_host", nbytes, device);
}

void bytes_to_host(Device device, void* dst, const void* src, size_t nbytes) {
  if (nbytes == 0) return;
  const auto& d = desc_of(device);
  if (d.host_accessible) std::memcpy(dst, src, nbytes);
  else check_copy(d.copy_to_host(d.device_data, device.index(), dst, src, nbytes), "copy_to_host", nbytes, device);
}

// A contiguous CPU copy of a tensor on any device. A strided tensor is read as the span of
// storage it touches and gathered on the CPU: asking the device for `contiguous` could land
// back here when the device lacks it.
Tensor to_cpu(const Tensor& t) {
  if (t.device().is_cpu()) return t;
  if (t.is_contiguous()) return to_device(t, kCpu);
  if (t.numel() == 0) return empty(t.shape(), t.dtype(), kCpu);
  int64_t span = 1;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.stride(d) < 0)
      raise<NotImplementedError>("CPU fallback: cannot copy a tensor with negative stride {} (dim {}) from device '{}'",
                                 t.stride(d), d, t.device().str());
    span += (t.size(d) - 1) * t.stride(d);
  }
  Tensor flat = empty({span}, t.dtype(), kCpu);
  bytes_to_host(t.device(), flat.host_data(), t.impl()->data(), size_t(span * itemsize(t.dtype())));
  Tensor strided(IntrusivePtr<TensorImpl>::adopt(new TensorImpl(flat.impl()->storage(), t.dtype(), t.sizes(), t.strides(), 0)));
  return contiguous(strided);
}

// A copy of a CPU tensor on `device`, allocated by the host (not by the device's `empty`
// kernel, which may itself be missing and fall back to here).
Tensor to_backend(const Tensor& cpu, Device device) {
  Tensor src = cpu.is_contiguous() ? cpu : contiguous(cpu);
  size_t nbytes = size_t(src.numel() * itemsize(src.dtype()));
  Storage storage = Storage::adopt(new StorageImpl(device, nbytes));
  Tensor out(IntrusivePtr<TensorImpl>::adopt(new TensorImpl(std::move(storage), src.dtype(), src.sizes(), {}, 0)));
  bytes_to_device(device, out.impl()->data(), src.host_data(), nbytes);
  return out;
}

// Writes the CPU result of an in-place or out= argument into the device tensor it came from.
void write_back(const FunctionSchema& schema, const Tensor& target, const Tensor& cpu_value, int32_t key) {
  Tensor src = cpu_value.is_contiguous() ? cpu_value : contiguous(cpu_value);
  TensorImpl* impl = target.impl();
  if (!std::ranges::equal(target.sizes(), src.sizes()))  // the kernel resized its out= tensor
    impl->resize(src.sizes(), "CPU fallback");
  if (src.dtype() != target.dtype())
    raise<RuntimeError>("{} (CPU fallback): the CPU kernel changed argument dtype from {} to {}", schema.qualified_name(),
                        name(target.dtype()), name(src.dtype()));
  if (src.numel() > 0) {
    OperatorHandle copy_op = Dispatcher::instance().find("copy_");
    const KernelEntry* copy_kernel = copy_op ? copy_op->kernel(key) : nullptr;
    if (copy_kernel && !copy_kernel->fallthrough) {
      // The device's own copy_ handles any layout of the target; give it a same-device source.
      Tensor staged = to_backend(src, target.device());
      ts_value values[3];
      values[0] = {TS_VALUE_TENSOR, 0, {.tensor = target.handle()}};
      values[1] = {TS_VALUE_TENSOR, 0, {.tensor = staged.handle()}};
      values[2] = {TS_VALUE_BOOL, 0, {.b = 0}};
      ts_stack stack{sizeof(ts_stack), values, 3, 3};
      Dispatcher::instance().call_with_keys(copy_op, DispatchKeySet(DispatchKeySet::bit(key)), &stack);
      for (int i = 0; i < stack.size; ++i)
        if (values[i].tag == TS_VALUE_TENSOR) Tensor::adopt(values[i].u.tensor);  // drop the returned reference
    } else if (target.is_contiguous()) {
      bytes_to_device(target.device(), impl->data(), src.host_data(), size_t(src.numel() * itemsize(src.dtype())));
    } else {
      raise<NotImplementedError>(
          "{} (CPU fallback): cannot write the result into a non-contiguous tensor (shape [{}], strides [{}]) on device "
          "'{}': the device registers no 'copy_' kernel; register copy_ or pass a contiguous tensor",
          schema.qualified_name(), fmt::join(target.sizes(), ", "), fmt::join(target.strides(), ", "),
          target.device().str());
    }
  }
  impl->bump_version();
}

// The operators a backend key has its own kernels for.
std::vector<std::string> registered_at(int32_t key) {
  std::vector<std::string> names;
  for (OperatorHandle op : Dispatcher::instance().operators())
    if (auto* e = op->kernel(key); e && !e->fallthrough) names.push_back(op->name());
  std::ranges::sort(names);
  return names;
}

[[noreturn]] void raise_not_available(OperatorHandle op, int32_t key, std::string_view why) {
  std::vector<std::string> have;
  for (int32_t k = 0; k < kNumDispatchKeys; ++k)
    if (auto* e = op->kernel(k); e && !e->fallthrough) have.push_back(dispatch_key_name(k));
  raise<NotImplementedError>(
      "operator '{}' has no kernel for dispatch key '{}'; it has kernels for: [{}]. Device '{}' registers kernels for: "
      "[{}]. {}",
      op->name(), dispatch_key_name(key), fmt::join(have, ", "), DeviceRegistry::instance().name_of(key),
      fmt::join(registered_at(key), ", "), why);
}

bool cpu_can_run(OperatorHandle op) {
  DeviceRegistry::instance().require(Device::kCpuType);  // loads the CPU plugin if it is not yet
  const KernelEntry* k = op->kernel(kCpuKey);
  if (!k) k = Dispatcher::instance().fallback(kCpuKey);
  return k && !k->fallthrough;
}

void warn_once(OperatorHandle op, int32_t key) {
  static std::mutex mutex;
  static std::set<std::pair<OperatorHandle, int32_t>> warned;
  {
    std::lock_guard lock(mutex);
    if (!warned.insert({op, key}).second) return;
  }
  std::string message = fmt::format(
      "no kernel for device '{}', running it on CPU with copies (set TESSERA_CPU_FALLBACK=0 or "
      "tessera::set_cpu_fallback(false) to make this an error)",
      DeviceRegistry::instance().name_of(key));
  CallContext ctx{op, key, nullptr, {}};  // the host's warn names the operator from its call
  host_api()->warn(reinterpret_cast<ts_call>(&ctx), message.c_str());
}

// The device results go to: the first argument on the missing key's device, else a factory's
// `device` argument, else index 0 of that device type.
Device result_device(const ts_stack* stack, int32_t key) {
  for (int i = 0; i < stack->size; ++i) {
    const ts_value& v = stack->values[i];
    if (v.tag == TS_VALUE_TENSOR && v.u.tensor && from_handle(v.u.tensor)->device().type() == key)
      return from_handle(v.u.tensor)->device();
    if (v.tag == TS_VALUE_TENSOR_LIST)
      for (int64_t j = 0; j < v.u.tensors.size; ++j)
        if (v.u.tensors.data[j] && from_handle(v.u.tensors.data[j])->device().type() == key)
          return from_handle(v.u.tensors.data[j])->device();
  }
  for (int i = 0; i < stack->size; ++i)
    if (stack->values[i].tag == TS_VALUE_DEVICE && stack->values[i].u.device.type == key)
      return Device::from_abi(stack->values[i].u.device);
  return Device(key, 0);
}

Tensor borrowed(ts_tensor t) { return Tensor(IntrusivePtr<TensorImpl>::borrow(from_handle(t))); }
}  // namespace

void set_cpu_fallback(bool enabled) { override_state.store(enabled ? 1 : 0); }
void reset_cpu_fallback() { override_state.store(-1); }
bool cpu_fallback_enabled() {
  int s = override_state.load();
  return s < 0 ? environment_enabled() : s == 1;
}

namespace detail {

bool view_may_copy(const FunctionSchema& s) {
  return s.name == "contiguous" || s.name == "reshape" || s.name == "flatten" || s.name == "to";
}

bool cpu_fallback_can_run(OperatorHandle op) {
  return cpu_can_run(op) && (!op->schema().is_view() || view_may_copy(op->schema()));
}

bool is_fallback_backend_key(int32_t key) {
  return key == int32_t(DispatchKey::CUDA) || key == int32_t(DispatchKey::HIP) ||
         (key >= int32_t(DispatchKey::FirstDynamicBackend) && key <= int32_t(DispatchKey::LastDynamicBackend));
}

void install_cpu_fallback() { installed.store(true); }

bool run_cpu_fallback(OperatorHandle op, int32_t key, ts_stack* stack) {
  if (!installed.load() || !is_fallback_backend_key(key) || !DeviceRegistry::instance().find(key)) return false;
  const FunctionSchema& schema = op->schema();
  if (!cpu_fallback_enabled())
    raise_not_available(op, key, "The CPU fallback is off (TESSERA_CPU_FALLBACK=0 or tessera::set_cpu_fallback(false)).");
  if (!cpu_can_run(op)) raise_not_available(op, key, "The CPU has no kernel for it either, so it cannot fall back.");
  if (schema.is_view() && !view_may_copy(schema))
    raise_not_available(op, key, "It is a view operator: a result computed on CPU and copied back would not alias "
                                 "its input, so it does not fall back; register a kernel for it.");
  warn_once(op, key);

  const auto& args = schema.arguments;
  const int n_args = std::min<int>(stack->size, int(args.size()));
  const int n_returns = int(schema.returns.size());
  Device device = result_device(stack, key);

  // The CPU stack: tensors copied, lists rebuilt, a factory's device replaced by the CPU.
  std::vector<Tensor> originals(static_cast<size_t>(n_args)), copies(static_cast<size_t>(n_args));
  std::vector<std::vector<Tensor>> list_copies(static_cast<size_t>(n_args));
  std::vector<std::vector<ts_tensor>> list_handles(static_cast<size_t>(n_args));
  std::vector<ts_value> values(size_t(std::max({stack->capacity, n_args, n_returns, 1})));
  for (int i = 0; i < n_args; ++i) {
    ts_value v = stack->values[i];
    if (v.tag == TS_VALUE_TENSOR && v.u.tensor) {
      originals[size_t(i)] = borrowed(v.u.tensor);
      copies[size_t(i)] = to_cpu(originals[size_t(i)]);
      v.u.tensor = copies[size_t(i)].handle();
    } else if (v.tag == TS_VALUE_TENSOR_LIST) {
      auto& held = list_copies[size_t(i)];
      auto& handles = list_handles[size_t(i)];
      for (int64_t j = 0; j < v.u.tensors.size; ++j) {
        ts_tensor t = v.u.tensors.data[j];
        held.push_back(t ? to_cpu(borrowed(t)) : Tensor());  // Tensor?[] keeps its Nones
        handles.push_back(held.back().handle());
      }
      v.u.tensors.data = handles.data();
    } else if (v.tag == TS_VALUE_DEVICE && v.u.device.type == key) {
      v.u.device = kCpu.to_abi();
    }
    values[size_t(i)] = v;
  }
  ts_stack cpu_stack{sizeof(ts_stack), values.data(), n_args, int32_t(values.size())};
  Dispatcher::instance().call_with_keys(op, DispatchKeySet(DispatchKeySet::bit(kCpuKey)), &cpu_stack);

  // Own every CPU return before anything below can throw.
  std::vector<ts_value> returns(values.begin(), values.begin() + cpu_stack.size);
  std::vector<Tensor> cpu_returns(returns.size());
  for (size_t r = 0; r < returns.size(); ++r)
    if (returns[r].tag == TS_VALUE_TENSOR && returns[r].u.tensor) cpu_returns[r] = Tensor::adopt(returns[r].u.tensor);

  // In-place and out= arguments: what the CPU kernel wrote goes back into the device tensor.
  for (int i = 0; i < n_args; ++i) {
    const auto& alias = args[size_t(i)].alias;
    if (!alias || !alias->is_write) continue;
    if (!originals[size_t(i)].defined() || originals[size_t(i)].device().is_cpu()) continue;
    write_back(schema, originals[size_t(i)], copies[size_t(i)], key);
  }

  for (size_t r = 0; r < returns.size(); ++r) {
    ts_value& v = returns[r];
    if (v.tag == TS_VALUE_TENSOR_LIST)
      raise<NotImplementedError>("{} (CPU fallback): returning a list of tensors is not supported", op->name());
    if (v.tag != TS_VALUE_TENSOR || !cpu_returns[r].defined()) continue;
    // A return that is a written argument is that argument's original device tensor.
    const auto& ret_alias = r < schema.returns.size() ? schema.returns[r].alias : std::nullopt;
    Tensor result;
    if (ret_alias && ret_alias->is_write)
      for (int i = 0; i < n_args && !result.defined(); ++i)
        if (args[size_t(i)].alias && args[size_t(i)].alias->set == ret_alias->set) result = originals[size_t(i)];
    if (!result.defined()) result = to_backend(cpu_returns[r], device);
    v.u.tensor = result.release_handle();
  }
  std::copy(returns.begin(), returns.end(), stack->values);
  stack->size = int32_t(returns.size());
  return true;
}

}  // namespace detail
}  // namespace tessera

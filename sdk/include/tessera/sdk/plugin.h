#pragma once
// Header-only C++ helpers for plugin authors, over the C ABI alone: RAII tensor handles,
// typed argument unpacking, registration, and exception-to-status at the edge.
// A plugin built with these has no link dependency on the host's C++ symbols.
#include <tessera/abi.h>
#include <tessera/sdk/dtype.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <optional>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace tessera::sdk {

// The host table, set once when the plugin is initialised.
inline const ts_host_api*& host_ptr() {
  static const ts_host_api* host = nullptr;
  return host;
}
inline const ts_host_api& host() { return *host_ptr(); }

// The host's default floating dtype; float32 on a 1.0 host, which does not have it.
inline int32_t default_float_dtype() {
  const ts_host_api& h = host();
  return TS_STRUCT_HAS(&h, ts_host_api, default_float_dtype) && h.default_float_dtype ? h.default_float_dtype()
                                                                                       : TS_FLOAT32;
}

// The ts_call of the kernel running on this thread (NULL outside kernels): operators called
// from a kernel (sdk/ops.h) report their errors on it.
inline ts_call& current_call() {
  thread_local ts_call call = nullptr;
  return call;
}

// True when the host has the functions of ABI 1.2 (transforms).
inline bool host_has_transforms() {
  const ts_host_api& h = host();
  return TS_STRUCT_HAS(&h, ts_host_api, release_callback) && h.release_callback;
}

// Adds `exclude` to the thread's excluded keys for its lifetime (redispatch below a transform).
class ExcludeKeysGuard {
 public:
  explicit ExcludeKeysGuard(ts_keyset exclude) {
    host().tls_keys(&included_, &excluded_);
    host().set_tls_keys(included_, excluded_ | exclude);
  }
  ~ExcludeKeysGuard() { host().set_tls_keys(included_, excluded_); }
  ExcludeKeysGuard(const ExcludeKeysGuard&) = delete;
  ExcludeKeysGuard& operator=(const ExcludeKeysGuard&) = delete;

 private:
  ts_keyset included_ = 0, excluded_ = 0;
};

// Concatenates anything streamable: the SDK needs no formatting library.
template <class... Args>
std::string cat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

// "[2, 3]": a shape (or any int list) as messages print it.
inline std::string shape_text(std::span<const int64_t> shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += cat(i ? ", " : "", shape[i]);
  return text + "]";
}

// An error a kernel raises; the edge turns it into (status, message) for the host.
class Error : public std::runtime_error {
 public:
  Error(ts_status status, const std::string& message) : std::runtime_error(message), status_(status) {}
  ts_status status() const { return status_; }
 private:
  ts_status status_;
};
// A host call failed; the host already holds the message, so the edge only passes the status on.
struct HostFailure {
  ts_status status;
};

template <class... Args> [[noreturn]] void fail(ts_status status, const Args&... args) {
  throw Error(status, cat(args...));
}
#define TS_SDK_CHECK(cond, status, ...) \
  do { if (!(cond)) ::tessera::sdk::fail(status, __VA_ARGS__); } while (0)

inline void check_host(ts_status s) {
  if (s != TS_OK) throw HostFailure{s};
}

// An owning (or borrowing) tensor handle with its DLPack-shaped view cached.
class TensorRef {
 public:
  TensorRef() = default;
  static TensorRef adopt(ts_tensor t) { return TensorRef(t, true); }
  static TensorRef borrow(ts_tensor t) { return TensorRef(t, false); }
  // A new owning reference to a borrowed tensor.
  static TensorRef retain(ts_tensor t) { host().tensor_retain(t); return TensorRef(t, true); }
  TensorRef(const TensorRef& o) : TensorRef(o.t_, true) { if (t_) host().tensor_retain(t_); }
  TensorRef(TensorRef&& o) noexcept : t_(std::exchange(o.t_, nullptr)), owned_(o.owned_), v_(o.v_) {}
  TensorRef& operator=(TensorRef o) noexcept {
    std::swap(t_, o.t_); std::swap(owned_, o.owned_); std::swap(v_, o.v_);
    return *this;
  }
  ~TensorRef() { if (t_ && owned_) host().tensor_release(t_); }

  bool defined() const { return t_ != nullptr; }
  ts_tensor handle() const { return t_; }
  // Hands out a new reference (for a kernel's return slot).
  ts_tensor new_reference() const { host().tensor_retain(t_); return t_; }
  const ts_tensor_view& view() const { return v_; }
  int64_t dim() const { return v_.ndim; }
  std::span<const int64_t> sizes() const { return {v_.shape, size_t(v_.ndim)}; }
  std::span<const int64_t> strides() const { return {v_.strides, size_t(v_.ndim)}; }
  int64_t size(int64_t d) const { return v_.shape[d]; }
  int64_t stride(int64_t d) const { return v_.strides[d]; }
  int64_t numel() const { return v_.numel; }
  int32_t dtype() const { return v_.dtype; }
  ts_device device() const { return v_.device; }
  int64_t itemsize() const { return dtype_itemsize(v_.dtype); }
  void* data() const { return static_cast<char*>(v_.data) + v_.byte_offset; }
  template <class T> T* data() const { return static_cast<T*>(data()); }
  int64_t storage_offset() const { return v_.byte_offset / itemsize(); }
  bool is_contiguous() const {
    int64_t expected = 1;
    for (int64_t d = dim() - 1; d >= 0; --d) {
      if (v_.shape[d] == 1) continue;
      if (v_.strides[d] != expected) return numel() == 0;
      expected *= v_.shape[d];
    }
    return true;
  }
  std::vector<int64_t> shape_vector() const { return {v_.shape, v_.shape + v_.ndim}; }
  void bump_version() const { host().tensor_bump_version(t_); }
  // Re-reads the view after the host changed the tensor (resize).
  void refresh() { load_view(); }

 private:
  TensorRef(ts_tensor t, bool owned) : t_(t), owned_(owned) { if (t_) load_view(); }
  void load_view() {
    v_ = {};
    v_.struct_size = sizeof(ts_tensor_view);
    check_host(host().tensor_get_view(t_, &v_));
  }
  ts_tensor t_ = nullptr;
  bool owned_ = false;
  ts_tensor_view v_{};
};

// Argument checks every device's kernels make with the same messages. `what` names the argument.
// TypeError unless `t` has a floating dtype.
inline void require_floating(const char* op, const TensorRef& t, const char* what) {
  TS_SDK_CHECK(is_floating(t.dtype()), TS_ERROR_TYPE, op, ": expected ", what,
               " of a floating dtype (float16, bfloat16, float32, float64), got ", dtype_name(t.dtype()));
}
// ValueError unless `t` has exactly `shape`.
inline void require_shape(const char* op, const TensorRef& t, std::span<const int64_t> shape, const char* what) {
  const auto sizes = t.sizes();
  TS_SDK_CHECK(std::equal(shape.begin(), shape.end(), sizes.begin(), sizes.end()), TS_ERROR_VALUE, op, ": expected ",
               what, " of shape ", shape_text(shape), ", got ", shape_text(sizes));
}

// A device whose memory is ordinary host memory (malloc/free/memcpy), `count` devices of it:
// for prototypes, tests, and devices that share host memory. Override any slot afterwards.
inline ts_device_desc host_memory_device(const char* name, int32_t count = 1) {
  ts_device_desc d{};
  d.struct_size = sizeof d;
  d.name = name;
  d.host_accessible = 1;
  d.device_data = reinterpret_cast<void*>(intptr_t(count));
  d.device_count = [](void* data) { return int32_t(reinterpret_cast<intptr_t>(data)); };
  d.allocate = [](void*, int32_t, size_t n) { return std::malloc(n ? n : 1); };
  d.deallocate = [](void*, int32_t, void* p, size_t) { std::free(p); };
  auto copy = [](void*, int32_t, void* dst, const void* src, size_t n) -> ts_status {
    if (n) std::memmove(dst, src, n);
    return TS_OK;
  };
  d.copy_to_host = copy;
  d.copy_from_host = copy;
  d.copy_within = copy;
  return d;
}

// Factory helpers for kernels.
inline TensorRef empty(ts_call call, std::span<const int64_t> shape, int32_t dtype, ts_device device,
                       std::span<const int64_t> strides = {}) {
  ts_tensor out = nullptr;
  check_host(host().tensor_empty(call, int32_t(shape.size()), shape.data(), strides.empty() ? nullptr : strides.data(),
                                 dtype, device, &out));
  return TensorRef::adopt(out);
}
inline TensorRef alias(ts_call call, const TensorRef& base, std::span<const int64_t> shape,
                       std::span<const int64_t> strides, int64_t storage_offset) {
  ts_tensor out = nullptr;
  check_host(host().tensor_alias(call, base.handle(), int32_t(shape.size()), shape.data(), strides.data(),
                                 storage_offset, &out));
  return TensorRef::adopt(out);
}
// A view reinterpreting base's storage as `dtype` (1.5): offset in elements of `dtype`.
inline TensorRef alias_as(ts_call call, const TensorRef& base, std::span<const int64_t> shape,
                          std::span<const int64_t> strides, int64_t storage_offset, int32_t dtype) {
  if (!TS_STRUCT_HAS(&host(), ts_host_api, tensor_alias_dtype))
    fail(TS_ERROR_NOT_IMPLEMENTED, "alias_as: the host predates ABI 1.5 (no dtype-changing views)");
  ts_tensor out = nullptr;
  check_host(host().tensor_alias_dtype(call, base.handle(), int32_t(shape.size()), shape.data(), strides.data(),
                                       storage_offset, dtype, &out));
  return TensorRef::adopt(out);
}
// ABI 1.6: reports for an observer (the profiler). observing() is false on an older host and
// while nobody observes, so a reporter checks it before building a report; the observe_*
// helpers check it themselves.
inline bool observing() { return TS_STRUCT_HAS(&host(), ts_host_api, observing) && host().observing(); }
inline void observe_range(int32_t phase, const char* name, int64_t sequence_nr = -1) {
  if (observing()) host().observe_range(phase, name, sequence_nr);
}
inline void observe_sequence_nr(int64_t sequence_nr) {
  if (observing()) host().observe_sequence_nr(sequence_nr);
}
inline void observe_memory(ts_device device, const void* ptr, int64_t nbytes, int64_t allocated) {
  if (observing()) host().observe_memory(device, ptr, nbytes, allocated);
}
inline void observe_device_span(ts_device device, const char* name, int64_t begin_ns, int64_t end_ns) {
  if (observing()) host().observe_device_span(device, name, begin_ns, end_ns);
}
// A plugin whose kernels run asynchronously (on a GPU) times them for the profiler: while
// somebody observes (ABI 1.6), `begin` runs before each of this plugin's kernels with the call
// and its arguments, and `end` after it (also when it throws) with what begin returned. Both
// must not throw. Install with set_kernel_timer during registration.
struct KernelTimer {
  void* (*begin)(ts_call call, const ts_stack* arguments);
  void (*end)(ts_call call, void* token);
};

namespace detail {
inline const KernelTimer*& kernel_timer() {
  static const KernelTimer* timer = nullptr;  // one per plugin (the SDK is compiled into each)
  return timer;
}
}  // namespace detail
inline void set_kernel_timer(const KernelTimer* timer) { detail::kernel_timer() = timer; }

// A range observed from construction to destruction (ends also when an exception leaves it).
class ObservedRange {
 public:
  explicit ObservedRange(const char* name, int64_t sequence_nr = -1) : active_(observing()) {
    if (active_) host().observe_range(0, name, sequence_nr);
  }
  ~ObservedRange() {
    if (active_) host().observe_range(1, "", -1);
  }
  ObservedRange(const ObservedRange&) = delete;
  ObservedRange& operator=(const ObservedRange&) = delete;

 private:
  bool active_;
};

inline void resize(ts_call call, TensorRef& t, std::span<const int64_t> shape) {
  check_host(host().tensor_resize(call, t.handle(), int32_t(shape.size()), shape.data()));
  t.refresh();
}

// A Scalar argument: integer, floating or boolean.
struct ScalarArg {
  enum Kind { Int, Double, Bool } kind = Int;
  int64_t i = 0;
  double d = 0;
  double to_double() const { return kind == Double ? d : double(i); }
  int64_t to_int() const { return kind == Double ? int64_t(d) : i; }
};

// Typed access to a kernel's boxed stack, and its return slots.
class Args {
 public:
  Args(ts_call call, ts_keyset keys, ts_stack* stack) : call_(call), keys_(keys), stack_(stack) {}
  ts_call call() const { return call_; }
  ts_keyset keys() const { return keys_; }
  int size() const { return stack_->size; }
  const ts_value& value(int i) const {
    TS_SDK_CHECK(i < stack_->size, TS_ERROR_VALUE, "expected at least ", i + 1, " arguments, got ", stack_->size);
    return stack_->values[i];
  }
  bool is_none(int i) const { return i >= stack_->size || stack_->values[i].tag == TS_VALUE_NONE; }

  TensorRef tensor(int i) const {
    const ts_value& v = value(i);
    TS_SDK_CHECK(v.tag == TS_VALUE_TENSOR && v.u.tensor, TS_ERROR_TYPE, "argument ", i, ": expected a tensor");
    return TensorRef::borrow(v.u.tensor);
  }
  std::optional<TensorRef> optional_tensor(int i) const {
    if (is_none(i)) return std::nullopt;
    return tensor(i);
  }
  std::vector<TensorRef> tensor_list(int i) const {
    const ts_value& v = value(i);
    TS_SDK_CHECK(v.tag == TS_VALUE_TENSOR_LIST, TS_ERROR_TYPE, "argument ", i, ": expected a list of tensors");
    std::vector<TensorRef> out;
    for (int64_t j = 0; j < v.u.tensors.size; ++j) {
      TS_SDK_CHECK(v.u.tensors.data[j], TS_ERROR_VALUE, "argument ", i, ": tensor ", j, " of the list is undefined");
      out.push_back(TensorRef::borrow(v.u.tensors.data[j]));
    }
    return out;
  }
  // A Tensor?[] argument: None entries (null handles on the stack) are undefined TensorRefs.
  std::vector<TensorRef> optional_tensor_list(int i) const {
    const ts_value& v = value(i);
    TS_SDK_CHECK(v.tag == TS_VALUE_TENSOR_LIST, TS_ERROR_TYPE, "argument ", i, ": expected a list of optional tensors");
    std::vector<TensorRef> out;
    out.reserve(size_t(v.u.tensors.size));
    for (int64_t j = 0; j < v.u.tensors.size; ++j)
      out.push_back(v.u.tensors.data[j] ? TensorRef::borrow(v.u.tensors.data[j]) : TensorRef());
    return out;
  }
  int64_t to_int(int i) const {
    const ts_value& v = value(i);
    if (v.tag == TS_VALUE_INT) return v.u.i;
    if (v.tag == TS_VALUE_BOOL) return v.u.b;
    fail(TS_ERROR_TYPE, "argument ", i, ": expected an integer");
  }
  std::optional<int64_t> optional_int(int i) const {
    if (is_none(i)) return std::nullopt;
    return to_int(i);
  }
  double to_double(int i) const {
    const ts_value& v = value(i);
    if (v.tag == TS_VALUE_DOUBLE) return v.u.d;
    if (v.tag == TS_VALUE_INT) return double(v.u.i);
    if (v.tag == TS_VALUE_BOOL) return v.u.b;
    fail(TS_ERROR_TYPE, "argument ", i, ": expected a number");
  }
  std::optional<double> optional_double(int i) const {
    if (is_none(i)) return std::nullopt;
    return to_double(i);
  }
  bool to_bool(int i) const {
    const ts_value& v = value(i);
    if (v.tag == TS_VALUE_BOOL) return v.u.b != 0;
    if (v.tag == TS_VALUE_INT) return v.u.i != 0;
    fail(TS_ERROR_TYPE, "argument ", i, ": expected a bool");
  }
  ScalarArg scalar(int i) const {
    const ts_value& v = value(i);
    switch (v.tag) {
      case TS_VALUE_INT: return {ScalarArg::Int, v.u.i, 0};
      case TS_VALUE_DOUBLE: return {ScalarArg::Double, 0, v.u.d};
      case TS_VALUE_BOOL: return {ScalarArg::Bool, v.u.b, 0};
      default: fail(TS_ERROR_TYPE, "argument ", i, ": expected a number (Scalar)");
    }
  }
  std::optional<ScalarArg> optional_scalar(int i) const {
    if (is_none(i)) return std::nullopt;
    return scalar(i);
  }
  std::span<const int64_t> int_list(int i) const {
    const ts_value& v = value(i);
    if (v.tag == TS_VALUE_INT) return {&v.u.i, 1};  // int[1] accepts a single int
    TS_SDK_CHECK(v.tag == TS_VALUE_INT_LIST, TS_ERROR_TYPE, "argument ", i, ": expected a list of integers");
    return {v.u.ints.data, size_t(v.u.ints.size)};
  }
  std::optional<std::span<const int64_t>> optional_int_list(int i) const {
    if (is_none(i)) return std::nullopt;
    return int_list(i);
  }
  std::optional<int32_t> optional_dtype(int i) const {
    if (is_none(i)) return std::nullopt;
    const ts_value& v = value(i);
    TS_SDK_CHECK(v.tag == TS_VALUE_DTYPE || v.tag == TS_VALUE_INT, TS_ERROR_TYPE, "argument ", i, ": expected a dtype");
    TS_SDK_CHECK(dtype_valid(int32_t(v.u.i)), TS_ERROR_VALUE, "argument ", i, ": invalid dtype code ", v.u.i);
    return int32_t(v.u.i);
  }
  std::optional<ts_device> optional_device(int i) const {
    if (is_none(i)) return std::nullopt;
    const ts_value& v = value(i);
    TS_SDK_CHECK(v.tag == TS_VALUE_DEVICE, TS_ERROR_TYPE, "argument ", i, ": expected a device");
    return v.u.device;
  }
  std::optional<std::string_view> optional_str(int i) const {
    if (is_none(i)) return std::nullopt;
    const ts_value& v = value(i);
    TS_SDK_CHECK(v.tag == TS_VALUE_STRING, TS_ERROR_TYPE, "argument ", i, ": expected a string");
    return std::string_view(v.u.str);
  }

  // Return slots. Call after reading every argument: returns overwrite the argument slots.
  void returns(std::initializer_list<ts_value> values) {
    TS_SDK_CHECK(int(values.size()) <= stack_->capacity, TS_ERROR, "stack capacity ", stack_->capacity,
                 " is too small for ", values.size(), " returns");
    int i = 0;
    for (const ts_value& v : values) stack_->values[i++] = v;
    stack_->size = i;
  }
  // Return slots from a stack another call filled (tensor returns keep their references).
  void returns_values(std::span<const ts_value> values) {
    TS_SDK_CHECK(int(values.size()) <= stack_->capacity, TS_ERROR, "stack capacity ", stack_->capacity,
                 " is too small for ", values.size(), " returns");
    for (size_t i = 0; i < values.size(); ++i) stack_->values[i] = values[i];
    stack_->size = int(values.size());
  }
  // Returns a tensor the kernel owns (moves the reference out).
  void return_tensor(TensorRef&& t) { returns({tensor_value(std::move(t))}); }
  // Returns a tensor that was an argument (in-place and out= variants): adds a reference.
  void return_argument(const TensorRef& t) { returns({ts_value{TS_VALUE_TENSOR, 0, {.tensor = t.new_reference()}}}); }
  static ts_value tensor_value(TensorRef&& t) {
    ts_value v{TS_VALUE_TENSOR, 0, {}};
    v.u.tensor = t.new_reference();
    TensorRef drop = std::move(t);
    return v;
  }

 private:
  ts_call call_;
  ts_keyset keys_;
  ts_stack* stack_;
};

using KernelFn = void (*)(Args&);

// Boxed values for calling other operators from a kernel.
inline ts_value value(const TensorRef& t) { ts_value v{TS_VALUE_TENSOR, 0, {}}; v.u.tensor = t.handle(); return v; }
inline ts_value value(int64_t i) { ts_value v{TS_VALUE_INT, 0, {}}; v.u.i = i; return v; }
inline ts_value value(double d) { ts_value v{TS_VALUE_DOUBLE, 0, {}}; v.u.d = d; return v; }
inline ts_value value(bool b) { ts_value v{TS_VALUE_BOOL, 0, {}}; v.u.b = b; return v; }
inline ts_value none() { return ts_value{TS_VALUE_NONE, 0, {}}; }
inline ts_value dtype_value(int32_t dtype) { ts_value v{TS_VALUE_DTYPE, 0, {}}; v.u.i = dtype; return v; }
inline ts_value int_list_value(std::span<const int64_t> l) {
  ts_value v{TS_VALUE_INT_LIST, 0, {}};
  v.u.ints.data = l.data();
  v.u.ints.size = int64_t(l.size());
  return v;
}

// An operator resolved once (at registration) and called from kernels through the full
// dispatcher, e.g. a kernel that needs `contiguous` of its input.
class Operator {
 public:
  Operator() = default;
  explicit Operator(const char* name) : name_(name) {}
  // Calls the operator; returns its first return, a tensor.
  TensorRef call(ts_call call, std::initializer_list<ts_value> args) const {
    if (!op_) {
      op_ = host().find_operator(name_);
      TS_SDK_CHECK(op_, TS_ERROR, "operator '", name_, "' does not exist");
    }
    ts_value values[16];
    TS_SDK_CHECK(args.size() <= 16, TS_ERROR, "too many arguments for '", name_, "'");
    int n = 0;
    for (const ts_value& v : args) values[n++] = v;
    ts_stack stack{sizeof(ts_stack), values, n, 16};
    check_host(host().call_operator(call, op_, &stack));
    TS_SDK_CHECK(stack.size >= 1 && values[0].tag == TS_VALUE_TENSOR, TS_ERROR, "operator '", name_,
                 "' returned no tensor");
    return TensorRef::adopt(values[0].u.tensor);
  }
 private:
  const char* name_ = nullptr;
  mutable ts_operator op_ = nullptr;  // resolved on first use (a benign race: same value)
};

namespace detail {
// The edge: no exception leaves a kernel.
inline ts_status run_kernel(void* fn, ts_call call, ts_keyset keys, ts_stack* stack) noexcept {
  struct CallScope {  // restores the outer kernel's call when this one returns
    ts_call saved = std::exchange(current_call(), nullptr);
    explicit CallScope(ts_call c) { current_call() = c; }
    ~CallScope() { current_call() = saved; }
  } scope(call);
  try {
    Args args(call, keys, stack);
    const KernelTimer* timer = kernel_timer();
    if (timer && observing()) [[unlikely]] {
      struct Timed {  // end() also when the kernel throws
        const KernelTimer* timer;
        ts_call call;
        void* token;
        ~Timed() { timer->end(call, token); }
      } timed{timer, call, timer->begin(call, stack)};
      reinterpret_cast<KernelFn>(fn)(args);
    } else {
      reinterpret_cast<KernelFn>(fn)(args);
    }
    return TS_OK;
  } catch (const HostFailure& e) {
    return e.status;
  } catch (const Error& e) {
    host().set_error(call, e.what());
    return e.status();
  } catch (const std::bad_alloc&) {
    host().set_error(call, "out of memory in a kernel");
    return TS_ERROR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    host().set_error(call, e.what());
    return TS_ERROR;
  } catch (...) {
    host().set_error(call, "unknown exception in a kernel");
    return TS_ERROR;
  }
}
}  // namespace detail

// The edge of a ts_device_desc function (1.3): no exception leaves it; its message goes to
// the host with set_error(NULL, ...), which raises it naming the device and `what`.
//   return sdk::device_call("stream_synchronize", [&] { ... });
template <class F>
ts_status device_call(const char* what, F&& body) noexcept {
  auto fail = [&](ts_status status, const char* message) {
    host().set_error(nullptr, cat(what, ": ", message).c_str());
    return status;
  };
  try {
    body();
    return TS_OK;
  } catch (const HostFailure& e) {
    return e.status;
  } catch (const Error& e) {
    return fail(e.status(), e.what());
  } catch (const std::bad_alloc&) {
    return fail(TS_ERROR_OUT_OF_MEMORY, "out of host memory");
  } catch (const std::exception& e) {
    return fail(TS_ERROR, e.what());
  } catch (...) {
    return fail(TS_ERROR, "unknown exception");
  }
}

// Registration, valid inside the plugin's register function.
class Registrar {
 public:
  explicit Registrar(ts_registrar reg) : reg_(reg) {}
  void def(const char* schema) { check_host(host().def_operator(reg_, schema)); }
  void kernel(const char* op, ts_dispatch_key key, KernelFn fn) {
    check_host(host().register_kernel(reg_, op, key, &detail::run_kernel, reinterpret_cast<void*>(fn)));
  }
  void boxed_kernel(const char* op, ts_dispatch_key key, ts_kernel_fn fn, void* data) {
    check_host(host().register_kernel(reg_, op, key, fn, data));
  }
  void fallthrough(const char* op, ts_dispatch_key key) { check_host(host().register_fallthrough(reg_, op, key)); }
  void fallback(ts_dispatch_key key, KernelFn fn) {
    check_host(host().register_fallback(reg_, key, &detail::run_kernel, reinterpret_cast<void*>(fn)));
  }
  ts_dispatch_key device(const ts_device_desc& desc) {
    ts_dispatch_key key = -1;
    check_host(host().register_device(reg_, &desc, &key));
    return key;
  }
  // The device type id (ts_device.type of its tensors) of a device this plugin registered with
  // device(desc) (ABI 1.6). It is not the dispatch key device() returned, in general.
  int32_t device_type(const char* name) const {
    if (!TS_STRUCT_HAS(&host(), ts_host_api, device_type_id))
      fail(TS_ERROR_NOT_IMPLEMENTED, "device_type: the host predates ABI 1.6 (no device_type_id)");
    const int32_t type = host().device_type_id(name);
    if (type < 0) fail(TS_ERROR_VALUE, "device_type: no device type named '", name, "' is registered");
    return type;
  }
  // Registers a process-group backend (ABI 1.7: Gloo, NCCL, a vendor's collectives library).
  void process_group_backend(const ts_process_group_backend& desc) {
    if (!TS_STRUCT_HAS(&host(), ts_host_api, register_process_group_backend))
      fail(TS_ERROR_NOT_IMPLEMENTED, "process_group_backend: the host predates ABI 1.7");
    check_host(host().register_process_group_backend(reg_, &desc));
  }
  ts_registrar raw() const { return reg_; }

 private:
  ts_registrar reg_;
};

namespace detail {
// The handshake, plugin side: always describe ourselves, then check the host, then register.
inline ts_status plugin_init(const ts_host_api* host_api, ts_registrar reg, ts_plugin_info* info, const char* name,
                             const char* version, int32_t min_host_minor, void (*register_fn)(Registrar&)) noexcept {
  if (!info) return TS_ERROR_INCOMPATIBLE;
  if (TS_STRUCT_HAS(info, ts_plugin_info, name)) info->name = name;
  if (TS_STRUCT_HAS(info, ts_plugin_info, version)) info->version = version;
  if (TS_STRUCT_HAS(info, ts_plugin_info, abi_major)) info->abi_major = TESSERA_ABI_MAJOR;
  if (TS_STRUCT_HAS(info, ts_plugin_info, abi_minor)) info->abi_minor = TESSERA_ABI_MINOR;
  if (TS_STRUCT_HAS(info, ts_plugin_info, min_host_abi_minor)) info->min_host_abi_minor = min_host_minor;
  if (!host_api || host_api->struct_size < offsetof(ts_host_api, set_error) + sizeof(void*))
    return TS_ERROR_INCOMPATIBLE;
  if (host_api->abi_major != TESSERA_ABI_MAJOR || host_api->abi_minor < min_host_minor) {
    host_api->set_error(nullptr, cat("plugin '", name, "' needs host ABI ", TESSERA_ABI_MAJOR, ".", min_host_minor,
                                     " or a later minor, got ", host_api->abi_major, ".", host_api->abi_minor)
                                     .c_str());
    return TS_ERROR_INCOMPATIBLE;
  }
  host_ptr() = host_api;
  try {
    Registrar registrar(reg);
    register_fn(registrar);
    return TS_OK;
  } catch (const HostFailure& e) {
    return e.status;
  } catch (const std::exception& e) {
    host_api->set_error(nullptr, e.what());
    return TS_ERROR;
  } catch (...) {
    host_api->set_error(nullptr, "unknown exception during plugin registration");
    return TS_ERROR;
  }
}
}  // namespace detail

}  // namespace tessera::sdk

// Defines the plugin's one exported entry point. REGISTER_FN: void(tessera::sdk::Registrar&).
#define TESSERA_PLUGIN(NAME, VERSION, MIN_HOST_ABI_MINOR, REGISTER_FN)                                       \
  extern "C" TS_EXPORT ts_status tessera_plugin_init(const ts_host_api* host, ts_registrar reg,              \
                                                     ts_plugin_info* info) {                                 \
    return ::tessera::sdk::detail::plugin_init(host, reg, info, NAME, VERSION, MIN_HOST_ABI_MINOR, REGISTER_FN); \
  }

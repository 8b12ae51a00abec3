#pragma once
// The dispatcher: operators, their per-key kernel tables, backend fallbacks, fallthroughs,
// listeners and introspection. Registration takes a lock; calls take none: each table
// slot is an atomic pointer to an immutable KernelEntry that is never freed while the
// process lives (entries replaced by re-registration are parked, not deleted).
#include <tessera/dispatch_key.h>
#include <tessera/error.h>
#include <tessera/schema.h>

#include <array>
#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace tessera {

// What ops.yaml says an operator is: a primitive (devices give kernels) or a composite, written
// once as a decomposition into other operators (composites/). An implicit composite serves the
// backend and the Autograd keys (autograd sees the decomposed calls); an explicit one serves
// backend keys only, under a derivative formula of its own (autograd/derivatives.yaml).
enum class OperatorKind { Primitive, CompositeImplicit, CompositeExplicit };
std::string_view operator_kind_name(OperatorKind k);

struct KernelEntry {
  ts_kernel_fn fn = nullptr;
  void* data = nullptr;
  std::string plugin;  // who registered it ("host" for the host's own)
  bool fallthrough = false;
};

class OperatorEntry {
 public:
  explicit OperatorEntry(FunctionSchema schema, std::string plugin);
  const FunctionSchema& schema() const { return schema_; }
  const std::string& name() const { return name_; }  // "add.Tensor"
  const std::string& defined_by() const { return defined_by_; }
  int num_arguments() const { return int(schema_.arguments.size()); }
  int num_returns() const { return int(schema_.returns.size()); }
  const KernelEntry* kernel(int32_t key) const { return kernels_[size_t(key)].load(std::memory_order_acquire); }
  // The kernel for every key without its own (TS_KEY_CATCH_ALL), or nullptr.
  const KernelEntry* catch_all() const { return catch_all_.load(std::memory_order_acquire); }
  // The decomposition registered under TS_KEY_COMPOSITE_IMPLICIT / _EXPLICIT, or nullptr.
  const KernelEntry* composite_implicit() const { return composite_implicit_.load(std::memory_order_acquire); }
  const KernelEntry* composite_explicit() const { return composite_explicit_.load(std::memory_order_acquire); }
  OperatorKind kind() const { return kind_.load(std::memory_order_relaxed); }
  void set_kind(OperatorKind k) { kind_.store(k, std::memory_order_relaxed); }
  // The kernel that serves `key` when the operator has none of its own at that key: the
  // composite, for backend keys (explicit, then implicit) and Autograd keys (implicit only).
  const KernelEntry* composite_for(int32_t key) const;
  // For an in-place or out= variant that ops.yaml derives from a functional operator: that
  // operator (a device without the variant's kernel runs it and writes the result), else nullptr.
  const OperatorEntry* functional() const { return functional_.load(std::memory_order_relaxed); }
  void set_functional(const OperatorEntry* f) { functional_.store(f, std::memory_order_relaxed); }

 private:
  friend class Dispatcher;
  FunctionSchema schema_;
  std::string name_, defined_by_;
  std::array<std::atomic<const KernelEntry*>, kNumDispatchKeys> kernels_{};
  std::atomic<const KernelEntry*> catch_all_{nullptr};
  std::atomic<const KernelEntry*> composite_implicit_{nullptr};
  std::atomic<const KernelEntry*> composite_explicit_{nullptr};
  std::atomic<OperatorKind> kind_{OperatorKind::Primitive};
  std::atomic<const OperatorEntry*> functional_{nullptr};
  // Positions of Tensor / Tensor? / Tensor[] arguments: the ones whose keys are read.
  std::vector<int> tensor_arguments_;
  std::vector<int> tensor_list_arguments_;
  std::vector<int> device_arguments_;  // a factory's `Device? device` selects the backend
};
using OperatorHandle = const OperatorEntry*;

// Thread-local keys added to (included) and removed from (excluded) every dispatch.
struct LocalDispatchKeySet {
  uint64_t included = 0;
  uint64_t excluded = 0;
};
LocalDispatchKeySet& local_dispatch_keys();

class IncludeDispatchKeyGuard {
 public:
  explicit IncludeDispatchKeyGuard(DispatchKey k);
  ~IncludeDispatchKeyGuard();
 private:
  uint64_t saved_;
};
class ExcludeDispatchKeyGuard {
 public:
  explicit ExcludeDispatchKeyGuard(DispatchKey k);
  ~ExcludeDispatchKeyGuard();
 private:
  uint64_t saved_;
};

// One row of introspection: which kernel an operator has at a key, and from whom.
struct KernelInfo {
  std::string key;
  std::string plugin;
  std::string kind;  // "kernel", "fallthrough", "fallback", "catch-all kernel", "composite (implicit|explicit)"
};

// A pending registration: staged while a plugin initialises, applied all at once by commit().
struct Registration {
  enum class Kind { Def, Kernel, Fallthrough, Fallback };
  Kind kind;
  std::string op_name;  // or schema text for Def
  int32_t key = -1;
  KernelEntry entry;
};

class Dispatcher {
 public:
  static Dispatcher& instance();

  // Declares an operator. Raises SchemaError, or RuntimeError when it already exists.
  OperatorHandle def(std::string_view schema, const std::string& plugin = "host");
  OperatorHandle find(std::string_view name) const;  // nullptr when unknown
  OperatorHandle find_or_throw(std::string_view name) const;
  std::vector<OperatorHandle> operators() const;

  void register_kernel(std::string_view op, int32_t key, KernelEntry entry);
  // Marks `key` as fallthrough for `op` (empty op: for every operator without its own kernel).
  void register_fallthrough(std::string_view op, int32_t key, const std::string& plugin);
  void register_fallback(int32_t key, KernelEntry entry);
  const KernelEntry* fallback(int32_t key) const { return fallbacks_[size_t(key)].load(std::memory_order_acquire); }
  // Checks a batch of registrations against the current state without applying anything;
  // raises PluginError naming the first problem. Then commit() applies them atomically.
  void validate(const std::vector<Registration>& batch) const;
  void commit(const std::vector<Registration>& batch);

  // Listeners are told of every operator `def`ined from now on (and not of kernels).
  using Listener = std::function<void(OperatorHandle)>;
  int add_listener(Listener l, bool replay_existing = false);
  void remove_listener(int id);

  // Calls `op` with the stack holding its arguments; on return it holds the returns. The
  // observer (the profiler) sees it unless `observed` is false (a transform kernel calling its
  // own operator again below its key: one call, seen once).
  void call(OperatorHandle op, ts_stack* stack, bool observed = true) const;
  // Calls with an explicit key set, ignoring the tensors' keys (redispatch).
  void call_with_keys(OperatorHandle op, DispatchKeySet keys, ts_stack* stack) const;
  // The key set a call of `op` with this stack dispatches on (before TLS and fallthrough).
  DispatchKeySet compute_keys(OperatorHandle op, const ts_stack* stack) const;

  std::vector<KernelInfo> describe(std::string_view op) const;
  std::string describe_text(std::string_view op) const;

  // When a backend key has no kernel, the dispatcher asks this hook once to load the
  // plugin for that key (lazy loading); true when something was loaded.
  void set_missing_kernel_hook(std::function<bool(int32_t key)> hook) { missing_kernel_hook_ = std::move(hook); }
  // When a composite operator's decomposition is not registered yet, the dispatcher asks this
  // hook once per process to load the plugin that registers them (libtessera_composites.so).
  void set_missing_composite_hook(std::function<bool()> hook) { missing_composite_hook_ = std::move(hook); }

 private:
  Dispatcher() = default;
  OperatorEntry* find_mutable(std::string_view name) const;
  const KernelEntry* park(KernelEntry e);
  [[noreturn]] void raise_missing(OperatorHandle op, int32_t key) const;

  mutable std::mutex mutex_;                // guards the tables below
  std::recursive_mutex registration_mutex_;  // makes validate + apply of a batch one step
  std::deque<OperatorEntry> operators_;                      // stable addresses
  std::unordered_map<std::string, OperatorEntry*> by_name_;  // "add.Tensor" and "aten::add.Tensor"
  std::deque<KernelEntry> kernel_store_;                     // never freed: call path is lock-free
  std::array<std::atomic<const KernelEntry*>, kNumDispatchKeys> fallbacks_{};
  std::vector<std::pair<int, Listener>> listeners_;
  int next_listener_ = 0;
  std::function<bool(int32_t)> missing_kernel_hook_;
  std::function<bool()> missing_composite_hook_;
  mutable std::once_flag composite_hook_once_;
  // The kernel for `key` when op has none of its own: its composite (loading them once if needed).
  const KernelEntry* composite_kernel(OperatorHandle op, int32_t key) const;
};

// Host-side state of one call, behind the C ABI's opaque ts_call.
struct CallContext {
  OperatorHandle op = nullptr;
  int32_t key = -1;
  const KernelEntry* kernel = nullptr;
  std::string error;
};

}  // namespace tessera

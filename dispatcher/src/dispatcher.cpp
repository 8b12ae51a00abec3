#include <tessera/cpu_fallback.h>
#include <tessera/derived_variant.h>
#include <tessera/observer.h>
#include <tessera/device_registry.h>
#include <tessera/dispatcher.h>
#include <tessera/tensor_impl.h>

#include <fmt/ranges.h>

#include <set>

namespace tessera {

namespace {
thread_local LocalDispatchKeySet tls_keys;

std::string first_device(const ts_stack* stack) {
  for (int i = 0; i < stack->size; ++i)
    if (stack->values[i].tag == TS_VALUE_TENSOR && stack->values[i].u.tensor)
      return from_handle(stack->values[i].u.tensor)->device().str();
  return "no tensor arguments";
}
}  // namespace

LocalDispatchKeySet& local_dispatch_keys() { return tls_keys; }

std::string_view operator_kind_name(OperatorKind k) {
  switch (k) {
    case OperatorKind::Primitive: return "primitive";
    case OperatorKind::CompositeImplicit: return "composite (implicit autograd)";
    case OperatorKind::CompositeExplicit: return "composite (explicit autograd)";
  }
  return "?";
}

namespace {
bool is_composite_key(int32_t key) { return key == TS_KEY_COMPOSITE_IMPLICIT || key == TS_KEY_COMPOSITE_EXPLICIT; }
bool is_backend_key(int32_t key) { return key >= 0 && key < TS_FIRST_TRANSFORM_KEY; }
bool is_autograd_key(int32_t key) {
  return key >= int32_t(DispatchKey::AutogradCPU) && key <= int32_t(DispatchKey::AutogradOther);
}
// Capture records primitives only, and vmap batches them only: a composite decomposes above
// the Tracer's and the Batched key's fallbacks.
bool is_decomposing_transform_key(int32_t key) { return key == int32_t(DispatchKey::Tracer) || key == int32_t(DispatchKey::Batched); }
const char* composite_key_name(int32_t key) {
  return key == TS_KEY_COMPOSITE_IMPLICIT ? "CompositeImplicitAutograd" : "CompositeExplicitAutograd";
}
}  // namespace

const KernelEntry* OperatorEntry::composite_for(int32_t key) const {
  if (is_backend_key(key))
    if (auto* e = composite_explicit()) return e;
  if (is_backend_key(key) || is_autograd_key(key)) return composite_implicit();
  if (is_decomposing_transform_key(key)) return composite_implicit() ? composite_implicit() : composite_explicit();
  return nullptr;
}

IncludeDispatchKeyGuard::IncludeDispatchKeyGuard(DispatchKey k) : saved_(tls_keys.included) {
  tls_keys.included |= DispatchKeySet(k).raw();
}
IncludeDispatchKeyGuard::~IncludeDispatchKeyGuard() { tls_keys.included = saved_; }
ExcludeDispatchKeyGuard::ExcludeDispatchKeyGuard(DispatchKey k) : saved_(tls_keys.excluded) {
  tls_keys.excluded |= DispatchKeySet(k).raw();
}
ExcludeDispatchKeyGuard::~ExcludeDispatchKeyGuard() { tls_keys.excluded = saved_; }

OperatorEntry::OperatorEntry(FunctionSchema schema, std::string plugin)
    : schema_(std::move(schema)), defined_by_(std::move(plugin)) {
  name_ = schema_.qualified_name();  // "add.Tensor", "myns::op"
  for (size_t i = 0; i < schema_.arguments.size(); ++i) {
    const auto& t = schema_.arguments[i].type;
    if (t.kind == SchemaType::Kind::Device && !t.is_list) device_arguments_.push_back(int(i));
    if (t.kind != SchemaType::Kind::Tensor) continue;
    (t.is_list ? tensor_list_arguments_ : tensor_arguments_).push_back(int(i));
  }
}

Dispatcher& Dispatcher::instance() {
  static Dispatcher* d = new Dispatcher;  // never destroyed: plugin kernels may run at exit
  return *d;
}

OperatorHandle Dispatcher::def(std::string_view schema_text, const std::string& plugin) {
  std::lock_guard registration(registration_mutex_);
  FunctionSchema schema = parse_schema(schema_text);
  std::vector<Listener> to_notify;
  OperatorEntry* entry;
  {
    std::lock_guard lock(mutex_);
    OperatorEntry probe(schema, plugin);
    if (auto it = by_name_.find(probe.name()); it != by_name_.end())
      raise<RuntimeError>("operator '{}' is already defined (by '{}'); '{}' tried to define it again as '{}'",
                          probe.name(), it->second->defined_by(), plugin, schema_text);
    entry = &operators_.emplace_back(std::move(schema), plugin);
    by_name_[entry->name()] = entry;
    for (auto& [id, l] : listeners_) to_notify.push_back(l);
  }
  for (auto& l : to_notify) l(entry);  // outside the lock: listeners may call back in
  return entry;
}

OperatorEntry* Dispatcher::find_mutable(std::string_view name) const {
  std::lock_guard lock(mutex_);
  auto it = by_name_.find(std::string(name));
  return it == by_name_.end() ? nullptr : it->second;
}

OperatorHandle Dispatcher::find(std::string_view name) const { return find_mutable(name); }

OperatorHandle Dispatcher::find_or_throw(std::string_view name) const {
  if (auto* op = find(name)) return op;
  raise<RuntimeError>("unknown operator '{}': it is neither in core/ops.yaml nor defined by a loaded plugin", name);
}

std::vector<OperatorHandle> Dispatcher::operators() const {
  std::lock_guard lock(mutex_);
  std::vector<OperatorHandle> out;
  for (auto& op : operators_) out.push_back(&op);
  return out;
}

namespace {
std::string key_text(int32_t key) { return is_composite_key(key) ? composite_key_name(key) : dispatch_key_name(key); }
}  // namespace

const KernelEntry* Dispatcher::park(KernelEntry e) { return &kernel_store_.emplace_back(std::move(e)); }

void Dispatcher::register_kernel(std::string_view op, int32_t key, KernelEntry entry) {
  commit({Registration{Registration::Kind::Kernel, std::string(op), key, std::move(entry)}});
}

void Dispatcher::register_fallthrough(std::string_view op, int32_t key, const std::string& plugin) {
  commit({Registration{Registration::Kind::Fallthrough, std::string(op), key, KernelEntry{nullptr, nullptr, plugin, true}}});
}

void Dispatcher::register_fallback(int32_t key, KernelEntry entry) {
  commit({Registration{Registration::Kind::Fallback, "", key, std::move(entry)}});
}

void Dispatcher::validate(const std::vector<Registration>& batch) const {
  std::lock_guard lock(mutex_);
  std::set<std::string> defined_here;
  std::set<std::pair<std::string, int32_t>> kernels_here;
  for (const auto& r : batch) {
    const std::string& who = r.entry.plugin;
    bool catch_all = r.kind == Registration::Kind::Kernel && r.key == TS_KEY_CATCH_ALL;
    bool composite = r.kind == Registration::Kind::Kernel && is_composite_key(r.key);
    if (r.kind != Registration::Kind::Def && !catch_all && !composite && (r.key < 0 || r.key >= kNumDispatchKeys))
      raise<PluginError>("plugin '{}' registers for dispatch key {}, outside 0..{}", who, r.key, kNumDispatchKeys - 1);
    switch (r.kind) {
      case Registration::Kind::Def: {
        OperatorEntry probe(parse_schema(r.op_name), who);
        if (by_name_.count(probe.name()) || !defined_here.insert(probe.name()).second)
          raise<PluginError>("plugin '{}' defines operator '{}', which already exists", who, probe.name());
        break;
      }
      case Registration::Kind::Kernel:
      case Registration::Kind::Fallthrough: {
        if (r.kind == Registration::Kind::Fallthrough && r.op_name.empty()) break;
        auto it = by_name_.find(r.op_name);
        if (it == by_name_.end() && !defined_here.count(r.op_name))
          raise<PluginError>("plugin '{}' registers a kernel for operator '{}' (key {}), which does not exist", who,
                             r.op_name, key_text(r.key));
        std::string name = it == by_name_.end() ? r.op_name : it->second->name();
        if (it != by_name_.end())
          if (auto* existing = catch_all   ? it->second->catch_all()
                               : composite ? (r.key == TS_KEY_COMPOSITE_IMPLICIT ? it->second->composite_implicit()
                                                                                  : it->second->composite_explicit())
                                           : it->second->kernel(r.key);
              existing && existing->plugin != who)
            raise<PluginError>("plugin '{}' registers a second kernel for operator '{}' at key {}: plugin '{}' "
                               "already registered one", who, name, key_text(r.key), existing->plugin);
        if (!kernels_here.insert({name, r.key}).second)
          raise<PluginError>("plugin '{}' registers two kernels for operator '{}' at key {}", who, name, key_text(r.key));
        break;
      }
      case Registration::Kind::Fallback:
        if (auto* existing = fallbacks_[size_t(r.key)].load(); existing && existing->plugin != who)
          raise<PluginError>("plugin '{}' registers a fallback for key {}, which plugin '{}' already has", who,
                             dispatch_key_name(r.key), existing->plugin);
        break;
    }
  }
}

void Dispatcher::commit(const std::vector<Registration>& batch) {
  std::lock_guard registration(registration_mutex_);
  validate(batch);
  std::vector<std::pair<const Registration*, int>> defs;
  for (const auto& r : batch) {
    if (r.kind == Registration::Kind::Def) {
      def(r.op_name, r.entry.plugin);
      continue;
    }
    std::lock_guard lock(mutex_);
    const KernelEntry* parked = park(r.entry);
    if (r.kind == Registration::Kind::Fallback ||
        (r.kind == Registration::Kind::Fallthrough && r.op_name.empty())) {
      fallbacks_[size_t(r.key)].store(parked, std::memory_order_release);
      continue;
    }
    auto* op = by_name_.at(r.op_name);
    if (r.key == TS_KEY_CATCH_ALL) op->catch_all_.store(parked, std::memory_order_release);
    else if (r.key == TS_KEY_COMPOSITE_IMPLICIT) op->composite_implicit_.store(parked, std::memory_order_release);
    else if (r.key == TS_KEY_COMPOSITE_EXPLICIT) op->composite_explicit_.store(parked, std::memory_order_release);
    else op->kernels_[size_t(r.key)].store(parked, std::memory_order_release);
  }
}

int Dispatcher::add_listener(Listener l, bool replay_existing) {
  std::vector<OperatorHandle> existing;
  int id;
  {
    std::lock_guard lock(mutex_);
    id = next_listener_++;
    listeners_.emplace_back(id, l);
    if (replay_existing)
      for (auto& op : operators_) existing.push_back(&op);
  }
  for (auto* op : existing) l(op);
  return id;
}

void Dispatcher::remove_listener(int id) {
  std::lock_guard lock(mutex_);
  std::erase_if(listeners_, [id](auto& p) { return p.first == id; });
}

DispatchKeySet Dispatcher::compute_keys(OperatorHandle op, const ts_stack* stack) const {
  uint64_t keys = 0;
  for (int i : op->tensor_arguments_) {
    if (i >= stack->size) break;
    const ts_value& v = stack->values[i];
    if (v.tag == TS_VALUE_TENSOR && v.u.tensor) keys |= from_handle(v.u.tensor)->key_set().raw();
  }
  for (int i : op->tensor_list_arguments_) {
    if (i >= stack->size) break;
    const ts_value& v = stack->values[i];
    if (v.tag != TS_VALUE_TENSOR_LIST) continue;
    for (int64_t j = 0; j < v.u.tensors.size; ++j)
      if (v.u.tensors.data[j]) keys |= from_handle(v.u.tensors.data[j])->key_set().raw();
  }
  // Backend keys equal device type ids (DeviceRegistry::backend_key), so a device selects its key.
  for (int i : op->device_arguments_) {
    if (i >= stack->size) break;
    const ts_value& v = stack->values[i];
    if (v.tag == TS_VALUE_DEVICE && v.u.device.type >= 0 && v.u.device.type < kNumDispatchKeys)
      keys |= DispatchKeySet::bit(v.u.device.type);
  }
  return DispatchKeySet(keys);
}

void Dispatcher::call(OperatorHandle op, ts_stack* stack, bool observed) const {
  uint64_t keys = (compute_keys(op, stack).raw() | tls_keys.included) & ~tls_keys.excluded;
  if (keys == 0) keys = DispatchKeySet::bit(int32_t(DispatchKey::CPU));  // factories without tensors: CPU
  if (const ts_observer* o = observed ? observer() : nullptr) [[unlikely]] {
    ObservedCall observed(o, reinterpret_cast<ts_operator>(const_cast<OperatorEntry*>(op)), stack);
    return call_with_keys(op, DispatchKeySet(keys), stack);
  }
  call_with_keys(op, DispatchKeySet(keys), stack);
}

void Dispatcher::call_with_keys(OperatorHandle op, DispatchKeySet key_set, ts_stack* stack) const {
  uint64_t keys = key_set.raw();
  bool retried = false;
  for (;;) {
    int32_t key = DispatchKeySet(keys).highest();
    if (key < 0)
      raise<NotImplementedError>("operator '{}': every dispatch key was a fallthrough; no kernel to run", op->name());
    const KernelEntry* kernel = op->kernel(key);
    if (!kernel) kernel = composite_kernel(op, key);
    if (!kernel) kernel = op->catch_all();
    if (!kernel) kernel = fallback(key);
    if (!kernel) {
      // A backend key whose plugin is not loaded yet: load it once, then retry. The hook also
      // returns (false) after waiting for another thread that is loading that plugin right now,
      // so look again either way.
      if (!retried && key <= int32_t(DispatchKey::LastDynamicBackend) && missing_kernel_hook_) {
        bool loaded = missing_kernel_hook_(key);
        retried = true;
        if (loaded || op->kernel(key) || op->catch_all() || fallback(key)) continue;
      }
      // A device with the functional kernel but not this in-place/out= variant: derive it there.
      if (detail::can_derive_variant(op, key)) return detail::run_derived_variant(op, key, stack);
      // A device without this kernel: run it on CPU with copies (or raise, if that is off).
      if (detail::run_cpu_fallback(op, key, stack)) return;
      raise_missing(op, key);
    }
    if (kernel->fallthrough) {
      keys &= ~DispatchKeySet::bit(key);
      continue;
    }
    CallContext ctx{op, key, kernel, {}};
    ts_status status = kernel->fn(kernel->data, reinterpret_cast<ts_call>(&ctx), keys, stack);
    if (status != TS_OK) {
      if (ctx.error.empty()) ctx.error = fmt::format("kernel failed with status {} and no message", status);
      // Kernels usually name their operator first ("view: shape [3, 5] is invalid..."); add it if not.
      // (torch.linalg's operators name themselves "linalg.inv" for "linalg_inv", as PyTorch.)
      std::string dotted = op->schema().name;
      if (dotted.starts_with("linalg_")) dotted[6] = '.';
      bool named = ctx.error.starts_with(op->schema().name) || ctx.error.starts_with(dotted) ||
                   ctx.error.starts_with(op->name() + ":");
      raise_for_status(status, fmt::format("{}{}{} [plugin '{}', key {}, device {}]", named ? "" : op->name(),
                                       named ? "" : ": ", ctx.error, kernel->plugin, dispatch_key_name(key),
                                       first_device(stack)));
    }
    return;
  }
}

const KernelEntry* Dispatcher::composite_kernel(OperatorHandle op, int32_t key) const {
  if (op->kind() == OperatorKind::Primitive) return nullptr;
  if (auto* e = op->composite_for(key)) return e;
  if (!is_backend_key(key) && !is_autograd_key(key) && !is_decomposing_transform_key(key)) return nullptr;
  // Declared composite, nothing registered: the composites plugin is not loaded yet.
  if (missing_composite_hook_) std::call_once(composite_hook_once_, [this] { missing_composite_hook_(); });
  return op->composite_for(key);
}

void Dispatcher::raise_missing(OperatorHandle op, int32_t key) const {
  std::vector<std::string> have;
  for (int32_t k = 0; k < kNumDispatchKeys; ++k)
    if (auto* e = op->kernel(k); e && !e->fallthrough) have.push_back(dispatch_key_name(k));
  raise<NotImplementedError>("operator '{}' has no kernel for dispatch key '{}'; it has kernels for: [{}]",
                             op->name(), dispatch_key_name(key), fmt::join(have, ", "));
}

std::vector<KernelInfo> Dispatcher::describe(std::string_view name) const {
  OperatorHandle op = find_or_throw(name);
  std::vector<KernelInfo> out;
  if (auto* e = op->catch_all()) out.push_back({"(any key)", e->plugin, "catch-all kernel"});
  if (auto* e = op->composite_implicit()) out.push_back({composite_key_name(TS_KEY_COMPOSITE_IMPLICIT), e->plugin, "composite"});
  if (auto* e = op->composite_explicit()) out.push_back({composite_key_name(TS_KEY_COMPOSITE_EXPLICIT), e->plugin, "composite"});
  for (int32_t k = kNumDispatchKeys - 1; k >= 0; --k) {
    if (auto* e = op->kernel(k))
      out.push_back({dispatch_key_name(k), e->plugin, e->fallthrough ? "fallthrough" : "kernel"});
    else if (detail::can_derive_variant(op, k))
      out.push_back({dispatch_key_name(k), op->functional()->kernel(k)->plugin, "derived"});
    else if (auto* f = fallback(k))
      out.push_back({dispatch_key_name(k), f->plugin, f->fallthrough ? "fallthrough" : "fallback"});
  }
  return out;
}

std::string Dispatcher::describe_text(std::string_view name) const {
  OperatorHandle op = find_or_throw(name);
  std::string text = fmt::format("{}\n  schema: {}\n  defined by: {}\n  kind: {}\n", op->name(),
                                 op->schema().to_string(), op->defined_by(), operator_kind_name(op->kind()));
  for (auto& row : describe(name)) text += fmt::format("  {:<25} {:<12} {}\n", row.key, row.kind, row.plugin);
  return text;
}

}  // namespace tessera

// libtessera_vmap.so: vmap as a transform plugin on the Batched key.
// While a vmap runs, the thread includes the Batched key, so every operator call reaches this
// plugin first (above Autograd). A call whose tensors are batched at the innermost level that
// is not yet being handled runs its batching rule: the operator on the physical values below
// that level, its results wrapped again. Composites decompose above the Batched key (the
// dispatcher serves it their decomposition), so rules are needed for primitives only; an
// operator without one runs once per sample (the for-loop fallback). Frontends drive it with
// the vmap:: operators defined here.
#include "autograd_rules.h"
#include "call_frame.h"

#include <atomic>
#include <limits>
#include <string>

namespace tessera::vmap {
namespace {

ts_dispatch_key batched_key = -1;

Randomness parse_randomness(std::string_view s) {
  if (s == "error") return Randomness::Error;
  if (s == "different") return Randomness::Different;
  if (s == "same") return Randomness::Same;
  sdk::fail(TS_ERROR_VALUE, "vmap: randomness must be one of 'error', 'different' or 'same', got '", s, "'");
}

// The innermost active level not yet handled on this thread, or null.
const Level* innermost_level() {
  const Level* found = nullptr;
  for (const Level& l : levels())
    if (l.id <= ceiling()) found = &l;
  return found;
}

// A random operator called with no batched tensor: randomness decides whether it is an error,
// one draw for the whole batch ("same"), or a draw per sample ("different").
void random_without_batch(ts_call call, ts_keyset keys, ts_stack* stack, const RuleSpec& spec) {
  const Level* level = innermost_level();
  if (!level) return sdk::check_host(pass_below(call, keys, stack));
  if (level->randomness == Randomness::Error)
    sdk::fail(TS_ERROR, "vmap: called random operation while in randomness error mode. Please either use the 'same' "
              "or 'different' randomness flags on vmap or perform the randomness operation out of vmap (",
              sdk::host().operator_name(sdk::host().call_operator_of(call)), ")");
  if (level->randomness == Randomness::Same) {
    BelowLevel below(level->id);
    return sdk::check_host(sdk::host().call_operator(call, sdk::host().call_operator_of(call), stack));
  }
  CallFrame f(call, keys, stack, level->id);
  std::vector<ts_value> values(f.args());
  if (spec.kind == RuleKind::RandomFactory) {
    const ts_value& size = f.arg(size_t(spec.int_arg));
    std::vector<int64_t> batched_size{f.batch_size()};
    batched_size.insert(batched_size.end(), size.u.ints.data, size.u.ints.data + size.u.ints.size);
    values[size_t(spec.int_arg)] = f.hold_ints(std::move(batched_size));
  } else {  // a random operator on an unbatched tensor (dropout): each sample draws from its own copy
    BelowLevel below(level->id);
    values[0] = f.hold(expand_batch(sdk::TensorRef::borrow(f.arg(0).u.tensor), f.batch_size()));
  }
  f.run_physical(values);
  f.return_wrapped(values);
}

ts_status batched_kernel(void* data, ts_call call, ts_keyset keys, ts_stack* stack) noexcept {
  return guarded_rule(call, [&] {
    const auto* spec = static_cast<const RuleSpec*>(data);
    const int64_t level = call_level(stack);
    if (level == 0) {
      if (spec && spec->random) return random_without_batch(call, keys, stack, *spec);
      return sdk::check_host(pass_below(call, keys, stack));
    }
    CallFrame f(call, keys, stack, level);
    if (spec) run_rule(f, *spec);
    else run_loop(f, true);
  });
}

// ---------------------------------------------------------------------------- vmap:: operators

int64_t next_level_id() {
  static std::atomic<int64_t> next{1};
  return next++;
}

struct SavedCeiling {
  int64_t level;
  int64_t ceiling;
};
std::vector<SavedCeiling>& saved_ceilings() {
  thread_local std::vector<SavedCeiling> saved;
  return saved;
}

void set_batched_included(bool on) {
  ts_keyset included = 0, excluded = 0;
  sdk::host().tls_keys(&included, &excluded);
  sdk::host().set_tls_keys(on ? included | batched_bit() : included & ~batched_bit(),
                           on ? excluded & ~batched_bit() : excluded);
}

void push_level(sdk::Args& a) {
  const int64_t batch_size = a.to_int(0);
  const Randomness randomness = parse_randomness(a.optional_str(1).value_or("error"));
  if (batch_size < 0) sdk::fail(TS_ERROR_VALUE, "vmap: the batch size must be non-negative, got ", batch_size);
  const int64_t id = next_level_id();
  levels().push_back({id, batch_size, randomness});
  saved_ceilings().push_back({id, ceiling()});
  ceiling() = std::numeric_limits<int64_t>::max();
  set_batched_included(true);
  a.returns({sdk::value(id)});
}

void pop_level(sdk::Args& a) {
  const int64_t id = a.to_int(0);
  if (levels().empty() || levels().back().id != id)
    sdk::fail(TS_ERROR, "vmap: level ", id, " is not the innermost vmap level on this thread (vmaps must exit in order)");
  levels().pop_back();
  ceiling() = saved_ceilings().back().ceiling;
  saved_ceilings().pop_back();
  if (levels().empty()) set_batched_included(false);
  a.returns({});
}

int64_t wrap_out_dim(int64_t dim, int64_t rank, const char* what) {
  if (dim < -rank || dim >= rank)
    sdk::fail(TS_ERROR_INDEX, "vmap: ", what, " ", dim, " is out of range for a tensor of ", rank - 1,
              " dims (with the batch dim: expected a value in [", -rank, ", ", rank - 1, "])");
  return dim < 0 ? dim + rank : dim;
}

std::vector<int64_t> move_to_front(int64_t from, int64_t rank) {
  std::vector<int64_t> order{from};
  for (int64_t d = 0; d < rank; ++d)
    if (d != from) order.push_back(d);
  return order;
}

void add_batch_dim(sdk::Args& a) {
  sdk::TensorRef self = a.tensor(0);
  const int64_t level = a.to_int(2);
  const Level* l = find_level(level);
  if (!l) sdk::fail(TS_ERROR, "vmap: level ", level, " is not active");
  const int64_t dim = wrap_out_dim(a.to_int(1), self.dim(), "in_dim");
  if (self.size(dim) != l->batch_size)
    sdk::fail(TS_ERROR_VALUE, "vmap: Expected all tensors to have the same size in the mapped dimension, got sizes ",
              self.size(dim), " and ", l->batch_size, " for the mapped dimension");
  sdk::TensorRef value = dim == 0 ? self : sdk::ops::permute(self, move_to_front(dim, self.dim()));
  a.return_tensor(wrap(a.call(), value, level));
}

void remove_batch_dim(sdk::Args& a) {
  sdk::TensorRef self = a.tensor(0);
  const int64_t level = a.to_int(1), batch_size = a.to_int(2);
  const int64_t rank = self.dim() + 1;
  const int64_t dim = wrap_out_dim(a.to_int(3), rank, "out_dim");
  if (!batched_at(self.handle(), level)) {  // an output that does not depend on the batch: expanded
    std::vector<int64_t> size = self.shape_vector();
    size.insert(size.begin() + dim, batch_size);
    return a.return_tensor(sdk::ops::expand(sdk::ops::unsqueeze(self, dim), size));
  }
  sdk::TensorRef value = value_of(self.handle());
  if (dim == 0) return a.return_tensor(std::move(value));
  std::vector<int64_t> order;
  for (int64_t d = 1; d < rank; ++d) order.push_back(d);
  order.insert(order.begin() + dim, 0);
  a.return_tensor(sdk::ops::permute(value, order));
}

// A tensor batched at `level`: itself if it is, else expanded to the level's batch.
void promote(sdk::Args& a) {
  sdk::TensorRef self = a.tensor(0);
  const int64_t level = a.to_int(1);
  const Level* l = find_level(level);
  if (!l) sdk::fail(TS_ERROR, "vmap: level ", level, " is not active");
  if (batched_at(self.handle(), level)) return a.return_argument(self);
  a.return_tensor(wrap(a.call(), expand_batch(self, l->batch_size), level));
}

void tensor_level(sdk::Args& a) { a.returns({sdk::value(level_of(a.tensor(0).handle()))}); }

void unwrap(sdk::Args& a) {
  sdk::TensorRef self = a.tensor(0);
  if (!batched(self.handle())) return a.return_argument(self);
  a.return_tensor(value_of(self.handle()));
}

void current_levels(sdk::Args& a) {
  thread_local std::vector<int64_t> ids;
  ids.clear();
  for (const Level& l : levels()) ids.push_back(l.id);
  a.returns({sdk::int_list_value(ids)});
}

// "<with rule> <primitives> <name,...>": batching-rule coverage of the primitive operators, and
// the ones left to the loop.
void coverage(sdk::Args& a) {
  thread_local std::string text;
  int64_t covered = 0;
  std::string missing;
  for (size_t i = 0; i < kPrimitiveOperatorCount; ++i) {
    const std::string_view name = kPrimitiveOperators[i];
    bool has = false;
    for (size_t j = 0; j < kGeneratedRuleCount && !has; ++j) has = kGeneratedRules[j].op == name;
    if (has) ++covered;
    else missing += (missing.empty() ? "" : ",") + std::string(name);
  }
  text = sdk::cat(covered, " ", kPrimitiveOperatorCount, " ", missing);
  ts_value v{TS_VALUE_STRING, 0, {}};
  v.u.str = text.c_str();
  a.returns({v});
}

void register_vmap(sdk::Registrar& reg) {
  sdk::check_host(sdk::host().find_dispatch_key("Batched", &batched_key));
  init_keys();
  struct Op {
    const char* schema;
    const char* name;
    sdk::KernelFn fn;
  };
  const Op ops[] = {
      {"vmap::push_level(int batch_size, str randomness='error') -> int", "vmap::push_level", push_level},
      {"vmap::pop_level(int level) -> ()", "vmap::pop_level", pop_level},
      {"vmap::add_batch_dim(Tensor self, int batch_dim, int level) -> Tensor", "vmap::add_batch_dim", add_batch_dim},
      {"vmap::remove_batch_dim(Tensor self, int level, int batch_size, int out_dim) -> Tensor",
       "vmap::remove_batch_dim", remove_batch_dim},
      {"vmap::promote(Tensor self, int level) -> Tensor", "vmap::promote", promote},
      {"vmap::level(Tensor self) -> int", "vmap::level", tensor_level},
      {"vmap::unwrap(Tensor self) -> Tensor", "vmap::unwrap", unwrap},
      {"vmap::levels() -> int[]", "vmap::levels", current_levels},
      {"vmap::coverage() -> str", "vmap::coverage", coverage},
  };
  for (const Op& op : ops) {
    reg.def(op.schema);
    reg.kernel(op.name, TS_KEY_CATCH_ALL, op.fn);
  }
  for (size_t i = 0; i < kGeneratedRuleCount; ++i) {
    const RuleSpec& spec = kGeneratedRules[i];
    if (sdk::host().find_operator(spec.op))
      reg.boxed_kernel(spec.op, batched_key, batched_kernel, const_cast<RuleSpec*>(&spec));
  }
  sdk::check_host(sdk::host().register_fallback(reg.raw(), batched_key, batched_kernel, nullptr));
  register_autograd_rules(reg, batched_key);
}

}  // namespace
}  // namespace tessera::vmap

// Needs host ABI 1.2 (transform keys and extension slots).
TESSERA_PLUGIN("vmap", "0.1.0", 2, tessera::vmap::register_vmap)

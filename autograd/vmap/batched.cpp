#include "batched.h"

#include <limits>

namespace tessera::vmap {
namespace {
ts_dispatch_key batched_key = -1;
}

void init_keys() { sdk::check_host(sdk::host().find_dispatch_key("Batched", &batched_key)); }
ts_keyset batched_bit() { return ts_keyset(1) << batched_key; }

std::vector<Level>& levels() {
  thread_local std::vector<Level> stack;
  return stack;
}

const Level* find_level(int64_t id) {
  for (const Level& l : levels())
    if (l.id == id) return &l;
  return nullptr;
}

int64_t& ceiling() {
  thread_local int64_t value = std::numeric_limits<int64_t>::max();
  return value;
}

const BatchedValue* batched(ts_tensor t) {
  if (!t || !(sdk::host().tensor_keys(t) & batched_bit())) return nullptr;
  return static_cast<const BatchedValue*>(sdk::host().tensor_get_slot(t, TS_SLOT_BATCHED));
}

int64_t level_of(ts_tensor t) {
  const BatchedValue* b = batched(t);
  return b ? b->level : 0;
}

sdk::TensorRef value_of(ts_tensor t) { return sdk::TensorRef::retain(batched(t)->value); }

sdk::TensorRef wrap(ts_call call, const sdk::TensorRef& value, int64_t level) {
  if (value.dim() < 1) sdk::fail(TS_ERROR, "vmap: internal error: a batched value has no batch dim");
  std::vector<int64_t> shape(value.sizes().begin() + 1, value.sizes().end());
  std::vector<int64_t> strides(value.strides().begin() + 1, value.strides().end());
  ts_tensor out = nullptr;
  sdk::check_host(sdk::host().tensor_alias(call, value.handle(), int32_t(shape.size()), shape.data(),
                                           strides.data(), value.storage_offset(), &out));
  sdk::TensorRef logical = sdk::TensorRef::adopt(out);
  auto* state = new BatchedValue{value.new_reference(), level};
  sdk::check_host(sdk::host().tensor_set_slot(out, TS_SLOT_BATCHED, state, [](void* p) {
    auto* s = static_cast<BatchedValue*>(p);
    sdk::host().tensor_release(s->value);
    delete s;
  }));
  sdk::check_host(sdk::host().tensor_update_keys(out, batched_bit(), 0));
  return logical;
}

ts_status pass_below(ts_call call, ts_keyset keys, ts_stack* stack) {
  const ts_operator op = sdk::host().call_operator_of(call);
  if (const ts_keyset rest = keys & ~batched_bit()) return sdk::host().redispatch(call, op, rest, stack);
  sdk::ExcludeKeysGuard below(batched_bit());
  return sdk::host().call_operator(call, op, stack);
}

BelowLevel::BelowLevel(int64_t level) : saved_ceiling_(ceiling()) {
  ceiling() = level - 1;
  bool any_below = false;
  for (const Level& l : levels()) any_below |= l.id < level;
  sdk::host().tls_keys(&saved_included_, &saved_excluded_);
  if (!any_below) {
    sdk::host().set_tls_keys(saved_included_ & ~batched_bit(), saved_excluded_ | batched_bit());
    keys_changed_ = true;
  }
}

BelowLevel::~BelowLevel() {
  ceiling() = saved_ceiling_;
  if (keys_changed_) sdk::host().set_tls_keys(saved_included_, saved_excluded_);
}

sdk::TensorRef expand_batch(const sdk::TensorRef& t, int64_t size) {
  std::vector<int64_t> shape{size};
  shape.insert(shape.end(), t.sizes().begin(), t.sizes().end());
  return sdk::ops::expand(sdk::ops::unsqueeze(t, 0), shape);
}

sdk::TensorRef pad_after_batch(const sdk::TensorRef& value, int64_t count) {
  sdk::TensorRef out = value;
  for (int64_t i = 0; i < count; ++i) out = sdk::ops::unsqueeze(out, 1);
  return out;
}

}  // namespace tessera::vmap

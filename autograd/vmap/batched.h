// Batched tensors and vmap levels.
// A batched tensor is a view of its physical value with the batch dim (always dim 0 of the
// value) taken away: its geometry is the logical one the user's function sees, its storage is
// the value's, and the Batched slot holds the value and the level. Nested vmaps nest values: a
// level-2 tensor's value may itself be batched at level 1.
#pragma once

#include <tessera/sdk/ops.h>

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::vmap {

enum class Randomness : uint8_t { Error, Different, Same };

struct Level {
  int64_t id;
  int64_t batch_size;
  Randomness randomness;
};

struct BatchedValue {
  ts_tensor value;  // owned reference; the batch is dim 0
  int64_t level;
};

void init_keys();
ts_keyset batched_bit();

// The thread's active vmap levels, innermost last.
std::vector<Level>& levels();
const Level* find_level(int64_t id);
// Levels above the ceiling are already being handled by an outer rule on this thread.
int64_t& ceiling();

// The Batched state of a tensor; null when it is not batched (at any level).
const BatchedValue* batched(ts_tensor t);
int64_t level_of(ts_tensor t);  // 0 when unbatched
inline bool batched_at(ts_tensor t, int64_t level) { return t && level_of(t) == level; }

// Wraps `value` (batch at dim 0) as a tensor batched at `level`.
sdk::TensorRef wrap(ts_call call, const sdk::TensorRef& value, int64_t level);
// The value of a tensor batched at `level` (batch at dim 0).
sdk::TensorRef value_of(ts_tensor t);

// Passes a call on below the Batched key. A factory reached only through the thread's included
// Batched key has no key left: it is dispatched afresh with Batched excluded (to its device).
ts_status pass_below(ts_call call, ts_keyset keys, ts_stack* stack);

// While alive: rules run their physical calls below `level` (and without the Batched key when
// no level is left below).
class BelowLevel {
 public:
  explicit BelowLevel(int64_t level);
  ~BelowLevel();
  BelowLevel(const BelowLevel&) = delete;
  BelowLevel& operator=(const BelowLevel&) = delete;

 private:
  int64_t saved_ceiling_;
  ts_keyset saved_included_, saved_excluded_;
  bool keys_changed_ = false;
};

// `t` (unbatched) with a batch of `size` in front, without copying.
sdk::TensorRef expand_batch(const sdk::TensorRef& t, int64_t size);
// `value` (batch in front) with `count` singleton dims inserted after the batch dim.
sdk::TensorRef pad_after_batch(const sdk::TensorRef& value, int64_t count);

}  // namespace tessera::vmap

// One call at the Batched key, unpacked at its level: the rules read the arguments here, build
// the physical call's arguments, run it below the level and wrap what it returns.
#pragma once

#include "batched.h"
#include "rule_spec.h"

#include <deque>
#include <initializer_list>
#include <optional>
#include <span>
#include <utility>
#include <vector>

namespace tessera::vmap {

class CallFrame {
 public:
  CallFrame(ts_call call, ts_keyset keys, ts_stack* stack, int64_t level);

  ts_call call() const { return call_; }
  ts_operator op() const { return op_; }
  const char* op_name() const { return sdk::host().operator_name(op_); }
  ts_keyset keys() const { return keys_; }
  int64_t level() const { return level_; }
  int64_t batch_size() const { return batch_size_; }
  const std::vector<ts_value>& args() const { return args_; }
  const ts_value& arg(size_t i) const { return args_[i]; }
  bool is_batched(ts_tensor t) const { return batched_at(t, level_); }
  bool any_batched(uint32_t mask) const;  // a tensor (or list element) at the masked positions

  // Keeps a tensor / list / ints alive until the frame ends; returns its boxed value.
  ts_value hold(sdk::TensorRef t);
  ts_value hold_list(std::vector<sdk::TensorRef> ts);
  ts_value hold_ints(std::vector<int64_t> ints);

  // The value (batch in front) of an argument batched at this level.
  sdk::TensorRef value(ts_tensor t) const { return value_of(t); }
  // The value if batched, else the tensor expanded to the batch.
  sdk::TensorRef batched_or_expanded(ts_tensor t) const;

  // Runs the operator on `values` below this level; the returns stay in `values`.
  void run_physical(std::vector<ts_value>& values) const;
  void run_physical(const char* op, std::vector<ts_value>& values) const;
  // Returns `returns` to the caller, each tensor wrapped at this level (batch at dim 0).
  void return_wrapped(std::span<const ts_value> returns);
  // Returns tensors the rule computed (batch at dim 0) wrapped at this level.
  void return_tensors(std::span<const sdk::TensorRef> values);
  void return_tensors(std::initializer_list<sdk::TensorRef> values) {
    return_tensors(std::span<const sdk::TensorRef>(values.begin(), values.size()));
  }
  // Returns `returns` as they are.
  void return_raw(std::span<const ts_value> returns);
  // In-place and out= variants: the caller's own argument is the return.
  void return_argument(size_t i);

 private:
  ts_call call_;
  ts_keyset keys_;
  ts_stack* stack_;
  ts_operator op_;
  int64_t level_;
  int64_t batch_size_;
  std::vector<ts_value> args_;
  std::deque<sdk::TensorRef> held_;
  std::deque<std::vector<ts_tensor>> lists_;
  std::deque<std::vector<int64_t>> ints_;
};

// The edge of a rule: no exception leaves it (the SDK's run_kernel, for kernels with data).
template <class F>
ts_status guarded_rule(ts_call call, F&& body) noexcept {
  struct CallScope {
    ts_call saved = std::exchange(sdk::current_call(), nullptr);
    explicit CallScope(ts_call c) { sdk::current_call() = c; }
    ~CallScope() { sdk::current_call() = saved; }
  } scope(call);
  try {
    body();
    return TS_OK;
  } catch (const sdk::HostFailure& e) {
    return e.status;
  } catch (const sdk::Error& e) {
    sdk::host().set_error(call, e.what());
    return e.status();
  } catch (const std::exception& e) {
    sdk::host().set_error(call, e.what());
    return TS_ERROR;
  } catch (...) {
    sdk::host().set_error(call, "vmap: unknown exception in a batching rule");
    return TS_ERROR;
  }
}

// An int[] argument's values.
inline std::vector<int64_t> ints_of(const ts_value& v) { return {v.u.ints.data, v.u.ints.data + v.u.ints.size}; }
// The highest active level of the call's tensors (0 when none is batched).
int64_t call_level(const ts_stack* stack);
// Logical rank of a tensor argument (its own geometry).
int64_t rank_of(ts_tensor t);
// Normalises a logical dim against `rank` (PyTorch's wrap: a 0-dim tensor takes -1 and 0).
int64_t wrap_dim(const CallFrame& f, int64_t dim, int64_t rank);

void run_rule(CallFrame& f, const RuleSpec& spec);
void run_loop(CallFrame& f, bool warn);
bool run_special(CallFrame& f, const RuleSpec& spec);  // false: the rule declines (loop)
bool run_convolution_rule(CallFrame& f);  // conv_rules.cpp; false: declines
bool run_nn_backward_rule(CallFrame& f);  // nn_backward_rules.cpp; false: declines
bool run_norm_rule(CallFrame& f);  // norm_rules.cpp; false: declines
[[noreturn]] void inplace_error(const CallFrame& f);

}  // namespace tessera::vmap

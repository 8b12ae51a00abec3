#include "call_frame.h"

#include <algorithm>

namespace tessera::vmap {

namespace {
template <class F> void for_each_tensor(const ts_value& v, F&& fn) {
  if (v.tag == TS_VALUE_TENSOR && v.u.tensor) fn(v.u.tensor);
  if (v.tag == TS_VALUE_TENSOR_LIST)
    for (int64_t j = 0; j < v.u.tensors.size; ++j)
      if (v.u.tensors.data[j]) fn(v.u.tensors.data[j]);
}
}  // namespace

int64_t call_level(const ts_stack* stack) {
  int64_t level = 0;
  for (int32_t i = 0; i < stack->size; ++i)
    for_each_tensor(stack->values[i], [&](ts_tensor t) {
      int64_t l = level_of(t);
      if (l > ceiling()) return;  // being unwrapped by an outer rule already (cannot happen for values)
      level = std::max(level, l);
    });
  return level;
}

int64_t rank_of(ts_tensor t) {
  sdk::TensorRef r = sdk::TensorRef::borrow(t);
  return r.dim();
}

int64_t wrap_dim(const CallFrame& f, int64_t dim, int64_t rank) {
  const int64_t r = std::max<int64_t>(rank, 1);
  if (dim < -r || dim >= r)
    sdk::fail(TS_ERROR_INDEX, f.op_name(), ": Dimension out of range (expected to be in range of [", -r, ", ", r - 1,
              "], but got ", dim, ")");
  return dim < 0 ? dim + r : dim;
}

CallFrame::CallFrame(ts_call call, ts_keyset keys, ts_stack* stack, int64_t level)
    : call_(call), keys_(keys), stack_(stack), op_(sdk::host().call_operator_of(call)), level_(level),
      args_(stack->values, stack->values + stack->size) {
  const Level* l = find_level(level);
  if (!l)
    sdk::fail(TS_ERROR, op_name(),
              ": a tensor batched by a vmap that has already returned was used (it escaped its vmap, "
              "e.g. stored in a global or a closure); return it from the vmapped function instead");
  batch_size_ = l->batch_size;
}

bool CallFrame::any_batched(uint32_t mask) const {
  bool found = false;
  for (size_t i = 0; i < args_.size() && i < 32; ++i)
    if (mask & (1u << i)) for_each_tensor(args_[i], [&](ts_tensor t) { found |= is_batched(t); });
  return found;
}

ts_value CallFrame::hold(sdk::TensorRef t) {
  held_.push_back(std::move(t));
  return sdk::value(held_.back());
}

ts_value CallFrame::hold_list(std::vector<sdk::TensorRef> ts) {
  std::vector<ts_tensor> handles;
  for (auto& t : ts) {
    handles.push_back(t.handle());
    held_.push_back(std::move(t));
  }
  lists_.push_back(std::move(handles));
  ts_value v{TS_VALUE_TENSOR_LIST, 0, {}};
  v.u.tensors.data = lists_.back().data();
  v.u.tensors.size = int64_t(lists_.back().size());
  return v;
}

ts_value CallFrame::hold_ints(std::vector<int64_t> ints) {
  ints_.push_back(std::move(ints));
  return sdk::int_list_value(ints_.back());
}

sdk::TensorRef CallFrame::batched_or_expanded(ts_tensor t) const {
  if (is_batched(t)) return value(t);
  return expand_batch(sdk::TensorRef::borrow(t), batch_size_);
}

void CallFrame::run_physical(std::vector<ts_value>& values) const {
  const size_t capacity = std::max<size_t>(values.size(), size_t(stack_->capacity));
  values.resize(capacity, sdk::none());
  ts_stack s{sizeof(ts_stack), values.data(), int32_t(args_.size()), int32_t(capacity)};
  {
    BelowLevel below(level_);
    sdk::check_host(sdk::host().call_operator(call_, op_, &s));
  }
  values.resize(size_t(s.size));
}

void CallFrame::run_physical(const char* op, std::vector<ts_value>& values) const {
  ts_operator handle = sdk::host().find_operator(op);
  if (!handle) sdk::fail(TS_ERROR, "vmap: operator '", op, "' does not exist");
  const size_t n_args = values.size();
  const size_t capacity = std::max<size_t>(n_args, 8);
  values.resize(capacity, sdk::none());
  ts_stack s{sizeof(ts_stack), values.data(), int32_t(n_args), int32_t(capacity)};
  {
    BelowLevel below(level_);
    sdk::check_host(sdk::host().call_operator(call_, handle, &s));
  }
  values.resize(size_t(s.size));
}

void CallFrame::return_wrapped(std::span<const ts_value> returns) {
  // A Tensor[] return lives in a buffer of this plugin until the caller takes it.
  thread_local std::vector<ts_tensor> list_buffer;
  std::vector<ts_value> out(returns.begin(), returns.end());
  for (ts_value& v : out) {
    if (v.tag == TS_VALUE_TENSOR && v.u.tensor) {
      sdk::TensorRef value = sdk::TensorRef::adopt(v.u.tensor);
      v.u.tensor = wrap(call_, value, level_).new_reference();
    } else if (v.tag == TS_VALUE_TENSOR_LIST) {
      std::vector<ts_tensor> wrapped;
      for (int64_t j = 0; j < v.u.tensors.size; ++j) {
        ts_tensor t = v.u.tensors.data[j];
        if (!t) { wrapped.push_back(nullptr); continue; }
        sdk::TensorRef value = sdk::TensorRef::adopt(t);
        wrapped.push_back(wrap(call_, value, level_).new_reference());
      }
      list_buffer = std::move(wrapped);
      v.u.tensors.data = list_buffer.data();
      v.u.tensors.size = int64_t(list_buffer.size());
    }
  }
  for (size_t i = 0; i < out.size(); ++i) stack_->values[i] = out[i];
  stack_->size = int32_t(out.size());
}

void CallFrame::return_tensors(std::span<const sdk::TensorRef> values) {
  std::vector<ts_value> out;
  for (const auto& t : values) out.push_back(ts_value{TS_VALUE_TENSOR, 0, {.tensor = t.new_reference()}});
  return_wrapped(out);
}

void CallFrame::return_raw(std::span<const ts_value> returns) {
  for (size_t i = 0; i < returns.size(); ++i) stack_->values[i] = returns[i];
  stack_->size = int32_t(returns.size());
}

void CallFrame::return_argument(size_t i) {
  sdk::host().tensor_retain(args_[i].u.tensor);
  stack_->values[0] = args_[i];
  stack_->size = 1;
}

void inplace_error(const CallFrame& f) {
  sdk::fail(TS_ERROR, "vmap: ", f.op_name(), "(self, *extra_args) is not possible because there exists a Tensor "
            "`other` in extra_args that has more elements than `self`. This happened due to `other` being vmapped "
            "over but `self` not being vmapped over in a vmap. Please try to use out-of-place operators instead "
            "of ", f.op_name(), ".");
}

}  // namespace tessera::vmap

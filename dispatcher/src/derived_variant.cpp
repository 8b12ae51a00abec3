#include <tessera/cpu_fallback.h>
#include <tessera/derived_variant.h>
#include <tessera/tensor.h>

#include <fmt/ranges.h>

#include <algorithm>
#include <vector>

namespace tessera::detail {
namespace {

Tensor borrowed(ts_tensor t) { return Tensor(IntrusivePtr<TensorImpl>::borrow(from_handle(t))); }

bool is_inplace(const FunctionSchema& schema) {
  return !schema.arguments.empty() && schema.arguments[0].alias && schema.arguments[0].alias->is_write;
}

void call_at(OperatorHandle op, int32_t key, ts_stack* stack) {
  Dispatcher::instance().call_with_keys(op, DispatchKeySet(DispatchKeySet::bit(key)), stack);
}

}  // namespace

bool can_derive_variant(OperatorHandle op, int32_t key) {
  OperatorHandle functional = op->functional();
  if (!functional || functional->num_returns() != 1 || !is_fallback_backend_key(key)) return false;
  const KernelEntry* kernel = functional->kernel(key);
  return kernel && !kernel->fallthrough;
}

void run_derived_variant(OperatorHandle op, int32_t key, ts_stack* stack) {
  OperatorHandle functional = op->functional();
  const bool inplace = is_inplace(op->schema());
  const int n_inputs = functional->num_arguments();
  const int target_index = inplace ? 0 : n_inputs;  // out= is the variant's last argument
  if (stack->size <= target_index || stack->values[target_index].tag != TS_VALUE_TENSOR ||
      !stack->values[target_index].u.tensor)
    raise<TypeError>("{}: expected a tensor for argument '{}'", op->name(),
                     op->schema().arguments[size_t(target_index)].name);
  Tensor target = borrowed(stack->values[target_index].u.tensor);

  std::vector<ts_value> values(stack->values, stack->values + n_inputs);
  values.resize(std::max<size_t>(values.size(), 1));
  ts_stack inner{sizeof(ts_stack), values.data(), n_inputs, int32_t(values.size())};
  call_at(functional, key, &inner);
  Tensor result = Tensor::adopt(values[0].u.tensor);

  if (sdk::category(int32_t(result.dtype())) > sdk::category(int32_t(target.dtype())))
    raise<TypeError>("{}: result type {} can't be cast to the desired output type {}", op->name(),
                     name(result.dtype()), name(target.dtype()));
  if (!std::ranges::equal(target.sizes(), result.sizes())) {
    if (inplace)
      raise<RuntimeError>("{}: output with shape [{}] doesn't match the broadcast shape [{}]", op->name(),
                          fmt::join(target.sizes(), ", "), fmt::join(result.sizes(), ", "));
    target.impl()->resize(result.sizes(), op->name());
  }
  if (result.numel() > 0) {
    ts_value copy_args[3] = {{TS_VALUE_TENSOR, 0, {.tensor = target.handle()}},
                             {TS_VALUE_TENSOR, 0, {.tensor = result.handle()}},
                             {TS_VALUE_BOOL, 0, {.b = 0}}};
    ts_stack copy_stack{sizeof(ts_stack), copy_args, 3, 3};
    call_at(Dispatcher::instance().find_or_throw("copy_"), key, &copy_stack);
    for (int i = 0; i < copy_stack.size; ++i)
      if (copy_args[i].tag == TS_VALUE_TENSOR) Tensor::adopt(copy_args[i].u.tensor);  // drop the returned reference
  }
  target.impl()->bump_version();
  stack->values[0] = {TS_VALUE_TENSOR, 0, {.tensor = Tensor(target).release_handle()}};
  stack->size = 1;
}

}  // namespace tessera::detail

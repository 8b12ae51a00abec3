// Registration of the convolution and pooling kernels, and their shared argument helpers.
#include "nn_conv_pool.h"

#include "strided.h"

namespace tessera::cpu {

sdk::TensorRef dense(ts_call call, const sdk::TensorRef& t) {
  if (t.is_contiguous()) return t;
  static const sdk::Operator contiguous("contiguous");
  return contiguous.call(call, {sdk::value(t)});
}

void check_floating(const char* op, const char* what, const sdk::TensorRef& t) {
  if (!sdk::is_floating(t.dtype()))
    sdk::fail(TS_ERROR_TYPE, op, ": expected ", what, " of a floating point dtype, got ", sdk::dtype_name(t.dtype()));
}

void check_same_dtype(const char* op, const char* what, const sdk::TensorRef& t, const char* other, int32_t dtype) {
  if (t.dtype() != dtype)
    sdk::fail(TS_ERROR_TYPE, op, ": expected ", what, " of the same dtype as ", other, " (", sdk::dtype_name(dtype),
              "), got ", sdk::dtype_name(t.dtype()));
}

std::array<int64_t, 2> int_pair(const char* op, const char* name, std::span<const int64_t> values,
                                const std::array<int64_t, 2>* empty_means) {
  if (values.empty() && empty_means) return *empty_means;
  if (values.size() == 1) return {values[0], values[0]};
  if (values.size() == 2) return {values[0], values[1]};
  sdk::fail(TS_ERROR_VALUE, op, ": expected ", name, " to be a single int or a pair of ints, got ",
            strided::str(values));
}

void register_conv_pool_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  register_conv_kernels(reg, key);
  register_max_pool_kernels(reg, key);
  register_avg_pool_kernels(reg, key);
  register_adaptive_pool_kernels(reg, key);
}

}  // namespace tessera::cpu

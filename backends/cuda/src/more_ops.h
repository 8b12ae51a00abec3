#pragma once
// Host-side helpers of the operator families (elementwise_ops.cpp, elementwise_more_ops.cpp,
// reduce_more_ops.cpp, factory_ops.cpp, indexing_ops.cpp): type promotion, in-place outputs,
// and the one device-to-host check they need (a flagged element, e.g. an index out of range).
#include "cuda_plugin.h"
#include "ops_launch.h"

#include <optional>

namespace tessera::gpu {

int dtype_category(int32_t d);  // bool 0 < integer 1 < floating 2

// PyTorch's result_type: dimensioned tensors, then 0-dim tensors, then Python numbers; a lower
// rank changes the result only when its category is higher.
struct ResultType {
  int32_t dimensioned = -1, zero_dim = -1, number = -1;
  void tensor(const TensorRef& t);
  void scalar(const ScalarArg& s);
  int32_t result() const;
};

// The value of a 0-dim CPU tensor as a Scalar (such a tensor acts as a number, PyTorch's rule).
ScalarArg scalar_of_cpu_tensor(const TensorRef& t);
bool is_cpu_number(const TensorRef& t);

// A new tensor of `shape`/`dtype`, or `self` for an in-place variant (checked castable and of
// the broadcast shape). finish_output returns it (bumping self's version when in place).
TensorRef new_or_self(sdk::Args& a, const char* op, bool inplace, const TensorRef& self, std::span<const int64_t> shape,
                      int32_t dtype);
void finish_output(sdk::Args& a, bool inplace, TensorRef&& out);

// The first element of integer tensor `t` (row-major order) with lo <= v < hi (flag_inside) or
// outside [lo, hi), or nullopt. Waits for the device (one 8-byte copy; two when found).
std::optional<int64_t> first_flagged(ts_call call, const TensorRef& t, int64_t lo, int64_t hi, bool flag_inside);
// Raises IndexError (naming `op`) unless every index of `index` (int64 or int32) is in [0, size).
void check_index_range(ts_call call, const char* op, const TensorRef& index, int64_t dim, int64_t size);
// Raises TypeError unless `index` is int64 or int32.
void check_index_dtype(const char* op, const TensorRef& index);

void register_elementwise_more_kernels(sdk::Registrar& reg, ts_dispatch_key key);  // elementwise_more_ops.cpp
void register_reduction_more_kernels(sdk::Registrar& reg, ts_dispatch_key key);    // reduce_more_ops.cpp
void register_factory_kernels(sdk::Registrar& reg, ts_dispatch_key key);           // factory_ops.cpp
void register_indexing_kernels(sdk::Registrar& reg, ts_dispatch_key key);          // indexing_ops.cpp
void register_advanced_index_kernels(sdk::Registrar& reg, ts_dispatch_key key);    // advanced_index_ops.cpp
void register_scan_kernels(sdk::Registrar& reg, ts_dispatch_key key);              // scan_ops.cpp
void register_bucket_kernels(sdk::Registrar& reg, ts_dispatch_key key);            // bucket_ops.cpp
void register_flip_kernels(sdk::Registrar& reg, ts_dispatch_key key);              // flip_ops.cpp

}  // namespace tessera::gpu

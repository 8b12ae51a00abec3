#pragma once
// Shared by the convolution and pooling kernels (nn_conv*.cpp, nn_pool*.cpp): argument
// helpers and the registration of each file's kernels.
#include "kernels.h"

#include <array>
#include <cstdint>
#include <span>

namespace tessera::cpu {

// The tensor itself when contiguous, else a contiguous copy (through the `contiguous` op).
sdk::TensorRef dense(ts_call call, const sdk::TensorRef& t);

// Raises TypeError unless `t` holds a floating dtype.
void check_floating(const char* op, const char* what, const sdk::TensorRef& t);
// Raises TypeError unless `t` has `dtype` (naming `what` and `other`).
void check_same_dtype(const char* op, const char* what, const sdk::TensorRef& t, const char* other, int32_t dtype);

// An int[2] argument: one value stands for two; `empty_means` (when given) replaces [].
std::array<int64_t, 2> int_pair(const char* op, const char* name, std::span<const int64_t> values,
                                const std::array<int64_t, 2>* empty_means = nullptr);

void register_conv_kernels(sdk::Registrar& reg, ts_dispatch_key key);           // nn_conv.cpp
void register_max_pool_kernels(sdk::Registrar& reg, ts_dispatch_key key);       // nn_pool_max.cpp
void register_avg_pool_kernels(sdk::Registrar& reg, ts_dispatch_key key);       // nn_pool_avg.cpp
void register_adaptive_pool_kernels(sdk::Registrar& reg, ts_dispatch_key key);  // nn_pool_adaptive.cpp

}  // namespace tessera::cpu

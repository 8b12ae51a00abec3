#pragma once
// The element-wise reductions Gloo combines buffers with, per dtype and ReduceOp.
#include <tessera/abi.h>

#include <gloo/allreduce.h>

namespace tessera::gloo_backend {

using ReduceFunction = ::gloo::AllreduceOptions::Func;

// The function for `op` on `dtype`; throws std::invalid_argument naming both when Gloo cannot
// reduce that dtype. Complex tensors reach it as their real dtype (SUM only, see gloo_group.cpp).
ReduceFunction reduce_function(int32_t dtype, int32_t op);

}  // namespace tessera::gloo_backend

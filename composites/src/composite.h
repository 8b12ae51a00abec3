#pragma once
// What the composite kernels share: the SDK, argument helpers, and registration of an operator's
// decomposition together with its in-place and out= variants (derived from the functional one).
#include <tessera/sdk/ops.h>
#include <tessera/sdk/plugin.h>

#include <optional>
#include <string>
#include <vector>

namespace tessera::composites {

using sdk::Args;
using sdk::fail;
using sdk::Scalar;
using sdk::TensorRef;
namespace ops = sdk::ops;
using IntList = std::vector<int64_t>;

// Registers `fn` as the implicit composite of `op` ("lerp.Scalar"); with `inplace` / `out`, also
// "lerp_.Scalar" and "lerp.Scalar_out", which run `op` and copy the result into self / out.
// `out_name` overrides the out= variant's name (ops.yaml's out_overload).
void composite(sdk::Registrar& reg, const char* op, sdk::KernelFn fn, bool inplace = false, bool out = false,
               const char* out_name = nullptr);

// `d` wrapped into [0, ndim) (a 0-d tensor takes dims 0 and -1), or a ValueError naming `op`.
int64_t wrap_dim(const char* op, int64_t d, int64_t ndim);
IntList shape_of(const TensorRef& t);
// A 0-d tensor holding `s` on t's device: the other operand of a Scalar overload. Its dtype
// follows the number (int64, bool or the default float), so promotion is PyTorch's.
TensorRef scalar_tensor(const TensorRef& t, const sdk::ScalarArg& s);
TensorRef zero_like_scalar(const TensorRef& t);  // a 0-d zero of t's dtype and device
// True when the 0-d bool tensor `flag` is set; false when it is not on the CPU (checks that
// would need a device-to-host copy are skipped there and left to the kernels).
bool host_flag(const TensorRef& flag);
// x with its dims `source` moved to `destination` (PyTorch's movedim), a view.
TensorRef movedim_to(const TensorRef& x, std::span<const int64_t> source, std::span<const int64_t> destination);
// The shape the tensors broadcast to; ValueError naming `op` when they do not broadcast.
IntList broadcast_shape(const char* op, const std::vector<TensorRef>& ts);
// Returns several tensors (a tuple schema).
void return_tensors(Args& a, std::vector<TensorRef> results);
// Returns a Tensor[] (kept alive on this thread until its next Tensor[] return).
void return_tensor_list(Args& a, const std::vector<TensorRef>& results);

void register_elementwise(sdk::Registrar& reg);
void register_reductions(sdk::Registrar& reg);
void register_shape(sdk::Registrar& reg);
void register_linalg(sdk::Registrar& reg);
void register_einsum(sdk::Registrar& reg);
void register_random(sdk::Registrar& reg);
void register_selection(sdk::Registrar& reg);
void register_diagonals(sdk::Registrar& reg);
void register_linalg_solvers(sdk::Registrar& reg);
void register_core_aten(sdk::Registrar& reg);
void register_special(sdk::Registrar& reg);
void register_everyday(sdk::Registrar& reg);
void register_complex(sdk::Registrar& reg);
void register_fft(sdk::Registrar& reg);
void register_pooling_sampling(sdk::Registrar& reg);
void register_scatter_reduce(sdk::Registrar& reg);

}  // namespace tessera::composites

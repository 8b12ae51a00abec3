#pragma once
// The boundary between the plugin's host code (argument checks, shapes, dtypes, allocation) and
// its device code (the .cu files): plain structs passed by value to kernels, and launchers that
// pick a kernel instance from an enum. Nothing here includes the SDK, so the .cu files stay lean.
#include "gpu.h"

#include <cstdint>

namespace tessera::gpu {

// Loops are coalesced on the host first; more dims than this after coalescing is an error
// (a clear one, raised by the host code) rather than a silent limit.
inline constexpr int kMaxDims = 16;
inline constexpr int kMaxOperands = 4;

// One operand of a loop: its first element, its dtype (ts_dtype code) and its element strides
// over the loop's shape (0 along broadcast dims). data == nullptr marks a Scalar operand.
struct Operand {
  char* data = nullptr;
  int32_t dtype = 0;
  int32_t itemsize = 0;
  int64_t strides[kMaxDims] = {};
};

// An element-wise loop: the shape every operand is laid over; operand 0 is the output.
struct Loop {
  int32_t ndim = 0;
  int32_t noperands = 0;
  int64_t numel = 0;
  int64_t sizes[kMaxDims] = {};
  Operand ops[kMaxOperands];
  bool index32 = true;  // every offset fits in 32 bits: cheaper index arithmetic
  // A Scalar right-hand side (ops[2].data == nullptr) and alpha, in both representations.
  double scalar_d = 0, alpha_d = 1;
  int64_t scalar_i = 0, alpha_i = 1;
};

// The type a kernel computes in: float for float16/bfloat16/float32, double, int64 for
// integers and bool. Inputs are converted on load, outputs on store.
enum class Compute : int32_t { Float, Double, Int64 };

enum class UnaryOp : int32_t { Neg, Abs, Exp, Log, Sqrt, Rsqrt, Sin, Cos, Tanh, Sigmoid, Relu, Gelu, GeluTanh, Silu };
// Add computes a + alpha * b (sub is add with -alpha); comparisons store bool.
enum class BinaryOp : int32_t { Add, Mul, Div, Eq, Ne, Lt, Le, Gt, Ge };

void launch_unary(UnaryOp op, Compute c, const Loop& loop, gpuStream_t stream);
void launch_binary(BinaryOp op, Compute c, const Loop& loop, gpuStream_t stream);
// ops: out, condition, self, other.
void launch_where(Compute c, const Loop& loop, gpuStream_t stream);
// ops: out, src. Converts src's dtype to out's (a byte copy when they match).
void launch_copy(const Loop& loop, gpuStream_t stream);
// ops: out. Stores scalar_d (floating out) or scalar_i (integral/bool out).
void launch_fill(const Loop& loop, gpuStream_t stream);

// A reduction: `in` laid over [kept dims..., reduced dims...] (ndim_kept + ndim_reduced dims in
// sizes/in.strides); `out` is contiguous over the kept dims. result = op(...) * scale.
// With splits > 1 (reduction_splits) it runs in two passes: block (m, s) reduces split s of
// output m into partials[m * splits + s] (8 bytes each, kept * splits of them, on the device),
// then one block per output combines its splits in order.
enum class ReduceOp : int32_t { Sum, Max, Min };
struct Reduction {
  Operand in, out;
  int32_t ndim_kept = 0, ndim_reduced = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t kept = 1, reduced = 1;  // numbers of outputs and of elements per output
  double scale = 1;
  int64_t splits = 1;
  char* partials = nullptr;
};
void launch_reduce(ReduceOp op, Compute acc, const Reduction& r, gpuStream_t stream);

// softmax / log_softmax along the middle dim of a contiguous [outer, dim, inner] input into a
// contiguous output of the same shape (dtypes may differ: converted on load/store).
struct SoftmaxArgs {
  const char* in = nullptr;
  char* out = nullptr;
  int32_t in_dtype = 0, out_dtype = 0;
  int64_t outer = 1, dim = 1, inner = 1;
  bool log = false;
  // Few long rows: each row split over `splits` blocks; partials (2 doubles per (row, split), a
  // device buffer) gets each split's max and its sum of exp(x - max), which the writing pass
  // combines per row in split order. splits 1 (or no partials): one block per row.
  int64_t splits = 1;
  double* partials = nullptr;
};
void launch_softmax(Compute c, const SoftmaxArgs& a, gpuStream_t stream);

// Our own tiled GEMM: c[b] = alpha * a[b] @ b[b] + beta * c[b] for every batch b, any strides
// (in elements: batch, row, col) and float16/bfloat16/float32/float64 operands. The path ROCm
// uses (no rocBLAS in Debian), and the CUDA fallback when cuBLAS is switched off.
struct Matrix {
  char* data = nullptr;
  int32_t dtype = 0;
  int64_t batch_stride = 0, row_stride = 0, col_stride = 0;
};
struct GemmArgs {
  Matrix a, b, c;
  int64_t batch = 1, m = 0, n = 0, k = 0;
  double alpha = 1, beta = 0;
};
void launch_tiled_gemm(Compute acc, const GemmArgs& g, gpuStream_t stream);

}  // namespace tessera::gpu

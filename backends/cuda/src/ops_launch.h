#pragma once
// The host/device boundary of the second set of operator families (elementwise_more.cu,
// reduce_more.cu, factories.cu, indexing.cu): plain structs and enum-keyed launchers, like
// launch.h (whose Loop, Operand and Reduction they reuse).
#include "launch.h"

namespace tessera::gpu {

// ---- element-wise (elementwise_more.cu). Binary: ops out, self, other (other null: a Scalar in
// Loop::scalar_d / scalar_i). DivTrunc/DivFloor/Pow/Maximum/Minimum compute in the common type;
// And/Or read both operands as bool and store bool. Atan2/Copysign compute in floating point,
// Fmod/Remainder (C's and Python's sign) in the common type, the bitwise ops in Int64: `bits`
// is the common dtype's width, which decides when a shift drops every bit.
enum class BinaryMoreOp : int32_t {
  DivTrunc, DivFloor, Pow, Maximum, Minimum, And, Or,
  Atan2, Copysign, Fmod, Remainder, BitAnd, BitOr, BitXor, ShiftLeft, ShiftRight,
};
void launch_binary_more(BinaryMoreOp op, Compute c, const Loop& loop, gpuStream_t stream, int32_t bits = 64);
// Unary: ops out, self. Not stores !bool(self); Sign and the rounding ops (Floor .. Round) keep the
// dtype (integers pass through); BitNot (Int64) keeps it too (~x, or !x for bool); the rest
// compute in floating point.
enum class UnaryMoreOp : int32_t {
  Not, Sign, Log1p, Erf,
  Exp2, Expm1, Log2, Log10, Tan, Asin, Acos, Atan, Sinh, Cosh, Asinh, Acosh, Atanh, Erfc, Erfinv, Lgamma, Digamma,
  Reciprocal, Floor, Ceil, Trunc, Round, BitNot,
};
void launch_unary_more(UnaryMoreOp op, Compute c, const Loop& loop, gpuStream_t stream);
// clamp: ops out, self; bounds in the compute type (lo = scalar_*, hi = alpha_*), each optional.
void launch_clamp(Compute c, const Loop& loop, bool has_lo, bool has_hi, gpuStream_t stream);
// masked_fill: ops out, self, mask; out = mask ? scalar : self (scalar_d / scalar_i).
void launch_masked_fill(Compute c, const Loop& loop, gpuStream_t stream);

// ---- reductions (reduce_more.cu) over Reduction's [kept..., reduced...] layout. Prod computes in
// `acc` (double for floats, int64 for integers); ArgMax/ArgMin store the int64 linear index (over
// the reduced dims) of the first extremum, NaN counting as the extremum; Var/Std (double, with
// `correction`) and LogSumExp (double) store in out's dtype.
enum class ReduceMoreOp : int32_t { Prod, ArgMax, ArgMin, Var, Std, LogSumExp };
// With r.splits > 1, r.partials holds kept * splits slots of kReduceMorePartialBytes (the
// largest accumulator state, var/std's count, mean and M2).
inline constexpr size_t kReduceMorePartialBytes = 24;
void launch_reduce_more(ReduceMoreOp op, Compute acc, const Reduction& r, double correction, gpuStream_t stream);

// ---- factories (factories.cu): each fills a contiguous `out` of `numel` elements.
enum class FactoryOp : int32_t { ArangeInt, ArangeDouble, Linspace, Eye, Rand, Randn, Randint };
struct FactoryArgs {
  char* out = nullptr;
  int32_t dtype = 0;
  int64_t numel = 0;
  int64_t start_i = 0, step_i = 1;      // ArangeInt; Randint: low and range (high - low)
  double start_d = 0, step_d = 0, end_d = 0;  // ArangeDouble, Linspace
  int64_t steps = 0;                    // Linspace
  int64_t cols = 1;                     // Eye: m
  uint64_t seed = 0;                    // Rand, Randn, Randint (Philox4x32-10 key)
  int32_t digits = 24;                  // Rand: random mantissa bits of the dtype
};
void launch_factory(FactoryOp op, const FactoryArgs& args, gpuStream_t stream);

// ---- indexing (indexing.cu). One loop, ops out/target (0), value source (1, null for a Scalar),
// index (2); `step` is the element stride of the indexed dim of the side that is indexed.
//   Gather:     ops[0][o0]                = ops[1][o1 + index * step]
//   Scatter:    ops[0][o0 + index * step] = ops[1][o1]       (or the scalar when ops[1] is null)
//   ScatterAdd: ops[0][o0 + index * step] += alpha * ops[1][o1]   (atomically; bool: or)
// Values move between operands of one dtype.
enum class IndexOp : int32_t { Gather, Scatter, ScatterAdd };
void launch_index(IndexOp op, const Loop& loop, int64_t step, gpuStream_t stream);
// Advanced indexing: ops[0] (int64 offsets over the index shape) = (first ? 0 : ops[0]) +
// stride * wrap(ops[1]), where wrap adds `size` to a negative index. Index.Tensor then gathers
// and index_put scatters through these offsets (step 1).
void launch_index_offsets(const Loop& loop, int64_t size, int64_t stride, bool first, gpuStream_t stream);
// Writes into *bad (device memory, INT64_MAX before) the smallest linear position (over the
// loop's shape) of an element v of ops[0] (an integer tensor) with lo <= v < hi (flag_inside) or
// outside that range (!flag_inside): out-of-range indices, zero integer divisors.
void launch_value_check(const Loop& loop, int64_t lo, int64_t hi, bool flag_inside, int64_t* bad, gpuStream_t stream);

// ---- nonzero (nonzero.cu): a stream compaction. loop.ops[0] is the input over its shape; the
// coordinates are over `sizes` (the shape before coalescing, ndim <= kMaxDims).
struct NonzeroArgs {
  Loop loop;
  int32_t ndim = 0;
  int64_t sizes[kMaxDims] = {};
};
int64_t nonzero_tiles(int64_t numel);
// tile_counts: nonzero_tiles(numel) + 1 int64s; afterwards the first output row of every tile,
// then the number of nonzeros.
void launch_nonzero_count(const Loop& loop, int64_t* tile_counts, gpuStream_t stream);
// Writes the coordinates (int64, ndim per row) of the nonzeros into out, in row-major order.
void launch_nonzero_write(const NonzeroArgs& args, const int64_t* tile_first_row, int64_t* out, gpuStream_t stream);

}  // namespace tessera::gpu

#pragma once
// Vectorised float32 kernels behind one table of function pointers per instruction set. The
// table is chosen once, when the plugin registers its kernels, from what the CPU supports
// (__builtin_cpu_supports), or forced with TESSERA_CPU_ISA=scalar|avx2|avx512. Each ISA's code
// lives in its own translation unit compiled with that ISA's flags (vec_avx2.cpp,
// vec_avx512.cpp); the rest of the plugin stays baseline x86-64, so it loads on any CPU.
// Every function takes contiguous float32 arrays; `out` may alias an input element-for-element.
#include <cstdint>

namespace tessera::cpu::simd {

enum class Unary : int { Exp, Log, Log1p, Sqrt, Rsqrt, Sin, Cos, Tanh, Sigmoid, Erf, Neg, Abs, Relu, Count };
// Activations: forward x -> f(x) and backward (grad, x) -> grad * f'(x), with nn_activation.cpp's
// formulas. Only the vector tables have them (null in the scalar one: callers loop themselves).
enum class Activation : int { Gelu, GeluTanh, Silu, Count };
enum class Binary : int { Add, Sub, Mul, Div, Count };

using UnaryFn = void (*)(float* out, const float* in, int64_t n);
// Both operands arrays (vv), the right one a scalar (vs), or the left one a scalar (sv).
using BinaryVV = void (*)(float* out, const float* a, const float* b, int64_t n);
using BinaryVS = void (*)(float* out, const float* a, float b, int64_t n);
using BinarySV = void (*)(float* out, float a, const float* b, int64_t n);

struct Table {
  const char* isa;  // "scalar", "avx2", "avx512"
  UnaryFn unary[int(Unary::Count)];
  BinaryVV binary_vv[int(Binary::Count)];
  BinaryVS binary_vs[int(Binary::Count)];
  BinarySV binary_sv[int(Binary::Count)];
  UnaryFn activation[int(Activation::Count)];
  BinaryVV activation_backward[int(Activation::Count)];
  // One layer-norm row of n floats: its mean and 1 / sqrt(var + eps) (two passes, sums in double),
  // then y = (x - mean) * rstd * w + b (w and b may be null). Null in the scalar table.
  void (*layer_norm_row)(float* y, const float* x, int64_t n, double eps, const float* w, const float* b,
                         double* mean, double* rstd);
  // Its backward for grad_input: g = dy * w (w may be null), gi = rstd (g - mean(g) - xhat mean(g xhat));
  // the same pass adds the row's weight and bias gradients, dy * xhat and dy, into the float
  // accumulators gw and gb when they are not null.
  void (*layer_norm_backward_row)(float* gi, const float* dy, const float* x, int64_t n, float mean, float rstd,
                                  const float* w, float* gw, float* gb);
  // The sum of n floats, accumulated in double.
  double (*sum)(const float* x, int64_t n);
  // Adds `rows` rows of n floats (row r at x + r * stride) into the double accumulators acc[0, n):
  // the column sums of a sum over leading dims (bias gradients).
  void (*sum_rows)(double* acc, const float* x, int64_t rows, int64_t stride, int64_t n);
  // A running max with positions (max pooling): where v[i] > best[i] or v[i] is NaN (PyTorch's
  // rule: the first maximum wins, a NaN wins, the last NaN's position), best[i] = v[i] and
  // at[i] = v_at[i] + offset. Positions are floats (exact below 2^24).
  void (*max_update)(float* best, float* at, const float* v, const float* v_at, float offset, int64_t n);
  // One row of softmax / log_softmax: max subtracted first, float arithmetic.
  void (*softmax)(float* out, const float* in, int64_t n);
  void (*log_softmax)(float* out, const float* in, int64_t n);
  // The max of a row (-inf when empty), and the sum of exp(x - shift), each exp also stored into
  // `e` when it is not null (e may be x): the fused attention's online softmax.
  float (*row_max)(const float* x, int64_t n);
  float (*exp_sum)(float* e, const float* x, float shift, int64_t n);
  // The same with an exp within 2 ulp instead of 1 (several times cheaper): the fused attention.
  float (*exp_sum_fast)(float* e, const float* x, float shift, int64_t n);
};

// Per-ISA tables; avx2/avx512 return nullptr when compiled out (non-x86 builds).
const Table* scalar_table();
const Table* avx2_table();
const Table* avx512_table();

// Picks the table (reads TESSERA_CPU_ISA); called once at plugin registration.
void select_isa();
// The table in use (the scalar one until select_isa runs).
const Table& table();

inline const Table& vec() { return table(); }

}  // namespace tessera::cpu::simd

// Element-wise binary math: atan2, fmod, remainder, copysign and the bitwise and / or / xor,
// with in-place and out= variants. Operands are promoted and cast by the TensorIterator.
#include "kernels.h"
#include "tensor_iterator.h"

#include <atomic>
#include <cmath>

namespace tessera::cpu {
namespace {

using sdk::fail;
using sdk::opmath_t;

TensorIterator iter(sdk::Args& a, const std::string& name, Variant v, bool int_to_float) {
  IterConfig cfg(a.call(), name.c_str());
  cfg.output(v, a.tensor(0), v == Variant::Out ? a.tensor(2) : TensorRef()).input(a.tensor(0)).input(a.tensor(1));
  if (int_to_float) cfg.promote_integers_to_float();
  return cfg.build();
}

template <class T, class F>
void run(TensorIterator& it, F f) {
  it.run([&f](char** d, const int64_t* s, int64_t n) { binary_row<T, T, T>(d, s, n, f); });
}

// Integer fmod / remainder by zero raises, as PyTorch's ZeroDivisionError.
template <class T>
void check_divisor(const TensorIterator& it, const std::string& name) {
  if constexpr (std::is_integral_v<T>) {
    std::atomic<bool> zero{false};
    const_cast<TensorIterator&>(it).run([&zero](char** d, const int64_t* s, int64_t n) {
      for (int64_t i = 0; i < n; ++i)
        if (*reinterpret_cast<const T*>(d[2] + i * s[2]) == T(0)) zero.store(true, std::memory_order_relaxed);
    });
    if (zero.load()) fail(TS_ERROR_VALUE, name, ": ZeroDivisionError (integer division by zero)");
  }
}

// atan2 and copysign: floating results (integers compute in float32), f in the compute type.
template <Variant V, class F>
void floating_binary(sdk::Args& a, const char* base, F f) {
  const std::string name = variant_name(base, V);
  TensorIterator it = iter(a, name, V, true);
  TS_DISPATCH_FLOAT(it.common_dtype(), fail(TS_ERROR_TYPE, name, ": unsupported dtype"), {
    using M = opmath_t<scalar_t>;
    run<scalar_t>(it, [&f](scalar_t x, scalar_t y) { return scalar_t(f(M(x), M(y))); });
  });
  a.return_argument(it.result());
}

template <Variant V>
void atan2_k(sdk::Args& a) {
  floating_binary<V>(a, "atan2", [](auto y, auto x) { return std::atan2(y, x); });
}

template <Variant V>
void copysign_k(sdk::Args& a) {
  floating_binary<V>(a, "copysign", [](auto x, auto y) { return std::copysign(x, y); });
}

template <class M, bool Python> M modulo(M x, M y) {
  M r;
  if constexpr (std::is_floating_point_v<M>) r = std::fmod(x, y);
  else if constexpr (std::is_signed_v<M>) r = (y == M(-1)) ? M(0) : M(x % y);  // INT_MIN % -1 traps
  else r = M(x % y);
  if constexpr (Python && std::is_signed_v<M>)
    if (r != M(0) && ((r < M(0)) != (y < M(0)))) r = M(r + y);
  return r;
}

// fmod: the remainder with the dividend's sign (C's fmod); remainder: with the divisor's (Python's %).
template <Variant V, bool Python>
void modulo_k(sdk::Args& a) {
  const std::string name = variant_name(Python ? "remainder" : "fmod", V);
  TensorIterator it = iter(a, name, V, false);
  if (it.common_dtype() == TS_BOOL) fail(TS_ERROR_TYPE, name, ": not implemented for 'Bool'");
  TS_DISPATCH_NUMERIC(it.common_dtype(), fail(TS_ERROR_TYPE, name, ": unsupported dtype"), {
    using M = opmath_t<scalar_t>;
    if (it.numel() > 0) check_divisor<scalar_t>(it, name);
    run<scalar_t>(it, [](scalar_t x, scalar_t y) { return scalar_t(modulo<M, Python>(M(x), M(y))); });
  });
  a.return_argument(it.result());
}

enum class Bitwise { And, Or, Xor, LeftShift, RightShift };
// Shifts by a negative amount or by the width or more give 0 (right shifts of negatives: -1), as PyTorch.
template <Bitwise B, class T> T bitwise(T x, T y) {
  if constexpr (!std::is_integral_v<T>) return x;  // unreachable: floating dtypes are refused
  else if constexpr (B == Bitwise::And) return T(x & y);
  else if constexpr (B == Bitwise::Or) return T(x | y);
  else if constexpr (B == Bitwise::Xor) return T(x ^ y);
  else if constexpr (std::is_same_v<T, bool>) return x;  // unreachable: bool shifts are refused
  else {
    constexpr int64_t width = int64_t(sizeof(T) * 8);
    const int64_t n = int64_t(y);
    using U = std::make_unsigned_t<T>;
    if (B == Bitwise::LeftShift) return (n < 0 || n >= width) ? T(0) : T(U(x) << n);
    if (n < 0 || n >= width) return (std::is_signed_v<T> && x < 0) ? T(-1) : T(0);
    return T(x >> n);
  }
}
template <Variant V, Bitwise B>
void bitwise_k(sdk::Args& a) {
  static constexpr const char* names[] = {"bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift",
                                          "bitwise_right_shift"};
  const std::string name = variant_name(names[int(B)], V);
  TensorIterator it = iter(a, name, V, false);
  if (sdk::is_floating(it.common_dtype()))
    fail(TS_ERROR_TYPE, name, ": only integer and boolean tensors are supported, got ", sdk::dtype_name(it.common_dtype()));
  if (B >= Bitwise::LeftShift && it.common_dtype() == TS_BOOL) fail(TS_ERROR_TYPE, name, ": not implemented for 'Bool'");
  TS_DISPATCH_ALL(it.common_dtype(), fail(TS_ERROR_TYPE, name, ": unsupported dtype"), {
    run<scalar_t>(it, [](scalar_t x, scalar_t y) { return bitwise<B>(x, y); });
  });
  a.return_argument(it.result());
}

constexpr Variant F = Variant::Functional, I = Variant::Inplace, O = Variant::Out;

}  // namespace

void register_binary_math_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("atan2", key, atan2_k<F>);
  reg.kernel("atan2_", key, atan2_k<I>);
  reg.kernel("atan2.out", key, atan2_k<O>);
  reg.kernel("copysign.Tensor", key, copysign_k<F>);
  reg.kernel("copysign_.Tensor", key, copysign_k<I>);
  reg.kernel("copysign.out", key, copysign_k<O>);
  reg.kernel("fmod.Tensor", key, modulo_k<F, false>);
  reg.kernel("fmod_.Tensor", key, modulo_k<I, false>);
  reg.kernel("fmod.out", key, modulo_k<O, false>);
  reg.kernel("remainder.Tensor", key, modulo_k<F, true>);
  reg.kernel("remainder_.Tensor", key, modulo_k<I, true>);
  reg.kernel("remainder.out", key, modulo_k<O, true>);
  reg.kernel("bitwise_and.Tensor", key, bitwise_k<F, Bitwise::And>);
  reg.kernel("bitwise_and_.Tensor", key, bitwise_k<I, Bitwise::And>);
  reg.kernel("bitwise_and.out", key, bitwise_k<O, Bitwise::And>);
  reg.kernel("bitwise_or.Tensor", key, bitwise_k<F, Bitwise::Or>);
  reg.kernel("bitwise_or_.Tensor", key, bitwise_k<I, Bitwise::Or>);
  reg.kernel("bitwise_or.out", key, bitwise_k<O, Bitwise::Or>);
  reg.kernel("bitwise_xor.Tensor", key, bitwise_k<F, Bitwise::Xor>);
  reg.kernel("bitwise_xor_.Tensor", key, bitwise_k<I, Bitwise::Xor>);
  reg.kernel("bitwise_xor.out", key, bitwise_k<O, Bitwise::Xor>);
  reg.kernel("bitwise_left_shift.Tensor", key, bitwise_k<F, Bitwise::LeftShift>);
  reg.kernel("bitwise_left_shift_.Tensor", key, bitwise_k<I, Bitwise::LeftShift>);
  reg.kernel("bitwise_left_shift.out", key, bitwise_k<O, Bitwise::LeftShift>);
  reg.kernel("bitwise_right_shift.Tensor", key, bitwise_k<F, Bitwise::RightShift>);
  reg.kernel("bitwise_right_shift_.Tensor", key, bitwise_k<I, Bitwise::RightShift>);
  reg.kernel("bitwise_right_shift.out", key, bitwise_k<O, Bitwise::RightShift>);
}

}  // namespace tessera::cpu

#pragma once
// Header-only dtype facts shared by the host and plugins: names, sizes, categories, the
// PyTorch type-promotion lattice, the 16-bit float types and a dtype switch.
// Everything here is inline: a plugin including it gains no link dependency on the host.
#include <tessera/abi.h>

#include <bit>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace tessera::sdk {

// IEEE binary16, stored as bits; arithmetic goes through float.
struct Half {
  uint16_t bits = 0;
  Half() = default;
  Half(float f) : bits(from_float(f)) {}  // NOLINT: implicit like a float type
  operator float() const { return to_float(bits); }

  static uint16_t from_float(float f) {
    uint32_t x = std::bit_cast<uint32_t>(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t abs = x & 0x7fffffffu;
    if (abs >= 0x7f800000u) return uint16_t(sign | (abs > 0x7f800000u ? 0x7e00u : 0x7c00u));
    if (abs >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds to inf
    if (abs < 0x38800000u) {                                   // subnormal half
      float v = std::bit_cast<float>(abs) + 0.5f;              // align mantissa, round to nearest even
      return uint16_t(sign | (std::bit_cast<uint32_t>(v) - 0x3f000000u));
    }
    uint32_t mant_odd = (abs >> 13) & 1u;
    abs += 0xc8000fffu + mant_odd;  // rebias exponent (-112 << 23) and round to nearest even
    return uint16_t(sign | (abs >> 13));
  }
  static float to_float(uint16_t h) {
    uint32_t sign = uint32_t(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
    if (exp == 0) {
      float v = float(mant) * 5.9604644775390625e-8f;  // 2^-24
      return sign ? -v : v;
    }
    return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
  }
};

// bfloat16: the top half of a float32, rounded to nearest even.
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  BFloat16(float f) : bits(from_float(f)) {}  // NOLINT
  operator float() const { return std::bit_cast<float>(uint32_t(bits) << 16); }
  static uint16_t from_float(float f) {
    uint32_t x = std::bit_cast<uint32_t>(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40u);  // quiet NaN
    x += 0x7fffu + ((x >> 16) & 1u);
    return uint16_t(x >> 16);
  }
};

inline constexpr std::string_view dtype_name(int32_t dtype) {
  constexpr std::string_view names[TS_NUM_DTYPES] = {"bool",    "uint8",    "int8",    "int16",
                                                     "int32",   "int64",    "float16", "bfloat16",
                                                     "float32", "float64",  "complex64", "complex128"};
  return dtype >= 0 && dtype < TS_NUM_DTYPES ? names[dtype] : std::string_view("<invalid dtype>");
}
inline constexpr bool dtype_valid(int32_t dtype) { return dtype >= 0 && dtype < TS_NUM_DTYPES; }
inline constexpr int64_t dtype_itemsize(int32_t dtype) {
  constexpr int64_t sizes[TS_NUM_DTYPES] = {1, 1, 1, 2, 4, 8, 2, 2, 4, 8, 8, 16};
  return dtype_valid(dtype) ? sizes[dtype] : 0;
}
inline constexpr bool is_floating(int32_t d) { return d >= TS_FLOAT16 && d <= TS_FLOAT64; }
inline constexpr bool is_integral(int32_t d, bool include_bool) {
  return (d >= TS_UINT8 && d <= TS_INT64) || (include_bool && d == TS_BOOL);
}
inline constexpr bool is_complex(int32_t d) { return d == TS_COMPLEX64 || d == TS_COMPLEX128; }
// Floating or complex: the dtypes whose math functions are defined (exp, sqrt, ...).
inline constexpr bool is_inexact(int32_t d) { return is_floating(d) || is_complex(d); }
// The real dtype of a complex one's parts (complex64 -> float32); other dtypes map to themselves.
inline constexpr int32_t real_dtype(int32_t d) {
  return d == TS_COMPLEX64 ? TS_FLOAT32 : d == TS_COMPLEX128 ? TS_FLOAT64 : d;
}
// The complex dtype with parts of a floating dtype (float64 -> complex128, the rest complex64).
inline constexpr int32_t complex_dtype(int32_t d) {
  return is_complex(d) ? d : d == TS_FLOAT64 ? TS_COMPLEX128 : TS_COMPLEX64;
}
// PyTorch's dtype categories, in the order result_type ranks them.
enum class DtypeCategory { Bool, Integral, Floating, Complex };
inline constexpr DtypeCategory category(int32_t d) {
  return d == TS_BOOL ? DtypeCategory::Bool
         : is_complex(d) ? DtypeCategory::Complex
         : is_floating(d) ? DtypeCategory::Floating
                          : DtypeCategory::Integral;
}

// PyTorch's promotion lattice for two tensor dtypes.
inline constexpr int32_t promote_types(int32_t a, int32_t b) {
  if (a == b) return a;
  if (a == TS_BOOL) return b;
  if (b == TS_BOOL) return a;
  if (is_complex(a) || is_complex(b)) {  // complex wins; its parts are as wide as the wider side
    const bool wide = real_dtype(a) == TS_FLOAT64 || real_dtype(b) == TS_FLOAT64;
    return wide ? TS_COMPLEX128 : TS_COMPLEX64;
  }
  bool fa = is_floating(a), fb = is_floating(b);
  if (fa != fb) return fa ? a : b;
  if (fa) {  // both floating
    if ((a == TS_FLOAT16 && b == TS_BFLOAT16) || (a == TS_BFLOAT16 && b == TS_FLOAT16)) return TS_FLOAT32;
    return a > b ? a : b;
  }
  // both integral
  if (a == TS_UINT8 || b == TS_UINT8) {
    int32_t other = a == TS_UINT8 ? b : a;
    return other == TS_INT8 ? TS_INT16 : other;
  }
  return a > b ? a : b;
}

template <int32_t D> struct CType;
template <> struct CType<TS_BOOL> { using type = bool; };
template <> struct CType<TS_UINT8> { using type = uint8_t; };
template <> struct CType<TS_INT8> { using type = int8_t; };
template <> struct CType<TS_INT16> { using type = int16_t; };
template <> struct CType<TS_INT32> { using type = int32_t; };
template <> struct CType<TS_INT64> { using type = int64_t; };
template <> struct CType<TS_FLOAT16> { using type = Half; };
template <> struct CType<TS_BFLOAT16> { using type = BFloat16; };
template <> struct CType<TS_FLOAT32> { using type = float; };
template <> struct CType<TS_FLOAT64> { using type = double; };
template <> struct CType<TS_COMPLEX64> { using type = std::complex<float>; };
template <> struct CType<TS_COMPLEX128> { using type = std::complex<double>; };

template <class T> inline constexpr bool is_complex_v = false;
template <class T> inline constexpr bool is_complex_v<std::complex<T>> = true;

// The type arithmetic on T is done in: float for the 16-bit floats, T otherwise.
template <class T> struct OpMath { using type = T; };
template <> struct OpMath<Half> { using type = float; };
template <> struct OpMath<BFloat16> { using type = float; };
template <class T> using opmath_t = typename OpMath<T>::type;

}  // namespace tessera::sdk

// Runs `...` (a lambda-body or call using scalar_t) with scalar_t bound to the C type of
// `DTYPE`. The _ALL form covers every real dtype, _NUMERIC all but bool, _FLOAT the floating ones;
// others fall to ON_ERROR. Complex dtypes are in the _COMPLEX and _AND_COMPLEX forms only, so a
// kernel opts in to complex and every other one refuses it with a clear error.
#define TS_DTYPE_CASE(D, ...) \
  case D: { using scalar_t = typename ::tessera::sdk::CType<D>::type; __VA_ARGS__; break; }
#define TS_INTEGRAL_CASES(...)                                                                  \
  TS_DTYPE_CASE(TS_UINT8, __VA_ARGS__) TS_DTYPE_CASE(TS_INT8, __VA_ARGS__)                      \
  TS_DTYPE_CASE(TS_INT16, __VA_ARGS__) TS_DTYPE_CASE(TS_INT32, __VA_ARGS__)                     \
  TS_DTYPE_CASE(TS_INT64, __VA_ARGS__)
#define TS_FLOAT_CASES(...)                                                                     \
  TS_DTYPE_CASE(TS_FLOAT16, __VA_ARGS__) TS_DTYPE_CASE(TS_BFLOAT16, __VA_ARGS__)                \
  TS_DTYPE_CASE(TS_FLOAT32, __VA_ARGS__) TS_DTYPE_CASE(TS_FLOAT64, __VA_ARGS__)
#define TS_COMPLEX_CASES(...) \
  TS_DTYPE_CASE(TS_COMPLEX64, __VA_ARGS__) TS_DTYPE_CASE(TS_COMPLEX128, __VA_ARGS__)
#define TS_DISPATCH_ALL(DTYPE, ON_ERROR, ...)                                                   \
  switch (DTYPE) {                                                                              \
    TS_DTYPE_CASE(TS_BOOL, __VA_ARGS__) TS_INTEGRAL_CASES(__VA_ARGS__) TS_FLOAT_CASES(__VA_ARGS__) \
    default: ON_ERROR;                                                                          \
  }
#define TS_DISPATCH_NUMERIC(DTYPE, ON_ERROR, ...)                                               \
  switch (DTYPE) {                                                                              \
    TS_INTEGRAL_CASES(__VA_ARGS__) TS_FLOAT_CASES(__VA_ARGS__)                                  \
    default: ON_ERROR;                                                                          \
  }
#define TS_DISPATCH_FLOAT(DTYPE, ON_ERROR, ...)                                                 \
  switch (DTYPE) {                                                                              \
    TS_FLOAT_CASES(__VA_ARGS__)                                                                 \
    default: ON_ERROR;                                                                          \
  }
#define TS_DISPATCH_COMPLEX(DTYPE, ON_ERROR, ...)                                               \
  switch (DTYPE) {                                                                              \
    TS_COMPLEX_CASES(__VA_ARGS__)                                                               \
    default: ON_ERROR;                                                                          \
  }
#define TS_DISPATCH_NUMERIC_AND_COMPLEX(DTYPE, ON_ERROR, ...)                                   \
  switch (DTYPE) {                                                                              \
    TS_INTEGRAL_CASES(__VA_ARGS__) TS_FLOAT_CASES(__VA_ARGS__) TS_COMPLEX_CASES(__VA_ARGS__)    \
    default: ON_ERROR;                                                                          \
  }
#define TS_DISPATCH_ALL_AND_COMPLEX(DTYPE, ON_ERROR, ...)                                       \
  switch (DTYPE) {                                                                              \
    TS_DTYPE_CASE(TS_BOOL, __VA_ARGS__) TS_INTEGRAL_CASES(__VA_ARGS__) TS_FLOAT_CASES(__VA_ARGS__) \
    TS_COMPLEX_CASES(__VA_ARGS__)                                                               \
    default: ON_ERROR;                                                                          \
  }
#define TS_DISPATCH_FLOAT_AND_COMPLEX(DTYPE, ON_ERROR, ...)                                     \
  switch (DTYPE) {                                                                              \
    TS_FLOAT_CASES(__VA_ARGS__) TS_COMPLEX_CASES(__VA_ARGS__)                                   \
    default: ON_ERROR;                                                                          \
  }

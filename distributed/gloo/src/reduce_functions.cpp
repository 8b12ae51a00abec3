#include "reduce_functions.h"

#include <gloo/math.h>
#include <gloo/types.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

namespace tessera::gloo_backend {
namespace {

// bfloat16 is the top half of a float32: combine in float32, round to nearest even.
struct BFloat16 {
  uint16_t bits;
};
float to_float(BFloat16 v) {
  uint32_t u = uint32_t(v.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
BFloat16 to_bfloat16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return {uint16_t((u >> 16) | 0x40)};  // NaN stays NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return {uint16_t(u >> 16)};
}

template <class T, class Combine>
void elementwise(void* c, const void* a, const void* b, size_t n, Combine combine) {
  auto* out = static_cast<T*>(c);
  auto* x = static_cast<const T*>(a);
  auto* y = static_cast<const T*>(b);
  for (size_t i = 0; i < n; ++i) out[i] = combine(x[i], y[i]);
}

template <class T>
ReduceFunction arithmetic(int32_t op) {
  switch (op) {
    case TS_REDUCE_SUM:
      return [](void* c, const void* a, const void* b, size_t n) { elementwise<T>(c, a, b, n, [](T x, T y) { return T(x + y); }); };
    case TS_REDUCE_PRODUCT:
      return [](void* c, const void* a, const void* b, size_t n) { elementwise<T>(c, a, b, n, [](T x, T y) { return T(x * y); }); };
    case TS_REDUCE_MIN:
      return [](void* c, const void* a, const void* b, size_t n) { elementwise<T>(c, a, b, n, [](T x, T y) { return y < x ? y : x; }); };
    case TS_REDUCE_MAX:
      return [](void* c, const void* a, const void* b, size_t n) { elementwise<T>(c, a, b, n, [](T x, T y) { return x < y ? y : x; }); };
  }
  throw std::invalid_argument("unknown reduce op " + std::to_string(op));
}

ReduceFunction bfloat16(int32_t op) {
  auto via_float = [](auto f) {
    return [f](void* c, const void* a, const void* b, size_t n) {
      elementwise<BFloat16>(c, a, b, n, [&](BFloat16 x, BFloat16 y) { return to_bfloat16(f(to_float(x), to_float(y))); });
    };
  };
  switch (op) {
    case TS_REDUCE_SUM: return via_float([](float x, float y) { return x + y; });
    case TS_REDUCE_PRODUCT: return via_float([](float x, float y) { return x * y; });
    case TS_REDUCE_MIN: return via_float([](float x, float y) { return std::min(x, y); });
    case TS_REDUCE_MAX: return via_float([](float x, float y) { return std::max(x, y); });
  }
  throw std::invalid_argument("unknown reduce op " + std::to_string(op));
}

// Booleans: SUM and MAX are "any", PRODUCT and MIN are "all" (torch's gloo does the same).
ReduceFunction boolean(int32_t op) {
  if (op == TS_REDUCE_SUM || op == TS_REDUCE_MAX)
    return [](void* c, const void* a, const void* b, size_t n) { elementwise<uint8_t>(c, a, b, n, [](uint8_t x, uint8_t y) { return uint8_t(x || y); }); };
  return [](void* c, const void* a, const void* b, size_t n) { elementwise<uint8_t>(c, a, b, n, [](uint8_t x, uint8_t y) { return uint8_t(x && y); }); };
}

}  // namespace

ReduceFunction reduce_function(int32_t dtype, int32_t op) {
  switch (dtype) {
    case TS_BOOL: return boolean(op);
    case TS_UINT8: return arithmetic<uint8_t>(op);
    case TS_INT8: return arithmetic<int8_t>(op);
    case TS_INT16: return arithmetic<int16_t>(op);
    case TS_INT32: return arithmetic<int32_t>(op);
    case TS_INT64: return arithmetic<int64_t>(op);
    case TS_FLOAT16: return arithmetic<::gloo::float16>(op);
    case TS_BFLOAT16: return bfloat16(op);
    case TS_FLOAT32: return arithmetic<float>(op);
    case TS_FLOAT64: return arithmetic<double>(op);
  }
  throw std::invalid_argument("dtype code " + std::to_string(dtype) + " cannot be reduced by Gloo");
}

}  // namespace tessera::gloo_backend

#pragma once
// ScalarType: the dtype of a tensor. Codes are those of the C ABI (ts_dtype).
#include <tessera/sdk/dtype.h>

#include <string>

namespace tessera {

enum class ScalarType : int32_t {
  Bool = TS_BOOL, UInt8 = TS_UINT8, Int8 = TS_INT8, Int16 = TS_INT16, Int32 = TS_INT32,
  Int64 = TS_INT64, Float16 = TS_FLOAT16, BFloat16 = TS_BFLOAT16, Float32 = TS_FLOAT32,
  Float64 = TS_FLOAT64, Complex64 = TS_COMPLEX64, Complex128 = TS_COMPLEX128,
};
using Half = sdk::Half;
using BFloat16 = sdk::BFloat16;

inline std::string_view name(ScalarType t) { return sdk::dtype_name(int32_t(t)); }
inline int64_t itemsize(ScalarType t) { return sdk::dtype_itemsize(int32_t(t)); }
inline bool is_floating_point(ScalarType t) { return sdk::is_floating(int32_t(t)); }
inline bool is_complex(ScalarType t) { return sdk::is_complex(int32_t(t)); }
inline ScalarType promote_types(ScalarType a, ScalarType b) {
  return ScalarType(sdk::promote_types(int32_t(a), int32_t(b)));
}
// Parses "float32", "float", "int64", "long", "half", ... ; raises ValueError otherwise.
ScalarType scalar_type_from_name(std::string_view name);

inline constexpr ScalarType kBool = ScalarType::Bool, kUInt8 = ScalarType::UInt8,
                            kInt8 = ScalarType::Int8, kInt16 = ScalarType::Int16,
                            kInt32 = ScalarType::Int32, kInt64 = ScalarType::Int64,
                            kFloat16 = ScalarType::Float16, kBFloat16 = ScalarType::BFloat16,
                            kFloat32 = ScalarType::Float32, kFloat64 = ScalarType::Float64,
                            kComplex64 = ScalarType::Complex64, kComplex128 = ScalarType::Complex128;

}  // namespace tessera

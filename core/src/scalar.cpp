#include <tessera/error.h>
#include <tessera/scalar.h>
#include <tessera/scalar_type.h>

#include <array>

namespace tessera {

std::string Scalar::str() const {
  switch (kind_) {
    case Kind::Bool: return i_ ? "True" : "False";
    case Kind::Int: return fmt::format("{}", i_);
    case Kind::Double: return fmt::format("{}", d_);
  }
  return "?";
}

ScalarType scalar_type_from_name(std::string_view name) {
  static const std::array<std::pair<std::string_view, ScalarType>, 23> aliases{{
      {"bool", kBool}, {"uint8", kUInt8}, {"int8", kInt8}, {"int16", kInt16}, {"short", kInt16},
      {"int32", kInt32}, {"int", kInt32}, {"int64", kInt64}, {"long", kInt64}, {"float16", kFloat16},
      {"half", kFloat16}, {"bfloat16", kBFloat16}, {"float32", kFloat32}, {"float", kFloat32},
      {"float64", kFloat64}, {"double", kFloat64}, {"Long", kInt64}, {"Float", kFloat32}, {"Bool", kBool},
      {"complex64", kComplex64}, {"cfloat", kComplex64}, {"complex128", kComplex128}, {"cdouble", kComplex128}}};
  for (auto& [n, t] : aliases)
    if (n == name) return t;
  raise<ValueError>("unknown dtype '{}': expected one of bool, uint8, int8, int16, int32, int64, float16, "
                    "bfloat16, float32, float64, complex64, complex128", name);
}

}  // namespace tessera

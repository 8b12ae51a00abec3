// More element-wise kernels (functional and in place; out= variants fall back to the CPU):
// div with rounding_mode, floor_divide, pow (Tensor and Scalar exponents), maximum, minimum,
// logical_and/or/not, atan2, copysign, fmod, remainder, the bitwise ops, clamp, masked_fill,
// sign, the floating unary ops. Checks, promotion and messages follow the CPU plugin
// (binary.cpp, binary_math.cpp, compare.cpp, unary.cpp); the arithmetic is in elementwise_more.cu.
#include "more_ops.h"

#include <string>

namespace tessera::gpu {
namespace {

// The right-hand side of a binary op: a tensor of ours, or a number (a Scalar argument, or a
// 0-dim CPU tensor).
struct Rhs {
  std::optional<TensorRef> tensor;
  std::optional<ScalarArg> number;
  int32_t dtype = 0;
};
Rhs read_rhs(sdk::Args& a, int i, bool scalar) {
  Rhs r;
  if (scalar) {
    r.number = a.scalar(i);
    r.dtype = r.number->kind == ScalarArg::Double ? sdk::default_float_dtype()
              : r.number->kind == ScalarArg::Bool ? TS_BOOL : TS_INT64;
    return r;
  }
  TensorRef t = a.tensor(i);
  r.dtype = t.dtype();
  if (is_cpu_number(t)) r.number = scalar_of_cpu_tensor(t);
  r.tensor = t;
  return r;
}

struct Prepared {
  TensorRef out;
  Loop loop;
  int32_t common = 0;
};

// Promotion, output and loop of `self op rhs`; `out_dtype` < 0: the common dtype.
Prepared prepare_binary(sdk::Args& a, const char* op, bool inplace, const TensorRef& self, const Rhs& rhs,
                        int32_t common_override = -1, int32_t out_dtype = -1) {
  const bool number = bool(rhs.number);
  if (number) common_device(op, {&self});
  else common_device(op, {&self, &*rhs.tensor});
  ResultType rt;
  rt.tensor(self);
  if (!number) rt.tensor(*rhs.tensor);
  else if (rhs.tensor) rt.tensor(*rhs.tensor);  // a 0-dim CPU tensor promotes as a 0-dim tensor
  else rt.scalar(*rhs.number);
  Prepared p;
  p.common = common_override >= 0 ? common_override : rt.result();
  const int32_t od = out_dtype >= 0 ? out_dtype : p.common;
  std::vector<int64_t> shape = number ? self.shape_vector() : broadcast_shapes(op, self.sizes(), rhs.tensor->sizes());
  p.out = new_or_self(a, op, inplace, self, shape, od);
  p.loop = number ? make_loop(op, shape, {&p.out, &self, nullptr}) : make_loop(op, shape, {&p.out, &self, &*rhs.tensor});
  if (number) {
    p.loop.scalar_d = rhs.number->to_double();
    p.loop.scalar_i = rhs.number->to_int();
  }
  return p;
}

void run_binary(sdk::Args& a, bool inplace, const TensorRef& self, Prepared&& p, BinaryMoreOp op) {
  DeviceGuard guard(self.device().index);
  launch_binary_more(op, compute_for(p.common), p.loop, stream_for(self.device().index),
                     int32_t(8 * sdk::dtype_itemsize(p.common)));
  finish_output(a, inplace, std::move(p.out));
}

// div.Tensor_mode(Tensor self, Tensor other, *, str? rounding_mode) and floor_divide.
// Integer division by zero raises (checked on the device first: one sync), as the CPU plugin.
template <bool Inplace, bool FloorDivide>
void rounding_div_k(sdk::Args& a) {
  const char* op = FloorDivide ? "floor_divide" : "div";
  BinaryMoreOp rop = BinaryMoreOp::DivFloor;
  if constexpr (!FloorDivide) {
    const auto mode = a.optional_str(2);
    if (!mode) {  // true division: the engine's div
      static const sdk::Operator div_tensor(Inplace ? "div_.Tensor" : "div.Tensor");
      TensorRef self = a.tensor(0), other = a.tensor(1);
      TensorRef r = div_tensor.call(a.call(), {sdk::value(self), sdk::value(other)});
      return Inplace ? a.return_argument(self) : a.return_tensor(std::move(r));
    }
    TS_SDK_CHECK(*mode == "trunc" || *mode == "floor", TS_ERROR_VALUE, Inplace ? "div_" : "div",
                 ": expected rounding_mode to be one of None, 'trunc' or 'floor', got '", std::string(*mode), "'");
    rop = *mode == "trunc" ? BinaryMoreOp::DivTrunc : BinaryMoreOp::DivFloor;
  }
  const std::string name = std::string(op) + (Inplace ? "_" : "");
  TensorRef self = a.tensor(0);
  const Rhs rhs = read_rhs(a, 1, false);
  TS_SDK_CHECK(!(self.dtype() == TS_BOOL && rhs.dtype == TS_BOOL), TS_ERROR_TYPE, name,
               ": expected numeric tensors, got bool and bool");
  Prepared p = prepare_binary(a, name.c_str(), Inplace, self, rhs);
  if (sdk::is_integral(p.common, false) && p.loop.numel > 0) {
    const bool zero = rhs.number ? rhs.number->to_int() == 0 && rhs.number->to_double() == 0
                                 : first_flagged(a.call(), *rhs.tensor, 0, 1, true).has_value();
    TS_SDK_CHECK(!zero, TS_ERROR_VALUE, name, ": ZeroDivisionError (integer division by zero)");
  }
  run_binary(a, Inplace, self, std::move(p), rop);
}

// pow.Tensor_Tensor / pow.Tensor_Scalar
template <bool Inplace, bool Scalar>
void pow_k(sdk::Args& a) {
  const std::string name = Inplace ? "pow_" : "pow";
  TensorRef self = a.tensor(0);
  const Rhs rhs = read_rhs(a, 1, Scalar);
  Prepared p = prepare_binary(a, name.c_str(), Inplace, self, rhs);
  TS_SDK_CHECK(p.common != TS_BOOL, TS_ERROR_TYPE, name, ": expected numeric tensors, got bool");
  if (Scalar && sdk::is_integral(p.common, false) && rhs.number->kind == ScalarArg::Int && rhs.number->i < 0)
    sdk::fail(TS_ERROR_VALUE, name, ": integers to negative integer powers are not allowed, got exponent ",
              rhs.number->i);
  run_binary(a, Inplace, self, std::move(p), BinaryMoreOp::Pow);
}

// maximum / minimum: NaN propagates.
template <bool Max>
void extremum_k(sdk::Args& a) {
  const char* op = Max ? "maximum" : "minimum";
  TensorRef self = a.tensor(0);
  Prepared p = prepare_binary(a, op, false, self, read_rhs(a, 1, false));
  run_binary(a, false, self, std::move(p), Max ? BinaryMoreOp::Maximum : BinaryMoreOp::Minimum);
}

// logical_and / logical_or: operands read as bool (nonzero), bool result.
template <bool And>
void logical_k(sdk::Args& a) {
  const char* op = And ? "logical_and" : "logical_or";
  TensorRef self = a.tensor(0);
  Rhs rhs = read_rhs(a, 1, false);
  rhs.number.reset();  // the kernel reads both operands as tensors (a 0-dim CPU one is copied up)
  std::optional<TensorRef> moved;
  if (rhs.tensor->device().type == 0 && rhs.tensor->dim() == 0) {
    TensorRef up = empty_on(a.call(), {}, rhs.tensor->dtype(), self.device());
    copy_host(self.device().index, up.data(), rhs.tensor->data(), size_t(up.itemsize()), gpuMemcpyHostToDevice, false,
              op);
    rhs.tensor = up;
  }
  Prepared p = prepare_binary(a, op, false, self, rhs, TS_BOOL, TS_BOOL);
  run_binary(a, false, self, std::move(p), And ? BinaryMoreOp::And : BinaryMoreOp::Or);
}

// The common dtype of `self` and `rhs` (PyTorch's result_type).
int32_t common_dtype(const TensorRef& self, const Rhs& rhs) {
  ResultType rt;
  rt.tensor(self);
  if (rhs.tensor) rt.tensor(*rhs.tensor);
  else rt.scalar(*rhs.number);
  return rt.result();
}

// atan2 / copysign.Tensor: floating results, integers and bool computed in the default float dtype.
template <BinaryMoreOp Op, bool Inplace>
void floating_binary_k(sdk::Args& a) {
  const std::string name = std::string(Op == BinaryMoreOp::Atan2 ? "atan2" : "copysign") + (Inplace ? "_" : "");
  TensorRef self = a.tensor(0);
  const Rhs rhs = read_rhs(a, 1, false);
  int32_t common = common_dtype(self, rhs);
  TS_SDK_CHECK(!sdk::is_complex(common), TS_ERROR_TYPE, name, ": unsupported dtype");
  if (!sdk::is_floating(common)) common = sdk::default_float_dtype();
  run_binary(a, Inplace, self, prepare_binary(a, name.c_str(), Inplace, self, rhs, common, common), Op);
}

// fmod / remainder.Tensor: in the common dtype; an integer divisor of 0 raises (one sync).
template <bool Python, bool Inplace>
void modulo_k(sdk::Args& a) {
  const std::string name = std::string(Python ? "remainder" : "fmod") + (Inplace ? "_" : "");
  TensorRef self = a.tensor(0);
  const Rhs rhs = read_rhs(a, 1, false);
  const int32_t common = common_dtype(self, rhs);
  TS_SDK_CHECK(common != TS_BOOL, TS_ERROR_TYPE, name, ": not implemented for 'Bool'");
  TS_SDK_CHECK(!sdk::is_complex(common), TS_ERROR_TYPE, name, ": unsupported dtype");
  Prepared p = prepare_binary(a, name.c_str(), Inplace, self, rhs);
  if (sdk::is_integral(common, false) && p.loop.numel > 0) {
    const bool zero =
        rhs.number ? rhs.number->to_int() == 0 : first_flagged(a.call(), *rhs.tensor, 0, 1, true).has_value();
    TS_SDK_CHECK(!zero, TS_ERROR_VALUE, name, ": ZeroDivisionError (integer division by zero)");
  }
  run_binary(a, Inplace, self, std::move(p), Python ? BinaryMoreOp::Remainder : BinaryMoreOp::Fmod);
}

// bitwise_and/or/xor and the shifts (.Tensor): integers and bool (no bool shifts).
template <BinaryMoreOp Op, bool Inplace>
void bitwise_k(sdk::Args& a) {
  static constexpr const char* kNames[] = {"bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift",
                                           "bitwise_right_shift"};
  const std::string name = std::string(kNames[int(Op) - int(BinaryMoreOp::BitAnd)]) + (Inplace ? "_" : "");
  TensorRef self = a.tensor(0);
  const Rhs rhs = read_rhs(a, 1, false);
  const int32_t common = common_dtype(self, rhs);
  if (sdk::is_inexact(common))
    sdk::fail(TS_ERROR_TYPE, name, ": only integer and boolean tensors are supported, got ", sdk::dtype_name(common));
  if (Op >= BinaryMoreOp::ShiftLeft && common == TS_BOOL) sdk::fail(TS_ERROR_TYPE, name, ": not implemented for 'Bool'");
  run_binary(a, Inplace, self, prepare_binary(a, name.c_str(), Inplace, self, rhs), Op);
}

// ---- unary
void logical_not_k(sdk::Args& a) {
  TensorRef self = a.tensor(0);
  common_device("logical_not", {&self});
  TensorRef out = empty_on(a.call(), self.sizes(), TS_BOOL, self.device());
  Loop L = make_loop("logical_not", self.sizes(), {&out, &self});
  DeviceGuard guard(self.device().index);
  launch_unary_more(UnaryMoreOp::Not, Compute::Int64, L, stream_for(self.device().index));
  a.return_tensor(std::move(out));
}

// The operator name of each UnaryMoreOp (Not is logical_not's own kernel).
constexpr const char* kUnaryNames[] = {"logical_not", "sign", "log1p", "erf", "exp2", "expm1", "log2", "log10", "tan",
                                       "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "erfc",
                                       "erfinv", "lgamma", "digamma", "reciprocal", "floor", "ceil", "trunc", "round",
                                       "bitwise_not"};
constexpr bool keeps_dtype(UnaryMoreOp op) { return op == UnaryMoreOp::Sign || op >= UnaryMoreOp::Floor; }

// sign and rounding keep the dtype (sign allows bool); the others compute integers in the
// default float dtype.
template <UnaryMoreOp Op, bool Inplace>
void unary_k(sdk::Args& a) {
  const std::string name = std::string(kUnaryNames[int(Op)]) + (Inplace ? "_" : "");
  TensorRef self = a.tensor(0);
  common_device(name.c_str(), {&self});
  if constexpr (Op >= UnaryMoreOp::Floor)
    TS_SDK_CHECK(self.dtype() != TS_BOOL, TS_ERROR_TYPE, name, ": expected a numeric tensor, got bool");
  int32_t dtype = self.dtype();
  if (!keeps_dtype(Op) && !sdk::is_floating(dtype)) dtype = sdk::default_float_dtype();
  TensorRef out = new_or_self(a, name.c_str(), Inplace, self, self.sizes(), dtype);
  Loop L = make_loop(name.c_str(), self.sizes(), {&out, &self});
  DeviceGuard guard(self.device().index);
  launch_unary_more(Op, compute_for(dtype), L, stream_for(self.device().index));
  finish_output(a, Inplace, std::move(out));
}

// bitwise_not: ~x for integers, logical not for bool; floating dtypes refused.
template <bool Inplace>
void bitwise_not_k(sdk::Args& a) {
  const char* name = Inplace ? "bitwise_not_" : "bitwise_not";
  TensorRef self = a.tensor(0);
  common_device(name, {&self});
  if (sdk::is_inexact(self.dtype()))
    sdk::fail(TS_ERROR_TYPE, name, ": bitwise_not is only supported for integer and boolean tensors, got ",
              sdk::dtype_name(self.dtype()));
  TensorRef out = new_or_self(a, name, Inplace, self, self.sizes(), self.dtype());
  Loop L = make_loop(name, self.sizes(), {&out, &self});
  DeviceGuard guard(self.device().index);
  launch_unary_more(UnaryMoreOp::BitNot, Compute::Int64, L, stream_for(self.device().index));
  finish_output(a, Inplace, std::move(out));
}

// clamp(Tensor self, Scalar? min=None, Scalar? max=None): the bounds promote like Python numbers.
template <bool Inplace>
void clamp_k(sdk::Args& a) {
  const std::string name = Inplace ? "clamp_" : "clamp";
  TensorRef self = a.tensor(0);
  const std::optional<ScalarArg> lo = a.optional_scalar(1), hi = a.optional_scalar(2);
  TS_SDK_CHECK(lo || hi, TS_ERROR_VALUE, name, ": expected at least one of 'min' or 'max' to be given, got neither");
  TS_SDK_CHECK(self.dtype() != TS_BOOL, TS_ERROR_TYPE, name, ": expected a numeric tensor, got bool");
  common_device(name.c_str(), {&self});
  ResultType rt;
  rt.tensor(self);
  if (lo) rt.scalar(*lo);
  if (hi) rt.scalar(*hi);
  const int32_t common = rt.result();
  TensorRef out = new_or_self(a, name.c_str(), Inplace, self, self.sizes(), common);
  Loop L = make_loop(name.c_str(), self.sizes(), {&out, &self});
  if (lo) L.scalar_d = lo->to_double(), L.scalar_i = lo->to_int();
  if (hi) L.alpha_d = hi->to_double(), L.alpha_i = hi->to_int();
  DeviceGuard guard(self.device().index);
  launch_clamp(compute_for(common), L, bool(lo), bool(hi), stream_for(self.device().index));
  finish_output(a, Inplace, std::move(out));
}

// masked_fill.Scalar(Tensor self, Tensor mask, Scalar value): keeps self's dtype.
template <bool Inplace>
void masked_fill_k(sdk::Args& a) {
  const std::string name = Inplace ? "masked_fill_" : "masked_fill";
  TensorRef self = a.tensor(0), mask = a.tensor(1);
  const ScalarArg value = a.scalar(2);
  TS_SDK_CHECK(mask.dtype() == TS_BOOL, TS_ERROR_TYPE, name, ": expected a bool mask, got ",
               sdk::dtype_name(mask.dtype()));
  common_device(name.c_str(), {&self, &mask});
  auto shape = broadcast_shapes(name.c_str(), self.sizes(), mask.sizes());
  TensorRef out = new_or_self(a, name.c_str(), Inplace, self, shape, self.dtype());
  Loop L = make_loop(name.c_str(), shape, {&out, &self, &mask});
  L.scalar_d = value.to_double();
  L.scalar_i = self.dtype() == TS_BOOL ? int64_t(value.to_double() != 0) : value.to_int();
  DeviceGuard guard(self.device().index);
  launch_masked_fill(compute_for(self.dtype()), L, stream_for(self.device().index));
  finish_output(a, Inplace, std::move(out));
}
}  // namespace

void register_elementwise_more_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("div.Tensor_mode", key, rounding_div_k<false, false>);
  reg.kernel("div_.Tensor_mode", key, rounding_div_k<true, false>);
  reg.kernel("floor_divide", key, rounding_div_k<false, true>);
  reg.kernel("floor_divide_", key, rounding_div_k<true, true>);
  reg.kernel("pow.Tensor_Tensor", key, pow_k<false, false>);
  reg.kernel("pow_.Tensor_Tensor", key, pow_k<true, false>);
  reg.kernel("pow.Tensor_Scalar", key, pow_k<false, true>);
  reg.kernel("pow_.Tensor_Scalar", key, pow_k<true, true>);
  reg.kernel("maximum", key, extremum_k<true>);
  reg.kernel("minimum", key, extremum_k<false>);
  reg.kernel("logical_and", key, logical_k<true>);
  reg.kernel("logical_or", key, logical_k<false>);
  reg.kernel("logical_not", key, logical_not_k);
  reg.kernel("sign", key, unary_k<UnaryMoreOp::Sign, false>);
  reg.kernel("sign_", key, unary_k<UnaryMoreOp::Sign, true>);
  reg.kernel("log1p", key, unary_k<UnaryMoreOp::Log1p, false>);
  reg.kernel("log1p_", key, unary_k<UnaryMoreOp::Log1p, true>);
  reg.kernel("erf", key, unary_k<UnaryMoreOp::Erf, false>);
  reg.kernel("erf_", key, unary_k<UnaryMoreOp::Erf, true>);
#define TS_CUDA_UNARY(OP, NAME)                                  \
  reg.kernel(NAME, key, unary_k<UnaryMoreOp::OP, false>);        \
  reg.kernel(NAME "_", key, unary_k<UnaryMoreOp::OP, true>);
  TS_CUDA_UNARY(Exp2, "exp2")
  TS_CUDA_UNARY(Expm1, "expm1")
  TS_CUDA_UNARY(Log2, "log2")
  TS_CUDA_UNARY(Log10, "log10")
  TS_CUDA_UNARY(Tan, "tan")
  TS_CUDA_UNARY(Asin, "asin")
  TS_CUDA_UNARY(Acos, "acos")
  TS_CUDA_UNARY(Atan, "atan")
  TS_CUDA_UNARY(Sinh, "sinh")
  TS_CUDA_UNARY(Cosh, "cosh")
  TS_CUDA_UNARY(Asinh, "asinh")
  TS_CUDA_UNARY(Acosh, "acosh")
  TS_CUDA_UNARY(Atanh, "atanh")
  TS_CUDA_UNARY(Erfc, "erfc")
  TS_CUDA_UNARY(Erfinv, "erfinv")
  TS_CUDA_UNARY(Lgamma, "lgamma")
  TS_CUDA_UNARY(Digamma, "digamma")
  TS_CUDA_UNARY(Reciprocal, "reciprocal")
  TS_CUDA_UNARY(Floor, "floor")
  TS_CUDA_UNARY(Ceil, "ceil")
  TS_CUDA_UNARY(Trunc, "trunc")
  TS_CUDA_UNARY(Round, "round")
#undef TS_CUDA_UNARY
  reg.kernel("bitwise_not", key, bitwise_not_k<false>);
  reg.kernel("bitwise_not_", key, bitwise_not_k<true>);
  reg.kernel("atan2", key, floating_binary_k<BinaryMoreOp::Atan2, false>);
  reg.kernel("atan2_", key, floating_binary_k<BinaryMoreOp::Atan2, true>);
  reg.kernel("copysign.Tensor", key, floating_binary_k<BinaryMoreOp::Copysign, false>);
  reg.kernel("copysign_.Tensor", key, floating_binary_k<BinaryMoreOp::Copysign, true>);
  reg.kernel("fmod.Tensor", key, modulo_k<false, false>);
  reg.kernel("fmod_.Tensor", key, modulo_k<false, true>);
  reg.kernel("remainder.Tensor", key, modulo_k<true, false>);
  reg.kernel("remainder_.Tensor", key, modulo_k<true, true>);
#define TS_CUDA_BITWISE(OP, NAME)                                       \
  reg.kernel(NAME ".Tensor", key, bitwise_k<BinaryMoreOp::OP, false>);  \
  reg.kernel(NAME "_.Tensor", key, bitwise_k<BinaryMoreOp::OP, true>);
  TS_CUDA_BITWISE(BitAnd, "bitwise_and")
  TS_CUDA_BITWISE(BitOr, "bitwise_or")
  TS_CUDA_BITWISE(BitXor, "bitwise_xor")
  TS_CUDA_BITWISE(ShiftLeft, "bitwise_left_shift")
  TS_CUDA_BITWISE(ShiftRight, "bitwise_right_shift")
#undef TS_CUDA_BITWISE
  reg.kernel("clamp", key, clamp_k<false>);
  reg.kernel("clamp_", key, clamp_k<true>);
  reg.kernel("masked_fill.Scalar", key, masked_fill_k<false>);
  reg.kernel("masked_fill_.Scalar", key, masked_fill_k<true>);
}

}  // namespace tessera::gpu

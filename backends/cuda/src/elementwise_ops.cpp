// Element-wise kernels: argument checks, PyTorch type promotion and output allocation on the
// host; the arithmetic runs in elementwise.cu. Functional and in-place variants; the out=
// variants and the rest fall back to the CPU through the host.
#include "cuda_plugin.h"
#include "more_ops.h"

#include <optional>
#include <string>

namespace tessera::gpu {
namespace {

// ---- unary
enum class UnaryKind { Float, KeepDtype };

template <UnaryOp Op, UnaryKind Kind, bool Inplace>
void unary_k(sdk::Args& a) {
  static const char* names[] = {"neg", "abs", "exp", "log", "sqrt", "rsqrt", "sin",
                                "cos", "tanh", "sigmoid", "relu", "gelu", "gelu", "silu"};
  const char* op = names[int(Op)];
  TensorRef self = a.tensor(0);
  common_device(op, {&self});
  int32_t dtype = self.dtype();
  if (Kind == UnaryKind::Float && !sdk::is_floating(dtype)) dtype = sdk::default_float_dtype();
  TS_SDK_CHECK(!(Op == UnaryOp::Neg && dtype == TS_BOOL), TS_ERROR_TYPE,
               "neg: negation, the `-` operator, on a bool tensor is not supported; use ~ or logical_not() instead");
  TensorRef out = new_or_self(a, op, Inplace, self, self.sizes(), dtype);
  Loop L = make_loop(op, self.sizes(), {&out, &self});
  DeviceGuard guard(self.device().index);
  launch_unary(Op, compute_for(dtype), L, stream_for(self.device().index));
  finish_output(a, Inplace, std::move(out));
}

template <bool Inplace>
void gelu_k(sdk::Args& a) {
  TensorRef self = a.tensor(0);
  auto approx = a.optional_str(1).value_or("none");
  TS_SDK_CHECK(approx == "none" || approx == "tanh", TS_ERROR_VALUE, "gelu: approximate must be 'none' or 'tanh', got '",
               std::string(approx), "'");
  common_device("gelu", {&self});
  TS_SDK_CHECK(sdk::is_floating(self.dtype()), TS_ERROR_TYPE, "gelu: expected a floating tensor, got ",
               sdk::dtype_name(self.dtype()));
  TensorRef out = new_or_self(a, "gelu", Inplace, self, self.sizes(), self.dtype());
  Loop L = make_loop("gelu", self.sizes(), {&out, &self});
  DeviceGuard guard(self.device().index);
  launch_unary(approx == "tanh" ? UnaryOp::GeluTanh : UnaryOp::Gelu, compute_for(self.dtype()), L,
               stream_for(self.device().index));
  finish_output(a, Inplace, std::move(out));
}

// ---- binary: (self, other[, alpha]) with other a Tensor or a Scalar
enum class Rhs { Tensor, Scalar };

template <BinaryOp Op, Rhs R, bool Inplace, bool Negate = false>
void binary_k(sdk::Args& a) {
  static const char* names[] = {"add", "mul", "div", "eq", "ne", "lt", "le", "gt", "ge"};
  const char* op = Negate ? "sub" : names[int(Op)];
  const bool compare = Op >= BinaryOp::Eq;
  TensorRef self = a.tensor(0);
  std::optional<TensorRef> other;
  std::optional<ScalarArg> number;
  if constexpr (R == Rhs::Tensor) {
    other = a.tensor(1);
    // A 0-dim CPU tensor acts as a number (PyTorch's rule), keeping its dtype for promotion.
    if (other->device().type == 0 && other->dim() == 0) number = scalar_of_cpu_tensor(*other);
  } else {
    number = a.scalar(1);
  }
  ScalarArg alpha{ScalarArg::Int, 1, 0};
  if (Op == BinaryOp::Add && !a.is_none(2)) alpha = a.scalar(2);
  if (other && !number) common_device(op, {&self, &*other});
  else common_device(op, {&self});

  ResultType rt;
  rt.tensor(self);
  if (other) rt.tensor(*other); else rt.scalar(*number);
  int32_t common = rt.result();
  if (Op == BinaryOp::Div && !sdk::is_floating(common)) common = sdk::default_float_dtype();
  TS_SDK_CHECK(!(Negate && common == TS_BOOL), TS_ERROR_TYPE,
               "sub: subtraction, the `-` operator, with two bool tensors is not supported; use logical_xor() instead");
  TS_SDK_CHECK(alpha.kind != ScalarArg::Double || sdk::is_floating(common), TS_ERROR_TYPE, op,
               ": for integral input tensors, argument alpha must not be a floating point number");
  int32_t out_dtype = compare ? TS_BOOL : common;

  std::vector<int64_t> shape = number ? self.shape_vector() : broadcast_shapes(op, self.sizes(), other->sizes());
  TensorRef out = new_or_self(a, op, Inplace, self, shape, out_dtype);
  Loop L = number ? make_loop(op, shape, {&out, &self, nullptr}) : make_loop(op, shape, {&out, &self, &*other});
  if (number) {
    L.scalar_d = number->to_double();
    L.scalar_i = number->to_int();
  }
  L.alpha_d = Negate ? -alpha.to_double() : alpha.to_double();
  L.alpha_i = Negate ? -alpha.to_int() : alpha.to_int();
  DeviceGuard guard(self.device().index);
  launch_binary(Op, compute_for(common), L, stream_for(self.device().index));
  finish_output(a, Inplace, std::move(out));
}

// where.self(Tensor condition, Tensor self, Tensor other)
void where_k(sdk::Args& a) {
  TensorRef cond = a.tensor(0), self = a.tensor(1), other = a.tensor(2);
  common_device("where", {&cond, &self, &other});
  TS_SDK_CHECK(cond.dtype() == TS_BOOL || cond.dtype() == TS_UINT8, TS_ERROR_TYPE,
               "where: expected condition to be a boolean tensor, got ", sdk::dtype_name(cond.dtype()));
  ResultType rt;
  rt.tensor(self);
  rt.tensor(other);
  int32_t dtype = rt.result();
  auto shape = broadcast_shapes("where", broadcast_shapes("where", cond.sizes(), self.sizes()), other.sizes());
  TensorRef out = empty_on(a.call(), shape, dtype, self.device());
  Loop L = make_loop("where", shape, {&out, &cond, &self, &other});
  DeviceGuard guard(self.device().index);
  launch_where(compute_for(dtype), L, stream_for(self.device().index));
  a.return_tensor(std::move(out));
}

template <UnaryOp Op, UnaryKind Kind>
void reg_unary(sdk::Registrar& reg, ts_dispatch_key key, const std::string& name) {
  reg.kernel(name.c_str(), key, unary_k<Op, Kind, false>);
  reg.kernel((name + "_").c_str(), key, unary_k<Op, Kind, true>);
}

template <BinaryOp Op>
void reg_compare(sdk::Registrar& reg, ts_dispatch_key key, const std::string& name) {
  reg.kernel((name + ".Tensor").c_str(), key, binary_k<Op, Rhs::Tensor, false>);
  reg.kernel((name + ".Scalar").c_str(), key, binary_k<Op, Rhs::Scalar, false>);
}
}  // namespace

void register_elementwise_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  using enum UnaryOp;
  reg_unary<Neg, UnaryKind::KeepDtype>(reg, key, "neg");
  reg_unary<Abs, UnaryKind::KeepDtype>(reg, key, "abs");
  reg_unary<Relu, UnaryKind::KeepDtype>(reg, key, "relu");
  reg_unary<Exp, UnaryKind::Float>(reg, key, "exp");
  reg_unary<Log, UnaryKind::Float>(reg, key, "log");
  reg_unary<Sqrt, UnaryKind::Float>(reg, key, "sqrt");
  reg_unary<Rsqrt, UnaryKind::Float>(reg, key, "rsqrt");
  reg_unary<Sin, UnaryKind::Float>(reg, key, "sin");
  reg_unary<Cos, UnaryKind::Float>(reg, key, "cos");
  reg_unary<Tanh, UnaryKind::Float>(reg, key, "tanh");
  reg_unary<Sigmoid, UnaryKind::Float>(reg, key, "sigmoid");
  reg.kernel("silu", key, unary_k<Silu, UnaryKind::Float, false>);
  reg.kernel("silu_", key, unary_k<Silu, UnaryKind::Float, true>);
  reg.kernel("gelu", key, gelu_k<false>);
  reg.kernel("gelu_", key, gelu_k<true>);

  using enum BinaryOp;
  reg.kernel("add.Tensor", key, binary_k<Add, Rhs::Tensor, false>);
  reg.kernel("add_.Tensor", key, binary_k<Add, Rhs::Tensor, true>);
  reg.kernel("add.Scalar", key, binary_k<Add, Rhs::Scalar, false>);
  reg.kernel("add_.Scalar", key, binary_k<Add, Rhs::Scalar, true>);
  reg.kernel("sub.Tensor", key, binary_k<Add, Rhs::Tensor, false, true>);
  reg.kernel("sub_.Tensor", key, binary_k<Add, Rhs::Tensor, true, true>);
  reg.kernel("sub.Scalar", key, binary_k<Add, Rhs::Scalar, false, true>);
  reg.kernel("sub_.Scalar", key, binary_k<Add, Rhs::Scalar, true, true>);
  reg.kernel("mul.Tensor", key, binary_k<Mul, Rhs::Tensor, false>);
  reg.kernel("mul_.Tensor", key, binary_k<Mul, Rhs::Tensor, true>);
  reg.kernel("mul.Scalar", key, binary_k<Mul, Rhs::Scalar, false>);
  reg.kernel("mul_.Scalar", key, binary_k<Mul, Rhs::Scalar, true>);
  reg.kernel("div.Tensor", key, binary_k<Div, Rhs::Tensor, false>);
  reg.kernel("div_.Tensor", key, binary_k<Div, Rhs::Tensor, true>);
  reg.kernel("div.Scalar", key, binary_k<Div, Rhs::Scalar, false>);
  reg.kernel("div_.Scalar", key, binary_k<Div, Rhs::Scalar, true>);
  reg_compare<Eq>(reg, key, "eq");
  reg_compare<Ne>(reg, key, "ne");
  reg_compare<Lt>(reg, key, "lt");
  reg_compare<Le>(reg, key, "le");
  reg_compare<Gt>(reg, key, "gt");
  reg_compare<Ge>(reg, key, "ge");
  reg.kernel("where.self", key, where_k);
}

}  // namespace tessera::gpu

// Element-wise kernels: add/sub/mul/div (tensor and Scalar overloads), neg, exp, relu.
// Results are computed in double for floating dtypes and int64 for integral ones, which
// keeps one code path per op instead of one per dtype.
#include "simdev.h"

#include <cmath>
#include <cstring>

namespace simdev {

namespace {
int category(int32_t dtype) { return dtype == TS_BOOL ? 0 : sdk::is_floating(dtype) ? 2 : 1; }

// PyTorch's result type: 0-dim tensors and Python numbers only raise the category.
int32_t result_type(const sdk::TensorRef& a, const BinaryRhs& b) {
  if (!b.tensor) {
    int cb = b.scalar.kind == sdk::ScalarArg::Double ? 2 : b.scalar.kind == sdk::ScalarArg::Int ? 1 : 0;
    if (cb <= category(a.dtype())) return a.dtype();
    return cb == 2 ? sdk::default_float_dtype() : TS_INT64;
  }
  const sdk::TensorRef& c = *b.tensor;
  if ((a.dim() == 0) == (c.dim() == 0)) return sdk::promote_types(a.dtype(), c.dtype());
  const sdk::TensorRef& dims = a.dim() == 0 ? c : a;
  const sdk::TensorRef& zero = a.dim() == 0 ? a : c;
  return category(zero.dtype()) > category(dims.dtype()) ? zero.dtype() : dims.dtype();
}

const char* op_symbol(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add: return "add";
    case BinaryOp::Sub: return "sub";
    case BinaryOp::Mul: return "mul";
    default: return "div";
  }
}
}  // namespace

sdk::TensorRef binary(const char* op_name, ts_call call, const sdk::TensorRef& a, const BinaryRhs& b, BinaryOp op,
                      sdk::ScalarArg alpha) {
  ts_device device = a.device();
  if (b.tensor && a.device().type == 0 && a.dim() == 0) device = b.tensor->device();  // cpu scalar + device tensor
  if (b.tensor) check_same_device(op_name, device, {&a, b.tensor});
  int32_t out_dtype = result_type(a, b);
  if (op == BinaryOp::Div && !sdk::is_floating(out_dtype)) out_dtype = sdk::default_float_dtype();
  bool floating = sdk::is_floating(out_dtype);
  TS_SDK_CHECK(floating || alpha.kind != sdk::ScalarArg::Double, TS_ERROR_TYPE, op_name,
               ": for integral input tensors, argument alpha must not be a floating point number");
  // As on the CPU: subtracting anything from or with a bool is an error, not just bool - bool.
  bool any_bool = a.dtype() == TS_BOOL ||
                  (b.tensor ? b.tensor->dtype() == TS_BOOL : b.scalar.kind == sdk::ScalarArg::Bool);
  TS_SDK_CHECK(!(any_bool && op == BinaryOp::Sub), TS_ERROR_TYPE, op_name,
               ": subtraction with a bool tensor is not supported; use logical_xor");

  // A Scalar right-hand side is a 0-stride operand over a local value.
  int64_t scalar_bits = 0;
  Operand rhs;
  std::vector<int64_t> shape;
  if (b.tensor) {
    shape = broadcast_shapes(op_name, a.sizes(), b.tensor->sizes());
    rhs = broadcast_operand(op_name, *b.tensor, shape);
  } else {
    shape = a.shape_vector();
    bool is_double = b.scalar.kind == sdk::ScalarArg::Double;
    if (is_double) std::memcpy(&scalar_bits, &b.scalar.d, 8); else scalar_bits = b.scalar.i;
    rhs.data = reinterpret_cast<char*>(&scalar_bits);
    rhs.dtype = is_double ? TS_FLOAT64 : TS_INT64;
    rhs.itemsize = 8;
    rhs.strides.assign(shape.size(), 0);
  }
  Operand lhs = broadcast_operand(op_name, a, shape);
  sdk::TensorRef out = sdk::empty(call, shape, out_dtype, device);
  Operand res = broadcast_operand(op_name, out, shape);

  if (floating) {
    double al = alpha.to_double();
    walk<3>(shape, {&res, &lhs, &rhs}, [&](auto p) {
      double x = load_double(p[1], lhs.dtype), y = load_double(p[2], rhs.dtype);
      double r = op == BinaryOp::Add ? x + al * y : op == BinaryOp::Sub ? x - al * y : op == BinaryOp::Mul ? x * y : x / y;
      store(p[0], out_dtype, r);
    });
  } else {
    int64_t al = alpha.to_int();
    walk<3>(shape, {&res, &lhs, &rhs}, [&](auto p) {
      int64_t x = load_int(p[1], lhs.dtype), y = load_int(p[2], rhs.dtype);
      int64_t r = op == BinaryOp::Add ? x + al * y : op == BinaryOp::Sub ? x - al * y : x * y;
      store(p[0], out_dtype, r);
    });
  }
  return out;
}

namespace {
template <BinaryOp Op>
void binary_tensor(sdk::Args& a) {
  sdk::TensorRef x = a.tensor(0), y = a.tensor(1);
  sdk::ScalarArg alpha = a.size() > 2 && !a.is_none(2) ? a.scalar(2) : sdk::ScalarArg{sdk::ScalarArg::Int, 1, 0};
  a.return_tensor(binary(op_symbol(Op), a.call(), x, BinaryRhs{&y, {}}, Op, alpha));
}

template <BinaryOp Op>
void binary_scalar(sdk::Args& a) {
  sdk::TensorRef x = a.tensor(0);
  sdk::ScalarArg other = a.scalar(1);
  sdk::ScalarArg alpha = a.size() > 2 && !a.is_none(2) ? a.scalar(2) : sdk::ScalarArg{sdk::ScalarArg::Int, 1, 0};
  a.return_tensor(binary(op_symbol(Op), a.call(), x, BinaryRhs{nullptr, other}, Op, alpha));
}

enum class UnaryOp { Neg, Exp, Relu };

template <UnaryOp Op>
void unary(sdk::Args& a) {
  static constexpr const char* names[] = {"neg", "exp", "relu"};
  const char* name = names[int(Op)];
  sdk::TensorRef x = a.tensor(0);
  TS_SDK_CHECK(is_this_device(x.device()), TS_ERROR_VALUE, name, ": expected a ", SIMDEV_NAME, " tensor, got ",
               device_str(x.device()));
  TS_SDK_CHECK(!(Op == UnaryOp::Neg && x.dtype() == TS_BOOL), TS_ERROR_TYPE,
               "neg: negation, the `-` operator, on a bool tensor is not supported; use logical_not");
  TS_SDK_CHECK(!(Op == UnaryOp::Relu && x.dtype() == TS_BOOL), TS_ERROR_TYPE, "relu: not implemented for bool");
  // exp of an integral tensor gives the default float dtype, as in PyTorch.
  int32_t out_dtype = Op == UnaryOp::Exp && !sdk::is_floating(x.dtype()) ? sdk::default_float_dtype() : x.dtype();
  auto shape = x.shape_vector();
  Operand in = broadcast_operand(name, x, shape);
  sdk::TensorRef out = sdk::empty(a.call(), shape, out_dtype, x.device());
  Operand res = broadcast_operand(name, out, shape);
  if (sdk::is_floating(out_dtype)) {
    walk<2>(shape, {&res, &in}, [&](auto p) {
      double v = load_double(p[1], in.dtype);
      store(p[0], out_dtype, Op == UnaryOp::Neg ? -v : Op == UnaryOp::Exp ? std::exp(v) : (v > 0 || std::isnan(v) ? v : 0.0));
    });
  } else {
    walk<2>(shape, {&res, &in}, [&](auto p) {
      int64_t v = load_int(p[1], in.dtype);
      store(p[0], out_dtype, Op == UnaryOp::Neg ? -v : (v > 0 ? v : int64_t(0)));
    });
  }
  a.return_tensor(std::move(out));
}
}  // namespace

void register_elementwise(Registrar& reg, ts_dispatch_key key) {
  reg.kernel("add.Tensor", key, binary_tensor<BinaryOp::Add>);
  reg.kernel("sub.Tensor", key, binary_tensor<BinaryOp::Sub>);
  reg.kernel("mul.Tensor", key, binary_tensor<BinaryOp::Mul>);
  reg.kernel("div.Tensor", key, binary_tensor<BinaryOp::Div>);
  reg.kernel("add.Scalar", key, binary_scalar<BinaryOp::Add>);
  reg.kernel("sub.Scalar", key, binary_scalar<BinaryOp::Sub>);
  reg.kernel("mul.Scalar", key, binary_scalar<BinaryOp::Mul>);
  reg.kernel("div.Scalar", key, binary_scalar<BinaryOp::Div>);
  reg.kernel("neg", key, unary<UnaryOp::Neg>);
  reg.kernel("exp", key, unary<UnaryOp::Exp>);
  reg.kernel("relu", key, unary<UnaryOp::Relu>);
}

}  // namespace simdev

// Complex numbers over two views: view_as_real (a complex tensor's storage read as (..., 2) real
// pairs) and view_as_complex (the reverse). real, imag, conj, angle, complex and polar compose
// over them and the element-wise operators, so every device with those has complex numbers.
// conj copies (PyTorch returns a lazily conjugated view; Tessera has no conjugate bit).
#include "composite.h"

#include <cmath>

namespace tessera::composites {
namespace {

constexpr double kPi = 3.14159265358979323846;

int64_t storage_offset(const TensorRef& t) { return sdk::host().tensor_storage_offset(t.handle()); }

void require_complex(const char* op, const TensorRef& t) {
  if (!sdk::is_complex(t.dtype()))
    fail(TS_ERROR_TYPE, op, ": expected a complex tensor (complex64 or complex128), got ", sdk::dtype_name(t.dtype()));
}

// view_as_real(Tensor(a) self) -> Tensor(a): shape (..., 2), strides doubled, last stride 1.
void view_as_real(Args& a) {
  TensorRef self = a.tensor(0);
  require_complex("view_as_real", self);
  IntList shape = shape_of(self), strides(self.strides().begin(), self.strides().end());
  for (int64_t& s : strides) s *= 2;
  shape.push_back(2);
  strides.push_back(1);
  a.return_tensor(sdk::alias_as(a.call(), self, shape, strides, storage_offset(self) * 2, sdk::real_dtype(self.dtype())));
}

// view_as_complex(Tensor(a) self) -> Tensor(a): the last dim (of size 2, stride 1) becomes the
// real and imaginary parts; the other strides and the offset must be even.
void view_as_complex(Args& a) {
  TensorRef self = a.tensor(0);
  if (self.dtype() != TS_FLOAT32 && self.dtype() != TS_FLOAT64)
    fail(TS_ERROR_TYPE, "view_as_complex: expected a float32 or float64 tensor, got ", sdk::dtype_name(self.dtype()));
  if (self.dim() == 0) fail(TS_ERROR_VALUE, "view_as_complex: input tensor must have one or more dimensions");
  const int64_t last = self.dim() - 1;  // TensorRef::size takes nonnegative dims only
  if (self.size(last) != 2)
    fail(TS_ERROR_VALUE, "view_as_complex: tensor must have a last dimension of size 2, got ", self.size(last));
  if (self.stride(last) != 1)
    fail(TS_ERROR_VALUE, "view_as_complex: tensor must have a last dimension with stride 1, got ", self.stride(last));
  IntList shape = shape_of(self), strides(self.strides().begin(), self.strides().end());
  shape.pop_back();
  strides.pop_back();
  for (int64_t& s : strides) {
    if (s % 2 != 0) fail(TS_ERROR_VALUE, "view_as_complex: tensor must have a stride divisible by 2 for all but the last dimension");
    s /= 2;
  }
  if (storage_offset(self) % 2 != 0)
    fail(TS_ERROR_VALUE, "view_as_complex: tensor must have a storage_offset divisible by 2");
  a.return_tensor(sdk::alias_as(a.call(), self, shape, strides, storage_offset(self) / 2,
                                sdk::complex_dtype(self.dtype())));
}

// real: the real parts of a complex tensor (a view); a real tensor itself.
void real(Args& a) {
  TensorRef self = a.tensor(0);
  if (!sdk::is_complex(self.dtype())) return a.return_argument(self);
  a.return_tensor(ops::select(ops::view_as_real(self), -1, 0));
}

void imag(Args& a) {
  TensorRef self = a.tensor(0);
  if (!sdk::is_complex(self.dtype()))
    fail(TS_ERROR_TYPE, "imag: imag is not implemented for tensors with non-complex dtypes, got ",
         sdk::dtype_name(self.dtype()));
  a.return_tensor(ops::select(ops::view_as_real(self), -1, 1));
}

TensorRef conjugate(const TensorRef& z) {
  return ops::view_as_complex(ops::stack({ops::real(z), ops::neg(ops::imag(z))}, -1));
}

void conj(Args& a) {
  TensorRef self = a.tensor(0);
  if (!sdk::is_complex(self.dtype())) return a.return_argument(self);
  a.return_tensor(conjugate(self));
}

void conj_physical(Args& a) {
  TensorRef self = a.tensor(0);
  a.return_tensor(sdk::is_complex(self.dtype()) ? conjugate(self) : ops::clone(self));
}

void identity(Args& a) { a.return_argument(a.tensor(0)); }

// angle: atan2(imag, real) for complex; for real inputs pi where negative, 0 elsewhere, NaN kept.
void angle(Args& a) {
  TensorRef self = a.tensor(0);
  if (sdk::is_complex(self.dtype())) return a.return_tensor(ops::atan2(ops::imag(self), ops::real(self)));
  TensorRef x = sdk::is_floating(self.dtype()) ? self : ops::to(self, sdk::default_float_dtype());
  TensorRef zero = ops::mul(x, Scalar(0.0));
  TensorRef result = ops::where(ops::lt(x, Scalar(0.0)), ops::add(zero, Scalar(kPi)), zero);
  a.return_tensor(ops::where(ops::isnan(x), x, result));
}

// complex(real, imag): both of one floating dtype, broadcast together.
TensorRef make_complex(const char* op, const TensorRef& re, const TensorRef& im) {
  if (re.dtype() != im.dtype())
    fail(TS_ERROR_TYPE, op, ": expected real and imag of the same dtype, got ", sdk::dtype_name(re.dtype()), " and ",
         sdk::dtype_name(im.dtype()));
  if (re.dtype() != TS_FLOAT32 && re.dtype() != TS_FLOAT64)
    fail(TS_ERROR_TYPE, op, ": expected float32 or float64 inputs, got ", sdk::dtype_name(re.dtype()));
  IntList shape = broadcast_shape(op, {re, im});
  return ops::view_as_complex(ops::stack({ops::expand(re, shape), ops::expand(im, shape)}, -1));
}

void complex(Args& a) { a.return_tensor(make_complex("complex", a.tensor(0), a.tensor(1))); }

void polar(Args& a) {
  TensorRef r = a.tensor(0), theta = a.tensor(1);
  if (r.dtype() != theta.dtype())
    fail(TS_ERROR_TYPE, "polar: expected abs and angle of the same dtype, got ", sdk::dtype_name(r.dtype()), " and ",
         sdk::dtype_name(theta.dtype()));
  a.return_tensor(make_complex("polar", ops::mul(r, ops::cos(theta)), ops::mul(r, ops::sin(theta))));
}

}  // namespace

void register_complex(sdk::Registrar& reg) {
  reg.kernel("view_as_real", TS_KEY_COMPOSITE_EXPLICIT, view_as_real);
  reg.kernel("view_as_complex", TS_KEY_COMPOSITE_EXPLICIT, view_as_complex);
  composite(reg, "real", real);
  composite(reg, "imag", imag);
  composite(reg, "conj", conj);
  composite(reg, "conj_physical", conj_physical, true, true);
  composite(reg, "resolve_conj", identity);
  composite(reg, "resolve_neg", identity);
  composite(reg, "angle", angle, false, true);
  composite(reg, "complex", complex, false, true);
  composite(reg, "polar", polar, false, true);
}

}  // namespace tessera::composites

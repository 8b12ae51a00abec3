#pragma once
// Arithmetic operators on tensors: a + b, a - 1.0, 2 * a, -a, a += b, ... They call the
// operators of core/ops.yaml (add, sub, mul, div, neg), so they record autograd history like the
// methods do. C++ has no `@`: use a.matmul(b) or tessera::matmul(a, b).
#include <tessera/ops.h>
#include <tessera/runtime.h>

namespace tessera {

inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator+(const Tensor& a, const Scalar& b) { return add(a, b); }
inline Tensor operator+(const Scalar& a, const Tensor& b) { return add(b, a); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator-(const Tensor& a, const Scalar& b) { return sub(a, b); }
inline Tensor operator-(const Scalar& a, const Tensor& b) { return add(neg(b), a); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator*(const Tensor& a, const Scalar& b) { return mul(a, b); }
inline Tensor operator*(const Scalar& a, const Tensor& b) { return mul(b, a); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator/(const Tensor& a, const Scalar& b) { return div(a, b); }
// a / t: a as a 0-dim tensor (t's dtype, or the default float dtype for a floating a and an
// integer t), then true division, as torch's reciprocal-and-multiply gives.
inline Tensor operator/(const Scalar& a, const Tensor& b) {
  ScalarType t = a.is_floating_point() && !is_floating_point(b.dtype()) ? get_default_dtype() : b.dtype();
  return div(full({}, a, t, b.device()), b);
}
inline Tensor operator-(const Tensor& a) { return neg(a); }

// In place: the left tensor is modified and returned (its handle is shared by every copy).
inline Tensor operator+=(const Tensor& a, const Tensor& b) { return add_(a, b); }
inline Tensor operator+=(const Tensor& a, const Scalar& b) { return add_(a, b); }
inline Tensor operator-=(const Tensor& a, const Tensor& b) { return sub_(a, b); }
inline Tensor operator-=(const Tensor& a, const Scalar& b) { return sub_(a, b); }
inline Tensor operator*=(const Tensor& a, const Tensor& b) { return mul_(a, b); }
inline Tensor operator*=(const Tensor& a, const Scalar& b) { return mul_(a, b); }
inline Tensor operator/=(const Tensor& a, const Tensor& b) { return div_(a, b); }
inline Tensor operator/=(const Tensor& a, const Scalar& b) { return div_(a, b); }

}  // namespace tessera

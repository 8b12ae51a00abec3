#include "formulas.h"

#include <algorithm>
#include <cmath>

namespace tessera::autograd::formulas {
namespace {

int64_t wrap_dim(int64_t d, int64_t ndim) {
  int64_t n = std::max<int64_t>(ndim, 1);
  return d < 0 ? d + n : d;
}

// Normalised, sorted reduction dims (all dims for None or an empty list, as the reductions do).
IntList reduced_dims(const std::optional<IntList>& dim, int64_t ndim) {
  IntList out;
  if (!dim || dim->empty()) {
    for (int64_t d = 0; d < ndim; ++d) out.push_back(d);
  } else {
    for (int64_t d : *dim) out.push_back(wrap_dim(d, ndim));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

int64_t numel_of(const IntList& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

}  // namespace

TensorRef conj(const TensorRef& t) { return sdk::is_complex(t.dtype()) ? ops::conj_physical(t) : t; }

namespace {
int64_t wrapped(int64_t d, int64_t ndim) { return d < 0 ? d + ndim : d; }
}  // namespace

// r2c keeps the first n/2 + 1 outputs (onesided): its adjoint zero-fills the rest, transforms
// back, and keeps the real part (the input was real).
TensorRef fft_r2c_backward(const TensorRef& grad, const IntList& self_sizes, const IntList& dim, int64_t normalization,
                           bool onesided) {
  TensorRef full = grad;
  if (onesided) {
    const int64_t last = wrapped(dim.back(), int64_t(self_sizes.size()));
    IntList shape(grad.sizes().begin(), grad.sizes().end());
    const int64_t kept = shape[size_t(last)];
    shape[size_t(last)] = self_sizes[size_t(last)];
    full = ops::zeros(shape, grad.dtype(), grad.device());
    ops::copy_(ops::narrow(full, last, 0, kept), grad);
  }
  return ops::real(ops::_fft_c2c(full, dim, normalization, false));
}

// c2r reads each entry k in 1 .. n - (n/2 + 1) twice (itself and its mirrored conjugate), so
// those entries' gradients double; the rest is the forward real-to-complex transform.
TensorRef fft_c2r_backward(const TensorRef& grad, const IntList& dim, int64_t normalization) {
  TensorRef g = ops::_fft_r2c(grad, dim, normalization, true);
  const int64_t last = wrapped(dim.back(), grad.dim());
  const int64_t kept = g.size(last), doubled = grad.size(last) - kept;
  if (doubled <= 0) return g;
  TensorRef k = ops::arange(Scalar(kept), TS_INT64, grad.device());
  TensorRef twice = ops::logical_and(ops::ge(k, Scalar(1)), ops::lt(k, Scalar(1 + doubled)));
  TensorRef scale = ops::where(twice, ops::full({}, Scalar(2.0), sdk::real_dtype(g.dtype()), grad.device()),
                               ops::full({}, Scalar(1.0), sdk::real_dtype(g.dtype()), grad.device()));
  IntList shape(size_t(g.dim() - last), 1);
  shape[0] = kept;
  return ops::mul(g, ops::reshape(scale, shape));
}

TensorRef sum_to(const TensorRef& grad, const IntList& sizes) {
  auto g = grad.sizes();
  if (std::equal(g.begin(), g.end(), sizes.begin(), sizes.end())) return grad;
  int64_t lead = int64_t(g.size()) - int64_t(sizes.size());
  IntList dims;
  for (int64_t d = 0; d < int64_t(g.size()); ++d)
    if (d < lead || (sizes[size_t(d - lead)] == 1 && g[size_t(d)] != 1)) dims.push_back(d);
  TensorRef out = dims.empty() ? grad : ops::sum(grad, dims, true);
  return ops::reshape(out, sizes);
}

std::tuple<TensorRef, TensorRef> linalg_solve_backward(const TensorRef& grad, const TensorRef& A, const TensorRef& X,
                                                       bool left) {
  // The conjugate transpose (the transpose for real tensors).
  auto mT = [](const TensorRef& t) { return conj(ops::transpose(t, -2, -1)); };
  bool vector = X.dim() == A.dim() - 1 || X.dim() == 1;
  TensorRef g = vector ? ops::unsqueeze(grad, -1) : grad;
  TensorRef x = vector ? ops::unsqueeze(X, -1) : X;
  // left: A X = B -> gB = A^-H g, gA = -gB X^H.  right: X A = B -> gB = g A^-H, gA = -X^H gB.
  TensorRef gB = left ? ops::linalg_solve(mT(A), g, true) : ops::linalg_solve(mT(A), g, false);
  TensorRef gA = left ? ops::neg(ops::matmul(gB, mT(x))) : ops::neg(ops::matmul(mT(x), gB));
  gA = sum_to(gA, A.shape_vector());
  return {gA, vector ? ops::squeeze(gB, -1) : gB};
}

TensorRef cholesky_backward(const TensorRef& grad, const TensorRef& result, bool upper) {
  auto mT = [](const TensorRef& t) { return ops::transpose(t, -2, -1); };
  TensorRef L = upper ? mT(result) : result, gL = upper ? mT(grad) : grad;
  TensorRef phi = ops::tril(ops::matmul(mT(L), gL), 0);
  phi = ops::sub(phi, ops::mul(ops::diag_embed(ops::diagonal(phi, 0, -2, -1), 0, -2, -1), Scalar(0.5)));
  TensorRef L_inv = ops::linalg_inv(L);
  TensorRef S = ops::matmul(ops::matmul(mT(L_inv), phi), L_inv);
  return ops::mul(ops::add(S, mT(S)), Scalar(0.5));
}

namespace {
TensorRef mT(const TensorRef& t) { return ops::transpose(t, -2, -1); }
// The size of dim `d` counted from the end (-1: the last); TensorRef::size takes d >= 0 only.
int64_t size_from_end(const TensorRef& t, int64_t d) { return t.size(t.dim() + d); }
// X / E where E != 0, and 0 where E == 0: repeated eigen/singular values with a zero numerator
// (eigvalsh, svdvals: no gradient reaches the vectors) give 0, not 0 / 0.
TensorRef divide_off_degenerate(const TensorRef& X, const TensorRef& E) {
  const TensorRef zero = ops::eq(E, Scalar(0.0));
  return ops::where(zero, scalar_like(X, 0.0), ops::div(X, ops::where(zero, scalar_like(E, 1.0), E)));
}
// E_ij = v_j - v_i for the last dim of v.
TensorRef pairwise_gaps(const TensorRef& v) { return ops::sub(ops::unsqueeze(v, -2), ops::unsqueeze(v, -1)); }
}  // namespace

TensorRef eigh_backward(const TensorRef& gL, const TensorRef& gV, const TensorRef& L, const TensorRef& V) {
  // A = V diag(L) V^T: gA = V (skew(V^T gV) / E + diag(gL)) V^T with E_ij = L_j - L_i and
  // skew(X) = (X - X^T) / 2 (only the skew part of V^T gV moves an orthogonal V).
  TensorRef VtgV = ops::matmul(mT(V), gV);
  TensorRef inner = divide_off_degenerate(ops::mul(ops::sub(VtgV, mT(VtgV)), Scalar(0.5)), pairwise_gaps(L));
  inner = ops::add(inner, ops::diag_embed(gL, 0, -2, -1));
  return ops::matmul(V, ops::matmul(inner, mT(V)));
}

TensorRef eig_backward(const TensorRef& gL, const TensorRef& gV, const TensorRef& A, const TensorRef& L,
                       const TensorRef& V) {
  // A = V diag(L) V^-1 (complex L, V; each column of V of unit norm, so its phase is free and
  // only the part of V^H gV off the directions that keep the norm moves A). As torch's:
  //   X = V^H gV - V^H V diag(re(diag(V^H gV))),  X_ij /= conj(L_j - L_i) off the diagonal,
  //   diag(X) = gL,  gA = V^-H X V^H  (a real A takes the real part).
  auto mH = [](const TensorRef& t) { return conj(ops::transpose(t, -2, -1)); };
  const int64_t n = size_from_end(V, -1);
  const TensorRef Vh = mH(V);
  TensorRef X = ops::matmul(Vh, gV);
  const TensorRef diag = ops::diagonal(X, 0, -2, -1);
  // A loss that depends on the eigenvectors' phases has no gradient (torch's check and message).
  if (diag.device().type == 0 && diag.numel() > 0) {
    const TensorRef worst = ops::contiguous(ops::to(ops::amax(ops::abs(ops::imag(diag)), {}, false), int32_t(TS_FLOAT64)));
    if (*worst.data<double>() > 1e-2)
      sdk::fail(TS_ERROR, "linalg_eig_backward: The eigenvectors in the complex case are specified up to "
                "multiplication by e^{i phi}. The specified loss function depends on this quantity, so it is "
                "ill-defined.");
  }
  const TensorRef diag_re = ops::real(diag);
  X = ops::sub(X, ops::matmul(Vh, ops::mul(V, ops::unsqueeze(diag_re, -2))));
  const TensorRef eye = ops::eye(n, std::nullopt, V.dtype(), V.device());
  const TensorRef Lc = conj(L);
  // E_ij = conj(L_j - L_i), 1 on the diagonal (replaced by gL below)
  const TensorRef E = ops::add(ops::sub(ops::unsqueeze(Lc, -2), ops::unsqueeze(Lc, -1)), eye);
  X = ops::mul(ops::div(X, E), ops::sub(scalar_like(eye, 1.0), eye));
  X = ops::add(X, ops::diag_embed(gL, 0, -2, -1));
  TensorRef gA = ops::linalg_solve(Vh, ops::matmul(X, Vh), true);
  return sdk::is_complex(A.dtype()) ? gA : ops::real(gA);
}

TensorRef svd_backward(const TensorRef& gU_full, const TensorRef& gS, const TensorRef& gVh_full,
                       const TensorRef& U_full, const TensorRef& S, const TensorRef& Vh_full) {
  // A = U diag(S) Vh (reduced: k = min(m, n) columns of U, rows of Vh; the extra ones of
  // full_matrices carry no gradient). With skew(X) = X - X^T and E_ij = S_j^2 - S_i^2:
  //   gA = U [(skew(U^T gU) S_j + S_i skew(Vh gV)) / E + diag(gS)] Vh, plus, when m > n, the
  //   part of gU outside U's span, (I - U U^T) gU S^-1 Vh (and the mirror when m < n).
  const int64_t m = size_from_end(U_full, -2), n = size_from_end(Vh_full, -1), k = size_from_end(S, -1);
  const TensorRef U = ops::narrow(U_full, -1, 0, k), gU = ops::narrow(gU_full, -1, 0, k);
  const TensorRef Vh = ops::narrow(Vh_full, -2, 0, k), gVh = ops::narrow(gVh_full, -2, 0, k);
  const TensorRef UtgU = ops::matmul(mT(U), gU), VhgV = ops::matmul(Vh, mT(gVh));
  const TensorRef skew_u = ops::sub(UtgU, mT(UtgU)), skew_v = ops::sub(VhgV, mT(VhgV));
  TensorRef inner = ops::add(ops::mul(skew_u, ops::unsqueeze(S, -2)), ops::mul(ops::unsqueeze(S, -1), skew_v));
  inner = divide_off_degenerate(inner, pairwise_gaps(ops::mul(S, S)));
  inner = ops::add(inner, ops::diag_embed(gS, 0, -2, -1));
  if (m > n) {
    const TensorRef gU_over_S = ops::div(gU, ops::unsqueeze(S, -2));
    TensorRef left = ops::add(ops::matmul(U, inner), gU_over_S);
    left = ops::sub(left, ops::matmul(U, ops::matmul(mT(U), gU_over_S)));
    return ops::matmul(left, Vh);
  }
  if (m < n) {
    const TensorRef gVh_over_S = ops::div(gVh, ops::unsqueeze(S, -1));
    TensorRef right = ops::add(ops::matmul(inner, Vh), gVh_over_S);
    right = ops::sub(right, ops::matmul(ops::matmul(gVh_over_S, mT(Vh)), Vh));
    return ops::matmul(U, right);
  }
  return ops::matmul(U, ops::matmul(inner, Vh));
}

TensorRef qr_backward(const TensorRef& gQ, const TensorRef& gR, const TensorRef& Q, const TensorRef& R,
                      const std::string& mode) {
  if (mode == "r")
    sdk::fail(TS_ERROR_VALUE, "linalg.qr: the derivative depends on Q, which is not computed when mode='r'");
  const int64_t m = size_from_end(Q, -2), n = size_from_end(R, -1);
  if (mode == "complete" && m > n)
    sdk::fail(TS_ERROR_VALUE, "linalg.qr: the QR decomposition is not differentiable when mode='complete' and nrows > ncols");
  if (m < n) {
    // A = [X | Y] with X square: X = Q R1, R2 = Q^T Y. Y's gradient is Q gR2; R2 adds Y gR2^T to Q's.
    const TensorRef Y = ops::matmul(Q, ops::narrow(R, -1, m, n - m));
    const TensorRef gR2 = ops::narrow(gR, -1, m, n - m);
    const TensorRef gX = qr_backward(ops::add(gQ, ops::matmul(Y, mT(gR2))), ops::narrow(gR, -1, 0, m), Q,
                                     ops::narrow(R, -1, 0, m), "reduced");
    return ops::cat({gX, ops::matmul(Q, gR2)}, -1);
  }
  // m >= n (reduced): M = R gR^T - gQ^T Q; gA = (gQ + Q copyltu(M)) R^-T, where copyltu(M)
  // mirrors M's lower triangle into its upper one.
  const TensorRef M = ops::sub(ops::matmul(R, mT(gR)), ops::matmul(mT(gQ), Q));
  const TensorRef lower = ops::tril(M, -1);
  const TensorRef copyltu = ops::add(ops::add(lower, mT(lower)), ops::diag_embed(ops::diagonal(M, 0, -2, -1), 0, -2, -1));
  const TensorRef rhs = ops::add(gQ, ops::matmul(Q, copyltu));
  return ops::linalg_solve(mT(R), rhs, false);  // rhs R^-T (R is triangular; a general solve suffices)
}

TensorRef diagonal_backward(const TensorRef& grad, const IntList& sizes, int64_t offset, int64_t dim1, int64_t dim2) {
  TensorRef out = ops::zeros(sizes, grad.dtype(), grad.device());
  ops::copy_(ops::diagonal(out, offset, dim1, dim2), grad);
  return out;
}

// as_strided's elements are positions in its input's storage; both directions work in that
// storage space: the positions of the input's elements and of the output's, counted from the
// lowest either addresses (an arange viewed with each geometry).
StridedPositions strided_positions(const TensorRef& self, const IntList& size, const IntList& stride,
                                   std::optional<int64_t> storage_offset) {
  const IntList in_sizes = self.shape_vector();
  const IntList in_strides(self.strides().begin(), self.strides().end());
  const int64_t in_offset = self.storage_offset(), out_offset = storage_offset.value_or(in_offset);
  auto last_position = [](const IntList& sizes, const IntList& strides, int64_t offset) {
    int64_t last = offset;
    for (size_t d = 0; d < sizes.size(); ++d) {
      if (sizes[d] == 0) return offset - 1;  // empty: addresses nothing
      last += (sizes[d] - 1) * strides[d];
    }
    return last;
  };
  const int64_t base = std::min(in_offset, out_offset);
  const int64_t end =
      std::max(last_position(in_sizes, in_strides, in_offset), last_position(size, stride, out_offset)) + 1;
  StridedPositions p;
  p.extent = std::max<int64_t>(end - base, 0);
  TensorRef positions = ops::arange(Scalar(p.extent), TS_INT64, self.device());
  p.input = ops::reshape(ops::as_strided(positions, in_sizes, in_strides, in_offset - base), {-1});
  p.output = ops::reshape(ops::as_strided(positions, size, stride, out_offset - base), {-1});
  return p;
}

// Every output position adds its gradient to the storage (index_add sums a position several
// outputs share); every input element reads its position, divided by how many input elements
// share it (an expanded input), as torch's as_strided backward.
TensorRef as_strided_backward(const TensorRef& grad, const TensorRef& self, const IntList& size, const IntList& stride,
                              std::optional<int64_t> storage_offset) {
  const StridedPositions p = strided_positions(self, size, stride, storage_offset);
  auto storage_zeros = [&] { return ops::zeros({p.extent}, grad.dtype(), grad.device()); };
  TensorRef storage = ops::index_add(storage_zeros(), 0, p.output, ops::reshape(grad, {-1}));
  TensorRef ones = ops::ones({int64_t(p.input.numel())}, grad.dtype(), grad.device());
  TensorRef sharing = ops::index_add(storage_zeros(), 0, p.input, ones);
  TensorRef per_element = ops::div(ops::index_select(storage, 0, p.input), ops::index_select(sharing, 0, p.input));
  return ops::reshape(per_element, self.shape_vector());
}

TensorRef maybe_multiply(const TensorRef& grad, const Scalar& s) {
  if (s.tag != TS_VALUE_DOUBLE && s.i == 1) return grad;
  if (s.tag == TS_VALUE_DOUBLE && s.d == 1.0) return grad;
  return ops::mul(grad, s);
}

TensorRef zeros_like(const TensorRef& t) { return ops::zeros(t.shape_vector(), t.dtype(), t.device()); }

TensorRef scalar_like(const TensorRef& t, double value) { return ops::full({}, value, t.dtype(), t.device()); }

TensorRef unsqueeze_reduced(const TensorRef& grad, const IntList& sizes, const std::optional<IntList>& dim,
                            bool keepdim) {
  TensorRef g = grad;
  if (!keepdim && !sizes.empty())
    for (int64_t d : reduced_dims(dim, int64_t(sizes.size()))) g = ops::unsqueeze(g, d);
  return g;
}

TensorRef sum_backward(const TensorRef& grad, const IntList& sizes, const std::optional<IntList>& dim, bool keepdim) {
  return ops::expand(unsqueeze_reduced(grad, sizes, dim, keepdim), sizes);
}

TensorRef mean_backward(const TensorRef& grad, const IntList& sizes, const std::optional<IntList>& dim, bool keepdim) {
  int64_t count = 1;
  for (int64_t d : reduced_dims(dim, int64_t(sizes.size()))) count *= sizes.empty() ? 1 : sizes[size_t(d)];
  return ops::div(sum_backward(grad, sizes, dim, keepdim), Scalar(double(std::max<int64_t>(count, 1))));
}

TensorRef prod_backward(const TensorRef& grad, const TensorRef& self, const TensorRef& result,
                        const std::optional<IntList>& dim, bool keepdim) {
  // d prod / d x_i = prod / x_i (inputs with zeros get the product of the others instead).
  IntList sizes = self.shape_vector();
  TensorRef g = unsqueeze_reduced(grad, sizes, dim, keepdim);
  TensorRef r = unsqueeze_reduced(result, sizes, dim, keepdim);
  TensorRef safe = ops::where(ops::eq(self, Scalar(0.0)), scalar_like(self, 1.0), self);
  TensorRef others = ops::div(r, safe);
  // Where x_i == 0, prod/x_i is the product over the others: recompute it with x_i set to 1.
  TensorRef prod_without = ops::prod(safe, dim, true);
  TensorRef zero_count = ops::sum(ops::to(ops::eq(self, Scalar(0.0)), self.dtype()), dim, true);
  TensorRef at_zero = ops::where(ops::eq(zero_count, Scalar(1.0)), prod_without, scalar_like(self, 0.0));
  TensorRef d = ops::where(ops::eq(self, Scalar(0.0)), ops::expand(at_zero, sizes), others);
  return ops::mul(ops::expand(g, sizes), conj(d));
}

namespace {
TensorRef reverse_cumsum(const TensorRef& t, int64_t dim) {
  return ops::flip(ops::cumsum(ops::flip(t, {dim}), dim), {dim});
}
}  // namespace

TensorRef cumprod_backward(const TensorRef& grad, const TensorRef& self, int64_t dim, const TensorRef& result) {
  // d out_k / d x_i = out_k / x_i for k >= i, so grad_i = sum_{k>=i} g_k conj(out_k / x_i): a
  // reverse cumsum divided by x_i. That holds wherever x_i != 0; past a line's first zero every
  // out_k is 0, and so is the gradient. At the first zero itself, the product of the others is
  // the cumprod with that zero replaced by 1.
  if (self.dim() == 0) return grad;
  const TensorRef g = ops::to(grad, result.dtype());
  const TensorRef is_zero = ops::eq(self, Scalar(0.0));
  const TensorRef first_zero = ops::logical_and(is_zero, ops::eq(ops::cumsum(is_zero, dim), Scalar(int64_t(1))));
  const TensorRef one = scalar_like(self, 1.0);
  const TensorRef nonzero_part =
      ops::div(reverse_cumsum(ops::mul(g, conj(result)), dim), conj(ops::where(is_zero, one, self)));
  const TensorRef without_first_zero = ops::cumprod(ops::where(first_zero, one, self), dim);
  const TensorRef first_zero_part = reverse_cumsum(ops::mul(g, conj(ops::to(without_first_zero, result.dtype()))), dim);
  const TensorRef zero = scalar_like(nonzero_part, 0.0);
  return ops::where(first_zero, first_zero_part, ops::where(is_zero, zero, nonzero_part));
}

TensorRef extreme_backward(const TensorRef& grad, const TensorRef& self, const TensorRef& result, const IntList& dim,
                           bool keepdim) {
  // The gradient is shared equally among the elements that attain the extreme.
  IntList sizes = self.shape_vector();
  std::optional<IntList> d = dim;
  TensorRef g = unsqueeze_reduced(grad, sizes, d, keepdim);
  TensorRef r = unsqueeze_reduced(result, sizes, d, keepdim);
  TensorRef mask = ops::to(ops::eq(self, r), self.dtype());
  TensorRef count = ops::sum(mask, d, true);
  return ops::mul(ops::div(g, count), mask);
}

TensorRef var_backward(const TensorRef& grad, const TensorRef& self, const std::optional<IntList>& dim,
                       const std::optional<Scalar>& correction, bool keepdim) {
  IntList sizes = self.shape_vector();
  int64_t n = 1;
  for (int64_t d : reduced_dims(dim, int64_t(sizes.size()))) n *= sizes.empty() ? 1 : sizes[size_t(d)];
  double c = correction ? correction->to_double() : 1.0;
  TensorRef g = unsqueeze_reduced(grad, sizes, dim, keepdim);
  TensorRef centered = ops::sub(self, ops::mean(self, dim, true));
  return ops::mul(ops::mul(g, centered), Scalar(2.0 / std::max(double(n) - c, 0.0)));
}

TensorRef std_backward(const TensorRef& grad, const TensorRef& self, const TensorRef& result,
                       const std::optional<IntList>& dim, const std::optional<Scalar>& correction, bool keepdim) {
  // d std = d var / (2 std)
  IntList sizes = self.shape_vector();
  TensorRef scaled = ops::div(grad, ops::mul(result, Scalar(2.0)));
  return var_backward(scaled, self, dim, correction, keepdim);
}

TensorRef logsumexp_backward(const TensorRef& grad, const TensorRef& self, const TensorRef& result, const IntList& dim,
                             bool keepdim) {
  IntList sizes = self.shape_vector();
  std::optional<IntList> d = dim;
  TensorRef g = unsqueeze_reduced(grad, sizes, d, keepdim);
  TensorRef r = unsqueeze_reduced(result, sizes, d, keepdim);
  return ops::mul(g, ops::exp(ops::sub(self, r)));
}

TensorRef pow_backward_self(const TensorRef& grad, const TensorRef& self, const TensorRef& exponent) {
  // exponent * self^(exponent-1), 0 where exponent == 0 (0^-1 would be inf).
  TensorRef d = ops::mul(exponent, ops::pow(self, ops::sub(exponent, Scalar(1.0))));
  d = ops::where(ops::eq(exponent, Scalar(0.0)), scalar_like(d, 0.0), d);
  return ops::mul(grad, conj(d));
}

TensorRef pow_backward_self(const TensorRef& grad, const TensorRef& self, const Scalar& exponent) {
  double e = exponent.to_double();
  if (e == 0.0) return ops::mul(grad, Scalar(0.0));
  return ops::mul(grad, conj(ops::mul(ops::pow(self, Scalar(e - 1.0)), Scalar(e))));
}

TensorRef pow_backward_exponent(const TensorRef& grad, const TensorRef& self, const TensorRef& result) {
  // result * log(self), 0 where self == 0 and result == 0 (as PyTorch: the limit).
  TensorRef d = ops::mul(result, ops::log(self));
  d = ops::where(ops::logical_and(ops::eq(self, Scalar(0.0)), ops::eq(result, Scalar(0.0))), scalar_like(d, 0.0), d);
  return ops::mul(grad, conj(d));
}

TensorRef clamp_backward(const TensorRef& grad, const TensorRef& self, const std::optional<Scalar>& min,
                         const std::optional<Scalar>& max) {
  TensorRef keep;
  if (min) keep = ops::ge(self, *min);
  if (max) keep = keep.defined() ? ops::logical_and(keep, ops::le(self, *max)) : ops::le(self, *max);
  if (!keep.defined()) return grad;
  return ops::where(keep, grad, scalar_like(grad, 0.0));
}

TensorRef minmax_backward(const TensorRef& grad, const TensorRef& self, const TensorRef& other, bool is_max,
                          bool for_self) {
  // Ties split the gradient in half, as PyTorch does.
  TensorRef wins = is_max ? (for_self ? ops::gt(self, other) : ops::lt(self, other))
                          : (for_self ? ops::lt(self, other) : ops::gt(self, other));
  TensorRef tie = ops::eq(self, other);
  TensorRef share = ops::add(ops::to(wins, grad.dtype()), ops::mul(ops::to(tie, grad.dtype()), Scalar(0.5)));
  return sum_to(ops::mul(grad, share), for_self ? self.shape_vector() : other.shape_vector());
}

TensorRef permute_backward(const TensorRef& grad, const IntList& dims) {
  IntList inverse(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) inverse[size_t(wrap_dim(dims[i], int64_t(dims.size())))] = int64_t(i);
  return ops::permute(grad, inverse);
}

TensorRef unsqueeze_to(const TensorRef& grad, const IntList& sizes) { return ops::reshape(grad, sizes); }

namespace {
// slice's [start, end) along a dim of size n, normalised as slice does (negative counts from the
// end, then clamped).
std::pair<int64_t, int64_t> slice_bounds(int64_t n, std::optional<int64_t> start, std::optional<int64_t> end) {
  int64_t s = start.value_or(0), e = end.value_or(n);
  if (s < 0) s += n;
  if (e < 0) e += n;
  s = std::clamp<int64_t>(s, 0, n);
  return {s, std::clamp<int64_t>(e, s, n)};
}
}  // namespace

TensorRef slice_grad(const TensorRef& grad, const IntList& sizes, int64_t dim, std::optional<int64_t> start,
                     std::optional<int64_t> end, int64_t step) {
  const int64_t d = wrap_dim(dim, int64_t(sizes.size()));
  const auto [s, e] = slice_bounds(sizes[size_t(d)], start, end);
  return ops::slice_backward(grad, sizes, d, s, e, step);
}

void add_slice_grad_into(TensorRef& into, const TensorRef& grad, int64_t dim, std::optional<int64_t> start,
                         std::optional<int64_t> end, int64_t step) {
  const int64_t d = wrap_dim(dim, into.dim());
  const auto [s, e] = slice_bounds(into.size(d), start, end);
  ops::add_(ops::slice(into, d, s, e, step), grad);
}

TensorRef select_grad(const TensorRef& grad, const IntList& sizes, int64_t dim, int64_t index) {
  int64_t d = wrap_dim(dim, int64_t(sizes.size()));
  int64_t i = index < 0 ? index + sizes[size_t(d)] : index;
  return ops::select_backward(grad, sizes, d, i);
}

std::vector<TensorRef> cat_backward(const TensorRef& grad, const std::vector<IntList>& sizes, int64_t dim) {
  std::vector<TensorRef> out;
  int64_t offset = 0;
  int64_t ref_ndim = 0;
  for (const IntList& s : sizes) ref_ndim = std::max<int64_t>(ref_ndim, int64_t(s.size()));
  int64_t d = wrap_dim(dim, ref_ndim);
  for (const IntList& s : sizes) {
    if (s.size() == 1 && s[0] == 0 && ref_ndim > 1) {  // legacy empty tensors take no part in cat
      out.push_back(ops::zeros(s, grad.dtype(), grad.device()));
      continue;
    }
    int64_t len = s[size_t(d)];
    out.push_back(ops::narrow(grad, d, offset, len));
    offset += len;
  }
  return out;
}

std::vector<TensorRef> stack_backward(const TensorRef& grad, size_t n, int64_t dim) {
  int64_t d = wrap_dim(dim, grad.dim());
  std::vector<TensorRef> out;
  for (size_t i = 0; i < n; ++i) out.push_back(ops::select(grad, d, int64_t(i)));
  return out;
}

TensorRef matmul_backward(const TensorRef& grad, const TensorRef& self, const TensorRef& other, bool for_self) {
  // Promote 1-D operands to matrices, as matmul does, then reduce the broadcast batch dims.
  TensorRef a = self.dim() == 1 ? ops::unsqueeze(self, 0) : self;
  TensorRef b = other.dim() == 1 ? ops::unsqueeze(other, 1) : other;
  TensorRef g = grad;
  if (self.dim() == 1) g = ops::unsqueeze(g, g.dim() == 0 ? 0 : g.dim() - 1);  // restore the row dim
  if (other.dim() == 1) g = ops::unsqueeze(g, g.dim());                        // restore the column dim
  // A weight used transposed (Linear's x @ w.t()) gets its gradient in the weight's own layout:
  // (g^T a)^T is that gradient with column-major strides, so the transpose's backward hands the
  // weight a contiguous gradient and accumulating it is a plain copy, not a strided transpose.
  const bool other_transposed = !for_self && b.dim() == 2 && b.size(0) > 1 && b.size(1) > 1 && b.stride(0) == 1 &&
                                b.stride(1) == b.size(0);
  if (!for_self && b.dim() == 2 && a.dim() >= 2 && a.dim() == g.dim() && (a.dim() > 2 || other_transposed)) {
    // A matrix applied to a batch (a Linear over [T, N, in]): fold the batch into the rows, one
    // GEMM, instead of a product per batch entry and a sum over them.
    const int64_t k = a.size(a.dim() - 1), n = g.size(g.dim() - 1);  // size() takes no negative dims
    TensorRef rows_a = ops::reshape(a, {-1, k}), rows_g = ops::reshape(g, {-1, n});
    if (other_transposed) return ops::transpose(ops::mm(ops::transpose(rows_g, 0, 1), conj(rows_a)), 0, 1);
    TensorRef out = ops::mm(conj(ops::transpose(rows_a, 0, 1)), rows_g);
    return ops::reshape(out, other.shape_vector());
  }
  TensorRef out = for_self ? ops::matmul(g, conj(ops::transpose(b, -1, -2))) : ops::matmul(conj(ops::transpose(a, -1, -2)), g);
  IntList target = for_self ? a.shape_vector() : b.shape_vector();
  out = sum_to(out, target);
  return ops::reshape(out, for_self ? self.shape_vector() : other.shape_vector());
}

TensorRef conv_transpose_weight_backward(const TensorRef& grad, const TensorRef& grad_output, const TensorRef& weight,
                                         const IntList& stride, const IntList& padding, const IntList& dilation,
                                         int64_t groups) {
  return std::get<1>(ops::convolution_backward(grad_output, grad, weight, stride, padding, dilation, groups));
}

TensorRef index_backward(const TensorRef& grad, const IntList& sizes, const std::vector<TensorRef>& indices) {
  TensorRef zeros = ops::zeros(sizes, grad.dtype(), grad.device());
  return ops::index_put(zeros, indices, grad, true);
}

TensorRef masked_select_backward(const TensorRef& grad, const TensorRef& self, const TensorRef& mask) {
  IntList sizes = self.shape_vector();
  TensorRef full_mask = ops::expand(mask, sizes);
  TensorRef zeros = ops::zeros(sizes, grad.dtype(), grad.device());
  return ops::index_put(zeros, {full_mask}, grad, true);
}

namespace {
TensorRef reduce_scale(const TensorRef& grad, const TensorRef& d, int64_t reduction) {
  TensorRef out = ops::mul(d, grad);  // grad is 0-d for mean/sum and broadcasts
  if (reduction == 1) out = ops::div(out, Scalar(double(std::max<int64_t>(d.numel(), 1))));
  return out;
}
}  // namespace

TensorRef l1_loss_backward(const TensorRef& grad, const TensorRef& self, const TensorRef& target, int64_t reduction) {
  TensorRef d = ops::sign(ops::sub(self, target));
  return sum_to(reduce_scale(grad, d, reduction), self.shape_vector());
}

TensorRef bce_with_logits_backward(const TensorRef& grad, const TensorRef& self, const TensorRef& target,
                                   const TensorRef& weight, const TensorRef& pos_weight, int64_t reduction) {
  // d/dx = sigmoid(x) * (1 - t + p t) - p t, with p = pos_weight (1 when absent), times weight.
  TensorRef s = ops::sigmoid(self);
  TensorRef d;
  if (pos_weight.defined()) {
    TensorRef pt = ops::mul(pos_weight, target);
    d = ops::sub(ops::mul(s, ops::add(ops::sub(scalar_like(target, 1.0), target), pt)), pt);
  } else {
    d = ops::sub(s, target);
  }
  if (weight.defined()) d = ops::mul(d, weight);
  return sum_to(reduce_scale(grad, d, reduction), self.shape_vector());
}

TensorRef bce_with_logits_target_backward(const TensorRef& grad, const TensorRef& self, const TensorRef& target,
                                          const TensorRef& weight, const TensorRef& pos_weight, int64_t reduction) {
  // d/dt = w * ((p - 1) * softplus(-x) - x), softplus(-x) = relu(-x) + log1p(exp(-|x|)).
  TensorRef d = ops::neg(self);
  if (pos_weight.defined()) {
    TensorRef softplus_neg = ops::add(ops::relu(ops::neg(self)), ops::log1p(ops::exp(ops::neg(ops::abs(self)))));
    d = ops::add(d, ops::mul(ops::sub(pos_weight, Scalar(1.0)), softplus_neg));
  }
  if (weight.defined()) d = ops::mul(d, weight);
  return sum_to(reduce_scale(grad, d, reduction), target.shape_vector());
}

TensorRef scatter_src_backward(const TensorRef& grad, int64_t dim, const TensorRef& index, const IntList& src_sizes) {
  TensorRef picked = ops::gather(grad, dim, index);
  const IntList have = picked.shape_vector();
  if (have == src_sizes) return picked;
  IntList pad;  // constant_pad_nd: (before, after) pairs from the last dim backwards
  for (size_t d = have.size(); d-- > 0;) {
    pad.push_back(0);
    pad.push_back(src_sizes[d] - have[d]);
  }
  return ops::constant_pad_nd(picked, pad);
}

// Double backward of softmax: gi = y (go - sum(go y)) with y the softmax output. For the
// incoming gradient G: d/dgo = y (G - sum(G y)) (the same backward again), d/dy = G (go -
// sum(go y)) - go sum(G y).
std::tuple<TensorRef, TensorRef> softmax_backward_data_backward(const TensorRef& grad, const TensorRef& grad_output,
                                                                const TensorRef& output, int64_t dim,
                                                                int32_t input_dtype) {
  TensorRef grad_grad_output = ops::_softmax_backward_data(grad, output, dim, input_dtype);
  TensorRef mixed = ops::sum(ops::mul(grad_output, output), IntList{dim}, true);
  TensorRef grad_mixed = ops::sum(ops::mul(grad, output), IntList{dim}, true);
  TensorRef grad_out = ops::sub(ops::mul(grad, ops::sub(grad_output, mixed)), ops::mul(grad_output, grad_mixed));
  return {grad_grad_output, grad_out};
}

// Double backward of log_softmax: gi = go - exp(y) sum(go) with y the log_softmax output. For G:
// d/dgo = G - sum(G exp(y)), d/dy = -G exp(y) sum(go).
std::tuple<TensorRef, TensorRef> log_softmax_backward_data_backward(const TensorRef& grad, const TensorRef& grad_output,
                                                                    const TensorRef& output, int64_t dim) {
  TensorRef probs = ops::exp(output);
  TensorRef grad_grad_output = ops::sub(grad, ops::sum(ops::mul(grad, probs), IntList{dim}, true));
  TensorRef grad_out = ops::neg(ops::mul(ops::mul(grad, probs), ops::sum(grad_output, IntList{dim}, true)));
  return {grad_grad_output, grad_out};
}

}  // namespace tessera::autograd::formulas

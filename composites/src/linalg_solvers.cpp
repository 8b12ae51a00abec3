// torch.linalg's solvers over the LAPACK primitives: inv, solve, det, slogdet and cholesky
// (explicit composites: autograd/derivatives.yaml has their formulas), and eigvalsh, eigvals, svdvals,
// pinv, matrix_norm, matrix_rank and lstsq (implicit composites).
#include "composite.h"

#include <cmath>
#include <limits>

namespace tessera::composites {
namespace {

void require_square(const char* op, const TensorRef& a) {
  if (a.dim() < 2) fail(TS_ERROR_VALUE, op, ": The input tensor A must have at least 2 dimensions.");
  if (a.size(a.dim() - 1) != a.size(a.dim() - 2))
    fail(TS_ERROR_VALUE, op, ": A must be batches of square matrices, but they are ", a.size(a.dim() - 2), " by ",
         a.size(a.dim() - 1), " matrices");
}

// The first nonzero LAPACK info of a factorization, 0 when none (read on the CPU only).
int32_t first_info(const TensorRef& info) {
  if (info.device().type != 0 || info.numel() == 0) return 0;
  TensorRef c = ops::contiguous(info);
  for (int64_t i = 0; i < c.numel(); ++i)
    if (c.data<int32_t>()[i] != 0) return c.data<int32_t>()[i];
  return 0;
}

TensorRef identity_like(const TensorRef& a) {
  int64_t n = a.size(a.dim() - 1);
  return ops::contiguous(ops::expand(ops::eye(n, std::nullopt, a.dtype(), a.device()), shape_of(a)));
}

TensorRef mT(const TensorRef& t) { return ops::transpose(t, -2, -1); }

void inv(Args& a) {
  TensorRef A = a.tensor(0);
  require_square("linalg.inv", A);
  auto [lu, piv, info] = ops::linalg_lu_factor_ex(A, true, false);
  if (int32_t r = first_info(info); r > 0)
    fail(TS_ERROR_VALUE, "linalg.inv: The diagonal element ", r, " is zero, the inversion could not be completed "
         "because the input matrix is singular (LAPACK getrf info = ", r, ").");
  a.return_tensor(ops::linalg_lu_solve(lu, piv, identity_like(A), true, false));
}

// B is a batch of vectors when its shape is A's without the last dim (PyTorch's rule).
void solve(Args& a) {
  TensorRef A = a.tensor(0), B = a.tensor(1);
  bool left = a.to_bool(2);
  require_square("linalg.solve", A);
  if (A.dtype() != B.dtype())
    fail(TS_ERROR_TYPE, "linalg.solve: Expected A and B to have the same dtype, but found A of type ",
         sdk::dtype_name(A.dtype()), " and B of type ", sdk::dtype_name(B.dtype()), " instead");
  if (!left) {  // X A = B  <=>  A^T X^T = B^T
    auto [lu, piv, info] = ops::linalg_lu_factor_ex(ops::contiguous(mT(A)), true, false);
    if (int32_t r = first_info(info); r > 0)
      fail(TS_ERROR_VALUE, "linalg.solve: The solver failed because the input matrix is singular (U[", r, ",", r,
           "] is zero: LAPACK getrf info = ", r, ").");
    return a.return_tensor(mT(ops::linalg_lu_solve(lu, piv, ops::contiguous(mT(B)), true, false)));
  }
  IntList as = shape_of(A), bs = shape_of(B);
  bool vector = B.dim() == A.dim() - 1 && std::equal(bs.begin(), bs.end(), as.begin());
  if (B.dim() == 1) vector = true;
  TensorRef rhs = vector ? ops::unsqueeze(B, -1) : B;
  // Broadcast the batch dims of A and B.
  const IntList rs = shape_of(rhs);
  IntList ab(as.begin(), as.end() - 2), bb(rs.begin(), rs.end() - 2);
  size_t nd = std::max(ab.size(), bb.size());
  IntList batch(nd);
  for (size_t i = 0; i < nd; ++i) {
    int64_t x = i + ab.size() >= nd ? ab[i + ab.size() - nd] : 1, y = i + bb.size() >= nd ? bb[i + bb.size() - nd] : 1;
    if (x != y && x != 1 && y != 1)
      fail(TS_ERROR_VALUE, "linalg.solve: the batch dims of A ", sdk::shape_text(A.sizes()), " and B ",
           sdk::shape_text(B.sizes()), " do not broadcast");
    batch[i] = std::max(x, y);
  }
  int64_t n = A.size(A.dim() - 1);
  if (rhs.size(rhs.dim() - 2) != n)
    fail(TS_ERROR_VALUE, "linalg.solve: Incompatible shapes of A and B for the equation AX = B (", sdk::shape_text(A.sizes()),
         " and ", sdk::shape_text(B.sizes()), ")");
  IntList a_full = batch, b_full = batch;
  a_full.insert(a_full.end(), {n, n});
  b_full.insert(b_full.end(), {n, rhs.size(rhs.dim() - 1)});
  auto [lu, piv, info] = ops::linalg_lu_factor_ex(ops::contiguous(ops::expand(A, a_full)), true, false);
  if (int32_t r = first_info(info); r > 0)
    fail(TS_ERROR_VALUE, "linalg.solve: The solver failed because the input matrix is singular (U[", r, ",", r,
         "] is zero: LAPACK getrf info = ", r, ").");
  TensorRef x = ops::linalg_lu_solve(lu, piv, ops::contiguous(ops::expand(rhs, b_full)), true, false);
  a.return_tensor(vector ? ops::squeeze(x, -1) : std::move(x));
}

// det = prod(diag(U)) * (-1)^(row swaps); slogdet splits it into sign and log|det|.
std::pair<TensorRef, TensorRef> lu_diagonal_and_sign(const char* op, const TensorRef& A) {
  require_square(op, A);
  auto [lu, piv, info] = ops::linalg_lu_factor_ex(A, true, false);
  int64_t n = A.size(A.dim() - 1);
  TensorRef expected = ops::add(ops::arange(Scalar(n), int32_t(TS_INT32), A.device()), Scalar(1));
  TensorRef swaps = ops::sum(ops::ne(piv, expected), IntList{-1}, false);
  TensorRef sign = ops::sub(ops::ones({}, A.dtype(), A.device()),
                            ops::mul(ops::to(ops::remainder(swaps, ops::full({}, Scalar(2), int32_t(TS_INT64), A.device())), A.dtype()),
                                     Scalar(2.0)));
  return {ops::diagonal(lu, 0, -2, -1), sign};
}

void det(Args& a) {
  auto [diag, sign] = lu_diagonal_and_sign("linalg.det", a.tensor(0));
  a.return_tensor(ops::mul(ops::prod(diag, IntList{-1}, false), sign));
}

void slogdet(Args& a) {
  auto [diag, sign] = lu_diagonal_and_sign("linalg.slogdet", a.tensor(0));
  TensorRef s = ops::mul(sign, ops::prod(ops::sign(diag), IntList{-1}, false));
  return_tensors(a, {s, ops::sum(ops::log(ops::abs(diag)), IntList{-1}, false)});
}

void cholesky(Args& a) {
  TensorRef A = a.tensor(0);
  require_square("linalg.cholesky", A);
  auto [L, info] = ops::linalg_cholesky_ex(A, a.to_bool(1), false);
  if (int32_t r = first_info(info); r > 0)
    fail(TS_ERROR_VALUE, "linalg.cholesky: The factorization could not be completed because the input is not "
         "positive-definite (the leading minor of order ", r, " is not positive-definite).");
  a.return_tensor(std::move(L));
}

void eigvalsh(Args& a) {
  auto [w, v] = ops::linalg_eigh(a.tensor(0), a.optional_str(1) ? std::string(*a.optional_str(1)).c_str() : "L");
  a.return_tensor(std::move(w));
}

// Through linalg_eig, so the gradient is eig's (as torch's eigvals).
void eigvals(Args& a) {
  auto [w, v] = ops::linalg_eig(a.tensor(0));
  a.return_tensor(std::move(w));
}

TensorRef singular_values(const TensorRef& A) {
  auto [u, s, vh] = ops::linalg_svd(A, false, nullptr);
  return s;
}

void svdvals(Args& a) { a.return_tensor(singular_values(a.tensor(0))); }

// The tolerance below which singular values count as zero: max(atol, rtol * largest), with
// rtol = eps * max(m, n) when neither is given (PyTorch's default).
TensorRef cutoff(const TensorRef& A, const TensorRef& s, std::optional<double> atol, std::optional<double> rtol) {
  double eps = A.dtype() == TS_FLOAT32 ? double(std::numeric_limits<float>::epsilon()) : std::numeric_limits<double>::epsilon();
  double r = rtol ? *rtol : (atol && *atol > 0 ? 0.0 : eps * double(std::max(A.size(A.dim() - 2), A.size(A.dim() - 1))));
  TensorRef largest = s.numel() ? ops::amax(s, IntList{-1}, true) : ops::zeros({}, s.dtype(), s.device());
  return ops::maximum(ops::mul(largest, Scalar(r)), ops::full({}, Scalar(atol.value_or(0.0)), s.dtype(), s.device()));
}

void pinv(Args& a) {
  TensorRef A = a.tensor(0);
  auto [u, s, vh] = ops::linalg_svd(A, false, nullptr);
  TensorRef tol = cutoff(A, s, a.optional_double(1), a.optional_double(2));
  TensorRef s_inv = ops::where(ops::gt(s, tol), ops::reciprocal(s), zero_like_scalar(s));
  a.return_tensor(ops::matmul(ops::mul(mT(vh), ops::unsqueeze(s_inv, -2)), mT(u)));
}

void matrix_rank(Args& a) {
  TensorRef A = a.tensor(0);
  TensorRef s = singular_values(A);
  TensorRef tol = cutoff(A, s, a.optional_double(1), a.optional_double(2));
  a.return_tensor(ops::sum(ops::gt(s, tol), IntList{-1}, false));
}

TensorRef matrix_norm_impl(const TensorRef& input, const std::string& ord_text, double ord, std::span<const int64_t> dims,
                           bool keepdim, std::optional<int32_t> dtype) {
  if (input.dim() < 2) fail(TS_ERROR_VALUE, "linalg.matrix_norm: The input tensor A must have at least 2 dimensions.");
  if (!sdk::is_floating(input.dtype()))
    fail(TS_ERROR_TYPE, "linalg.matrix_norm: Expected a floating point or complex tensor as input. Got ", sdk::dtype_name(input.dtype()));
  if (dims.size() != 2) fail(TS_ERROR_VALUE, "linalg.matrix_norm: dim must be a 2-tuple. Got ", dims.size(), " dims");
  TensorRef x = dtype ? ops::to(input, *dtype) : input;
  int64_t d0 = wrap_dim("linalg.matrix_norm", dims[0], x.dim()), d1 = wrap_dim("linalg.matrix_norm", dims[1], x.dim());
  if (d0 == d1) fail(TS_ERROR_VALUE, "linalg.matrix_norm: dims must be different. Got (", dims[0], ", ", dims[1], ")");
  auto keep = [&](TensorRef r) {  // restores the two reduced dims as size 1
    if (!keepdim) return r;
    r = ops::unsqueeze(r, std::min(d0, d1));
    return ops::unsqueeze(r, std::max(d0, d1));
  };
  if (ord_text == "fro") return ops::sqrt(ops::sum(ops::mul(x, x), IntList{d0, d1}, keepdim));
  if (ord_text == "nuc" || std::abs(ord) == 2) {
    const IntList source{d0, d1}, destination{-2, -1};
    TensorRef s = singular_values(movedim_to(x, source, destination));
    if (ord_text == "nuc") return keep(ops::sum(s, IntList{-1}, false));
    return keep(ord > 0 ? ops::amax(s, IntList{-1}, false) : ops::amin(s, IntList{-1}, false));
  }
  if (std::abs(ord) == 1 || std::isinf(ord)) {
    // 1: the largest column sum of |x|; inf: the largest row sum (negative: the smallest).
    int64_t sum_dim = std::abs(ord) == 1 ? d0 : d1, other = std::abs(ord) == 1 ? d1 : d0;
    TensorRef sums = ops::sum(ops::abs(x), IntList{sum_dim}, true);
    TensorRef r = ord > 0 ? ops::amax(sums, IntList{other}, true) : ops::amin(sums, IntList{other}, true);
    return keepdim ? r : ops::squeeze(ops::squeeze(r, std::max(d0, d1)), std::min(d0, d1));
  }
  fail(TS_ERROR_VALUE, "linalg.matrix_norm: Order ", ord_text.empty() ? std::to_string(ord) : ord_text,
       " not supported (expected 'fro', 'nuc', inf, -inf, 1, -1, 2 or -2)");
}

void matrix_norm(Args& a) {
  auto dims = a.int_list(2);
  a.return_tensor(matrix_norm_impl(a.tensor(0), "", a.scalar(1).to_double(), dims, a.to_bool(3), a.optional_dtype(4)));
}

void matrix_norm_str(Args& a) {
  auto dims = a.int_list(2);
  std::string ord(*a.optional_str(1));
  if (ord != "fro" && ord != "nuc") fail(TS_ERROR_VALUE, "linalg.matrix_norm: Order ", ord, " not supported.");
  a.return_tensor(matrix_norm_impl(a.tensor(0), ord, 0.0, dims, a.to_bool(3), a.optional_dtype(4)));
}

// lstsq through the pseudo-inverse (the least-squares, minimum-norm solution, as gelsd);
// residuals, rank and singular values are returned empty (PyTorch's CPU default driver, gelsy,
// computes none of them either).
void lstsq(Args& a) {
  TensorRef A = a.tensor(0), B = a.tensor(1);
  if (A.dim() < 2) fail(TS_ERROR_VALUE, "linalg.lstsq: input must have at least 2 dimensions.");
  bool vector = B.dim() == A.dim() - 1;
  TensorRef rhs = vector ? ops::unsqueeze(B, -1) : B;
  if (rhs.size(rhs.dim() - 2) != A.size(A.dim() - 2))
    fail(TS_ERROR_VALUE, "linalg.lstsq: input.size(-2) should match other.size(-2)");
  std::optional<double> rcond = a.optional_double(2);
  auto [u, s, vh] = ops::linalg_svd(A, false, nullptr);
  TensorRef tol = cutoff(A, s, std::nullopt, rcond);
  TensorRef s_inv = ops::where(ops::gt(s, tol), ops::reciprocal(s), zero_like_scalar(s));
  TensorRef x = ops::matmul(ops::mul(mT(vh), ops::unsqueeze(s_inv, -2)), ops::matmul(mT(u), rhs));
  TensorRef empty = ops::zeros({0}, A.dtype(), A.device());
  return_tensors(a, {vector ? ops::squeeze(x, -1) : x, empty, ops::zeros({0}, int32_t(TS_INT64), A.device()), empty});
}

}  // namespace

void register_linalg_solvers(sdk::Registrar& reg) {
  reg.kernel("linalg_inv", TS_KEY_COMPOSITE_EXPLICIT, inv);
  reg.kernel("linalg_solve", TS_KEY_COMPOSITE_EXPLICIT, solve);
  reg.kernel("linalg_det", TS_KEY_COMPOSITE_EXPLICIT, det);
  reg.kernel("linalg_slogdet", TS_KEY_COMPOSITE_EXPLICIT, slogdet);
  reg.kernel("linalg_cholesky", TS_KEY_COMPOSITE_EXPLICIT, cholesky);
  composite(reg, "linalg_eigvalsh", eigvalsh);
  composite(reg, "linalg_eigvals", eigvals);
  composite(reg, "linalg_svdvals", svdvals);
  composite(reg, "linalg_pinv", pinv);
  composite(reg, "linalg_matrix_norm", matrix_norm);
  composite(reg, "linalg_matrix_norm.str_ord", matrix_norm_str);
  composite(reg, "linalg_matrix_rank", matrix_rank);
  composite(reg, "linalg_lstsq", lstsq);
}

}  // namespace tessera::composites

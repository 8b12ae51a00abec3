// Forward-mode (jvp) helpers for derivatives.yaml's `result:` formulas: the directional
// derivative of an operator's output given its inputs' tangents. Built from operators, like
// the backward helpers, so tangents are themselves differentiable and batched.
#include "formulas.h"

#include <algorithm>

namespace tessera::autograd::formulas {
namespace {
TensorRef or_zero_like(const TensorRef& t, const TensorRef& like) { return t.defined() ? t : zeros_like(like); }

// `v` of shape [C] viewed as [1, C, 1, ...] against an input of `rank` dims.
TensorRef per_channel(const TensorRef& v, int64_t rank) {
  IntList shape(size_t(rank), 1);
  shape[1] = v.numel();
  return ops::reshape(v, shape);
}
}  // namespace

TensorRef minmax_jvp(const TensorRef& self_t, const TensorRef& other_t, const TensorRef& self, const TensorRef& other,
                     bool is_max) {
  TensorRef self_wins = is_max ? ops::gt(self, other) : ops::lt(self, other);
  TensorRef tie_share = ops::mul(ops::add(self_t, other_t), Scalar(0.5));
  return ops::where(ops::eq(self, other), tie_share, ops::where(self_wins, self_t, other_t));
}

TensorRef softmax_jvp(const TensorRef& self_t, const TensorRef& result, int64_t dim) {
  TensorRef mixed = ops::sum(ops::mul(result, self_t), IntList{dim}, true);
  return ops::mul(result, ops::sub(self_t, mixed));
}

// The tangent laid into the input's storage positions, read at the output's (the tangent may
// have any layout of its own, so as_strided cannot run on it directly).
TensorRef as_strided_jvp(const TensorRef& self_t, const TensorRef& self, const IntList& size, const IntList& stride,
                         std::optional<int64_t> storage_offset) {
  const StridedPositions p = strided_positions(self, size, stride, storage_offset);
  TensorRef storage = ops::index_copy(ops::zeros({p.extent}, self_t.dtype(), self_t.device()), 0, p.input,
                                      ops::reshape(self_t, {-1}));
  return ops::reshape(ops::index_select(storage, 0, p.output), size);
}

TensorRef log_softmax_jvp(const TensorRef& self_t, const TensorRef& result, int64_t dim) {
  return ops::sub(self_t, ops::sum(ops::mul(ops::exp(result), self_t), IntList{dim}, true));
}

// gi = y (go - sum(go y)): gi_t = y_t (go - s) + y (go_t - s_t), s_t = sum(go_t y + go y_t).
TensorRef softmax_backward_data_jvp(const TensorRef& grad_output_t, const TensorRef& output_t,
                                    const TensorRef& grad_output, const TensorRef& output, int64_t dim) {
  TensorRef mixed = ops::sum(ops::mul(grad_output, output), IntList{dim}, true);
  TensorRef mixed_t =
      ops::sum(ops::add(ops::mul(grad_output_t, output), ops::mul(grad_output, output_t)), IntList{dim}, true);
  return ops::add(ops::mul(output_t, ops::sub(grad_output, mixed)), ops::mul(output, ops::sub(grad_output_t, mixed_t)));
}

// gi = go - exp(y) sum(go): gi_t = go_t - exp(y) (y_t sum(go) + sum(go_t)).
TensorRef log_softmax_backward_data_jvp(const TensorRef& grad_output_t, const TensorRef& output_t,
                                        const TensorRef& grad_output, const TensorRef& output, int64_t dim) {
  TensorRef inner = ops::add(ops::mul(output_t, ops::sum(grad_output, IntList{dim}, true)),
                             ops::sum(grad_output_t, IntList{dim}, true));
  return ops::sub(grad_output_t, ops::mul(ops::exp(output), inner));
}

TensorRef logsumexp_jvp(const TensorRef& self_t, const TensorRef& self, const IntList& dim, bool keepdim) {
  TensorRef weights = ops::exp(ops::sub(self, ops::logsumexp(self, dim, true)));
  return ops::sum(ops::mul(weights, self_t), dim, keepdim);
}

TensorRef var_jvp(const TensorRef& self_t, const TensorRef& self, const std::optional<IntList>& dim,
                  const std::optional<Scalar>& correction, bool keepdim) {
  TensorRef mean = ops::mean(self, dim, true);
  const double n = double(self.numel()) / double(std::max<int64_t>(mean.numel(), 1));
  const double c = correction ? correction->to_double() : 1.0;
  TensorRef s = ops::sum(ops::mul(ops::sub(self, mean), self_t), dim, keepdim);
  return ops::mul(s, Scalar(2.0 / std::max(n - c, 0.0)));
}

TensorRef prod_jvp(const TensorRef& self_t, const TensorRef& self, const TensorRef& result,
                   const std::optional<IntList>& dim, bool keepdim) {
  // The backward with a gradient of ones is d(prod)/d(self) elementwise, zeros in self included.
  TensorRef partials = prod_backward(ops::full_like(result, Scalar(1.0)), self, result, dim, keepdim);
  return ops::sum(ops::mul(partials, self_t), dim, keepdim);
}

TensorRef cumprod_jvp(const TensorRef& self_t, const TensorRef& self, int64_t dim) {
  // out_i = prod_{k<=i} x_k, so d out_i = sum_{j<=i} t_j prod_{k<=i, k!=j} x_k. Row j of an n x n
  // matrix holds x with x_j replaced by t_j; its cumprod at column i >= j is term j of d out_i.
  // Exact with zeros in x (a division by x would not be); n^2 memory along `dim`.
  const int64_t rank = self.dim();
  if (rank == 0) return self_t;
  const int64_t d = dim < 0 ? dim + rank : dim;
  TensorRef x = ops::movedim(self, IntList{d}, IntList{-1});
  TensorRef t = ops::movedim(self_t, IntList{d}, IntList{-1});
  const int64_t n = x.size(x.dim() - 1);
  IntList square = x.shape_vector();
  square.insert(square.end() - 1, n);
  TensorRef eye = ops::eye(n, std::nullopt, int32_t(TS_BOOL), x.device());
  TensorRef rows = ops::where(eye, ops::expand(ops::unsqueeze(t, -1), square), ops::expand(ops::unsqueeze(x, -2), square));
  TensorRef prefix = ops::cumprod(rows, -1);
  TensorRef lower = ops::tril(ops::ones(IntList{n, n}, int32_t(TS_BOOL), x.device()));  // [i, j]: j <= i
  TensorRef terms = ops::where(ops::transpose(lower, 0, 1), prefix, scalar_like(prefix, 0.0));  // [j, i]
  return ops::movedim(ops::sum(terms, IntList{-2}, false), IntList{-1}, IntList{d});
}

TensorRef extreme_jvp(const TensorRef& self_t, const TensorRef& self, const TensorRef& result, const IntList& dim,
                      bool keepdim) {
  // The tangent at the extreme (shared evenly between ties, as the backward shares the gradient).
  TensorRef at = unsqueeze_reduced(result, self.shape_vector(), dim.empty() ? std::nullopt : std::optional(dim), keepdim);
  TensorRef mask = ops::to(ops::eq(self, at), self_t.dtype());
  std::optional<IntList> d = dim.empty() ? std::nullopt : std::optional(dim);
  return ops::div(ops::sum(ops::mul(self_t, mask), d, keepdim), ops::sum(mask, d, keepdim));
}

TensorRef pool_indices_jvp(const TensorRef& self_t, const TensorRef& indices, const TensorRef& result) {
  // max_pool2d's indices count within each (n, c) plane.
  TensorRef flat_t = ops::flatten(self_t, -2, -1);
  TensorRef picked = ops::gather(flat_t, -1, ops::flatten(indices, -2, -1));
  return ops::reshape(picked, result.shape_vector());
}

TensorRef reduce_loss(const TensorRef& t, int64_t reduction) {
  if (reduction == 1) return ops::mean(t);
  if (reduction == 2) return ops::sum(t);
  return t;
}

TensorRef layer_norm_jvp(const TensorRef& input_t, const TensorRef& weight_t, const TensorRef& bias_t,
                         const TensorRef& input, const TensorRef& weight, const TensorRef& mean, const TensorRef& rstd,
                         const IntList& normalized_shape) {
  IntList dims;
  for (size_t i = 0; i < normalized_shape.size(); ++i) dims.push_back(input.dim() - 1 - int64_t(i));
  TensorRef xhat = ops::mul(ops::sub(input, mean), rstd);
  TensorRef t = ops::sub(ops::sub(input_t, ops::mean(input_t, dims, true)),
                         ops::mul(xhat, ops::mean(ops::mul(input_t, xhat), dims, true)));
  TensorRef out = ops::mul(t, rstd);
  if (weight.defined()) out = ops::mul(out, weight);
  if (weight_t.defined()) out = ops::add(out, ops::mul(xhat, weight_t));
  if (bias_t.defined()) out = ops::add(out, bias_t);
  return out;
}

TensorRef batch_norm_jvp(const TensorRef& input_t, const TensorRef& weight_t, const TensorRef& bias_t,
                         const TensorRef& input, const TensorRef& weight, const TensorRef& running_mean,
                         const TensorRef& running_var, const TensorRef& save_mean, const TensorRef& save_invstd,
                         bool training, double eps) {
  const int64_t rank = input.dim();
  TensorRef mean, invstd;
  if (training) {
    mean = per_channel(save_mean, rank);
    invstd = per_channel(save_invstd, rank);
  } else {
    mean = per_channel(running_mean, rank);
    invstd = ops::rsqrt(ops::add(per_channel(running_var, rank), Scalar(eps)));
  }
  TensorRef xhat = ops::mul(ops::sub(input, mean), invstd);
  TensorRef t = input_t;
  if (training) {
    IntList dims{0};
    for (int64_t d = 2; d < rank; ++d) dims.push_back(d);
    t = ops::sub(ops::sub(input_t, ops::mean(input_t, dims, true)),
                 ops::mul(xhat, ops::mean(ops::mul(input_t, xhat), dims, true)));
  }
  TensorRef out = ops::mul(t, invstd);
  if (weight.defined()) out = ops::mul(out, per_channel(weight, rank));
  if (weight_t.defined()) out = ops::add(out, ops::mul(xhat, per_channel(weight_t, rank)));
  if (bias_t.defined()) out = ops::add(out, per_channel(bias_t, rank));
  return out;
}

TensorRef group_norm_jvp(const TensorRef& input_t, const TensorRef& weight_t, const TensorRef& bias_t,
                         const TensorRef& input, const TensorRef& weight, const TensorRef& mean, const TensorRef& rstd,
                         int64_t group) {
  const IntList shape = input.shape_vector();
  const IntList grouped{shape[0], group, -1};
  TensorRef x = ops::reshape(input, grouped), t = ops::reshape(input_t, grouped);
  TensorRef m = ops::unsqueeze(mean, -1), r = ops::unsqueeze(rstd, -1);
  TensorRef xhat = ops::mul(ops::sub(x, m), r);
  IntList last{-1};
  TensorRef dt = ops::sub(ops::sub(t, ops::mean(t, last, true)), ops::mul(xhat, ops::mean(ops::mul(t, xhat), last, true)));
  TensorRef out = ops::reshape(ops::mul(dt, r), shape);
  xhat = ops::reshape(xhat, shape);
  const int64_t rank = input.dim();
  if (weight.defined()) out = ops::mul(out, per_channel(weight, rank));
  if (weight_t.defined()) out = ops::add(out, ops::mul(xhat, per_channel(weight_t, rank)));
  if (bias_t.defined()) out = ops::add(out, per_channel(bias_t, rank));
  return out;
}

TensorRef bce_with_logits_jvp(const TensorRef& self_t, const TensorRef& target_t, const TensorRef& self,
                              const TensorRef& target, const TensorRef& weight, const TensorRef& pos_weight,
                              int64_t reduction) {
  // loss = (1 - y) x + (1 + (p - 1) y) softplus(-x), p = pos_weight (1 when absent), times weight.
  TensorRef s = ops::sigmoid(self);
  TensorRef d_self, d_target;
  TensorRef softplus_neg = ops::log1p(ops::exp(ops::neg(self)));
  if (pos_weight.defined()) {
    TensorRef pt = ops::mul(pos_weight, target);
    d_self = ops::sub(ops::mul(s, ops::add(ops::sub(scalar_like(target, 1.0), target), pt)), pt);
    d_target = ops::sub(ops::mul(ops::sub(pos_weight, Scalar(1.0)), softplus_neg), self);
  } else {
    d_self = ops::sub(s, target);
    d_target = ops::neg(self);
  }
  TensorRef t = ops::add(ops::mul(d_self, self_t), ops::mul(d_target, or_zero_like(target_t, target)));
  if (weight.defined()) t = ops::mul(t, weight);
  return reduce_loss(t, reduction);
}

TensorRef nll_loss_jvp(const TensorRef& self_t, const TensorRef& target, const TensorRef& weight, int64_t reduction,
                       int64_t ignore_index, const TensorRef& total_weight) {
  const bool single = self_t.dim() == 1;
  TensorRef t = single ? ops::unsqueeze(self_t, 0) : self_t;
  TensorRef y = single ? ops::unsqueeze(target, 0) : target;
  TensorRef kept = ops::ne(y, Scalar(ignore_index));
  TensorRef safe = ops::mul(y, kept);
  TensorRef picked = ops::squeeze(ops::gather(t, 1, ops::unsqueeze(safe, 1)), 1);
  TensorRef w = ops::to(kept, t.dtype());
  if (weight.defined()) w = ops::mul(w, ops::reshape(ops::index_select(weight, 0, ops::flatten(safe)), safe.shape_vector()));
  TensorRef out = ops::neg(ops::mul(picked, w));
  if (single) out = ops::squeeze(out, 0);
  if (reduction == 0) return out;
  TensorRef s = ops::sum(out);
  return reduction == 1 ? ops::div(s, total_weight) : s;
}

TensorRef linalg_solve_jvp(const TensorRef& A_t, const TensorRef& B_t, const TensorRef& A, const TensorRef& X, bool left) {
  // A X = B: dX = A^-1 (dB - dA X); X A = B: dX = (dB - X dA) A^-1. B may be a batch of vectors.
  const bool vectors = left && X.dim() == A.dim() - 1;
  TensorRef x = vectors ? ops::unsqueeze(X, -1) : X;
  TensorRef b_t = vectors ? ops::unsqueeze(B_t, -1) : B_t;
  TensorRef rhs = left ? ops::sub(b_t, ops::matmul(A_t, x)) : ops::sub(b_t, ops::matmul(x, A_t));
  TensorRef dX = ops::linalg_solve(A, rhs, left);
  return vectors ? ops::squeeze(dX, -1) : dX;
}

TensorRef linalg_det_jvp(const TensorRef& A_t, const TensorRef& A, const TensorRef& result) {
  // d det(A) = det(A) trace(A^-1 dA); the trace of a product as an element-wise sum.
  TensorRef inv_T = ops::transpose(ops::linalg_inv(A), -2, -1);
  return ops::mul(result, ops::sum(ops::mul(inv_T, A_t), IntList{-2, -1}, false));
}

TensorRef cholesky_jvp(const TensorRef& A_t, const TensorRef& L_or_U, bool upper) {
  // A = L L^T: dL = L Phi(L^-1 dA L^-T), Phi keeping the lower triangle with a halved diagonal.
  TensorRef L = upper ? ops::transpose(L_or_U, -2, -1) : L_or_U;
  TensorRef sym = ops::mul(ops::add(A_t, ops::transpose(A_t, -2, -1)), Scalar(0.5));
  TensorRef L_inv = ops::linalg_inv(L);
  TensorRef inner = ops::matmul(ops::matmul(L_inv, sym), ops::transpose(L_inv, -2, -1));
  TensorRef phi = ops::sub(ops::tril(inner), ops::mul(ops::diag_embed(ops::diagonal(inner, 0, -2, -1)), Scalar(0.5)));
  TensorRef dL = ops::matmul(L, phi);
  return upper ? ops::transpose(dL, -2, -1) : dL;
}

// ---- factorisations (real inputs): tangents of every output.
namespace {
TensorRef mT(const TensorRef& t) { return ops::transpose(t, -2, -1); }
int64_t size_from_end(const TensorRef& t, int64_t d) { return t.size(t.dim() + d); }
// 1 / (e_j - e_i) off the diagonal, 0 on it (and where the values repeat).
TensorRef inverse_gaps(const TensorRef& e) {
  TensorRef gaps = ops::sub(ops::unsqueeze(e, -2), ops::unsqueeze(e, -1));  // [i, j] = e_j - e_i
  TensorRef zero = ops::eq(gaps, Scalar(0.0));
  return ops::where(zero, scalar_like(gaps, 0.0), ops::reciprocal(ops::where(zero, scalar_like(gaps, 1.0), gaps)));
}
}  // namespace

std::vector<TensorRef> slogdet_jvp(const TensorRef& A_t, const TensorRef& A) {
  // d log|det A| = trace(A^-1 dA); the sign is piecewise constant.
  return {TensorRef(), ops::sum(ops::mul(mT(ops::linalg_inv(A)), A_t), IntList{-2, -1}, false)};
}

std::vector<TensorRef> eigh_jvp(const TensorRef& A_t, const TensorRef& L, const TensorRef& V) {
  // A = V diag(L) V^T: with P = V^T dA V, dL = diag(P) and dV = V (F o P), F_ij = 1 / (L_j - L_i).
  // Only one triangle is read: the tangent is taken symmetric, as the backward's gradient is.
  TensorRef sym = ops::mul(ops::add(A_t, mT(A_t)), Scalar(0.5));
  TensorRef P = ops::matmul(ops::matmul(mT(V), sym), V);
  TensorRef dL = ops::diagonal(P, 0, -2, -1);
  TensorRef dV = ops::matmul(V, ops::mul(inverse_gaps(L), P));
  return {dL, dV};
}

std::vector<TensorRef> eig_jvp(const TensorRef& A_t, const TensorRef& L, const TensorRef& V) {
  // A V = V diag(L): with P = V^-1 dA V, dL = diag(P) and dV = V C, C = F o P off the diagonal
  // (F_ij = 1 / (L_j - L_i)) and, on it, what keeps each column of unit norm:
  // C_jj = -re((V^H V C)_jj), so that re(v_j^H dv_j) = 0.
  const TensorRef dA = sdk::is_complex(A_t.dtype()) ? A_t : ops::to(A_t, V.dtype());
  const TensorRef P = ops::linalg_solve(V, ops::matmul(dA, V), true);
  const TensorRef C = ops::mul(inverse_gaps(L), P);
  const TensorRef VC = ops::matmul(V, C);
  const TensorRef norm_change = ops::real(ops::diagonal(ops::matmul(conj(mT(V)), VC), 0, -2, -1));
  return {ops::diagonal(P, 0, -2, -1), ops::sub(VC, ops::mul(V, ops::unsqueeze(norm_change, -2)))};
}

std::vector<TensorRef> svd_jvp(const TensorRef& A_t, const TensorRef& U, const TensorRef& S, const TensorRef& Vh,
                               bool full_matrices) {
  const int64_t m = size_from_end(U, -2), n = size_from_end(Vh, -1);
  if (full_matrices && m != n)
    throw sdk::Error(TS_ERROR_NOT_IMPLEMENTED, "linalg_svd: forward AD with full_matrices=True of a non-square "
                                               "matrix is not supported (the extra singular vectors are not unique); "
                                               "use full_matrices=False");
  // A = U S V^T. P = U^T dA V: dS = diag(P); with F_ij = 1 / (s_j^2 - s_i^2),
  // dU = U (F o (P S + S P^T)) + (I - U U^T) dA V S^-1, dV = V (F o (S P + P^T S)) + (I - V V^T) dA^T U S^-1.
  TensorRef V = mT(Vh);
  TensorRef P = ops::matmul(ops::matmul(mT(U), A_t), V);
  TensorRef dS = ops::diagonal(P, 0, -2, -1);
  TensorRef F = inverse_gaps(ops::mul(S, S));
  TensorRef s_row = ops::unsqueeze(S, -2), s_col = ops::unsqueeze(S, -1);  // X * s_row = X S, s_col * X = S X
  TensorRef inv_s_row = ops::reciprocal(s_row);
  TensorRef dU = ops::matmul(U, ops::mul(F, ops::add(ops::mul(P, s_row), ops::mul(s_col, mT(P)))));
  TensorRef dV = ops::matmul(V, ops::mul(F, ops::add(ops::mul(s_col, P), ops::mul(mT(P), s_row))));
  if (m > size_from_end(S, -1)) {
    TensorRef AtV = ops::matmul(A_t, V);
    dU = ops::add(dU, ops::mul(ops::sub(AtV, ops::matmul(U, ops::matmul(mT(U), AtV))), inv_s_row));
  }
  if (n > size_from_end(S, -1)) {
    TensorRef AtU = ops::matmul(mT(A_t), U);
    dV = ops::add(dV, ops::mul(ops::sub(AtU, ops::matmul(V, ops::matmul(mT(V), AtU))), inv_s_row));
  }
  return {dU, dS, mT(dV)};
}

std::vector<TensorRef> qr_jvp(const TensorRef& A_t, const TensorRef& Q, const TensorRef& R, const std::string& mode) {
  // A = Q R with Q^T dQ skew and dR R^-1 upper: X = Q^T dA R^-1 = Omega + (upper), so Omega is
  // X's strict lower triangle minus its transpose; dR = (X - Omega) R, dQ = Q Omega + (I - Q Q^T) dA R^-1.
  const int64_t m = size_from_end(A_t, -2), n = size_from_end(A_t, -1);
  if (m < n || (mode == "complete" && m != n) || mode == "r")
    throw sdk::Error(TS_ERROR_NOT_IMPLEMENTED, sdk::cat("linalg_qr: forward AD is supported for mode='reduced' "
                                                        "with rows >= columns, got mode='", mode, "' and a ", m, "x",
                                                        n, " matrix"));
  TensorRef R_inv = ops::linalg_inv(R);
  TensorRef AtRinv = ops::matmul(A_t, R_inv);
  TensorRef X = ops::matmul(mT(Q), AtRinv);
  TensorRef low = ops::tril(X, -1);
  TensorRef Omega = ops::sub(low, mT(low));
  TensorRef dR = ops::matmul(ops::sub(X, Omega), R);
  TensorRef dQ = ops::add(ops::matmul(Q, Omega), ops::sub(AtRinv, ops::matmul(Q, X)));
  return {dQ, dR};
}

}  // namespace tessera::autograd::formulas

namespace tessera::autograd::formulas {
namespace {
// x @ w^T (+ b), and its tangent by the product rule; undefined biases and tangents drop out.
TensorRef affine(const TensorRef& x, const TensorRef& w, const TensorRef& b) {
  TensorRef y = ops::matmul(x, ops::transpose(w, 0, 1));
  return b.defined() ? ops::add(y, b) : y;
}
TensorRef affine_t(const TensorRef& x, const TensorRef& x_t, const TensorRef& w, const TensorRef& w_t,
                   const TensorRef& b_t) {
  TensorRef y = ops::matmul(x_t, ops::transpose(w, 0, 1));
  if (w_t.defined()) y = ops::add(y, ops::matmul(x, ops::transpose(w_t, 0, 1)));
  return b_t.defined() ? ops::add(y, b_t) : y;
}
TensorRef gate(const TensorRef& t, int64_t k, int64_t H) { return ops::narrow(t, -1, k * H, H); }
TensorRef one_minus(const TensorRef& t) { return ops::add(ops::neg(t), Scalar(1.0)); }
TensorRef sigmoid_t(const TensorRef& s, const TensorRef& pre_t) {  // s' = s (1 - s)
  return ops::mul(ops::mul(s, one_minus(s)), pre_t);
}
TensorRef tanh_t(const TensorRef& y, const TensorRef& pre_t) {  // tanh' = 1 - tanh^2
  return ops::mul(one_minus(ops::mul(y, y)), pre_t);
}
}  // namespace

std::vector<TensorRef> rnn_layer_jvp(const TensorRef& input, const TensorRef& weight_ih, const TensorRef& weight_hh,
                                     const TensorRef& bias_ih, const TensorRef& bias_hh, const TensorRef& hx,
                                     const TensorRef& cx, const TensorRef& input_t, const TensorRef& weight_ih_t,
                                     const TensorRef& weight_hh_t, const TensorRef& bias_ih_t,
                                     const TensorRef& bias_hh_t, const TensorRef& hx_t, const TensorRef& cx_t,
                                     int64_t mode, bool reverse) {
  // The fused layer's recurrence replayed step by step on primal values (the same formulas as the
  // CPU kernel and PyTorch's cells), carrying each step's tangent by the chain rule. Modes:
  // 0 tanh, 1 relu, 2 LSTM (gates i, f, g, o), 3 GRU (r, z, n; n's hidden part inside r *).
  const int64_t T = input.size(0), H = hx.size(1);
  TensorRef xp = affine(input, weight_ih, bias_ih);
  TensorRef xp_t = affine_t(input, input_t, weight_ih, weight_ih_t, bias_ih_t);
  TensorRef h = hx, h_t = hx_t, c = cx, c_t = cx_t;
  if (mode == 2 && !c_t.defined()) c_t = zeros_like(cx);
  std::vector<TensorRef> outs_t(static_cast<size_t>(T));
  for (int64_t s = 0; s < T; ++s) {
    const int64_t t = reverse ? T - 1 - s : s;
    TensorRef x_step = ops::select(xp, 0, t), x_step_t = ops::select(xp_t, 0, t);
    TensorRef hh = affine(h, weight_hh, bias_hh), hh_t = affine_t(h, h_t, weight_hh, weight_hh_t, bias_hh_t);
    if (mode == 0 || mode == 1) {
      TensorRef pre = ops::add(x_step, hh), pre_t = ops::add(x_step_t, hh_t);
      h = mode == 0 ? ops::tanh(pre) : ops::relu(pre);
      h_t = mode == 0 ? tanh_t(h, pre_t) : ops::mul(pre_t, ops::gt(pre, Scalar(0.0)));
    } else if (mode == 2) {
      TensorRef pre = ops::add(x_step, hh), pre_t = ops::add(x_step_t, hh_t);
      TensorRef i = ops::sigmoid(gate(pre, 0, H)), f = ops::sigmoid(gate(pre, 1, H));
      TensorRef g = ops::tanh(gate(pre, 2, H)), o = ops::sigmoid(gate(pre, 3, H));
      TensorRef i_t = sigmoid_t(i, gate(pre_t, 0, H)), f_t = sigmoid_t(f, gate(pre_t, 1, H));
      TensorRef g_t = tanh_t(g, gate(pre_t, 2, H)), o_t = sigmoid_t(o, gate(pre_t, 3, H));
      c_t = ops::add(ops::add(ops::mul(f_t, c), ops::mul(f, c_t)), ops::add(ops::mul(i_t, g), ops::mul(i, g_t)));
      c = ops::add(ops::mul(f, c), ops::mul(i, g));
      TensorRef tc = ops::tanh(c);
      h_t = ops::add(ops::mul(o_t, tc), ops::mul(o, tanh_t(tc, c_t)));
      h = ops::mul(o, tc);
    } else {
      TensorRef r = ops::sigmoid(ops::add(gate(x_step, 0, H), gate(hh, 0, H)));
      TensorRef z = ops::sigmoid(ops::add(gate(x_step, 1, H), gate(hh, 1, H)));
      TensorRef r_t = sigmoid_t(r, ops::add(gate(x_step_t, 0, H), gate(hh_t, 0, H)));
      TensorRef z_t = sigmoid_t(z, ops::add(gate(x_step_t, 1, H), gate(hh_t, 1, H)));
      TensorRef hn = gate(hh, 2, H), hn_t = gate(hh_t, 2, H);
      TensorRef n = ops::tanh(ops::add(gate(x_step, 2, H), ops::mul(r, hn)));
      TensorRef n_t = tanh_t(n, ops::add(gate(x_step_t, 2, H), ops::add(ops::mul(r_t, hn), ops::mul(r, hn_t))));
      // h' = (1 - z) n + z h = n + z (h - n)
      h_t = ops::add(ops::add(n_t, ops::mul(z_t, ops::sub(h, n))), ops::mul(z, ops::sub(h_t, n_t)));
      h = ops::add(n, ops::mul(z, ops::sub(h, n)));
    }
    outs_t[size_t(t)] = h_t;
  }
  TensorRef out_t = T > 0 ? ops::stack(outs_t, 0) : zeros_like(ops::narrow(xp, -1, 0, H));
  return {out_t, h_t, mode == 2 ? c_t : TensorRef(), TensorRef()};
}

}  // namespace tessera::autograd::formulas

// Linear-algebra composites over mm / bmm / matmul and element-wise products.
#include "composite.h"

namespace tessera::composites {
namespace {

void require_dim(const char* op, const char* what, const TensorRef& t, int64_t dim) {
  if (t.dim() != dim) fail(TS_ERROR_VALUE, op, ": expected ", what, " to be ", dim, "-D, but got ", t.dim(), "-D");
}
void require_same_dtype(const char* op, const TensorRef& a, const TensorRef& b) {
  if (a.dtype() != b.dtype())
    fail(TS_ERROR_TYPE, op, ": expected both vectors to have same dtype, but found ", sdk::dtype_name(a.dtype()),
         " and ", sdk::dtype_name(b.dtype()));
}

// beta * self + alpha * product, where beta == 0 ignores self (NaNs in it included), as PyTorch.
TensorRef scaled_sum(const TensorRef& self, const TensorRef& product, const sdk::ScalarArg& beta, const sdk::ScalarArg& alpha) {
  TensorRef p = alpha.to_double() == 1.0 ? product : ops::mul(product, Scalar(alpha));
  if (beta.to_double() == 0.0) return ops::add(ops::mul(ops::expand(self, shape_of(p)), Scalar(0)), p);
  if (beta.to_double() == 1.0) return ops::add(self, p);
  return ops::add(ops::mul(self, Scalar(beta)), p);
}

void outer(Args& a) {
  TensorRef x = a.tensor(0), y = a.tensor(1);
  require_dim("outer", "self", x, 1);
  require_dim("outer", "vec2", y, 1);
  a.return_tensor(ops::mul(ops::unsqueeze(x, 1), ops::unsqueeze(y, 0)));
}

void dot_impl(Args& a, const char* op) {
  TensorRef x = a.tensor(0), y = a.tensor(1);
  if (x.dim() != 1 || y.dim() != 1)
    fail(TS_ERROR_VALUE, op, ": 1D tensors expected, but got ", x.dim(), "D and ", y.dim(), "D tensors");
  require_same_dtype(op, x, y);
  if (x.numel() != y.numel())
    fail(TS_ERROR_VALUE, op, ": inconsistent tensor size, expected tensor [", x.numel(), "] and src [", y.numel(),
         "] to have the same number of elements, but got ", x.numel(), " and ", y.numel(), " elements respectively");
  a.return_tensor(ops::sum(ops::mul(x, y)));
}
void dot(Args& a) { dot_impl(a, "dot"); }
void vdot(Args& a) { dot_impl(a, "vdot"); }  // real dtypes: conj is the identity

void mv(Args& a) {
  TensorRef m = a.tensor(0), v = a.tensor(1);
  require_dim("mv", "self", m, 2);
  require_dim("mv", "vec", v, 1);
  a.return_tensor(ops::matmul(m, v));
}

void addmv(Args& a) {
  TensorRef m = a.tensor(1), v = a.tensor(2);
  require_dim("addmv", "mat", m, 2);
  require_dim("addmv", "vec", v, 1);
  a.return_tensor(scaled_sum(a.tensor(0), ops::matmul(m, v), a.scalar(3), a.scalar(4)));
}

void addr(Args& a) {
  TensorRef x = a.tensor(1), y = a.tensor(2);
  require_dim("addr", "vec1", x, 1);
  require_dim("addr", "vec2", y, 1);
  a.return_tensor(scaled_sum(a.tensor(0), ops::mul(ops::unsqueeze(x, 1), ops::unsqueeze(y, 0)), a.scalar(3), a.scalar(4)));
}

void baddbmm(Args& a) {
  a.return_tensor(scaled_sum(a.tensor(0), ops::bmm(a.tensor(1), a.tensor(2)), a.scalar(3), a.scalar(4)));
}

void addbmm(Args& a) {
  TensorRef product = ops::sum(ops::bmm(a.tensor(1), a.tensor(2)), IntList{0}, false);
  a.return_tensor(scaled_sum(a.tensor(0), product, a.scalar(3), a.scalar(4)));
}

// Free dims of self, then of other; the contracted pairs as one matrix product.
void tensordot(Args& a) {
  TensorRef x = a.tensor(0), y = a.tensor(1);
  auto dx = a.int_list(2), dy = a.int_list(3);
  if (dx.size() != dy.size())
    fail(TS_ERROR_VALUE, "tensordot: both dimension lists should have same length, got ", dx.size(), " and ", dy.size());
  std::vector<bool> cx(static_cast<size_t>(x.dim())), cy(static_cast<size_t>(y.dim()));
  IntList px_contract, py_contract;
  int64_t k = 1;
  for (size_t i = 0; i < dx.size(); ++i) {
    int64_t p = wrap_dim("tensordot", dx[i], x.dim()), q = wrap_dim("tensordot", dy[i], y.dim());
    if (x.size(p) != y.size(q))
      fail(TS_ERROR_VALUE, "tensordot: contracted dimensions need to match, but first has size ", x.size(p), " in dim ",
           dx[i], " and second has size ", y.size(q), " in dim ", dy[i]);
    cx[size_t(p)] = cy[size_t(q)] = true;
    px_contract.push_back(p);
    py_contract.push_back(q);
    k *= x.size(p);
  }
  IntList px, py, shape;
  int64_t m = 1, n = 1;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (!cx[size_t(d)]) {
      px.push_back(d);
      shape.push_back(x.size(d));
      m *= x.size(d);
    }
  for (int64_t d = 0; d < y.dim(); ++d)
    if (!cy[size_t(d)]) {
      py.push_back(d);
      shape.push_back(y.size(d));
      n *= y.size(d);
    }
  px.insert(px.end(), px_contract.begin(), px_contract.end());
  py_contract.insert(py_contract.end(), py.begin(), py.end());
  TensorRef lhs = ops::reshape(ops::permute(x, px), {m, k});
  TensorRef rhs = ops::reshape(ops::permute(y, py_contract), {k, n});
  a.return_tensor(ops::reshape(ops::mm(lhs, rhs), shape));
}

// kron: a viewed as [a0, 1, a1, 1, ...] times b viewed as [1, b0, 1, b1, ...], flattened pairwise.
void kron(Args& a) {
  TensorRef x = a.tensor(0), y = a.tensor(1);
  int64_t n = std::max(x.dim(), y.dim());
  IntList xs(size_t(n - x.dim()), 1), ys(size_t(n - y.dim()), 1);
  for (int64_t s : x.sizes()) xs.push_back(s);
  for (int64_t s : y.sizes()) ys.push_back(s);
  IntList xv, yv, result;
  for (size_t i = 0; i < size_t(n); ++i) {
    xv.insert(xv.end(), {xs[i], 1});
    yv.insert(yv.end(), {1, ys[i]});
    result.push_back(xs[i] * ys[i]);
  }
  a.return_tensor(ops::reshape(ops::mul(ops::reshape(x, xv), ops::reshape(y, yv)), result));
}

void linalg_cross(Args& a) {
  TensorRef x = a.tensor(0), y = a.tensor(1);
  if (x.dim() != y.dim())
    fail(TS_ERROR_VALUE, "linalg.cross: inputs must have the same number of dimensions, got ", x.dim(), " and ", y.dim());
  int64_t d = wrap_dim("linalg.cross", a.to_int(2), x.dim());
  if (x.size(d) != 3 || y.size(d) != 3)
    fail(TS_ERROR_VALUE, "linalg.cross: inputs dimension ", a.to_int(2), " must have length 3. Got ", x.size(d), " and ", y.size(d));
  auto c = [&](const TensorRef& t, int64_t i) { return ops::narrow(t, d, i, 1); };
  auto term = [&](int64_t i, int64_t j) { return ops::sub(ops::mul(c(x, i), c(y, j)), ops::mul(c(x, j), c(y, i))); };
  a.return_tensor(ops::cat({term(1, 2), term(2, 0), term(0, 1)}, d));
}

// cdist: the p-norm distance of every row of x1 to every row of x2 ([..., P, M], [..., R, M] -> [..., P, R]).
void cdist(Args& a) {
  TensorRef x1 = a.tensor(0), x2 = a.tensor(1);
  double p = a.to_double(2);
  if (x1.dim() < 2 || x2.dim() < 2) fail(TS_ERROR_VALUE, "cdist only supports at least 2D tensors, X1 got: ", x1.dim(), "D, X2 got: ", x2.dim(), "D");
  if (x1.size(x1.dim() - 1) != x2.size(x2.dim() - 1))
    fail(TS_ERROR_VALUE, "X1 and X2 must have the same number of columns. X1: ", x1.size(x1.dim() - 1), " X2: ", x2.size(x2.dim() - 1));
  if (p < 0) fail(TS_ERROR_VALUE, "cdist only supports non-negative p values, got ", p);
  if (!sdk::is_floating(x1.dtype())) fail(TS_ERROR_TYPE, "cdist only supports floating-point dtypes, X1 got: ", sdk::dtype_name(x1.dtype()));
  TensorRef diff = ops::sub(ops::unsqueeze(x1, -2), ops::unsqueeze(x2, -3));  // [..., P, R, M]
  a.return_tensor(ops::linalg_vector_norm(diff, Scalar(p), IntList{-1}, false));
}

}  // namespace

void register_linalg(sdk::Registrar& reg) {
  composite(reg, "outer", outer);
  composite(reg, "dot", dot);
  composite(reg, "vdot", vdot);
  composite(reg, "mv", mv);
  composite(reg, "addmv", addmv, false, true);
  composite(reg, "addr", addr, false, true);
  composite(reg, "baddbmm", baddbmm, false, true);
  composite(reg, "addbmm", addbmm, false, true);
  composite(reg, "tensordot", tensordot);
  composite(reg, "kron", kron);
  composite(reg, "linalg_cross", linalg_cross);
  composite(reg, "cdist", cdist);
}

}  // namespace tessera::composites

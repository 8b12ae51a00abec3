// torch.linalg's factorizations through LAPACKE (row-major): LU (getrf / getrs), Cholesky
// (potrf), QR (geqrf / orgqr), the symmetric eigendecomposition (syevd), the general one
// (geev), the SVD (gesdd) and the symmetric indefinite LDL^T (sytrf / sytrs, column-major as
// torch calls them). Each works on the last two dims of a float32 / float64 tensor (LU and the
// general eigendecomposition also complex64 / complex128), one matrix at a time (LAPACK
// overwrites its input, so every matrix is copied to a contiguous buffer first), matrices in
// parallel. The solvers built on these (inv, solve, det, ...) are composites (composites/src).
#include "kernels.h"
#include "strided.h"

#include <tessera/sdk/ops.h>

#include <complex>
// LAPACKE's complex arguments as std::complex (the layout of Tessera's complex64 / complex128);
// lapack.h's documented override (Debian's lapacke_config.h does not honour LAPACK_COMPLEX_CPP).
#define lapack_complex_float std::complex<float>
#define lapack_complex_double std::complex<double>
#include <lapacke.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace tessera::cpu {
namespace {

using sdk::fail;
namespace ops = sdk::ops;
using Shape = std::vector<int64_t>;
using sdk::TensorRef;

// ---- float / double entry points of the LAPACKE routines used here
lapack_int getrf(int m, int n, float* a, lapack_int* p) { return LAPACKE_sgetrf(LAPACK_ROW_MAJOR, m, n, a, n, p); }
lapack_int getrf(int m, int n, double* a, lapack_int* p) { return LAPACKE_dgetrf(LAPACK_ROW_MAJOR, m, n, a, n, p); }
lapack_int getrs(char t, int n, int k, const float* a, const lapack_int* p, float* b) {
  return LAPACKE_sgetrs(LAPACK_ROW_MAJOR, t, n, k, a, n, p, b, k);
}
lapack_int getrs(char t, int n, int k, const double* a, const lapack_int* p, double* b) {
  return LAPACKE_dgetrs(LAPACK_ROW_MAJOR, t, n, k, a, n, p, b, k);
}
using cfloat = std::complex<float>;
using cdouble = std::complex<double>;
lapack_int getrf(int m, int n, cfloat* a, lapack_int* p) { return LAPACKE_cgetrf(LAPACK_ROW_MAJOR, m, n, a, n, p); }
lapack_int getrf(int m, int n, cdouble* a, lapack_int* p) { return LAPACKE_zgetrf(LAPACK_ROW_MAJOR, m, n, a, n, p); }
lapack_int getrs(char t, int n, int k, const cfloat* a, const lapack_int* p, cfloat* b) {
  return LAPACKE_cgetrs(LAPACK_ROW_MAJOR, t, n, k, a, n, p, b, k);
}
lapack_int getrs(char t, int n, int k, const cdouble* a, const lapack_int* p, cdouble* b) {
  return LAPACKE_zgetrs(LAPACK_ROW_MAJOR, t, n, k, a, n, p, b, k);
}
// The general eigendecomposition, right eigenvectors only: real input gives eigenvalues as
// (wr, wi) and conjugate pairs of vectors packed in two real columns; complex input gives them whole.
lapack_int geev(int n, float* a, float* wr, float* wi, float* vr) {
  return LAPACKE_sgeev(LAPACK_ROW_MAJOR, 'N', 'V', n, a, n, wr, wi, nullptr, n, vr, n);
}
lapack_int geev(int n, double* a, double* wr, double* wi, double* vr) {
  return LAPACKE_dgeev(LAPACK_ROW_MAJOR, 'N', 'V', n, a, n, wr, wi, nullptr, n, vr, n);
}
lapack_int geev(int n, cfloat* a, cfloat* w, cfloat* vr) {
  return LAPACKE_cgeev(LAPACK_ROW_MAJOR, 'N', 'V', n, a, n, w, nullptr, n, vr, n);
}
lapack_int geev(int n, cdouble* a, cdouble* w, cdouble* vr) {
  return LAPACKE_zgeev(LAPACK_ROW_MAJOR, 'N', 'V', n, a, n, w, nullptr, n, vr, n);
}
lapack_int potrf(char uplo, int n, float* a) { return LAPACKE_spotrf(LAPACK_ROW_MAJOR, uplo, n, a, n); }
lapack_int potrf(char uplo, int n, double* a) { return LAPACKE_dpotrf(LAPACK_ROW_MAJOR, uplo, n, a, n); }
lapack_int geqrf(int m, int n, float* a, int lda, float* tau) { return LAPACKE_sgeqrf(LAPACK_ROW_MAJOR, m, n, a, lda, tau); }
lapack_int geqrf(int m, int n, double* a, int lda, double* tau) { return LAPACKE_dgeqrf(LAPACK_ROW_MAJOR, m, n, a, lda, tau); }
lapack_int orgqr(int m, int n, int k, float* a, int lda, const float* tau) {
  return LAPACKE_sorgqr(LAPACK_ROW_MAJOR, m, n, k, a, lda, tau);
}
lapack_int orgqr(int m, int n, int k, double* a, int lda, const double* tau) {
  return LAPACKE_dorgqr(LAPACK_ROW_MAJOR, m, n, k, a, lda, tau);
}
lapack_int syevd(char uplo, int n, float* a, float* w) { return LAPACKE_ssyevd(LAPACK_ROW_MAJOR, 'V', uplo, n, a, n, w); }
lapack_int syevd(char uplo, int n, double* a, double* w) { return LAPACKE_dsyevd(LAPACK_ROW_MAJOR, 'V', uplo, n, a, n, w); }
// The symmetric indefinite factorization (Bunch-Kaufman) in LAPACK's own column-major layout, lower
// triangle, as torch calls it: its pivots are LAPACK's (1-based, negative for 2x2 blocks).
lapack_int sytrf(int n, float* a, lapack_int* p) { return LAPACKE_ssytrf(LAPACK_COL_MAJOR, 'L', n, a, n, p); }
lapack_int sytrf(int n, double* a, lapack_int* p) { return LAPACKE_dsytrf(LAPACK_COL_MAJOR, 'L', n, a, n, p); }
lapack_int sytrs(int n, int k, const float* a, const lapack_int* p, float* b) {
  return LAPACKE_ssytrs(LAPACK_COL_MAJOR, 'L', n, k, a, n, p, b, n);
}
lapack_int sytrs(int n, int k, const double* a, const lapack_int* p, double* b) {
  return LAPACKE_dsytrs(LAPACK_COL_MAJOR, 'L', n, k, a, n, p, b, n);
}
lapack_int gesdd(char job, int m, int n, float* a, float* s, float* u, int ldu, float* vt, int ldvt) {
  return LAPACKE_sgesdd(LAPACK_ROW_MAJOR, job, m, n, a, n, s, u, ldu, vt, ldvt);
}
lapack_int gesdd(char job, int m, int n, double* a, double* s, double* u, int ldu, double* vt, int ldvt) {
  return LAPACKE_dgesdd(LAPACK_ROW_MAJOR, job, m, n, a, n, s, u, ldu, vt, ldvt);
}

// The matrices of a [..., m, n] tensor: a contiguous copy and its geometry.
struct Batch {
  TensorRef t;  // contiguous
  Shape batch;  // the leading dims
  int64_t count = 1, m = 0, n = 0;
};

bool is_complex_dtype(int32_t dtype) { return dtype == TS_COMPLEX64 || dtype == TS_COMPLEX128; }

Batch matrices(const char* op, const TensorRef& a, bool square = false, bool complex_ok = false) {
  if (a.dim() < 2) fail(TS_ERROR_VALUE, op, ": The input tensor A must have at least 2 dimensions.");
  if (a.dtype() != TS_FLOAT32 && a.dtype() != TS_FLOAT64 && !(complex_ok && is_complex_dtype(a.dtype())))
    fail(TS_ERROR_TYPE, op, ": Expected a floating point", complex_ok ? " or complex" : "", " tensor (float32 or float64",
         complex_ok ? ", complex64 or complex128" : "", "), got ", sdk::dtype_name(a.dtype()));
  Batch b;
  b.m = a.size(a.dim() - 2);
  b.n = a.size(a.dim() - 1);
  if (square && b.m != b.n)
    fail(TS_ERROR_VALUE, op, ": A must be batches of square matrices, but they are ", b.m, " by ", b.n, " matrices");
  b.batch.assign(a.sizes().begin(), a.sizes().end() - 2);
  for (int64_t s : b.batch) b.count *= s;
  b.t = ops::contiguous(a);
  return b;
}

Shape with(Shape s, std::initializer_list<int64_t> tail) {
  s.insert(s.end(), tail.begin(), tail.end());
  return s;
}

TensorRef new_tensor(sdk::Args& a, const Shape& shape, int32_t dtype) { return sdk::empty(a.call(), shape, dtype, kCpuDevice); }

int threads_for_matrices(const Batch& b) { return strided::threads_for(b.count * b.m * b.n * std::min(b.m, b.n)); }

// linalg_lu_factor_ex(Tensor A, *, bool pivot=True, bool check_errors=False) -> (LU, pivots, info)
template <class T>
void lu_factor(const Batch& b, TensorRef& lu, TensorRef& piv, TensorRef& info) {
  const int64_t k = std::min(b.m, b.n);
  std::memcpy(lu.data(), b.t.data(), size_t(b.t.numel() * b.t.itemsize()));
#pragma omp parallel for num_threads(threads_for_matrices(b)) schedule(static)
  for (int64_t i = 0; i < b.count; ++i) {
    std::vector<lapack_int> p(static_cast<size_t>(std::max<int64_t>(k, 1)));
    lapack_int r = getrf(int(b.m), int(b.n), lu.data<T>() + i * b.m * b.n, p.data());
    for (int64_t j = 0; j < k; ++j) piv.data<int32_t>()[i * k + j] = int32_t(p[size_t(j)]);
    info.data<int32_t>()[i] = int32_t(r);
  }
}

void lu_factor_k(sdk::Args& a) {
  Batch b = matrices("linalg.lu_factor", a.tensor(0), false, true);
  if (!a.to_bool(1)) fail(TS_ERROR_NOT_IMPLEMENTED, "linalg.lu_factor: LU without pivoting is not implemented on the CPU");
  bool check = a.to_bool(2);
  TensorRef lu = new_tensor(a, with(b.batch, {b.m, b.n}), b.t.dtype());
  TensorRef piv = new_tensor(a, with(b.batch, {std::min(b.m, b.n)}), TS_INT32);
  TensorRef info = new_tensor(a, b.batch, TS_INT32);
  if (b.t.numel() > 0) {
    switch (b.t.dtype()) {
      case TS_FLOAT32: lu_factor<float>(b, lu, piv, info); break;
      case TS_FLOAT64: lu_factor<double>(b, lu, piv, info); break;
      case TS_COMPLEX64: lu_factor<cfloat>(b, lu, piv, info); break;
      default: lu_factor<cdouble>(b, lu, piv, info);
    }
  } else {
    std::fill_n(info.data<int32_t>(), info.numel(), 0);
  }
  if (check)
    for (int64_t i = 0; i < info.numel(); ++i)
      if (int32_t r = info.data<int32_t>()[i]; r > 0)
        fail(TS_ERROR_VALUE, "linalg.lu_factor_ex: U[", r, ",", r, "] is zero: the matrix is singular (LAPACK getrf info = ", r, ")");
  a.returns({sdk::Args::tensor_value(std::move(lu)), sdk::Args::tensor_value(std::move(piv)),
             sdk::Args::tensor_value(std::move(info))});
}

// linalg_lu_solve(Tensor LU, Tensor pivots, Tensor B, *, bool left=True, bool adjoint=False)
void lu_solve_k(sdk::Args& a) {
  Batch lu = matrices("linalg.lu_solve", a.tensor(0), true, true);
  TensorRef piv = ops::contiguous(ops::to(a.tensor(1), int32_t(TS_INT32)));
  TensorRef b_in = a.tensor(2);
  if (!a.to_bool(3)) fail(TS_ERROR_NOT_IMPLEMENTED, "linalg.lu_solve: left=False is not implemented; solve the transposed system");
  bool adjoint = a.to_bool(4);
  Batch rhs = matrices("linalg.lu_solve", b_in, false, true);
  if (rhs.batch != lu.batch || rhs.m != lu.n)
    fail(TS_ERROR_VALUE, "linalg.lu_solve: expected B of shape [..., ", lu.n, ", k] with LU's batch dims, got ",
         sdk::shape_text(b_in.sizes()));
  if (b_in.dtype() != lu.t.dtype()) fail(TS_ERROR_TYPE, "linalg.lu_solve: LU and B must have the same dtype");
  TensorRef x = new_tensor(a, Shape(rhs.t.sizes().begin(), rhs.t.sizes().end()), rhs.t.dtype());
  std::memcpy(x.data(), rhs.t.data(), size_t(rhs.t.numel() * rhs.t.itemsize()));
  const int64_t n = lu.n, k = rhs.n;
  if (x.numel() > 0) {
    auto run = [&](auto tag) {
      using T = decltype(tag);
#pragma omp parallel for num_threads(threads_for_matrices(rhs)) schedule(static)
      for (int64_t i = 0; i < lu.count; ++i) {
        std::vector<lapack_int> p(static_cast<size_t>(n));
        for (int64_t j = 0; j < n; ++j) p[size_t(j)] = piv.data<int32_t>()[i * n + j];
        // the adjoint of a complex matrix is its conjugate transpose
        getrs(adjoint ? (is_complex_dtype(x.dtype()) ? 'C' : 'T') : 'N', int(n), int(k), lu.t.data<T>() + i * n * n,
              p.data(), x.data<T>() + i * n * k);
      }
    };
    switch (x.dtype()) {
      case TS_FLOAT32: run(float{}); break;
      case TS_FLOAT64: run(double{}); break;
      case TS_COMPLEX64: run(cfloat{}); break;
      default: run(cdouble{});
    }
  }
  a.return_tensor(std::move(x));
}

// linalg_cholesky_ex(Tensor self, *, bool upper=False, bool check_errors=False) -> (L, info)
template <class T>
void cholesky(const Batch& b, TensorRef& out, TensorRef& info, bool upper) {
  const int64_t n = b.n;
  std::memcpy(out.data(), b.t.data(), size_t(b.t.numel() * b.t.itemsize()));
#pragma omp parallel for num_threads(threads_for_matrices(b)) schedule(static)
  for (int64_t i = 0; i < b.count; ++i) {
    T* m = out.data<T>() + i * n * n;
    info.data<int32_t>()[i] = int32_t(potrf(upper ? 'U' : 'L', int(n), m));
    for (int64_t r = 0; r < n; ++r)  // LAPACK leaves the other triangle as it was: zero it
      for (int64_t c = 0; c < n; ++c)
        if (upper ? c < r : c > r) m[r * n + c] = T(0);
  }
}

void cholesky_k(sdk::Args& a) {
  Batch b = matrices("linalg.cholesky", a.tensor(0), true);
  bool upper = a.to_bool(1), check = a.to_bool(2);
  TensorRef out = new_tensor(a, with(b.batch, {b.n, b.n}), b.t.dtype());
  TensorRef info = new_tensor(a, b.batch, TS_INT32);
  std::fill_n(info.data<int32_t>(), info.numel(), 0);
  if (b.t.numel() > 0) {
    if (b.t.dtype() == TS_FLOAT32) cholesky<float>(b, out, info, upper);
    else cholesky<double>(b, out, info, upper);
  }
  if (check)
    for (int64_t i = 0; i < info.numel(); ++i)
      if (int32_t r = info.data<int32_t>()[i]; r > 0)
        fail(TS_ERROR_VALUE, "linalg.cholesky_ex: The factorization could not be completed because the input is not "
             "positive-definite (the leading minor of order ", r, " is not positive-definite).");
  a.returns({sdk::Args::tensor_value(std::move(out)), sdk::Args::tensor_value(std::move(info))});
}

// linalg_qr(Tensor A, str mode='reduced') -> (Q, R): 'reduced' (Q m x k), 'complete' (Q m x m), 'r' (no Q)
void qr_k(sdk::Args& a) {
  Batch b = matrices("linalg.qr", a.tensor(0));
  std::string mode(*a.optional_str(1));
  if (mode != "reduced" && mode != "complete" && mode != "r")
    fail(TS_ERROR_VALUE, "linalg.qr: qr received unrecognized mode '", mode, "' but expected one of 'reduced' (default), 'r', or 'complete'");
  const int64_t m = b.m, n = b.n, k = std::min(m, n), qcols = mode == "complete" ? m : k, rrows = mode == "complete" ? m : k;
  TensorRef q = new_tensor(a, mode == "r" ? Shape{0} : with(b.batch, {m, qcols}), b.t.dtype());
  TensorRef r = new_tensor(a, with(b.batch, {rrows, n}), b.t.dtype());
  auto run = [&](auto tag) {
    using T = decltype(tag);
#pragma omp parallel for num_threads(threads_for_matrices(b)) schedule(static)
    for (int64_t i = 0; i < b.count; ++i) {
      const int64_t w = std::max(n, qcols);  // a buffer wide enough for Q's columns
      std::vector<T> work(static_cast<size_t>(m * w), T(0)), tau(static_cast<size_t>(std::max<int64_t>(k, 1)));
      const T* src = b.t.data<T>() + i * m * n;
      for (int64_t row = 0; row < m; ++row) std::copy_n(src + row * n, n, work.data() + row * w);
      geqrf(int(m), int(n), work.data(), int(w), tau.data());
      T* rp = r.data<T>() + i * rrows * n;
      for (int64_t row = 0; row < rrows; ++row)
        for (int64_t c = 0; c < n; ++c) rp[row * n + c] = (c >= row && row < m) ? work[size_t(row * w + c)] : T(0);
      if (mode == "r") continue;
      if (k > 0) orgqr(int(m), int(qcols), int(k), work.data(), int(w), tau.data());
      T* qp = q.data<T>() + i * m * qcols;
      for (int64_t row = 0; row < m; ++row) std::copy_n(work.data() + row * w, qcols, qp + row * qcols);
    }
  };
  if (b.t.numel() > 0) {
    if (b.t.dtype() == TS_FLOAT32) run(float{});
    else run(double{});
  } else {  // an empty matrix: R is zero, Q the identity's leading columns
    if (r.numel()) ops::fill_(r, sdk::Scalar(0));
    if (mode != "r" && q.numel()) ops::copy_(q, ops::expand(ops::eye(m, qcols, q.dtype(), q.device()), with(b.batch, {m, qcols})));
  }
  a.returns({sdk::Args::tensor_value(std::move(q)), sdk::Args::tensor_value(std::move(r))});
}

// linalg_ldl_factor_ex(Tensor self, *, bool hermitian=False, bool check_errors=False) -> (LD, pivots, info):
// A = L D L^T from A's lower triangle; LD holds L below the diagonal and D (1x1 and 2x2 blocks)
// on and next to it, zeros above; real inputs, so hermitian changes nothing.
void ldl_factor_k(sdk::Args& a) {
  Batch b = matrices("linalg.ldl_factor_ex", a.tensor(0), true);
  const bool check = a.to_bool(2);
  const int64_t n = b.n;
  TensorRef ld = new_tensor(a, with(b.batch, {n, n}), b.t.dtype());
  TensorRef piv = new_tensor(a, with(b.batch, {n}), TS_INT32);
  TensorRef info = new_tensor(a, b.batch, TS_INT32);
  auto run = [&](auto tag) {
    using T = decltype(tag);
#pragma omp parallel for num_threads(threads_for_matrices(b)) schedule(static)
    for (int64_t i = 0; i < b.count; ++i) {
      std::vector<T> work(static_cast<size_t>(n * n));
      strided::transpose(work.data(), b.t.data<T>() + i * n * n, n, n, n);  // to LAPACK's column-major
      std::vector<lapack_int> p(static_cast<size_t>(std::max<int64_t>(n, 1)));
      info.data<int32_t>()[i] = int32_t(sytrf(int(n), work.data(), p.data()));
      T* out = ld.data<T>() + i * n * n;
      strided::transpose(out, work.data(), n, n, n);
      for (int64_t r = 0; r < n; ++r)  // LAPACK leaves the upper triangle as it was: zero it
        for (int64_t c = r + 1; c < n; ++c) out[r * n + c] = T(0);
      for (int64_t j = 0; j < n; ++j) piv.data<int32_t>()[i * n + j] = int32_t(p[size_t(j)]);
    }
  };
  if (b.count > 0 && n > 0) {
    if (b.t.dtype() == TS_FLOAT32) run(float{});
    else run(double{});
  } else {
    std::fill_n(info.data<int32_t>(), info.numel(), 0);
  }
  if (check)
    for (int64_t i = 0; i < info.numel(); ++i)
      if (int32_t r = info.data<int32_t>()[i]; r > 0)
        fail(TS_ERROR_VALUE, "linalg.ldl_factor_ex: the factorization could not be completed: D[", r - 1, ",", r - 1,
             "] is exactly zero, so the matrix is singular (LAPACK sytrf info = ", r, ")");
  a.returns({sdk::Args::tensor_value(std::move(ld)), sdk::Args::tensor_value(std::move(piv)),
             sdk::Args::tensor_value(std::move(info))});
}

// linalg_ldl_solve(Tensor LD, Tensor pivots, Tensor B, *, bool hermitian=False) -> X with A X = B.
void ldl_solve_k(sdk::Args& a) {
  Batch ld = matrices("linalg.ldl_solve", a.tensor(0), true);
  const TensorRef piv = ops::contiguous(a.tensor(1));
  const TensorRef b_in = a.tensor(2);
  if (piv.dtype() != TS_INT32)
    fail(TS_ERROR_TYPE, "linalg.ldl_solve: expected pivots of dtype int32, got ", sdk::dtype_name(piv.dtype()));
  Batch rhs = matrices("linalg.ldl_solve", b_in);
  if (rhs.m != ld.n)
    fail(TS_ERROR_VALUE, "linalg.ldl_solve: incompatible matrix sizes: each A matrix is ", ld.n, " by ", ld.n,
         " but each B matrix is ", rhs.m, " by ", rhs.n);
  if (rhs.batch != ld.batch || piv.sizes().size() != ld.batch.size() + 1 || piv.size(piv.dim() - 1) != ld.n)
    fail(TS_ERROR_VALUE, "linalg.ldl_solve: expected LD [..., n, n], pivots [..., n] and B [..., n, k] with the "
         "same batch dims, got ", sdk::shape_text(a.tensor(0).sizes()), ", ", sdk::shape_text(piv.sizes()), " and ",
         sdk::shape_text(b_in.sizes()));
  if (b_in.dtype() != ld.t.dtype()) fail(TS_ERROR_TYPE, "linalg.ldl_solve: LD and B must have the same dtype");
  TensorRef x = new_tensor(a, Shape(rhs.t.sizes().begin(), rhs.t.sizes().end()), rhs.t.dtype());
  const int64_t n = ld.n, k = rhs.n;
  auto run = [&](auto tag) {
    using T = decltype(tag);
#pragma omp parallel for num_threads(threads_for_matrices(rhs)) schedule(static)
    for (int64_t i = 0; i < ld.count; ++i) {
      std::vector<T> factor(static_cast<size_t>(n * n)), cols(static_cast<size_t>(n * k));
      strided::transpose(factor.data(), ld.t.data<T>() + i * n * n, n, n, n);
      strided::transpose(cols.data(), rhs.t.data<T>() + i * n * k, n, k, k);
      std::vector<lapack_int> p(static_cast<size_t>(n));
      for (int64_t j = 0; j < n; ++j) p[size_t(j)] = piv.data<int32_t>()[i * n + j];
      sytrs(int(n), int(k), factor.data(), p.data(), cols.data());
      strided::transpose(x.data<T>() + i * n * k, cols.data(), k, n, n);
    }
  };
  if (x.numel() > 0) {
    if (x.dtype() == TS_FLOAT32) run(float{});
    else run(double{});
  }
  a.return_tensor(std::move(x));
}

// linalg_eigh(Tensor self, str UPLO="L") -> (eigenvalues ascending, eigenvectors as columns)
void eigh_k(sdk::Args& a) {
  Batch b = matrices("linalg.eigh", a.tensor(0), true);
  std::string_view uplo = *a.optional_str(1);
  if (uplo != "L" && uplo != "U") fail(TS_ERROR_VALUE, "linalg.eigh: Expected UPLO argument to be 'L' or 'U', but got ", uplo);
  const int64_t n = b.n;
  TensorRef w = new_tensor(a, with(b.batch, {n}), b.t.dtype());
  TensorRef v = new_tensor(a, with(b.batch, {n, n}), b.t.dtype());
  if (b.t.numel() > 0) std::memcpy(v.data(), b.t.data(), size_t(b.t.numel() * b.t.itemsize()));
  std::vector<int32_t> infos(static_cast<size_t>(b.count), 0);
  auto run = [&](auto tag) {
    using T = decltype(tag);
#pragma omp parallel for num_threads(threads_for_matrices(b)) schedule(static)
    for (int64_t i = 0; i < b.count; ++i)
      infos[size_t(i)] = int32_t(syevd(uplo[0], int(n), v.data<T>() + i * n * n, w.data<T>() + i * n));
  };
  if (b.t.numel() > 0) {
    if (b.t.dtype() == TS_FLOAT32) run(float{});
    else run(double{});
  }
  for (int32_t r : infos)
    if (r > 0) fail(TS_ERROR_VALUE, "linalg.eigh: The algorithm failed to converge because the input matrix is ill-conditioned or has too many repeated eigenvalues (error code: ", r, ").");
  a.returns({sdk::Args::tensor_value(std::move(w)), sdk::Args::tensor_value(std::move(v))});
}

// linalg_eig(Tensor self) -> (eigenvalues, eigenvectors as columns), both complex: LAPACK's order
// and normalisation (each vector of unit norm, its largest component real), as torch's.
template <class T>
int32_t eig_matrix(int64_t n, const T* in, std::complex<T>* w, std::complex<T>* v) {
  std::vector<T> a(in, in + n * n), wr(static_cast<size_t>(n)), wi(static_cast<size_t>(n)),
      vr(static_cast<size_t>(n * n));
  const lapack_int info = geev(int(n), a.data(), wr.data(), wi.data(), vr.data());
  if (info != 0) return int32_t(info);
  for (int64_t j = 0; j < n; ++j) {
    w[j] = std::complex<T>(wr[size_t(j)], wi[size_t(j)]);
    if (wi[size_t(j)] == 0) {
      for (int64_t r = 0; r < n; ++r) v[r * n + j] = std::complex<T>(vr[size_t(r * n + j)], T(0));
    } else if (j + 1 < n) {  // a conjugate pair: columns j and j + 1 hold the real and imaginary parts
      w[j + 1] = std::complex<T>(wr[size_t(j + 1)], wi[size_t(j + 1)]);
      for (int64_t r = 0; r < n; ++r) {
        const T re = vr[size_t(r * n + j)], im = vr[size_t(r * n + j + 1)];
        v[r * n + j] = std::complex<T>(re, im);
        v[r * n + j + 1] = std::complex<T>(re, -im);
      }
      ++j;
    }
  }
  return 0;
}

template <class C>
int32_t eig_matrix_complex(int64_t n, const C* in, C* w, C* v) {
  std::vector<C> a(in, in + n * n);
  return int32_t(geev(int(n), a.data(), w, v));
}

void eig_k(sdk::Args& a) {
  Batch b = matrices("linalg.eig", a.tensor(0), true, true);
  const int64_t n = b.n;
  const int32_t dtype = b.t.dtype();
  const int32_t out_dtype = dtype == TS_FLOAT32 ? TS_COMPLEX64 : dtype == TS_FLOAT64 ? TS_COMPLEX128 : dtype;
  // LAPACK returns garbage (or does not converge) on non-finite input; torch refuses it.
  auto all_finite = [&](auto tag) {
    using T = decltype(tag);  // the real type; complex elements are two of them
    const T* p = static_cast<const T*>(b.t.data());
    const int64_t count = b.t.numel() * (is_complex_dtype(dtype) ? 2 : 1);
    for (int64_t i = 0; i < count; ++i)
      if (!std::isfinite(p[i])) return false;
    return true;
  };
  if (!(dtype == TS_FLOAT32 || dtype == TS_COMPLEX64 ? all_finite(float{}) : all_finite(double{})))
    fail(TS_ERROR_VALUE, "linalg.eig: input tensor should not contain infs or NaNs.");
  TensorRef w = new_tensor(a, with(b.batch, {n}), out_dtype);
  TensorRef v = new_tensor(a, with(b.batch, {n, n}), out_dtype);
  std::vector<int32_t> infos(static_cast<size_t>(b.count), 0);
  auto run = [&](auto tag) {
    using T = decltype(tag);
#pragma omp parallel for num_threads(threads_for_matrices(b)) schedule(static)
    for (int64_t i = 0; i < b.count; ++i) {
      if constexpr (std::is_floating_point_v<T>)
        infos[size_t(i)] = eig_matrix<T>(n, b.t.data<T>() + i * n * n, w.data<std::complex<T>>() + i * n,
                                         v.data<std::complex<T>>() + i * n * n);
      else
        infos[size_t(i)] = eig_matrix_complex<T>(n, b.t.data<T>() + i * n * n, w.data<T>() + i * n,
                                                 v.data<T>() + i * n * n);
    }
  };
  if (b.t.numel() > 0) {
    switch (dtype) {
      case TS_FLOAT32: run(float{}); break;
      case TS_FLOAT64: run(double{}); break;
      case TS_COMPLEX64: run(cfloat{}); break;
      default: run(cdouble{});
    }
  }
  for (int32_t r : infos)
    if (r > 0)
      fail(TS_ERROR_VALUE, "linalg.eig: The algorithm failed to converge because the input matrix is ill-conditioned or "
           "has too many repeated eigenvalues (error code: ", r, ").");
  a.returns({sdk::Args::tensor_value(std::move(w)), sdk::Args::tensor_value(std::move(v))});
}

// linalg_svd(Tensor A, bool full_matrices=True, *, str? driver=None) -> (U, S descending, Vh)
void svd_k(sdk::Args& a) {
  Batch b = matrices("linalg.svd", a.tensor(0));
  bool full = a.to_bool(1);
  if (a.optional_str(2)) fail(TS_ERROR_VALUE, "linalg.svd: keyword argument `driver=` is only supported on CUDA inputs with cuSOLVER backend.");
  const int64_t m = b.m, n = b.n, k = std::min(m, n), ucols = full ? m : k, vrows = full ? n : k;
  TensorRef u = new_tensor(a, with(b.batch, {m, ucols}), b.t.dtype());
  TensorRef s = new_tensor(a, with(b.batch, {k}), b.t.dtype());
  TensorRef vh = new_tensor(a, with(b.batch, {vrows, n}), b.t.dtype());
  std::vector<int32_t> infos(static_cast<size_t>(b.count), 0);
  auto run = [&](auto tag) {
    using T = decltype(tag);
#pragma omp parallel for num_threads(threads_for_matrices(b)) schedule(static)
    for (int64_t i = 0; i < b.count; ++i) {
      std::vector<T> work(b.t.data<T>() + i * m * n, b.t.data<T>() + (i + 1) * m * n);
      infos[size_t(i)] = int32_t(gesdd(full ? 'A' : 'S', int(m), int(n), work.data(), s.data<T>() + i * k,
                                       u.data<T>() + i * m * ucols, int(ucols), vh.data<T>() + i * vrows * n, int(n)));
    }
  };
  if (b.t.numel() > 0) {
    if (b.t.dtype() == TS_FLOAT32) run(float{});
    else run(double{});
  } else {  // an empty matrix: identity bases, no singular values
    if (u.numel()) ops::copy_(u, ops::expand(ops::eye(m, ucols, u.dtype(), u.device()), with(b.batch, {m, ucols})));
    if (vh.numel()) ops::copy_(vh, ops::expand(ops::eye(vrows, n, vh.dtype(), vh.device()), with(b.batch, {vrows, n})));
  }
  for (int32_t r : infos)
    if (r > 0) fail(TS_ERROR_VALUE, "linalg.svd: The algorithm failed to converge because the input matrix is ill-conditioned or has too many repeated singular values (error code: ", r, ").");
  a.returns({sdk::Args::tensor_value(std::move(u)), sdk::Args::tensor_value(std::move(s)), sdk::Args::tensor_value(std::move(vh))});
}

}  // namespace

void register_lapack_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("linalg_lu_factor_ex", key, lu_factor_k);
  reg.kernel("linalg_lu_solve", key, lu_solve_k);
  reg.kernel("linalg_cholesky_ex", key, cholesky_k);
  reg.kernel("linalg_qr", key, qr_k);
  reg.kernel("linalg_eigh", key, eigh_k);
  reg.kernel("linalg_eig", key, eig_k);
  reg.kernel("linalg_ldl_factor_ex", key, ldl_factor_k);
  reg.kernel("linalg_ldl_solve", key, ldl_solve_k);
  reg.kernel("linalg_svd", key, svd_k);
}

}  // namespace tessera::cpu

// Matrix products of the CPU plugin: mm, bmm, matmul, addmm and their out= variants.
//
// Everything reduces to one strided 2-D product, C = alpha * A @ B + beta * C (beta == 0: C's
// old contents are ignored, NaN included), run per batch. float32 goes to oneDNN's sgemm,
// reading transposed views through its transpose flags and copying an operand only when
// neither layout fits; float16/bfloat16 are widened to float and use sgemm too; float64 and
// the integer dtypes use a blocked loop (integers wrap, as in PyTorch).
#include "kernels.h"
#include "strided.h"

#include <dnnl.h>

#include <complex>
#include <exception>
#include <mutex>
#include <optional>

namespace tessera::cpu {
namespace {

using sdk::Args;
using sdk::TensorRef;
using strided::str;
using Shape = std::vector<int64_t>;

// One strided matrix: data points at element [0][0]; strides in elements.
struct Mat {
  char* data;
  int64_t rows, cols, rs, cs;
};

template <class T>
T& at(const Mat& m, int64_t i, int64_t j) {
  return reinterpret_cast<T*>(m.data)[i * m.rs + j * m.cs];
}

// ---- float32 through oneDNN

// How sgemm can read a rows x cols matrix in place: 'N' (row-major, leading dim ld) or 'T'
// (column-major: its transpose is row-major). Strides of size-1 dims do not matter.
struct BlasLayout {
  char trans;
  int64_t ld;
};
std::optional<BlasLayout> blas_layout(const Mat& m) {
  const int64_t r = m.rows, c = m.cols;
  if ((m.cs == 1 || c == 1) && (r == 1 || m.rs >= std::max<int64_t>(1, c)))
    return BlasLayout{'N', r == 1 ? std::max<int64_t>(1, c) : m.rs};
  if ((m.rs == 1 || r == 1) && (c == 1 || m.cs >= std::max<int64_t>(1, r)))
    return BlasLayout{'T', c == 1 ? std::max<int64_t>(1, r) : m.cs};
  return std::nullopt;
}

void check_dnnl(const char* op, dnnl_status_t status) {
  if (status != dnnl_success) sdk::fail(TS_ERROR, op, ": oneDNN sgemm failed with status ", int(status));
}

// A row-major copy of a float matrix.
std::vector<float> dense_copy(const Mat& m) {
  std::vector<float> out(size_t(m.rows * m.cols));
  for (int64_t i = 0; i < m.rows; ++i)
    for (int64_t j = 0; j < m.cols; ++j) out[size_t(i * m.cols + j)] = at<float>(m, i, j);
  return out;
}

// C = alpha * A @ B + beta * C with float matrices of any layout (K > 0, M, N > 0).
void sgemm(const char* op, const Mat& A, const Mat& B, const Mat& C, float alpha, float beta) {
  const int64_t M = C.rows, N = C.cols, K = A.cols;
  std::vector<float> a_copy, b_copy;
  auto la = blas_layout(A), lb = blas_layout(B);
  const float* a = reinterpret_cast<const float*>(A.data);
  const float* b = reinterpret_cast<const float*>(B.data);
  if (!la) a_copy = dense_copy(A), a = a_copy.data(), la = BlasLayout{'N', K};
  if (!lb) b_copy = dense_copy(B), b = b_copy.data(), lb = BlasLayout{'N', N};
  auto lc = blas_layout(C);
  float* c = reinterpret_cast<float*>(C.data);
  if (la->trans == 'N' && lb->trans == 'T' && M > 96 && K >= 2 * N) {
    // x @ w.t() with w wide (a projection down, 1536 -> 384): oneDNN's kernel for a transposed
    // B is about a quarter slower there than for a row-major one, and w's copy costs 1/M of the
    // product, so B is copied row-major once (B^T is N x K row-major with ld).
    b_copy.resize(size_t(K * N));
    strided::transpose(b_copy.data(), b, N, K, lb->ld);
    b = b_copy.data();
    lb = BlasLayout{'N', N};
  }
  if (lc && lc->trans == 'N' && la->trans == 'N' && lb->trans == 'T' && M >= 16 && M <= 96 && N >= 2 * M) {
    // x @ w.t() with a few rows (nn.Linear on a short sequence): oneDNN's kernel for that case
    // is 1.5-7x slower from 16 rows to about a hundred than the same product transposed,
    // w @ x.t() (w's rows as the long side), so that one is computed and transposed into C.
    std::vector<float> t(size_t(N * M));
    check_dnnl(op, dnnl_sgemm('N', 'T', N, M, K, alpha, b, lb->ld, a, la->ld, 0.0f, t.data(), M));
    for (int64_t i = 0; i < M; ++i) {
      float* row = c + i * lc->ld;
      if (beta == 0)  // C's old contents are not read (NaN included)
        for (int64_t j = 0; j < N; ++j) row[j] = t[size_t(j * M + i)];
      else
        for (int64_t j = 0; j < N; ++j) row[j] = t[size_t(j * M + i)] + beta * row[j];
    }
  } else if (lc && lc->trans == 'N') {
    check_dnnl(op, dnnl_sgemm(la->trans, lb->trans, M, N, K, alpha, a, la->ld, b, lb->ld, beta, c, lc->ld));
  } else if (lc) {  // C column-major: compute C^T = B^T A^T into it, row-major
    auto flip = [](char t) { return t == 'N' ? 'T' : 'N'; };
    check_dnnl(op, dnnl_sgemm(flip(lb->trans), flip(la->trans), N, M, K, alpha, b, lb->ld, a, la->ld, beta, c,
                              lc->ld));
  } else {  // C of a layout sgemm cannot write: through a contiguous buffer
    std::vector<float> tmp = beta != 0 ? dense_copy(C) : std::vector<float>(size_t(M * N));
    check_dnnl(op, dnnl_sgemm(la->trans, lb->trans, M, N, K, alpha, a, la->ld, b, lb->ld, beta, tmp.data(), N));
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) at<float>(C, i, j) = tmp[size_t(i * N + j)];
  }
}

// ---- other dtypes: widen, multiply, narrow

// The type a product is accumulated in: float for the 16-bit floats (then sgemm), double for
// float64, uint64 for integers (wrapping arithmetic without signed-overflow UB).
template <class T> struct Acc { using type = std::conditional_t<std::is_integral_v<T>, uint64_t, sdk::opmath_t<T>>; };
template <class T> using acc_t = typename Acc<T>::type;

template <class T>
acc_t<T> widen(T v) {
  if constexpr (std::is_integral_v<T>) return uint64_t(int64_t(v));
  else return acc_t<T>(v);
}
template <class T>
acc_t<T> acc_scalar(double v) {  // alpha and beta: integers take the truncated value
  if constexpr (std::is_integral_v<T>) return uint64_t(int64_t(v));
  else return acc_t<T>(v);
}
template <class T>
T narrow(acc_t<T> v) {
  if constexpr (std::is_integral_v<T>) return static_cast<T>(int64_t(v));
  else return T(v);
}

// C += A @ B for contiguous row-major buffers. i-k-j order keeps the inner loop on contiguous
// rows of B and C (it vectorizes); blocks of k and j keep a panel of B in cache.
template <class A>
void gemm_loop(int64_t M, int64_t N, int64_t K, const A* a, const A* b, A* c) {
  constexpr int64_t kBlockK = 64, kBlockN = 256;
  const int threads = strided::threads_for(M * N * K / 8);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t i = 0; i < M; ++i) {
    A* crow = c + i * N;
    for (int64_t k0 = 0; k0 < K; k0 += kBlockK) {
      const int64_t k1 = std::min(K, k0 + kBlockK);
      for (int64_t j0 = 0; j0 < N; j0 += kBlockN) {
        const int64_t j1 = std::min(N, j0 + kBlockN);
        for (int64_t k = k0; k < k1; ++k) {
          const A aik = a[i * K + k];
          const A* brow = b + k * N;
          for (int64_t j = j0; j < j1; ++j) crow[j] += aik * brow[j];
        }
      }
    }
  }
}

template <class T>
void gemm_widened(const char* op, const Mat& A, const Mat& B, const Mat& C, double alpha, double beta) {
  using W = acc_t<T>;
  const int64_t M = C.rows, N = C.cols, K = A.cols;
  std::vector<W> a(size_t(M * K)), b(size_t(K * N)), c(size_t(M * N), W(0));
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < K; ++k) a[size_t(i * K + k)] = widen(at<T>(A, i, k));
  for (int64_t k = 0; k < K; ++k)
    for (int64_t j = 0; j < N; ++j) b[size_t(k * N + j)] = widen(at<T>(B, k, j));
  if constexpr (std::is_same_v<W, float>) {
    check_dnnl(op, dnnl_sgemm('N', 'N', M, N, K, 1.0f, a.data(), K, b.data(), N, 0.0f, c.data(), N));
  } else {
    gemm_loop(M, N, K, a.data(), b.data(), c.data());
  }
  const W walpha = acc_scalar<T>(alpha), wbeta = acc_scalar<T>(beta);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      W v = walpha * c[size_t(i * N + j)];
      if (beta != 0) v += wbeta * widen(at<T>(C, i, j));
      at<T>(C, i, j) = narrow<T>(v);
    }
}

void gemm(const char* op, int32_t dtype, const Mat& A, const Mat& B, const Mat& C, double alpha, double beta);

// Complex products as four real ones over split real and imaginary parts (neither oneDNN nor
// the reference BLAS has a fast complex GEMM): (Ar + iAi)(Br + iBi) = ArBr - AiBi + i(ArBi + AiBr).
// complex64 thus runs on oneDNN's sgemm.
template <class R>
void gemm_complex(const char* op, const Mat& A, const Mat& B, const Mat& C, double alpha, double beta) {
  using Z = std::complex<R>;
  const int64_t M = C.rows, N = C.cols, K = A.cols;
  auto split = [](const Mat& m) {
    std::vector<R> parts(size_t(2 * m.rows * m.cols));
    R* re = parts.data();
    R* im = re + m.rows * m.cols;
    for (int64_t i = 0; i < m.rows; ++i)
      for (int64_t j = 0; j < m.cols; ++j) {
        const Z z = at<Z>(m, i, j);
        re[i * m.cols + j] = z.real();
        im[i * m.cols + j] = z.imag();
      }
    return parts;
  };
  std::vector<R> a = split(A), b = split(B), c(size_t(2 * M * N));
  auto dense = [](R* data, int64_t rows, int64_t cols) {
    return Mat{reinterpret_cast<char*>(data), rows, cols, cols, 1};
  };
  const int32_t real = std::is_same_v<R, float> ? TS_FLOAT32 : TS_FLOAT64;
  const Mat ar = dense(a.data(), M, K), ai = dense(a.data() + M * K, M, K);
  const Mat br = dense(b.data(), K, N), bi = dense(b.data() + K * N, K, N);
  const Mat cr = dense(c.data(), M, N), ci = dense(c.data() + M * N, M, N);
  gemm(op, real, ar, br, cr, 1, 0);
  gemm(op, real, ai, bi, cr, -1, 1);
  gemm(op, real, ar, bi, ci, 1, 0);
  gemm(op, real, ai, br, ci, 1, 1);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      Z v = R(alpha) * Z(c[size_t(i * N + j)], c[size_t(M * N + i * N + j)]);
      if (beta != 0) v += R(beta) * at<Z>(C, i, j);
      at<Z>(C, i, j) = v;
    }
}

// C = alpha * A @ B + beta * C for one matrix of `dtype` (checked by the caller).
void gemm(const char* op, int32_t dtype, const Mat& A, const Mat& B, const Mat& C, double alpha, double beta) {
  const int64_t M = C.rows, N = C.cols, K = A.cols;
  if (M == 0 || N == 0) return;
  if (dtype == TS_COMPLEX64) return gemm_complex<float>(op, A, B, C, alpha, beta);
  if (dtype == TS_COMPLEX128) return gemm_complex<double>(op, A, B, C, alpha, beta);
  if (K == 0) {  // an empty sum: C = beta * C
    TS_DISPATCH_NUMERIC(dtype, break, {
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
          scalar_t& c = at<scalar_t>(C, i, j);
          c = beta == 0 ? narrow<scalar_t>(0) : narrow<scalar_t>(widen(c) * acc_scalar<scalar_t>(beta));
        }
    });
    return;
  }
  if (dtype == TS_FLOAT32) return sgemm(op, A, B, C, float(alpha), float(beta));
  TS_DISPATCH_NUMERIC(dtype, sdk::fail(TS_ERROR_TYPE, op, ": unsupported dtype ", sdk::dtype_name(dtype)),
                      gemm_widened<scalar_t>(op, A, B, C, alpha, beta));
}

// ---- batches

// A strided operand of a batched product: [batch..., rows, cols] with broadcast batch dims at
// stride 0 (batch sizes are those of the plan).
struct Operand {
  char* data;
  int64_t itemsize;
  Shape batch_strides;
  int64_t rows, cols, rs, cs;
  Mat at(int64_t offset) const { return {data + offset * itemsize, rows, cols, rs, cs}; }
};

// Multiplies every batch: C[b] = alpha * A[b] @ B[b] + beta * C[b].
void batched_gemm(const char* op, int32_t dtype, const Shape& batch, const Operand& A, const Operand& B,
                  const Operand& C, double alpha, double beta) {
  const int64_t count = strided::numel(batch);
  const int64_t nb = int64_t(batch.size());
  auto run = [&](int64_t b) {
    int64_t rest = b, oa = 0, ob = 0, oc = 0;
    for (int64_t d = nb - 1; d >= 0; --d) {
      const int64_t i = rest % batch[size_t(d)];
      rest /= batch[size_t(d)];
      oa += i * A.batch_strides[size_t(d)];
      ob += i * B.batch_strides[size_t(d)];
      oc += i * C.batch_strides[size_t(d)];
    }
    gemm(op, dtype, A.at(oa), B.at(ob), C.at(oc), alpha, beta);
  };
  // Many small products: one per thread (sgemm runs single-threaded inside a parallel
  // region). Large ones: in turn, each using every thread.
  const int64_t work = C.rows * C.cols * A.cols;
  const int threads = work < 64 * 64 * 64 && count > 1 ? strided::threads_for(count * work / 8) : 1;
  if (threads <= 1) {
    for (int64_t b = 0; b < count; ++b) run(b);
    return;
  }
  std::exception_ptr error;
  std::once_flag once;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t b = 0; b < count; ++b) {
    try {
      run(b);
    } catch (...) {  // no exception may leave an OpenMP region
      std::call_once(once, [&] { error = std::current_exception(); });
    }
  }
  if (error) std::rethrow_exception(error);
}

// ---- argument checks shared by the ops

void check_dtypes(const char* op, const TensorRef& x, const char* xname, const TensorRef& y, const char* yname) {
  if (x.dtype() != y.dtype())
    sdk::fail(TS_ERROR_TYPE, op, ": expected ", xname, " and ", yname, " of the same dtype, got ",
              sdk::dtype_name(x.dtype()), " and ", sdk::dtype_name(y.dtype()));
  if (!sdk::is_integral(x.dtype(), false) && !sdk::is_inexact(x.dtype()))
    sdk::fail(TS_ERROR_TYPE, op, ": expected a numeric dtype, got ", sdk::dtype_name(x.dtype()));
  if (x.device().type != kCpuDevice.type || y.device().type != kCpuDevice.type)
    sdk::fail(TS_ERROR_VALUE, op, ": expected tensors on cpu, got device types ", x.device().type, " and ",
              y.device().type);
}

// The out= argument: same dtype as the inputs, resized when its shape differs, not
// overlapping an input.
TensorRef prepare_out(const char* op, const Args& a, int index, const Shape& shape, int32_t dtype,
                      std::initializer_list<const TensorRef*> inputs) {
  TensorRef out = a.tensor(index);
  if (out.dtype() != dtype)
    sdk::fail(TS_ERROR_TYPE, op, ": expected out of dtype ", sdk::dtype_name(dtype), " (like the inputs), got ",
              sdk::dtype_name(out.dtype()));
  auto check = [&] {
    for (const TensorRef* in : inputs)
      if (strided::overlaps(out, *in)) sdk::fail(TS_ERROR_VALUE, op, ": out must not overlap an input");
  };
  check();  // before resizing, so that a refused out is left as it was
  if (out.shape_vector() != shape) {
    sdk::resize(a.call(), out, shape);
    check();
  }
  return out;
}

Mat mat(const TensorRef& t) { return {t.data<char>(), t.size(0), t.size(1), t.stride(0), t.stride(1)}; }

// ---- mm

void check_mm(const char* op, const TensorRef& m1, const TensorRef& m2) {
  if (m1.dim() != 2 || m2.dim() != 2)
    sdk::fail(TS_ERROR_VALUE, op, ": expected 2-D tensors, got ", m1.dim(), "-D and ", m2.dim(), "-D (shapes ",
              str(m1.sizes()), " and ", str(m2.sizes()), ")");
  check_dtypes(op, m1, "mat1", m2, "mat2");
  if (m1.size(1) != m2.size(0))
    sdk::fail(TS_ERROR_VALUE, op, ": expected mat1 columns (", m1.size(1), ") to equal mat2 rows (", m2.size(0),
              "), got ", str(m1.sizes()), " and ", str(m2.sizes()));
}

void mm_kernel(Args& a) {
  TensorRef m1 = a.tensor(0), m2 = a.tensor(1);
  check_mm("mm", m1, m2);
  const int64_t shape[2] = {m1.size(0), m2.size(1)};
  TensorRef out = sdk::empty(a.call(), shape, m1.dtype(), kCpuDevice);
  gemm("mm", m1.dtype(), mat(m1), mat(m2), mat(out), 1, 0);
  a.return_tensor(std::move(out));
}

void mm_out_kernel(Args& a) {
  TensorRef m1 = a.tensor(0), m2 = a.tensor(1);
  check_mm("mm", m1, m2);
  TensorRef out = prepare_out("mm", a, 2, {m1.size(0), m2.size(1)}, m1.dtype(), {&m1, &m2});
  gemm("mm", m1.dtype(), mat(m1), mat(m2), mat(out), 1, 0);
  out.bump_version();
  a.return_argument(out);
}

// ---- bmm

Operand operand3(const TensorRef& t) {
  return {t.data<char>(), t.itemsize(), {t.stride(0)}, t.size(1), t.size(2), t.stride(1), t.stride(2)};
}

void check_bmm(const TensorRef& b1, const TensorRef& b2) {
  if (b1.dim() != 3 || b2.dim() != 3)
    sdk::fail(TS_ERROR_VALUE, "bmm: expected 3-D tensors, got ", b1.dim(), "-D and ", b2.dim(), "-D (shapes ",
              str(b1.sizes()), " and ", str(b2.sizes()), ")");
  check_dtypes("bmm", b1, "self", b2, "mat2");
  if (b1.size(0) != b2.size(0))
    sdk::fail(TS_ERROR_VALUE, "bmm: expected equal batch sizes, got ", b1.size(0), " and ", b2.size(0), " (shapes ",
              str(b1.sizes()), " and ", str(b2.sizes()), ")");
  if (b1.size(2) != b2.size(1))
    sdk::fail(TS_ERROR_VALUE, "bmm: expected self's matrices' columns (", b1.size(2), ") to equal mat2's rows (",
              b2.size(1), "), got ", str(b1.sizes()), " and ", str(b2.sizes()));
}

void bmm_into(const TensorRef& b1, const TensorRef& b2, const TensorRef& out) {
  batched_gemm("bmm", b1.dtype(), {b1.size(0)}, operand3(b1), operand3(b2), operand3(out), 1, 0);
}

void bmm_kernel(Args& a) {
  TensorRef b1 = a.tensor(0), b2 = a.tensor(1);
  check_bmm(b1, b2);
  const int64_t shape[3] = {b1.size(0), b1.size(1), b2.size(2)};
  TensorRef out = sdk::empty(a.call(), shape, b1.dtype(), kCpuDevice);
  bmm_into(b1, b2, out);
  a.return_tensor(std::move(out));
}

void bmm_out_kernel(Args& a) {
  TensorRef b1 = a.tensor(0), b2 = a.tensor(1);
  check_bmm(b1, b2);
  TensorRef out = prepare_out("bmm", a, 2, {b1.size(0), b1.size(1), b2.size(2)}, b1.dtype(), {&b1, &b2});
  bmm_into(b1, b2, out);
  out.bump_version();
  a.return_argument(out);
}

// ---- matmul: PyTorch's rules. A 1-D left operand is a row [1, K], a 1-D right one a column
// [K, 1], and the added dim is dropped from the result; batch dims (all but the last two)
// broadcast.

struct MatmulPlan {
  Shape batch, out_shape;
  Operand A, B;  // batch strides expanded to `batch`
  bool row_vector = false, column_vector = false;
};

// Geometry of one operand as [batch..., rows, cols] with its batch dims right-aligned to `nb`
// dims (missing or broadcast dims get stride 0).
Operand matmul_operand(const TensorRef& t, bool is_left, const Shape& batch) {
  Shape sizes = t.shape_vector(), strides(t.strides().begin(), t.strides().end());
  if (t.dim() == 1) {  // row [1, K] or column [K, 1]
    if (is_left) sizes.insert(sizes.begin(), 1), strides.insert(strides.begin(), 0);
    else sizes.push_back(1), strides.push_back(0);
  }
  const int64_t nd = int64_t(sizes.size()), own = nd - 2, nb = int64_t(batch.size());
  Operand op{t.data<char>(), t.itemsize(), Shape(size_t(nb), 0), sizes[size_t(nd - 2)], sizes[size_t(nd - 1)],
             strides[size_t(nd - 2)], strides[size_t(nd - 1)]};
  for (int64_t d = 0; d < own; ++d) {
    const int64_t target = nb - own + d;
    op.batch_strides[size_t(target)] = sizes[size_t(d)] == batch[size_t(target)] ? strides[size_t(d)] : 0;
  }
  return op;
}

MatmulPlan plan_matmul(const TensorRef& x, const TensorRef& y) {
  if (x.dim() == 0 || y.dim() == 0)
    sdk::fail(TS_ERROR_VALUE, "matmul: expected both arguments to be at least 1-D, got ", x.dim(), "-D and ", y.dim(),
              "-D");
  check_dtypes("matmul", x, "self", y, "other");
  const int64_t kx = x.size(x.dim() - 1), ky = y.size(y.dim() == 1 ? 0 : y.dim() - 2);
  if (kx != ky)
    sdk::fail(TS_ERROR_VALUE, "matmul: expected self's last dimension (", kx, ") to equal other's ",
              y.dim() == 1 ? "size (" : "second-to-last dimension (", ky, "), got shapes ", str(x.sizes()), " and ",
              str(y.sizes()));
  // Broadcast the batch dims, right-aligned.
  const int64_t bx = std::max<int64_t>(x.dim() - 2, 0), by = std::max<int64_t>(y.dim() - 2, 0);
  const int64_t nb = std::max(bx, by);
  MatmulPlan plan;
  plan.batch.assign(size_t(nb), 1);
  for (int64_t d = 0; d < nb; ++d) {
    const int64_t sx = d - (nb - bx) >= 0 ? x.size(d - (nb - bx)) : 1;
    const int64_t sy = d - (nb - by) >= 0 ? y.size(d - (nb - by)) : 1;
    if (sx != sy && sx != 1 && sy != 1)
      sdk::fail(TS_ERROR_VALUE, "matmul: the batch dimensions of shapes ", str(x.sizes()), " and ", str(y.sizes()),
                " cannot be broadcast (size ", sx, " against ", sy, " at batch dimension ", d, ")");
    plan.batch[size_t(d)] = sx == 1 ? sy : sx;
  }
  plan.A = matmul_operand(x, true, plan.batch);
  plan.B = matmul_operand(y, false, plan.batch);
  plan.row_vector = x.dim() == 1;
  plan.column_vector = y.dim() == 1;
  plan.out_shape = plan.batch;
  if (!plan.row_vector) plan.out_shape.push_back(plan.A.rows);
  if (!plan.column_vector) plan.out_shape.push_back(plan.B.cols);
  return plan;
}

// True when dims [first, last] of (sizes, strides) address like one dim (size-1 dims ignored).
bool mergeable(std::span<const int64_t> sizes, std::span<const int64_t> strides, int64_t first, int64_t last) {
  int64_t expected = -1;
  for (int64_t d = last; d >= first; --d) {
    if (sizes[size_t(d)] == 1) continue;
    if (expected >= 0 && strides[size_t(d)] != expected) return false;
    expected = strides[size_t(d)] * sizes[size_t(d)];
  }
  return true;
}

void matmul_into(const MatmulPlan& p, const TensorRef& out) {
  const int64_t nb = int64_t(p.batch.size());
  // out seen as [batch..., M, N]; a dropped dim has size 1, so its stride is irrelevant.
  Operand C{out.data<char>(), out.itemsize(), Shape(out.strides().begin(), out.strides().begin() + nb), p.A.rows,
            p.B.cols, p.row_vector ? 0 : out.stride(nb), p.column_vector ? 0 : out.stride(out.dim() - 1)};
  // A batch of rows times one shared matrix (e.g. [b, m, k] @ [k, n]) is a single taller product
  // when the batch and row dims of A and C merge.
  bool b_shared = std::all_of(p.B.batch_strides.begin(), p.B.batch_strides.end(), [](int64_t s) { return s == 0; });
  if (nb > 0 && b_shared && !p.row_vector) {
    Shape sizes = p.batch, a_strides = p.A.batch_strides, c_strides = C.batch_strides;
    sizes.push_back(p.A.rows), a_strides.push_back(p.A.rs), c_strides.push_back(C.rs);
    if (mergeable(sizes, a_strides, 0, nb) && mergeable(sizes, c_strides, 0, nb)) {
      const int64_t rows = strided::numel(sizes);
      auto inner_stride = [&](const Shape& s) {  // the stride of the innermost non-1 dim
        for (int64_t d = nb; d >= 0; --d)
          if (sizes[size_t(d)] != 1) return s[size_t(d)];
        return int64_t(0);
      };
      Mat a{p.A.data, rows, p.A.cols, inner_stride(a_strides), p.A.cs};
      Mat c{C.data, rows, C.cols, inner_stride(c_strides), C.cs};
      gemm("matmul", out.dtype(), a, p.B.at(0), c, 1, 0);
      return;
    }
  }
  batched_gemm("matmul", out.dtype(), p.batch, p.A, p.B, C, 1, 0);
}

void matmul_kernel(Args& a) {
  TensorRef x = a.tensor(0), y = a.tensor(1);
  MatmulPlan plan = plan_matmul(x, y);
  TensorRef out = sdk::empty(a.call(), plan.out_shape, x.dtype(), kCpuDevice);
  matmul_into(plan, out);
  a.return_tensor(std::move(out));
}

void matmul_out_kernel(Args& a) {
  TensorRef x = a.tensor(0), y = a.tensor(1);
  MatmulPlan plan = plan_matmul(x, y);
  TensorRef out = prepare_out("matmul", a, 2, plan.out_shape, x.dtype(), {&x, &y});
  matmul_into(plan, out);
  out.bump_version();
  a.return_argument(out);
}

// ---- addmm: beta * self + alpha * (mat1 @ mat2), self broadcast to the result

void addmm_into(const Args& a, const TensorRef& self, const TensorRef& m1, const TensorRef& m2, const TensorRef& out) {
  const double beta = a.is_none(3) ? 1.0 : a.scalar(3).to_double();
  const double alpha = a.is_none(4) ? 1.0 : a.scalar(4).to_double();
  if (beta != 0 && out.numel() > 0) {
    // out = self expanded to [M, N] (stride 0 along broadcast dims), unless out is self.
    int64_t strides[2] = {0, 0};
    for (int64_t d = 0; d < self.dim(); ++d) {
      const int64_t od = 2 - self.dim() + d;
      if (self.size(d) != 1) strides[od] = self.stride(d);
    }
    const bool same = out.data() == self.data() && strides[0] == out.stride(0) && strides[1] == out.stride(1);
    if (!same) strided::copy_elements(out.sizes(), out.data(), out.strides(), self.data(), strides, out.itemsize());
  }
  gemm("addmm", m1.dtype(), mat(m1), mat(m2), mat(out), alpha, beta);
}

void check_addmm(const TensorRef& self, const TensorRef& m1, const TensorRef& m2) {
  check_mm("addmm", m1, m2);
  check_dtypes("addmm", self, "self", m1, "mat1");
  const int64_t shape[2] = {m1.size(0), m2.size(1)};
  bool ok = self.dim() <= 2;
  for (int64_t d = 0; ok && d < self.dim(); ++d) {
    const int64_t want = shape[2 - self.dim() + d];
    ok = self.size(d) == want || self.size(d) == 1;
  }
  if (!ok)
    sdk::fail(TS_ERROR_VALUE, "addmm: self of shape ", str(self.sizes()), " cannot be broadcast to the result shape ",
              str(shape));
}

void addmm_kernel(Args& a) {
  TensorRef self = a.tensor(0), m1 = a.tensor(1), m2 = a.tensor(2);
  check_addmm(self, m1, m2);
  const int64_t shape[2] = {m1.size(0), m2.size(1)};
  TensorRef out = sdk::empty(a.call(), shape, m1.dtype(), kCpuDevice);
  addmm_into(a, self, m1, m2, out);
  a.return_tensor(std::move(out));
}

void addmm_out_kernel(Args& a) {
  TensorRef self = a.tensor(0), m1 = a.tensor(1), m2 = a.tensor(2);
  check_addmm(self, m1, m2);
  // out may be self itself (out = beta * out + alpha * mat1 @ mat2), but not overlap it otherwise.
  const Shape shape{m1.size(0), m2.size(1)};
  TensorRef given = a.tensor(5);
  if (strided::overlaps(given, self) &&
      !(given.data() == self.data() && given.shape_vector() == shape && self.shape_vector() == shape &&
        std::equal(given.strides().begin(), given.strides().end(), self.strides().begin())))
    sdk::fail(TS_ERROR_VALUE, "addmm: out must be self itself (of the result's shape ", str(shape),
              ") or not overlap it");
  TensorRef out = prepare_out("addmm", a, 5, shape, m1.dtype(), {&m1, &m2});
  addmm_into(a, self, m1, m2, out);
  out.bump_version();
  a.return_argument(out);
}

}  // namespace

void register_linalg_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("mm", key, mm_kernel);
  reg.kernel("mm.out", key, mm_out_kernel);
  reg.kernel("bmm", key, bmm_kernel);
  reg.kernel("bmm.out", key, bmm_out_kernel);
  reg.kernel("matmul", key, matmul_kernel);
  reg.kernel("matmul.out", key, matmul_out_kernel);
  reg.kernel("addmm", key, addmm_kernel);
  reg.kernel("addmm.out", key, addmm_out_kernel);
}

}  // namespace tessera::cpu

// torch.linalg's factorizations through cuSOLVER (dense, legacy 32-bit API): LU (getrf / getrs),
// Cholesky (potrf), QR (geqrf / orgqr), the symmetric eigendecomposition (syevd) and the SVD
// (gesvd), with the CPU plugin's checks, messages, shapes and info conventions
// (backends/cpu/src/linalg_lapack.cpp): float32 / float64, the last two dims, one matrix at a
// time on the current stream. cuSOLVER is column-major: a row-major m x n matrix is the
// column-major n x m matrix A^T, so symmetric inputs are used as they are (with the other
// triangle named), and the others are copied transposed first. CUDA only (TESSERA_HAS_CUSOLVER).
#include "cuda_plugin.h"
#include "ops_launch.h"
#include "workspace.h"

#include <cusolverDn.h>

#include <algorithm>
#include <climits>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace tessera::gpu {
namespace {

using Shape = std::vector<int64_t>;

void check_solver(cusolverStatus_t s, const char* what) {
  TS_SDK_CHECK(s == CUSOLVER_STATUS_SUCCESS, s == CUSOLVER_STATUS_ALLOC_FAILED ? TS_ERROR_OUT_OF_MEMORY : TS_ERROR,
               kName, ": ", what, " failed (cusolverStatus ", int(s), ")");
}

// The device's handle, locked: it carries the stream it queues on (as blas.cpp's cuBLAS handle).
// Kept for the process: destroying at exit can race the runtime's own teardown.
struct LockedHandle {
  std::unique_lock<std::mutex> lock;
  cusolverDnHandle_t handle;
};
LockedHandle handle_for(int32_t index) {
  struct Entry {
    std::mutex mutex;
    cusolverDnHandle_t handle = nullptr;
  };
  static std::mutex table_mutex;
  static auto* table = new std::vector<std::unique_ptr<Entry>>;
  Entry* entry;
  {
    std::lock_guard table_lock(table_mutex);
    while (table->size() <= size_t(index)) table->push_back(std::make_unique<Entry>());
    entry = (*table)[size_t(index)].get();
  }
  std::unique_lock lock(entry->mutex);
  if (!entry->handle) check_solver(cusolverDnCreate(&entry->handle), "cusolverDnCreate");
  check_solver(cusolverDnSetStream(entry->handle, stream_for(index)), "cusolverDnSetStream");
  return {std::move(lock), entry->handle};
}

// ---- the float / double routines, by overload
// Leading dimensions are the matrices' heights: every buffer here is a packed column-major batch.
cusolverStatus_t potrf_size(cusolverDnHandle_t h, cublasFillMode_t u, int n, float* a, int* lw) {
  return cusolverDnSpotrf_bufferSize(h, u, n, a, n, lw);
}
cusolverStatus_t potrf_size(cusolverDnHandle_t h, cublasFillMode_t u, int n, double* a, int* lw) {
  return cusolverDnDpotrf_bufferSize(h, u, n, a, n, lw);
}
cusolverStatus_t potrf(cusolverDnHandle_t h, cublasFillMode_t u, int n, float* a, float* w, int lw, int* info) {
  return cusolverDnSpotrf(h, u, n, a, n, w, lw, info);
}
cusolverStatus_t potrf(cusolverDnHandle_t h, cublasFillMode_t u, int n, double* a, double* w, int lw, int* info) {
  return cusolverDnDpotrf(h, u, n, a, n, w, lw, info);
}
cusolverStatus_t getrf_size(cusolverDnHandle_t h, int m, int n, float* a, int* lw) {
  return cusolverDnSgetrf_bufferSize(h, m, n, a, std::max(1, m), lw);
}
cusolverStatus_t getrf_size(cusolverDnHandle_t h, int m, int n, double* a, int* lw) {
  return cusolverDnDgetrf_bufferSize(h, m, n, a, std::max(1, m), lw);
}
cusolverStatus_t getrf(cusolverDnHandle_t h, int m, int n, float* a, float* w, int* piv, int* info) {
  return cusolverDnSgetrf(h, m, n, a, std::max(1, m), w, piv, info);
}
cusolverStatus_t getrf(cusolverDnHandle_t h, int m, int n, double* a, double* w, int* piv, int* info) {
  return cusolverDnDgetrf(h, m, n, a, std::max(1, m), w, piv, info);
}
cusolverStatus_t getrs(cusolverDnHandle_t h, cublasOperation_t t, int n, int k, const float* a, const int* piv,
                       float* b, int* info) {
  return cusolverDnSgetrs(h, t, n, k, a, n, piv, b, n, info);
}
cusolverStatus_t getrs(cusolverDnHandle_t h, cublasOperation_t t, int n, int k, const double* a, const int* piv,
                       double* b, int* info) {
  return cusolverDnDgetrs(h, t, n, k, a, n, piv, b, n, info);
}
cusolverStatus_t geqrf_size(cusolverDnHandle_t h, int m, int n, float* a, int* lw) {
  return cusolverDnSgeqrf_bufferSize(h, m, n, a, m, lw);
}
cusolverStatus_t geqrf_size(cusolverDnHandle_t h, int m, int n, double* a, int* lw) {
  return cusolverDnDgeqrf_bufferSize(h, m, n, a, m, lw);
}
cusolverStatus_t geqrf(cusolverDnHandle_t h, int m, int n, float* a, float* tau, float* w, int lw, int* info) {
  return cusolverDnSgeqrf(h, m, n, a, m, tau, w, lw, info);
}
cusolverStatus_t geqrf(cusolverDnHandle_t h, int m, int n, double* a, double* tau, double* w, int lw, int* info) {
  return cusolverDnDgeqrf(h, m, n, a, m, tau, w, lw, info);
}
cusolverStatus_t orgqr_size(cusolverDnHandle_t h, int m, int n, int k, float* a, float* tau, int* lw) {
  return cusolverDnSorgqr_bufferSize(h, m, n, k, a, m, tau, lw);
}
cusolverStatus_t orgqr_size(cusolverDnHandle_t h, int m, int n, int k, double* a, double* tau, int* lw) {
  return cusolverDnDorgqr_bufferSize(h, m, n, k, a, m, tau, lw);
}
cusolverStatus_t orgqr(cusolverDnHandle_t h, int m, int n, int k, float* a, float* tau, float* w, int lw, int* info) {
  return cusolverDnSorgqr(h, m, n, k, a, m, tau, w, lw, info);
}
cusolverStatus_t orgqr(cusolverDnHandle_t h, int m, int n, int k, double* a, double* tau, double* w, int lw,
                       int* info) {
  return cusolverDnDorgqr(h, m, n, k, a, m, tau, w, lw, info);
}
constexpr cusolverEigMode_t kVectors = CUSOLVER_EIG_MODE_VECTOR;
cusolverStatus_t syevd_size(cusolverDnHandle_t h, cublasFillMode_t u, int n, float* a, float* w, int* lw) {
  return cusolverDnSsyevd_bufferSize(h, kVectors, u, n, a, n, w, lw);
}
cusolverStatus_t syevd_size(cusolverDnHandle_t h, cublasFillMode_t u, int n, double* a, double* w, int* lw) {
  return cusolverDnDsyevd_bufferSize(h, kVectors, u, n, a, n, w, lw);
}
cusolverStatus_t syevd(cusolverDnHandle_t h, cublasFillMode_t u, int n, float* a, float* w, float* wk, int lw,
                       int* info) {
  return cusolverDnSsyevd(h, kVectors, u, n, a, n, w, wk, lw, info);
}
cusolverStatus_t syevd(cusolverDnHandle_t h, cublasFillMode_t u, int n, double* a, double* w, double* wk, int lw,
                       int* info) {
  return cusolverDnDsyevd(h, kVectors, u, n, a, n, w, wk, lw, info);
}
cusolverStatus_t gesvd_size(cusolverDnHandle_t h, int m, int n, float*, int* lw) {
  return cusolverDnSgesvd_bufferSize(h, m, n, lw);
}
cusolverStatus_t gesvd_size(cusolverDnHandle_t h, int m, int n, double*, int* lw) {
  return cusolverDnDgesvd_bufferSize(h, m, n, lw);
}
// gesvd of the column-major m x n (m >= n) matrix a: U m x ucols (ld m), VT n x n (ld n).
cusolverStatus_t gesvd(cusolverDnHandle_t h, signed char jobu, int m, int n, float* a, float* s, float* u, float* vt,
                       float* w, int lw, int* info) {
  return cusolverDnSgesvd(h, jobu, 'A', m, n, a, m, s, u, m, vt, n, w, lw, nullptr, info);
}
cusolverStatus_t gesvd(cusolverDnHandle_t h, signed char jobu, int m, int n, double* a, double* s, double* u,
                       double* vt, double* w, int lw, int* info) {
  return cusolverDnDgesvd(h, jobu, 'A', m, n, a, m, s, u, m, vt, n, w, lw, nullptr, info);
}

// ---- matrices
// The matrices of a [..., m, n] tensor (not copied): geometry and the CPU plugin's checks.
struct Batch {
  Shape batch;  // the leading dims
  int64_t count = 1, m = 0, n = 0;
  int32_t dtype = 0;
};
Batch matrices(const char* op, const TensorRef& a, bool square = false) {
  if (a.dim() < 2) sdk::fail(TS_ERROR_VALUE, op, ": The input tensor A must have at least 2 dimensions.");
  if (a.dtype() != TS_FLOAT32 && a.dtype() != TS_FLOAT64)
    sdk::fail(TS_ERROR_TYPE, op, ": Expected a floating point tensor (float32 or float64), got ",
              sdk::dtype_name(a.dtype()));
  common_device(op, {&a});
  Batch b;
  b.m = a.size(a.dim() - 2);
  b.n = a.size(a.dim() - 1);
  b.dtype = a.dtype();
  if (square && b.m != b.n)
    sdk::fail(TS_ERROR_VALUE, op, ": A must be batches of square matrices, but they are ", b.m, " by ", b.n,
              " matrices");
  b.batch.assign(a.sizes().begin(), a.sizes().end() - 2);
  for (int64_t s : b.batch) b.count *= s;
  TS_SDK_CHECK(b.m < INT_MAX && b.n < INT_MAX, TS_ERROR_VALUE, op, ": matrices of ", b.m, " by ", b.n,
               " are too large for cuSOLVER's 32-bit API");
  return b;
}

Shape with(Shape s, std::initializer_list<int64_t> tail) {
  s.insert(s.end(), tail.begin(), tail.end());
  return s;
}

// t with its last two dims swapped (a view).
TensorRef mT(ts_call call, const TensorRef& t) {
  Shape shape = t.shape_vector(), strides(t.strides().begin(), t.strides().end());
  std::swap(shape[shape.size() - 1], shape[shape.size() - 2]);
  std::swap(strides[strides.size() - 1], strides[strides.size() - 2]);
  return restride(call, t, shape, strides, sdk::host().tensor_storage_offset(t.handle()));
}
// A new contiguous copy of t (cuSOLVER overwrites its inputs).
TensorRef fresh_copy(ts_call call, const TensorRef& t) {
  TensorRef out = empty_on(call, t.sizes(), t.dtype(), t.device());
  copy_into("linalg", out, t);
  return out;
}
// A view of the contiguous [..., rows, cols] tensor `base` (count matrices of `per_matrix`
// elements) as [..., r, c] with element strides (rs, cs) inside each matrix.
TensorRef matrix_view(ts_call call, const TensorRef& base, const Shape& batch, int64_t per_matrix, int64_t r, int64_t c,
                      int64_t rs, int64_t cs) {
  Shape shape = with(batch, {r, c}), strides(shape.size());
  strides[shape.size() - 2] = rs;
  strides[shape.size() - 1] = cs;
  int64_t step = per_matrix;
  for (size_t d = batch.size(); d-- > 0;) {
    strides[d] = step;
    step *= batch[d];
  }
  return restride(call, base, shape, strides, 0);
}

void zero(const TensorRef& t) {
  if (t.numel() == 0) return;
  DeviceGuard guard(t.device().index);
  check(gpuMemsetAsync(t.data(), 0, size_t(t.numel() * t.itemsize()), stream_for(t.device().index)), "zeroing");
}
// Every [rows, cols] matrix of the contiguous t set to the identity's leading block.
void fill_identity(ts_call call, const TensorRef& t) {
  if (t.numel() == 0) return;
  const int64_t rows = t.size(t.dim() - 2), cols = t.size(t.dim() - 1), shape[] = {rows, cols};
  TensorRef eye = empty_on(call, shape, t.dtype(), t.device());
  FactoryArgs f;
  f.out = first_element(eye);
  f.dtype = eye.dtype();
  f.numel = eye.numel();
  f.cols = cols;
  DeviceGuard guard(t.device().index);
  launch_factory(FactoryOp::Eye, f, stream_for(t.device().index));
  copy_into("linalg", t, eye);  // broadcast over the batch
}
// Zeroes the triangle LAPACK leaves untouched: tril_ / triu_ (composites on our kernels).
void keep_triangle(ts_call call, const TensorRef& t, bool upper) {
  static const sdk::Operator triu("triu_"), tril("tril_");
  (upper ? triu : tril).call(call, {sdk::value(t), sdk::value(int64_t(0))});
}

std::vector<int32_t> read_infos(const TensorRef& info) {
  std::vector<int32_t> v(size_t(info.numel()));
  if (!v.empty())
    copy_host(info.device().index, v.data(), info.data(), v.size() * sizeof(int32_t), gpuMemcpyDeviceToHost, false,
              "reading cuSOLVER's info");
  return v;
}
int32_t first_positive(const std::vector<int32_t>& infos) {
  for (int32_t r : infos)
    if (r > 0) return r;
  return 0;
}

// Runs body(T{}) in the batch's dtype.
template <class F> void by_dtype(int32_t dtype, F body) {
  if (dtype == TS_FLOAT32) body(float{});
  else body(double{});
}
template <class T> T* at(const TensorRef& t, int64_t offset) { return static_cast<T*>(t.data()) + offset; }

// Scratch of `elements` T on the current stream (raises when it cannot be had).
template <class T> struct Scratch : Workspace {
  Scratch(int32_t dev, int64_t elements)
      : Workspace(dev, size_t(std::max<int64_t>(elements, 1)) * sizeof(T), stream_for(dev)) {
    TS_SDK_CHECK(ok, TS_ERROR_OUT_OF_MEMORY, kName, ": out of memory for cuSOLVER's scratch");
  }
  T* get() const { return static_cast<T*>(ptr); }
};

// ---- linalg_cholesky_ex(Tensor self, *, bool upper=False, bool check_errors=False) -> (L, info)
// Row-major lower L is column-major upper: the triangle names swap.
void cholesky_k(sdk::Args& a) {
  const TensorRef self = a.tensor(0);
  const Batch b = matrices("linalg.cholesky", self, true);
  const bool upper = a.to_bool(1), check_errors = a.to_bool(2);
  const int32_t dev = self.device().index;
  TensorRef out = fresh_copy(a.call(), self);
  TensorRef info = empty_on(a.call(), b.batch, TS_INT32, self.device());
  zero(info);
  const int n = int(b.n);
  if (out.numel() > 0) {
    DeviceGuard guard(dev);
    LockedHandle h = handle_for(dev);
    const cublasFillMode_t fill = upper ? CUBLAS_FILL_MODE_LOWER : CUBLAS_FILL_MODE_UPPER;
    by_dtype(b.dtype, [&](auto tag) {
      using T = decltype(tag);
      int lwork = 0;
      check_solver(potrf_size(h.handle, fill, n, at<T>(out, 0), &lwork), "potrf_bufferSize");
      Scratch<T> work(dev, lwork);
      for (int64_t i = 0; i < b.count; ++i)
        check_solver(potrf(h.handle, fill, n, at<T>(out, i * b.n * b.n), work.get(), lwork, at<int32_t>(info, i)),
                     "potrf");
    });
    keep_triangle(a.call(), out, upper);
  }
  if (check_errors)
    if (int32_t r = first_positive(read_infos(info)))
      sdk::fail(TS_ERROR_VALUE, "linalg.cholesky_ex: The factorization could not be completed because the input is not "
                "positive-definite (the leading minor of order ", r, " is not positive-definite).");
  a.returns({sdk::Args::tensor_value(std::move(out)), sdk::Args::tensor_value(std::move(info))});
}

// ---- linalg_lu_factor_ex(Tensor A, *, bool pivot=True, bool check_errors=False) -> (LU, pivots, info)
// Pivots are 1-based int32, as LAPACK's.
void lu_factor_k(sdk::Args& a) {
  const TensorRef self = a.tensor(0);
  const Batch b = matrices("linalg.lu_factor", self);
  if (!a.to_bool(1))
    sdk::fail(TS_ERROR_NOT_IMPLEMENTED, "linalg.lu_factor: LU without pivoting is not implemented on ", kName);
  const bool check_errors = a.to_bool(2);
  const int32_t dev = self.device().index;
  const int64_t k = std::min(b.m, b.n);
  TensorRef cm = fresh_copy(a.call(), mT(a.call(), self));  // column-major A
  TensorRef piv = empty_on(a.call(), with(b.batch, {k}), TS_INT32, self.device());
  TensorRef info = empty_on(a.call(), b.batch, TS_INT32, self.device());
  zero(info);
  if (cm.numel() > 0) {
    DeviceGuard guard(dev);
    LockedHandle h = handle_for(dev);
    by_dtype(b.dtype, [&](auto tag) {
      using T = decltype(tag);
      int lwork = 0;
      check_solver(getrf_size(h.handle, int(b.m), int(b.n), at<T>(cm, 0), &lwork), "getrf_bufferSize");
      Scratch<T> work(dev, lwork);
      for (int64_t i = 0; i < b.count; ++i)
        check_solver(getrf(h.handle, int(b.m), int(b.n), at<T>(cm, i * b.m * b.n), work.get(), at<int32_t>(piv, i * k),
                           at<int32_t>(info, i)), "getrf");
    });
  }
  TensorRef lu = contiguous(a.call(), mT(a.call(), cm), b.dtype);
  if (check_errors)
    if (int32_t r = first_positive(read_infos(info)))
      sdk::fail(TS_ERROR_VALUE, "linalg.lu_factor_ex: U[", r, ",", r,
                "] is zero: the matrix is singular (LAPACK getrf info = ", r, ")");
  a.returns({sdk::Args::tensor_value(std::move(lu)), sdk::Args::tensor_value(std::move(piv)),
             sdk::Args::tensor_value(std::move(info))});
}

// ---- linalg_lu_solve(Tensor LU, Tensor pivots, Tensor B, *, bool left=True, bool adjoint=False)
void lu_solve_k(sdk::Args& a) {
  const TensorRef lu_in = a.tensor(0), b_in = a.tensor(2);
  const Batch lu = matrices("linalg.lu_solve", lu_in, true);
  if (!a.to_bool(3))
    sdk::fail(TS_ERROR_NOT_IMPLEMENTED, "linalg.lu_solve: left=False is not implemented; solve the transposed system");
  const bool adjoint = a.to_bool(4);
  const Batch rhs = matrices("linalg.lu_solve", b_in);
  if (rhs.batch != lu.batch || rhs.m != lu.n)
    sdk::fail(TS_ERROR_VALUE, "linalg.lu_solve: expected B of shape [..., ", lu.n, ", k] with LU's batch dims, got ",
              sdk::shape_text(b_in.sizes()));
  if (b_in.dtype() != lu_in.dtype()) sdk::fail(TS_ERROR_TYPE, "linalg.lu_solve: LU and B must have the same dtype");
  const TensorRef piv_in = a.tensor(1);
  common_device("linalg.lu_solve", {&lu_in, &piv_in, &b_in});
  TS_SDK_CHECK(piv_in.numel() == lu.count * lu.n, TS_ERROR_VALUE, "linalg.lu_solve: expected pivots of shape [..., ",
               lu.n, "] with LU's batch dims, got ", sdk::shape_text(piv_in.sizes()));
  const int32_t dev = lu_in.device().index;
  TensorRef piv = contiguous(a.call(), piv_in, TS_INT32);
  TensorRef lu_cm = contiguous(a.call(), mT(a.call(), lu_in), lu.dtype);  // read only
  TensorRef x_cm = fresh_copy(a.call(), mT(a.call(), b_in));              // overwritten by the solution
  const int64_t n = lu.n, k = rhs.n;
  if (x_cm.numel() > 0) {
    const int64_t one[] = {1};
    TensorRef info = empty_on(a.call(), one, TS_INT32, lu_in.device());  // getrs reports bad arguments only
    DeviceGuard guard(dev);
    LockedHandle h = handle_for(dev);
    by_dtype(lu.dtype, [&](auto tag) {
      using T = decltype(tag);
      for (int64_t i = 0; i < lu.count; ++i)
        check_solver(getrs(h.handle, adjoint ? CUBLAS_OP_T : CUBLAS_OP_N, int(n), int(k), at<T>(lu_cm, i * n * n),
                           at<int32_t>(piv, i * n), at<T>(x_cm, i * n * k), at<int32_t>(info, 0)), "getrs");
    });
  }
  a.return_tensor(contiguous(a.call(), mT(a.call(), x_cm), lu.dtype));
}

// ---- linalg_qr(Tensor A, str mode='reduced') -> (Q, R): 'reduced' (Q m x k), 'complete' (Q m x m), 'r' (no Q)
void qr_k(sdk::Args& a) {
  const TensorRef self = a.tensor(0);
  const Batch b = matrices("linalg.qr", self);
  const std::string mode(a.optional_str(1).value_or("reduced"));
  if (mode != "reduced" && mode != "complete" && mode != "r")
    sdk::fail(TS_ERROR_VALUE, "linalg.qr: qr received unrecognized mode '", mode,
              "' but expected one of 'reduced' (default), 'r', or 'complete'");
  const int32_t dev = self.device().index;
  const int64_t m = b.m, n = b.n, k = std::min(m, n);
  const int64_t qcols = mode == "complete" ? m : k, rrows = mode == "complete" ? m : k;
  TensorRef q = empty_on(a.call(), mode == "r" ? Shape{0} : with(b.batch, {m, qcols}), b.dtype, self.device());
  TensorRef r = empty_on(a.call(), with(b.batch, {rrows, n}), b.dtype, self.device());
  if (b.count == 0 || k == 0) {  // an empty matrix: R is zero, Q the identity's leading columns
    zero(r);
    if (mode != "r") fill_identity(a.call(), q);
    return a.returns({sdk::Args::tensor_value(std::move(q)), sdk::Args::tensor_value(std::move(r))});
  }
  // Column-major m x w with w = max(n, qcols) columns (wide enough for Q), A in the first n.
  const int64_t w = std::max(n, qcols), per = w * m;
  TensorRef cm = empty_on(a.call(), with(b.batch, {w, m}), b.dtype, self.device());
  zero(cm);
  copy_into("linalg.qr", matrix_view(a.call(), cm, b.batch, per, n, m, m, 1), mT(a.call(), self));
  TensorRef tau = empty_on(a.call(), with(b.batch, {k}), b.dtype, self.device());
  const int64_t one[] = {1};
  TensorRef info = empty_on(a.call(), one, TS_INT32, self.device());  // bad arguments only
  {
    DeviceGuard guard(dev);
    LockedHandle h = handle_for(dev);
    by_dtype(b.dtype, [&](auto tag) {
      using T = decltype(tag);
      int lw_qr = 0, lw_q = 0;
      check_solver(geqrf_size(h.handle, int(m), int(n), at<T>(cm, 0), &lw_qr), "geqrf_bufferSize");
      if (mode != "r")
        check_solver(orgqr_size(h.handle, int(m), int(qcols), int(k), at<T>(cm, 0), at<T>(tau, 0), &lw_q),
                     "orgqr_bufferSize");
      const int lwork = std::max(lw_qr, lw_q);
      Scratch<T> work(dev, lwork);
      for (int64_t i = 0; i < b.count; ++i)
        check_solver(geqrf(h.handle, int(m), int(n), at<T>(cm, i * per), at<T>(tau, i * k), work.get(), lwork,
                           at<int32_t>(info, 0)), "geqrf");
      copy_into("linalg.qr", r, matrix_view(a.call(), cm, b.batch, per, rrows, n, 1, m));  // R before orgqr
      if (mode == "r") return;
      for (int64_t i = 0; i < b.count; ++i)
        check_solver(orgqr(h.handle, int(m), int(qcols), int(k), at<T>(cm, i * per), at<T>(tau, i * k), work.get(),
                           lwork, at<int32_t>(info, 0)), "orgqr");
    });
  }
  keep_triangle(a.call(), r, true);
  if (mode != "r") copy_into("linalg.qr", q, matrix_view(a.call(), cm, b.batch, per, m, qcols, 1, m));
  a.returns({sdk::Args::tensor_value(std::move(q)), sdk::Args::tensor_value(std::move(r))});
}

// ---- linalg_eigh(Tensor self, str UPLO='L') -> (eigenvalues ascending, eigenvectors as columns)
void eigh_k(sdk::Args& a) {
  const TensorRef self = a.tensor(0);
  const Batch b = matrices("linalg.eigh", self, true);
  const std::string uplo(a.optional_str(1).value_or("L"));
  if (uplo != "L" && uplo != "U")
    sdk::fail(TS_ERROR_VALUE, "linalg.eigh: Expected UPLO argument to be 'L' or 'U', but got ", uplo);
  const int32_t dev = self.device().index;
  const int64_t n = b.n;
  TensorRef vals = empty_on(a.call(), with(b.batch, {n}), b.dtype, self.device());
  TensorRef cm = fresh_copy(a.call(), self);  // symmetric: row-major 'L' is column-major 'U'
  TensorRef info = empty_on(a.call(), b.batch, TS_INT32, self.device());
  zero(info);
  if (cm.numel() > 0) {
    DeviceGuard guard(dev);
    LockedHandle h = handle_for(dev);
    const cublasFillMode_t fill = uplo == "L" ? CUBLAS_FILL_MODE_UPPER : CUBLAS_FILL_MODE_LOWER;
    by_dtype(b.dtype, [&](auto tag) {
      using T = decltype(tag);
      int lwork = 0;
      check_solver(syevd_size(h.handle, fill, int(n), at<T>(cm, 0), at<T>(vals, 0), &lwork), "syevd_bufferSize");
      Scratch<T> work(dev, lwork);
      for (int64_t i = 0; i < b.count; ++i)
        check_solver(syevd(h.handle, fill, int(n), at<T>(cm, i * n * n), at<T>(vals, i * n), work.get(), lwork,
                           at<int32_t>(info, i)), "syevd");
    });
  }
  if (int32_t r = first_positive(read_infos(info)))
    sdk::fail(TS_ERROR_VALUE, "linalg.eigh: The algorithm failed to converge because the input matrix is ill-conditioned "
              "or has too many repeated eigenvalues (error code: ", r, ").");
  TensorRef vecs = contiguous(a.call(), mT(a.call(), cm), b.dtype);  // the vectors are cm's columns
  a.returns({sdk::Args::tensor_value(std::move(vals)), sdk::Args::tensor_value(std::move(vecs))});
}

// ---- linalg_svd(Tensor A, bool full_matrices=True, *, str? driver=None) -> (U, S descending, Vh)
// gesvd wants a tall matrix (rows >= cols). Tall A: its column-major copy, A = U S VT. Otherwise
// A's own buffer is the tall column-major A^T = U' S VT', so A = VT'^T S U'^T: U is VT' and Vh is
// U' read row-major, no transpose needed.
void svd_k(sdk::Args& a) {
  const TensorRef self = a.tensor(0);
  const Batch b = matrices("linalg.svd", self);
  const bool full = a.to_bool(1);
  if (const auto driver = a.optional_str(2))
    if (*driver != "gesvd" && *driver != "gesvdj" && *driver != "gesvda")
      sdk::fail(TS_ERROR_VALUE, "linalg.svd: driver must be one of None, 'gesvd', 'gesvdj' or 'gesvda', got '",
                std::string(*driver), "'");
  const int32_t dev = self.device().index;
  const int64_t m = b.m, n = b.n, k = std::min(m, n), ucols = full ? m : k, vrows = full ? n : k;
  TensorRef s = empty_on(a.call(), with(b.batch, {k}), b.dtype, self.device());
  if (b.count == 0 || k == 0) {  // an empty matrix: identity bases, no singular values
    TensorRef u = empty_on(a.call(), with(b.batch, {m, ucols}), b.dtype, self.device());
    TensorRef vh = empty_on(a.call(), with(b.batch, {vrows, n}), b.dtype, self.device());
    fill_identity(a.call(), u);
    fill_identity(a.call(), vh);
    return a.returns({sdk::Args::tensor_value(std::move(u)), sdk::Args::tensor_value(std::move(s)),
                      sdk::Args::tensor_value(std::move(vh))});
  }
  const bool tall = m > n;
  const int64_t p = std::max(m, n), q = k, ucols_m = full ? p : q;  // the tall problem: p x q
  TensorRef cm = tall ? fresh_copy(a.call(), mT(a.call(), self)) : fresh_copy(a.call(), self);
  TensorRef ubuf = empty_on(a.call(), with(b.batch, {ucols_m, p}), b.dtype, self.device());  // column-major p x ucols_m
  TensorRef vtbuf = empty_on(a.call(), with(b.batch, {q, q}), b.dtype, self.device());       // column-major q x q
  TensorRef info = empty_on(a.call(), b.batch, TS_INT32, self.device());
  zero(info);
  {
    DeviceGuard guard(dev);
    LockedHandle h = handle_for(dev);
    by_dtype(b.dtype, [&](auto tag) {
      using T = decltype(tag);
      int lwork = 0;
      check_solver(gesvd_size(h.handle, int(p), int(q), at<T>(cm, 0), &lwork), "gesvd_bufferSize");
      Scratch<T> work(dev, lwork);
      for (int64_t i = 0; i < b.count; ++i)
        check_solver(gesvd(h.handle, full ? 'A' : 'S', int(p), int(q), at<T>(cm, i * p * q), at<T>(s, i * q),
                           at<T>(ubuf, i * p * ucols_m), at<T>(vtbuf, i * q * q), work.get(), lwork,
                           at<int32_t>(info, i)), "gesvd");
    });
  }
  if (int32_t r = first_positive(read_infos(info)))
    sdk::fail(TS_ERROR_VALUE, "linalg.svd: The algorithm failed to converge because the input matrix is ill-conditioned "
              "or has too many repeated singular values (error code: ", r, ").");
  TensorRef u = tall ? contiguous(a.call(), mT(a.call(), ubuf), b.dtype) : vtbuf;
  TensorRef vh = tall ? contiguous(a.call(), mT(a.call(), vtbuf), b.dtype) : ubuf;
  a.returns({sdk::Args::tensor_value(std::move(u)), sdk::Args::tensor_value(std::move(s)),
             sdk::Args::tensor_value(std::move(vh))});
}
}  // namespace

void register_linalg_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("linalg_lu_factor_ex", key, lu_factor_k);
  reg.kernel("linalg_lu_solve", key, lu_solve_k);
  reg.kernel("linalg_cholesky_ex", key, cholesky_k);
  reg.kernel("linalg_qr", key, qr_k);
  reg.kernel("linalg_eigh", key, eigh_k);
  reg.kernel("linalg_svd", key, svd_k);
}

}  // namespace tessera::gpu

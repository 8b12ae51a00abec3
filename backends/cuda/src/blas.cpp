// mm, bmm, matmul, addmm. The CUDA build calls cuBLAS (cublasGemmEx / StridedBatchedEx, TF32
// when allowed, as PyTorch's allow_tf32); the ROCm build, and the CUDA build with
// set_use_vendor_blas(false), run our tiled kernel (gemm.cu). Integer matmuls are refused
// (as in PyTorch on CUDA); 16-bit floats accumulate in float.
#include "cuda_plugin.h"
#include "matmul_operand.h"

#include <atomic>
#include <memory>
#include <mutex>

#if !defined(TESSERA_GPU_HIP)
#include <cublas_v2.h>
#endif

namespace tessera::gpu {

namespace {
std::atomic<bool> g_allow_tf32{false};  // PyTorch's default for matmuls
#if defined(TESSERA_GPU_HIP)
std::atomic<bool> g_vendor_blas{false};  // no rocBLAS in Debian: always our kernel
#else
std::atomic<bool> g_vendor_blas{true};
#endif
}  // namespace

void set_allow_tf32(bool allow) { g_allow_tf32 = allow; }
bool allow_tf32() { return g_allow_tf32; }
void set_use_vendor_blas(bool use) {
#if defined(TESSERA_GPU_HIP)
  TS_SDK_CHECK(!use, TS_ERROR_VALUE, kName, "::set_use_vendor_blas: this build has no vendor BLAS");
#endif
  g_vendor_blas = use;
}
bool use_vendor_blas() { return g_vendor_blas; }

namespace {

// A batch of matrices inside a tensor (geometry in elements from its first element).
struct Mat {
  TensorRef t;
  MatrixGeometry g;
};
Mat mat2d(const TensorRef& t) { return {t, {1, t.size(0), t.size(1), 0, t.stride(0), t.stride(1)}}; }
Mat mat3d(const TensorRef& t) { return {t, {t.size(0), t.size(1), t.size(2), t.stride(0), t.stride(1), t.stride(2)}}; }

void check_float(const char* op, const TensorRef& a, const TensorRef& b) {
  TS_SDK_CHECK(a.dtype() == b.dtype(), TS_ERROR_TYPE, op, ": expected both matrices to have the same dtype, got ",
               sdk::dtype_name(a.dtype()), " and ", sdk::dtype_name(b.dtype()));
  TS_SDK_CHECK(sdk::is_floating(a.dtype()), TS_ERROR_TYPE, op, ": \"", kName, "\" matmul is not implemented for '",
               sdk::dtype_name(a.dtype()), "' (floating dtypes only)");
}

void tiled(const Mat& A, const Mat& B, const Mat& C, double alpha, double beta) {
  GemmArgs g;
  g.a = {first_element(A.t), A.t.dtype(), A.g.bs, A.g.rs, A.g.cs};
  g.b = {first_element(B.t), B.t.dtype(), B.g.bs, B.g.rs, B.g.cs};
  g.c = {first_element(C.t), C.t.dtype(), C.g.bs, C.g.rs, C.g.cs};
  g.batch = C.g.batch;
  g.m = C.g.rows;
  g.n = C.g.cols;
  g.k = A.g.cols;
  g.alpha = alpha;
  g.beta = beta;
  launch_tiled_gemm(compute_for(C.t.dtype()), g, stream_for(C.t.device().index));
}

#if !defined(TESSERA_GPU_HIP)
const char* cublas_status(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "a cuBLAS error";
  }
}
void check_blas(cublasStatus_t s, const char* what) {
  TS_SDK_CHECK(s == CUBLAS_STATUS_SUCCESS, TS_ERROR, kName, ": ", what, " failed: ", cublas_status(s));
}

// The device's handle, locked: it carries the stream it queues on (the calling thread's current
// stream), so setting that stream and queuing the GEMM must not interleave with another thread's.
struct LockedHandle {
  std::unique_lock<std::mutex> lock;
  cublasHandle_t handle;
};
LockedHandle handle_for(int32_t index) {
  struct Entry {
    std::mutex mutex;
    cublasHandle_t handle = nullptr;
  };
  static std::mutex table_mutex;
  static auto* table = new std::vector<std::unique_ptr<Entry>>;  // kept for the process
  Entry* entry;
  {
    std::lock_guard table_lock(table_mutex);
    while (table->size() <= size_t(index)) table->push_back(std::make_unique<Entry>());
    entry = (*table)[size_t(index)].get();
  }
  std::unique_lock lock(entry->mutex);
  if (!entry->handle) check_blas(cublasCreate(&entry->handle), "cublasCreate");
  return {std::move(lock), entry->handle};
}

cudaDataType_t cuda_type(int32_t dtype) {
  switch (dtype) {
    case TS_FLOAT16: return CUDA_R_16F;
    case TS_BFLOAT16: return CUDA_R_16BF;
    case TS_FLOAT64: return CUDA_R_64F;
    default: return CUDA_R_32F;
  }
}

// A plain row-major copy of an operand cuBLAS cannot read, described by the geometry the GEMM
// computed (its batch, rows, cols), not by the copy's rank.
Mat readable_copy(ts_call call, const Mat& m) {
  OperandCopy plan = contiguous_copy_of(m.g);
  TensorRef view = restride(call, m.t, plan.view_sizes, plan.view_strides, m.t.storage_offset());
  return {contiguous(call, view, m.t.dtype()), plan.copied};
}

cublasOperation_t op_of(const BlasLayout& l) { return l.transposed ? CUBLAS_OP_T : CUBLAS_OP_N; }

// Needs m, n, k < 2^31 (gemm checks); leading dimensions that do not fit an int are copied away,
// and a batch of 2^31 or more runs in chunks.
void cublas_gemm(ts_call call, Mat A, Mat B, const Mat& C, double alpha, double beta) {
  if (!blas_readable(A.g)) A = readable_copy(call, A);
  if (!blas_readable(B.g)) B = readable_copy(call, B);
  const BlasLayout la = blas_layout(A.g), lb = blas_layout(B.g);
  int32_t dtype = C.t.dtype();
  int32_t index = C.t.device().index;
  LockedHandle locked = handle_for(index);
  cublasHandle_t h = locked.handle;
  check_blas(cublasSetStream(h, stream_for(index)), "cublasSetStream");
  cublasComputeType_t compute = dtype == TS_FLOAT64 ? CUBLAS_COMPUTE_64F
                                : dtype == TS_FLOAT32 && allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                                      : CUBLAS_COMPUTE_32F;
  float af = float(alpha), bf = float(beta);
  const void* pa = dtype == TS_FLOAT64 ? static_cast<const void*>(&alpha) : &af;
  const void* pb = dtype == TS_FLOAT64 ? static_cast<const void*>(&beta) : &bf;
  cudaDataType_t t = cuda_type(dtype);
  const int m = int(C.g.rows), n = int(C.g.cols), k = int(A.g.cols);
  const int64_t item = C.t.itemsize();
  // Row-major C = A @ B is column-major C^T = B^T @ A^T: B goes first.
  for (const BatchChunk& chunk : batch_chunks(C.g.batch)) {
    const char* a0 = first_element(A.t) + chunk.first * A.g.bs * item;
    const char* b0 = first_element(B.t) + chunk.first * B.g.bs * item;
    char* c0 = first_element(C.t) + chunk.first * C.g.bs * item;
    if (chunk.count == 1) {
      check_blas(cublasGemmEx(h, op_of(lb), op_of(la), n, m, k, pa, b0, t, int(lb.ld), a0, t, int(la.ld), pb, c0, t,
                              int(C.g.rs), compute, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
    } else {
      check_blas(cublasGemmStridedBatchedEx(h, op_of(lb), op_of(la), n, m, k, pa, b0, t, int(lb.ld), B.g.bs, a0, t,
                                            int(la.ld), A.g.bs, pb, c0, t, int(C.g.rs), C.g.bs, int(chunk.count),
                                            compute, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmStridedBatchedEx");
    }
  }
}
#endif

// C (contiguous, ours) = alpha * A @ B + beta * C.
void gemm(ts_call call, const Mat& A, const Mat& B, const Mat& C, double alpha, double beta) {
  if (C.g.rows == 0 || C.g.cols == 0 || C.g.batch == 0) return;
  DeviceGuard guard(C.t.device().index);
  // C is ours and contiguous: its row stride is n, an int when n is.
  bool fits_int = fits_blas_int(C.g.rows) && fits_blas_int(C.g.cols) && fits_blas_int(A.g.cols);
#if !defined(TESSERA_GPU_HIP)
  if (use_vendor_blas() && fits_int && A.g.cols > 0) return cublas_gemm(call, A, B, C, alpha, beta);
#else
  (void)call;
  (void)fits_int;
#endif
  tiled(A, B, C, alpha, beta);
}

void check_mm(const char* op, const TensorRef& a, const TensorRef& b) {
  TS_SDK_CHECK(a.dim() == 2 && b.dim() == 2, TS_ERROR_VALUE, op, ": expected 2-D matrices, got ", a.dim(), "-D and ",
               b.dim(), "-D");
  TS_SDK_CHECK(a.size(1) == b.size(0), TS_ERROR_VALUE, op, ": mat1 and mat2 shapes cannot be multiplied (",
               a.size(0), "x", a.size(1), " and ", b.size(0), "x", b.size(1), ")");
  check_float(op, a, b);
}

TensorRef mm(ts_call call, const TensorRef& a, const TensorRef& b) {
  TensorRef out = empty_on(call, std::vector<int64_t>{a.size(0), b.size(1)}, a.dtype(), a.device());
  gemm(call, mat2d(a), mat2d(b), mat2d(out), 1.0, 0.0);
  return out;
}

void mm_k(sdk::Args& a) {
  TensorRef x = a.tensor(0), y = a.tensor(1);
  common_device("mm", {&x, &y});
  check_mm("mm", x, y);
  a.return_tensor(mm(a.call(), x, y));
}

void bmm_k(sdk::Args& a) {
  TensorRef x = a.tensor(0), y = a.tensor(1);
  common_device("bmm", {&x, &y});
  TS_SDK_CHECK(x.dim() == 3 && y.dim() == 3, TS_ERROR_VALUE, "bmm: expected 3-D tensors, got ", x.dim(), "-D and ",
               y.dim(), "-D");
  TS_SDK_CHECK(x.size(0) == y.size(0) && x.size(2) == y.size(1), TS_ERROR_VALUE,
               "bmm: batch1 and batch2 shapes cannot be multiplied (", shape_text(x.sizes()), " and ",
               shape_text(y.sizes()), ")");
  check_float("bmm", x, y);
  TensorRef out = empty_on(a.call(), std::vector<int64_t>{x.size(0), x.size(1), y.size(2)}, x.dtype(), x.device());
  gemm(a.call(), mat3d(x), mat3d(y), mat3d(out), 1.0, 0.0);
  a.return_tensor(std::move(out));
}

// addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1)
void addmm_k(sdk::Args& a) {
  TensorRef self = a.tensor(0), x = a.tensor(1), y = a.tensor(2);
  double beta = a.is_none(3) ? 1.0 : a.scalar(3).to_double(), alpha = a.is_none(4) ? 1.0 : a.scalar(4).to_double();
  common_device("addmm", {&self, &x, &y});
  check_mm("addmm", x, y);
  check_float("addmm", self, x);
  std::vector<int64_t> shape{x.size(0), y.size(1)};
  broadcast_shapes("addmm", self.sizes(), shape);
  TensorRef out = empty_on(a.call(), shape, x.dtype(), x.device());
  if (beta != 0 && out.numel()) copy_into("addmm", out, self);  // beta == 0 ignores self (even NaN)
  if (x.size(1) == 0 && beta == 0 && out.numel()) {
    TensorRef zero = out;
    Loop L = make_loop("addmm", shape, {&zero});
    DeviceGuard guard(out.device().index);  // the stream is that device's: launch with it current
    launch_fill(L, stream_for(out.device().index));
  } else {
    gemm(a.call(), mat2d(x), mat2d(y), mat2d(out), alpha, beta);
  }
  a.return_tensor(std::move(out));
}

// matmul(Tensor self, Tensor other), PyTorch's rules: 1-D operands gain a dim that is removed
// again; batch dims broadcast; the batch runs as one strided-batched GEMM.
void matmul_k(sdk::Args& a) {
  TensorRef x = a.tensor(0), y = a.tensor(1);
  common_device("matmul", {&x, &y});
  TS_SDK_CHECK(x.dim() >= 1 && y.dim() >= 1, TS_ERROR_VALUE, "matmul: both arguments need at least 1 dimension, got ",
               x.dim(), "-D and ", y.dim(), "-D");
  check_float("matmul", x, y);
  ts_call call = a.call();
  const bool x1 = x.dim() == 1, y1 = y.dim() == 1;
  std::vector<int64_t> xs = x.shape_vector(), xst(x.strides().begin(), x.strides().end());
  std::vector<int64_t> ys = y.shape_vector(), yst(y.strides().begin(), y.strides().end());
  if (x1) { xs.insert(xs.begin(), 1); xst.insert(xst.begin(), xst[0]); }
  if (y1) { ys.push_back(1); yst.push_back(1); }
  const int64_t n = xs[xs.size() - 2], k = xs.back(), k2 = ys[ys.size() - 2], p = ys.back();
  TS_SDK_CHECK(k == k2, TS_ERROR_VALUE, "matmul: shapes ", shape_text(x.sizes()), " and ", shape_text(y.sizes()),
               " cannot be multiplied (", k, " != ", k2, ")");
  std::span<const int64_t> xb(xs.data(), xs.size() - 2), yb(ys.data(), ys.size() - 2);
  std::vector<int64_t> batch = broadcast_shapes("matmul", xb, yb);
  int64_t nbatch = 1;
  for (int64_t s : batch) nbatch *= s;
  // Each operand as (nbatch, rows, cols): broadcast batch dims get stride 0, and the batch dims
  // must collapse into one stride, else the operand is copied.
  auto batched = [&](const TensorRef& t, const std::vector<int64_t>& s, const std::vector<int64_t>& st) {
    size_t lead = batch.size() - (s.size() - 2);
    std::vector<int64_t> bstr(batch.size(), 0);
    for (size_t d = 0; d < s.size() - 2; ++d) bstr[lead + d] = s[d] == 1 ? 0 : st[d];
    int64_t stride = 0;
    bool one = true;
    int64_t expect = -1;
    for (size_t d = batch.size(); d-- > 0;) {
      if (batch[d] == 1) continue;
      if (expect < 0) { stride = bstr[d]; expect = bstr[d] * batch[d]; }
      else if (bstr[d] != expect) { one = false; break; }
      else expect = bstr[d] * batch[d];
    }
    int64_t r = s[s.size() - 2], c = s.back(), rs = st[st.size() - 2], cs = st.back();
    if (one) return Mat{t, {nbatch, r, c, stride, rs, cs}};
    // Materialise the broadcast operand as (nbatch, r, c).
    std::vector<int64_t> full(batch), fstr(bstr);
    full.push_back(r); full.push_back(c); fstr.push_back(rs); fstr.push_back(cs);
    TensorRef expanded = restride(call, t, full, fstr, t.storage_offset());
    TensorRef c3 = contiguous(call, expanded, t.dtype());
    return Mat{c3, {nbatch, r, c, r * c, c, 1}};
  };
  Mat A = batched(x, xs, xst), B = batched(y, ys, yst);
  std::vector<int64_t> out_shape(batch);
  out_shape.push_back(n);
  out_shape.push_back(p);
  TensorRef out = empty_on(call, out_shape, x.dtype(), x.device());
  Mat C{out, {nbatch, n, p, n * p, p, 1}};
  if (k == 0) {
    if (out.numel()) {
      Loop L = make_loop("matmul", out_shape, {&out});
      DeviceGuard guard(out.device().index);
      launch_fill(L, stream_for(out.device().index));
    }
  } else {
    gemm(call, A, B, C, 1.0, 0.0);
  }
  // Drop the dims added for 1-D operands.
  std::vector<int64_t> final_shape(batch);
  if (!x1) final_shape.push_back(n);
  if (!y1) final_shape.push_back(p);
  if (final_shape.size() != out_shape.size())
    return a.return_tensor(restride(call, out, final_shape, contiguous_strides(final_shape), 0));
  a.return_tensor(std::move(out));
}
}  // namespace

void register_blas_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("mm", key, mm_k);
  reg.kernel("bmm", key, bmm_k);
  reg.kernel("addmm", key, addmm_k);
  reg.kernel("matmul", key, matmul_k);
}

}  // namespace tessera::gpu

// mm and matmul (1-D/2-D): a naive triple loop over strided operands of any non-bool dtype,
// accumulating in double (a reference device, not a fast one).
#include "simdev.h"

#include <chrono>

namespace simdev {

sdk::TensorRef mm(ts_call call, const sdk::TensorRef& x, const sdk::TensorRef& y);

namespace {
void mm_kernel(sdk::Args& a) {
  sdk::TensorRef x = a.tensor(0), y = a.tensor(1);
  a.return_tensor(mm(a.call(), x, y));
}

// A 1-D operand as a 2-D view: a row [1, k] (as_row) or a column [k, 1], sharing storage.
sdk::TensorRef as_matrix(ts_call call, const sdk::TensorRef& v, bool as_row) {
  std::vector<int64_t> shape = as_row ? std::vector<int64_t>{1, v.size(0)} : std::vector<int64_t>{v.size(0), 1};
  std::vector<int64_t> strides = as_row ? std::vector<int64_t>{v.size(0) * v.stride(0), v.stride(0)}
                                        : std::vector<int64_t>{v.stride(0), 1};
  return sdk::alias(call, v, shape, strides, v.storage_offset());
}

// matmul for 1-D and 2-D operands (dot, mv, vm, mm) with PyTorch's result shapes; batched
// shapes need bmm, which this device lacks.
void matmul_kernel(sdk::Args& a) {
  sdk::TensorRef x = a.tensor(0), y = a.tensor(1);
  TS_SDK_CHECK(x.dim() >= 1 && y.dim() >= 1, TS_ERROR_VALUE,
               "matmul: both arguments to matmul need to be at least 1D, but they are ", x.dim(), "D and ", y.dim(),
               "D");
  TS_SDK_CHECK(x.dim() <= 2 && y.dim() <= 2, TS_ERROR_NOT_IMPLEMENTED, "matmul: ", SIMDEV_NAME,
               " supports 1-D and 2-D operands only, got ", x.dim(), "-D @ ", y.dim(), "-D");
  sdk::TensorRef out = mm(a.call(), x.dim() == 1 ? as_matrix(a.call(), x, true) : x,
                          y.dim() == 1 ? as_matrix(a.call(), y, false) : y);
  if (x.dim() == 2 && y.dim() == 2) return a.return_tensor(std::move(out));
  // Drop the dims the 1-D operands gained: [1, n] -> [n], [m, 1] -> [m], [1, 1] -> [].
  std::vector<int64_t> shape, strides;
  if (x.dim() == 2) shape.push_back(out.size(0)), strides.push_back(1);
  if (y.dim() == 2) shape.push_back(out.size(1)), strides.push_back(1);
  a.return_tensor(sdk::alias(a.call(), out, shape, strides, 0));
}
}  // namespace

sdk::TensorRef mm(ts_call call, const sdk::TensorRef& x, const sdk::TensorRef& y) {
  check_same_device("mm", x.device(), {&x, &y});
  // Ranks, dtypes, then sizes: the order the CPU checks in, so both raise the same error type.
  TS_SDK_CHECK(x.dim() == 2 && y.dim() == 2, TS_ERROR_VALUE, "mm: expected two 2-D tensors, got ", x.dim(), "-D and ",
               y.dim(), "-D");
  TS_SDK_CHECK(x.dtype() == y.dtype(), TS_ERROR_TYPE, "mm: expected both matrices to have the same dtype, got ",
               sdk::dtype_name(x.dtype()), " and ", sdk::dtype_name(y.dtype()));
  TS_SDK_CHECK(x.dtype() != TS_BOOL, TS_ERROR_TYPE, "mm: not implemented for bool");
  TS_SDK_CHECK(x.size(1) == y.size(0), TS_ERROR_VALUE, "mm: mat1 and mat2 shapes cannot be multiplied (", x.size(0),
               "x", x.size(1), " and ", y.size(0), "x", y.size(1), ")");
  // A device reports the work it ran to the profiler (ABI 1.6; nothing on an older host or
  // while nobody profiles): here the time of the loop below, on this device's own track.
  const bool observed = sdk::observing();
  const auto begin = std::chrono::steady_clock::now();
  int64_t m = x.size(0), k = x.size(1), n = y.size(1);
  std::vector<int64_t> shape{m, n};
  sdk::TensorRef out = sdk::empty(call, shape, x.dtype(), x.device());
  const char* px = bytes(x);
  const char* py = bytes(y);
  char* po = bytes(out);
  int64_t isz = x.itemsize();
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t l = 0; l < k; ++l)
        s += load_double(px + (i * x.stride(0) + l * x.stride(1)) * isz, x.dtype()) *
             load_double(py + (l * y.stride(0) + j * y.stride(1)) * isz, y.dtype());
      store(po + (i * n + j) * isz, out.dtype(), s);
    }
  if (observed) {
    auto ns = [](auto t) { return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count(); };
    sdk::observe_device_span(x.device(), SIMDEV_NAME "::mm_kernel", ns(begin), ns(std::chrono::steady_clock::now()));
  }
  return out;
}

void register_linalg(Registrar& reg, ts_dispatch_key key) {
  reg.kernel("mm", key, mm_kernel);
  reg.kernel("matmul", key, matmul_kernel);
}

}  // namespace simdev

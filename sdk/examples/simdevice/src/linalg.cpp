// mm (and 2-D matmul): a naive triple loop over strided operands, float32 and float64 (accumulating in double).
#include "simdev.h"

namespace simdev {

sdk::TensorRef mm(ts_call call, const sdk::TensorRef& x, const sdk::TensorRef& y);

namespace {
void mm_kernel(sdk::Args& a) {
  sdk::TensorRef x = a.tensor(0), y = a.tensor(1);
  a.return_tensor(mm(a.call(), x, y));
}

// matmul for the 2-D case only (the `@` operator); batched shapes need bmm, which this device lacks.
void matmul_kernel(sdk::Args& a) {
  sdk::TensorRef x = a.tensor(0), y = a.tensor(1);
  TS_SDK_CHECK(x.dim() == 2 && y.dim() == 2, TS_ERROR_NOT_IMPLEMENTED, "matmul: ", SIMDEV_NAME,
               " supports 2-D @ 2-D only, got ", x.dim(), "-D @ ", y.dim(), "-D");
  a.return_tensor(mm(a.call(), x, y));
}
}  // namespace

sdk::TensorRef mm(ts_call call, const sdk::TensorRef& x, const sdk::TensorRef& y) {
  check_same_device("mm", x.device(), {&x, &y});
  TS_SDK_CHECK(x.dim() == 2 && y.dim() == 2, TS_ERROR_VALUE, "mm: expected two 2-D tensors, got ", x.dim(), "-D and ",
               y.dim(), "-D");
  TS_SDK_CHECK(x.size(1) == y.size(0), TS_ERROR_VALUE, "mm: mat1 and mat2 shapes cannot be multiplied (", x.size(0),
               "x", x.size(1), " and ", y.size(0), "x", y.size(1), ")");
  TS_SDK_CHECK(x.dtype() == y.dtype(), TS_ERROR_TYPE, "mm: expected both matrices to have the same dtype, got ",
               sdk::dtype_name(x.dtype()), " and ", sdk::dtype_name(y.dtype()));
  TS_SDK_CHECK(x.dtype() == TS_FLOAT32 || x.dtype() == TS_FLOAT64, TS_ERROR_TYPE, "mm: ", SIMDEV_NAME,
               " supports float32 and float64, got ", sdk::dtype_name(x.dtype()));
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
  return out;
}

void register_linalg(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("mm", key, mm_kernel);
  reg.kernel("matmul", key, matmul_kernel);
}

}  // namespace simdev

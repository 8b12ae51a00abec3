// mm: a naive triple loop over strided operands, float32 and float64 (accumulating in double).
#include "simdev.h"

namespace simdev {

namespace {
void mm_kernel(sdk::Args& a) {
  sdk::TensorRef x = a.tensor(0), y = a.tensor(1);
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
  sdk::TensorRef out = sdk::empty(a.call(), shape, x.dtype(), x.device());
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
  a.return_tensor(std::move(out));
}
}  // namespace

void register_linalg(sdk::Registrar& reg, ts_dispatch_key key) { reg.kernel("mm", key, mm_kernel); }

}  // namespace simdev

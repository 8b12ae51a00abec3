// cumsum / cumprod (functional and in place) and cummax / cummin: checks, dtypes and messages of
// the CPU plugin (scan.cpp); the input is converted and made contiguous, then scanned along its
// dim viewed as [outer, n, inner] (scan.cu).
#include "more_ops.h"
#include "order_launch.h"

#include <string>

namespace tessera::gpu {
namespace {

ScanArgs scan_geometry(const TensorRef& self, int64_t dim) {
  ScanArgs s;
  s.n = self.dim() ? self.size(dim) : 1;
  for (int64_t d = 0; d < dim; ++d) s.outer *= self.size(d);
  for (int64_t d = dim + 1; d < self.dim(); ++d) s.inner *= self.size(d);
  return s;
}

// cumsum/cumprod(Tensor self, int dim, *, ScalarType? dtype=None): integers and bool give int64
// unless `dtype` says otherwise; in place keeps self's dtype.
template <bool Product, bool Inplace>
void cum_k(sdk::Args& a) {
  const std::string name = std::string(Product ? "cumprod" : "cumsum") + (Inplace ? "_" : "");
  TensorRef self = a.tensor(0);
  common_device(name.c_str(), {&self});
  const int64_t dim = wrap_dim(name.c_str(), a.to_int(1), self.dim());
  const auto dtype_arg = a.optional_dtype(2);
  int32_t dtype = dtype_arg ? *dtype_arg : sdk::is_floating(self.dtype()) ? self.dtype() : int32_t(TS_INT64);
  if (Inplace) dtype = self.dtype();
  TS_SDK_CHECK(sdk::is_integral(dtype, false) || sdk::is_floating(dtype), TS_ERROR_TYPE, name, ": unsupported dtype ",
               sdk::dtype_name(dtype));
  TensorRef in = contiguous(a.call(), self, dtype);
  TensorRef result = empty_on(a.call(), self.sizes(), dtype, self.device());
  ScanArgs s = scan_geometry(self, dim);
  s.in = first_element(in);
  s.out = first_element(result);
  s.dtype = dtype;
  DeviceGuard guard(self.device().index);
  launch_scan(Product ? ScanOp::Prod : ScanOp::Sum, sdk::is_floating(dtype) ? Compute::Double : Compute::Int64, s,
              stream_for(self.device().index));
  if (!Inplace) return a.return_tensor(std::move(result));
  copy_into(name.c_str(), self, result);
  self.bump_version();
  a.return_argument(self);
}

// cummax / cummin(Tensor self, int dim) -> (values, indices): the running extreme and the index
// where it was last reached.
template <bool Max>
void cum_extreme_k(sdk::Args& a) {
  const char* name = Max ? "cummax" : "cummin";
  TensorRef self = a.tensor(0);
  common_device(name, {&self});
  const int64_t dim = wrap_dim(name, a.to_int(1), self.dim());
  TS_SDK_CHECK(!sdk::is_complex(self.dtype()), TS_ERROR_TYPE, name, ": unsupported dtype");
  TensorRef in = contiguous(a.call(), self, self.dtype());
  TensorRef values = empty_on(a.call(), self.sizes(), self.dtype(), self.device());
  TensorRef indices = empty_on(a.call(), self.sizes(), TS_INT64, self.device());
  ScanArgs s = scan_geometry(self, dim);
  s.in = first_element(in);
  s.out = first_element(values);
  s.indices = static_cast<int64_t*>(indices.data());
  s.dtype = self.dtype();
  DeviceGuard guard(self.device().index);
  launch_scan(Max ? ScanOp::Max : ScanOp::Min, compute_for(self.dtype()), s, stream_for(self.device().index));
  a.returns({sdk::Args::tensor_value(std::move(values)), sdk::Args::tensor_value(std::move(indices))});
}
}  // namespace

void register_scan_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("cumsum", key, cum_k<false, false>);
  reg.kernel("cumsum_", key, cum_k<false, true>);
  reg.kernel("cumprod", key, cum_k<true, false>);
  reg.kernel("cumprod_", key, cum_k<true, true>);
  reg.kernel("cummax", key, cum_extreme_k<true>);
  reg.kernel("cummin", key, cum_extreme_k<false>);
}

}  // namespace tessera::gpu

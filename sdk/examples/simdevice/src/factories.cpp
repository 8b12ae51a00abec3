// Factory kernels: empty, zeros, ones, full. The host routes a factory here when its device=
// argument names this device; the memory comes from the arena and is filled inside the plugin.
#include "simdev.h"

#include <cstring>

namespace simdev {

namespace {
// (size, [fill], dtype, device) -> a new tensor on this device, unfilled.
sdk::TensorRef make(sdk::Args& a, const char* op, int first_option, int32_t default_dtype) {
  auto size = a.int_list(0);
  for (size_t i = 0; i < size.size(); ++i)
    TS_SDK_CHECK(size[i] >= 0, TS_ERROR_VALUE, op, ": expected a non-negative size, got ", size[i], " at dimension ", i);
  int32_t dtype = a.optional_dtype(first_option).value_or(default_dtype);
  auto device = a.optional_device(first_option + 1);
  TS_SDK_CHECK(device && is_this_device(*device), TS_ERROR_VALUE, op, ": expected device=", SIMDEV_NAME,
               ", got ", device ? device_str(*device) : std::string("none"));
  return sdk::empty(a.call(), size, dtype, *device);
}

void fill(const sdk::TensorRef& t, double dv, int64_t iv, bool floating_value) {
  char* p = bytes(t);
  int64_t isz = t.itemsize();
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (floating_value) store(p + i * isz, t.dtype(), dv); else store(p + i * isz, t.dtype(), iv);
  }
}

void empty_kernel(sdk::Args& a) { a.return_tensor(make(a, "empty", 1, sdk::default_float_dtype())); }

void zeros_kernel(sdk::Args& a) {
  sdk::TensorRef t = make(a, "zeros", 1, sdk::default_float_dtype());
  if (t.numel()) std::memset(bytes(t), 0, size_t(t.numel() * t.itemsize()));
  a.return_tensor(std::move(t));
}

void ones_kernel(sdk::Args& a) {
  sdk::TensorRef t = make(a, "ones", 1, sdk::default_float_dtype());
  fill(t, 1.0, 1, false);
  a.return_tensor(std::move(t));
}

void full_kernel(sdk::Args& a) {
  sdk::ScalarArg value = a.scalar(1);
  // No dtype: the fill value decides, as in PyTorch (int -> int64, bool -> bool, float -> default).
  int32_t inferred = value.kind == sdk::ScalarArg::Double ? sdk::default_float_dtype()
                     : value.kind == sdk::ScalarArg::Bool ? TS_BOOL : TS_INT64;
  sdk::TensorRef t = make(a, "full", 2, inferred);
  TS_SDK_CHECK(sdk::is_floating(t.dtype()) || value.kind != sdk::ScalarArg::Double || value.d == double(int64_t(value.d)),
               TS_ERROR_VALUE, "full: value ", value.d, " cannot be converted to ", sdk::dtype_name(t.dtype()),
               " without overflow or loss");
  fill(t, value.to_double(), value.to_int(), value.kind == sdk::ScalarArg::Double);
  a.return_tensor(std::move(t));
}
}  // namespace

void register_factories(Registrar& reg, ts_dispatch_key key) {
  reg.kernel("empty", key, empty_kernel);
  reg.kernel("zeros", key, zeros_kernel);
  reg.kernel("ones", key, ones_kernel);
  reg.kernel("full", key, full_kernel);
}

}  // namespace simdev

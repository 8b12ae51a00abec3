// Factory kernels of the CPU plugin: empty, zeros, ones, full, arange, linspace, eye.
// Defaults follow PyTorch: float32 unless the dtype is given, except full (its fill value's
// kind: bool -> bool, integer -> int64) and arange with only integer arguments (int64).
#include "kernels.h"
#include "strided.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace tessera::cpu {

void register_random_kernels(sdk::Registrar& reg, ts_dispatch_key key);  // random.cpp

namespace {

using sdk::Args;
using sdk::ScalarArg;
using sdk::TensorRef;

// The device argument of a factory: cpu (type 0) or absent.
ts_device check_device(const char* op, const Args& a, int index) {
  auto device = a.optional_device(index);
  if (device && device->type != kCpuDevice.type)
    sdk::fail(TS_ERROR_VALUE, op, ": the cpu backend creates tensors on device type 0 (cpu), got device type ",
              device->type, " (index ", device->index, ")");
  return kCpuDevice;
}

std::span<const int64_t> check_size(const char* op, const Args& a, int index) {
  auto size = a.int_list(index);
  for (int64_t s : size)
    if (s < 0) sdk::fail(TS_ERROR_VALUE, op, ": expected non-negative sizes, got ", strided::str(size));
  return size;
}

TensorRef make(const char* op, const Args& a, std::span<const int64_t> size, int dtype_arg, int32_t default_dtype) {
  int32_t dtype = a.optional_dtype(dtype_arg).value_or(default_dtype);
  return sdk::empty(a.call(), size, dtype, check_device(op, a, dtype_arg + 1));
}

// A double converted to T the way a cast in PyTorch does (16-bit floats through float).
template <class T>
T from_double(double v) {
  if constexpr (std::is_same_v<T, bool>) return v != 0;
  else if constexpr (std::is_same_v<T, sdk::Half> || std::is_same_v<T, sdk::BFloat16>) return T(float(v));
  else return static_cast<T>(v);
}

// A Scalar argument converted to T: integers stay exact for integer targets.
template <class T>
T from_scalar(const ScalarArg& value) {
  if constexpr (std::is_integral_v<T>) {
    if (value.kind != ScalarArg::Double) return static_cast<T>(value.i);
  }
  return from_double<T>(value.to_double());
}

template <class T>
void fill_with(T* p, int64_t n, T v) {
#pragma omp parallel for num_threads(strided::threads_for(n)) schedule(static)
  for (int64_t i = 0; i < n; ++i) p[i] = v;
}

// Fills a contiguous tensor with one value; integer targets refuse values they cannot hold.
void fill(const char* op, TensorRef& t, const ScalarArg& value) {
  const int32_t dtype = t.dtype();
  if (sdk::is_integral(dtype, false)) {
    double v = value.to_double();
    double lo = 0, hi = 0;
    TS_DISPATCH_ALL(dtype, break, lo = double(std::numeric_limits<scalar_t>::lowest());
                    hi = double(std::numeric_limits<scalar_t>::max()));
    if (value.kind == ScalarArg::Double && !std::isfinite(v))
      sdk::fail(TS_ERROR_VALUE, op, ": cannot fill a tensor of dtype ", sdk::dtype_name(dtype), " with ", v);
    if (v < lo || v > hi)
      sdk::fail(TS_ERROR_VALUE, op, ": value ", (value.kind == ScalarArg::Double ? v : double(value.i)),
                " cannot be converted to dtype ", sdk::dtype_name(dtype), " without overflow");
  }
  TS_DISPATCH_ALL_AND_COMPLEX(dtype, sdk::fail(TS_ERROR_TYPE, op, ": unsupported dtype ", dtype),
                  fill_with(t.data<scalar_t>(), t.numel(), from_scalar<scalar_t>(value)));
}

void zero(TensorRef& t) {
  if (t.numel()) std::memset(t.data(), 0, size_t(t.numel() * t.itemsize()));  // 0 bits are 0 in every dtype
}

void empty_kernel(Args& a) {
  auto size = check_size("empty", a, 0);
  a.return_tensor(make("empty", a, size, 1, sdk::default_float_dtype()));
}

void zeros_kernel(Args& a) {
  auto size = check_size("zeros", a, 0);
  TensorRef t = make("zeros", a, size, 1, sdk::default_float_dtype());
  zero(t);
  a.return_tensor(std::move(t));
}

void ones_kernel(Args& a) {
  auto size = check_size("ones", a, 0);
  TensorRef t = make("ones", a, size, 1, sdk::default_float_dtype());
  fill("ones", t, ScalarArg{ScalarArg::Int, 1, 0});
  a.return_tensor(std::move(t));
}

void full_kernel(Args& a) {
  auto size = check_size("full", a, 0);
  ScalarArg value = a.scalar(1);
  int32_t inferred = value.kind == ScalarArg::Bool ? TS_BOOL : value.kind == ScalarArg::Int ? TS_INT64 : sdk::default_float_dtype();
  TensorRef t = make("full", a, size, 2, inferred);
  fill("full", t, value);
  a.return_tensor(std::move(t));
}

// arange: [start, end) by step. With only integer arguments sizes and values are computed
// exactly in int64; otherwise in double.
void arange_impl(Args& a, ScalarArg start, ScalarArg end, ScalarArg step, int dtype_arg) {
  const bool integral = start.kind != ScalarArg::Double && end.kind != ScalarArg::Double &&
                        step.kind != ScalarArg::Double;
  const double s = start.to_double(), e = end.to_double(), st = step.to_double();
  if (!std::isfinite(s) || !std::isfinite(e))
    sdk::fail(TS_ERROR_VALUE, "arange: expected finite start and end, got start ", s, " and end ", e);
  if (st == 0 || !std::isfinite(st)) sdk::fail(TS_ERROR_VALUE, "arange: expected a non-zero finite step, got ", st);
  if ((st > 0 && e < s) || (st < 0 && e > s))
    sdk::fail(TS_ERROR_VALUE, "arange: the sign of step (", st, ") does not lead from start (", s, ") to end (", e,
              ")");
  int64_t length;
  if (integral) {
    int64_t span = 0, by = step.i;  // length = ceil(span / by), span and by of one sign
    if (__builtin_sub_overflow(end.i, start.i, &span) || __builtin_add_overflow(span, by > 0 ? by - 1 : by + 1, &span))
      sdk::fail(TS_ERROR_VALUE, "arange: the range from ", start.i, " to ", end.i, " is too large");
    length = span / by;
  } else {
    double n = std::ceil((e - s) / st);
    if (n > double(std::numeric_limits<int64_t>::max() / 2))
      sdk::fail(TS_ERROR_VALUE, "arange: the result of ", n, " elements is too large");
    length = int64_t(n);
  }
  int32_t dtype = a.optional_dtype(dtype_arg).value_or(integral ? TS_INT64 : sdk::default_float_dtype());
  if (dtype == TS_BOOL) sdk::fail(TS_ERROR_TYPE, "arange: dtype bool is not supported, expected a numeric dtype");
  const int64_t shape[1] = {length};
  TensorRef t = sdk::empty(a.call(), shape, dtype, check_device("arange", a, dtype_arg + 1));
  TS_DISPATCH_NUMERIC(dtype, sdk::fail(TS_ERROR_TYPE, "arange: unsupported dtype ", dtype), {
    scalar_t* p = t.data<scalar_t>();
    if (std::is_integral_v<scalar_t> && integral) {
      for (int64_t i = 0; i < length; ++i) p[i] = static_cast<scalar_t>(start.i + i * step.i);
    } else {
      for (int64_t i = 0; i < length; ++i) p[i] = from_double<scalar_t>(s + double(i) * st);
    }
  });
  a.return_tensor(std::move(t));
}

void arange_kernel(Args& a) {
  arange_impl(a, ScalarArg{ScalarArg::Int, 0, 0}, a.scalar(0), ScalarArg{ScalarArg::Int, 1, 0}, 1);
}

void arange_start_step_kernel(Args& a) {
  ScalarArg step = a.is_none(2) ? ScalarArg{ScalarArg::Int, 1, 0} : a.scalar(2);
  arange_impl(a, a.scalar(0), a.scalar(1), step, 3);
}

// linspace: `steps` evenly spaced values from start to end inclusive. The second half is
// computed back from `end` so that the last value is exactly `end`.
void linspace_kernel(Args& a) {
  const double start = a.scalar(0).to_double(), end = a.scalar(1).to_double();
  const int64_t steps = a.to_int(2);
  if (steps < 0) sdk::fail(TS_ERROR_VALUE, "linspace: expected a non-negative number of steps, got ", steps);
  const int64_t shape[1] = {steps};
  TensorRef t = make("linspace", a, shape, 3, sdk::default_float_dtype());
  if (t.dtype() == TS_BOOL) sdk::fail(TS_ERROR_TYPE, "linspace: dtype bool is not supported, expected a numeric dtype");
  const double step = steps > 1 ? (end - start) / double(steps - 1) : 0.0;
  TS_DISPATCH_NUMERIC(t.dtype(), sdk::fail(TS_ERROR_TYPE, "linspace: unsupported dtype ", t.dtype()), {
    scalar_t* p = t.data<scalar_t>();
    for (int64_t i = 0; i < steps; ++i) {
      double v = i < std::max<int64_t>(steps / 2, 1) ? start + step * double(i) : end - step * double(steps - 1 - i);
      p[i] = from_double<scalar_t>(v);
    }
  });
  a.return_tensor(std::move(t));
}

void eye_kernel(Args& a) {
  const int64_t n = a.to_int(0);
  const int64_t m = a.optional_int(1).value_or(n);
  if (n < 0 || m < 0) sdk::fail(TS_ERROR_VALUE, "eye: expected non-negative n and m, got n = ", n, ", m = ", m);
  const int64_t shape[2] = {n, m};
  TensorRef t = make("eye", a, shape, 2, sdk::default_float_dtype());
  zero(t);
  TS_DISPATCH_ALL_AND_COMPLEX(t.dtype(), sdk::fail(TS_ERROR_TYPE, "eye: unsupported dtype ", t.dtype()), {
    scalar_t* p = t.data<scalar_t>();
    for (int64_t i = 0; i < std::min(n, m); ++i) p[i * m + i] = from_double<scalar_t>(1.0);
  });
  a.return_tensor(std::move(t));
}

}  // namespace

void register_factory_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("empty", key, empty_kernel);
  reg.kernel("zeros", key, zeros_kernel);
  reg.kernel("ones", key, ones_kernel);
  reg.kernel("full", key, full_kernel);
  reg.kernel("arange", key, arange_kernel);
  reg.kernel("arange.start_step", key, arange_start_step_kernel);
  reg.kernel("linspace", key, linspace_kernel);
  reg.kernel("eye", key, eye_kernel);
  register_random_kernels(reg, key);
}

}  // namespace tessera::cpu

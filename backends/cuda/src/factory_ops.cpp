// Factories on the device: arange (both overloads), linspace, eye, rand, randn, randint (both
// overloads). Dtype defaults, checks and messages as the CPU plugin's factories.cpp and
// random.cpp; random ones take one seed per call from the host's generator for our device
// (manual_seed makes them reproducible) and run Philox on the device (factories.cu).
#include "more_ops.h"

#include <cmath>
#include <limits>

namespace tessera::gpu {
namespace {

ts_device our_device(const char* op, const sdk::Args& a, int index) {
  auto device = a.optional_device(index);
  TS_SDK_CHECK(device && is_ours(*device), TS_ERROR_VALUE, op, ": expected device=", kName, ", got ",
               device ? device_str(*device) : std::string("none"));
  require_device(op);
  return *device;
}

TensorRef make(const char* op, sdk::Args& a, std::span<const int64_t> size, int dtype_arg, int32_t default_dtype) {
  for (int64_t s : size)
    TS_SDK_CHECK(s >= 0, TS_ERROR_VALUE, op, ": expected non-negative sizes, got ", shape_text(size));
  const int32_t dtype = a.optional_dtype(dtype_arg).value_or(default_dtype);
  return empty_on(a.call(), size, dtype, our_device(op, a, dtype_arg + 1));
}

void run(FactoryOp op, FactoryArgs f, const TensorRef& t) {
  f.out = first_element(t);
  f.dtype = t.dtype();
  f.numel = t.numel();
  DeviceGuard guard(t.device().index);
  launch_factory(op, f, stream_for(t.device().index));
}

// arange: [start, end) by step; only integer arguments compute exactly in int64, else double.
void arange_impl(sdk::Args& a, ScalarArg start, ScalarArg end, ScalarArg step, int dtype_arg) {
  const bool integral = start.kind != ScalarArg::Double && end.kind != ScalarArg::Double && step.kind != ScalarArg::Double;
  const double s = start.to_double(), e = end.to_double(), st = step.to_double();
  TS_SDK_CHECK(std::isfinite(s) && std::isfinite(e), TS_ERROR_VALUE, "arange: expected finite start and end, got start ",
               s, " and end ", e);
  TS_SDK_CHECK(st != 0 && std::isfinite(st), TS_ERROR_VALUE, "arange: expected a non-zero finite step, got ", st);
  TS_SDK_CHECK(!((st > 0 && e < s) || (st < 0 && e > s)), TS_ERROR_VALUE, "arange: the sign of step (", st,
               ") does not lead from start (", s, ") to end (", e, ")");
  int64_t length;
  if (integral) {
    int64_t span = 0, by = step.i;
    TS_SDK_CHECK(!__builtin_sub_overflow(end.i, start.i, &span) &&
                     !__builtin_add_overflow(span, by > 0 ? by - 1 : by + 1, &span),
                 TS_ERROR_VALUE, "arange: the range from ", start.i, " to ", end.i, " is too large");
    length = span / by;
  } else {
    const double n = std::ceil((e - s) / st);
    TS_SDK_CHECK(n <= double(std::numeric_limits<int64_t>::max() / 2), TS_ERROR_VALUE, "arange: the result of ", n,
                 " elements is too large");
    length = int64_t(n);
  }
  const int32_t dtype = a.optional_dtype(dtype_arg).value_or(integral ? TS_INT64 : sdk::default_float_dtype());
  TS_SDK_CHECK(dtype != TS_BOOL, TS_ERROR_TYPE, "arange: dtype bool is not supported, expected a numeric dtype");
  const int64_t shape[1] = {length};
  TensorRef t = empty_on(a.call(), shape, dtype, our_device("arange", a, dtype_arg + 1));
  FactoryArgs f;
  f.start_i = start.i, f.step_i = step.i, f.start_d = s, f.step_d = st;
  run(integral && sdk::is_integral(dtype, false) ? FactoryOp::ArangeInt : FactoryOp::ArangeDouble, f, t);
  a.return_tensor(std::move(t));
}

void arange_k(sdk::Args& a) {
  arange_impl(a, ScalarArg{ScalarArg::Int, 0, 0}, a.scalar(0), ScalarArg{ScalarArg::Int, 1, 0}, 1);
}
void arange_start_step_k(sdk::Args& a) {
  const ScalarArg step = a.is_none(2) ? ScalarArg{ScalarArg::Int, 1, 0} : a.scalar(2);
  arange_impl(a, a.scalar(0), a.scalar(1), step, 3);
}

// linspace(Scalar start, Scalar end, int steps, *, dtype, device)
void linspace_k(sdk::Args& a) {
  const double start = a.scalar(0).to_double(), end = a.scalar(1).to_double();
  const int64_t steps = a.to_int(2);
  TS_SDK_CHECK(steps >= 0, TS_ERROR_VALUE, "linspace: expected a non-negative number of steps, got ", steps);
  const int64_t shape[1] = {steps};
  TensorRef t = make("linspace", a, shape, 3, sdk::default_float_dtype());
  TS_SDK_CHECK(t.dtype() != TS_BOOL, TS_ERROR_TYPE, "linspace: dtype bool is not supported, expected a numeric dtype");
  FactoryArgs f;
  f.start_d = start, f.end_d = end, f.steps = steps;
  f.step_d = steps > 1 ? (end - start) / double(steps - 1) : 0.0;
  run(FactoryOp::Linspace, f, t);
  a.return_tensor(std::move(t));
}

// eye(int n, int? m=None, *, dtype, device)
void eye_k(sdk::Args& a) {
  const int64_t n = a.to_int(0), m = a.optional_int(1).value_or(n);
  TS_SDK_CHECK(n >= 0 && m >= 0, TS_ERROR_VALUE, "eye: expected non-negative n and m, got n = ", n, ", m = ", m);
  const int64_t shape[2] = {n, m};
  TensorRef t = make("eye", a, shape, 2, sdk::default_float_dtype());
  FactoryArgs f;
  f.cols = m > 0 ? m : 1;
  run(FactoryOp::Eye, f, t);
  a.return_tensor(std::move(t));
}

void require_floating(const char* op, int32_t dtype) {
  TS_SDK_CHECK(sdk::is_floating(dtype), TS_ERROR_TYPE, op,
               ": expected a floating dtype (float16, bfloat16, float32, float64), got ", sdk::dtype_name(dtype));
}

template <bool Normal>
void rand_k(sdk::Args& a) {
  const char* op = Normal ? "randn" : "rand";
  TensorRef t = make(op, a, a.int_list(0), 1, sdk::default_float_dtype());
  require_floating(op, t.dtype());
  FactoryArgs f;
  refuse_random_while_capturing(op, t.device());
  f.seed = sdk::host().next_random_seed(t.device());
  f.digits = t.dtype() == TS_FLOAT16 ? 11 : t.dtype() == TS_BFLOAT16 ? 8 : t.dtype() == TS_FLOAT32 ? 24 : 53;
  run(Normal ? FactoryOp::Randn : FactoryOp::Rand, f, t);
  a.return_tensor(std::move(t));
}

// Uniform integers in [low, high).
void randint_impl(sdk::Args& a, int64_t low, int64_t high, int size_arg) {
  const char* op = "randint";
  TS_SDK_CHECK(low < high, TS_ERROR_VALUE, op, ": expected low < high, got low = ", low, " and high = ", high);
  TensorRef t = make(op, a, a.int_list(size_arg), size_arg + 1, TS_INT64);
  const int32_t dtype = t.dtype();
  if (sdk::is_integral(dtype, true)) {
    double lo = 0, hi = 0;
    TS_DISPATCH_ALL(dtype, break, lo = double(std::numeric_limits<scalar_t>::lowest());
                    hi = double(std::numeric_limits<scalar_t>::max()));
    TS_SDK_CHECK(double(low) >= lo && double(high - 1) <= hi, TS_ERROR_VALUE, op, ": the range [", low, ", ", high,
                 ") does not fit in dtype ", sdk::dtype_name(dtype), " (values ", lo, " to ", hi, ")");
  }
  FactoryArgs f;
  f.start_i = low;
  f.step_i = int64_t(uint64_t(high) - uint64_t(low));  // the range, read back as unsigned
  refuse_random_while_capturing(op, t.device());
  f.seed = sdk::host().next_random_seed(t.device());
  run(FactoryOp::Randint, f, t);
  a.return_tensor(std::move(t));
}
void randint_k(sdk::Args& a) { randint_impl(a, 0, a.to_int(0), 1); }
void randint_low_k(sdk::Args& a) { randint_impl(a, a.to_int(0), a.to_int(1), 2); }
}  // namespace

void register_factory_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("arange", key, arange_k);
  reg.kernel("arange.start_step", key, arange_start_step_k);
  reg.kernel("linspace", key, linspace_k);
  reg.kernel("eye", key, eye_k);
  reg.kernel("rand", key, rand_k<false>);
  reg.kernel("randn", key, rand_k<true>);
  reg.kernel("randint", key, randint_k);
  reg.kernel("randint.low", key, randint_low_k);
}

}  // namespace tessera::gpu

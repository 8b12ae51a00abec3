// Random factories of the CPU plugin: rand, randn, randint.
//
// Each call takes one seed from the host's generator (so manual_seed makes results
// reproducible) and draws from Philox4x32-10, a counter-based generator (Salmon et al.,
// "Parallel random numbers: as easy as 1, 2, 3", SC'11): element i depends only on the seed
// and i, so threads fill disjoint ranges without shared state and the result does not
// depend on the number of threads.
#include "kernels.h"
#include "strided.h"

#include <cmath>
#include <limits>
#include <numbers>
#include <utility>

namespace tessera::cpu {
namespace {

using sdk::Args;
using sdk::TensorRef;

// 128 random bits for counter `block` under key `seed`.
struct Bits128 {
  uint64_t lo, hi;
};
inline Bits128 philox(uint64_t seed, uint64_t block) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  uint32_t c0 = uint32_t(block), c1 = uint32_t(block >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = uint64_t(kMul0) * c0, p1 = uint64_t(kMul1) * c2;
    uint32_t n0 = uint32_t(p1 >> 32) ^ c1 ^ k0, n1 = uint32_t(p1);
    uint32_t n2 = uint32_t(p0 >> 32) ^ c3 ^ k1, n3 = uint32_t(p0);
    c0 = n0, c1 = n1, c2 = n2, c3 = n3;
    k0 += kWeyl0, k1 += kWeyl1;
  }
  return {uint64_t(c0) | (uint64_t(c1) << 32), uint64_t(c2) | (uint64_t(c3) << 32)};
}

// A uniform double in [0, 1) from the top 53 bits.
inline double unit_double(uint64_t bits) { return double(bits >> 11) * 0x1.0p-53; }

// A double as T; the 16-bit floats convert through float.
template <class T>
T cast(double v) {
  if constexpr (std::is_same_v<T, sdk::Half> || std::is_same_v<T, sdk::BFloat16>) return T(float(v));
  else return static_cast<T>(v);
}

// Fills a contiguous buffer two elements at a time: Philox block j gives elements 2j and
// 2j + 1 through pair(bits) -> {first, second}. Blocks are split over threads.
template <class T, class Pair>
void generate(T* p, int64_t n, uint64_t seed, Pair pair) {
  const int64_t blocks = (n + 1) / 2;
#pragma omp parallel for num_threads(strided::threads_for(n / 4)) schedule(static)
  for (int64_t j = 0; j < blocks; ++j) {
    auto [first, second] = pair(philox(seed, uint64_t(j)));
    p[2 * j] = first;
    if (2 * j + 1 < n) p[2 * j + 1] = second;
  }
}

ts_device check_device(const char* op, const Args& a, int index) {
  auto device = a.optional_device(index);
  if (device && device->type != kCpuDevice.type)
    sdk::fail(TS_ERROR_VALUE, op, ": the cpu backend creates tensors on device type 0 (cpu), got device type ",
              device->type, " (index ", device->index, ")");
  return kCpuDevice;
}

TensorRef make(const char* op, const Args& a, std::span<const int64_t> size, int dtype_arg, int32_t default_dtype) {
  for (int64_t s : size)
    if (s < 0) sdk::fail(TS_ERROR_VALUE, op, ": expected non-negative sizes, got ", strided::str(size));
  int32_t dtype = a.optional_dtype(dtype_arg).value_or(default_dtype);
  return sdk::empty(a.call(), size, dtype, check_device(op, a, dtype_arg + 1));
}

void require_floating(const char* op, int32_t dtype) {
  if (!sdk::is_floating(dtype))
    sdk::fail(TS_ERROR_TYPE, op, ": expected a floating dtype (float16, bfloat16, float32, float64), got ",
              sdk::dtype_name(dtype));
}

// Uniform in [0, 1) with as many random bits as T has mantissa digits, so that rounding to T
// never yields 1.
void rand_kernel(Args& a) {
  TensorRef t = make("rand", a, a.int_list(0), 1, sdk::default_float_dtype());
  require_floating("rand", t.dtype());
  const uint64_t seed = sdk::host().next_random_seed(kCpuDevice);
  TS_DISPATCH_FLOAT(t.dtype(), break, {
    constexpr int digits = std::is_same_v<scalar_t, sdk::Half>       ? 11
                           : std::is_same_v<scalar_t, sdk::BFloat16> ? 8
                                                                     : std::numeric_limits<scalar_t>::digits;
    const double scale = std::ldexp(1.0, -digits);
    generate(t.data<scalar_t>(), t.numel(), seed, [scale](Bits128 b) {
      return std::pair{cast<scalar_t>(double(b.lo >> (64 - digits)) * scale),
                       cast<scalar_t>(double(b.hi >> (64 - digits)) * scale)};
    });
  });
  a.return_tensor(std::move(t));
}

// Standard normals by Box-Muller in double: one block's two uniforms give two normals.
void randn_kernel(Args& a) {
  TensorRef t = make("randn", a, a.int_list(0), 1, sdk::default_float_dtype());
  require_floating("randn", t.dtype());
  const uint64_t seed = sdk::host().next_random_seed(kCpuDevice);
  TS_DISPATCH_FLOAT(t.dtype(), break, {
    generate(t.data<scalar_t>(), t.numel(), seed, [](Bits128 b) {
      const double u1 = 1.0 - unit_double(b.lo);  // (0, 1]: the log stays finite
      const double u2 = unit_double(b.hi);
      const double r = std::sqrt(-2.0 * std::log(u1)), theta = 2.0 * std::numbers::pi * u2;
      return std::pair{cast<scalar_t>(r * std::cos(theta)), cast<scalar_t>(r * std::sin(theta))};
    });
  });
  a.return_tensor(std::move(t));
}

// Uniform integers in [low, high): the 128-bit product maps 64 random bits onto the range
// (Lemire's method without rejection; the bias is below range / 2^64).
void randint_impl(Args& a, int64_t low, int64_t high, int size_arg) {
  const char* op = "randint";
  if (low >= high) sdk::fail(TS_ERROR_VALUE, op, ": expected low < high, got low = ", low, " and high = ", high);
  TensorRef t = make(op, a, a.int_list(size_arg), size_arg + 1, TS_INT64);
  const int32_t dtype = t.dtype();
  if (sdk::is_integral(dtype, true)) {
    double lo = 0, hi = 0;
    TS_DISPATCH_ALL(dtype, break, lo = double(std::numeric_limits<scalar_t>::lowest());
                    hi = double(std::numeric_limits<scalar_t>::max()));
    if (double(low) < lo || double(high - 1) > hi)
      sdk::fail(TS_ERROR_VALUE, op, ": the range [", low, ", ", high, ") does not fit in dtype ",
                sdk::dtype_name(dtype), " (values ", lo, " to ", hi, ")");
  }
  const uint64_t range = uint64_t(high) - uint64_t(low);
  const uint64_t seed = sdk::host().next_random_seed(kCpuDevice);
  TS_DISPATCH_ALL(dtype, sdk::fail(TS_ERROR_TYPE, op, ": unsupported dtype ", dtype), {
    auto draw = [range, low](uint64_t bits) {
      const uint64_t offset = uint64_t((unsigned __int128)bits * range >> 64);
      const int64_t v = int64_t(uint64_t(low) + offset);
      if constexpr (std::is_integral_v<scalar_t>) return static_cast<scalar_t>(v);
      else return cast<scalar_t>(double(v));
    };
    generate(t.data<scalar_t>(), t.numel(), seed, [&draw](Bits128 b) { return std::pair{draw(b.lo), draw(b.hi)}; });
  });
  a.return_tensor(std::move(t));
}

void randint_kernel(Args& a) { randint_impl(a, 0, a.to_int(0), 1); }
void randint_low_kernel(Args& a) { randint_impl(a, a.to_int(0), a.to_int(1), 2); }

}  // namespace

// Called by register_factory_kernels (factories.cpp).
void register_random_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("rand", key, rand_kernel);
  reg.kernel("randn", key, randn_kernel);
  reg.kernel("randint", key, randint_kernel);
  reg.kernel("randint.low", key, randint_low_kernel);
}

}  // namespace tessera::cpu

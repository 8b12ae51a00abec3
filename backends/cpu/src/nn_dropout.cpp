// native_dropout and its backward. Each training call takes one seed from the host's generator
// (so manual_seed makes masks reproducible) and draws element i's keep decision from a
// counter-based hash of (seed, i) (SplitMix64's finaliser): the mask does not depend on the
// number of threads. Kept elements are scaled by 1 / (1 - p); p == 1 drops everything.
#include "nn_norm.h"

#include "strided.h"
#include "tensor_iterator.h"

namespace tessera::cpu {
namespace {

using namespace norm;
using sdk::Args;
using sdk::fail;

// 64 well-mixed bits for position i of the stream `seed`.
inline uint64_t mix(uint64_t seed, uint64_t i) {
  uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// native_dropout(Tensor input, float p, bool? train) -> (Tensor output, Tensor mask)
// train None counts as True (as PyTorch). Evaluation mode and p == 0 return a copy and an
// all-true mask.
void dropout_kernel(Args& a) {
  const char* op = "native_dropout";
  const TensorRef input = a.tensor(0);
  const double p = a.to_double(1);
  const bool train = a.is_none(2) ? true : a.to_bool(2);
  check_cpu_all(op, {&input});
  require_floating(op, input, "input");
  if (!(p >= 0 && p <= 1)) fail(TS_ERROR_VALUE, op, ": expected a dropout probability p in [0, 1], got ", p);
  const TensorRef x = contiguous(a.call(), input);
  TensorRef out = sdk::empty(a.call(), input.sizes(), input.dtype(), kCpuDevice);
  TensorRef mask = sdk::empty(a.call(), input.sizes(), TS_BOOL, kCpuDevice);
  const int64_t n = input.numel();
  bool* m = mask.data<bool>();
  if (!train || p == 0) {
    if (n > 0) {
      std::memcpy(out.data(), x.data(), size_t(n * x.itemsize()));
      std::memset(m, 1, size_t(n));
    }
  } else if (n > 0) {
    const uint64_t seed = sdk::host().next_random_seed(kCpuDevice);
    const double keep = 1 - p, scale = keep == 0 ? 0.0 : 1.0 / keep;
    TS_DISPATCH_FLOAT(input.dtype(), break, {
      const scalar_t* xp = x.data<scalar_t>();
      scalar_t* yp = out.data<scalar_t>();
      parallel_for(n, kGrainSize, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          const bool k = double(mix(seed, uint64_t(i)) >> 11) * 0x1.0p-53 < keep;
          m[i] = k;
          yp[i] = k ? store<scalar_t>(load(xp[i]) * scale) : scalar_t(0.0f);
        }
      });
    });
  }
  a.returns({Args::tensor_value(std::move(out)), Args::tensor_value(std::move(mask))});
}

// native_dropout_backward(Tensor grad_output, Tensor mask, float scale) -> grad_output * mask * scale
void dropout_backward_kernel(Args& a) {
  const char* op = "native_dropout_backward";
  const TensorRef grad = a.tensor(0), mask_t = a.tensor(1);
  const double scale = a.to_double(2);
  check_cpu_all(op, {&grad, &mask_t});
  require_floating(op, grad, "grad_output");
  if (mask_t.dtype() != TS_BOOL)
    fail(TS_ERROR_TYPE, op, ": expected mask of dtype bool, got ", sdk::dtype_name(mask_t.dtype()));
  require_shape(op, mask_t, grad.sizes(), "mask (grad_output's shape)");
  const TensorRef g = contiguous(a.call(), grad), mask = contiguous(a.call(), mask_t);
  TensorRef out = sdk::empty(a.call(), grad.sizes(), grad.dtype(), kCpuDevice);
  const bool* m = mask.data<bool>();
  TS_DISPATCH_FLOAT(grad.dtype(), break, {
    const scalar_t* gp = g.data<scalar_t>();
    scalar_t* yp = out.data<scalar_t>();
    parallel_for(grad.numel(), kGrainSize, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) yp[i] = m[i] ? store<scalar_t>(load(gp[i]) * scale) : scalar_t(0.0f);
    });
  });
  a.return_tensor(std::move(out));
}

}  // namespace

void register_dropout_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("native_dropout", key, dropout_kernel);
  reg.kernel("native_dropout_backward", key, dropout_backward_kernel);
}

}  // namespace tessera::cpu

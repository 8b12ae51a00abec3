// The backward formulas of the activations (gelu erf/tanh, silu, sigmoid, tanh, relu's
// threshold_backward) on the element-wise loop: out = f(grad, x), computed in float (16-bit
// floats and float32) or double; the same formulas as the CPU plugin's nn_activation.cpp.
#include "map.cuh"
#include "nn_launch.h"

#include <cmath>
#include <type_traits>

namespace tessera::gpu {
namespace {

template <class C> GPU_D C gelu_derivative(C x, bool tanh_form) {
  if (!tanh_form) {
    const C cdf = C(0.5) * (C(1) + erf(x * C(0.70710678118654752440)));
    const C pdf = C(0.39894228040143267794) * exp(C(-0.5) * x * x);  // 1 / sqrt(2 pi) e^(-x^2/2)
    return cdf + x * pdf;
  }
  // s = sigmoid(2u) = 0.5 (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3): 1 - tanh(u)^2 = 4 s (1 - s).
  const C k = C(0.79788456080286535588), x2 = x * x;
  const C s = C(1) / (C(1) + exp(C(-2) * k * (x + C(0.044715) * x2 * x)));
  const C du = k * (C(1) + C(3 * 0.044715) * x2);
  return s + C(2) * x * s * (C(1) - s) * du;
}

template <class C> struct BackwardF {
  ActivationBackward op;
  template <class I> GPU_D void operator()(const Loop& L, const I (&off)[3]) const {
    const C g = load<C>(at(L.ops[1], off[1]), L.ops[1].dtype);
    const C x = load<C>(at(L.ops[2], off[2]), L.ops[2].dtype);
    C r;
    switch (op) {
      case ActivationBackward::Gelu: r = g * gelu_derivative(x, false); break;
      case ActivationBackward::GeluTanh: r = g * gelu_derivative(x, true); break;
      case ActivationBackward::Silu: {
        const C s = C(1) / (C(1) + exp(-x));
        r = g * s * (C(1) + x * (C(1) - s));
        break;
      }
      case ActivationBackward::Sigmoid: r = g * x * (C(1) - x); break;  // x is the forward's output
      case ActivationBackward::Tanh: r = g * (C(1) - x * x); break;
      default: r = x <= C(L.scalar_d) ? C(0) : g; break;
    }
    store<C>(at(L.ops[0], off[0]), L.ops[0].dtype, r);
  }
};

// threshold_backward of integer tensors: grad copied exactly in int64; the comparison in int64
// for an integer threshold, in double for a fractional one (as the CPU plugin).
struct IntThresholdF {
  bool int_threshold;
  template <class I> GPU_D void operator()(const Loop& L, const I (&off)[3]) const {
    const int64_t g = load<int64_t>(at(L.ops[1], off[1]), L.ops[1].dtype);
    const bool drop = int_threshold ? load<int64_t>(at(L.ops[2], off[2]), L.ops[2].dtype) <= L.scalar_i
                                    : load<double>(at(L.ops[2], off[2]), L.ops[2].dtype) <= L.scalar_d;
    store<int64_t>(at(L.ops[0], off[0]), L.ops[0].dtype, drop ? int64_t(0) : g);
  }
};
}  // namespace

void launch_activation_backward(ActivationBackward op, Compute c, const Loop& L, bool threshold_is_int,
                                gpuStream_t s) {
  switch (c) {
    case Compute::Float: return run_map<3>(L, s, BackwardF<float>{op}, "an activation backward");
    case Compute::Double: return run_map<3>(L, s, BackwardF<double>{op}, "an activation backward");
    case Compute::Int64: return run_map<3>(L, s, IntThresholdF{threshold_is_int}, "threshold_backward");
  }
}

}  // namespace tessera::gpu

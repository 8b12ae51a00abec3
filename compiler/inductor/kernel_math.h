#pragma once
// The math library at the top of every generated kernel source: C math functions declared for
// the vectoriser, NaN-propagating max/min, and inline forms of the CPU plugin's own formulas
// (tanh, gelu's normal CDF) so fused results match eager and stay vectorised.
#include <string>

namespace tessera::inductor {

// `vector_math`: declare the C math functions `omp declare simd`, so vector loops call SLEEF's
// GNU-ABI variants (the library must then be linked).
std::string kernel_math_prelude(bool vector_math);

// The same inline functions for CUDA C compiled by NVRTC (device functions, CUDA's math).
std::string cuda_kernel_math_prelude();

}  // namespace tessera::inductor

#pragma once
// C++ source for a graph's fused kernels: one `extern "C" void tessera_kernel_<k>(void* const*
// inputs, void* const* outputs)` per kernel, an OpenMP parallel loop whose body the C++
// compiler vectorises; math functions are declared `omp declare simd` so the vector loop calls
// SLEEF's vector variants (libsleefgnuabi, the library the CPU plugin uses) when present.
#include "fusion_plan.h"

#include <string>

namespace tessera::inductor {

struct CodegenOptions {
  bool vector_math = true;  // declare math functions simd (needs libsleefgnuabi at link time)
};

std::string generate_cpp(const sdk::graph::Graph& graph, const FusionPlan& plan, const CodegenOptions& options);

// The name of kernel k's function in the generated source.
std::string kernel_symbol(size_t k);

}  // namespace tessera::inductor

#pragma once
// C++ source for a graph's fused kernels: one `extern "C" void tessera_kernel_<k>(void* const*
// inputs, void* const* outputs, const int64_t* geometry)` per kernel, an OpenMP loop whose body the C++
// compiler vectorises; math functions are declared `omp declare simd` so the vector loop calls
// SLEEF's vector variants (libsleefgnuabi, the library the CPU plugin uses) when present.
#include "fusion_plan.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::inductor {

struct CodegenOptions {
  bool vector_math = true;  // declare math functions simd (needs libsleefgnuabi at link time)
  // Sizes, strides and element counts read from each kernel's geometry array at run time instead
  // of written into the source: graphs that differ only in sizes share one source and library.
  bool runtime_sizes = false;
};

struct GeneratedSource {
  std::string source;
  // Per kernel, the values of its geometry array for this graph (empty without runtime sizes).
  std::vector<std::vector<int64_t>> geometry;
};

GeneratedSource generate_cpp(const sdk::graph::Graph& graph, const FusionPlan& plan, const CodegenOptions& options);

// The name of kernel k's function in the generated source.
std::string kernel_symbol(size_t k);

}  // namespace tessera::inductor

#pragma once
// CUDA C for a graph's fused element-wise kernels, compiled at run time by NVRTC: one
// `extern "C" __global__ void tessera_kernel_<k>(const T* in0, ..., T* out0, ...)` per kernel,
// a grid-stride loop over the output's elements whose body is the same expressions the CPU
// generator emits (pointwise_ops), with the prelude's functions as device functions. Sizes
// and strides are literals; broadcast and strided inputs are indexed from the element's
// coordinates.
#include "fusion_plan.h"

#include <cstdint>
#include <string>

namespace tessera::inductor {

// Threads per block of every generated kernel (the launch uses the same number).
constexpr int kCudaBlock = 256;

std::string generate_cuda(const sdk::graph::Graph& graph, const FusionPlan& plan);

}  // namespace tessera::inductor

#pragma once
// The schedule of a graph: runs of consecutive element-wise nodes with one output shape and
// one floating dtype become fused kernels; every other node is a call through the dispatcher
// (matmul, convolution and reductions stay library kernels). Values used only inside a kernel
// live in registers; the rest are written to buffers.
#include <tessera/sdk/graph_ir.h>

#include <cstdint>
#include <vector>

namespace tessera::inductor {

struct FusedKernel {
  std::vector<size_t> nodes;      // indices into graph.nodes, in order
  std::vector<int64_t> inputs;    // value ids read from buffers
  std::vector<int64_t> outputs;   // value ids written to buffers
  std::vector<int64_t> shape;     // the common output shape
  int32_t dtype = TS_FLOAT32;     // the compute and output dtype
};

struct Step {
  enum class Kind { Extern, Fused } kind;
  size_t index;  // Extern: node index; Fused: kernel index
};

struct FusionPlan {
  std::vector<FusedKernel> kernels;
  std::vector<Step> steps;
};

FusionPlan plan_fusion(const sdk::graph::Graph& graph);

}  // namespace tessera::inductor

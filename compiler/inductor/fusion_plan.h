#pragma once
// The schedule of a graph: runs of consecutive element-wise nodes with one output shape and
// one floating dtype become fused kernels, each optionally headed by a row reduction over the
// last dimension (softmax, log_softmax, layer_norm) whose result the run consumes row by row,
// or ending in a sum/mean/amax/amin of what the run computed (the element-wise nodes after it
// then work on the reduced values);
// every other node is a call through the dispatcher (matmul and convolution stay library
// kernels). Values used only inside a kernel live in registers; the rest are written to buffers.
#include <tessera/sdk/graph_ir.h>

#include <cstdint>
#include <vector>

namespace tessera::inductor {

// A row reduction a kernel may start with: it reads whole rows (the last dimension) of its
// input, and the kernel's element-wise nodes then work on its result, row by row.
enum class RowHead { None, LayerNorm, Softmax, LogSoftmax, SoftmaxBackward, LogSoftmaxBackward, Reduction };

// RowHead::Reduction: a sum, mean, amax or amin whose input the kernel's prologue computes, and
// where it reduces: the last dim (rows), every dim but the last (columns: a bias gradient's
// sum over the batch), a block of dims before the last (middle: the input seen as
// [outer, middle, inner], middle reduced: a mean over a sequence), every dim but a block before
// the last (around: the same view, outer and inner reduced: a batch norm's statistics over
// (0, 2, 3)), or every dim (all). The nodes after it work on the reduced values.
struct Reduction {
  enum class Op { Sum, Mean, Max, Min } op = Op::Sum;
  enum class Over { Rows, Columns, Middle, Around, All } over = Over::Rows;
  std::vector<int64_t> input_shape;  // the prologue's shape
  int64_t outer = 1, middle = 1, inner = 1;  // Over::Middle's and Over::Around's view of it
  // The kernel reads its prologue's inputs by the flat element index: they must be dense.
  bool reads_flat() const { return over == Over::All || over == Over::Middle || over == Over::Around; }
};

struct FusedKernel {
  RowHead head = RowHead::None;
  size_t head_node = 0;           // the reduction's index in graph.nodes (head != None)
  Reduction reduction;            // head == Reduction
  std::vector<size_t> prologue;   // element-wise nodes computing the head's row input(s), per pass
  std::vector<size_t> nodes;      // element-wise nodes, indices into graph.nodes, in order
  std::vector<int64_t> inputs;    // value ids read from buffers
  std::vector<int64_t> outputs;   // value ids written to buffers
  // Per output, the input (index into `inputs`) whose buffer it may overwrite, or -1: an input
  // of the output's shape and dtype that dies at this kernel (CompiledGraph::plan_in_place).
  std::vector<int> in_place;
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

// What the kernels are generated for: devices of one type (0: the CPU), and whether they may
// start with a row reduction (the CPU generator's; CUDA kernels are element-wise only).
struct FusionTarget {
  int32_t device_type = 0;
  bool row_heads = true;
  // Whether the CPU plugin's library calls with epilogues may replace nodes (library_epilogues.h):
  // for C++ kernels only, not when CUDA C is generated (for a device those calls do not serve).
  bool cpu_epilogues = true;
};

FusionPlan plan_fusion(const sdk::graph::Graph& graph, const FusionTarget& target = {});

}  // namespace tessera::inductor

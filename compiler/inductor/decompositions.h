#pragma once
// Graph rewrites made before fusion is planned: operators that eager runs as one library kernel
// but that are element-wise once compiled become element-wise nodes, so that they fuse with
// their neighbours instead of costing a pass over memory of their own.
#include <tessera/sdk/graph_ir.h>

#include <vector>

namespace tessera::inductor {

// In-place element-wise operators on values the graph made, that nothing views and nothing
// reads afterwards, become their out-of-place forms (relu_ -> relu), which fuse.
// A sum of slice_backwards that tiles a dim (the gradient of split pieces) becomes one cat.
// native_batch_norm in evaluation mode (running statistics; its saved mean and inverse std unused):
//   y = x * scale + shift, with per-channel scale = weight * rsqrt(running_var + eps) and
//   shift = bias - running_mean * scale, both viewed as [C, 1, ..., 1] to broadcast over x.
// The [C] arithmetic is one small kernel; x * scale + shift fuses with what follows (a ReLU, a
// residual add): a convolution's output is then read once after it, not twice.
sdk::graph::Graph decompose_for_fusion(sdk::graph::Graph graph);

// How many times each value is read: as a node's argument, as a graph output, or as the final
// contents of a mutated input (indexed by value id). What the rewrites check before absorbing a value.
std::vector<int> value_uses(const sdk::graph::Graph& graph);

}  // namespace tessera::inductor

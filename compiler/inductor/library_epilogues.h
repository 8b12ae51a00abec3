#pragma once
// Element-wise work folded into the library call before it, where the library applies it to
// each tile of its result while the tile is in cache (oneDNN's post-ops), so the result is
// written once and never read back:
//   matmul(x, w) [-> add(bias [N])] -> relu | gelu | gelu(tanh) | tanh | sigmoid | silu
// becomes cpu::linear_epilogue(x, w, bias, activation) (backends/cpu/src/linear_epilogue.cpp),
// on the CPU when the plugin has it. Every value folded away must have no other reader.
#include "fusion_plan.h"

#include <tessera/sdk/graph_ir.h>

namespace tessera::inductor {

inline constexpr const char* kLinearEpilogueOp = "cpu::linear_epilogue";

sdk::graph::Graph fold_library_epilogues(sdk::graph::Graph graph, const FusionTarget& target);

}  // namespace tessera::inductor

#pragma once
// The element-wise operators the CPU code generator fuses, each lowered to a C expression of
// its operands. An operator not in the table, or called with arguments the lowering does not
// cover, stays a call through the dispatcher.
#include <tessera/sdk/graph_ir.h>

#include <functional>
#include <optional>
#include <string>

namespace tessera::inductor {

// The C expression of tensor argument `i` (already in the compute type).
using OperandFn = std::function<std::string(int i)>;

// The expression computing `node`'s result in C type `ctype` ("float" or "double"), or nullopt
// when the node is not a fusible element-wise call.
// `fast_trig`: float sin and cos as the prelude's inline forms, valid where
// ts_trig_out_of_range(argument) is 0 (the caller checks and redoes the rest).
std::optional<std::string> lower_pointwise(const sdk::graph::Node& node, const OperandFn& operand,
                                           const std::string& ctype, bool fast_trig = false);

// sin or cos: the operators `fast_trig` changes.
bool is_trigonometric(const std::string& op);

// True when `op` is in the table (its arguments may still be unsupported).
bool is_pointwise(const std::string& op);

// The argument of `op` that is a bool mask (where's condition, masked_fill's mask), or -1.
int bool_argument(const std::string& op);

}  // namespace tessera::inductor

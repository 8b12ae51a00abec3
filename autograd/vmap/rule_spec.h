// A batching rule as data: what gen_batching_rules.py reads off an operator's schema and kind.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tessera::vmap {

enum class RuleKind : uint8_t {
  Pointwise,      // element-wise with broadcasting
  Leading,        // leading dims are batch dims: operands get the batch in front, dims shift
  Fold,           // pooling / convolution: the batch folds into the operator's own batch dim N
  Loss,           // a loss with `reduction`: unreduced, then reduced per sample
  Out,            // an out= variant: the functional operator batched, then copied into `out`
  RandomFactory,  // rand/randn/randint: randomness decides
  DataDependent,  // output shape depends on the values: an error under vmap
  NoTensors,      // a factory: nothing to batch
  Special,        // hand-written (hand_rules.cpp)
};

// What a dim argument of None (or an empty list) means for a Leading operator.
enum class NoneDims : uint8_t { Forbidden, All, Flatten };

struct RuleSpec {
  const char* op;          // full name, "sum.dim_IntList"
  RuleKind kind;
  uint32_t expand_mask;    // tensor operands (bit = argument position) batched or expanded to the batch
  uint32_t pass_mask;      // tensor operands passed unbatched (a batched one: the loop fallback)
  uint32_t dim_mask;       // dim arguments (int, int?, int[]) in logical coordinates
  bool rank_plus_one;      // dims range over rank + 1 (unsqueeze, stack)
  int8_t int_arg;          // Leading: the size argument that gets the batch size in front;
                           // Loss: the reduction argument; RandomFactory: the size argument
  NoneDims none_dims;
  int8_t spatial_rank;     // Fold: spatial dims (0: from the weight, convolution)
  bool inplace;            // argument 0 is written and returned
  bool random;
  const char* functional;  // Out: the functional operator
};

extern const RuleSpec kGeneratedRules[];
extern const size_t kGeneratedRuleCount;
extern const char* const kPrimitiveOperators[];
extern const size_t kPrimitiveOperatorCount;

}  // namespace tessera::vmap

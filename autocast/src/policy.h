#pragma once
// Which operators autocast casts, and to what: PyTorch's lists (autocast_mode.cpp), by the
// names of tessera's operators.
#include <cstdint>
#include <utility>
#include <vector>

namespace tessera::autocast {

enum class Policy : intptr_t {
  LowerPrecision = 0,  // float32 tensor arguments run in the autocast dtype
  Float32 = 1,         // float16 / bfloat16 tensor arguments run in float32
};

const std::vector<std::pair<const char*, Policy>>& policy_list();

}  // namespace tessera::autocast

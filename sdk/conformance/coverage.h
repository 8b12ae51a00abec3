#pragma once
// How much of the operator set a device covers, and how: its own kernels, variants derived from
// them, composites over its primitives, the CPU fallback, or nothing.
#include <tessera/tessera.h>

namespace tessera::conformance {

// Prints the coverage of every operator of core/ops.yaml on backend `key` (device `device`).
void print_coverage(int32_t key, const std::string& device);

}  // namespace tessera::conformance

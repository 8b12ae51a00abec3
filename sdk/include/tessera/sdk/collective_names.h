#pragma once
// The names of the ABI's collective kinds (ts_collective_kind, ABI 1.7), as torch.distributed
// spells the operations: for messages of backends and the host alike. Header-only.
#include <tessera/abi.h>

namespace tessera::sdk {

inline const char* collective_name(int32_t kind) {
  static constexpr const char* kNames[] = {"all_reduce", "broadcast", "reduce", "all_gather", "gather", "scatter",
                                           "reduce_scatter", "all_to_all", "barrier", "send", "recv"};
  static_assert(sizeof(kNames) / sizeof(kNames[0]) == TS_COLLECTIVE_RECV + 1, "a name per ts_collective_kind");
  return kind >= 0 && kind <= TS_COLLECTIVE_RECV ? kNames[kind] : "collective";
}

}  // namespace tessera::sdk

// libtessera_composites.so: composite operators, written once for every device.
#include "composite.h"

namespace tessera::composites {
namespace {

void register_composites(sdk::Registrar& reg) {
  register_elementwise(reg);
  register_reductions(reg);
  register_shape(reg);
  register_linalg(reg);
  register_einsum(reg);
  register_random(reg);
  register_selection(reg);
  register_diagonals(reg);
  register_linalg_solvers(reg);
  register_core_aten(reg);
  register_special(reg);
  register_everyday(reg);
  register_complex(reg);
  register_fft(reg);
  register_pooling_sampling(reg);
  register_scatter_reduce(reg);
}

}  // namespace
}  // namespace tessera::composites

// Needs host ABI 1.4 (the composite keys).
TESSERA_PLUGIN("composites", "0.1.0", 4, tessera::composites::register_composites)

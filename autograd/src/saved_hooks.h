#pragma once
// saved_tensors_hooks (torch.autograd.graph): while a hook pair is active on a thread, a tensor an
// operator saves for backward is handed to the pair's pack hook, and what it returns is kept in its
// place; backward gets the tensor back from the unpack hook. A frontend registers one callback per
// pair and pushes it here; the callback takes (mode, value): mode 0 packs a tensor into an integer
// key, mode 1 unpacks a key into a tensor, mode 2 releases a key whose saved tensor is gone.
#include <tessera/sdk/plugin.h>

#include <cstdint>
#include <memory>

namespace tessera::autograd {

struct SavedHooks;  // one active pair's callback (released when no packed tensor needs it)

struct PackedTensor {
  std::shared_ptr<SavedHooks> hooks;
  int64_t key = -1;
  ~PackedTensor();
};

// The innermost active pair's packing of `t`, or nullptr when no pair is active (or a pack hook
// is running: what it saves itself is not packed again).
std::shared_ptr<PackedTensor> pack_saved(const sdk::TensorRef& t);
sdk::TensorRef unpack_saved(const PackedTensor& packed);

// The control operators' side; push takes over the callback id's hold. (disable_saved_tensors_hooks
// is the frontend's own check: only a frontend pushes pairs.)
void push_saved_hooks(int64_t callback);
void pop_saved_hooks();

}  // namespace tessera::autograd

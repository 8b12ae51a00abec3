#pragma once
// saved_tensors_hooks (torch.autograd.graph): while a hook pair is active on a thread, a tensor an
// operator saves for backward is handed to the pair's pack hook, and what it returns is kept in its
// place; backward gets the tensor back from the unpack hook. A frontend registers one callback per
// pair and pushes it here; the callback takes (mode, value): mode 0 packs a tensor into an integer
// key, mode 1 unpacks a key into a tensor, mode 2 releases a key whose saved tensor is gone.
#include <tessera/sdk/plugin.h>

#include <cstdint>
#include <memory>
#include <string>

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

// The control operators' side. push takes over the callback id's hold; it raises the message
// set by disable_saved_tensors_hooks when that is on.
void push_saved_hooks(int64_t callback);
void pop_saved_hooks();
// Sets the message entering a pair raises ("" allows them again); returns the previous one.
std::string set_saved_hooks_disabled(std::string message);

}  // namespace tessera::autograd

#pragma once
// Per-tensor autograd state, kept in the tensor's TS_SLOT_AUTOGRAD extension slot, and the
// thread's grad mode. A tensor the plugin tracks carries its backend's Autograd key; tensors
// that do not require grad never reach the Autograd kernels at all.
#include <tessera/sdk/ops_support.h>

#include <memory>
#include <vector>

namespace tessera::autograd {

using sdk::TensorRef;
struct Node;

struct AutogradMeta {
  bool requires_grad = false;          // set on leaves by requires_grad_()
  std::shared_ptr<Node> grad_fn;       // the node that made this tensor (non-leaf)
  uint32_t output_nr = 0;              // which output of grad_fn
  std::weak_ptr<Node> grad_accumulator;  // leaves: the AccumulateGrad node, while a graph holds it
  TensorRef grad;                      // .grad of a leaf
  std::shared_ptr<TensorRef> retained_grad;  // .grad of a non-leaf after retain_grad()
  bool is_view = false;                // made by a view operator from a tracked tensor
  TensorRef base;                      // views: the tensor owning the storage (never itself a view)
  uint64_t base_generation = 0;        // views: the base's history_generation grad_fn was made for
  uint64_t history_generation = 0;     // bumped when an in-place operator gives this tensor new history
  std::vector<int64_t> hooks;          // frontend callback ids, run on the gradient in order
  std::vector<int64_t> post_accumulate_hooks;  // leaves: callback ids run with the leaf after .grad changed
  TensorRef tangent;                   // forward-mode AD: the tangent at dual level `tangent_level`
  int64_t tangent_level = 0;
  ~AutogradMeta();
};

// The tensor's meta, or nullptr when it has none. A view whose base was changed in place since
// its history was made gets its history rebuilt here (view_inplace.h).
AutogradMeta* meta_of(ts_tensor t);
// The tensor's meta, created (and the tensor tagged with its Autograd key) when missing.
AutogradMeta& ensure_meta(ts_tensor t);

// True when gradients flow from `t`: a leaf that requires grad, or a tensor with a grad_fn.
inline bool requires_grad(ts_tensor t) {
  AutogradMeta* m = t ? meta_of(t) : nullptr;
  return m && (m->requires_grad || m->grad_fn);
}

// Every Autograd key (CPU, CUDA, HIP, Other), and the one for `t`'s backend.
ts_keyset all_autograd_keys();
ts_dispatch_key autograd_key_of(ts_tensor t);

// Grad mode: autograd records only while it is on. Off means the Autograd keys are excluded
// from the thread's dispatch, so operators do not even reach this plugin.
bool grad_mode_enabled();
void set_grad_mode(bool enabled);
// Grad mode is off but the Autograd keys stay (a dual level is open): kernels compute tangents
// and record no history.
bool grad_recording_suppressed();
// Re-applies the current grad mode (when a dual level opens or closes).
void refresh_grad_mode();
class GradModeGuard {
 public:
  explicit GradModeGuard(bool enabled) : saved_(grad_mode_enabled()) { set_grad_mode(enabled); }
  ~GradModeGuard() { set_grad_mode(saved_); }
 private:
  bool saved_;
};

// Anomaly mode: every backward output is checked for NaN, naming the forward operator.
bool anomaly_mode_enabled();
void set_anomaly_mode(bool enabled);

}  // namespace tessera::autograd

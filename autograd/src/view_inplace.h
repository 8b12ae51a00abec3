#pragma once
// In-place operators on views of tracked tensors, as PyTorch does them. A view remembers its
// base (the tensor that owns the storage) and its geometry; an in-place operator on the view
// gives the base a new history (CopySlices: the base's gradient, with the view's part of it sent
// through the operator's backward) and the view a history that reads its part out of the base's.
// Other views of the same base, made before the change, see new values too: their history is
// rebuilt from the base's on next use (the base's history generation tells them).
#include "node.h"

namespace tessera::autograd {

// A tensor's sizes, strides and storage offset (elements).
struct Geometry {
  std::vector<int64_t> sizes, strides;
  int64_t offset = 0;
  static Geometry of(const TensorRef& t);
};

// Records `t`, just made by a view operator from `self`, as a view: its base is `self`'s base
// (or `self`). Outputs that do not share `self`'s storage (a reshape that had to copy) are not
// views.
void record_view(const TensorRef& t, const TensorRef& self);

// After the in-place operator whose backward node is `fn` ran on `self`: makes `fn` the history
// of `self`, and when `self` is a view, the base's new history goes through CopySlices.
// `self_edge` is the number of the edge of `fn` that leads to `self`'s old history (-1: none).
void set_inplace_history(const TensorRef& self, const std::shared_ptr<Node>& fn, int64_t self_edge);

// A view whose base got a new history since the view's own was made gets one rebuilt from the
// base's (called by meta_of).
void refresh_view_history(ts_tensor view, AutogradMeta& m);

}  // namespace tessera::autograd

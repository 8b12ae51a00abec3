#include "view_inplace.h"

#include <tessera/sdk/ops.h>

namespace tessera::autograd {
namespace {

bool overlaps_itself(const Geometry& g) {
  for (size_t d = 0; d < g.sizes.size(); ++d)
    if (g.strides[d] == 0 && g.sizes[d] > 1) return true;
  return false;
}

// A zero tensor laid out like the base, and the view's part of it (a true alias).
std::pair<TensorRef, TensorRef> base_and_slice(const Geometry& base, const Geometry& view, const TensorRef& like) {
  TensorRef whole = sdk::empty(sdk::current_call(), base.sizes, like.dtype(), like.device(), base.strides);
  TensorRef part = sdk::alias(sdk::current_call(), whole, view.sizes, view.strides, view.offset - base.offset);
  return {whole, part};
}

void refuse_double_backward(const char* node) {
  // The slice written into is an alias the operators cannot see: recording it would lose the
  // gradient silently, so higher-order gradients through these nodes are refused.
  if (grad_mode_enabled())
    throw sdk::Error(TS_ERROR_NOT_IMPLEMENTED,
                     sdk::cat(node, ": create_graph=True through an in-place operation on a view is not supported"));
}

// The base's history after an in-place operator on one of its views.
struct CopySlices final : Node {
  Geometry base, view;
  std::shared_ptr<Node> fn;  // the in-place operator's backward, on the view's part
  int64_t self_edge = -1;    // fn's edge to the view's old history (replaced by the base's)

  GradList apply(GradList&& grads) override {
    refuse_double_backward("CopySlices");
    const TensorRef& grad = grads[0];
    auto [result, slice] = base_and_slice(base, view, grad);
    sdk::ops::copy_(result, grad);
    // The view's part goes through the operator's backward; the rest flows to the old history.
    GradList fn_grads = fn->apply({sdk::ops::clone(slice)});
    if (self_edge >= 0 && size_t(self_edge) < fn_grads.size() && fn_grads[size_t(self_edge)].defined())
      sdk::ops::copy_(slice, fn_grads[size_t(self_edge)]);
    else
      sdk::ops::fill_(slice, 0.0);
    GradList out{result};
    for (size_t j = 0; j < fn->next_edges.size(); ++j)
      if (int64_t(j) != self_edge) out.push_back(j < fn_grads.size() ? fn_grads[j] : TensorRef());
    return out;
  }
  const char* name() const override { return "CopySlices"; }
  const char* op_name() const override { return fn->op_name(); }
  void release_saved() override { fn->release_saved(); }
};

// A view's history read out of its base's: the gradient of the view, placed in a zero base.
struct AsStridedBackward final : Node {
  Geometry base, view;
  GradList apply(GradList&& grads) override {
    refuse_double_backward("AsStridedBackward");
    if (overlaps_itself(view))
      throw sdk::Error(TS_ERROR_NOT_IMPLEMENTED,
                       "AsStridedBackward: backward through an expanded view whose base was modified in place is not "
                       "supported; clone() the view before the in-place operation");
    auto [result, slice] = base_and_slice(base, view, grads[0]);
    sdk::ops::fill_(result, 0.0);
    sdk::ops::copy_(slice, grads[0]);
    return {result};
  }
  const char* name() const override { return "AsStridedBackward"; }
};

}  // namespace

Geometry Geometry::of(const TensorRef& t) {
  return Geometry{t.shape_vector(), {t.strides().begin(), t.strides().end()}, sdk::host().tensor_storage_offset(t.handle())};
}

void record_view(const TensorRef& t, const TensorRef& self) {
  if (t.view().data != self.view().data) return;  // another storage: a copy, not a view
  AutogradMeta* self_meta = meta_of(self.handle());
  TensorRef base = self_meta && self_meta->is_view && self_meta->base.defined() ? self_meta->base : self;
  AutogradMeta* base_meta = meta_of(base.handle());
  uint64_t generation = base_meta ? base_meta->history_generation : 0;
  AutogradMeta& m = ensure_meta(t.handle());
  m.is_view = true;
  m.base = std::move(base);
  m.base_generation = generation;
}

void set_inplace_history(const TensorRef& self, const std::shared_ptr<Node>& fn, int64_t self_edge) {
  AutogradMeta* m = meta_of(self.handle());
  if (!m || !m->is_view || !m->base.defined()) {
    set_history(self, fn, 0);
    ++ensure_meta(self.handle()).history_generation;  // views of `self` now show new values
    return;
  }
  TensorRef base = m->base;
  auto slices = std::make_shared<CopySlices>();
  slices->base = Geometry::of(base);
  slices->view = Geometry::of(self);
  slices->fn = fn;
  slices->self_edge = self_edge;
  fn->input_meta = {input_meta_of(self)};
  std::vector<Edge> edges{gradient_edge(base.handle())};
  for (size_t j = 0; j < fn->next_edges.size(); ++j)
    if (int64_t(j) != self_edge) edges.push_back(fn->next_edges[j]);
  slices->next_edges = std::move(edges);
  set_history(base, slices, 0);
  ++ensure_meta(base.handle()).history_generation;
  refresh_view_history(self.handle(), *m);  // the view's own history: its part of the base's new one
}

void refresh_view_history(ts_tensor view, AutogradMeta& m) {
  AutogradMeta* base_meta = meta_of(m.base.handle());
  uint64_t generation = base_meta ? base_meta->history_generation : 0;
  if (generation == m.base_generation) return;
  m.base_generation = generation;
  Edge base_edge = gradient_edge(m.base.handle());
  if (!base_edge.valid()) return;
  TensorRef v = TensorRef::borrow(view);
  auto node = std::make_shared<AsStridedBackward>();
  node->base = Geometry::of(m.base);
  node->view = Geometry::of(v);
  node->next_edges = {base_edge};
  node->input_meta = {input_meta_of(v)};
  m.grad_fn = std::move(node);
  m.output_nr = 0;
  m.requires_grad = false;
}

}  // namespace tessera::autograd

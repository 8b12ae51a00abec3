#include "forward_ad.h"

#include "node.h"
#include "view_inplace.h"

#include <tessera/sdk/memory_overlap.h>
#include <tessera/sdk/ops.h>

#include <atomic>

namespace tessera::autograd {
namespace {
std::atomic<int64_t> open_level{0};
std::atomic<int64_t> next_level{1};
thread_local int hidden_depth = 0;
}  // namespace

HideTangents::HideTangents() { ++hidden_depth; }
HideTangents::~HideTangents() { --hidden_depth; }

int64_t current_dual_level() { return hidden_depth ? 0 : open_level.load(std::memory_order_relaxed); }

bool dual_level_open() { return open_level.load(std::memory_order_relaxed) != 0; }

int64_t enter_dual_level() {
  if (open_level.load() != 0 || hidden_depth)
    throw sdk::Error(TS_ERROR, "Nested forward mode AD is not supported at the moment");
  const int64_t level = next_level++;
  open_level = level;
  refresh_grad_mode();  // grad mode off keeps the Autograd keys from now on (meta.cpp)
  return level;
}

void exit_dual_level(int64_t level) {
  if (open_level.load() != level)
    throw sdk::Error(TS_ERROR, sdk::cat("Trying to exit a forward AD level that was not the last one that was "
                                        "created. This is not supported (level ", level, ")"));
  open_level = 0;  // tangents made at this level are no longer seen (tangent_of checks the level)
  refresh_grad_mode();
}

namespace {
bool same_layout(const TensorRef& a, const TensorRef& b) {
  return a.dtype() == b.dtype() && a.shape_vector() == b.shape_vector() &&
         std::equal(a.strides().begin(), a.strides().end(), b.strides().begin(), b.strides().end());
}

// No two elements share memory (an in-place copy into it is well defined).
bool writable(const TensorRef& t) { return !sdk::has_internal_overlap(t); }

// The base's tangent when a view can read its own out of it: the base has one at `level`, in the
// base's own layout and dtype (a tangent given in another layout is not addressed like the base).
const AutogradMeta* base_with_tangent(ts_tensor view, const AutogradMeta& m, int64_t level) {
  if (!m.is_view || !m.base.defined()) return nullptr;
  AutogradMeta* bm = meta_of(m.base.handle());
  if (!bm || !bm->tangent.defined() || bm->tangent_level != level) return nullptr;
  if (TensorRef::borrow(view).dtype() != m.base.dtype() || !same_layout(bm->tangent, m.base)) return nullptr;
  return bm;
}

// A view's tangent read out of its base's, as the view reads the base's data: the same sizes,
// strides and offset over the base's tangent.
TensorRef tangent_through_base(ts_tensor view, const AutogradMeta& m, int64_t level) {
  const AutogradMeta* bm = base_with_tangent(view, m, level);
  if (!bm) return {};
  const TensorRef v = TensorRef::borrow(view);
  const Geometry vg = Geometry::of(v), bg = Geometry::of(m.base);
  HideTangents plain;  // a view of a plain tensor: no tangent of its own to compute
  return sdk::ops::as_strided(bm->tangent, vg.sizes, vg.strides, bm->tangent.storage_offset() + vg.offset - bg.offset);
}
}  // namespace

TensorRef tangent_of(ts_tensor t) {
  if (!t) return {};
  const int64_t level = current_dual_level();
  if (level == 0) return {};
  AutogradMeta* m = meta_of(t);
  if (!m) return {};
  // A view sees its base's tangent, as PyTorch's views do: an in-place operator on the base (or on
  // another view of it) after this view was made shows in this view's tangent too.
  if (m->is_view) {
    TensorRef through_base = tangent_through_base(t, *m, level);
    if (through_base.defined()) return through_base;
  }
  if (!m->tangent.defined() || m->tangent_level != level) return {};
  return m->tangent;
}

void record_forward_view(ts_tensor out, ts_tensor self) {
  if (!out || !self || out == self || !forward_ad_active()) return;  // returned as is: not a view
  AutogradMeta* m = meta_of(out);
  if (m && m->is_view) return;  // reverse mode recorded it already
  record_view(TensorRef::borrow(out), TensorRef::borrow(self));
}

void set_inplace_tangent(ts_tensor self, const TensorRef& tangent, const char* op) {
  if (!self || !tangent.defined()) return;
  TensorRef primal = TensorRef::borrow(self);
  if (!is_differentiable_dtype(primal.dtype())) return;
  const int64_t level = current_dual_level();
  TensorRef target = tangent_of(self);
  AutogradMeta* m = meta_of(self);
  if (!target.defined() && m && m->is_view && m->base.defined() && m->base.dtype() == primal.dtype() &&
      writable(m->base)) {
    // A view written in place whose base has no tangent yet: the base gets a zero one in its own
    // layout, and the view's part of it takes the new tangent below.
    AutogradMeta& bm = ensure_meta(m->base.handle());
    if (!bm.tangent.defined() || bm.tangent_level != level) {
      HideTangents plain;
      TensorRef zeros = sdk::ops::empty_strided(m->base.shape_vector(), {m->base.strides().begin(), m->base.strides().end()},
                                                m->base.dtype(), m->base.device());
      bm.tangent = sdk::ops::fill_(zeros, 0.0);
      bm.tangent_level = level;
      target = tangent_through_base(self, *m, level);
    }
  }
  // In place, as PyTorch: the old tangent's memory takes the new one, so the base and every other
  // view of it see the change (and a tangent the caller passed to make_dual is updated).
  if (target.defined() && writable(target) && target.shape_vector() == tangent.shape_vector()) {
    if (!sdk::same_view(sdk::strided_view(target), sdk::strided_view(tangent)) || target.dtype() != tangent.dtype()) {
      HideTangents plain;
      sdk::ops::copy_(target, tangent);
    }
    AutogradMeta& own = ensure_meta(self);
    own.tangent = target;
    own.tangent_level = level;
    return;
  }
  set_tangent(self, tangent, op);
}

TensorRef tangent_or_zeros(ts_tensor t) {
  if (!t) return {};
  TensorRef tangent = tangent_of(t);
  return tangent.defined() ? tangent : sdk::ops::full_like(TensorRef::borrow(t), 0.0);
}

std::vector<TensorRef> tangents_or_zeros(const std::vector<ts_tensor>& ts) {
  std::vector<TensorRef> out;
  for (ts_tensor t : ts) out.push_back(tangent_or_zeros(t));
  return out;
}

namespace {
// Whether tangent_of(t) is defined, without making the view of its base's tangent (every operator
// asks this of each input while a level is open).
bool has_tangent(ts_tensor t) {
  const int64_t level = current_dual_level();
  AutogradMeta* m = t && level ? meta_of(t) : nullptr;
  if (!m) return false;
  return (m->tangent.defined() && m->tangent_level == level) || (m->is_view && base_with_tangent(t, *m, level));
}
}  // namespace

bool any_has_tangent(std::initializer_list<ts_tensor> tensors) {
  for (ts_tensor t : tensors)
    if (has_tangent(t)) return true;
  return false;
}

bool any_has_tangent(const std::vector<ts_tensor>& tensors) {
  for (ts_tensor t : tensors)
    if (has_tangent(t)) return true;
  return false;
}

void set_tangent(ts_tensor t, const TensorRef& tangent, const char* op) {
  if (!t || !tangent.defined()) return;
  TensorRef primal = TensorRef::borrow(t);
  if (!is_differentiable_dtype(primal.dtype())) return;
  if (primal.shape_vector() != tangent.shape_vector())
    throw sdk::Error(TS_ERROR, sdk::cat(op, ": Trying to set a forward gradient that has a different size than that of "
                                        "the original Tensor, this is not supported. Tensor is of size ",
                                        sdk::shape_text(primal.sizes()), " while the given forward gradient is of size ",
                                        sdk::shape_text(tangent.sizes()), "."));
  AutogradMeta& m = ensure_meta(t);
  m.tangent = tangent;
  m.tangent_level = current_dual_level();
}

TensorRef add_tangents(const TensorRef& a, const TensorRef& b) {
  if (!a.defined()) return b;
  if (!b.defined()) return a;
  return sdk::ops::add(a, b);
}

TensorRef match_result(const TensorRef& tangent, ts_tensor result) {
  if (!tangent.defined() || !result) return tangent;
  TensorRef r = TensorRef::borrow(result);
  TensorRef out = tangent;
  if (out.dtype() != r.dtype() && is_differentiable_dtype(r.dtype())) out = sdk::ops::to(out, r.dtype());
  if (out.shape_vector() != r.shape_vector()) out = sdk::ops::expand(out, r.shape_vector());
  return out;
}

void raise_no_jvp(const char* op) {
  throw sdk::Error(TS_ERROR_NOT_IMPLEMENTED,
                   sdk::cat("Trying to use forward AD with ", op, " that does not support it because it has not been "
                            "implemented yet (no jvp formula in derivatives.yaml)"));
}

}  // namespace tessera::autograd

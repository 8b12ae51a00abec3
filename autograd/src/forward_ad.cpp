#include "forward_ad.h"

#include "node.h"

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

TensorRef tangent_of(ts_tensor t) {
  if (!t) return {};
  AutogradMeta* m = meta_of(t);
  if (!m || !m->tangent.defined() || m->tangent_level != current_dual_level()) return {};
  return m->tangent;
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

bool any_has_tangent(std::initializer_list<ts_tensor> tensors) {
  for (ts_tensor t : tensors)
    if (tangent_of(t).defined()) return true;
  return false;
}

bool any_has_tangent(const std::vector<ts_tensor>& tensors) {
  for (ts_tensor t : tensors)
    if (tangent_of(t).defined()) return true;
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

#pragma once
// Forward-mode AD: tangents beside the tape. While a dual level is open, a tensor may carry a
// tangent (in its AutogradMeta); each Autograd kernel whose inputs carry one computes its
// outputs' tangents with the operator's jvp formula (derivatives.yaml's `result:`). Tangents
// are computed with ordinary operator calls, so they are themselves differentiable and batched.
#include "meta.h"

#include <initializer_list>
#include <vector>

namespace tessera::autograd {

// The open dual level (0: none). One level at a time, as PyTorch's forward AD.
int64_t current_dual_level();
inline bool forward_ad_active() { return current_dual_level() != 0; }
// Whether a level is open at all (tangents hidden or not).
bool dual_level_open();
int64_t enter_dual_level();
void exit_dual_level(int64_t level);

// While alive, this thread sees no dual level: a jvp formula reads its inputs' primal values
// (their tangents hidden), as PyTorch's formulas read unpacked primals. Without it, a formula's
// own operators on a dual input would compute that input's tangent again, without end.
class HideTangents {
 public:
  HideTangents();
  ~HideTangents();
  HideTangents(const HideTangents&) = delete;
  HideTangents& operator=(const HideTangents&) = delete;
};

// The tangent of `t` at the open level; undefined when it has none.
TensorRef tangent_of(ts_tensor t);
TensorRef tangent_or_zeros(ts_tensor t);
std::vector<TensorRef> tangents_or_zeros(const std::vector<ts_tensor>& ts);
bool any_has_tangent(std::initializer_list<ts_tensor> tensors);
bool any_has_tangent(const std::vector<ts_tensor>& tensors);
// Gives `t` a tangent at the open level (shape-checked against `t`, naming `op`).
void set_tangent(ts_tensor t, const TensorRef& tangent, const char* op);
// After an in-place operator on `self`: its new tangent is written into the old one's memory
// (a view's lives in its base's tangent, made zero for a base that had none), so the base and
// other views see it; a tangent that cannot be written (expanded) is replaced instead.
void set_inplace_tangent(ts_tensor self, const TensorRef& tangent, const char* op);
// Views made while a dual level is open remember their base (as reverse mode's do), so their
// tangent is read through the base's.
void record_forward_view(ts_tensor out, ts_tensor self);

// What jvp formulas share: a + b with undefined meaning zero; a tangent expanded and converted
// to its result's shape and dtype (element-wise formulas give each input's broadcast share).
TensorRef add_tangents(const TensorRef& a, const TensorRef& b);
TensorRef match_result(const TensorRef& tangent, ts_tensor result);
// Raised when a tangent reaches an operator without a jvp formula.
[[noreturn]] void raise_no_jvp(const char* op);

}  // namespace tessera::autograd

#pragma once
// Boxed calls of the autograd plugin's operators ("autograd::<name>"), for this library only.
#include <tessera/boxing.h>

#include <array>
#include <string_view>

namespace tessera::cpp_detail {

// The handle of "autograd::<name>", loading the plugin first when `load` (else nullptr when the
// plugin is not loaded).
OperatorHandle autograd_op(std::string_view name, bool load = true);

// The arguments of one call, boxed on the caller's stack (no operator takes more than 6).
class BoxedCall {
 public:
  template <class T>
  BoxedCall& arg(const T& v) {
    detail::box(slots_[size_t(n_++)], v);
    return *this;
  }
  // Calls `op`; the returns are then in ret(0), ret(1), ...
  BoxedCall& call(OperatorHandle op) {
    ts_stack stack{sizeof(ts_stack), slots_.data(), n_, int32_t(slots_.size())};
    detail::call(op, &stack, op->num_returns());
    return *this;
  }
  const ts_value& ret(int i) const { return slots_[size_t(i)]; }
  Tensor tensor(int i) const { return detail::unbox_tensor(slots_[size_t(i)]); }  // takes the reference

 private:
  std::array<ts_value, 8> slots_{};
  int32_t n_ = 0;
};

// A new reference to a tensor handle the stack lends us.
inline Tensor borrow(ts_tensor t) { return Tensor(IntrusivePtr<TensorImpl>::borrow(from_handle(t))); }

}  // namespace tessera::cpp_detail

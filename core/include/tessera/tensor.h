#pragma once
// Tensor: the user-facing handle, a reference-counted pointer to a TensorImpl.
// The operators (add, matmul, ...) are free functions generated from core/ops.yaml, in
// <tessera/ops.h>.
#include <tessera/tensor_impl.h>

#include <string>
#include <vector>

namespace tessera {

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(IntrusivePtr<TensorImpl> impl) : impl_(std::move(impl)) {}
  // Takes over a new reference from the C ABI.
  static Tensor adopt(ts_tensor t) { return Tensor(IntrusivePtr<TensorImpl>::adopt(from_handle(t))); }

  bool defined() const { return bool(impl_); }
  TensorImpl* impl() const { return impl_.get(); }
  ts_tensor handle() const { return to_handle(impl_.get()); }
  ts_tensor release_handle() { return to_handle(impl_.release()); }

  IntArrayRef sizes() const { return checked()->sizes(); }
  IntArrayRef strides() const { return checked()->strides(); }
  std::vector<int64_t> shape() const { auto s = sizes(); return {s.begin(), s.end()}; }
  int64_t size(int64_t d) const { return checked()->size(d); }
  int64_t stride(int64_t d) const { return checked()->stride(d); }
  int64_t dim() const { return checked()->dim(); }
  int64_t numel() const { return checked()->numel(); }
  ScalarType dtype() const { return checked()->dtype(); }
  Device device() const { return checked()->device(); }
  bool is_contiguous() const { return checked()->is_contiguous(); }
  int64_t storage_offset() const { return checked()->storage_offset(); }
  uint64_t version() const { return checked()->version(); }
  // Host pointer to element 0; raises for a device whose memory the host cannot read.
  template <class T> T* data_ptr() const { return static_cast<T*>(host_data()); }
  void* host_data() const;

  // The value of a one-element tensor, copied to the host.
  double item_double() const;
  int64_t item_int() const;
  // Every element converted to double, in row-major order (copies from the device).
  std::vector<double> to_double_vector() const;
  std::string str() const;  // short PyTorch-like rendering

 private:
  TensorImpl* checked() const;
  IntrusivePtr<TensorImpl> impl_;
};

}  // namespace tessera

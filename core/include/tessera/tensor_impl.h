#pragma once
// TensorImpl: the data model of a tensor. A ts_tensor handle of the C ABI is a TensorImpl*.
#include <tessera/dispatch_key.h>
#include <tessera/scalar_type.h>
#include <tessera/storage.h>

#include <boost/container/small_vector.hpp>

#include <array>
#include <span>

namespace tessera {

using SizeVector = boost::container::small_vector<int64_t, 6>;
using IntArrayRef = std::span<const int64_t>;

// State a transform plugin (autograd, vmap, tracer) keeps on a tensor. The plugin owns the
// data; `destroy` is called when the tensor dies.
struct ExtensionSlot {
  void* data = nullptr;
  void (*destroy)(void*) = nullptr;
};
inline constexpr int kNumExtensionSlots = 4;

class TensorImpl : public RefCounted {
 public:
  // A contiguous tensor over fresh or given storage.
  TensorImpl(Storage storage, ScalarType dtype, IntArrayRef sizes, IntArrayRef strides,
             int64_t storage_offset);
  ~TensorImpl();

  IntArrayRef sizes() const { return {sizes_.data(), sizes_.size()}; }
  IntArrayRef strides() const { return {strides_.data(), strides_.size()}; }
  int64_t dim() const { return int64_t(sizes_.size()); }
  int64_t size(int64_t d) const;    // negative d counts from the end; raises IndexError
  int64_t stride(int64_t d) const;
  int64_t numel() const { return numel_; }
  int64_t storage_offset() const { return storage_offset_; }
  ScalarType dtype() const { return dtype_; }
  Device device() const { return storage_->device(); }
  const Storage& storage() const { return storage_; }
  DispatchKeySet key_set() const { return keys_; }
  void set_key_set(DispatchKeySet k) { keys_ = k; }
  bool is_contiguous() const { return contiguous_; }
  // Address of element 0 (data + offset * itemsize); only host-accessible devices may read it.
  void* data() const { return static_cast<char*>(storage_->data()) + storage_offset_ * itemsize(dtype_); }
  uint64_t version() const { return storage_->version(); }
  void bump_version() { storage_->bump_version(); }

  // Changes the geometry in place (out= resizing, set_ views). Raises on overflow.
  void set_geometry(IntArrayRef sizes, IntArrayRef strides, int64_t storage_offset);
  void set_storage(Storage s) { storage_ = std::move(s); }
  // out= resizing: contiguous `sizes`, in the present storage when it is large enough, else in
  // new storage on the same device (the old contents are not kept, as PyTorch's resize_).
  void resize(IntArrayRef sizes, std::string_view what);

  ExtensionSlot& extension(int i) { return extensions_.at(size_t(i)); }

  // The DLPack-shaped view of the C ABI.
  void fill_view(ts_tensor_view* v) const;

 private:
  void refresh();

  Storage storage_;
  int64_t storage_offset_ = 0;
  SizeVector sizes_, strides_;
  int64_t numel_ = 0;
  ScalarType dtype_;
  bool contiguous_ = true;
  DispatchKeySet keys_;
  std::array<ExtensionSlot, kNumExtensionSlots> extensions_{};
};

// Contiguous (row-major) strides of `sizes`.
SizeVector contiguous_strides(IntArrayRef sizes);
// Product of sizes; raises ValueError on a negative size or int64 overflow naming `what`.
int64_t checked_numel(IntArrayRef sizes, std::string_view what);

inline TensorImpl* from_handle(ts_tensor t) { return reinterpret_cast<TensorImpl*>(t); }
inline ts_tensor to_handle(TensorImpl* t) { return reinterpret_cast<ts_tensor>(t); }

}  // namespace tessera

#include <tessera/device_registry.h>
#include <tessera/error.h>
#include <tessera/tensor_impl.h>

#include <algorithm>

namespace tessera {

SizeVector contiguous_strides(IntArrayRef sizes) {
  SizeVector strides(sizes.size());
  int64_t s = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = s;
    // Only a zero-size tensor can get here with a product past int64 (checked_numel refuses the
    // rest); its strides are never used to address memory, so wrapping is harmless (not UB).
    __builtin_mul_overflow(s, std::max<int64_t>(sizes[i], 1), &s);
  }
  return strides;
}

int64_t checked_numel(IntArrayRef sizes, std::string_view what) {
  for (size_t i = 0; i < sizes.size(); ++i)
    if (sizes[i] < 0) raise<ValueError>("{}: expected non-negative sizes, got size {} at dim {}", what, sizes[i], i);
  // A zero anywhere makes the count 0, however large the other sizes ([2**62, 2, 0] included).
  if (std::find(sizes.begin(), sizes.end(), int64_t(0)) != sizes.end()) return 0;
  int64_t n = 1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (__builtin_mul_overflow(n, sizes[i], &n))
      raise<ValueError>("{}: the number of elements of shape [{}] overflows int64", what, fmt::join(sizes, ", "));
  }
  return n;
}

TensorImpl::TensorImpl(Storage storage, ScalarType dtype, IntArrayRef sizes, IntArrayRef strides,
                       int64_t storage_offset)
    : storage_(std::move(storage)), dtype_(dtype) {
  set_geometry(sizes, strides, storage_offset);
  auto* entry = DeviceRegistry::instance().find(storage_->device().type());
  keys_ = DispatchKeySet(DispatchKeySet::bit(entry ? entry->key : 0));
}

TensorImpl::~TensorImpl() {
  for (auto& slot : extensions_)
    if (slot.data && slot.destroy) slot.destroy(slot.data);
}

int64_t TensorImpl::size(int64_t d) const {
  int64_t n = dim();
  if (d < -n || d >= n) raise<IndexError>("dimension {} is out of range for a tensor of {} dimensions", d, n);
  return sizes_[size_t(d < 0 ? d + n : d)];
}

int64_t TensorImpl::stride(int64_t d) const {
  int64_t n = dim();
  if (d < -n || d >= n) raise<IndexError>("dimension {} is out of range for a tensor of {} dimensions", d, n);
  return strides_[size_t(d < 0 ? d + n : d)];
}

void TensorImpl::resize(IntArrayRef sizes, std::string_view what) {
  const int64_t numel = checked_numel(sizes, what), isz = itemsize(dtype_);
  int64_t nbytes;
  if (__builtin_mul_overflow(numel, isz, &nbytes)) raise<ValueError>("{}: byte size overflows int64", what);
  if (storage_offset_ * isz + nbytes > int64_t(storage_->nbytes())) {
    storage_ = Storage::adopt(new StorageImpl(device(), size_t(nbytes)));
    set_geometry(sizes, {}, 0);
  } else {
    set_geometry(sizes, {}, storage_offset_);
  }
}

void TensorImpl::set_geometry(IntArrayRef sizes, IntArrayRef strides, int64_t storage_offset) {
  if (!strides.empty() && strides.size() != sizes.size())
    raise<ValueError>("tensor geometry: expected {} strides for {} sizes, got {}", sizes.size(), sizes.size(),
                      strides.size());
  numel_ = checked_numel(sizes, "tensor geometry");
  sizes_.assign(sizes.begin(), sizes.end());
  if (strides.empty())
    strides_ = contiguous_strides(sizes);
  else
    strides_.assign(strides.begin(), strides.end());
  if (storage_offset < 0) raise<ValueError>("tensor geometry: negative storage offset {}", storage_offset);
  storage_offset_ = storage_offset;
  refresh();
}

void TensorImpl::refresh() {
  contiguous_ = true;
  if (numel_ == 0) return;  // also keeps `expected` below from overflowing on [2**62, 4, 0]
  int64_t expected = 1;
  for (size_t i = sizes_.size(); i-- > 0;) {
    if (sizes_[i] == 1) continue;
    if (strides_[i] != expected) { contiguous_ = false; break; }
    expected *= sizes_[i];
  }
}

void TensorImpl::fill_view(ts_tensor_view* v) const {
  v->data = storage_->data();
  v->device = storage_->device().to_abi();
  v->dtype = int32_t(dtype_);
  v->ndim = int32_t(sizes_.size());
  v->shape = sizes_.data();
  v->strides = strides_.data();
  v->byte_offset = storage_offset_ * itemsize(dtype_);
  if (TS_STRUCT_HAS(v, ts_tensor_view, numel)) v->numel = numel_;
}

}  // namespace tessera

#include <tessera/device_registry.h>
#include <tessera/error.h>
#include <tessera/tensor.h>

#include <fmt/ranges.h>

#include <vector>

namespace tessera {

TensorImpl* Tensor::checked() const {
  if (!impl_) raise<RuntimeError>("the tensor is undefined (default-constructed or moved from)");
  return impl_.get();
}

void* Tensor::host_data() const {
  auto* entry = DeviceRegistry::instance().find(device().type());
  if (!entry || !entry->desc.host_accessible)
    raise<RuntimeError>("data_ptr: the memory of device '{}' is not host-accessible; copy the tensor to cpu first",
                        device().str());
  return checked()->data();
}

namespace {
// One element's values: a complex element gives its real and imaginary parts, in that order.
template <class T>
void append_values(std::vector<double>& out, T v) {
  if constexpr (sdk::is_complex_v<T>) {
    out.push_back(double(v.real()));
    out.push_back(double(v.imag()));
  } else {
    out.push_back(double(static_cast<sdk::opmath_t<T>>(v)));
  }
}
// A batched tensor (under vmap) is one sample's view of its batch: its elements are not its value.
void reject_batched(const TensorImpl* t, const char* what) {
  if (t->key_set().has(DispatchKey::Batched)) [[unlikely]]
    raise<RuntimeError>("vmap: It looks like you're calling .{}() on a Tensor. We don't support vmap over calling "
                        ".{}() on a Tensor, please try to rewrite what you're doing with other operations.", what, what);
}
}  // namespace

std::vector<double> Tensor::to_double_vector() const {
  auto* t = checked();
  reject_batched(t, "item");
  std::vector<double> out;
  out.reserve(size_t(t->numel()));
  if (t->numel() == 0) return out;
  // Span of storage the tensor touches, in elements from its offset.
  int64_t lo = 0, hi = 0;
  for (int64_t d = 0; d < t->dim(); ++d) {
    int64_t extent = (t->sizes()[d] - 1) * t->strides()[d];
    (extent < 0 ? lo : hi) += extent;
  }
  int64_t isz = itemsize(t->dtype());
  const auto& entry = DeviceRegistry::instance().require(t->device().type());
  std::vector<char> host;
  const char* base = static_cast<const char*>(t->data());
  if (!entry.desc.host_accessible) {
    host.resize(size_t((hi - lo + 1) * isz));
    ts_status s = entry.desc.copy_to_host(entry.desc.device_data, t->device().index(), host.data(),
                                          base + lo * isz, host.size());
    if (s != TS_OK) raise<RuntimeError>("copy from {} to host failed (plugin '{}')", t->device().str(), entry.plugin);
    base = host.data() - lo * isz;
  }
  std::vector<int64_t> index(size_t(t->dim()), 0);
  for (int64_t n = 0; n < t->numel(); ++n) {
    int64_t offset = 0;
    for (int64_t d = 0; d < t->dim(); ++d) offset += index[size_t(d)] * t->strides()[d];
    const char* p = base + offset * isz;
    TS_DISPATCH_ALL_AND_COMPLEX(int32_t(t->dtype()), raise<TypeError>("to_double_vector: invalid dtype code {}", int32_t(t->dtype())),
                                append_values(out, *reinterpret_cast<const scalar_t*>(p)));
    for (int64_t d = t->dim(); d-- > 0;) {
      if (++index[size_t(d)] < t->sizes()[d]) break;
      index[size_t(d)] = 0;
    }
  }
  return out;
}

double Tensor::item_double() const {
  if (numel() != 1) raise<ValueError>("item: expected a tensor with one element, got {} elements", numel());
  return to_double_vector()[0];
}

int64_t Tensor::item_int() const {
  if (numel() != 1) raise<ValueError>("item: expected a tensor with one element, got {} elements", numel());
  if (dtype() == kInt64) {  // exact beyond 2^53
    reject_batched(impl(), "item");
    int64_t v = 0;
    const auto& entry = DeviceRegistry::instance().require(device().type());
    entry.desc.copy_to_host(entry.desc.device_data, device().index(), &v, impl()->data(), sizeof v);
    return v;
  }
  return int64_t(to_double_vector()[0]);
}

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  auto values = to_double_vector();
  std::string dev = device().is_cpu() ? "" : fmt::format(", device='{}'", device().str());
  return fmt::format("tensor(shape=[{}], dtype={}{}, values=[{}])", fmt::join(sizes(), ", "), name(dtype()), dev,
                     fmt::join(values, ", "));
}

}  // namespace tessera

// Copies and conversions: copy_, to.dtype, contiguous, clone, fill_. The conversion loops live
// in the shared engine (copy_into); these kernels only decide what to copy where.
// Decision: new tensors made here are contiguous (PyTorch's clone/to keep a dense input's
// layout; a contiguous result is simpler and what `contiguous`-based callers need).
#include "kernels.h"
#include "tensor_iterator.h"

#include <cstring>
#include <type_traits>

namespace tessera::cpu {
namespace {

// copy_(Tensor(a!) self, Tensor src, bool non_blocking=False)
void copy_kernel(sdk::Args& a) {
  TensorRef self = a.tensor(0), src = a.tensor(1);
  copy_into(a.call(), self, src, "copy_");
  self.bump_version();
  a.return_argument(self);
}

// to.dtype(Tensor(a) self, ScalarType dtype, bool non_blocking=False, bool copy=False)
void to_dtype_kernel(sdk::Args& a) {
  TensorRef self = a.tensor(0);
  const std::optional<int32_t> dtype = a.optional_dtype(1);
  TS_SDK_CHECK(dtype, TS_ERROR_TYPE, "to: expected a dtype, got None");
  const bool copy = !a.is_none(3) && a.to_bool(3);
  if (*dtype == self.dtype() && !copy) return a.return_argument(self);
  a.return_tensor(convert(a.call(), self, *dtype, "to"));
}

// contiguous(Tensor(a) self)
void contiguous_kernel(sdk::Args& a) {
  TensorRef self = a.tensor(0);
  if (self.is_contiguous()) return a.return_argument(self);
  a.return_tensor(convert(a.call(), self, self.dtype(), "contiguous"));
}

// clone(Tensor self)
void clone_kernel(sdk::Args& a) {
  TensorRef self = a.tensor(0);
  a.return_tensor(convert(a.call(), self, self.dtype(), "clone"));
}

template <class T>
void fill_typed(const TensorRef& t, T value) {
  LoopGeometry g(1, t.shape_vector());
  g.set_operand(0, t.sizes(), t.strides(), t.itemsize());
  g.reorder_by_strides();
  g.coalesce();
  char* base[1] = {static_cast<char*>(t.data())};
  g.run(base, [value](char** d, const int64_t* s, int64_t n) {
    if (s[0] == sizeof(T)) {
      T* out = reinterpret_cast<T*>(d[0]);
      for (int64_t i = 0; i < n; ++i) out[i] = value;
    } else {
      for (int64_t i = 0; i < n; ++i) *reinterpret_cast<T*>(d[0] + i * s[0]) = value;
    }
  });
}

// Bit patterns suffice: one fill loop per element size, with the value converted once.
template <class T>
void fill_bits(const TensorRef& t, T value) {
  using W = std::conditional_t<sizeof(T) == 1, uint8_t,
                               std::conditional_t<sizeof(T) == 2, uint16_t, std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>>;
  W bits;
  std::memcpy(&bits, &value, sizeof bits);
  fill_typed(t, bits);
}

// fill_.Scalar(Tensor(a!) self, Scalar value)
void fill_kernel(sdk::Args& a) {
  TensorRef self = a.tensor(0);
  const ScalarArg value = a.scalar(1);
  const TensorRef* t[] = {&self};
  check_cpu("fill_", t);
  if (sdk::is_complex(self.dtype())) {  // 16-byte elements: no single machine word holds one
    TS_DISPATCH_COMPLEX(self.dtype(), , fill_typed(self, scalar_to<scalar_t>(value)));
  } else {
    TS_DISPATCH_ALL(self.dtype(), sdk::fail(TS_ERROR_TYPE, "fill_: unsupported dtype ", self.dtype()),
                    fill_bits(self, scalar_to<scalar_t>(value)));
  }
  self.bump_version();
  a.return_argument(self);
}

}  // namespace

void register_copy_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("copy_", key, copy_kernel);
  reg.kernel("to.dtype", key, to_dtype_kernel);
  reg.kernel("contiguous", key, contiguous_kernel);
  reg.kernel("clone", key, clone_kernel);
  reg.kernel("fill_.Scalar", key, fill_kernel);
}

}  // namespace tessera::cpu

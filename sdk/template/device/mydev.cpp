// A device plugin to start from: device "mydev", whose memory is ordinary host memory, with the
// kernels every device needs first (empty, copy_), two arithmetic kernels (add, mul: broadcast,
// every real dtype) and the three views autograd's formulas use (expand, unsqueeze, transpose).
// Everything else runs through the host: composites over these, the in-place and out= variants
// derived from them, and the CPU fallback for the rest. Replace the loops with your device's.
#include <tessera/sdk/index_geometry.h>
#include <tessera/sdk/plugin.h>
#include <tessera/sdk/view_geometry.h>

#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <vector>

namespace {
namespace sdk = tessera::sdk;

ts_dispatch_key g_key = -1;
int32_t g_type = -1;  // ts_device.type of our tensors (the host tells us: Registrar::device_type)

// ---- the device: allocation and copies (the host moves tensors with these)
int32_t device_count(void*) { return 1; }
void* allocate(void*, int32_t, size_t nbytes) { return std::malloc(nbytes ? nbytes : 1); }
void deallocate(void*, int32_t, void* p, size_t) { std::free(p); }
ts_status copy(void*, int32_t, void* dst, const void* src, size_t n) {
  std::memmove(dst, src, n);
  return TS_OK;
}

// ---- a strided loop over a broadcast shape: f(offsets) with one element offset per operand
std::vector<int64_t> strides_in(const sdk::TensorRef& t, const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 0);  // broadcast dims (missing or size 1) step by 0
  const size_t lead = shape.size() - size_t(t.dim());
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.size(d) != 1) s[lead + size_t(d)] = t.stride(d);
  return s;
}

template <size_t N, class F>
void for_each(const std::vector<int64_t>& shape, const std::vector<int64_t> (&strides)[N], F f) {
  for (int64_t n : shape)
    if (n == 0) return;
  std::vector<int64_t> index(shape.size(), 0);
  int64_t offsets[N] = {};
  for (;;) {
    f(offsets);
    int64_t d = int64_t(shape.size()) - 1;
    for (; d >= 0; --d) {  // the next index, last dim fastest
      for (size_t k = 0; k < N; ++k) offsets[k] += strides[k][size_t(d)];
      if (++index[size_t(d)] < shape[size_t(d)]) break;
      for (size_t k = 0; k < N; ++k) offsets[k] -= strides[k][size_t(d)] * shape[size_t(d)];
      index[size_t(d)] = 0;
    }
    if (d < 0) return;
  }
}

std::vector<int64_t> broadcast(const char* op, const sdk::TensorRef& a, const sdk::TensorRef& b) {
  std::vector<int64_t> shape = a.shape_vector();
  TS_SDK_CHECK(sdk::broadcast_into(shape, b.sizes()), TS_ERROR_VALUE, op, ": shapes ", sdk::shape_text(a.sizes()),
               " and ", sdk::shape_text(b.sizes()), " do not broadcast");
  return shape;
}

// ---- kernels
void empty_kernel(sdk::Args& a) {
  auto size = a.int_list(0);
  const int32_t dtype = a.optional_dtype(1).value_or(sdk::host().default_float_dtype());
  a.return_tensor(sdk::empty(a.call(), {size.begin(), size.end()}, dtype, ts_device{g_type, 0}));
}

// copy_(self, src): src broadcast into self, same dtype (mydev or CPU tensors: both host memory).
void copy_kernel(sdk::Args& a) {
  sdk::TensorRef self = a.tensor(0), src = a.tensor(1);
  TS_SDK_CHECK(self.dtype() == src.dtype(), TS_ERROR_TYPE, "copy_: mydev copies between equal dtypes only, got ",
               sdk::dtype_name(src.dtype()), " into ", sdk::dtype_name(self.dtype()));
  const std::vector<int64_t> shape = self.shape_vector();
  TS_SDK_CHECK(broadcast("copy_", self, src) == shape, TS_ERROR_VALUE, "copy_: the source's shape ",
               sdk::shape_text(src.sizes()), " does not broadcast to the target's ", sdk::shape_text(self.sizes()));
  const std::vector<int64_t> strides[2] = {strides_in(self, shape), strides_in(src, shape)};
  char* dst = self.data<char>();
  const char* from = src.data<char>();
  const int64_t size = self.itemsize();
  for_each(shape, strides, [&](const int64_t* o) { std::memcpy(dst + o[0] * size, from + o[1] * size, size_t(size)); });
  self.bump_version();
  a.return_argument(self);
}

// out = x + alpha * y (Add) or x * y, broadcast, in x's dtype (equal dtypes required).
template <bool Add>
void arithmetic_kernel(sdk::Args& a) {
  const char* op = Add ? "add.Tensor" : "mul.Tensor";
  sdk::TensorRef x = a.tensor(0), y = a.tensor(1);
  TS_SDK_CHECK(x.dtype() == y.dtype(), TS_ERROR_TYPE, op, ": mydev takes equal dtypes only, got ",
               sdk::dtype_name(x.dtype()), " and ", sdk::dtype_name(y.dtype()));
  const std::vector<int64_t> shape = broadcast(op, x, y);
  sdk::TensorRef out = sdk::empty(a.call(), shape, x.dtype(), x.device());
  const std::vector<int64_t> strides[3] = {strides_in(out, shape), strides_in(x, shape), strides_in(y, shape)};
  const double alpha = Add ? a.scalar(2).to_double() : 1.0;
  TS_DISPATCH_ALL(x.dtype(), sdk::fail(TS_ERROR_TYPE, op, ": mydev does not handle ", sdk::dtype_name(x.dtype())), {
    using T = scalar_t;
    using M = sdk::opmath_t<T>;  // float16/bfloat16 compute in float
    T* o = out.data<T>();
    const T* px = x.data<T>();
    const T* py = y.data<T>();
    for_each(shape, strides, [&](const int64_t* k) {
      if constexpr (std::is_same_v<T, bool>) o[k[0]] = Add ? (px[k[1]] || py[k[2]]) : (px[k[1]] && py[k[2]]);
      else o[k[0]] = T(Add ? M(px[k[1]]) + M(alpha) * M(py[k[2]]) : M(px[k[1]]) * M(py[k[2]]));
    });
  });
  a.return_tensor(std::move(out));
}

// Views share storage: the SDK computes the geometry (PyTorch's rules and messages), the host
// makes the alias.
void return_view(sdk::Args& a, const sdk::TensorRef& x, const sdk::ViewGeometry& g) {
  a.return_tensor(sdk::alias(a.call(), x, g.sizes, g.strides, sdk::host().tensor_storage_offset(x.handle())));
}
void expand_kernel(sdk::Args& a) { return_view(a, a.tensor(0), sdk::expand_geometry(a.tensor(0), a.int_list(1))); }
void unsqueeze_kernel(sdk::Args& a) { return_view(a, a.tensor(0), sdk::unsqueeze_geometry(a.tensor(0), a.to_int(1))); }
void transpose_kernel(sdk::Args& a) {
  return_view(a, a.tensor(0), sdk::transpose_geometry(a.tensor(0), a.to_int(1), a.to_int(2)));
}

void register_mydev(sdk::Registrar& reg) {
  ts_device_desc desc{};
  desc.struct_size = sizeof desc;
  desc.name = "mydev";
  desc.host_accessible = 1;  // its pointers are host pointers: the CPU fallback reads them directly
  desc.device_count = device_count;
  desc.allocate = allocate;
  desc.deallocate = deallocate;
  desc.copy_to_host = copy;
  desc.copy_from_host = copy;
  desc.copy_within = copy;
  g_key = reg.device(desc);
  g_type = reg.device_type("mydev");
  reg.kernel("empty", g_key, empty_kernel);
  reg.kernel("copy_", g_key, copy_kernel);
  reg.kernel("add.Tensor", g_key, arithmetic_kernel<true>);
  reg.kernel("mul.Tensor", g_key, arithmetic_kernel<false>);
  reg.kernel("expand", g_key, expand_kernel);
  reg.kernel("unsqueeze", g_key, unsqueeze_kernel);
  reg.kernel("transpose.int", g_key, transpose_kernel);
}
}  // namespace

// Needs host ABI 1.6 (Registrar::device_type).
TESSERA_PLUGIN("mydev", "0.1.0", 6, register_mydev)

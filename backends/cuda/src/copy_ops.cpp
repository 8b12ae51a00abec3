// Factories, copies and conversions: empty/zeros/ones/full, copy_ (device<->device,
// host->device, device->host; non_blocking with page-locked host memory), clone, contiguous,
// to.dtype, fill_. New tensors are contiguous.
#include "cuda_plugin.h"
#include <tessera/sdk/memory_overlap.h>

#include <cstring>

namespace tessera::gpu {
namespace {

constexpr ts_device kCpu{0, 0};

// (size, [fill], dtype, device) -> an unfilled tensor on our device.
TensorRef make(sdk::Args& a, const char* op, int first_option, int32_t default_dtype) {
  auto size = a.int_list(0);
  for (size_t i = 0; i < size.size(); ++i)
    TS_SDK_CHECK(size[i] >= 0, TS_ERROR_VALUE, op, ": expected a non-negative size, got ", size[i], " at dimension ", i);
  int32_t dtype = a.optional_dtype(first_option).value_or(default_dtype);
  auto device = a.optional_device(first_option + 1);
  TS_SDK_CHECK(device && is_ours(*device), TS_ERROR_VALUE, op, ": expected device=", kName, ", got ",
               device ? device_str(*device) : std::string("none"));
  require_device(op);
  return empty_on(a.call(), size, dtype, *device);
}

void fill(const TensorRef& t, const ScalarArg& v) {
  if (t.numel() == 0) return;
  auto shape = t.shape_vector();
  Loop L = make_loop("fill_", shape, {&t});
  L.scalar_d = v.to_double();
  L.scalar_i = v.to_int();
  DeviceGuard guard(t.device().index);
  launch_fill(L, stream_for(t.device().index));
}

void empty_k(sdk::Args& a) { a.return_tensor(make(a, "empty", 1, sdk::default_float_dtype())); }

void zeros_k(sdk::Args& a) {
  TensorRef t = make(a, "zeros", 1, sdk::default_float_dtype());
  if (t.numel()) {
    DeviceGuard guard(t.device().index);
    check(gpuMemsetAsync(t.data(), 0, size_t(t.numel() * t.itemsize()), stream_for(t.device().index)), "zeros");
  }
  a.return_tensor(std::move(t));
}

void ones_k(sdk::Args& a) {
  TensorRef t = make(a, "ones", 1, sdk::default_float_dtype());
  fill(t, ScalarArg{ScalarArg::Int, 1, 0});
  a.return_tensor(std::move(t));
}

void full_k(sdk::Args& a) {
  ScalarArg value = a.scalar(1);
  int32_t inferred = value.kind == ScalarArg::Double ? sdk::default_float_dtype()
                     : value.kind == ScalarArg::Bool ? TS_BOOL : TS_INT64;
  TensorRef t = make(a, "full", 2, inferred);
  fill(t, value);
  a.return_tensor(std::move(t));
}

void fill_k(sdk::Args& a) {
  TensorRef self = a.tensor(0);
  ScalarArg value = a.scalar(1);
  common_device("fill_", {&self});
  fill(self, value);
  self.bump_version();
  a.return_argument(self);
}

bool same_layout(const TensorRef& a, const TensorRef& b) {
  return a.dtype() == b.dtype() && a.is_contiguous() && b.is_contiguous() &&
         std::equal(a.sizes().begin(), a.sizes().end(), b.sizes().begin(), b.sizes().end());
}


// copy_ within one device. The kernel copies elements in parallel, so a source that shares
// memory with the destination (x[1:].copy_(x[:-1])) is first read whole into a private copy, as
// the CPU plugin does; a source that is the destination itself needs no copy (or converts each
// element in place, which no other element reads).
void copy_within_device(ts_call call, const TensorRef& self, const TensorRef& src) {
  const sdk::StridedView dst = sdk::strided_view(self), from = sdk::strided_view(src);
  TS_SDK_CHECK(!sdk::has_internal_overlap(dst), TS_ERROR_VALUE,
               "copy_: unsupported operation: more than one element of the written-to tensor refers to a single "
               "memory location");
  if (sdk::same_view(dst, from)) {
    if (self.dtype() != src.dtype()) copy_into("copy_", self, src);
    return;
  }
  if (sdk::may_overlap(dst, from)) {
    TensorRef staged = empty_on(call, src.sizes(), src.dtype(), src.device());
    copy_into("copy_", staged, src);
    return copy_into("copy_", self, staged);
  }
  copy_into("copy_", self, src);
}

const sdk::Operator& cpu_contiguous() { static sdk::Operator op("contiguous"); return op; }
const sdk::Operator& cpu_copy() { static sdk::Operator op("copy_"); return op; }

// copy_(Tensor(a!) self, Tensor src, bool non_blocking=False): either side may be the CPU.
// non_blocking: a copy straight between the device and a page-locked CPU tensor returns at once.
void copy_k(sdk::Args& a) {
  TensorRef self = a.tensor(0), src = a.tensor(1);
  const bool non_blocking = !a.is_none(2) && a.to_bool(2);
  const bool dst_ours = is_ours(self.device()), src_ours = is_ours(src.device());
  TS_SDK_CHECK((dst_ours || self.device().type == 0) && (src_ours || src.device().type == 0), TS_ERROR_VALUE,
               "copy_: ", kName, " copies between ", kName, " and cpu tensors only, got ", device_str(src.device()),
               " -> ", device_str(self.device()));
  if (self.numel() == 0) return a.return_argument(self);
  if (dst_ours && src_ours && self.device().index == src.device().index) {
    copy_within_device(a.call(), self, src);
  } else if (dst_ours) {
    // From the CPU (or another device, through the CPU): contiguous bytes up, then convert/broadcast.
    TensorRef host = src;
    if (src_ours) {
      TensorRef c = contiguous(a.call(), src, src.dtype());
      host = sdk::empty(a.call(), c.sizes(), c.dtype(), kCpu);
      copy_host(c.device().index, host.data(), c.data(), size_t(c.numel() * c.itemsize()), gpuMemcpyDeviceToHost,
                false, "copy_ (device to host)");
    } else if (!host.is_contiguous()) {
      host = cpu_contiguous().call(a.call(), {sdk::value(src)});
    }
    // A temporary `host` is pageable, so only the caller's own pinned tensor goes without waiting.
    if (same_layout(self, host)) {
      copy_host(self.device().index, self.data(), host.data(), size_t(host.numel() * host.itemsize()),
                gpuMemcpyHostToDevice, non_blocking, "copy_ (host to device)");
    } else {
      // `staged` goes back to the current stream's pool, in order behind the copy that reads it.
      TensorRef staged = empty_on(a.call(), host.sizes(), host.dtype(), self.device());
      copy_host(self.device().index, staged.data(), host.data(), size_t(host.numel() * host.itemsize()),
                gpuMemcpyHostToDevice, non_blocking, "copy_ (host to device)");
      copy_into("copy_", self, staged);
    }
  } else {
    // To the CPU: contiguous bytes down, then the CPU's copy_ converts/broadcasts/strides.
    TensorRef c = contiguous(a.call(), src, src.dtype());
    if (same_layout(self, c)) {
      copy_host(c.device().index, self.data(), c.data(), size_t(c.numel() * c.itemsize()), gpuMemcpyDeviceToHost,
                non_blocking, "copy_ (device to host)");
    } else {  // the CPU's copy_ reads `host` at once: this copy must have finished
      TensorRef host = sdk::empty(a.call(), c.sizes(), c.dtype(), kCpu);
      copy_host(c.device().index, host.data(), c.data(), size_t(c.numel() * c.itemsize()), gpuMemcpyDeviceToHost,
                false, "copy_ (device to host)");
      cpu_copy().call(a.call(), {sdk::value(self), sdk::value(host)});
    }
  }
  self.bump_version();
  a.return_argument(self);
}

TensorRef converted(ts_call call, const TensorRef& t, int32_t dtype, const char* op) {
  common_device(op, {&t});
  TensorRef out = empty_on(call, t.sizes(), dtype, t.device());
  if (t.numel()) copy_into(op, out, t);
  return out;
}

void clone_k(sdk::Args& a) {
  TensorRef self = a.tensor(0);
  a.return_tensor(converted(a.call(), self, self.dtype(), "clone"));
}

void contiguous_k(sdk::Args& a) {
  TensorRef self = a.tensor(0);
  if (self.is_contiguous()) return a.return_argument(self);
  a.return_tensor(converted(a.call(), self, self.dtype(), "contiguous"));
}

// to.dtype(Tensor(a) self, ScalarType dtype, bool non_blocking=False, bool copy=False)
void to_dtype_k(sdk::Args& a) {
  TensorRef self = a.tensor(0);
  auto dtype = a.optional_dtype(1);
  TS_SDK_CHECK(dtype, TS_ERROR_TYPE, "to: expected a dtype, got None");
  bool copy = !a.is_none(3) && a.to_bool(3);
  if (*dtype == self.dtype() && !copy) return a.return_argument(self);
  a.return_tensor(converted(a.call(), self, *dtype, "to"));
}
}  // namespace

void register_copy_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("empty", key, empty_k);
  reg.kernel("zeros", key, zeros_k);
  reg.kernel("ones", key, ones_k);
  reg.kernel("full", key, full_k);
  reg.kernel("fill_.Scalar", key, fill_k);
  reg.kernel("copy_", key, copy_k);
  reg.kernel("clone", key, clone_k);
  reg.kernel("contiguous", key, contiguous_k);
  reg.kernel("to.dtype", key, to_dtype_k);
}

}  // namespace tessera::gpu

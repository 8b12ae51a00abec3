// Host-side helpers shared by the second set of operator families (see more_ops.h).
#include "more_ops.h"

#include <algorithm>
#include <cstdint>

namespace tessera::gpu {

int dtype_category(int32_t d) { return d == TS_BOOL ? 0 : sdk::is_floating(d) ? 2 : 1; }

void ResultType::tensor(const TensorRef& t) {
  int32_t& slot = t.dim() == 0 ? zero_dim : dimensioned;
  slot = slot < 0 ? t.dtype() : sdk::promote_types(slot, t.dtype());
}
void ResultType::scalar(const ScalarArg& s) {
  int32_t d = s.kind == ScalarArg::Double ? sdk::default_float_dtype() : s.kind == ScalarArg::Bool ? TS_BOOL : TS_INT64;
  number = number < 0 ? d : sdk::promote_types(number, d);
}
int32_t ResultType::result() const {
  int32_t r = dimensioned;
  for (int32_t lower : {zero_dim, number}) {
    if (lower < 0) continue;
    if (r < 0) r = lower;
    else if (dtype_category(lower) > dtype_category(r)) r = sdk::promote_types(r, lower);
  }
  return r;
}

bool is_cpu_number(const TensorRef& t) { return t.device().type == 0 && t.dim() == 0; }

ScalarArg scalar_of_cpu_tensor(const TensorRef& t) {
  ScalarArg s;
  const char* p = static_cast<const char*>(t.data());
  TS_DISPATCH_ALL(t.dtype(), sdk::fail(TS_ERROR_TYPE, "invalid dtype"), {
    auto v = static_cast<sdk::opmath_t<scalar_t>>(*reinterpret_cast<const scalar_t*>(p));
    if (sdk::is_floating(t.dtype())) { s.kind = ScalarArg::Double; s.d = double(v); }
    else if (t.dtype() == TS_BOOL) { s.kind = ScalarArg::Bool; s.i = int64_t(v); }
    else { s.kind = ScalarArg::Int; s.i = int64_t(v); }
  });
  return s;
}

TensorRef new_or_self(sdk::Args& a, const char* op, bool inplace, const TensorRef& self, std::span<const int64_t> shape,
                      int32_t dtype) {
  if (!inplace) return empty_on(a.call(), shape, dtype, self.device());
  TS_SDK_CHECK(dtype_category(dtype) <= dtype_category(self.dtype()), TS_ERROR_TYPE, op, ": result type ",
               sdk::dtype_name(dtype), " can't be cast to the desired output type ", sdk::dtype_name(self.dtype()));
  TS_SDK_CHECK(std::equal(shape.begin(), shape.end(), self.sizes().begin(), self.sizes().end()), TS_ERROR_VALUE, op,
               ": output with shape ", shape_text(self.sizes()), " doesn't match the broadcast shape ", shape_text(shape));
  return self;
}

void finish_output(sdk::Args& a, bool inplace, TensorRef&& out) {
  if (inplace) {
    out.bump_version();
    a.return_argument(out);
  } else {
    a.return_tensor(std::move(out));
  }
}

std::optional<int64_t> first_flagged(ts_call call, const TensorRef& t, int64_t lo, int64_t hi, bool flag_inside) {
  if (t.numel() == 0) return std::nullopt;
  const int32_t dev = t.device().index;
  auto shape = t.shape_vector();
  Loop L = make_loop("a value check", shape, {&t});
  const int64_t one[1] = {1};
  TensorRef flag = empty_on(call, one, TS_INT64, t.device());
  Loop F = make_loop("a value check", std::span<const int64_t>(one, 1), {&flag});
  F.scalar_i = INT64_MAX;
  DeviceGuard guard(dev);
  gpuStream_t s = stream_for(dev);
  launch_fill(F, s);
  launch_value_check(L, lo, hi, flag_inside, static_cast<int64_t*>(flag.data()), s);
  int64_t pos = INT64_MAX;
  copy_host(dev, &pos, flag.data(), sizeof pos, gpuMemcpyDeviceToHost, false, "reading a value check");
  if (pos == INT64_MAX) return std::nullopt;
  // The flagged element's offset: row-major position over t's shape.
  int64_t offset = 0, rest = pos;
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    offset += (rest % t.size(d)) * t.stride(d);
    rest /= t.size(d);
  }
  int64_t bytes = 0;
  copy_host(dev, &bytes, first_element(t) + offset * t.itemsize(), size_t(t.itemsize()), gpuMemcpyDeviceToHost, false,
            "reading a value check");
  switch (t.dtype()) {
    case TS_INT32: return int64_t(int32_t(bytes));
    case TS_INT16: return int64_t(int16_t(bytes));
    case TS_INT8: return int64_t(int8_t(bytes));
    case TS_UINT8: case TS_BOOL: return int64_t(uint8_t(bytes));
    default: return bytes;
  }
}

void check_index_dtype(const char* op, const TensorRef& index) {
  TS_SDK_CHECK(index.dtype() == TS_INT64 || index.dtype() == TS_INT32, TS_ERROR_TYPE, op,
               ": expected index of dtype int64 or int32, got ", sdk::dtype_name(index.dtype()));
}

void check_index_range(ts_call call, const char* op, const TensorRef& index, int64_t dim, int64_t size) {
  if (auto v = first_flagged(call, index, 0, size, false))
    sdk::fail(TS_ERROR_INDEX, op, ": index ", *v, " is out of range for dimension ", dim, " with size ", size);
}

void register_more_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  register_elementwise_more_kernels(reg, key);
  register_reduction_more_kernels(reg, key);
  register_factory_kernels(reg, key);
  register_indexing_kernels(reg, key);
  register_advanced_index_kernels(reg, key);
  register_scan_kernels(reg, key);
  register_bucket_kernels(reg, key);
  register_flip_kernels(reg, key);
}

}  // namespace tessera::gpu

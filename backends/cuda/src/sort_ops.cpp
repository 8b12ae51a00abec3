// sort.stable and topk: checks and messages of the CPU plugin (backends/cpu/src/sort.cpp); the
// dim is moved last and made contiguous, each row sorted stably by CUB (sort_cub.cu), values
// gathered by the sorted positions. topk is a sort, then its first k: largest is the descending
// order (NaN first), smallest the ascending one, ties by index, as the CPU's; sorted=False
// returns those k in index order, as the CPU. CUDA only (CUB).
#include "cuda_plugin.h"
#include "sort_launch.h"

#include <climits>

namespace tessera::gpu {
namespace {

// t with dims d and its last swapped (a view); a 0-dim t as one element.
TensorRef with_dim_last(ts_call call, const TensorRef& t, int64_t d) {
  const int64_t offset = sdk::host().tensor_storage_offset(t.handle());
  if (t.dim() == 0) {
    const int64_t one[] = {1};
    return restride(call, t, one, one, offset);
  }
  std::vector<int64_t> shape = t.shape_vector(), strides(t.strides().begin(), t.strides().end());
  std::swap(shape[size_t(d)], shape.back());
  std::swap(strides[size_t(d)], strides.back());
  return restride(call, t, shape, strides, offset);
}
// The inverse for a contiguous result computed in that layout.
TensorRef from_rows(ts_call call, const TensorRef& rows, const TensorRef& self, int64_t d) {
  if (self.dim() == 0) return restride(call, rows, {}, {}, 0);
  if (d == self.dim() - 1) return rows;
  return contiguous(call, with_dim_last(call, rows, d), rows.dtype());
}

TensorRef scratch_of(ts_call call, size_t bytes, ts_device device) {
  const int64_t shape[] = {int64_t(bytes > 0 ? bytes : 1)};
  return empty_on(call, shape, TS_UINT8, device);
}

// The sorted positions (int64, rows x n) of every row of the contiguous `rows` tensor.
TensorRef sorted_positions(ts_call call, const TensorRef& rows, int64_t n, bool descending) {
  const ts_device dev = rows.device();
  const int64_t total = rows.numel(), shape[] = {total}, offsets_shape[] = {total / n + 1};
  const int32_t key_dtype = sort_key_bytes(rows.dtype()) == 8 ? TS_INT64 : TS_INT32;
  TensorRef keys = empty_on(call, shape, key_dtype, dev), keys_sorted = empty_on(call, shape, key_dtype, dev);
  TensorRef index = empty_on(call, shape, TS_INT64, dev), index_sorted = empty_on(call, shape, TS_INT64, dev);
  TensorRef offsets = empty_on(call, offsets_shape, TS_INT64, dev);
  RowSort s;
  s.in = first_element(rows);
  s.dtype = rows.dtype();
  s.rows = total / n;
  s.n = n;
  s.descending = descending;
  s.keys = keys.data();
  s.keys_sorted = keys_sorted.data();
  s.index = static_cast<int64_t*>(index.data());
  s.index_sorted = static_cast<int64_t*>(index_sorted.data());
  s.offsets = static_cast<int64_t*>(offsets.data());
  DeviceGuard guard(dev.index);
  gpuStream_t stream = stream_for(dev.index);
  s.scratch_bytes = launch_sort_rows(s, stream);
  TensorRef scratch = scratch_of(call, s.scratch_bytes, dev);
  s.scratch = scratch.data();
  launch_sort_rows(s, stream);
  return index_sorted;
}

// The checks both operators share: a real dtype, a size CUB's 32-bit counts take.
void check_sortable(const char* op, const TensorRef& self) {
  common_device(op, {&self});
  TS_SDK_CHECK(!sdk::is_complex(self.dtype()), TS_ERROR_TYPE, op, ": unsupported dtype");
  TS_SDK_CHECK(self.numel() < INT_MAX, TS_ERROR_VALUE, op, ": the ", kName,
               " sort handles fewer than 2^31 - 1 elements, got ", self.numel());
}

// sort.stable(Tensor self, *, bool? stable, int dim=-1, bool descending=False) -> (values, indices)
void sort_k(sdk::Args& a) {
  TensorRef self = a.tensor(0);
  const int64_t dim = wrap_dim("sort", a.to_int(2), self.dim());
  const bool descending = a.to_bool(3);
  check_sortable("sort", self);
  TensorRef rows = contiguous(a.call(), with_dim_last(a.call(), self, dim), self.dtype());
  const int64_t n = rows.size(rows.dim() - 1);
  TensorRef values = empty_on(a.call(), rows.sizes(), rows.dtype(), rows.device());
  TensorRef indices = empty_on(a.call(), rows.sizes(), TS_INT64, rows.device());
  if (rows.numel() > 0) {
    TensorRef order = sorted_positions(a.call(), rows, n, descending);
    DeviceGuard guard(self.device().index);
    launch_take_rows(first_element(rows), rows.dtype(), rows.numel() / n, n, static_cast<const int64_t*>(order.data()),
                     n, n, first_element(values), static_cast<int64_t*>(indices.data()), stream_for(self.device().index));
  }
  a.returns({sdk::Args::tensor_value(from_rows(a.call(), values, self, dim)),
             sdk::Args::tensor_value(from_rows(a.call(), indices, self, dim))});
}

// topk(Tensor self, int k, int dim=-1, bool largest=True, bool sorted=True) -> (values, indices)
void topk_k(sdk::Args& a) {
  TensorRef self = a.tensor(0);
  const int64_t k = a.to_int(1);
  const int64_t dim = wrap_dim("topk", a.to_int(2), self.dim());
  const bool largest = a.to_bool(3), sorted = a.to_bool(4);
  const int64_t size = self.dim() == 0 ? 1 : self.size(dim);
  if (k < 0 || k > size)
    sdk::fail(TS_ERROR_INDEX, "topk: selected index k out of range (k = ", k, ", but dimension ", dim, " has size ", size,
              ")");
  check_sortable("topk", self);
  TensorRef rows = contiguous(a.call(), with_dim_last(a.call(), self, dim), self.dtype());
  std::vector<int64_t> shape = rows.shape_vector();
  shape.back() = k;
  TensorRef values = empty_on(a.call(), shape, rows.dtype(), rows.device());
  TensorRef indices = empty_on(a.call(), shape, TS_INT64, rows.device());
  if (k > 0 && rows.numel() > 0) {
    const int64_t n = size, count = rows.numel() / n;
    TensorRef order = sorted_positions(a.call(), rows, n, largest);
    const int32_t dev = self.device().index;
    DeviceGuard guard(dev);
    gpuStream_t stream = stream_for(dev);
    const char* in = first_element(rows);
    auto* out_index = static_cast<int64_t*>(indices.data());
    launch_take_rows(in, rows.dtype(), count, n, static_cast<const int64_t*>(order.data()), n, k, first_element(values),
                     out_index, stream);
    if (!sorted) {  // the k chosen, in index order
      const int64_t flat[] = {count * k}, offsets_shape[] = {count + 1};
      TensorRef by_index = empty_on(a.call(), flat, TS_INT64, rows.device());
      TensorRef offsets = empty_on(a.call(), offsets_shape, TS_INT64, rows.device());
      auto* by_index_p = static_cast<int64_t*>(by_index.data());
      auto* offsets_p = static_cast<int64_t*>(offsets.data());
      const size_t bytes = launch_sort_index_rows(out_index, by_index_p, count, k, offsets_p, nullptr, 0, stream);
      TensorRef scratch = scratch_of(a.call(), bytes, rows.device());
      launch_sort_index_rows(out_index, by_index_p, count, k, offsets_p, scratch.data(), bytes, stream);
      launch_take_rows(in, rows.dtype(), count, n, by_index_p, k, k, first_element(values), out_index, stream);
    }
  }
  a.returns({sdk::Args::tensor_value(from_rows(a.call(), values, self, dim)),
             sdk::Args::tensor_value(from_rows(a.call(), indices, self, dim))});
}
}  // namespace

void register_sort_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("sort.stable", key, sort_k);
  reg.kernel("topk", key, topk_k);
}

}  // namespace tessera::gpu

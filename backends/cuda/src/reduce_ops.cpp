// Reductions (sum, mean, amax, amin over a dim list, keepdim, dtype=) and softmax/log_softmax:
// the host orders the input's dims as [kept..., reduced...]; reduce.cu does the rest.
#include "cuda_plugin.h"
#include "reduction_plan.h"
#include "workspace.h"

#include <cmath>
#include <mutex>
#include <optional>

namespace tessera::gpu {

Reduction plan_reduction(const char* op, const TensorRef& self, const std::vector<bool>& mask, bool keepdim,
                         std::vector<int64_t>& out_shape) {
  Reduction r;
  std::vector<int64_t> kept_sizes, kept_strides, red_sizes, red_strides;
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (mask[size_t(d)]) {
      red_sizes.push_back(self.size(d));
      red_strides.push_back(self.stride(d));
      r.reduced *= self.size(d);
      if (keepdim) out_shape.push_back(1);
    } else {
      kept_sizes.push_back(self.size(d));
      kept_strides.push_back(self.stride(d));
      r.kept *= self.size(d);
      out_shape.push_back(self.size(d));
    }
  }
  coalesce_dims(kept_sizes, kept_strides);
  coalesce_dims(red_sizes, red_strides);
  const int32_t nk = int32_t(kept_sizes.size()), nr = int32_t(red_sizes.size());
  TS_SDK_CHECK(nk + nr <= kMaxDims, TS_ERROR_VALUE, op, ": at most ", kMaxDims, " dims are supported on ", kName);
  r.ndim_kept = nk;
  r.ndim_reduced = nr;
  for (int32_t i = 0; i < nk; ++i) r.sizes[i] = kept_sizes[size_t(i)], r.in.strides[i] = kept_strides[size_t(i)];
  for (int32_t i = 0; i < nr; ++i) r.sizes[nk + i] = red_sizes[size_t(i)], r.in.strides[nk + i] = red_strides[size_t(i)];
  return r;
}

void bind_reduction(Reduction& r, const TensorRef& self, const TensorRef& out) {
  r.in.data = first_element(self);
  r.in.dtype = self.dtype();
  r.in.itemsize = int32_t(self.itemsize());
  r.out.data = first_element(out);
  r.out.dtype = out.dtype();
  r.out.itemsize = int32_t(out.itemsize());
}

int32_t multiprocessor_count(int32_t index) {
  static std::mutex mutex;
  static std::vector<int32_t> counts;
  std::lock_guard lock(mutex);
  if (counts.size() <= size_t(index)) counts.resize(size_t(index) + 1, 0);
  int32_t& n = counts[size_t(index)];
  if (!n) {
    gpuDeviceProp p{};
    check(gpuGetDeviceProperties(&p, index), "reading the device's multiprocessor count");
    n = p.multiProcessorCount > 0 ? p.multiProcessorCount : 1;
  }
  return n;
}

void split_reduction(Reduction& r, int32_t index, size_t partial_bytes, std::optional<Workspace>& scratch) {
  r.splits = reduction_splits(r.kept, r.reduced, multiprocessor_count(index));
  r.partials = nullptr;
  if (r.splits <= 1) return;
  scratch.emplace(index, size_t(r.kept * r.splits) * partial_bytes, stream_for(index));
  if (scratch->ok) r.partials = static_cast<char*>(scratch->ptr);
  else r.splits = 1;  // no room for the partials: one block per output still works
}

void run_reduction(ReduceOp op, Compute acc, Reduction r, int32_t index) {
  std::optional<Workspace> partials;  // given back once the kernels are queued (stream-ordered)
  split_reduction(r, index, sizeof(double), partials);
  launch_reduce(op, acc, r, stream_for(index));
}

namespace {

// Which dims are reduced: none given (or an empty list) means all of them.
std::vector<bool> reduced_mask(const char* op, std::optional<std::span<const int64_t>> dims, int64_t ndim) {
  std::vector<bool> mask(size_t(ndim), !dims || dims->empty());
  if (dims)
    for (int64_t d : *dims) {
      int64_t w = wrap_dim(op, d, ndim);
      if (ndim == 0) continue;
      TS_SDK_CHECK(!mask[size_t(w)] || dims->empty(), TS_ERROR_VALUE, op, ": dim ", w,
                   " appears multiple times in the list of dims");
      mask[size_t(w)] = true;
    }
  return mask;
}

TensorRef reduce(sdk::Args& a, const char* op, ReduceOp rop, const TensorRef& self,
                 std::optional<std::span<const int64_t>> dims, bool keepdim, int32_t out_dtype, bool mean) {
  common_device(op, {&self});
  auto mask = reduced_mask(op, dims, self.dim());
  std::vector<int64_t> out_shape;
  Reduction r = plan_reduction(op, self, mask, keepdim, out_shape);
  TS_SDK_CHECK(rop == ReduceOp::Sum || r.reduced > 0 || r.kept == 0, TS_ERROR_INDEX, op,
               ": expected reduction dims to have non-zero size (input shape ", shape_text(self.sizes()), ")");
  TensorRef out = empty_on(a.call(), out_shape, out_dtype, self.device());
  if (r.kept == 0) return out;
  bind_reduction(r, self, out);
  if (mean) r.scale = r.reduced ? 1.0 / double(r.reduced) : NAN;
  DeviceGuard guard(self.device().index);
  run_reduction(rop, compute_for(out_dtype), r, self.device().index);
  return out;
}

// sum.dim_IntList(Tensor self, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None)
void sum_k(sdk::Args& a) {
  TensorRef self = a.tensor(0);
  int32_t dtype = a.optional_dtype(3).value_or(sdk::is_integral(self.dtype(), true) ? TS_INT64 : self.dtype());
  a.return_tensor(reduce(a, "sum", ReduceOp::Sum, self, a.optional_int_list(1), !a.is_none(2) && a.to_bool(2), dtype,
                         false));
}

void mean_k(sdk::Args& a) {
  TensorRef self = a.tensor(0);
  auto dtype = a.optional_dtype(3);
  TS_SDK_CHECK(dtype || sdk::is_floating(self.dtype()), TS_ERROR_TYPE, "mean(): could not infer output dtype. Input "
               "dtype must be either a floating point or complex dtype. Got: ", sdk::dtype_name(self.dtype()));
  TS_SDK_CHECK(!dtype || sdk::is_floating(*dtype), TS_ERROR_TYPE, "mean(): expected a floating dtype=, got ",
               sdk::dtype_name(*dtype));
  a.return_tensor(reduce(a, "mean", ReduceOp::Sum, self, a.optional_int_list(1), !a.is_none(2) && a.to_bool(2),
                         dtype.value_or(self.dtype()), true));
}

template <bool Max>
void extremum_k(sdk::Args& a) {
  TensorRef self = a.tensor(0);
  auto dims = a.is_none(1) ? std::optional<std::span<const int64_t>>() : a.int_list(1);
  a.return_tensor(reduce(a, Max ? "amax" : "amin", Max ? ReduceOp::Max : ReduceOp::Min, self, dims,
                         !a.is_none(2) && a.to_bool(2), self.dtype(), false));
}

// softmax.int(Tensor self, int dim, ScalarType? dtype=None)
template <bool Log>
void softmax_k(sdk::Args& a) {
  const char* op = Log ? "log_softmax" : "softmax";
  TensorRef self = a.tensor(0);
  common_device(op, {&self});
  int64_t dim = wrap_dim(op, a.to_int(1), self.dim());
  int32_t dtype = a.optional_dtype(2).value_or(self.dtype());
  TS_SDK_CHECK(sdk::is_floating(dtype), TS_ERROR_TYPE, op, ": expected a floating tensor or dtype=, got ",
               sdk::dtype_name(dtype));
  TensorRef in = contiguous(a.call(), self, self.dtype());
  TensorRef out = empty_on(a.call(), self.sizes(), dtype, self.device());
  SoftmaxArgs s;
  s.in = first_element(in);
  s.out = first_element(out);
  s.in_dtype = in.dtype();
  s.out_dtype = dtype;
  s.log = Log;
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (d < dim) s.outer *= self.size(d);
    else if (d > dim) s.inner *= self.size(d);
  }
  s.dim = self.dim() ? self.size(dim) : 1;
  const int32_t index = self.device().index;
  DeviceGuard guard(index);
  // Few long rows: each split over several blocks (reduction_plan.h), partials on the stream.
  s.splits = reduction_splits(s.outer * s.inner, s.dim, multiprocessor_count(index));
  std::optional<Workspace> partials;
  if (s.splits > 1) {
    partials.emplace(index, size_t(2 * s.outer * s.inner * s.splits) * sizeof(double), stream_for(index));
    if (partials->ok) s.partials = static_cast<double*>(partials->ptr);
    else s.splits = 1;
  }
  launch_softmax(compute_for(dtype), s, stream_for(index));
  a.return_tensor(std::move(out));
}
}  // namespace

void register_reduction_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("sum.dim_IntList", key, sum_k);
  reg.kernel("mean.dim", key, mean_k);
  reg.kernel("amax", key, extremum_k<true>);
  reg.kernel("amin", key, extremum_k<false>);
  reg.kernel("softmax.int", key, softmax_k<false>);
  reg.kernel("log_softmax.int", key, softmax_k<true>);
}

}  // namespace tessera::gpu

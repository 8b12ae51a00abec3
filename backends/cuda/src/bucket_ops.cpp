// searchsorted.Tensor and bincount: checks, dtypes and messages of the CPU plugin (sort.cpp); the
// searches and counts are in bucket.cu. bincount reads the values' range back (one sync) to size
// its output and to refuse negative values.
#include "more_ops.h"
#include "order_launch.h"

#include <algorithm>

namespace tessera::gpu {
namespace {

// searchsorted.Tensor(sorted_sequence, self, *, out_int32, right, side, sorter)
void searchsorted_k(sdk::Args& a) {
  TensorRef seq = a.tensor(0), values = a.tensor(1);
  bool out_int32 = a.to_bool(2), right = a.to_bool(3);
  const auto side = a.optional_str(4);
  const auto sorter = a.optional_tensor(5);
  if (side) {
    if (*side != "left" && *side != "right")
      sdk::fail(TS_ERROR_VALUE, "searchsorted: side can only be 'left' or 'right' but got ", std::string(*side));
    if (right && *side == "left")
      sdk::fail(TS_ERROR_VALUE,
                "searchsorted: side and right can't be set to opposites, got side of left while right was True");
    right = *side == "right";
  }
  if (seq.dim() == 0)
    sdk::fail(TS_ERROR_VALUE, "searchsorted: boundaries tensor should be 1 dimension or the first N-1 dimensions of "
              "boundaries tensor and input value tensor must match, but we got boundaries tensor with 0 dimensions");
  if (seq.dim() > 1) {
    bool match = values.dim() == seq.dim();
    for (int64_t d = 0; match && d < seq.dim() - 1; ++d) match = seq.size(d) == values.size(d);
    if (!match)
      sdk::fail(TS_ERROR_VALUE, "searchsorted: boundaries tensor should be 1 dimension or the first N-1 dimensions of "
                "boundaries tensor and input value tensor must match");
  }
  common_device("searchsorted", {&seq, &values});
  if (sorter) {  // the boundaries in sorted order: gather along the last dim (our gather kernel)
    static const sdk::Operator gather("gather");
    seq = gather.call(a.call(), {sdk::value(seq), sdk::value(int64_t(-1)), sdk::value(*sorter)});
  }
  const int32_t common = sdk::promote_types(seq.dtype(), values.dtype());
  TS_SDK_CHECK(!sdk::is_complex(common), TS_ERROR_TYPE, "searchsorted: unsupported dtype");
  TensorRef s = contiguous(a.call(), seq, common), v = contiguous(a.call(), values, common);
  TensorRef out = empty_on(a.call(), values.sizes(), out_int32 ? TS_INT32 : TS_INT64, values.device());
  SearchArgs args;
  args.sorted = first_element(s);
  args.values = first_element(v);
  args.out = first_element(out);
  args.dtype = common;
  args.out_int32 = out_int32;
  args.right = right;
  args.numel = v.numel();
  args.n = s.size(s.dim() - 1);
  args.per_row = std::max<int64_t>(1, seq.dim() == 1 ? v.numel() : (v.dim() ? v.size(v.dim() - 1) : 1));
  DeviceGuard guard(values.device().index);
  launch_searchsorted(compute_for(common), args, stream_for(values.device().index));
  a.return_tensor(std::move(out));
}

// bincount(Tensor self, Tensor? weights=None, int minlength=0)
void bincount_k(sdk::Args& a) {
  TensorRef self = a.tensor(0);
  const auto weights = a.optional_tensor(1);
  const int64_t minlength = a.to_int(2);
  if (self.dim() != 1 || !sdk::is_integral(self.dtype(), false))
    sdk::fail(TS_ERROR_VALUE, "bincount: only supports 1-d non-negative integral inputs, got a ", self.dim(), "-d ",
              sdk::dtype_name(self.dtype()), " tensor");
  if (minlength < 0) sdk::fail(TS_ERROR_VALUE, "bincount: minlength should be >= 0, got ", minlength);
  if (weights && (weights->dim() != 1 || weights->numel() != self.numel()))
    sdk::fail(TS_ERROR_VALUE, "bincount: weights should be 1-d and have the same length as input (", self.numel(),
              "), got ", weights->numel());
  if (weights) common_device("bincount", {&self, &*weights});
  else common_device("bincount", {&self});
  const int32_t dev = self.device().index;
  TensorRef index = contiguous(a.call(), self, TS_INT64);
  const int64_t n = index.numel();
  int64_t bins = minlength;
  DeviceGuard guard(dev);
  gpuStream_t stream = stream_for(dev);
  if (n > 0) {
    const int64_t two[] = {2};
    TensorRef range = empty_on(a.call(), two, TS_INT64, self.device());
    launch_minmax_int64(static_cast<const int64_t*>(index.data()), n, static_cast<int64_t*>(range.data()), stream);
    int64_t lo_hi[2] = {0, 0};
    copy_host(dev, lo_hi, range.data(), sizeof lo_hi, gpuMemcpyDeviceToHost, false, "reading bincount's range");
    if (lo_hi[0] < 0) {  // name the first negative value, as the CPU plugin
      const auto bad = first_flagged(a.call(), index, INT64_MIN, 0, true);
      sdk::fail(TS_ERROR_VALUE, "bincount: only supports 1-d non-negative integral inputs, got the value ",
                bad.value_or(lo_hi[0]));
    }
    bins = std::max(bins, lo_hi[1] + 1);
  }
  const int32_t out_dtype = !weights ? int32_t(TS_INT64)
                            : weights->dtype() == TS_FLOAT32 ? int32_t(TS_FLOAT32) : int32_t(TS_FLOAT64);
  const int64_t shape[] = {bins};
  TensorRef out = empty_on(a.call(), shape, out_dtype, self.device());
  check(gpuMemsetAsync(out.data(), 0, size_t(bins * out.itemsize()), stream), "zeroing bincount's bins");
  BincountArgs args;
  args.index = static_cast<const int64_t*>(index.data());
  std::optional<TensorRef> w;
  if (weights) {
    w = contiguous(a.call(), *weights, out_dtype);
    args.weights = first_element(*w);
  }
  args.out = first_element(out);
  args.out_dtype = out_dtype;
  args.n = n;
  launch_bincount(args, stream);
  a.return_tensor(std::move(out));
}
}  // namespace

void register_bucket_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("searchsorted.Tensor", key, searchsorted_k);
  reg.kernel("bincount", key, bincount_k);
}

}  // namespace tessera::gpu

// More reductions: prod.dim_IntList, argmax, argmin, var.correction, std.correction,
// logsumexp. Dims, dtypes, checks and messages as the CPU plugin's reduce.cpp; the host orders
// the input's dims as [kept..., reduced...] (as reduce_ops.cpp) and reduce_more.cu folds them.
#include "more_ops.h"
#include "workspace.h"

#include <optional>

namespace tessera::gpu {
namespace {

std::vector<bool> mask_of(const char* op, std::optional<std::span<const int64_t>> dims, int64_t ndim) {
  std::vector<bool> mask(size_t(ndim), !dims || dims->empty());
  if (!dims) return mask;
  std::vector<bool> seen(size_t(std::max<int64_t>(ndim, 1)), false);
  for (int64_t d : *dims) {
    const int64_t w = wrap_dim(op, d, ndim);
    TS_SDK_CHECK(!seen[size_t(w)], TS_ERROR_VALUE, op, ": dim ", w, " appears multiple times in the list of dims");
    seen[size_t(w)] = true;
    if (ndim > 0) mask[size_t(w)] = true;
  }
  return mask;
}

// Raises when a reduction without identity (argmax) would fold an empty dim (as the CPU).
void check_nonempty(const char* op, const TensorRef& in, const std::vector<bool>& mask) {
  if (in.numel() != 0) return;
  for (int64_t d = 0; d < in.dim(); ++d)
    TS_SDK_CHECK(!(mask[size_t(d)] && in.size(d) == 0), TS_ERROR_VALUE, op, ": expected reduction dim ", d,
                 " to have non-zero size, got an input of shape ", shape_text(in.sizes()));
}

TensorRef reduce_more(sdk::Args& a, const char* op, ReduceMoreOp rop, Compute acc, const TensorRef& self,
                      const std::vector<bool>& mask, bool keepdim, int32_t out_dtype, double correction = 0) {
  std::vector<int64_t> out_shape;
  Reduction r = plan_reduction(op, self, mask, keepdim, out_shape);
  TensorRef out = empty_on(a.call(), out_shape, out_dtype, self.device());
  if (r.kept == 0) return out;
  bind_reduction(r, self, out);
  DeviceGuard guard(self.device().index);
  std::optional<Workspace> partials;  // given back once the kernels are queued (stream-ordered)
  split_reduction(r, self.device().index, kReduceMorePartialBytes, partials);
  launch_reduce_more(rop, acc, r, correction, stream_for(self.device().index));
  return out;
}

bool keepdim_arg(const sdk::Args& a, int i) { return !a.is_none(i) && a.to_bool(i); }

TensorRef ours(const char* op, sdk::Args& a) {
  TensorRef t = a.tensor(0);
  common_device(op, {&t});
  return t;
}

// prod.dim_IntList(Tensor self, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None)
void prod_k(sdk::Args& a) {
  const TensorRef self = ours("prod", a);
  const auto mask = mask_of("prod", a.optional_int_list(1), self.dim());
  const auto dtype = a.optional_dtype(3);
  const int32_t out_dtype = dtype ? *dtype : sdk::is_integral(self.dtype(), true) ? TS_INT64 : self.dtype();
  // Floats multiply in double, integers in int64 (the CPU's accumulators); inputs convert on load.
  const Compute acc = sdk::is_floating(out_dtype) ? Compute::Double : Compute::Int64;
  a.return_tensor(reduce_more(a, "prod", ReduceMoreOp::Prod, acc, self, mask, keepdim_arg(a, 2), out_dtype));
}

// argmax / argmin (Tensor self, int? dim=None, bool keepdim=False): dim=None flattens.
template <bool Max>
void arg_k(sdk::Args& a) {
  const char* op = Max ? "argmax" : "argmin";
  const TensorRef self = ours(op, a);
  TS_SDK_CHECK(self.dtype() != TS_BOOL, TS_ERROR_TYPE, op, ": expected a numeric tensor, got bool");
  const std::optional<int64_t> dim = a.optional_int(1);
  std::optional<std::span<const int64_t>> dims;
  if (dim) dims = std::span<const int64_t>(&*dim, 1);
  const auto mask = mask_of(op, dims, self.dim());
  TS_SDK_CHECK(dim || self.numel() != 0, TS_ERROR_VALUE, op,
               ": expected a dim to be given for an empty input, got dim=None and shape ", shape_text(self.sizes()));
  check_nonempty(op, self, mask);
  const Compute acc = sdk::is_floating(self.dtype()) ? Compute::Double : Compute::Int64;
  a.return_tensor(reduce_more(a, op, Max ? ReduceMoreOp::ArgMax : ReduceMoreOp::ArgMin, acc, self, mask,
                              keepdim_arg(a, 2), TS_INT64));
}

// var.correction / std.correction (Tensor self, int[1]? dim, *, Scalar? correction, bool keepdim)
template <bool Sqrt>
void moments_k(sdk::Args& a) {
  const char* op = Sqrt ? "std" : "var";
  const TensorRef self = ours(op, a);
  TS_SDK_CHECK(sdk::is_floating(self.dtype()), TS_ERROR_TYPE, op, ": expected a floating point tensor, got ",
               sdk::dtype_name(self.dtype()));
  const auto mask = mask_of(op, a.optional_int_list(1), self.dim());
  const double correction = a.is_none(2) ? 1.0 : a.scalar(2).to_double();
  a.return_tensor(reduce_more(a, op, Sqrt ? ReduceMoreOp::Std : ReduceMoreOp::Var, Compute::Double, self, mask,
                              keepdim_arg(a, 3), self.dtype(), correction));
}

// logsumexp(Tensor self, int[1] dim, bool keepdim=False): integer inputs give the default float dtype.
void logsumexp_k(sdk::Args& a) {
  const TensorRef self = ours("logsumexp", a);
  const auto mask = mask_of("logsumexp", a.int_list(1), self.dim());
  const int32_t out_dtype = sdk::is_floating(self.dtype()) ? self.dtype() : sdk::default_float_dtype();
  a.return_tensor(reduce_more(a, "logsumexp", ReduceMoreOp::LogSumExp, Compute::Double, self, mask, keepdim_arg(a, 2),
                              out_dtype));
}
}  // namespace

void register_reduction_more_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("prod.dim_IntList", key, prod_k);
  reg.kernel("argmax", key, arg_k<true>);
  reg.kernel("argmin", key, arg_k<false>);
  reg.kernel("var.correction", key, moments_k<false>);
  reg.kernel("std.correction", key, moments_k<true>);
  reg.kernel("logsumexp", key, logsumexp_k);
}

}  // namespace tessera::gpu

// Reductions over dims: sum.dim_IntList and mean.dim (dim=None or [] reduces every dim).
#include "simdev.h"

#include <algorithm>

namespace simdev {

namespace {
// The reduced dims as a mask, each wrapped and checked once.
std::vector<bool> reduced_dims(const char* op, const sdk::TensorRef& x, std::optional<std::span<const int64_t>> dims) {
  int64_t nd = x.dim();
  std::vector<bool> mask(size_t(nd), false);
  if (!dims || dims->empty()) {
    std::fill(mask.begin(), mask.end(), true);
    return mask;
  }
  int64_t range = std::max<int64_t>(nd, 1);  // a 0-d tensor accepts dim 0 and -1
  for (int64_t d : *dims) {
    TS_SDK_CHECK(d >= -range && d < range, TS_ERROR_INDEX, op, ": dimension out of range (expected to be in range of [",
                 -range, ", ", range - 1, "], but got ", d, ")");
    int64_t w = d < 0 ? d + range : d;
    if (nd == 0) continue;
    TS_SDK_CHECK(!mask[size_t(w)], TS_ERROR_VALUE, op, ": dim ", w, " appears multiple times in the list of dims");
    mask[size_t(w)] = true;
  }
  return mask;
}

void reduce(sdk::Args& a, bool mean) {
  const char* op = mean ? "mean" : "sum";
  sdk::TensorRef x = a.tensor(0);
  auto dims = a.optional_int_list(1);
  bool keepdim = a.size() > 2 && !a.is_none(2) && a.to_bool(2);
  auto dtype_arg = a.optional_dtype(3);
  TS_SDK_CHECK(is_this_device(x.device()), TS_ERROR_VALUE, op, ": expected a ", SIMDEV_NAME, " tensor, got ",
               device_str(x.device()));
  int32_t out_dtype = dtype_arg.value_or(sdk::is_integral(x.dtype(), true) ? TS_INT64 : x.dtype());
  if (mean)
    TS_SDK_CHECK(sdk::is_floating(out_dtype), TS_ERROR_TYPE, "mean: could not infer output dtype; the input dtype "
                 "must be floating point, got ", sdk::dtype_name(out_dtype), " (pass dtype=)");

  std::vector<bool> mask = reduced_dims(op, x, dims);
  std::vector<int64_t> out_shape, keep_shape;
  int64_t count = 1;
  for (int64_t d = 0; d < x.dim(); ++d) {
    bool r = mask[size_t(d)];
    if (r) count *= x.size(d);
    keep_shape.push_back(r ? 1 : x.size(d));
    if (!r || keepdim) out_shape.push_back(r ? 1 : x.size(d));
  }

  // Accumulate into a host buffer walked with the input; store once at the end.
  bool floating = sdk::is_floating(out_dtype);
  int64_t n_out = numel_of(keep_shape);
  std::vector<double> acc_d(floating ? size_t(n_out) : 0, 0.0);
  std::vector<int64_t> acc_i(floating ? 0 : size_t(n_out), 0);
  auto shape = x.shape_vector();
  Operand in = broadcast_operand(op, x, shape);
  Operand acc;  // offsets into the accumulator, 0 along reduced dims
  acc.data = floating ? reinterpret_cast<char*>(acc_d.data()) : reinterpret_cast<char*>(acc_i.data());
  acc.itemsize = 8;
  acc.strides = contiguous_strides(keep_shape);
  for (size_t d = 0; d < mask.size(); ++d)
    if (mask[d]) acc.strides[d] = 0;
  if (floating)
    walk<2>(shape, {&acc, &in}, [&](auto p) { *reinterpret_cast<double*>(p[0]) += load_double(p[1], in.dtype); });
  else
    walk<2>(shape, {&acc, &in}, [&](auto p) { *reinterpret_cast<int64_t*>(p[0]) += load_int(p[1], in.dtype); });

  sdk::TensorRef out = sdk::empty(a.call(), out_shape, out_dtype, x.device());
  char* o = bytes(out);
  for (int64_t i = 0; i < n_out; ++i) {
    char* dst = o + i * out.itemsize();
    if (!floating) store(dst, out_dtype, acc_i[size_t(i)]);
    else store(dst, out_dtype, mean ? acc_d[size_t(i)] / double(count) : acc_d[size_t(i)]);  // 0/0: nan, as PyTorch
  }
  a.return_tensor(std::move(out));
}

void sum_kernel(sdk::Args& a) { reduce(a, false); }
void mean_kernel(sdk::Args& a) { reduce(a, true); }
}  // namespace

void register_reductions(Registrar& reg, ts_dispatch_key key) {
  reg.kernel("sum.dim_IntList", key, sum_kernel);
  reg.kernel("mean.dim", key, mean_kernel);
}

}  // namespace simdev

// cat and stack (and their out= variants) for the CPU plugin. Inputs may have any layout and
// any mix of dtypes (the result has the promoted dtype). Each input is copied into its region
// of the result: directly when the dtypes agree, else through the `copy_` operator, which
// converts.
#include "kernels.h"
#include "strided.h"

namespace tessera::cpu {
namespace {

using sdk::Args;
using sdk::TensorRef;
using strided::str;
using Shape = std::vector<int64_t>;

// Copies `src` into the region (shape, strides, offset in elements from out's first element)
// of `out`; src has that shape.
void copy_into(const Args& a, const TensorRef& out, std::span<const int64_t> strides, int64_t offset,
               const TensorRef& src) {
  if (src.numel() == 0) return;
  if (src.dtype() == out.dtype()) {
    strided::copy_elements(src.sizes(), out.data<char>() + offset * out.itemsize(), strides, src.data(),
                           src.strides(), out.itemsize());
    return;
  }
  static const sdk::Operator copy("copy_");
  TensorRef region = sdk::alias(a.call(), out, src.sizes(), strides, out.storage_offset() + offset);
  copy.call(a.call(), {sdk::value(region), sdk::value(src), sdk::value(false)});
}

void check_inputs(const char* op, const std::vector<TensorRef>& tensors) {
  if (tensors.empty()) sdk::fail(TS_ERROR_VALUE, op, ": expected a non-empty list of tensors");
  for (size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i].device().type != kCpuDevice.type)
      sdk::fail(TS_ERROR_VALUE, op, ": expected all tensors on cpu, got tensor ", i, " on device type ",
                tensors[i].device().type);
}

int32_t promoted_dtype(const std::vector<TensorRef>& tensors) {
  int32_t dtype = tensors[0].dtype();
  for (const TensorRef& t : tensors) dtype = sdk::promote_types(dtype, t.dtype());
  return dtype;
}

// The out= tensor resized to `shape` when its shape differs, checked against the inputs.
TensorRef prepare_out(const char* op, const Args& a, int index, const Shape& shape,
                      const std::vector<TensorRef>& tensors) {
  TensorRef out = a.tensor(index);
  auto check = [&] {
    for (size_t i = 0; i < tensors.size(); ++i)
      if (strided::overlaps(out, tensors[i]))
        sdk::fail(TS_ERROR_VALUE, op, ": out must not overlap input tensor ", i);
  };
  check();  // before resizing, so that a refused out (an input, say) is left as it was
  if (out.shape_vector() != shape) {
    sdk::resize(a.call(), out, shape);
    check();
  }
  return out;
}

// cat: legacy rule kept from PyTorch: 1-D empty tensors (shape [0]) are skipped, whatever the
// rank of the others.
bool skipped(const TensorRef& t) { return t.dim() == 1 && t.size(0) == 0; }

struct CatPlan {
  Shape shape;
  int64_t dim = 0;
};

CatPlan plan_cat(const std::vector<TensorRef>& tensors, int64_t dim_arg) {
  check_inputs("cat", tensors);
  const TensorRef* ref = nullptr;
  size_t ref_index = 0;
  for (size_t i = 0; i < tensors.size() && !ref; ++i)
    if (!skipped(tensors[i])) ref = &tensors[i], ref_index = i;
  if (!ref) return {{0}, 0};  // only empty 1-D tensors
  for (size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i].dim() == 0)
      sdk::fail(TS_ERROR_VALUE, "cat: zero-dimensional tensor (at position ", i, ") cannot be concatenated");
  CatPlan plan{ref->shape_vector(), strided::wrap_dim("cat", dim_arg, ref->dim())};
  plan.shape[size_t(plan.dim)] = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorRef& t = tensors[i];
    if (skipped(t)) continue;
    if (t.dim() != ref->dim())
      sdk::fail(TS_ERROR_VALUE, "cat: expected tensors of ", ref->dim(), " dimensions (like tensor ", ref_index,
                ", shape ", str(ref->sizes()), "), got ", t.dim(), " dimensions for tensor ", i, " (shape ",
                str(t.sizes()), ")");
    for (int64_t d = 0; d < t.dim(); ++d)
      if (d != plan.dim && t.size(d) != ref->size(d))
        sdk::fail(TS_ERROR_VALUE, "cat: sizes of tensors must match except in dimension ", plan.dim,
                  "; expected size ", ref->size(d), " in dimension ", d, " (like tensor ", ref_index,
                  "), got size ", t.size(d), " for tensor ", i, " (shape ", str(t.sizes()), ")");
    plan.shape[size_t(plan.dim)] += t.size(plan.dim);
  }
  return plan;
}

void cat_into(const Args& a, const TensorRef& out, const std::vector<TensorRef>& tensors, int64_t dim) {
  int64_t at = 0;
  for (const TensorRef& t : tensors) {
    if (skipped(t)) continue;
    copy_into(a, out, out.strides(), at * out.stride(dim), t);
    at += t.size(dim);
  }
}

void cat_kernel(Args& a) {
  auto tensors = a.tensor_list(0);
  CatPlan plan = plan_cat(tensors, a.is_none(1) ? 0 : a.to_int(1));
  TensorRef out = sdk::empty(a.call(), plan.shape, promoted_dtype(tensors), kCpuDevice);
  cat_into(a, out, tensors, plan.dim);
  a.return_tensor(std::move(out));
}

void cat_out_kernel(Args& a) {
  auto tensors = a.tensor_list(0);
  CatPlan plan = plan_cat(tensors, a.is_none(1) ? 0 : a.to_int(1));
  TensorRef out = prepare_out("cat", a, 2, plan.shape, tensors);
  cat_into(a, out, tensors, plan.dim);
  out.bump_version();
  a.return_argument(out);
}

// stack: every input has the same shape; the result gains a new dim of size len(tensors).
struct StackPlan {
  Shape shape;
  int64_t dim = 0;
};

StackPlan plan_stack(const std::vector<TensorRef>& tensors, int64_t dim_arg) {
  check_inputs("stack", tensors);
  const TensorRef& ref = tensors[0];
  for (size_t i = 1; i < tensors.size(); ++i)
    if (tensors[i].shape_vector() != ref.shape_vector())
      sdk::fail(TS_ERROR_VALUE, "stack: expected each tensor to have the same shape, got ", str(ref.sizes()),
                " for tensor 0 and ", str(tensors[i].sizes()), " for tensor ", i);
  StackPlan plan{ref.shape_vector(), strided::wrap_dim("stack", dim_arg, ref.dim() + 1)};
  plan.shape.insert(plan.shape.begin() + plan.dim, int64_t(tensors.size()));
  return plan;
}

void stack_into(const Args& a, const TensorRef& out, const std::vector<TensorRef>& tensors, int64_t dim) {
  Shape strides(out.strides().begin(), out.strides().end());
  const int64_t step = strides[size_t(dim)];
  strides.erase(strides.begin() + dim);  // the region of input i: out.select(dim, i)
  for (size_t i = 0; i < tensors.size(); ++i) copy_into(a, out, strides, int64_t(i) * step, tensors[i]);
}

void stack_kernel(Args& a) {
  auto tensors = a.tensor_list(0);
  StackPlan plan = plan_stack(tensors, a.is_none(1) ? 0 : a.to_int(1));
  TensorRef out = sdk::empty(a.call(), plan.shape, promoted_dtype(tensors), kCpuDevice);
  stack_into(a, out, tensors, plan.dim);
  a.return_tensor(std::move(out));
}

void stack_out_kernel(Args& a) {
  auto tensors = a.tensor_list(0);
  StackPlan plan = plan_stack(tensors, a.is_none(1) ? 0 : a.to_int(1));
  TensorRef out = prepare_out("stack", a, 2, plan.shape, tensors);
  stack_into(a, out, tensors, plan.dim);
  out.bump_version();
  a.return_argument(out);
}

}  // namespace

// Called by register_shape_kernels (shape.cpp).
void register_join_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("cat", key, cat_kernel);
  reg.kernel("cat.out", key, cat_out_kernel);
  reg.kernel("stack", key, stack_kernel);
  reg.kernel("stack.out", key, stack_out_kernel);
}

}  // namespace tessera::cpu

// Advanced indexing on the device: index.Tensor (x[idx], x[mask]), index_put / index_put_
// (x[idx] = v, accumulate too), nonzero and masked_select, with the CPU plugin's semantics and
// messages (backends/cpu/src/advanced_index.cpp has the rules).
//   - A mask becomes index tensors through nonzero, as PyTorch's expandTensors does: the result's
//     size depends on the data, so nonzero reads one count back from the device.
//   - Index tensors on the CPU are copied to the device first (PyTorch allows them).
//   - The host computes the geometry (result shape; where the broadcast index dims go). One
//     kernel per index tensor sums the element offsets they select, then the gather/scatter
//     kernels of indexing.cu move the elements through those offsets.
//   - Every index is range-checked (one read back per index tensor) before anything is written.
#include "more_ops.h"

#include <tessera/sdk/index_geometry.h>

#include <algorithm>

namespace tessera::gpu {
namespace {
using Shape = std::vector<int64_t>;

using sdk::broadcast_into;
using sdk::is_mask_dtype;

const sdk::Operator& copy_op() { static sdk::Operator op("copy_"); return op; }

// `t` on `self`'s device: itself, or a copy of a CPU tensor.
TensorRef on_device_of(ts_call call, const char* op, const TensorRef& t, const TensorRef& self, const char* what) {
  const ts_device dev = self.device();
  if (is_ours(t.device()) && t.device().index == dev.index) return t;
  TS_SDK_CHECK(t.device().type == 0, TS_ERROR_VALUE, op, ": expected ", what, " on ", device_str(dev),
               " or the cpu, got ", device_str(t.device()));
  TensorRef copy = empty_on(call, t.sizes(), t.dtype(), dev);
  if (copy.numel()) copy_op().call(call, {sdk::value(copy), sdk::value(t)});
  return copy;
}

void check_same_device(const char* op, const TensorRef& self, const TensorRef& other, const char* what) {
  TS_SDK_CHECK(is_ours(other.device()) && other.device().index == self.device().index, TS_ERROR_VALUE, op,
               ": expected ", what, " on the same device as self (", device_str(self.device()), "), got ",
               device_str(other.device()));
}

// nonzero's result for `t` (on our device): int64 [n, t.dim()], row-major order.
TensorRef nonzero_of(ts_call call, const char* op, const TensorRef& t) {
  TS_SDK_CHECK(t.dim() <= kMaxDims, TS_ERROR_VALUE, op, ": the ", kName, " kernels handle tensors of at most ",
               kMaxDims, " dimensions, got ", t.dim());
  const ts_device dev = t.device();
  const Shape shape = t.shape_vector();
  NonzeroArgs args;
  args.loop = make_loop(op, shape, {&t});
  args.ndim = int32_t(t.dim());
  std::copy(shape.begin(), shape.end(), args.sizes);
  const int64_t tiles = nonzero_tiles(args.loop.numel);
  const int64_t counts_shape[1] = {tiles + 1};
  TensorRef counts = empty_on(call, counts_shape, TS_INT64, dev);
  DeviceGuard guard(dev.index);
  gpuStream_t s = stream_for(dev.index);
  launch_nonzero_count(args.loop, counts.data<int64_t>(), s);
  int64_t n = 0;
  copy_host(dev.index, &n, counts.data<int64_t>() + tiles, sizeof n, gpuMemcpyDeviceToHost, false,
            "nonzero (reading the count)");
  const int64_t out_shape[2] = {n, t.dim()};
  TensorRef out = empty_on(call, out_shape, TS_INT64, dev);
  if (n > 0) launch_nonzero_write(args, counts.data<int64_t>(), out.data<int64_t>(), s);
  return out;
}

TensorRef zeros_int64(ts_call call, std::span<const int64_t> shape, ts_device dev) {
  TensorRef t = empty_on(call, shape, TS_INT64, dev);
  if (t.numel()) {
    DeviceGuard guard(dev.index);
    check(gpuMemsetAsync(t.data(), 0, size_t(t.numel()) * sizeof(int64_t), stream_for(dev.index)), "zeros");
  }
  return t;
}

// An integer index tensor (on our device) into one dim of the target (size, stride), or the
// coordinates column of a mask's nonzero (known to be in range).
struct IndexOperand {
  TensorRef index;
  int64_t dim = -1;  // the target's dim it indexes (-1: a new dim, from a 0-d mask)
  int64_t size = 1, stride = 0;
  bool in_range = false;
};

// The geometry of an advanced indexing of a target: the result's shape and, per result dim,
// the target's stride (0 in the index dims B) and the stride into the offsets (0 outside B).
struct Plan : sdk::IndexLayout {
  Shape b_shape;
  std::vector<IndexOperand> operands;
};

// Checks the indices, expands masks, and lays out the result (NumPy's rule: B replaces the
// indexed dims when they are adjacent, else B comes first).
Plan make_plan(ts_call call, const char* op, const TensorRef& target, const std::vector<TensorRef>& given) {
  const int64_t ndim = target.dim();
  std::vector<sdk::IndexSlot> slots;
  Plan p;
  int64_t d = 0;  // next dim of target to be consumed
  for (size_t j = 0; j < given.size(); ++j) {
    if (!given[j].defined()) {
      if (d >= ndim) sdk::fail_too_many_indices(op, ndim, d + 1);
      slots.push_back({false, d++});
      continue;
    }
    const TensorRef idx = on_device_of(call, op, given[j], target, "index tensors");
    if (is_mask_dtype(idx.dtype())) {
      const int64_t m = idx.dim();
      sdk::check_mask_shape(op, idx, target, j, d);
      const TensorRef coords = nonzero_of(call, op, idx);  // [n, m]
      const int64_t n = coords.size(0);
      const int64_t column_shape[1] = {n}, column_stride[1] = {m};
      if (m == 0) {  // a 0-d mask: a new dim of size n (0 or 1) that moves no offset
        p.operands.push_back({zeros_int64(call, column_shape, target.device()), -1, 1, 0, true});
        slots.push_back({true, -1});
      }
      for (int64_t k = 0; k < m; ++k) {
        p.operands.push_back({restride(call, coords, column_shape, column_stride, coords.storage_offset() + k),
                              d + k, target.size(d + k), target.stride(d + k), true});
        slots.push_back({true, d + k});
      }
      d += m;
      continue;
    }
    sdk::check_index_tensor_dtype(op, idx, j);
    if (d >= ndim) sdk::fail_too_many_indices(op, ndim, d + 1);
    p.operands.push_back({idx, d, target.size(d), target.stride(d), false});
    slots.push_back({true, d++});
  }
  for (; d < ndim; ++d) slots.push_back({false, d});

  std::vector<Shape> shapes;
  for (const IndexOperand& o : p.operands) shapes.push_back(o.index.shape_vector());
  p.b_shape = sdk::broadcast_index_shapes(op, shapes);
  for (const IndexOperand& o : p.operands)  // all of them, before any kernel writes
    if (!o.in_range)
      if (auto v = first_flagged(call, o.index, -o.size, o.size, false))
        sdk::fail(TS_ERROR_INDEX, op, ": index ", *v, " is out of bounds for dimension ", o.dim, " with size ", o.size);
  static_cast<sdk::IndexLayout&>(p) = sdk::advanced_index_layout(target, slots, p.b_shape);
  return p;
}

// The element offset into the target of every position of B (int64, contiguous over B).
TensorRef offsets_of(ts_call call, const char* op, const Plan& p, ts_device dev) {
  if (p.operands.empty()) return zeros_int64(call, p.b_shape, dev);
  TensorRef offsets = empty_on(call, p.b_shape, TS_INT64, dev);
  if (offsets.numel() == 0) return offsets;
  DeviceGuard guard(dev.index);
  for (size_t k = 0; k < p.operands.size(); ++k) {
    const IndexOperand& o = p.operands[k];
    Loop L = make_loop(op, p.b_shape, {&offsets, &o.index});
    launch_index_offsets(L, o.size, o.stride, k == 0, stream_for(dev.index));
  }
  return offsets;
}

// Gathers target[offsets[b] + ...] into a new tensor of the plan's result shape.
TensorRef gather(ts_call call, const char* op, const TensorRef& target, const Plan& p) {
  TensorRef out = empty_on(call, p.out_sizes, target.dtype(), target.device());
  if (out.numel() == 0) return out;
  const TensorRef offsets = offsets_of(call, op, p, target.device());
  const TensorRef source = restride(call, target, p.out_sizes, p.src_strides, target.storage_offset());
  const TensorRef positions = restride(call, offsets, p.out_sizes, p.pos_strides, offsets.storage_offset());
  Loop L = make_loop(op, p.out_sizes, {&out, &source, &positions});
  DeviceGuard guard(target.device().index);
  launch_index(IndexOp::Gather, L, 1, stream_for(target.device().index));
  return out;
}

// The lowest and one-past-highest byte a strided tensor touches.
std::pair<const char*, const char*> byte_range(const TensorRef& t) {
  int64_t lo = 0, hi = 0;
  for (int64_t d = 0; d < t.dim(); ++d) {
    const int64_t reach = (t.size(d) - 1) * t.stride(d);
    (reach < 0 ? lo : hi) += reach;
  }
  const char* base = first_element(t);
  return {base + lo * t.itemsize(), base + (hi + 1) * t.itemsize()};
}

bool may_overlap(const TensorRef& a, const TensorRef& b) {
  if (a.numel() == 0 || b.numel() == 0) return false;
  const auto [alo, ahi] = byte_range(a);
  const auto [blo, bhi] = byte_range(b);
  return alo < bhi && blo < ahi;
}

// target[indices] = values (or += with accumulate), values broadcast to the indexing result.
void put_into(ts_call call, const char* op, const TensorRef& target, const std::vector<TensorRef>& indices,
              TensorRef values, bool accumulate) {
  values = on_device_of(call, op, values, target, "values");
  TS_SDK_CHECK(values.dtype() == target.dtype(), TS_ERROR_TYPE, op, ": expected values of dtype ",
               sdk::dtype_name(target.dtype()), " (like self), got ", sdk::dtype_name(values.dtype()));
  const Plan p = make_plan(call, op, target, indices);
  sdk::check_values_fit(op, values, p.out_sizes);
  int64_t numel = 1;
  for (int64_t s : p.out_sizes) numel *= s;
  if (numel == 0) return;
  if (may_overlap(values, target)) {  // x[i] = x[j]: read every value before writing
    TensorRef copy = empty_on(call, values.sizes(), values.dtype(), values.device());
    copy_into(op, copy, values);
    values = std::move(copy);
  }
  const TensorRef offsets = offsets_of(call, op, p, target.device());
  const TensorRef destination = restride(call, target, p.out_sizes, p.src_strides, target.storage_offset());
  const TensorRef positions = restride(call, offsets, p.out_sizes, p.pos_strides, offsets.storage_offset());
  Loop L = make_loop(op, p.out_sizes, {&destination, &values, &positions});
  DeviceGuard guard(target.device().index);
  launch_index(accumulate ? IndexOp::ScatterAdd : IndexOp::Scatter, L, 1, stream_for(target.device().index));
}

// ---- the operators

void index_k(sdk::Args& a) {
  const char* op = "index";
  TensorRef self = a.tensor(0);
  common_device(op, {&self});
  a.return_tensor(gather(a.call(), op, self, make_plan(a.call(), op, self, a.optional_tensor_list(1))));
}

void index_put_k(sdk::Args& a) {
  TensorRef self = a.tensor(0);
  common_device("index_put", {&self});
  TensorRef out = empty_on(a.call(), self.sizes(), self.dtype(), self.device());
  if (out.numel()) copy_into("index_put", out, self);
  put_into(a.call(), "index_put", out, a.optional_tensor_list(1), a.tensor(2), a.to_bool(3));
  a.return_tensor(std::move(out));
}

void index_put_inplace_k(sdk::Args& a) {
  TensorRef self = a.tensor(0);
  common_device("index_put_", {&self});
  put_into(a.call(), "index_put_", self, a.optional_tensor_list(1), a.tensor(2), a.to_bool(3));
  self.bump_version();
  a.return_argument(self);
}

void nonzero_k(sdk::Args& a) {
  TensorRef self = a.tensor(0);
  common_device("nonzero", {&self});
  a.return_tensor(nonzero_of(a.call(), "nonzero", self));
}

// masked_select: the elements of self where mask (broadcast together) is true, 1-D: a gather
// through the coordinates of the broadcast mask's nonzeros.
void masked_select_k(sdk::Args& a) {
  const char* op = "masked_select";
  TensorRef self = a.tensor(0), mask = a.tensor(1);
  common_device(op, {&self});
  check_same_device(op, self, mask, "mask");
  TS_SDK_CHECK(is_mask_dtype(mask.dtype()), TS_ERROR_TYPE, op, ": expected a mask of dtype bool (or uint8), got ",
               sdk::dtype_name(mask.dtype()));
  Shape shape = self.shape_vector();
  TS_SDK_CHECK(broadcast_into(shape, mask.sizes()), TS_ERROR_VALUE, op, ": the shape of the mask ",
               shape_text(mask.sizes()), " cannot be broadcast with the shape of self ", shape_text(self.sizes()));
  auto expanded = [&](const TensorRef& t) {  // t over `shape`, stride 0 where it broadcasts
    Shape strides(shape.size(), 0);
    const size_t lead = shape.size() - size_t(t.dim());
    for (size_t d = 0; d < size_t(t.dim()); ++d)
      strides[lead + d] = t.size(int64_t(d)) == 1 ? 0 : t.stride(int64_t(d));
    return restride(a.call(), t, shape, strides, t.storage_offset());
  };
  const TensorRef source = expanded(self), selected = expanded(mask);
  const TensorRef coords = nonzero_of(a.call(), op, selected);  // [n, ndim]
  const int64_t n = coords.size(0), nd = int64_t(shape.size());
  Plan p;
  p.b_shape = p.out_sizes = {n};
  p.src_strides = {0};
  p.pos_strides = {1};
  const int64_t column_shape[1] = {n}, column_stride[1] = {nd};
  for (int64_t d = 0; d < nd; ++d)
    p.operands.push_back({restride(a.call(), coords, column_shape, column_stride, coords.storage_offset() + d),
                          d, shape[size_t(d)], source.stride(d), true});
  a.return_tensor(gather(a.call(), op, source, p));
}

}  // namespace

void register_advanced_index_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("index.Tensor", key, index_k);
  reg.kernel("index_put", key, index_put_k);
  reg.kernel("index_put_", key, index_put_inplace_k);
  reg.kernel("nonzero", key, nonzero_k);
  reg.kernel("masked_select", key, masked_select_k);
}

}  // namespace tessera::gpu

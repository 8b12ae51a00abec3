// Advanced indexing kernels of the CPU plugin: index.Tensor (x[idx], x[mask]), index_put /
// index_put_ (x[idx] = v, with accumulate), nonzero and masked_select, with PyTorch's
// semantics:
//   - `indices` has one entry per leading dim of self; None is a full slice of its dim, an
//     int64/int32 tensor indexes its dim, a bool/uint8 mask of k dims stands for the k index
//     tensors of nonzero(mask) (a 0-d mask adds a dim of size 1 or 0, as in NumPy);
//   - the index tensors broadcast together to a shape B; when the indexed dims are adjacent B
//     takes their place in the result, otherwise B comes first (NumPy's rule);
//   - negative indices count from the end; an out-of-range index raises IndexError naming the
//     index, the dim and its size, before anything is written.
// The plan turns the index tensors into one element offset per position of B, so the copy
// loops need only the element width (no dtype templates) except for accumulation.
#include "kernels.h"
#include "strided.h"

#include <tessera/sdk/index_geometry.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <memory>

namespace tessera::cpu {
namespace {

using sdk::Args;
using sdk::TensorRef;
using strided::str;
using Shape = std::vector<int64_t>;

// A vector that leaves its elements uninitialised: offset buffers can be as large as the
// tensor, and zeroing them first would only add page faults and memory traffic.
template <class T>
struct DefaultInit : std::allocator<T> {
  template <class U> struct rebind { using other = DefaultInit<U>; };
  using std::allocator<T>::allocator;
  template <class U> void construct(U* p) noexcept { ::new (static_cast<void*>(p)) U; }
  template <class U, class... A> void construct(U* p, A&&... a) { ::new (static_cast<void*>(p)) U(std::forward<A>(a)...); }
};
using Offsets = std::vector<int64_t, DefaultInit<int64_t>>;

// One index operand: an index tensor whose elements index the target's dim `self_dim`, or
// a mask turned into the element offsets of its selected elements (`offsets`: no range
// check, no wrapping; a 0-d mask has self_dim -1, a new dim).
struct IndexOperand {
  const void* data = nullptr;
  int32_t dtype = TS_INT64;
  Shape sizes, strides;
  int64_t self_dim = -1, self_size = 1, self_stride = 0;
  bool offsets = false;
};

// The geometry of an advanced indexing of `target`: the result shape and, per result dim, the
// target's stride (0 in the dims of B) and the stride into `offsets` (0 outside B).
struct Plan : sdk::IndexLayout {
  Shape b_shape;
  Offsets offsets;  // per position of B (row-major): element offset into target
};

using sdk::broadcast_into;
using sdk::is_mask_dtype;

// Strides that read a tensor of (sizes, strides) broadcast to `shape` (0 where broadcast).
Shape broadcast_strides(std::span<const int64_t> sizes, std::span<const int64_t> strides, std::span<const int64_t> shape) {
  Shape out(shape.size(), 0);
  const size_t lead = shape.size() - sizes.size();
  for (size_t i = 0; i < sizes.size(); ++i) out[lead + i] = sizes[i] == 1 ? 0 : strides[i];
  return out;
}

void check_same_device(const char* op, const TensorRef& self, const TensorRef& other, const char* what) {
  if (other.device().type != self.device().type || other.device().index != self.device().index)
    sdk::fail(TS_ERROR_VALUE, op, ": expected ", what, " on the same device as self (type ", self.device().type,
              ", index ", self.device().index, "), got type ", other.device().type, ", index ", other.device().index);
}

// The offsets (under `strides`) of the elements whose mask byte is nonzero, in row-major
// order over `shape`; the mask (bool or uint8: one byte) is read under `mask_strides`.
// Two branch-free passes: count, then write every offset and advance only on a hit.
Offsets selected_offsets(std::span<const int64_t> shape, const uint8_t* mask, const int64_t* mask_strides,
                         const int64_t* strides) {
  int64_t count = 0;
  strided::for_each_offset<1>(shape, {mask_strides}, [&](const std::array<int64_t, 1>& off) {
    count += mask[off[0]] != 0;
  });
  Offsets out(size_t(count) + 1);  // + 1: the slot a miss writes after the last hit
  int64_t* dst = out.data();
  int64_t k = 0;
  strided::for_each_offset<2>(shape, {mask_strides, strides}, [&](const std::array<int64_t, 2>& off) {
    dst[k] = off[1];
    k += mask[off[0]] != 0;
  });
  out.pop_back();
  return out;
}

// Reads element `off` of an index operand as int64.
inline int64_t read_index(const IndexOperand& o, int64_t off) {
  return o.dtype == TS_INT64 ? static_cast<const int64_t*>(o.data)[off] : static_cast<const int32_t*>(o.data)[off];
}

// Expands masks, checks and broadcasts the indices, and computes the offsets into `target`.
// `masks` keeps the offsets of expanded masks alive while the plan is used.
Plan make_plan(const char* op, const TensorRef& target, const std::vector<TensorRef>& indices,
               std::deque<Offsets>& masks) {
  const int64_t ndim = target.dim();
  std::vector<sdk::IndexSlot> slots;
  std::vector<IndexOperand> operands;
  int64_t d = 0;  // next dim of target to be consumed
  for (size_t j = 0; j < indices.size(); ++j) {
    const TensorRef& idx = indices[j];
    if (!idx.defined()) {
      if (d >= ndim) sdk::fail_too_many_indices(op, ndim, d + 1);
      slots.push_back({false, d++});
      continue;
    }
    check_same_device(op, target, idx, "index tensors");
    if (is_mask_dtype(idx.dtype())) {
      const int64_t m = idx.dim();
      sdk::check_mask_shape(op, idx, target, j, d);
      // One operand over the m dims: the offset of every selected element (0-d: a new dim).
      const Shape target_strides(target.strides().begin() + d, target.strides().begin() + d + m);
      Offsets& offsets =
          masks.emplace_back(selected_offsets(idx.sizes(), idx.data<uint8_t>(), idx.strides().data(),
                                              target_strides.data()));
      IndexOperand o;
      o.data = offsets.data();
      o.sizes = {int64_t(offsets.size())};
      o.strides = {1};
      o.offsets = true;
      operands.push_back(std::move(o));
      if (m == 0) slots.push_back({true, -1});
      for (int64_t k = 0; k < m; ++k) slots.push_back({true, d + k});
      d += m;
      continue;
    }
    sdk::check_index_tensor_dtype(op, idx, j);
    if (d >= ndim) sdk::fail_too_many_indices(op, ndim, d + 1);
    IndexOperand o;
    o.data = idx.data();
    o.dtype = idx.dtype();
    o.sizes = idx.shape_vector();
    o.strides.assign(idx.strides().begin(), idx.strides().end());
    o.self_dim = d;
    o.self_size = target.size(d);
    o.self_stride = target.stride(d);
    operands.push_back(std::move(o));
    slots.push_back({true, d++});
  }
  for (; d < ndim; ++d) slots.push_back({false, d});

  std::vector<Shape> shapes;
  for (const IndexOperand& o : operands) shapes.push_back(o.sizes);
  Plan p;
  p.b_shape = sdk::broadcast_index_shapes(op, shapes);
  static_cast<sdk::IndexLayout&>(p) = sdk::advanced_index_layout(target, slots, p.b_shape);
  const Shape b_pos = strided::contiguous_strides(p.b_shape);

  // One offset per position of B; every index is range-checked here, before any write.
  if (operands.size() == 1 && operands[0].offsets) {  // a lone mask: its offsets are the plan's
    p.offsets = std::move(masks.back());
    return p;
  }
  p.offsets.resize(size_t(strided::numel(p.b_shape)));
  if (operands.empty()) p.offsets[0] = 0;
  for (size_t k = 0; k < operands.size(); ++k) {
    const IndexOperand& o = operands[k];
    const Shape os = broadcast_strides(o.sizes, o.strides, p.b_shape);
    int64_t* offsets = p.offsets.data();
    const bool first = k == 0;  // the first operand writes, the others add
    if (o.offsets) {
      const int64_t* src = static_cast<const int64_t*>(o.data);
      strided::for_each_offset<2>(p.b_shape, {b_pos.data(), os.data()}, [&](const std::array<int64_t, 2>& off) {
        offsets[off[0]] = (first ? 0 : offsets[off[0]]) + src[off[1]];
      });
      continue;
    }
    strided::for_each_offset<2>(p.b_shape, {b_pos.data(), os.data()}, [&](const std::array<int64_t, 2>& off) {
      int64_t v = read_index(o, off[1]);
      if (v < -o.self_size || v >= o.self_size)
        sdk::fail(TS_ERROR_INDEX, op, ": index ", v, " is out of bounds for dimension ", o.self_dim, " with size ",
                  o.self_size);
      if (v < 0) v += o.self_size;
      offsets[off[0]] = (first ? 0 : offsets[off[0]]) + v * o.self_stride;
    });
  }
  return p;
}

// The result dims after B, when B comes first and they are row-major contiguous in the
// target: each position of B is then one contiguous block (an embedding lookup, a row mask).
int64_t dense_block(const Plan& p) {
  if (p.b_first != 0) return 0;
  const size_t nb = p.b_shape.size();
  std::span<const int64_t> sizes(p.out_sizes.data() + nb, p.out_sizes.size() - nb);
  std::span<const int64_t> strides(p.src_strides.data() + nb, p.src_strides.size() - nb);
  if (!strided::is_contiguous(sizes, strides)) return 0;
  return strided::numel(sizes);
}

// The elements of `src` (under src_strides, over `shape`) where the mask byte (under
// mask_strides) is nonzero, in row-major order, as a new 1-D tensor. One pass counts, one
// copies without branches: every element is written, and the position advances on a hit
// (the buffer has one spare element for the writes after the last hit).
TensorRef select_by_mask(ts_call call, const TensorRef& src, std::span<const int64_t> shape,
                         const int64_t* src_strides, const uint8_t* mask, const int64_t* mask_strides) {
  int64_t count = 0;
  strided::for_each_offset<1>(shape, {mask_strides}, [&](const std::array<int64_t, 1>& off) {
    count += mask[off[0]] != 0;
  });
  const Shape buffer_shape{count + 1}, shape_1d{count}, stride_1d{1};
  TensorRef buffer = sdk::empty(call, buffer_shape, src.dtype(), src.device());
  strided::with_word(src.itemsize(), [&](auto word) {
    using W = decltype(word);
    const W* s = src.data<W>();
    W* d = buffer.data<W>();
    int64_t k = 0;
    strided::for_each_offset<2>(shape, {mask_strides, src_strides}, [&](const std::array<int64_t, 2>& off) {
      d[k] = s[off[1]];
      k += mask[off[0]] != 0;
    });
  });
  return sdk::alias(call, buffer, shape_1d, stride_1d, 0);
}

// ---- index.Tensor: out[...] = self[offsets[b] + ...]

void index_kernel(Args& a) {
  const char* op = "index";
  TensorRef self = a.tensor(0);
  std::vector<TensorRef> indices = a.optional_tensor_list(1);
  // x[mask] with a mask of self's shape (x[x > 0]): a direct selection, no offset buffer.
  if (indices.size() == 1 && indices[0].defined() && is_mask_dtype(indices[0].dtype()) &&
      indices[0].device().type == self.device().type && indices[0].device().index == self.device().index &&
      std::ranges::equal(indices[0].sizes(), self.sizes())) {
    const TensorRef& mask = indices[0];
    a.return_tensor(select_by_mask(a.call(), self, self.sizes(), self.strides().data(), mask.data<uint8_t>(),
                                   mask.strides().data()));
    return;
  }
  std::deque<Offsets> masks;
  Plan p = make_plan(op, self, indices, masks);
  TensorRef out = sdk::empty(a.call(), p.out_sizes, self.dtype(), self.device());
  if (out.numel() > 0) {
    strided::with_word(self.itemsize(), [&](auto word) {
      using W = decltype(word);
      const W* src = self.data<W>();
      W* dst = out.data<W>();
      const int64_t* offsets = p.offsets.data();
      const int64_t block = dense_block(p);
      if (block >= 16) {
        const int64_t n = int64_t(p.offsets.size());
#pragma omp parallel for num_threads(strided::threads_for(n * block)) schedule(static)
        for (int64_t b = 0; b < n; ++b)
          std::memcpy(dst + b * block, src + offsets[b], size_t(block) * sizeof(W));
        return;
      }
      const Shape out_strides = strided::contiguous_strides(p.out_sizes);
      strided::for_each_offset<3>(p.out_sizes, {out_strides.data(), p.src_strides.data(), p.pos_strides.data()},
                                  [&](const std::array<int64_t, 3>& off) { dst[off[0]] = src[off[1] + offsets[off[2]]]; });
    });
  }
  a.return_tensor(std::move(out));
}

// ---- index_put: target[offsets[b] + ...] = values (broadcast to the indexing result)

// x += v for index_put_(accumulate=True): bool as logical or, 16-bit floats through float.
template <class T>
void accumulate_into(T& x, T v) {
  if constexpr (std::is_same_v<T, bool>) x = x || v;
  else x = static_cast<T>(static_cast<sdk::opmath_t<T>>(x) + static_cast<sdk::opmath_t<T>>(v));
}

void put_into(const char* op, const TensorRef& target, const std::vector<TensorRef>& indices, TensorRef values,
              bool accumulate, ts_call call) {
  check_same_device(op, target, values, "values");
  if (values.dtype() != target.dtype())
    sdk::fail(TS_ERROR_TYPE, op, ": expected values of dtype ", sdk::dtype_name(target.dtype()),
              " (like self), got ", sdk::dtype_name(values.dtype()));
  std::deque<Offsets> masks;
  Plan p = make_plan(op, target, indices, masks);
  sdk::check_values_fit(op, values, p.out_sizes);
  if (strided::numel(p.out_sizes) == 0) return;
  if (strided::overlaps(values, target)) {  // x[i] = x[j]: read every value before writing
    TensorRef copy = sdk::empty(call, values.sizes(), values.dtype(), values.device());
    strided::copy_tensor(copy, values);
    values = std::move(copy);
  }
  const Shape value_strides = broadcast_strides(values.sizes(), values.strides(), p.out_sizes);
  const std::array<const int64_t*, 3> strides{value_strides.data(), p.src_strides.data(), p.pos_strides.data()};
  const int64_t* offsets = p.offsets.data();
  if (!accumulate) {  // duplicates: the last write wins (PyTorch leaves it unspecified)
    strided::with_word(target.itemsize(), [&](auto word) {
      using W = decltype(word);
      const W* src = values.data<W>();
      W* dst = target.data<W>();
      strided::for_each_offset<3>(p.out_sizes, strides, [&](const std::array<int64_t, 3>& off) {
        dst[off[1] + offsets[off[2]]] = src[off[0]];
      });
    });
    return;
  }
  TS_DISPATCH_ALL_AND_COMPLEX(target.dtype(), sdk::fail(TS_ERROR_TYPE, op, ": unsupported dtype ", target.dtype()), {
    const scalar_t* src = values.data<scalar_t>();
    scalar_t* dst = target.data<scalar_t>();
    strided::for_each_offset<3>(p.out_sizes, strides, [&](const std::array<int64_t, 3>& off) {
      accumulate_into(dst[off[1] + offsets[off[2]]], src[off[0]]);
    });
  });
}

void index_put_inplace_kernel(Args& a) {
  TensorRef self = a.tensor(0);
  put_into("index_put_", self, a.optional_tensor_list(1), a.tensor(2), a.to_bool(3), a.call());
  self.bump_version();
  a.return_argument(self);
}

void index_put_kernel(Args& a) {
  TensorRef self = a.tensor(0);
  TensorRef out = sdk::empty(a.call(), self.sizes(), self.dtype(), self.device());
  strided::copy_tensor(out, self);
  put_into("index_put", out, a.optional_tensor_list(1), a.tensor(2), a.to_bool(3), a.call());
  a.return_tensor(std::move(out));
}

// ---- nonzero: int64 [n, ndim], the coordinates of the nonzero elements in row-major order

void nonzero_kernel(Args& a) {
  TensorRef self = a.tensor(0);
  const int64_t nd = self.dim();
  const Shape sizes = self.shape_vector();
  const Shape strides(self.strides().begin(), self.strides().end());
  TS_DISPATCH_ALL(self.dtype(), sdk::fail(TS_ERROR_TYPE, "nonzero: unsupported dtype ", self.dtype()), {
    using opmath = sdk::opmath_t<scalar_t>;
    const scalar_t* p = self.data<scalar_t>();
    auto is_nonzero = [](scalar_t v) { return static_cast<opmath>(v) != opmath(0); };
    int64_t n = 0;  // first pass: count
    strided::for_each_offset<1>(sizes, {strides.data()},
                                [&](const std::array<int64_t, 1>& off) { n += is_nonzero(p[off[0]]); });
    const Shape shape{n, nd};
    TensorRef out = sdk::empty(a.call(), shape, TS_INT64, self.device());
    // Second pass: a row-major walk that keeps the multi-index, so coordinates need no division.
    if (n > 0 && nd > 0) {
      int64_t* dst = out.data<int64_t>();
      Shape index(size_t(nd), 0);
      const int64_t inner = sizes[size_t(nd - 1)], inner_stride = strides[size_t(nd - 1)];
      int64_t base = 0;
      for (;;) {
        for (int64_t i = 0; i < inner; ++i)
          if (is_nonzero(p[base + i * inner_stride])) {
            for (int64_t k = 0; k + 1 < nd; ++k) *dst++ = index[size_t(k)];
            *dst++ = i;
          }
        int64_t d = nd - 2;
        for (; d >= 0; --d) {
          base += strides[size_t(d)];
          if (++index[size_t(d)] < sizes[size_t(d)]) break;
          base -= strides[size_t(d)] * sizes[size_t(d)];
          index[size_t(d)] = 0;
        }
        if (d < 0) break;
      }
    }
    a.return_tensor(std::move(out));
  });
}

// ---- masked_select: the elements of self where mask (broadcast together) is true, 1-D

void masked_select_kernel(Args& a) {
  const char* op = "masked_select";
  TensorRef self = a.tensor(0), mask = a.tensor(1);
  check_same_device(op, self, mask, "mask");
  if (!is_mask_dtype(mask.dtype()))
    sdk::fail(TS_ERROR_TYPE, op, ": expected a mask of dtype bool (or uint8), got ", sdk::dtype_name(mask.dtype()));
  Shape shape = self.shape_vector();
  if (!broadcast_into(shape, mask.sizes()))
    sdk::fail(TS_ERROR_VALUE, op, ": the shape of the mask ", str(mask.sizes()),
              " cannot be broadcast with the shape of self ", str(self.sizes()));
  const Shape ss = broadcast_strides(self.sizes(), self.strides(), shape);
  const Shape ms = broadcast_strides(mask.sizes(), mask.strides(), shape);
  a.return_tensor(select_by_mask(a.call(), self, shape, ss.data(), mask.data<uint8_t>(), ms.data()));
}

}  // namespace

void register_advanced_index_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("index.Tensor", key, index_kernel);
  reg.kernel("index_put", key, index_put_kernel);
  reg.kernel("index_put_", key, index_put_inplace_kernel);
  reg.kernel("nonzero", key, nonzero_kernel);
  reg.kernel("masked_select", key, masked_select_kernel);
}

}  // namespace tessera::cpu

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

#include <cstring>
#include <deque>

namespace tessera::cpu {
namespace {

using sdk::Args;
using sdk::TensorRef;
using strided::str;
using Shape = std::vector<int64_t>;

// One index tensor after masks are expanded: its elements index self's dim `self_dim`
// (-1: the new dim of a 0-d mask, of size 1).
struct IndexOperand {
  const void* data = nullptr;
  int32_t dtype = TS_INT64;
  Shape sizes, strides;
  int64_t self_dim = -1, self_size = 1, self_stride = 0;
};

// The geometry of an advanced indexing of `target`: the result shape and, per result dim, the
// target's stride (0 in the dims of B) and the stride into `offsets` (0 outside B).
struct Plan {
  Shape out_sizes, src_strides, pos_strides;
  Shape b_shape;
  int64_t b_first = 0;           // first result dim of B
  std::vector<int64_t> offsets;  // per position of B (row-major): element offset into target
  bool has_advanced = false;
};

// Right-aligned broadcast of `shape` into `acc`; false when they do not fit.
bool broadcast_into(Shape& acc, std::span<const int64_t> shape) {
  if (shape.size() > acc.size()) acc.insert(acc.begin(), shape.size() - acc.size(), 1);
  const size_t lead = acc.size() - shape.size();
  for (size_t i = 0; i < shape.size(); ++i) {
    int64_t& a = acc[lead + i];
    if (a == shape[i] || shape[i] == 1) continue;
    if (a != 1) return false;
    a = shape[i];
  }
  return true;
}

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

bool is_mask_dtype(int32_t dtype) { return dtype == TS_BOOL || dtype == TS_UINT8; }

// Row-major flat positions of the nonzero elements of `t` (any dtype).
std::vector<int64_t> nonzero_positions(const char* op, const TensorRef& t) {
  std::vector<int64_t> found;
  int64_t flat = 0;
  TS_DISPATCH_ALL(t.dtype(), sdk::fail(TS_ERROR_TYPE, op, ": unsupported dtype ", t.dtype()), {
    using opmath = sdk::opmath_t<scalar_t>;
    const scalar_t* p = t.data<scalar_t>();
    strided::for_each_offset<1>(t.sizes(), {t.strides().data()}, [&](const std::array<int64_t, 1>& off) {
      if (static_cast<opmath>(p[off[0]]) != opmath(0)) found.push_back(flat);
      ++flat;
    });
  });
  return found;
}

// Reads element `off` of an index operand as int64.
inline int64_t read_index(const IndexOperand& o, int64_t off) {
  return o.dtype == TS_INT64 ? static_cast<const int64_t*>(o.data)[off] : static_cast<const int32_t*>(o.data)[off];
}

// Expands masks, checks and broadcasts the indices, and computes the offsets into `target`.
// `masks` keeps the coordinates of expanded masks alive while the plan is used.
Plan make_plan(const char* op, const TensorRef& target, const std::vector<TensorRef>& indices,
               std::deque<std::vector<int64_t>>& masks) {
  const int64_t ndim = target.dim();
  struct Slot {
    bool advanced;
    int64_t self_dim;
  };
  std::vector<Slot> slots;
  std::vector<IndexOperand> operands;
  int64_t d = 0;  // next dim of target to be consumed
  auto too_many = [&](int64_t needed) {
    sdk::fail(TS_ERROR_INDEX, op, ": too many indices for a tensor of dimension ", ndim, " (the indices cover ",
              needed, " dimensions)");
  };
  for (size_t j = 0; j < indices.size(); ++j) {
    const TensorRef& idx = indices[j];
    if (!idx.defined()) {
      if (d >= ndim) too_many(d + 1);
      slots.push_back({false, d++});
      continue;
    }
    check_same_device(op, target, idx, "index tensors");
    if (is_mask_dtype(idx.dtype())) {
      const int64_t m = idx.dim();
      if (d + m > ndim) too_many(d + m);
      for (int64_t k = 0; k < m; ++k)
        if (idx.size(k) != target.size(d + k))
          sdk::fail(TS_ERROR_INDEX, op, ": the shape of the mask ", str(idx.sizes()), " at index ", j,
                    " does not match the shape of the indexed tensor ", str(target.sizes()), " at index ", d + k);
      std::vector<int64_t> flat = nonzero_positions(op, idx);
      const int64_t n = int64_t(flat.size());
      std::vector<int64_t>& coords = masks.emplace_back(size_t(n * std::max<int64_t>(m, 1)), 0);
      if (m == 0) {  // a 0-d mask: a new dim of size 1 (true) or 0 (false), indexed by 0
        IndexOperand o;
        o.data = coords.data();
        o.sizes = {n};
        o.strides = {1};
        operands.push_back(std::move(o));
        slots.push_back({true, -1});
        continue;
      }
      const Shape mask_shape = idx.shape_vector();
      for (int64_t i = 0; i < n; ++i)
        for (int64_t k = m - 1, rest = flat[size_t(i)]; k >= 0; --k) {
          coords[size_t(i * m + k)] = rest % mask_shape[size_t(k)];
          rest /= mask_shape[size_t(k)];
        }
      for (int64_t k = 0; k < m; ++k) {
        IndexOperand o;
        o.data = coords.data() + k;
        o.sizes = {n};
        o.strides = {m};
        o.self_dim = d + k;
        o.self_size = target.size(d + k);
        o.self_stride = target.stride(d + k);
        operands.push_back(std::move(o));
        slots.push_back({true, d + k});
      }
      d += m;
      continue;
    }
    if (idx.dtype() != TS_INT64 && idx.dtype() != TS_INT32)
      sdk::fail(TS_ERROR_TYPE, op, ": tensors used as indices must be int64, int32, uint8 or bool tensors, got ",
                sdk::dtype_name(idx.dtype()), " at index ", j);
    if (d >= ndim) too_many(d + 1);
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

  Plan p;
  p.has_advanced = !operands.empty();
  for (const IndexOperand& o : operands)
    if (!broadcast_into(p.b_shape, o.sizes)) {
      std::string shapes;
      for (const IndexOperand& x : operands) shapes += (shapes.empty() ? "" : ", ") + str(x.sizes);
      sdk::fail(TS_ERROR_INDEX, op, ": shape mismatch: indexing tensors could not be broadcast together with shapes ",
                shapes);
    }

  // Where B goes: in place of the advanced slots when they are adjacent, else first.
  int64_t first = -1, last = -1, count = 0;
  for (size_t s = 0; s < slots.size(); ++s)
    if (slots[s].advanced) {
      if (first < 0) first = int64_t(s);
      last = int64_t(s);
      ++count;
    }
  const bool adjacent = count == 0 || last - first + 1 == count;
  const Shape b_pos = strided::contiguous_strides(p.b_shape);
  auto add_b = [&] {
    p.b_first = int64_t(p.out_sizes.size());
    for (size_t i = 0; i < p.b_shape.size(); ++i) {
      p.out_sizes.push_back(p.b_shape[i]);
      p.src_strides.push_back(0);
      p.pos_strides.push_back(b_pos[i]);
    }
  };
  auto add_plain = [&](int64_t self_dim) {
    p.out_sizes.push_back(target.size(self_dim));
    p.src_strides.push_back(target.stride(self_dim));
    p.pos_strides.push_back(0);
  };
  if (!adjacent) add_b();
  bool b_added = !adjacent;
  for (size_t s = 0; s < slots.size(); ++s) {
    if (slots[s].advanced) {
      if (!b_added) add_b(), b_added = true;
      continue;
    }
    add_plain(slots[s].self_dim);
  }
  if (!b_added) add_b();

  // One offset per position of B; every index is range-checked here, before any write.
  p.offsets.assign(size_t(strided::numel(p.b_shape)), 0);
  for (const IndexOperand& o : operands) {
    const Shape os = broadcast_strides(o.sizes, o.strides, p.b_shape);
    int64_t* offsets = p.offsets.data();
    strided::for_each_offset<2>(p.b_shape, {b_pos.data(), os.data()}, [&](const std::array<int64_t, 2>& off) {
      int64_t v = read_index(o, off[1]);
      if (v < -o.self_size || v >= o.self_size)
        sdk::fail(TS_ERROR_INDEX, op, ": index ", v, " is out of bounds for dimension ", o.self_dim, " with size ",
                  o.self_size);
      if (v < 0) v += o.self_size;
      offsets[off[0]] += v * o.self_stride;
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

// ---- index.Tensor: out[...] = self[offsets[b] + ...]

void index_kernel(Args& a) {
  const char* op = "index";
  TensorRef self = a.tensor(0);
  std::deque<std::vector<int64_t>> masks;
  Plan p = make_plan(op, self, a.optional_tensor_list(1), masks);
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

void put_into(const char* op, const TensorRef& target, const std::vector<TensorRef>& indices, TensorRef values,
              bool accumulate, ts_call call) {
  check_same_device(op, target, values, "values");
  if (values.dtype() != target.dtype())
    sdk::fail(TS_ERROR_TYPE, op, ": expected values of dtype ", sdk::dtype_name(target.dtype()),
              " (like self), got ", sdk::dtype_name(values.dtype()));
  std::deque<std::vector<int64_t>> masks;
  Plan p = make_plan(op, target, indices, masks);
  Shape fit = p.out_sizes;
  if (values.dim() > int64_t(fit.size()) || !broadcast_into(fit, values.sizes()) || fit != p.out_sizes)
    sdk::fail(TS_ERROR_VALUE, op, ": shape mismatch: value tensor of shape ", str(values.sizes()),
              " cannot be broadcast to indexing result of shape ", str(p.out_sizes));
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
  TS_DISPATCH_ALL(target.dtype(), sdk::fail(TS_ERROR_TYPE, op, ": unsupported dtype ", target.dtype()), {
    using opmath = sdk::opmath_t<scalar_t>;
    const scalar_t* src = values.data<scalar_t>();
    scalar_t* dst = target.data<scalar_t>();
    strided::for_each_offset<3>(p.out_sizes, strides, [&](const std::array<int64_t, 3>& off) {
      scalar_t& x = dst[off[1] + offsets[off[2]]];
      if constexpr (std::is_same_v<scalar_t, bool>) x = x || src[off[0]];
      else x = static_cast<scalar_t>(static_cast<opmath>(x) + static_cast<opmath>(src[off[0]]));
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
  const std::vector<int64_t> flat = nonzero_positions("nonzero", self);
  const int64_t n = int64_t(flat.size()), nd = self.dim();
  const Shape shape{n, nd};
  TensorRef out = sdk::empty(a.call(), shape, TS_INT64, self.device());
  int64_t* dst = out.data<int64_t>();
  const Shape sizes = self.shape_vector();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = nd - 1, rest = flat[size_t(i)]; k >= 0; --k) {
      dst[i * nd + k] = rest % sizes[size_t(k)];
      rest /= sizes[size_t(k)];
    }
  a.return_tensor(std::move(out));
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
  std::vector<int64_t> picked;
  const uint8_t* m = mask.data<uint8_t>();
  strided::for_each_offset<2>(shape, {ss.data(), ms.data()}, [&](const std::array<int64_t, 2>& off) {
    if (m[off[1]]) picked.push_back(off[0]);
  });
  const Shape out_shape{int64_t(picked.size())};
  TensorRef out = sdk::empty(a.call(), out_shape, self.dtype(), self.device());
  strided::with_word(self.itemsize(), [&](auto word) {
    using W = decltype(word);
    const W* src = self.data<W>();
    W* dst = out.data<W>();
    for (size_t i = 0; i < picked.size(); ++i) dst[i] = src[picked[i]];
  });
  a.return_tensor(std::move(out));
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

#pragma once
// Advanced indexing's shape rules (NumPy's and PyTorch's), shared by every device's kernels so that
// they accept the same indices and refuse bad ones with the same messages: which dims the
// `Tensor?[] indices` cover, how the index tensors broadcast together (to B), and where B goes in
// the result. Reading the indices (their values, the masks' nonzeros) stays with each plugin.
#include <tessera/sdk/plugin.h>

#include <span>
#include <string>
#include <vector>

namespace tessera::sdk {

// Right-aligned broadcast of `shape` into `acc`; false when they do not fit.
inline bool broadcast_into(std::vector<int64_t>& acc, std::span<const int64_t> shape) {
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

inline bool is_mask_dtype(int32_t dtype) { return dtype == TS_BOOL || dtype == TS_UINT8; }

[[noreturn]] inline void fail_too_many_indices(const char* op, int64_t ndim, int64_t needed) {
  fail(TS_ERROR_INDEX, op, ": too many indices for a tensor of dimension ", ndim, " (the indices cover ", needed,
       " dimensions)");
}

// A mask given at position `j` of the indices covers the target's dims from `d` on: their sizes must match.
inline void check_mask_shape(const char* op, const TensorRef& mask, const TensorRef& target, size_t j, int64_t d) {
  if (d + mask.dim() > target.dim()) fail_too_many_indices(op, target.dim(), d + mask.dim());
  for (int64_t k = 0; k < mask.dim(); ++k)
    TS_SDK_CHECK(mask.size(k) == target.size(d + k), TS_ERROR_INDEX, op, ": the shape of the mask ",
                 shape_text(mask.sizes()), " at index ", j, " does not match the shape of the indexed tensor ",
                 shape_text(target.sizes()), " at index ", d + k);
}

// An index tensor that is not a mask: int64 or int32.
inline void check_index_tensor_dtype(const char* op, const TensorRef& index, size_t j) {
  TS_SDK_CHECK(index.dtype() == TS_INT64 || index.dtype() == TS_INT32, TS_ERROR_TYPE, op,
               ": tensors used as indices must be int64, int32, uint8 or bool tensors, got ", dtype_name(index.dtype()),
               " at index ", j);
}

// B: the index tensors' shapes broadcast together (IndexError naming them all when they do not).
inline std::vector<int64_t> broadcast_index_shapes(const char* op, const std::vector<std::vector<int64_t>>& shapes) {
  std::vector<int64_t> b;
  for (const std::vector<int64_t>& s : shapes)
    if (!broadcast_into(b, s)) {
      std::string all;
      for (const std::vector<int64_t>& x : shapes) all += (all.empty() ? "" : ", ") + shape_text(x);
      fail(TS_ERROR_INDEX, op, ": shape mismatch: indexing tensors could not be broadcast together with shapes ", all);
    }
  return b;
}

// One entry of the target's dims as the indices consume them: an advanced slot (an index
// tensor's dim, or a mask's; `self_dim` -1 for a 0-d mask's new dim) or a plain one (taken whole).
struct IndexSlot {
  bool advanced = false;
  int64_t self_dim = -1;
};

// The result of an advanced indexing of `target`: per result dim its size, the target's stride
// there (0 in the dims of B) and the stride into a contiguous array of one offset per position of
// B (0 outside B). B replaces the advanced slots when they are adjacent, else it comes first.
struct IndexLayout {
  std::vector<int64_t> out_sizes, src_strides, pos_strides;
  int64_t b_first = 0;  // the first result dim of B
};

inline IndexLayout advanced_index_layout(const TensorRef& target, std::span<const IndexSlot> slots,
                                         std::span<const int64_t> b_shape) {
  int64_t first = -1, last = -1, count = 0;
  for (size_t s = 0; s < slots.size(); ++s)
    if (slots[s].advanced) {
      if (first < 0) first = int64_t(s);
      last = int64_t(s);
      ++count;
    }
  const bool adjacent = count == 0 || last - first + 1 == count;
  std::vector<int64_t> b_pos(b_shape.size(), 1);  // contiguous strides over B
  for (size_t i = b_shape.size(); i-- > 1;) b_pos[i - 1] = b_pos[i] * b_shape[i];
  IndexLayout l;
  auto add_b = [&] {
    l.b_first = int64_t(l.out_sizes.size());
    for (size_t i = 0; i < b_shape.size(); ++i) {
      l.out_sizes.push_back(b_shape[i]);
      l.src_strides.push_back(0);
      l.pos_strides.push_back(b_pos[i]);
    }
  };
  bool b_added = !adjacent;
  if (b_added) add_b();
  for (const IndexSlot& s : slots) {
    if (s.advanced) {
      if (!b_added) add_b(), b_added = true;
      continue;
    }
    l.out_sizes.push_back(target.size(s.self_dim));
    l.src_strides.push_back(target.stride(s.self_dim));
    l.pos_strides.push_back(0);
  }
  if (!b_added) add_b();
  return l;
}

// `values` fits the indexing result: it broadcasts to exactly `out_sizes` (ValueError otherwise).
inline void check_values_fit(const char* op, const TensorRef& values, std::span<const int64_t> out_sizes) {
  std::vector<int64_t> fit(out_sizes.begin(), out_sizes.end());
  const bool ok = values.dim() <= int64_t(fit.size()) && broadcast_into(fit, values.sizes()) &&
                  std::equal(fit.begin(), fit.end(), out_sizes.begin(), out_sizes.end());
  TS_SDK_CHECK(ok, TS_ERROR_VALUE, op, ": shape mismatch: value tensor of shape ", shape_text(values.sizes()),
               " cannot be broadcast to indexing result of shape ", shape_text(out_sizes));
}

}  // namespace tessera::sdk

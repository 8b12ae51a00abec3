// Shape and indexing composites: triangles, rolls, repeats, moves and takes over views, cat,
// where and gather.
#include "composite.h"

#include <algorithm>

namespace tessera::composites {
namespace {

// Row index minus column index compared with `diagonal`: the mask of a matrix triangle.
TensorRef triangle_mask(const TensorRef& self, int64_t diagonal, bool lower, const char* op) {
  if (self.dim() < 2) fail(TS_ERROR_VALUE, op, ": input tensor must have at least 2 dimensions");
  int64_t rows = self.size(self.dim() - 2), cols = self.size(self.dim() - 1);
  TensorRef r = ops::unsqueeze(ops::arange(Scalar(rows), int32_t(TS_INT64), self.device()), 1);
  TensorRef c = ops::arange(Scalar(cols), int32_t(TS_INT64), self.device());
  TensorRef offset = ops::sub(c, r);  // [rows, cols]: column - row
  return lower ? ops::le(offset, Scalar(diagonal)) : ops::ge(offset, Scalar(diagonal));
}

void tril(Args& a) {
  TensorRef x = a.tensor(0);
  a.return_tensor(ops::where(triangle_mask(x, a.to_int(1), true, "tril"), x, zero_like_scalar(x)));
}
void triu(Args& a) {
  TensorRef x = a.tensor(0);
  a.return_tensor(ops::where(triangle_mask(x, a.to_int(1), false, "triu"), x, zero_like_scalar(x)));
}

// [2, n] coordinates of the triangle, row by row.
void triangle_indices(Args& a, bool lower, const char* op) {
  int64_t row = a.to_int(0), col = a.to_int(1), offset = a.to_int(2);
  if (row < 0 || col < 0) fail(TS_ERROR_VALUE, op, ": row and col must be non-negative, got ", row, " and ", col);
  int32_t dtype = a.optional_dtype(3).value_or(TS_INT64);
  if (dtype != TS_INT64 && dtype != TS_INT32) fail(TS_ERROR_TYPE, op, ": expected dtype int32 or int64, got ", sdk::dtype_name(dtype));
  ts_device device = a.optional_device(4).value_or(ts_device{0, 0});
  TensorRef grid = ops::zeros({row, col}, int32_t(TS_INT64), device);
  TensorRef mask = triangle_mask(grid, offset, lower, op);
  a.return_tensor(ops::to(ops::contiguous(ops::transpose(ops::nonzero(mask), 0, 1)), dtype));
}
void tril_indices(Args& a) { triangle_indices(a, true, "tril_indices"); }
void triu_indices(Args& a) { triangle_indices(a, false, "triu_indices"); }

void roll(Args& a) {
  TensorRef x = a.tensor(0);
  auto shifts = a.int_list(1);
  auto dims = a.int_list(2);
  if (dims.empty()) {  // roll the flattened tensor, then restore the shape
    if (shifts.size() != 1) fail(TS_ERROR_VALUE, "roll: expected one shift when dims is empty, got ", shifts.size());
    TensorRef flat = ops::reshape(x, {-1});
    int64_t n = flat.numel();
    if (n == 0) return a.return_tensor(ops::clone(x));
    int64_t s = ((shifts[0] % n) + n) % n;
    TensorRef rolled = s == 0 ? ops::clone(flat) : ops::cat({ops::narrow(flat, 0, n - s, s), ops::narrow(flat, 0, 0, n - s)}, 0);
    return a.return_tensor(ops::reshape(rolled, shape_of(x)));
  }
  if (shifts.size() != dims.size())
    fail(TS_ERROR_VALUE, "roll: shifts and dimensions must align. shifts: ", shifts.size(), ", dims:", dims.size());
  TensorRef out = x;
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = wrap_dim("roll", dims[i], x.dim());
    int64_t n = out.size(d);
    if (n == 0) continue;
    int64_t s = ((shifts[i] % n) + n) % n;
    if (s == 0) continue;
    out = ops::cat({ops::narrow(out, d, n - s, s), ops::narrow(out, d, 0, n - s)}, d);
  }
  if (out.handle() == x.handle()) out = ops::clone(x);
  a.return_tensor(std::move(out));
}

void rot90(Args& a) {
  TensorRef x = a.tensor(0);
  int64_t k = a.to_int(1);
  auto dims = a.int_list(2);
  if (dims.size() != 2) fail(TS_ERROR_VALUE, "rot90: expected total rotation dims == 2, but got dims = ", dims.size());
  if (x.dim() < 2) fail(TS_ERROR_VALUE, "rot90: expected total dims >= 2, but got total dims = ", x.dim());
  int64_t d0 = wrap_dim("rot90", dims[0], x.dim()), d1 = wrap_dim("rot90", dims[1], x.dim());
  if (d0 == d1) fail(TS_ERROR_VALUE, "rot90: expected rotation dims to be different, but got dim0 = ", d0, " and dim1 = ", d1);
  k = ((k % 4) + 4) % 4;
  if (k == 1) return a.return_tensor(ops::transpose(ops::flip(x, {d1}), d0, d1));
  if (k == 2) return a.return_tensor(ops::flip(x, {d0, d1}));
  if (k == 3) return a.return_tensor(ops::transpose(ops::flip(x, {d0}), d0, d1));
  a.return_tensor(ops::clone(x));
}

// x viewed as [1, s0, 1, s1, ...], expanded to [r0, s0, r1, s1, ...] and flattened pairwise.
TensorRef repeat_impl(const TensorRef& x, std::span<const int64_t> repeats) {
  if (int64_t(repeats.size()) < x.dim())
    fail(TS_ERROR_VALUE, "repeat: Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor");
  for (int64_t r : repeats)
    if (r < 0) fail(TS_ERROR_VALUE, "repeat: repeats must be non-negative, got ", r);
  IntList padded(repeats.size() - size_t(x.dim()), 1);
  for (int64_t s : x.sizes()) padded.push_back(s);
  IntList interleaved, expanded, result;
  for (size_t i = 0; i < repeats.size(); ++i) {
    interleaved.insert(interleaved.end(), {1, padded[i]});
    expanded.insert(expanded.end(), {repeats[i], padded[i]});
    result.push_back(repeats[i] * padded[i]);
  }
  return ops::reshape(ops::contiguous(ops::expand(ops::reshape(x, interleaved), expanded)), result);
}

void repeat(Args& a) { a.return_tensor(repeat_impl(a.tensor(0), a.int_list(1))); }

void tile(Args& a) {
  TensorRef x = a.tensor(0);
  auto dims = a.int_list(1);
  IntList reps(size_t(std::max<int64_t>(0, x.dim() - int64_t(dims.size()))), 1);
  reps.insert(reps.end(), dims.begin(), dims.end());
  a.return_tensor(repeat_impl(x, reps));
}

void repeat_interleave(Args& a) {
  TensorRef x = a.tensor(0);
  int64_t repeats = a.to_int(1);
  auto dim = a.optional_int(2);
  if (repeats < 0) fail(TS_ERROR_VALUE, "repeat_interleave: repeats can not be negative");
  TensorRef v = dim ? x : ops::reshape(x, {-1});
  int64_t d = dim ? wrap_dim("repeat_interleave", *dim, x.dim()) : 0;
  if (v.dim() == 0) v = ops::reshape(v, {1});
  IntList expanded = shape_of(v);
  expanded.insert(expanded.begin() + d + 1, repeats);
  IntList result = shape_of(v);
  result[size_t(d)] *= repeats;
  a.return_tensor(ops::reshape(ops::contiguous(ops::expand(ops::unsqueeze(v, d + 1), expanded)), result));
}

// PyTorch's movedim: the moved dims land at `destination`; the others keep their order.
TensorRef movedim_impl(const TensorRef& x, std::span<const int64_t> src, std::span<const int64_t> dst) {
  if (src.size() != dst.size())
    fail(TS_ERROR_VALUE, "movedim: Invalid source or destination dims: source (", src.size(),
         " dims) should contain the same number of dims as destination (", dst.size(), " dims)");
  int64_t n = x.dim();
  IntList perm(size_t(n), -1);
  std::vector<bool> used_src(static_cast<size_t>(n)), used_dst(static_cast<size_t>(n));
  for (size_t i = 0; i < src.size(); ++i) {
    int64_t s = wrap_dim("movedim", src[i], n), d = wrap_dim("movedim", dst[i], n);
    if (used_src[size_t(s)]) fail(TS_ERROR_VALUE, "movedim: repeated dim in `source` (", src[i], ")");
    if (used_dst[size_t(d)]) fail(TS_ERROR_VALUE, "movedim: repeated dim in `destination` (", dst[i], ")");
    used_src[size_t(s)] = used_dst[size_t(d)] = true;
    perm[size_t(d)] = s;
  }
  int64_t next = 0;
  for (auto& p : perm) {
    if (p != -1) continue;
    while (used_src[size_t(next)]) ++next;
    p = next++;
  }
  return ops::permute(x, perm);
}

}  // namespace

TensorRef movedim_to(const TensorRef& x, std::span<const int64_t> source, std::span<const int64_t> destination) {
  return movedim_impl(x, source, destination);
}

namespace {

void movedim_list(Args& a) { a.return_tensor(movedim_impl(a.tensor(0), a.int_list(1), a.int_list(2))); }
void movedim_int(Args& a) {
  int64_t s = a.to_int(1), d = a.to_int(2);
  a.return_tensor(movedim_impl(a.tensor(0), {&s, 1}, {&d, 1}));
}

void broadcast_to(Args& a) {
  auto size = a.int_list(1);
  a.return_tensor(ops::expand(a.tensor(0), IntList(size.begin(), size.end())));
}

void unflatten(Args& a) {
  TensorRef x = a.tensor(0);
  int64_t d = wrap_dim("unflatten", a.to_int(1), x.dim());
  auto sizes = a.int_list(2);
  if (sizes.empty()) fail(TS_ERROR_VALUE, "unflatten: sizes must be non-empty");
  IntList shape = shape_of(x);
  shape.erase(shape.begin() + d);
  shape.insert(shape.begin() + d, sizes.begin(), sizes.end());
  a.return_tensor(ops::view(x, shape));
}

// Negative indices count from the end, as in PyTorch's take.
TensorRef wrap_indices(const TensorRef& index, int64_t n) {
  return ops::where(ops::lt(index, Scalar(0)), ops::add(index, Scalar(n)), index);
}

void take(Args& a) {
  TensorRef x = a.tensor(0), index = a.tensor(1);
  if (index.dtype() != TS_INT64) fail(TS_ERROR_TYPE, "take: expected a long tensor for index, but got ", sdk::dtype_name(index.dtype()));
  TensorRef flat = ops::reshape(x, {-1});
  TensorRef picked = ops::index_select(flat, 0, ops::reshape(wrap_indices(index, flat.numel()), {-1}));
  a.return_tensor(ops::reshape(picked, shape_of(index)));
}

void take_along_dim(Args& a) {
  TensorRef x = a.tensor(0), idx = a.tensor(1);
  auto dim = a.optional_int(2);
  if (!dim) return a.return_tensor(ops::gather(ops::reshape(x, {-1}), 0, ops::reshape(idx, {-1})));
  if (x.dim() != idx.dim())
    fail(TS_ERROR_VALUE, "take_along_dim: input and indices should have the same number of dimensions, but got ",
         x.dim(), " dimensions for input, and ", idx.dim(), " dimensions for indices");
  int64_t d = wrap_dim("take_along_dim", *dim, x.dim());
  IntList xs = shape_of(x), is = shape_of(idx);
  for (int64_t k = 0; k < x.dim(); ++k) {
    if (k == d) continue;
    int64_t p = xs[size_t(k)], q = is[size_t(k)];
    if (p != q && p != 1 && q != 1)
      fail(TS_ERROR_VALUE, "take_along_dim: the sizes of input (", p, ") and indices (", q, ") at dimension ", k,
           " cannot be broadcast");
    xs[size_t(k)] = is[size_t(k)] = std::max(p, q);
  }
  a.return_tensor(ops::gather(ops::expand(x, xs), d, ops::expand(idx, is)));
}

void meshgrid_impl(Args& a, std::string_view indexing) {
  std::vector<TensorRef> ts = a.tensor_list(0);
  if (ts.empty()) fail(TS_ERROR_VALUE, "meshgrid: expects a non-empty TensorList");
  if (indexing != "ij" && indexing != "xy")
    fail(TS_ERROR_VALUE, "meshgrid: indexing must be one of \"xy\" or \"ij\", but received: ", indexing);
  IntList shape;
  for (const auto& t : ts) {
    if (t.dim() > 1) fail(TS_ERROR_VALUE, "meshgrid: Expected 0D or 1D tensor in the tensor list but got a ", t.dim(), "D tensor");
    shape.push_back(t.numel());
  }
  bool swap = indexing == "xy" && ts.size() >= 2;
  if (swap) std::swap(shape[0], shape[1]);
  std::vector<TensorRef> out;
  for (size_t i = 0; i < ts.size(); ++i) {
    size_t at = swap && i < 2 ? 1 - i : i;
    IntList view(ts.size(), 1);
    view[at] = -1;
    out.push_back(ops::expand(ops::reshape(ts[i], view), shape));
  }
  return_tensor_list(a, out);
}
void meshgrid(Args& a) { meshgrid_impl(a, "ij"); }
void meshgrid_indexing(Args& a) {
  const std::string_view indexing = *a.optional_str(1);
  meshgrid_impl(a, indexing);
}

}  // namespace

void register_shape(sdk::Registrar& reg) {
  composite(reg, "tril", tril, true, true);
  composite(reg, "triu", triu, true, true);
  composite(reg, "tril_indices", tril_indices);
  composite(reg, "triu_indices", triu_indices);
  composite(reg, "roll", roll);
  composite(reg, "rot90", rot90);
  composite(reg, "repeat", repeat);
  composite(reg, "tile", tile);
  composite(reg, "repeat_interleave.self_int", repeat_interleave);
  composite(reg, "movedim.intlist", movedim_list);
  composite(reg, "movedim.int", movedim_int);
  composite(reg, "broadcast_to", broadcast_to);
  composite(reg, "unflatten.int", unflatten);
  composite(reg, "take", take);
  composite(reg, "take_along_dim", take_along_dim);
  composite(reg, "meshgrid", meshgrid);
  composite(reg, "meshgrid.indexing", meshgrid_indexing);
}

}  // namespace tessera::composites

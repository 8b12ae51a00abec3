// Diagonal composites over the diagonal view, and index fills over index_put.
#include "composite.h"

namespace tessera::composites {
namespace {

void trace(Args& a) {
  TensorRef x = a.tensor(0);
  if (x.dim() != 2) fail(TS_ERROR_VALUE, "trace: expected a matrix, but got tensor with dim ", x.dim());
  a.return_tensor(ops::sum(ops::diagonal(x, 0, 0, 1)));
}

// A zero tensor whose (offset) diagonal of dims dim1 and dim2 holds `values` ([..., n], the
// diagonal last): built out of place with index_put on [..., N, N], then the two dims moved, so
// autograd sees functional operators only (no in-place write into a view of a fresh tensor).
TensorRef embed(const TensorRef& values, int64_t offset, int64_t dim1, int64_t dim2) {
  const int64_t n = values.size(values.dim() - 1), N = n + (offset < 0 ? -offset : offset);
  IntList shape = shape_of(values);
  shape.back() = N;
  shape.push_back(N);
  TensorRef i = ops::arange(Scalar(n), int32_t(TS_INT64), values.device());
  TensorRef rows = offset >= 0 ? i : ops::add(i, Scalar(-offset));
  TensorRef cols = offset >= 0 ? ops::add(i, Scalar(offset)) : i;
  std::vector<TensorRef> indices(static_cast<size_t>(values.dim() - 1));
  indices.push_back(rows);
  indices.push_back(cols);
  TensorRef square = ops::index_put(ops::zeros(shape, values.dtype(), values.device()), indices, values, false);
  const int64_t nd = int64_t(shape.size());
  const IntList source{nd - 2, nd - 1}, destination{dim1, dim2};
  return movedim_to(square, source, destination);
}

void diag(Args& a) {
  TensorRef x = a.tensor(0);
  int64_t k = a.to_int(1);
  if (x.dim() == 1) {
    return a.return_tensor(embed(x, k, 0, 1));
  }
  if (x.dim() != 2) fail(TS_ERROR_VALUE, "diag(): Supports 1D or 2D tensors. Got ", x.dim(), "D");
  a.return_tensor(ops::contiguous(ops::clone(ops::diagonal(x, k, 0, 1))));
}

void diag_embed(Args& a) {
  TensorRef x = a.tensor(0);
  int64_t offset = a.to_int(1);
  int64_t nd = x.dim() + 1;
  int64_t d1 = wrap_dim("diag_embed", a.to_int(2), nd), d2 = wrap_dim("diag_embed", a.to_int(3), nd);
  if (d1 == d2) fail(TS_ERROR_VALUE, "diag_embed: diagonal dimensions cannot be identical ", a.to_int(2), ", ", a.to_int(3));
  a.return_tensor(ops::contiguous(embed(x.dim() ? x : ops::reshape(x, {1}), offset, d1, d2)));
}

void block_diag(Args& a) {
  std::vector<TensorRef> ts = a.tensor_list(0);
  int64_t rows = 0, cols = 0;
  int32_t dtype = ts.empty() ? sdk::host().default_float_dtype() : ts[0].dtype();
  std::vector<TensorRef> blocks;
  for (size_t i = 0; i < ts.size(); ++i) {
    const TensorRef& t = ts[i];
    if (t.dim() > 2) fail(TS_ERROR_VALUE, "block_diag: Input tensors must have 2 or fewer dimensions. Input ", i, " has ", t.dim(), " dimensions");
    blocks.push_back(t.dim() == 2 ? t : ops::reshape(t, {1, t.dim() == 0 ? 1 : t.numel()}));
    rows += blocks.back().size(0);
    cols += blocks.back().size(1);
    dtype = sdk::promote_types(dtype, t.dtype());
  }
  ts_device device = ts.empty() ? ts_device{0, 0} : ts[0].device();
  // Each block padded with zeros left and right (out of place, so autograd sees cat only).
  std::vector<TensorRef> rows_of_blocks;
  int64_t c = 0;
  for (const TensorRef& b : blocks) {
    std::vector<TensorRef> row;
    if (c > 0) row.push_back(ops::zeros({b.size(0), c}, dtype, device));
    row.push_back(ops::to(b, dtype));
    if (cols - c - b.size(1) > 0) row.push_back(ops::zeros({b.size(0), cols - c - b.size(1)}, dtype, device));
    rows_of_blocks.push_back(ops::cat(row, 1));
    c += b.size(1);
  }
  a.return_tensor(rows_of_blocks.empty() ? ops::zeros({rows, cols}, dtype, device) : ops::cat(rows_of_blocks, 0));
}

// The indices list of index_put that selects `index` along `dim`: None before it.
std::vector<TensorRef> along(const char* op, int64_t dim, const TensorRef& index) {
  if (index.dim() > 1) fail(TS_ERROR_VALUE, op, ": Index is supposed to be a vector, got ", index.dim(), "-D");
  if (index.dtype() != TS_INT64) fail(TS_ERROR_TYPE, op, ": Expected a long tensor for index, but got ", sdk::dtype_name(index.dtype()));
  std::vector<TensorRef> indices(static_cast<size_t>(dim));
  indices.push_back(ops::reshape(index, {-1}));
  return indices;
}

void index_fill(Args& a) {
  TensorRef self = a.tensor(0), index = a.tensor(2);
  int64_t dim = wrap_dim("index_fill", a.to_int(1), self.dim());
  TensorRef x = self.dim() ? self : ops::reshape(self, {1});
  TensorRef value = ops::full({}, Scalar(a.scalar(3)), self.dtype(), self.device());
  TensorRef out = ops::index_put(x, along("index_fill", dim, index), value, false);
  a.return_tensor(self.dim() ? out : ops::reshape(out, {}));
}

void index_copy(Args& a) {
  TensorRef self = a.tensor(0), index = a.tensor(2), source = a.tensor(3);
  int64_t dim = wrap_dim("index_copy", a.to_int(1), self.dim());
  if (source.dim() != self.dim() || (self.dim() && source.size(dim) != index.numel()))
    fail(TS_ERROR_VALUE, "index_copy: expected source to have self's dims with size ", index.numel(), " at dim ", dim);
  a.return_tensor(ops::index_put(self, along("index_copy", dim, index), source, false));
}

}  // namespace

void register_diagonals(sdk::Registrar& reg) {
  composite(reg, "trace", trace);
  composite(reg, "diag", diag);
  composite(reg, "diag_embed", diag_embed);
  composite(reg, "block_diag", block_diag);
  composite(reg, "index_fill.int_Scalar", index_fill, true);
  composite(reg, "index_copy", index_copy, true);
}

}  // namespace tessera::composites

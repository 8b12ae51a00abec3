// Diagonal composites over the diagonal view, and index fills over index_put.
#include "composite.h"

namespace tessera::composites {
namespace {

void trace(Args& a) {
  TensorRef x = a.tensor(0);
  if (x.dim() != 2) fail(TS_ERROR_VALUE, "trace: expected a matrix, but got tensor with dim ", x.dim());
  a.return_tensor(ops::sum(ops::diagonal(x, 0, 0, 1)));
}

// A zero tensor of `shape` with `values` written on the (offset, dim1, dim2) diagonal.
TensorRef embed(const TensorRef& values, IntList shape, int64_t offset, int64_t dim1, int64_t dim2) {
  TensorRef out = ops::zeros(shape, values.dtype(), values.device());
  ops::copy_(ops::diagonal(out, offset, dim1, dim2), values);
  return out;
}

void diag(Args& a) {
  TensorRef x = a.tensor(0);
  int64_t k = a.to_int(1);
  if (x.dim() == 1) {
    int64_t n = x.numel() + (k < 0 ? -k : k);
    return a.return_tensor(embed(x, {n, n}, k, 0, 1));
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
  int64_t n = (x.dim() ? x.size(x.dim() - 1) : 1) + (offset < 0 ? -offset : offset);
  IntList rest = shape_of(x);
  if (!rest.empty()) rest.pop_back();
  IntList shape;
  for (int64_t d = 0, r = 0; d < nd; ++d) shape.push_back(d == d1 || d == d2 ? n : rest[size_t(r++)]);
  a.return_tensor(embed(x.dim() ? x : ops::reshape(x, {1}), shape, offset, d1, d2));
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
  TensorRef out = ops::zeros({rows, cols}, dtype, device);
  int64_t r = 0, c = 0;
  for (const TensorRef& b : blocks) {
    ops::copy_(ops::narrow(ops::narrow(out, 0, r, b.size(0)), 1, c, b.size(1)), b);
    r += b.size(0);
    c += b.size(1);
  }
  a.return_tensor(std::move(out));
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

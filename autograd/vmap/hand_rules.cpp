// Batching rules written by hand: the matmul family, permute, expand, squeeze(), x[idx], nll_loss.
#include "call_frame.h"

#include <cstring>

namespace tessera::vmap {
namespace {

sdk::Scalar scalar_of(const ts_value& v) {
  if (v.tag == TS_VALUE_DOUBLE) return sdk::Scalar(v.u.d);
  if (v.tag == TS_VALUE_BOOL) return sdk::Scalar(bool(v.u.b));
  return sdk::Scalar(v.u.i);
}

bool is_one(const ts_value& v) { return v.tag == TS_VALUE_DOUBLE ? v.u.d == 1.0 : v.u.i == 1; }
bool is_zero(const ts_value& v) { return v.tag == TS_VALUE_DOUBLE ? v.u.d == 0.0 : v.u.i == 0; }

// matmul of two logical operands, either batched at the frame's level; the result's batch is in front.
sdk::TensorRef batched_matmul(const CallFrame& f, ts_tensor a, ts_tensor b) {
  const bool ba = f.is_batched(a), bb = f.is_batched(b);
  const int64_t ra = rank_of(a), rb = rank_of(b);
  sdk::TensorRef va = ba ? f.value(a) : sdk::TensorRef::borrow(a);
  sdk::TensorRef vb = bb ? f.value(b) : sdk::TensorRef::borrow(b);
  BelowLevel below(f.level());
  // A shared matrix times each sample's matrix (an ensemble's x @ W_b^T): one GEMM against the
  // samples' matrices side by side, [K, B * N], where their layout makes that a view (a stacked
  // weight used transposed does), instead of B small products.
  if (!ba && bb && ra == 2 && rb == 2 && vb.stride(0) == vb.size(2) * vb.stride(2)) {
    const int64_t B = vb.size(0), K = vb.size(1), N = vb.size(2), M = va.size(0);
    sdk::TensorRef side = sdk::ops::reshape(sdk::ops::transpose(vb, 0, 1), {K, B * N});
    return sdk::ops::transpose(sdk::ops::reshape(sdk::ops::mm(va, side), {M, B, N}), 0, 1);
  }
  // One side batched and the other without batch dims of its own: matmul's broadcasting already
  // carries the batch (the batched side's rows, or its leading dims).
  if ((ba && !bb && rb <= 2) || (!ba && bb && rb >= 2)) return sdk::ops::matmul(va, vb);
  const bool row = ra == 1, col = rb == 1;
  if (row) va = sdk::ops::unsqueeze(va, ba ? 1 : 0);
  if (col) vb = sdk::ops::unsqueeze(vb, -1);
  const int64_t la = std::max<int64_t>(ra, 2) - 2, lb = std::max<int64_t>(rb, 2) - 2, d = std::max(la, lb);
  auto align = [&](sdk::TensorRef v, bool is_batched, int64_t own) {
    for (int64_t i = own; i < d; ++i) v = sdk::ops::unsqueeze(v, is_batched ? 1 : 0);
    return is_batched ? v : sdk::ops::unsqueeze(v, 0);
  };
  va = align(va, ba, la);
  vb = align(vb, bb, lb);
  sdk::TensorRef out = sdk::ops::matmul(va, vb);
  if (col) out = sdk::ops::squeeze(out, -1);
  if (row) out = sdk::ops::squeeze(out, -1 - (col ? 0 : 1));
  return out;
}

void require_rank(const CallFrame& f, ts_tensor t, int64_t rank, const char* what) {
  if (rank_of(t) != rank)
    sdk::fail(TS_ERROR, f.op_name(), ": ", what, " must be a ", rank, "-D tensor, got a ", rank_of(t), "-D tensor");
}

bool matmul_rule(CallFrame& f) {
  const std::string_view name = f.op_name();
  const auto& args = f.args();
  if (name == "mm" || name == "bmm") {
    const int64_t rank = name == "mm" ? 2 : 3;
    require_rank(f, args[0].u.tensor, rank, "self");
    require_rank(f, args[1].u.tensor, rank, "mat2");
  }
  if (name == "addmm") {
    require_rank(f, args[1].u.tensor, 2, "mat1");
    require_rank(f, args[2].u.tensor, 2, "mat2");
    sdk::TensorRef out = batched_matmul(f, args[1].u.tensor, args[2].u.tensor);
    ts_tensor self = args[0].u.tensor;
    BelowLevel below(f.level());
    if (!is_one(args[4])) out = sdk::ops::mul(out, scalar_of(args[4]));
    if (!is_zero(args[3])) {
      sdk::TensorRef s = f.is_batched(self) ? pad_after_batch(f.value(self), 2 - rank_of(self)) : sdk::TensorRef::borrow(self);
      out = sdk::ops::add(out, s, scalar_of(args[3]));
    }
    const sdk::TensorRef returns[] = {out};
    f.return_tensors(returns);
    return true;
  }
  const sdk::TensorRef returns[] = {batched_matmul(f, args[0].u.tensor, args[1].u.tensor)};
  f.return_tensors(returns);
  return true;
}

bool permute_rule(CallFrame& f) {
  ts_tensor self = f.arg(0).u.tensor;
  const int64_t rank = rank_of(self);
  const ts_value& v = f.arg(1);
  if (v.u.ints.size != rank)
    sdk::fail(TS_ERROR, "permute(sparse_coo): number of dimensions in the tensor input does not match the length of "
              "the desired ordering of dimensions i.e. input.dim() = ", rank, " is not equal to len(dims) = ", v.u.ints.size);
  std::vector<int64_t> dims{0};
  for (int64_t j = 0; j < v.u.ints.size; ++j) dims.push_back(wrap_dim(f, v.u.ints.data[j], rank) + 1);
  sdk::TensorRef out;
  {
    BelowLevel below(f.level());
    out = sdk::ops::permute(f.value(self), dims);
  }
  const sdk::TensorRef returns[] = {out};
  f.return_tensors(returns);
  return true;
}

bool expand_rule(CallFrame& f) {
  ts_tensor self = f.arg(0).u.tensor;
  const ts_value& v = f.arg(1);
  const int64_t rank = rank_of(self);
  if (v.u.ints.size < rank)
    sdk::fail(TS_ERROR, "expand: the number of sizes provided (", v.u.ints.size, ") must be greater or equal to the "
              "number of dimensions in the tensor (", rank, ")");
  std::vector<int64_t> size{f.batch_size()};
  size.insert(size.end(), v.u.ints.data, v.u.ints.data + v.u.ints.size);
  sdk::TensorRef out;
  {
    BelowLevel below(f.level());
    out = sdk::ops::expand(pad_after_batch(f.value(self), v.u.ints.size - rank), size);
  }
  const sdk::TensorRef returns[] = {out};
  f.return_tensors(returns);
  return true;
}

bool squeeze_rule(CallFrame& f) {
  sdk::TensorRef logical = sdk::TensorRef::borrow(f.arg(0).u.tensor);
  sdk::TensorRef out = f.value(logical.handle());
  {
    BelowLevel below(f.level());
    for (int64_t d = logical.dim() - 1; d >= 0; --d)
      if (logical.size(d) == 1) out = sdk::ops::squeeze(out, d + 1);
  }
  const sdk::TensorRef returns[] = {out};
  f.return_tensors(returns);
  return true;
}

// x[idx] with x batched and the indices not: the batch is one more leading full slice, as
// long as the indices are adjacent (else advanced indexing moves their dims to the front).
bool index_rule(CallFrame& f) {
  const ts_value& list = f.arg(1);
  int64_t first = -1, last = -1;
  for (int64_t j = 0; j < list.u.tensors.size; ++j) {
    ts_tensor t = list.u.tensors.data[j];
    if (!t) continue;
    if (f.is_batched(t)) return false;
    if (first < 0) first = j;
    last = j;
  }
  for (int64_t j = first; j >= 0 && j <= last; ++j)
    if (!list.u.tensors.data[j]) return false;
  std::vector<sdk::TensorRef> indices{sdk::TensorRef()};
  for (int64_t j = 0; j < list.u.tensors.size; ++j)
    indices.push_back(list.u.tensors.data[j] ? sdk::TensorRef::borrow(list.u.tensors.data[j]) : sdk::TensorRef());
  sdk::TensorRef out;
  {
    BelowLevel below(f.level());
    out = sdk::ops::index(f.value(f.arg(0).u.tensor), indices);
  }
  const sdk::TensorRef returns[] = {out};
  f.return_tensors(returns);
  return true;
}

// nll_loss_forward: the batch folds into N; the loss is computed unreduced, then reduced per sample
// with each sample's own total weight.
bool nll_loss_rule(CallFrame& f) {
  const auto& args = f.args();
  ts_tensor weight_arg = args[2].tag == TS_VALUE_TENSOR ? args[2].u.tensor : nullptr;
  if ((weight_arg && f.is_batched(weight_arg)) || rank_of(args[0].u.tensor) > 2) return false;
  const bool per_row = rank_of(args[0].u.tensor) == 2;
  const int64_t reduction = args[3].u.i, ignore = args[4].u.i, batch = f.batch_size();
  sdk::TensorRef self = f.batched_or_expanded(args[0].u.tensor);
  sdk::TensorRef target = f.batched_or_expanded(args[1].u.tensor);
  sdk::TensorRef out, total;
  {
    BelowLevel below(f.level());
    self = sdk::ops::reshape(self, {-1, self.size(self.dim() - 1)});
    target = sdk::ops::reshape(target, {-1});
    const sdk::TensorRef weight = weight_arg ? sdk::TensorRef::borrow(weight_arg) : sdk::TensorRef();
    sdk::TensorRef loss = std::get<0>(sdk::ops::nll_loss_forward(self, target, weight, 0, ignore));
    sdk::TensorRef kept = sdk::ops::ne(target, sdk::Scalar(ignore));
    sdk::TensorRef w = weight.defined()
                           ? sdk::ops::mul(sdk::ops::index_select(weight, 0, sdk::ops::mul(target, kept)), kept)
                           : sdk::ops::to(kept, self.dtype());
    total = sdk::ops::sum(sdk::ops::reshape(w, {batch, -1}), std::vector<int64_t>{1});
    loss = sdk::ops::reshape(loss, {batch, -1});
    if (reduction == 0) {
      out = per_row ? loss : sdk::ops::reshape(loss, {batch});
    } else {
      out = sdk::ops::sum(loss, std::vector<int64_t>{1});
      if (reduction == 1) out = sdk::ops::div(out, total);
    }
  }
  const sdk::TensorRef returns[] = {out, total};
  f.return_tensors(returns);
  return true;
}

// as_strided on a batched tensor: each sample's view starts from its own place in the value (the
// batch stride in front), so decompositions over as_strided (unfold) batch too.
bool as_strided_rule(CallFrame& f) {
  const auto& args = f.args();
  sdk::TensorRef v = f.value(args[0].u.tensor);
  std::vector<int64_t> size{f.batch_size()}, stride{v.stride(0)};
  size.insert(size.end(), args[1].u.ints.data, args[1].u.ints.data + args[1].u.ints.size);
  stride.insert(stride.end(), args[2].u.ints.data, args[2].u.ints.data + args[2].u.ints.size);
  const int64_t offset = args.size() > 3 && args[3].tag != TS_VALUE_NONE ? args[3].u.i : v.storage_offset();
  std::vector<ts_value> values{sdk::value(v), f.hold_ints(size), f.hold_ints(stride), sdk::value(offset)};
  f.run_physical(values);
  f.return_wrapped(values);
  return true;
}

}  // namespace

bool run_special(CallFrame& f, const RuleSpec& spec) {
  const std::string_view op = spec.op;
  if (op == "matmul" || op == "mm" || op == "bmm" || op == "addmm") return matmul_rule(f);
  if (op == "permute") return permute_rule(f);
  if (op == "expand") return expand_rule(f);
  if (op == "squeeze") return squeeze_rule(f);
  if (op == "index.Tensor") return index_rule(f);
  if (op == "nll_loss_forward") return nll_loss_rule(f);
  if (op == "as_strided") return as_strided_rule(f);
  if (op.starts_with("convolution")) return run_convolution_rule(f);
  if (op.starts_with("native_batch_norm") || op.starts_with("native_group_norm")) return run_norm_rule(f);
  return run_nn_backward_rule(f);
}

}  // namespace tessera::vmap

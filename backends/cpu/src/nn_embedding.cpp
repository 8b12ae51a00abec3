// embedding (a row lookup: out[..., :] = weight[indices[...], :]) and its dense backward.
// The lookup moves elements as words of the dtype's width, so it takes every dtype. The
// backward buckets positions by weight row (a counting sort) and sums each row's gradients in
// index order, rows in parallel: no atomics, and the result does not depend on the threads.
#include "nn_norm.h"

#include "strided.h"
#include "tensor_iterator.h"

#include <cstring>

namespace tessera::cpu {
namespace {

using namespace norm;
using sdk::Args;
using sdk::fail;

// The indices as int64 in row-major order; TypeError unless int64/int32, IndexError outside [0, rows).
std::vector<int64_t> read_indices(const char* op, const TensorRef& indices, int64_t rows, const char* what) {
  std::vector<int64_t> out;
  out.reserve(size_t(indices.numel()));
  std::vector<int64_t> sizes = indices.shape_vector(), strides(indices.strides().begin(), indices.strides().end());
  if (sizes.empty()) sizes = {1}, strides = {0};
  auto collect = [&](auto* p) {
    strided::for_each_offset<1>(sizes, {strides.data()}, [&](const std::array<int64_t, 1>& off) {
      const int64_t v = int64_t(p[off[0]]);
      if (v < 0 || v >= rows)
        fail(TS_ERROR_INDEX, op, ": index ", v, " is out of range for ", what, " ", rows, " (expected [0, ", rows, "))");
      out.push_back(v);
    });
  };
  if (indices.dtype() == TS_INT64) collect(indices.data<int64_t>());
  else if (indices.dtype() == TS_INT32) collect(indices.data<int32_t>());
  else fail(TS_ERROR_TYPE, op, ": expected indices of dtype int64 or int32, got ", sdk::dtype_name(indices.dtype()));
  return out;
}

// embedding(Tensor weight, Tensor indices, int padding_idx=-1, bool scale_grad_by_freq=False,
//           bool sparse=False) -> weight rows, shape indices.shape + [embedding_dim]
// padding_idx, scale_grad_by_freq and sparse only matter to the backward (sparse gradients are
// not supported: the dense backward is used).
void embedding_kernel(Args& a) {
  const char* op = "embedding";
  const TensorRef weight = a.tensor(0), indices = a.tensor(1);
  check_cpu_all(op, {&weight, &indices});
  if (weight.dim() != 2)
    fail(TS_ERROR_VALUE, op, ": expected a 2-D weight (num_embeddings, embedding_dim), got shape ",
         strided::str(weight.sizes()));
  const std::vector<int64_t> idx = read_indices(op, indices, weight.size(0), "num_embeddings");
  std::vector<int64_t> shape = indices.shape_vector();
  const int64_t dim = weight.size(1);
  shape.push_back(dim);
  TensorRef out = sdk::empty(a.call(), shape, weight.dtype(), kCpuDevice);
  const int64_t n = int64_t(idx.size()), item = weight.itemsize();
  const int64_t row_stride = weight.stride(0), col_stride = weight.stride(1);
  const char* src = static_cast<const char*>(weight.data());
  char* dst = static_cast<char*>(out.data());
  if (n == 0 || dim == 0) {
    a.return_tensor(std::move(out));
    return;
  }
  const int64_t grain = std::max<int64_t>(1, kGrainSize / dim);
  strided::with_word(item, [&](auto word) {
    using W = decltype(word);
    parallel_for(n, grain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const W* s = reinterpret_cast<const W*>(src) + idx[size_t(i)] * row_stride;
        W* d = reinterpret_cast<W*>(dst) + i * dim;
        if (col_stride == 1) std::memcpy(d, s, size_t(dim) * sizeof(W));
        else
          for (int64_t j = 0; j < dim; ++j) d[j] = s[j * col_stride];
      }
    });
  });
  a.return_tensor(std::move(out));
}

// embedding_dense_backward(Tensor grad_output, Tensor indices, int num_weights, int padding_idx,
//   bool scale_grad_by_freq) -> grad_weight [num_weights, embedding_dim]
// Positions whose index equals padding_idx contribute nothing; with scale_grad_by_freq each
// row's gradient is divided by how often its index occurs.
void embedding_dense_backward_kernel(Args& a) {
  const char* op = "embedding_dense_backward";
  const TensorRef grad = a.tensor(0), indices = a.tensor(1);
  const int64_t num_weights = a.to_int(2), padding_idx = a.to_int(3);
  const bool scale_by_freq = a.to_bool(4);
  check_cpu_all(op, {&grad, &indices});
  require_floating(op, grad, "grad_output");
  if (num_weights < 0) fail(TS_ERROR_VALUE, op, ": expected num_weights >= 0, got ", num_weights);
  const int64_t k = indices.dim();
  bool ok = grad.dim() == k + 1;
  for (int64_t d = 0; ok && d < k; ++d) ok = grad.size(d) == indices.size(d);
  if (!ok)
    fail(TS_ERROR_VALUE, op, ": expected grad_output of shape indices.shape + [embedding_dim] (indices shape ",
         strided::str(indices.sizes()), "), got ", strided::str(grad.sizes()));
  const std::vector<int64_t> idx = read_indices(op, indices, num_weights, "num_weights");
  const int64_t dim = grad.size(k), n = int64_t(idx.size());
  const int64_t out_shape[] = {num_weights, dim};
  TensorRef out = zeros(a.call(), out_shape, grad.dtype());
  if (n == 0 || dim == 0 || num_weights == 0) {
    a.return_tensor(std::move(out));
    return;
  }
  // Counting sort of positions by weight row.
  std::vector<int64_t> start(static_cast<size_t>(num_weights) + 1, 0), order(static_cast<size_t>(n));
  for (int64_t v : idx) ++start[size_t(v) + 1];
  for (int64_t r = 0; r < num_weights; ++r) start[size_t(r) + 1] += start[size_t(r)];
  {
    std::vector<int64_t> fill(start.begin(), start.end() - 1);
    for (int64_t i = 0; i < n; ++i) order[size_t(fill[size_t(idx[size_t(i)])]++)] = i;
  }
  const TensorRef g = contiguous(a.call(), grad);
  TS_DISPATCH_FLOAT(grad.dtype(), break, {
    const scalar_t* gp = g.data<scalar_t>();
    scalar_t* gw = out.data<scalar_t>();
    const int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, dim * (n / num_weights + 1)));
    parallel_for(num_weights, grain, [&](int64_t rb, int64_t re) {
      std::vector<double> acc(static_cast<size_t>(dim));
      for (int64_t r = rb; r < re; ++r) {
        const int64_t b = start[size_t(r)], e = start[size_t(r) + 1];
        if (b == e || r == padding_idx) continue;
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t t = b; t < e; ++t) {
          const scalar_t* row = gp + order[size_t(t)] * dim;
          for (int64_t j = 0; j < dim; ++j) acc[size_t(j)] += load(row[j]);
        }
        const double scale = scale_by_freq ? 1.0 / double(e - b) : 1.0;
        for (int64_t j = 0; j < dim; ++j) gw[r * dim + j] = store<scalar_t>(acc[size_t(j)] * scale);
      }
    });
  });
  a.return_tensor(std::move(out));
}

}  // namespace

void register_embedding_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("embedding", key, embedding_kernel);
  reg.kernel("embedding_dense_backward", key, embedding_dense_backward_kernel);
}

}  // namespace tessera::cpu

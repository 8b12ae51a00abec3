// embedding and embedding_dense_backward (the CPU plugin's semantics, checks and messages).
// Indices outside the table are found on the device and raised here after reading the flag back
// (a synchronisation: the CPU raises IndexError, so do we, instead of a device assertion).
// Kernels: embedding.cu.
#include "cuda_plugin.h"
#include "nn_launch.h"

namespace tessera::gpu {
namespace {

void check_index_dtype(const char* op, const TensorRef& indices) {
  TS_SDK_CHECK(indices.dtype() == TS_INT64 || indices.dtype() == TS_INT32, TS_ERROR_TYPE, op,
               ": expected indices of dtype int64 or int32, got ", sdk::dtype_name(indices.dtype()));
}
void raise_bad_index(const char* op, const TensorRef& flag, int64_t rows, const char* what) {
  int64_t v = 0;
  TS_SDK_CHECK(!read_bad_index(flag, v), TS_ERROR_INDEX, op, ": index ", v, " is out of range for ", what, " ", rows,
               " (expected [0, ", rows, "))");
}

// embedding(Tensor weight, Tensor indices, int padding_idx=-1, bool scale_grad_by_freq=False,
//           bool sparse=False) -> weight rows, shape indices.shape + [embedding_dim]
void embedding_k(sdk::Args& a) {
  const char* op = "embedding";
  const TensorRef weight = a.tensor(0), indices = a.tensor(1);
  common_device(op, {&weight, &indices});
  TS_SDK_CHECK(weight.dim() == 2, TS_ERROR_VALUE, op,
               ": expected a 2-D weight (num_embeddings, embedding_dim), got shape ", shape_text(weight.sizes()));
  check_index_dtype(op, indices);
  DeviceGuard guard(weight.device().index);
  std::vector<int64_t> shape(indices.sizes().begin(), indices.sizes().end());
  shape.push_back(weight.size(1));
  TensorRef out = empty_on(a.call(), shape, weight.dtype(), weight.device());
  const TensorRef idx = contiguous(a.call(), indices, indices.dtype());
  TensorRef flag = bad_index_flag(a.call(), weight.device());
  EmbeddingArgs e;
  e.weight = first_element(weight), e.indices = first_element(idx), e.out = first_element(out);
  e.bad = reinterpret_cast<int64_t*>(first_element(flag));
  e.index_dtype = idx.dtype(), e.itemsize = int32_t(weight.itemsize());
  e.n = idx.numel(), e.dim = weight.size(1), e.rows = weight.size(0);
  e.row_stride = weight.stride(0), e.col_stride = weight.stride(1);
  launch_embedding(e, stream_for(weight.device().index));
  if (e.n * e.dim > 0) raise_bad_index(op, flag, e.rows, "num_embeddings");
  a.return_tensor(std::move(out));
}

// embedding_dense_backward(Tensor grad_output, Tensor indices, int num_weights, int padding_idx,
//   bool scale_grad_by_freq) -> grad_weight [num_weights, embedding_dim]
void embedding_dense_backward_k(sdk::Args& a) {
  const char* op = "embedding_dense_backward";
  const TensorRef grad = a.tensor(0), indices = a.tensor(1);
  const int64_t num_weights = a.to_int(2), padding_idx = a.to_int(3);
  const bool scale_by_freq = a.to_bool(4);
  common_device(op, {&grad, &indices});
  TS_SDK_CHECK(sdk::is_floating(grad.dtype()), TS_ERROR_TYPE, op,
               ": expected grad_output of a floating dtype (float16, bfloat16, float32, float64), got ",
               sdk::dtype_name(grad.dtype()));
  TS_SDK_CHECK(num_weights >= 0, TS_ERROR_VALUE, op, ": expected num_weights >= 0, got ", num_weights);
  const int64_t k = indices.dim();
  bool ok = grad.dim() == k + 1;
  for (int64_t d = 0; ok && d < k; ++d) ok = grad.size(d) == indices.size(d);
  TS_SDK_CHECK(ok, TS_ERROR_VALUE, op, ": expected grad_output of shape indices.shape + [embedding_dim] (indices shape ",
               shape_text(indices.sizes()), "), got ", shape_text(grad.sizes()));
  check_index_dtype(op, indices);
  DeviceGuard guard(grad.device().index);
  const gpuStream_t stream = stream_for(grad.device().index);
  const int64_t dim = grad.size(k);
  const int64_t out_shape[] = {num_weights, dim}, rows_shape[] = {num_weights};
  TensorRef out = empty_on(a.call(), out_shape, grad.dtype(), grad.device());
  TensorRef acc = empty_on(a.call(), out_shape, TS_FLOAT64, grad.device());
  check(gpuMemsetAsync(acc.data(), 0, size_t(acc.numel()) * sizeof(double), stream), op);
  TensorRef counts;
  if (scale_by_freq) {
    counts = empty_on(a.call(), rows_shape, TS_INT64, grad.device());
    check(gpuMemsetAsync(counts.data(), 0, size_t(num_weights) * sizeof(int64_t), stream), op);
  }
  const TensorRef idx = contiguous(a.call(), indices, indices.dtype()), g = contiguous(a.call(), grad, grad.dtype());
  TensorRef flag = bad_index_flag(a.call(), grad.device());
  EmbeddingArgs e;
  e.indices = first_element(idx), e.index_dtype = idx.dtype();
  e.grad = first_element(g), e.grad_dtype = g.dtype();
  e.acc = reinterpret_cast<double*>(first_element(acc));
  if (scale_by_freq) e.counts = reinterpret_cast<int64_t*>(first_element(counts));
  e.grad_weight = first_element(out);
  e.bad = reinterpret_cast<int64_t*>(first_element(flag));
  e.n = idx.numel(), e.dim = dim, e.rows = num_weights, e.padding_idx = padding_idx;
  e.scale_grad_by_freq = scale_by_freq;
  launch_embedding_backward(e, stream);
  // With no column the indices are not read by the kernel (as the CPU, which checks them all,
  // an empty gradient has nothing to check against but the indices: accepted here).
  if (e.n * e.dim > 0) raise_bad_index(op, flag, num_weights, "num_weights");
  a.return_tensor(std::move(out));
}
}  // namespace

void register_embedding_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("embedding", key, embedding_k);
  reg.kernel("embedding_dense_backward", key, embedding_dense_backward_k);
}

}  // namespace tessera::gpu

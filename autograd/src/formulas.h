#pragma once
// Helpers the derivative formulas of derivatives.yaml call. Every one is built from operators
// (sdk/ops.h), so with create_graph the backward is itself differentiable.
#include <tessera/sdk/ops.h>

#include <optional>
#include <string>
#include <vector>

namespace tessera::autograd::formulas {

using sdk::Scalar;
using sdk::TensorRef;
namespace ops = sdk::ops;
using IntList = std::vector<int64_t>;

// Sums a broadcast gradient back down to `sizes`.
TensorRef sum_to(const TensorRef& grad, const IntList& sizes);
TensorRef maybe_multiply(const TensorRef& grad, const Scalar& s);
TensorRef zeros_like(const TensorRef& t);
// as_strided in storage space: the positions of the input's and the output's elements.
struct StridedPositions {
  TensorRef input, output;  // int64, flattened
  int64_t extent = 0;       // storage elements spanned
};
StridedPositions strided_positions(const TensorRef& self, const IntList& size, const IntList& stride,
                                   std::optional<int64_t> storage_offset);
TensorRef as_strided_backward(const TensorRef& grad, const TensorRef& self, const IntList& size, const IntList& stride,
                              std::optional<int64_t> storage_offset);
TensorRef scalar_like(const TensorRef& t, double value);
// The complex conjugate of a complex tensor; a real tensor unchanged. Complex gradients follow
// PyTorch's convention (conjugate Wirtinger derivatives): d(a * b)/da flows as grad * conj(b).
TensorRef conj(const TensorRef& t);
// torch.fft: the adjoints of the real-input and real-output transforms.
TensorRef fft_r2c_backward(const TensorRef& grad, const IntList& self_sizes, const IntList& dim, int64_t normalization,
                           bool onesided);
TensorRef fft_c2r_backward(const TensorRef& grad, const IntList& dim, int64_t normalization);

// Gradient of a reduction over `dim` (all dims when empty/None) expanded back to `sizes`.
TensorRef unsqueeze_reduced(const TensorRef& grad, const IntList& sizes, const std::optional<IntList>& dim,
                            bool keepdim);
TensorRef sum_backward(const TensorRef& grad, const IntList& sizes, const std::optional<IntList>& dim, bool keepdim);
TensorRef mean_backward(const TensorRef& grad, const IntList& sizes, const std::optional<IntList>& dim, bool keepdim);
TensorRef prod_backward(const TensorRef& grad, const TensorRef& self, const TensorRef& result,
                        const std::optional<IntList>& dim, bool keepdim);
// cumprod along `dim`, zeros in the input included.
TensorRef cumprod_backward(const TensorRef& grad, const TensorRef& self, int64_t dim, const TensorRef& result);
TensorRef extreme_backward(const TensorRef& grad, const TensorRef& self, const TensorRef& result, const IntList& dim,
                           bool keepdim);
TensorRef var_backward(const TensorRef& grad, const TensorRef& self, const std::optional<IntList>& dim,
                       const std::optional<Scalar>& correction, bool keepdim);
TensorRef std_backward(const TensorRef& grad, const TensorRef& self, const TensorRef& result,
                       const std::optional<IntList>& dim, const std::optional<Scalar>& correction, bool keepdim);
TensorRef logsumexp_backward(const TensorRef& grad, const TensorRef& self, const TensorRef& result, const IntList& dim,
                             bool keepdim);

TensorRef pow_backward_self(const TensorRef& grad, const TensorRef& self, const TensorRef& exponent);
TensorRef pow_backward_self(const TensorRef& grad, const TensorRef& self, const Scalar& exponent);
TensorRef pow_backward_exponent(const TensorRef& grad, const TensorRef& self, const TensorRef& result);
TensorRef clamp_backward(const TensorRef& grad, const TensorRef& self, const std::optional<Scalar>& min,
                         const std::optional<Scalar>& max);
TensorRef minmax_backward(const TensorRef& grad, const TensorRef& self, const TensorRef& other, bool is_max, bool for_self);

TensorRef permute_backward(const TensorRef& grad, const IntList& dims);
TensorRef unsqueeze_to(const TensorRef& grad, const IntList& sizes);
TensorRef slice_grad(const TensorRef& grad, const IntList& sizes, int64_t dim, std::optional<int64_t> start,
                     std::optional<int64_t> end, int64_t step);
// slice_grad's gradient added into the same region of `into` (the input's shape) in place.
void add_slice_grad_into(TensorRef& into, const TensorRef& grad, int64_t dim, std::optional<int64_t> start,
                         std::optional<int64_t> end, int64_t step);
// linalg.solve (X = A^-1 B, or X A = B when !left): the gradients of A and B.
// Second derivatives of softmax / log_softmax: the gradients of their backward operators with
// respect to (grad_output, output).
std::tuple<TensorRef, TensorRef> softmax_backward_data_backward(const TensorRef& grad, const TensorRef& grad_output,
                                                                const TensorRef& output, int64_t dim,
                                                                int32_t input_dtype);
std::tuple<TensorRef, TensorRef> log_softmax_backward_data_backward(const TensorRef& grad, const TensorRef& grad_output,
                                                                    const TensorRef& output, int64_t dim);
std::tuple<TensorRef, TensorRef> linalg_solve_backward(const TensorRef& grad, const TensorRef& A, const TensorRef& X, bool left);
// linalg.cholesky (real): gA = sym(L^-T Phi(L^T gL) L^-1), Phi taking the lower triangle with a halved diagonal.
TensorRef cholesky_backward(const TensorRef& grad, const TensorRef& result, bool upper);
// linalg.eigh, linalg.svd and linalg.qr (real): the gradient of A from the outputs' gradients.
TensorRef eigh_backward(const TensorRef& gL, const TensorRef& gV, const TensorRef& L, const TensorRef& V);
TensorRef eig_backward(const TensorRef& gL, const TensorRef& gV, const TensorRef& A, const TensorRef& L,
                       const TensorRef& V);
TensorRef svd_backward(const TensorRef& gU, const TensorRef& gS, const TensorRef& gVh, const TensorRef& U,
                       const TensorRef& S, const TensorRef& Vh);
TensorRef qr_backward(const TensorRef& gQ, const TensorRef& gR, const TensorRef& Q, const TensorRef& R,
                      const std::string& mode);
// The gradient of diagonal(): zeros of the input's sizes with grad written on that diagonal.
TensorRef diagonal_backward(const TensorRef& grad, const IntList& sizes, int64_t offset, int64_t dim1, int64_t dim2);
TensorRef select_grad(const TensorRef& grad, const IntList& sizes, int64_t dim, int64_t index);
std::vector<TensorRef> cat_backward(const TensorRef& grad, const std::vector<IntList>& sizes, int64_t dim);
std::vector<TensorRef> stack_backward(const TensorRef& grad, size_t n, int64_t dim);

// convolution_backward_input(x, w) as a transposed convolution: the gradient of its weight is a
// convolution's weight gradient with the upstream gradient as the convolution's input.
TensorRef conv_transpose_weight_backward(const TensorRef& grad, const TensorRef& grad_output, const TensorRef& weight,
                                         const IntList& stride, const IntList& padding, const IntList& dilation,
                                         int64_t groups);

// matmul with NumPy broadcasting and 1-D promotion: the gradient of one operand.
TensorRef matmul_backward(const TensorRef& grad, const TensorRef& self, const TensorRef& other, bool for_self);

// scatter/scatter_add's gradient for src: only src's leading index-shaped block is read, the rest
// gets zeros.
TensorRef scatter_src_backward(const TensorRef& grad, int64_t dim, const TensorRef& index, const IntList& src_sizes);
TensorRef index_backward(const TensorRef& grad, const IntList& sizes, const std::vector<TensorRef>& indices);
TensorRef masked_select_backward(const TensorRef& grad, const TensorRef& self, const TensorRef& mask);

// Losses whose backward is composite. reduction: 0 none, 1 mean, 2 sum.
TensorRef l1_loss_backward(const TensorRef& grad, const TensorRef& self, const TensorRef& target, int64_t reduction);
TensorRef bce_with_logits_backward(const TensorRef& grad, const TensorRef& self, const TensorRef& target,
                                   const TensorRef& weight, const TensorRef& pos_weight, int64_t reduction);
TensorRef bce_with_logits_target_backward(const TensorRef& grad, const TensorRef& self, const TensorRef& target,
                                          const TensorRef& weight, const TensorRef& pos_weight, int64_t reduction);

// ---- Forward mode (jvp_formulas.cpp): an output's tangent from its inputs' tangents (`<arg>_t`).
// A tangent argument may be undefined where an optional input is absent.
TensorRef minmax_jvp(const TensorRef& self_t, const TensorRef& other_t, const TensorRef& self, const TensorRef& other,
                     bool is_max);
TensorRef softmax_jvp(const TensorRef& self_t, const TensorRef& result, int64_t dim);
TensorRef log_softmax_jvp(const TensorRef& self_t, const TensorRef& result, int64_t dim);
TensorRef as_strided_jvp(const TensorRef& self_t, const TensorRef& self, const IntList& size, const IntList& stride,
                         std::optional<int64_t> storage_offset);
TensorRef softmax_backward_data_jvp(const TensorRef& grad_output_t, const TensorRef& output_t,
                                    const TensorRef& grad_output, const TensorRef& output, int64_t dim);
TensorRef log_softmax_backward_data_jvp(const TensorRef& grad_output_t, const TensorRef& output_t,
                                        const TensorRef& grad_output, const TensorRef& output, int64_t dim);
TensorRef logsumexp_jvp(const TensorRef& self_t, const TensorRef& self, const IntList& dim, bool keepdim);
TensorRef var_jvp(const TensorRef& self_t, const TensorRef& self, const std::optional<IntList>& dim,
                  const std::optional<Scalar>& correction, bool keepdim);
TensorRef prod_jvp(const TensorRef& self_t, const TensorRef& self, const TensorRef& result,
                   const std::optional<IntList>& dim, bool keepdim);
TensorRef cumprod_jvp(const TensorRef& self_t, const TensorRef& self, int64_t dim);
TensorRef extreme_jvp(const TensorRef& self_t, const TensorRef& self, const TensorRef& result, const IntList& dim,
                      bool keepdim);
TensorRef pool_indices_jvp(const TensorRef& self_t, const TensorRef& indices, const TensorRef& result);
TensorRef reduce_loss(const TensorRef& t, int64_t reduction);
TensorRef layer_norm_jvp(const TensorRef& input_t, const TensorRef& weight_t, const TensorRef& bias_t,
                         const TensorRef& input, const TensorRef& weight, const TensorRef& mean, const TensorRef& rstd,
                         const IntList& normalized_shape);
TensorRef batch_norm_jvp(const TensorRef& input_t, const TensorRef& weight_t, const TensorRef& bias_t,
                         const TensorRef& input, const TensorRef& weight, const TensorRef& running_mean,
                         const TensorRef& running_var, const TensorRef& save_mean, const TensorRef& save_invstd,
                         bool training, double eps);
TensorRef group_norm_jvp(const TensorRef& input_t, const TensorRef& weight_t, const TensorRef& bias_t,
                         const TensorRef& input, const TensorRef& weight, const TensorRef& mean, const TensorRef& rstd,
                         int64_t group);
TensorRef bce_with_logits_jvp(const TensorRef& self_t, const TensorRef& target_t, const TensorRef& self,
                              const TensorRef& target, const TensorRef& weight, const TensorRef& pos_weight,
                              int64_t reduction);
TensorRef nll_loss_jvp(const TensorRef& self_t, const TensorRef& target, const TensorRef& weight, int64_t reduction,
                       int64_t ignore_index, const TensorRef& total_weight);
TensorRef linalg_solve_jvp(const TensorRef& A_t, const TensorRef& B_t, const TensorRef& A, const TensorRef& X, bool left);
TensorRef linalg_det_jvp(const TensorRef& A_t, const TensorRef& A, const TensorRef& result);
std::vector<TensorRef> slogdet_jvp(const TensorRef& A_t, const TensorRef& A);
std::vector<TensorRef> eigh_jvp(const TensorRef& A_t, const TensorRef& L, const TensorRef& V);
std::vector<TensorRef> eig_jvp(const TensorRef& A_t, const TensorRef& L, const TensorRef& V);
std::vector<TensorRef> svd_jvp(const TensorRef& A_t, const TensorRef& U, const TensorRef& S, const TensorRef& Vh,
                               bool full_matrices);
std::vector<TensorRef> qr_jvp(const TensorRef& A_t, const TensorRef& Q, const TensorRef& R, const std::string& mode);
std::vector<TensorRef> rnn_layer_jvp(const TensorRef& input, const TensorRef& weight_ih, const TensorRef& weight_hh,
                                     const TensorRef& bias_ih, const TensorRef& bias_hh, const TensorRef& hx,
                                     const TensorRef& cx, const TensorRef& input_t, const TensorRef& weight_ih_t,
                                     const TensorRef& weight_hh_t, const TensorRef& bias_ih_t,
                                     const TensorRef& bias_hh_t, const TensorRef& hx_t, const TensorRef& cx_t,
                                     int64_t mode, bool reverse);
TensorRef cholesky_jvp(const TensorRef& A_t, const TensorRef& L, bool upper);

// scaled_dot_product_attention's fused float32 kernel (attention_formulas.cpp): its backward is the
// fused backward kernel, or with create_graph the same gradients from operators (matmul, softmax),
// so they are differentiable again; its jvp from operators.
std::tuple<TensorRef, TensorRef, TensorRef> flash_attention_backward(
    const TensorRef& grad, const TensorRef& query, const TensorRef& key, const TensorRef& value, const TensorRef& out,
    const TensorRef& logsumexp, double dropout_p, bool is_causal, const TensorRef& attn_mask,
    const std::optional<double>& scale);
TensorRef flash_attention_jvp(const TensorRef& query_t, const TensorRef& key_t, const TensorRef& value_t,
                              const TensorRef& query, const TensorRef& key, const TensorRef& value,
                              const TensorRef& attn_mask, bool is_causal, const std::optional<double>& scale);

}  // namespace tessera::autograd::formulas

#pragma once
// nn::functional: the layers' computations as functions, with torch.nn.functional's names and
// defaults, over the operators of core/ops.yaml (convolution, native_batch_norm, native_layer_norm,
// native_dropout, embedding, log_softmax + nll_loss_forward, mse_loss, l1_loss, ...). The pooling,
// normalization, activation and loss forms the newer modules use follow in the same style.
#include <tessera/tensor.h>

#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace tessera::nn::functional {

// How a loss reduces over its elements (the operators' int codes).
enum class Reduction : int64_t { None = 0, Mean = 1, Sum = 2 };

// y = input @ weight^T + bias; input (*, in_features), weight (out_features, in_features).
Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor());
// input (N, C_in, H, W) or (C_in, H, W); weight (C_out, C_in / groups, kH, kW). stride, padding,
// dilation: one value for both dims, or two.
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(),
              std::vector<int64_t> stride = {1}, std::vector<int64_t> padding = {0},
              std::vector<int64_t> dilation = {1}, int64_t groups = 1);
// conv1d: input (N, C_in, L) or (C_in, L), weight (C_out, C_in / groups, k); conv3d: input
// (N, C_in, D, H, W) or (C_in, D, H, W), weight (C_out, C_in / groups, kD, kH, kW). stride,
// padding, dilation: one value for every spatial dim, or one per dim.
Tensor conv1d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(),
              std::vector<int64_t> stride = {1}, std::vector<int64_t> padding = {0},
              std::vector<int64_t> dilation = {1}, int64_t groups = 1);
Tensor conv3d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(),
              std::vector<int64_t> stride = {1}, std::vector<int64_t> padding = {0},
              std::vector<int64_t> dilation = {1}, int64_t groups = 1);
// Transposed convolutions (the adjoint of conv1d/2d/3d): weight (C_in, C_out / groups, k...); the
// output's spatial size is (in - 1) stride - 2 padding + dilation (k - 1) + output_padding + 1.
Tensor conv_transpose1d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(),
                        std::vector<int64_t> stride = {1}, std::vector<int64_t> padding = {0},
                        std::vector<int64_t> output_padding = {0}, int64_t groups = 1,
                        std::vector<int64_t> dilation = {1});
Tensor conv_transpose2d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(),
                        std::vector<int64_t> stride = {1}, std::vector<int64_t> padding = {0},
                        std::vector<int64_t> output_padding = {0}, int64_t groups = 1,
                        std::vector<int64_t> dilation = {1});
Tensor conv_transpose3d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(),
                        std::vector<int64_t> stride = {1}, std::vector<int64_t> padding = {0},
                        std::vector<int64_t> output_padding = {0}, int64_t groups = 1,
                        std::vector<int64_t> dilation = {1});

// Pooling over the last dim of (N, C, L) / (C, L) inputs (1d) or the last two of (N, C, H, W) /
// (C, H, W) inputs (2d). An empty stride means kernel_size; sizes are one value or one per dim.
Tensor max_pool1d(const Tensor& input, std::vector<int64_t> kernel_size, std::vector<int64_t> stride = {},
                  std::vector<int64_t> padding = {0}, std::vector<int64_t> dilation = {1}, bool ceil_mode = false);
Tensor max_pool2d(const Tensor& input, std::vector<int64_t> kernel_size, std::vector<int64_t> stride = {},
                  std::vector<int64_t> padding = {0}, std::vector<int64_t> dilation = {1}, bool ceil_mode = false);
// The max and its int64 index, flat over H * W of each plane.
std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input, std::vector<int64_t> kernel_size,
                                                   std::vector<int64_t> stride = {}, std::vector<int64_t> padding = {0},
                                                   std::vector<int64_t> dilation = {1}, bool ceil_mode = false);
Tensor avg_pool1d(const Tensor& input, std::vector<int64_t> kernel_size, std::vector<int64_t> stride = {},
                  std::vector<int64_t> padding = {0}, bool ceil_mode = false, bool count_include_pad = true);
Tensor avg_pool2d(const Tensor& input, std::vector<int64_t> kernel_size, std::vector<int64_t> stride = {},
                  std::vector<int64_t> padding = {0}, bool ceil_mode = false, bool count_include_pad = true,
                  std::optional<int64_t> divisor_override = std::nullopt);
// Averages over windows [floor(i in / out), ceil((i + 1) in / out)) so that the output is output_size.
Tensor adaptive_avg_pool2d(const Tensor& input, std::vector<int64_t> output_size);

// Normalizes over every dim but dim 1 of an (N, C, *) input: batch statistics when training
// (updating running_mean / running_var in place when given), else the running ones.
Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight = Tensor(), const Tensor& bias = Tensor(), bool training = false,
                  double momentum = 0.1, double eps = 1e-5);
Tensor layer_norm(const Tensor& input, const std::vector<int64_t>& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);
// Normalizes each of num_groups groups of channels of an (N, C, *) input (C divisible by num_groups).
Tensor group_norm(const Tensor& input, int64_t num_groups, const Tensor& weight = Tensor(), const Tensor& bias = Tensor(),
                  double eps = 1e-5);
// Zeroes elements with probability p, scaling the rest by 1 / (1 - p), when training.
Tensor dropout(const Tensor& input, double p = 0.5, bool training = true);
// Rows of weight at the integer indices of input.
Tensor embedding(const Tensor& input, const Tensor& weight, std::optional<int64_t> padding_idx = std::nullopt);

Tensor relu(const Tensor& input);
Tensor gelu(const Tensor& input, const std::string& approximate = "none");
Tensor leaky_relu(const Tensor& input, double negative_slope = 0.01);
Tensor silu(const Tensor& input);
Tensor elu(const Tensor& input, double alpha = 1.0);
Tensor softmax(const Tensor& input, int64_t dim);
Tensor log_softmax(const Tensor& input, int64_t dim);

// Losses: input and target of the same shape (mse, l1), or log-probabilities / logits
// (N, C[, d...]) or (C,) with int64 class indices (N[, d...]) or () (nll, cross_entropy).
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
Tensor nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight = Tensor(),
                Reduction reduction = Reduction::Mean, int64_t ignore_index = -100);
// log_softmax over the class dim (1, or 0 unbatched) then nll_loss; a floating target holds class
// probabilities of the input's shape instead. label_smoothing in [0, 1] mixes the target with the
// uniform distribution: (1 - ls) nll + ls / C * (-sum_c w_c log q_c), torch's formula.
Tensor cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight = Tensor(),
                     Reduction reduction = Reduction::Mean, int64_t ignore_index = -100, double label_smoothing = 0.0);
// Sigmoid + binary cross-entropy in the stable form: -w [pw y log s(x) + (1 - y) log(1 - s(x))];
// target of the input's shape; weight and pos_weight (per class, the last dim) broadcast.
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target, const Tensor& weight = Tensor(),
                                        Reduction reduction = Reduction::Mean, const Tensor& pos_weight = Tensor());

}  // namespace tessera::nn::functional

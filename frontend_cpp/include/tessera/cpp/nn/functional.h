#pragma once
// nn::functional: the layers' computations as functions, with torch.nn.functional's names and
// defaults, over the operators of core/ops.yaml (convolution, native_batch_norm, native_layer_norm,
// native_dropout, embedding, log_softmax + nll_loss_forward, mse_loss, l1_loss, ...).
#include <tessera/tensor.h>

#include <optional>
#include <string>
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
// Normalizes over every dim but dim 1 of an (N, C, *) input: batch statistics when training
// (updating running_mean / running_var in place when given), else the running ones.
Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight = Tensor(), const Tensor& bias = Tensor(), bool training = false,
                  double momentum = 0.1, double eps = 1e-5);
Tensor layer_norm(const Tensor& input, const std::vector<int64_t>& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);
// Zeroes elements with probability p, scaling the rest by 1 / (1 - p), when training.
Tensor dropout(const Tensor& input, double p = 0.5, bool training = true);
// Rows of weight at the integer indices of input.
Tensor embedding(const Tensor& input, const Tensor& weight, std::optional<int64_t> padding_idx = std::nullopt);

Tensor relu(const Tensor& input);
Tensor gelu(const Tensor& input, const std::string& approximate = "none");
Tensor softmax(const Tensor& input, int64_t dim);
Tensor log_softmax(const Tensor& input, int64_t dim);

// Losses: input and target of the same shape (mse, l1), or log-probabilities / logits
// (N, C[, d...]) or (C,) with int64 class indices (N[, d...]) or () (nll, cross_entropy).
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
Tensor nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight = Tensor(),
                Reduction reduction = Reduction::Mean, int64_t ignore_index = -100);
// log_softmax over the class dim (1, or 0 unbatched) then nll_loss; a floating target holds class
// probabilities of the input's shape instead.
Tensor cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight = Tensor(),
                     Reduction reduction = Reduction::Mean, int64_t ignore_index = -100);

}  // namespace tessera::nn::functional

// nn::functional over the operators of core/ops.yaml, with the Python frontend's checks.
#include <tessera/cpp/nn/functional.h>
#include <tessera/error.h>
#include <tessera/ops.h>

#include <fmt/ranges.h>

namespace tessera::nn::functional {
namespace {

void check_defined(const Tensor& t, const char* arg, const char* fname) {
  if (!t.defined()) raise<ValueError>("{}: argument '{}' is an undefined tensor", fname, arg);
}

// One value for both dims, or two.
std::vector<int64_t> pair(std::vector<int64_t> v, const char* what, const char* fname) {
  if (v.size() == 1) v.push_back(v[0]);
  if (v.size() != 2) raise<ValueError>("{}: {} must have 1 or 2 values, got {}", fname, what, v.size());
  return v;
}

}  // namespace

Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias) {
  check_defined(input, "input", "linear");
  check_defined(weight, "weight", "linear");
  if (weight.dim() != 1 && weight.dim() != 2)
    raise<ValueError>("linear: expected weight to be 1-D or 2-D, got {}-D", weight.dim());
  int64_t in_features = weight.size(-1);
  if (input.dim() == 0 || input.size(-1) != in_features)
    raise<ValueError>("linear: input's last dimension must be in_features={}, got input of shape [{}]", in_features,
                      fmt::join(input.shape(), ", "));
  Tensor out = input.matmul(weight.dim() == 2 ? weight.transpose(0, 1) : weight);
  return bias.defined() ? out.add(bias) : out;
}

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, std::vector<int64_t> stride,
              std::vector<int64_t> padding, std::vector<int64_t> dilation, int64_t groups) {
  check_defined(input, "input", "conv2d");
  check_defined(weight, "weight", "conv2d");
  if (input.dim() != 3 && input.dim() != 4)
    raise<ValueError>("conv2d: expected a 3-D (unbatched) or 4-D (batched) input, got {}-D input of shape [{}]",
                      input.dim(), fmt::join(input.shape(), ", "));
  if (weight.dim() != 4)
    raise<ValueError>("conv2d: expected a 4-D weight, got {}-D weight of shape [{}]", weight.dim(),
                      fmt::join(weight.shape(), ", "));
  return convolution(input, weight, bias, pair(std::move(stride), "stride", "conv2d"),
                     pair(std::move(padding), "padding", "conv2d"), pair(std::move(dilation), "dilation", "conv2d"),
                     groups);
}

Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps) {
  check_defined(input, "input", "batch_norm");
  if (input.dim() < 2) raise<ValueError>("batch_norm: expected a 2-D or higher input (N, C, *), got {}-D input", input.dim());
  if (training) {
    int64_t per_channel = input.size(1) ? input.numel() / input.size(1) : 0;
    if (per_channel == 1)
      raise<ValueError>("Expected more than 1 value per channel when training, got input size [{}]",
                        fmt::join(input.shape(), ", "));
  } else if (!running_mean.defined() || !running_var.defined()) {
    raise<ValueError>("batch_norm: running_mean and running_var must be given when training=false");
  }
  return std::get<0>(native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps));
}

Tensor layer_norm(const Tensor& input, const std::vector<int64_t>& normalized_shape, const Tensor& weight,
                  const Tensor& bias, double eps) {
  check_defined(input, "input", "layer_norm");
  auto k = int64_t(normalized_shape.size());
  auto shape = input.shape();
  if (k == 0 || input.dim() < k || !std::equal(normalized_shape.begin(), normalized_shape.end(), shape.end() - k))
    raise<ValueError>("layer_norm: given normalized_shape=[{}], expected input with shape [*, {}], but got input of "
                      "size [{}]", fmt::join(normalized_shape, ", "), fmt::join(normalized_shape, ", "),
                      fmt::join(shape, ", "));
  return std::get<0>(native_layer_norm(input, normalized_shape, weight, bias, eps));
}

Tensor dropout(const Tensor& input, double p, bool training) {
  if (p < 0.0 || p > 1.0) raise<ValueError>("dropout probability has to be between 0 and 1, but got {}", p);
  check_defined(input, "input", "dropout");
  if (!training || p == 0.0 || input.numel() == 0) return input;
  return std::get<0>(native_dropout(input, p, true));
}

Tensor embedding(const Tensor& input, const Tensor& weight, std::optional<int64_t> padding_idx) {
  check_defined(input, "input", "embedding");
  check_defined(weight, "weight", "embedding");
  int64_t pad = -1;
  if (padding_idx) {
    int64_t n = weight.size(0);
    if (*padding_idx >= n || *padding_idx < -n)
      raise<ValueError>("embedding: padding_idx must be within num_embeddings ({}), got {}", n, *padding_idx);
    pad = *padding_idx < 0 ? n + *padding_idx : *padding_idx;
  }
  return tessera::embedding(weight, input, pad, false, false);
}

Tensor relu(const Tensor& input) { return tessera::relu(input); }
Tensor gelu(const Tensor& input, const std::string& approximate) {
  if (approximate != "none" && approximate != "tanh")
    raise<ValueError>("gelu: approximate must be 'none' or 'tanh', got '{}'", approximate);
  return tessera::gelu(input, approximate);
}
Tensor softmax(const Tensor& input, int64_t dim) { return tessera::softmax(input, dim); }
Tensor log_softmax(const Tensor& input, int64_t dim) { return tessera::log_softmax(input, dim); }

namespace {
void check_same_shape(const Tensor& input, const Tensor& target, const char* fname) {
  check_defined(input, "input", fname);
  check_defined(target, "target", fname);
  if (input.shape() != target.shape())
    raise<ValueError>("{}: expected input and target of the same shape, got [{}] and [{}]", fname,
                      fmt::join(input.shape(), ", "), fmt::join(target.shape(), ", "));
}
}  // namespace

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  check_same_shape(input, target, "mse_loss");
  return tessera::mse_loss(input, target, int64_t(reduction));
}

Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  check_same_shape(input, target, "l1_loss");
  return tessera::l1_loss(input, target, int64_t(reduction));
}

Tensor nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight, Reduction reduction,
                int64_t ignore_index) {
  check_defined(input, "input", "nll_loss");
  check_defined(target, "target", "nll_loss");
  if (input.dim() < 1) raise<ValueError>("nll_loss: expected input with at least 1 dimension, got {}", input.dim());
  if (input.dim() >= 2 && target.dim() >= 1 && input.size(0) != target.size(0))
    raise<ValueError>("Expected input batch_size ({}) to match target batch_size ({}).", input.size(0), target.size(0));
  return std::get<0>(nll_loss_forward(input, target, weight, int64_t(reduction), ignore_index));
}

Tensor cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight, Reduction reduction,
                     int64_t ignore_index) {
  check_defined(input, "input", "cross_entropy");
  check_defined(target, "target", "cross_entropy");
  if (input.dim() < 1) raise<ValueError>("cross_entropy: expected input with at least 1 dimension, got {}", input.dim());
  int64_t class_dim = input.dim() == 1 ? 0 : 1;
  Tensor logp = input.log_softmax(class_dim);
  if (!is_floating_point(target.dtype())) return nll_loss(logp, target, weight, reduction, ignore_index);
  // Class probabilities: -sum_c w_c p_c log q_c per sample, the mean over samples.
  if (target.shape() != input.shape())
    raise<ValueError>("cross_entropy: expected probability targets of the input's shape [{}], got [{}]",
                      fmt::join(input.shape(), ", "), fmt::join(target.shape(), ", "));
  Tensor prod = logp.mul(target);
  if (weight.defined()) {
    std::vector<int64_t> wshape(size_t(input.dim()), 1);
    wshape[size_t(class_dim)] = input.size(class_dim);
    prod = prod.mul(weight.reshape(wshape));
  }
  Tensor loss = prod.sum(std::vector<int64_t>{class_dim}).neg();
  switch (reduction) {
    case Reduction::Mean: return loss.mean();
    case Reduction::Sum: return loss.sum();
    default: return loss;
  }
}

}  // namespace tessera::nn::functional

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

// One value for every one of n dims, or n values.
std::vector<int64_t> ntuple(std::vector<int64_t> v, size_t n, const char* what, const char* fname) {
  if (v.size() == 1) v.resize(n, v[0]);
  if (v.size() != n) raise<ValueError>("{}: {} must have 1 or {} values, got {}", fname, what, n, v.size());
  return v;
}
std::vector<int64_t> pair(std::vector<int64_t> v, const char* what, const char* fname) {
  return ntuple(std::move(v), 2, what, fname);
}

// An n-D convolution's input ((un)batched) and weight ranks.
void check_conv_operands(const Tensor& input, const Tensor& weight, int64_t n, const char* fname) {
  check_defined(input, "input", fname);
  check_defined(weight, "weight", fname);
  if (input.dim() != n + 1 && input.dim() != n + 2)
    raise<ValueError>("{}: expected a {}-D (unbatched) or {}-D (batched) input, got {}-D input of shape [{}]", fname,
                      n + 1, n + 2, input.dim(), fmt::join(input.shape(), ", "));
  if (weight.dim() != n + 2)
    raise<ValueError>("{}: expected a {}-D weight, got {}-D weight of shape [{}]", fname, n + 2, weight.dim(),
                      fmt::join(weight.shape(), ", "));
}

Tensor conv_nd(const Tensor& input, const Tensor& weight, const Tensor& bias, std::vector<int64_t> stride,
               std::vector<int64_t> padding, std::vector<int64_t> dilation, int64_t groups, int64_t n,
               const char* fname) {
  check_conv_operands(input, weight, n, fname);
  auto k = size_t(n);
  return convolution(input, weight, bias, ntuple(std::move(stride), k, "stride", fname),
                     ntuple(std::move(padding), k, "padding", fname), ntuple(std::move(dilation), k, "dilation", fname),
                     groups);
}

// As the Python frontend's _conv_transpose: the output size from the geometry, then
// convolution_backward_input with the weight read as (C_in, C_out / groups, k...).
Tensor conv_transpose_nd(const Tensor& input, const Tensor& weight, const Tensor& bias, std::vector<int64_t> stride,
                         std::vector<int64_t> padding, std::vector<int64_t> output_padding, int64_t groups,
                         std::vector<int64_t> dilation, int64_t n, const char* fname) {
  check_conv_operands(input, weight, n, fname);
  if (groups <= 0) raise<ValueError>("{}: groups must be a positive integer, got {}", fname, groups);
  auto k = size_t(n);
  stride = ntuple(std::move(stride), k, "stride", fname);
  padding = ntuple(std::move(padding), k, "padding", fname);
  dilation = ntuple(std::move(dilation), k, "dilation", fname);
  output_padding = ntuple(std::move(output_padding), k, "output_padding", fname);
  for (size_t i = 0; i < k; ++i)
    if (output_padding[i] >= stride[i] && output_padding[i] >= dilation[i])
      raise<ValueError>("{}: output padding must be smaller than either stride or dilation, but got output_padding=({}), "
                        "stride=({}), dilation=({})", fname, fmt::join(output_padding, ", "), fmt::join(stride, ", "),
                        fmt::join(dilation, ", "));
  int64_t channel = input.dim() - n - 1;
  if (input.size(channel) != weight.size(0))
    raise<ValueError>("{}: given transposed weight of shape [{}], expected input of shape [{}] to have {} channels, but "
                      "got {} channels instead", fname, fmt::join(weight.shape(), ", "), fmt::join(input.shape(), ", "),
                      weight.size(0), input.size(channel));
  std::vector<int64_t> in_shape = input.shape();
  std::vector<int64_t> size(in_shape.begin(), in_shape.begin() + channel);
  size.push_back(weight.size(1) * groups);
  std::vector<int64_t> spatial;
  for (size_t i = 0; i < k; ++i)
    spatial.push_back((input.size(channel + 1 + int64_t(i)) - 1) * stride[i] - 2 * padding[i] +
                      dilation[i] * (weight.size(2 + int64_t(i)) - 1) + output_padding[i] + 1);
  if (std::any_of(spatial.begin(), spatial.end(), [](int64_t s) { return s <= 0; }))
    raise<ValueError>("{}: the output size ({}) is too small (input of shape [{}], weight [{}], stride ({}), padding ({}))",
                      fname, fmt::join(spatial, ", "), fmt::join(input.shape(), ", "), fmt::join(weight.shape(), ", "),
                      fmt::join(stride, ", "), fmt::join(padding, ", "));
  size.insert(size.end(), spatial.begin(), spatial.end());
  Tensor out = convolution_backward_input(input, weight, size, stride, padding, dilation, groups);
  if (!bias.defined()) return out;
  std::vector<int64_t> bshape(k + 1, 1);
  bshape[0] = -1;
  return out.add(bias.reshape(bshape));
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
  return conv_nd(input, weight, bias, std::move(stride), std::move(padding), std::move(dilation), groups, 2, "conv2d");
}

Tensor conv1d(const Tensor& input, const Tensor& weight, const Tensor& bias, std::vector<int64_t> stride,
              std::vector<int64_t> padding, std::vector<int64_t> dilation, int64_t groups) {
  return conv_nd(input, weight, bias, std::move(stride), std::move(padding), std::move(dilation), groups, 1, "conv1d");
}

Tensor conv3d(const Tensor& input, const Tensor& weight, const Tensor& bias, std::vector<int64_t> stride,
              std::vector<int64_t> padding, std::vector<int64_t> dilation, int64_t groups) {
  return conv_nd(input, weight, bias, std::move(stride), std::move(padding), std::move(dilation), groups, 3, "conv3d");
}

Tensor conv_transpose1d(const Tensor& input, const Tensor& weight, const Tensor& bias, std::vector<int64_t> stride,
                        std::vector<int64_t> padding, std::vector<int64_t> output_padding, int64_t groups,
                        std::vector<int64_t> dilation) {
  return conv_transpose_nd(input, weight, bias, std::move(stride), std::move(padding), std::move(output_padding), groups,
                           std::move(dilation), 1, "conv_transpose1d");
}

Tensor conv_transpose2d(const Tensor& input, const Tensor& weight, const Tensor& bias, std::vector<int64_t> stride,
                        std::vector<int64_t> padding, std::vector<int64_t> output_padding, int64_t groups,
                        std::vector<int64_t> dilation) {
  return conv_transpose_nd(input, weight, bias, std::move(stride), std::move(padding), std::move(output_padding), groups,
                           std::move(dilation), 2, "conv_transpose2d");
}

Tensor conv_transpose3d(const Tensor& input, const Tensor& weight, const Tensor& bias, std::vector<int64_t> stride,
                        std::vector<int64_t> padding, std::vector<int64_t> output_padding, int64_t groups,
                        std::vector<int64_t> dilation) {
  return conv_transpose_nd(input, weight, bias, std::move(stride), std::move(padding), std::move(output_padding), groups,
                           std::move(dilation), 3, "conv_transpose3d");
}

// ---------------------------------------------------------------------------- pooling
namespace {

void check_pool_input(const Tensor& input, int64_t n, const char* fname) {
  check_defined(input, "input", fname);
  if (input.dim() != n + 1 && input.dim() != n + 2)
    raise<ValueError>("{}: expected a {}-D ({}) or {}-D ({}) input, got {}-D input of shape [{}]", fname, n + 1,
                      n == 1 ? "C, L" : "C, H, W", n + 2, n == 1 ? "N, C, L" : "N, C, H, W", input.dim(),
                      fmt::join(input.shape(), ", "));
}

// A 1-D pooling argument as the 2-D pooling's: `lead` for the size-1 height, then the value.
std::vector<int64_t> as_2d(std::vector<int64_t> v, int64_t lead, const char* what, const char* fname) {
  v = ntuple(std::move(v), 1, what, fname);
  return {lead, v[0]};
}

}  // namespace

std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input, std::vector<int64_t> kernel_size,
                                                   std::vector<int64_t> stride, std::vector<int64_t> padding,
                                                   std::vector<int64_t> dilation, bool ceil_mode) {
  check_pool_input(input, 2, "max_pool2d");
  if (!stride.empty()) stride = pair(std::move(stride), "stride", "max_pool2d");
  return tessera::max_pool2d_with_indices(input, pair(std::move(kernel_size), "kernel_size", "max_pool2d"), stride,
                                          pair(std::move(padding), "padding", "max_pool2d"),
                                          pair(std::move(dilation), "dilation", "max_pool2d"), ceil_mode);
}

Tensor max_pool2d(const Tensor& input, std::vector<int64_t> kernel_size, std::vector<int64_t> stride,
                  std::vector<int64_t> padding, std::vector<int64_t> dilation, bool ceil_mode) {
  return std::get<0>(functional::max_pool2d_with_indices(input, std::move(kernel_size), std::move(stride), std::move(padding),
                                             std::move(dilation), ceil_mode));
}

Tensor max_pool1d(const Tensor& input, std::vector<int64_t> kernel_size, std::vector<int64_t> stride,
                  std::vector<int64_t> padding, std::vector<int64_t> dilation, bool ceil_mode) {
  check_pool_input(input, 1, "max_pool1d");
  const char* f = "max_pool1d";
  if (!stride.empty()) stride = as_2d(std::move(stride), 1, "stride", f);
  return std::get<0>(tessera::max_pool2d_with_indices(input.unsqueeze(-2), as_2d(std::move(kernel_size), 1, "kernel_size", f),
                                                      stride, as_2d(std::move(padding), 0, "padding", f),
                                                      as_2d(std::move(dilation), 1, "dilation", f), ceil_mode))
      .squeeze(-2);
}

Tensor avg_pool2d(const Tensor& input, std::vector<int64_t> kernel_size, std::vector<int64_t> stride,
                  std::vector<int64_t> padding, bool ceil_mode, bool count_include_pad,
                  std::optional<int64_t> divisor_override) {
  check_pool_input(input, 2, "avg_pool2d");
  if (!stride.empty()) stride = pair(std::move(stride), "stride", "avg_pool2d");
  if (divisor_override && *divisor_override == 0) raise<ValueError>("avg_pool2d: divisor must be not zero");
  return tessera::avg_pool2d(input, pair(std::move(kernel_size), "kernel_size", "avg_pool2d"), stride,
                             pair(std::move(padding), "padding", "avg_pool2d"), ceil_mode, count_include_pad,
                             divisor_override);
}

Tensor avg_pool1d(const Tensor& input, std::vector<int64_t> kernel_size, std::vector<int64_t> stride,
                  std::vector<int64_t> padding, bool ceil_mode, bool count_include_pad) {
  check_pool_input(input, 1, "avg_pool1d");
  const char* f = "avg_pool1d";
  if (!stride.empty()) stride = as_2d(std::move(stride), 1, "stride", f);
  return tessera::avg_pool2d(input.unsqueeze(-2), as_2d(std::move(kernel_size), 1, "kernel_size", f), stride,
                             as_2d(std::move(padding), 0, "padding", f), ceil_mode, count_include_pad, std::nullopt)
      .squeeze(-2);
}

Tensor adaptive_avg_pool2d(const Tensor& input, std::vector<int64_t> output_size) {
  check_pool_input(input, 2, "adaptive_avg_pool2d");
  output_size = pair(std::move(output_size), "output_size", "adaptive_avg_pool2d");
  if (output_size[0] <= 0 || output_size[1] <= 0)
    raise<ValueError>("adaptive_avg_pool2d: output_size must be positive, got ({})", fmt::join(output_size, ", "));
  return tessera::adaptive_avg_pool2d(input, output_size);
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

Tensor group_norm(const Tensor& input, int64_t num_groups, const Tensor& weight, const Tensor& bias, double eps) {
  check_defined(input, "input", "group_norm");
  if (input.dim() < 2)
    raise<ValueError>("group_norm: expected at least 2 dimensions for input tensor but received {}", input.dim());
  int64_t n = input.size(0), c = input.size(1), hxw = 1;
  if (num_groups <= 0 || c % num_groups)
    raise<ValueError>("group_norm: expected number of channels in input to be divisible by num_groups, but got input of "
                      "shape [{}] and num_groups={}", fmt::join(input.shape(), ", "), num_groups);
  for (int64_t d = 2; d < input.dim(); ++d) hxw *= input.size(d);
  return std::get<0>(native_group_norm(input, weight, bias, n, c, hxw, num_groups, eps));
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
Tensor leaky_relu(const Tensor& input, double negative_slope) {
  check_defined(input, "input", "leaky_relu");
  return tessera::leaky_relu(input, negative_slope);
}
Tensor silu(const Tensor& input) {
  check_defined(input, "input", "silu");
  return tessera::silu(input);
}
Tensor elu(const Tensor& input, double alpha) {
  check_defined(input, "input", "elu");
  return tessera::elu(input, alpha);
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
                     int64_t ignore_index, double label_smoothing) {
  check_defined(input, "input", "cross_entropy");
  check_defined(target, "target", "cross_entropy");
  if (input.dim() < 1) raise<ValueError>("cross_entropy: expected input with at least 1 dimension, got {}", input.dim());
  if (!(label_smoothing >= 0.0 && label_smoothing <= 1.0))
    raise<ValueError>("cross_entropy: label_smoothing must be between 0.0 and 1.0, got {}", label_smoothing);
  int64_t class_dim = input.dim() == 1 ? 0 : 1;
  int64_t n_classes = input.size(class_dim);
  if (weight.defined() && (weight.dim() != 1 || weight.size(0) != n_classes))
    raise<ValueError>("cross_entropy: expected a weight of shape [{}] (one per class), got [{}]", n_classes,
                      fmt::join(weight.shape(), ", "));
  Tensor logp = input.log_softmax(class_dim);
  std::vector<int64_t> wshape(size_t(input.dim()), 1);
  wshape[size_t(class_dim)] = n_classes;
  if (is_floating_point(target.dtype())) {
    // Class probabilities: -sum_c w_c p_c log q_c per sample, the mean over samples.
    if (target.shape() != input.shape())
      raise<ValueError>("cross_entropy: expected probability targets of the input's shape [{}], got [{}]",
                        fmt::join(input.shape(), ", "), fmt::join(target.shape(), ", "));
    Tensor p = label_smoothing > 0 ? target.mul(1.0 - label_smoothing).add(label_smoothing / double(n_classes)) : target;
    Tensor prod = logp.mul(p);
    if (weight.defined()) prod = prod.mul(weight.reshape(wshape));
    Tensor loss = prod.sum(std::vector<int64_t>{class_dim}).neg();
    switch (reduction) {
      case Reduction::Mean: return loss.mean();
      case Reduction::Sum: return loss.sum();
      default: return loss;
    }
  }
  Tensor nll = nll_loss(logp, target, weight, reduction, ignore_index);
  if (label_smoothing <= 0.0) return nll;
  // torch's formula: (1 - ls) nll + ls / C * smooth, smooth = -sum_c w_c logp_c over the targets
  // that are not ignored (normalised under 'mean' as nll_loss normalises: by the targets' weights).
  Tensor prod = weight.defined() ? logp.mul(weight.reshape(wshape)) : logp;
  Tensor ignore = target.eq(Scalar(ignore_index));
  Tensor smooth = prod.sum(std::vector<int64_t>{class_dim}).neg().masked_fill(ignore, 0.0);
  Tensor ret;
  switch (reduction) {
    case Reduction::Mean: {
      Tensor keep = ignore.logical_not();
      Tensor denom = weight.defined() ? weight.index_select(0, target.masked_select(keep)).sum()
                                      : keep.sum().to(smooth.dtype());
      ret = smooth.sum().div(denom);
      break;
    }
    case Reduction::Sum: ret = smooth.sum(); break;
    default: ret = smooth;
  }
  return nll.mul(1.0 - label_smoothing).add(ret.mul(label_smoothing / double(n_classes)));
}

Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target, const Tensor& weight,
                                        Reduction reduction, const Tensor& pos_weight) {
  check_defined(input, "input", "binary_cross_entropy_with_logits");
  check_defined(target, "target", "binary_cross_entropy_with_logits");
  if (target.shape() != input.shape())
    raise<ValueError>("binary_cross_entropy_with_logits: target size ([{}]) must be the same as input size ([{}])",
                      fmt::join(target.shape(), ", "), fmt::join(input.shape(), ", "));
  return tessera::binary_cross_entropy_with_logits(input, target, weight, pos_weight, int64_t(reduction));
}

}  // namespace tessera::nn::functional

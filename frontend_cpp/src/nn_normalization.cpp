// nn::BatchNorm1d, nn::BatchNorm2d, nn::LayerNorm and nn::GroupNorm.
#include <tessera/cpp/autograd.h>
#include <tessera/cpp/nn/functional.h>
#include <tessera/cpp/nn/normalization.h>
#include <tessera/ops.h>

#include <fmt/ranges.h>

namespace tessera::nn {

BatchNormBase::BatchNormBase(std::string name, int64_t num_features, const BatchNormOptions& options)
    : Module(std::move(name)), num_features_(num_features), options_(options) {
  if (num_features <= 0) raise<ValueError>("{}: num_features must be positive, got {}", this->name(), num_features);
  register_parameter("weight", options.affine ? ones({num_features}, options.dtype, options.device) : Tensor());
  register_parameter("bias", options.affine ? zeros({num_features}, options.dtype, options.device) : Tensor());
  if (options.track_running_stats) {
    register_buffer("running_mean", zeros({num_features}, options.dtype, options.device));
    register_buffer("running_var", ones({num_features}, options.dtype, options.device));
    register_buffer("num_batches_tracked", zeros({}, kInt64, options.device));
  }
}

void BatchNormBase::reset_running_stats() {
  if (!options_.track_running_stats) return;
  running_mean().fill_(0);
  running_var().fill_(1);
  num_batches_tracked().fill_(0);
}

Tensor BatchNormBase::forward(const Tensor& input) {
  check_input_dim(input);
  if (input.size(1) != num_features_)
    raise<ValueError>("{}: expected {} channels (dim 1), got {} (input of shape [{}])", name(), num_features_,
                      input.size(1), fmt::join(input.shape(), ", "));
  bool track = options_.track_running_stats;
  // Batch statistics when training, or when there are no running ones to use.
  bool use_batch_stats = is_training() || !track;
  if (is_training() && track) num_batches_tracked().add_(1);
  Tensor rm = track ? running_mean() : Tensor(), rv = track ? running_var() : Tensor();
  return functional::batch_norm(input, rm, rv, param("weight"), param("bias"), use_batch_stats, options_.momentum,
                                options_.eps);
}

std::string BatchNormBase::extra_repr() const {
  return fmt::format("{}, eps={}, momentum={}, affine={}, track_running_stats={}", num_features_, options_.eps,
                     options_.momentum, options_.affine, options_.track_running_stats);
}

BatchNorm1d::BatchNorm1d(int64_t num_features, const BatchNormOptions& options)
    : BatchNormBase("BatchNorm1d", num_features, options) {}

void BatchNorm1d::check_input_dim(const Tensor& input) const {
  if (!input.defined() || (input.dim() != 2 && input.dim() != 3))
    raise<ValueError>("BatchNorm1d: expected 2D (N, C) or 3D (N, C, L) input, got {}D input",
                      input.defined() ? input.dim() : 0);
}

BatchNorm2d::BatchNorm2d(int64_t num_features, const BatchNormOptions& options)
    : BatchNormBase("BatchNorm2d", num_features, options) {}

void BatchNorm2d::check_input_dim(const Tensor& input) const {
  if (!input.defined() || input.dim() != 4)
    raise<ValueError>("BatchNorm2d: expected 4D input (N, C, H, W), got {}D input", input.defined() ? input.dim() : 0);
}

LayerNorm::LayerNorm(std::vector<int64_t> normalized_shape, const LayerNormOptions& options)
    : Module("LayerNorm"), normalized_shape_(std::move(normalized_shape)), options_(options) {
  if (normalized_shape_.empty()) raise<ValueError>("LayerNorm: normalized_shape must not be empty");
  bool affine = options.elementwise_affine;
  register_parameter("weight", affine ? ones(normalized_shape_, options.dtype, options.device) : Tensor());
  register_parameter("bias", affine && options.bias ? zeros(normalized_shape_, options.dtype, options.device) : Tensor());
}

Tensor LayerNorm::forward(const Tensor& input) {
  return functional::layer_norm(input, normalized_shape_, param("weight"), param("bias"), options_.eps);
}

std::string LayerNorm::extra_repr() const {
  return fmt::format("({}), eps={}, elementwise_affine={}", fmt::join(normalized_shape_, ", "), options_.eps,
                     options_.elementwise_affine);
}

GroupNorm::GroupNorm(int64_t num_groups, int64_t num_channels, const GroupNormOptions& options)
    : Module("GroupNorm"), num_groups_(num_groups), num_channels_(num_channels), options_(options) {
  if (num_groups <= 0 || num_channels <= 0 || num_channels % num_groups)
    raise<ValueError>("GroupNorm: num_channels ({}) must be divisible by num_groups ({}), both positive", num_channels,
                      num_groups);
  register_parameter("weight", options.affine ? ones({num_channels}, options.dtype, options.device) : Tensor());
  register_parameter("bias", options.affine ? zeros({num_channels}, options.dtype, options.device) : Tensor());
}

Tensor GroupNorm::forward(const Tensor& input) {
  if (!input.defined() || input.dim() < 2)
    raise<ValueError>("GroupNorm: expected an (N, C, *) input of 2 or more dims, got {}D input",
                      input.defined() ? input.dim() : 0);
  if (input.size(1) != num_channels_)
    raise<ValueError>("GroupNorm: expected {} channels (dim 1), got {} (input of shape [{}])", num_channels_,
                      input.size(1), fmt::join(input.shape(), ", "));
  return functional::group_norm(input, num_groups_, param("weight"), param("bias"), options_.eps);
}

std::string GroupNorm::extra_repr() const {
  return fmt::format("{}, {}, eps={}, affine={}", num_groups_, num_channels_, options_.eps, options_.affine);
}

}  // namespace tessera::nn

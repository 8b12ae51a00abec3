// The loss modules: MSELoss, L1Loss, NLLLoss, CrossEntropyLoss, BCEWithLogitsLoss.
#include <tessera/cpp/nn/loss.h>
#include <tessera/ops.h>

#include <fmt/ranges.h>

namespace tessera::nn {
namespace {

const char* reduction_name(Reduction r) {
  switch (r) {
    case Reduction::None: return "none";
    case Reduction::Sum: return "sum";
    default: return "mean";
  }
}

// A class weight must be one value per class of the input (dim 1, or 0 unbatched).
void check_class_weight(const Tensor& weight, const Tensor& input, const std::string& module) {
  if (!weight.defined() || !input.defined() || input.dim() < 1) return;
  int64_t classes = input.size(input.dim() == 1 ? 0 : 1);
  if (weight.dim() != 1 || weight.size(0) != classes)
    raise<ValueError>("{}: expected a weight of {} elements (one per class), got weight of shape [{}] for input of "
                      "shape [{}]", module, classes, fmt::join(weight.shape(), ", "), fmt::join(input.shape(), ", "));
}

void check_same_shape(const Tensor& input, const Tensor& target, const std::string& module) {
  if (!input.defined() || !target.defined()) raise<ValueError>("{}: got an undefined input or target", module);
  if (input.shape() != target.shape())
    raise<ValueError>("{}: expected target of the input's shape [{}], got [{}]", module, fmt::join(input.shape(), ", "),
                      fmt::join(target.shape(), ", "));
}

}  // namespace

Tensor Loss::forward(const Tensor&) {
  raise<NotImplementedError>("{}: a loss takes (input, target); call it with both", name());
}

std::string Loss::extra_repr() const {
  return reduction_ == Reduction::Mean ? "" : fmt::format("reduction={}", reduction_name(reduction_));
}

Tensor MSELoss::forward(const Tensor& input, const Tensor& target) {
  check_same_shape(input, target, name());
  return functional::mse_loss(input, target, reduction_);
}

Tensor L1Loss::forward(const Tensor& input, const Tensor& target) {
  check_same_shape(input, target, name());
  return functional::l1_loss(input, target, reduction_);
}

NLLLoss::NLLLoss(const NLLLossOptions& options)
    : Loss("NLLLoss", options.reduction), ignore_index_(options.ignore_index) {
  if (options.weight.defined() && options.weight.dim() != 1)
    raise<ValueError>("NLLLoss: expected a 1-D weight (one per class), got shape [{}]", fmt::join(options.weight.shape(), ", "));
  register_buffer("weight", options.weight);
}

Tensor NLLLoss::forward(const Tensor& input, const Tensor& target) {
  check_class_weight(buffer("weight"), input, name());
  return functional::nll_loss(input, target, buffer("weight"), reduction_, ignore_index_);
}

CrossEntropyLoss::CrossEntropyLoss(const CrossEntropyLossOptions& options)
    : Loss("CrossEntropyLoss", options.reduction), ignore_index_(options.ignore_index),
      label_smoothing_(options.label_smoothing) {
  if (!(label_smoothing_ >= 0.0 && label_smoothing_ <= 1.0))
    raise<ValueError>("CrossEntropyLoss: label_smoothing must be between 0.0 and 1.0, got {}", label_smoothing_);
  if (options.weight.defined() && options.weight.dim() != 1)
    raise<ValueError>("CrossEntropyLoss: expected a 1-D weight (one per class), got shape [{}]",
                      fmt::join(options.weight.shape(), ", "));
  register_buffer("weight", options.weight);
}

Tensor CrossEntropyLoss::forward(const Tensor& input, const Tensor& target) {
  check_class_weight(buffer("weight"), input, name());
  return functional::cross_entropy(input, target, buffer("weight"), reduction_, ignore_index_, label_smoothing_);
}

std::string CrossEntropyLoss::extra_repr() const {
  std::string s = Loss::extra_repr();
  if (label_smoothing_ != 0.0) s += fmt::format("{}label_smoothing={}", s.empty() ? "" : ", ", label_smoothing_);
  return s;
}

BCEWithLogitsLoss::BCEWithLogitsLoss(const BCEWithLogitsLossOptions& options)
    : Loss("BCEWithLogitsLoss", options.reduction) {
  register_buffer("weight", options.weight);
  register_buffer("pos_weight", options.pos_weight);
}

Tensor BCEWithLogitsLoss::forward(const Tensor& input, const Tensor& target) {
  check_same_shape(input, target, name());
  return functional::binary_cross_entropy_with_logits(input, target, buffer("weight"), reduction_, buffer("pos_weight"));
}

}  // namespace tessera::nn

// nn::init: torch.nn.init's formulas over rand / randn, written without recording.
#include <tessera/cpp/autograd.h>
#include <tessera/cpp/nn/init.h>
#include <tessera/ops.h>

#include <cmath>

namespace tessera::nn::init {
namespace {

void check(const Tensor& t, const char* fname) {
  if (!t.defined()) raise<ValueError>("{}: got an undefined tensor", fname);
  if (!is_floating_point(t.dtype())) raise<TypeError>("{}: expected a floating-point tensor, got {}", fname, name(t.dtype()));
}

Tensor fill(const Tensor& t, const Tensor& values) {
  autograd::NoGradGuard no_grad;
  t.copy_(values);
  return t;
}

int64_t correct_fan(const Tensor& t, const std::string& mode) {
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  if (mode == "fan_in") return fan_in;
  if (mode == "fan_out") return fan_out;
  raise<ValueError>("Mode {} not supported, please use one of fan_in, fan_out", mode);
}

}  // namespace

double calculate_gain(const std::string& nonlinearity, std::optional<double> param) {
  for (const char* linear : {"linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                             "conv_transpose3d", "sigmoid"})
    if (nonlinearity == linear) return 1;
  if (nonlinearity == "tanh") return 5.0 / 3;
  if (nonlinearity == "relu") return std::sqrt(2.0);
  if (nonlinearity == "leaky_relu") {
    double slope = param.value_or(0.01);
    return std::sqrt(2.0 / (1 + slope * slope));
  }
  if (nonlinearity == "selu") return 3.0 / 4;
  raise<ValueError>("Unsupported nonlinearity {}", nonlinearity);
}

std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t) {
  if (t.dim() < 2)
    raise<ValueError>("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions");
  int64_t receptive = 1;
  for (int64_t d = 2; d < t.dim(); ++d) receptive *= t.size(d);
  return {t.size(1) * receptive, t.size(0) * receptive};
}

Tensor uniform_(const Tensor& t, double a, double b) {
  check(t, "uniform_");
  if (t.numel() == 0) return t;
  return fill(t, rand(t.shape(), t.dtype(), t.device()).mul(b - a).add(a));
}

Tensor normal_(const Tensor& t, double mean, double std) {
  check(t, "normal_");
  if (t.numel() == 0) return t;
  return fill(t, randn(t.shape(), t.dtype(), t.device()).mul(std).add(mean));
}

Tensor constant_(const Tensor& t, double value) {
  check(t, "constant_");
  autograd::NoGradGuard no_grad;
  t.fill_(value);
  return t;
}
Tensor zeros_(const Tensor& t) { return constant_(t, 0.0); }
Tensor ones_(const Tensor& t) { return constant_(t, 1.0); }

Tensor kaiming_uniform_(const Tensor& t, double a, const std::string& mode, const std::string& nonlinearity) {
  check(t, "kaiming_uniform_");
  if (t.numel() == 0) return t;  // torch warns and does nothing
  double std = calculate_gain(nonlinearity, a) / std::sqrt(double(correct_fan(t, mode)));
  double bound = std::sqrt(3.0) * std;
  return init::uniform_(t, -bound, bound);
}

Tensor kaiming_normal_(const Tensor& t, double a, const std::string& mode, const std::string& nonlinearity) {
  check(t, "kaiming_normal_");
  if (t.numel() == 0) return t;
  return init::normal_(t, 0.0, calculate_gain(nonlinearity, a) / std::sqrt(double(correct_fan(t, mode))));
}

Tensor xavier_uniform_(const Tensor& t, double gain) {
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  double a = std::sqrt(3.0) * gain * std::sqrt(2.0 / double(fan_in + fan_out));
  return init::uniform_(t, -a, a);
}

Tensor xavier_normal_(const Tensor& t, double gain) {
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  return init::normal_(t, 0.0, gain * std::sqrt(2.0 / double(fan_in + fan_out)));
}

}  // namespace tessera::nn::init

// nn::Conv2d.
#include <tessera/cpp/nn/conv.h>
#include <tessera/cpp/nn/functional.h>
#include <tessera/cpp/nn/init.h>
#include <tessera/ops.h>

#include <fmt/ranges.h>

#include <cmath>

namespace tessera::nn {

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, std::vector<int64_t> kernel_size, const Conv2dOptions& options)
    : Module("Conv2d"), in_channels_(in_channels), out_channels_(out_channels), options_(options) {
  if (kernel_size.size() == 1) kernel_size.push_back(kernel_size[0]);
  if (kernel_size.size() != 2) raise<ValueError>("Conv2d: kernel_size must have 1 or 2 values, got {}", kernel_size.size());
  kernel_size_ = kernel_size;
  if (options.groups <= 0) raise<ValueError>("Conv2d: groups must be a positive integer, got {}", options.groups);
  if (in_channels % options.groups) raise<ValueError>("Conv2d: in_channels ({}) must be divisible by groups ({})", in_channels, options.groups);
  if (out_channels % options.groups) raise<ValueError>("Conv2d: out_channels ({}) must be divisible by groups ({})", out_channels, options.groups);
  register_parameter("weight", empty({out_channels, in_channels / options.groups, kernel_size[0], kernel_size[1]},
                                     options.dtype, options.device), false);
  register_parameter("bias", options.bias ? empty({out_channels}, options.dtype, options.device) : Tensor(), false);
  reset_parameters();
  weight().requires_grad_(true);
  if (bias().defined()) bias().requires_grad_(true);
}

void Conv2d::reset_parameters() {
  init::kaiming_uniform_(weight(), std::sqrt(5.0));
  if (bias().defined()) {
    auto [fan_in, fan_out] = init::calculate_fan_in_and_fan_out(weight());
    double bound = fan_in > 0 ? 1.0 / std::sqrt(double(fan_in)) : 0.0;
    init::uniform_(bias(), -bound, bound);
  }
}

Tensor Conv2d::forward(const Tensor& input) {
  return functional::conv2d(input, weight(), bias(), options_.stride, options_.padding, options_.dilation, options_.groups);
}

std::string Conv2d::extra_repr() const {
  return fmt::format("{}, {}, kernel_size=({}), stride=({}), padding=({}), groups={}, bias={}", in_channels_,
                     out_channels_, fmt::join(kernel_size_, ", "), fmt::join(options_.stride, ", "),
                     fmt::join(options_.padding, ", "), options_.groups, options_.bias);
}

}  // namespace tessera::nn

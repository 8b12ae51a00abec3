// nn::Linear.
#include <tessera/cpp/nn/functional.h>
#include <tessera/cpp/nn/init.h>
#include <tessera/cpp/nn/linear.h>
#include <tessera/ops.h>

#include <cmath>

namespace tessera::nn {

Linear::Linear(int64_t in_features, int64_t out_features, const LinearOptions& options)
    : Module("Linear"), in_features_(in_features), out_features_(out_features) {
  if (in_features < 0 || out_features < 0)
    raise<ValueError>("Linear: in_features and out_features must be >= 0, got {} and {}", in_features, out_features);
  register_parameter("weight", empty({out_features, in_features}, options.dtype, options.device), false);
  register_parameter("bias", options.bias ? empty({out_features}, options.dtype, options.device) : Tensor(), false);
  reset_parameters();
  weight().requires_grad_(true);
  if (bias().defined()) bias().requires_grad_(true);
}

void Linear::reset_parameters() {
  init::kaiming_uniform_(weight(), std::sqrt(5.0));
  if (bias().defined()) {
    double bound = in_features_ > 0 ? 1.0 / std::sqrt(double(in_features_)) : 0.0;
    init::uniform_(bias(), -bound, bound);
  }
}

Tensor Linear::forward(const Tensor& input) { return functional::linear(input, weight(), bias()); }

std::string Linear::extra_repr() const {
  return fmt::format("in_features={}, out_features={}, bias={}", in_features_, out_features_, param("bias").defined());
}

}  // namespace tessera::nn

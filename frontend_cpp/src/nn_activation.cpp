// The activation modules with a parameter or a dim: LeakyReLU, SiLU, ELU, Softmax, LogSoftmax.
#include <tessera/cpp/nn/activation.h>
#include <tessera/cpp/nn/functional.h>
#include <tessera/ops.h>

namespace tessera::nn {

LeakyReLU::LeakyReLU(double negative_slope) : Module("LeakyReLU"), negative_slope_(negative_slope) {}
Tensor LeakyReLU::forward(const Tensor& input) { return functional::leaky_relu(input, negative_slope_); }
std::string LeakyReLU::extra_repr() const { return fmt::format("negative_slope={}", negative_slope_); }

Tensor SiLU::forward(const Tensor& input) { return functional::silu(input); }

ELU::ELU(double alpha) : Module("ELU"), alpha_(alpha) {}
Tensor ELU::forward(const Tensor& input) { return functional::elu(input, alpha_); }
std::string ELU::extra_repr() const { return fmt::format("alpha={}", alpha_); }

namespace {
void check_dim(const Tensor& input, int64_t dim, const char* module) {
  if (!input.defined()) raise<ValueError>("{}: got an undefined input", module);
  int64_t n = std::max<int64_t>(input.dim(), 1);
  if (dim < -n || dim >= n)
    raise<IndexError>("{}: dim {} is out of range for a {}-D input (expected a dim in [{}, {}])", module, dim,
                      input.dim(), -n, n - 1);
}
}  // namespace

Softmax::Softmax(int64_t dim) : Module("Softmax"), dim_(dim) {}
Tensor Softmax::forward(const Tensor& input) {
  check_dim(input, dim_, "Softmax");
  return functional::softmax(input, dim_);
}
std::string Softmax::extra_repr() const { return fmt::format("dim={}", dim_); }

LogSoftmax::LogSoftmax(int64_t dim) : Module("LogSoftmax"), dim_(dim) {}
Tensor LogSoftmax::forward(const Tensor& input) {
  check_dim(input, dim_, "LogSoftmax");
  return functional::log_softmax(input, dim_);
}
std::string LogSoftmax::extra_repr() const { return fmt::format("dim={}", dim_); }

}  // namespace tessera::nn

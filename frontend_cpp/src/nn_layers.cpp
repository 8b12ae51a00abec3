// The small modules: Dropout, Embedding, the activations, Flatten, Sequential.
#include <tessera/cpp/nn/activation.h>
#include <tessera/cpp/nn/container.h>
#include <tessera/cpp/nn/dropout.h>
#include <tessera/cpp/nn/embedding.h>
#include <tessera/cpp/nn/functional.h>
#include <tessera/cpp/nn/init.h>
#include <tessera/cpp/autograd.h>
#include <tessera/ops.h>

namespace tessera::nn {

Dropout::Dropout(double p) : Module("Dropout"), p_(p) {
  if (p < 0.0 || p > 1.0) raise<ValueError>("dropout probability has to be between 0 and 1, but got {}", p);
}
Tensor Dropout::forward(const Tensor& input) { return functional::dropout(input, p_, is_training()); }
std::string Dropout::extra_repr() const { return fmt::format("p={}", p_); }

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim, const EmbeddingOptions& options)
    : Module("Embedding"), num_embeddings_(num_embeddings), embedding_dim_(embedding_dim) {
  if (num_embeddings < 0 || embedding_dim < 0)
    raise<ValueError>("Embedding: sizes must be >= 0, got ({}, {})", num_embeddings, embedding_dim);
  if (options.padding_idx) {
    int64_t p = *options.padding_idx;
    if (p >= num_embeddings || p < -num_embeddings)
      raise<ValueError>("Embedding: padding_idx must be within num_embeddings ({}), got {}", num_embeddings, p);
    padding_idx_ = p < 0 ? num_embeddings + p : p;
  }
  Tensor w = empty({num_embeddings, embedding_dim}, options.dtype, options.device);
  init::normal_(w);
  if (padding_idx_) w.select(0, *padding_idx_).fill_(0);
  register_parameter("weight", w);
}

Tensor Embedding::forward(const Tensor& indices) { return functional::embedding(indices, weight(), padding_idx_); }

std::string Embedding::extra_repr() const {
  return padding_idx_ ? fmt::format("{}, {}, padding_idx={}", num_embeddings_, embedding_dim_, *padding_idx_)
                      : fmt::format("{}, {}", num_embeddings_, embedding_dim_);
}

Tensor ReLU::forward(const Tensor& input) { return relu(input); }
GELU::GELU(std::string approximate) : Module("GELU"), approximate_(std::move(approximate)) {
  if (approximate_ != "none" && approximate_ != "tanh")
    raise<ValueError>("GELU: approximate must be 'none' or 'tanh', got '{}'", approximate_);
}
Tensor GELU::forward(const Tensor& input) { return gelu(input, approximate_); }
std::string GELU::extra_repr() const { return approximate_ == "none" ? "" : fmt::format("approximate='{}'", approximate_); }
Tensor Tanh::forward(const Tensor& input) { return tanh(input); }
Tensor Sigmoid::forward(const Tensor& input) { return sigmoid(input); }

Flatten::Flatten(int64_t start_dim, int64_t end_dim) : Module("Flatten"), start_dim_(start_dim), end_dim_(end_dim) {}
Tensor Flatten::forward(const Tensor& input) { return flatten(input, start_dim_, end_dim_); }
std::string Flatten::extra_repr() const { return fmt::format("start_dim={}, end_dim={}", start_dim_, end_dim_); }

}  // namespace tessera::nn

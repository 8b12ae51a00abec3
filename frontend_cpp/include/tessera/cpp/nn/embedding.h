#pragma once
// nn::Embedding: a lookup table (num_embeddings, embedding_dim) initialised N(0, 1), with the
// padding_idx row (if any) zero and receiving no gradient.
#include <tessera/cpp/nn/module.h>

#include <optional>

namespace tessera::nn {

struct EmbeddingOptions {
  std::optional<int64_t> padding_idx;  // negative counts from the end
  std::optional<ScalarType> dtype;
  std::optional<Device> device;
};

class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim, const EmbeddingOptions& options = {});
  // indices: an integer tensor of any shape; the result has one more dim, embedding_dim.
  Tensor forward(const Tensor& indices) override;
  Tensor& weight() { return param("weight"); }
  std::string extra_repr() const override;

 private:
  int64_t num_embeddings_, embedding_dim_;
  std::optional<int64_t> padding_idx_;
};

}  // namespace tessera::nn

#pragma once
// nn::Dropout: in training, zeroes each element with probability p and scales the rest by
// 1 / (1 - p); the identity in eval mode.
#include <tessera/cpp/nn/module.h>

namespace tessera::nn {

class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

 private:
  double p_;
};

}  // namespace tessera::nn

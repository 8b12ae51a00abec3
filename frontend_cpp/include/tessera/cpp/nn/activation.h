#pragma once
// Activation and shape modules without parameters: ReLU, GELU, Tanh, Sigmoid, LeakyReLU, SiLU, ELU,
// Softmax, LogSoftmax, Identity, Flatten.
#include <tessera/cpp/nn/module.h>

#include <string>

namespace tessera::nn {

class ReLU : public Module {
 public:
  ReLU() : Module("ReLU") {}
  Tensor forward(const Tensor& input) override;
};

class GELU : public Module {
 public:
  explicit GELU(std::string approximate = "none");  // "none" (erf) or "tanh"
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

 private:
  std::string approximate_;
};

class Tanh : public Module {
 public:
  Tanh() : Module("Tanh") {}
  Tensor forward(const Tensor& input) override;
};

class Sigmoid : public Module {
 public:
  Sigmoid() : Module("Sigmoid") {}
  Tensor forward(const Tensor& input) override;
};

// max(0, x) + negative_slope * min(0, x).
class LeakyReLU : public Module {
 public:
  explicit LeakyReLU(double negative_slope = 0.01);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

 private:
  double negative_slope_;
};

// x * sigmoid(x).
class SiLU : public Module {
 public:
  SiLU() : Module("SiLU") {}
  Tensor forward(const Tensor& input) override;
};

// x for x > 0, alpha * (exp(x) - 1) otherwise.
class ELU : public Module {
 public:
  explicit ELU(double alpha = 1.0);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

 private:
  double alpha_;
};

// exp(x_i) / sum_j exp(x_j) along dim.
class Softmax : public Module {
 public:
  explicit Softmax(int64_t dim);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

 private:
  int64_t dim_;
};

// log(softmax(x)) along dim, computed stably.
class LogSoftmax : public Module {
 public:
  explicit LogSoftmax(int64_t dim);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

 private:
  int64_t dim_;
};

class Identity : public Module {
 public:
  Identity() : Module("Identity") {}
  Tensor forward(const Tensor& input) override { return input; }
};

// Flattens dims start_dim..end_dim into one (a conv net's features into a Linear's input).
class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

 private:
  int64_t start_dim_, end_dim_;
};

}  // namespace tessera::nn

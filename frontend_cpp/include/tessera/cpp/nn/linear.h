#pragma once
// nn::Linear: y = x W^T + b, W (out_features, in_features), initialised as torch does:
// kaiming_uniform_(a = sqrt(5)) for W, U(-1/sqrt(in_features), 1/sqrt(in_features)) for b.
#include <tessera/cpp/nn/module.h>

#include <optional>

namespace tessera::nn {

struct LinearOptions {
  bool bias = true;
  std::optional<ScalarType> dtype;  // the default dtype when unset
  std::optional<Device> device;
};

class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, const LinearOptions& options = {});
  Tensor forward(const Tensor& input) override;
  void reset_parameters();
  Tensor& weight() { return param("weight"); }
  Tensor& bias() { return param("bias"); }  // undefined with bias = false
  std::string extra_repr() const override;

 private:
  int64_t in_features_, out_features_;
};

}  // namespace tessera::nn

#pragma once
// nn::BatchNorm2d and nn::LayerNorm (torch's defaults: weight ones, bias zeros, running_mean
// zeros, running_var ones, num_batches_tracked an int64 counter).
#include <tessera/cpp/nn/module.h>

#include <optional>
#include <vector>

namespace tessera::nn {

struct BatchNormOptions {
  double eps = 1e-5;
  double momentum = 0.1;
  bool affine = true;
  bool track_running_stats = true;
  std::optional<ScalarType> dtype;
  std::optional<Device> device;
};

// Normalizes each channel of an (N, C, H, W) input over N, H and W.
class BatchNorm2d : public Module {
 public:
  explicit BatchNorm2d(int64_t num_features, const BatchNormOptions& options = {});
  Tensor forward(const Tensor& input) override;
  void reset_running_stats();
  Tensor& weight() { return param("weight"); }
  Tensor& bias() { return param("bias"); }
  Tensor& running_mean() { return buffer("running_mean"); }
  Tensor& running_var() { return buffer("running_var"); }
  Tensor& num_batches_tracked() { return buffer("num_batches_tracked"); }
  std::string extra_repr() const override;

 private:
  int64_t num_features_;
  BatchNormOptions options_;
};

struct LayerNormOptions {
  double eps = 1e-5;
  bool elementwise_affine = true;
  bool bias = true;
  std::optional<ScalarType> dtype;
  std::optional<Device> device;
};

// Normalizes over the last normalized_shape.size() dims.
class LayerNorm : public Module {
 public:
  explicit LayerNorm(std::vector<int64_t> normalized_shape, const LayerNormOptions& options = {});
  Tensor forward(const Tensor& input) override;
  Tensor& weight() { return param("weight"); }
  Tensor& bias() { return param("bias"); }
  std::string extra_repr() const override;

 private:
  std::vector<int64_t> normalized_shape_;
  LayerNormOptions options_;
};

}  // namespace tessera::nn

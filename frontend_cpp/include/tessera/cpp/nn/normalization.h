#pragma once
// nn::BatchNorm1d, nn::BatchNorm2d, nn::LayerNorm and nn::GroupNorm (torch's defaults: weight ones,
// bias zeros, running_mean zeros, running_var ones, num_batches_tracked an int64 counter).
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

// What BatchNorm1d and BatchNorm2d share: parameters, running statistics, the forward.
class BatchNormBase : public Module {
 public:
  Tensor forward(const Tensor& input) override;
  void reset_running_stats();
  Tensor& weight() { return param("weight"); }
  Tensor& bias() { return param("bias"); }
  Tensor& running_mean() { return buffer("running_mean"); }
  Tensor& running_var() { return buffer("running_var"); }
  Tensor& num_batches_tracked() { return buffer("num_batches_tracked"); }
  std::string extra_repr() const override;

 protected:
  BatchNormBase(std::string name, int64_t num_features, const BatchNormOptions& options);
  // Raises ValueError naming the module when the input's rank is not one it normalizes.
  virtual void check_input_dim(const Tensor& input) const = 0;
  int64_t num_features_;
  BatchNormOptions options_;
};

// Normalizes each channel of an (N, C) or (N, C, L) input over N (and L).
class BatchNorm1d : public BatchNormBase {
 public:
  explicit BatchNorm1d(int64_t num_features, const BatchNormOptions& options = {});

 protected:
  void check_input_dim(const Tensor& input) const override;
};

// Normalizes each channel of an (N, C, H, W) input over N, H and W.
class BatchNorm2d : public BatchNormBase {
 public:
  explicit BatchNorm2d(int64_t num_features, const BatchNormOptions& options = {});

 protected:
  void check_input_dim(const Tensor& input) const override;
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

struct GroupNormOptions {
  double eps = 1e-5;
  bool affine = true;
  std::optional<ScalarType> dtype;
  std::optional<Device> device;
};

// Normalizes each of num_groups groups of channels of an (N, C, *) input over the group's
// channels and every other dim; per-channel affine weight and bias (C = num_channels).
class GroupNorm : public Module {
 public:
  GroupNorm(int64_t num_groups, int64_t num_channels, const GroupNormOptions& options = {});
  Tensor forward(const Tensor& input) override;
  Tensor& weight() { return param("weight"); }
  Tensor& bias() { return param("bias"); }
  std::string extra_repr() const override;

 private:
  int64_t num_groups_, num_channels_;
  GroupNormOptions options_;
};

}  // namespace tessera::nn

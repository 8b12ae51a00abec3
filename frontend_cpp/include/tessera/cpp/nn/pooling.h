#pragma once
// Pooling modules without parameters (torch's defaults: stride = kernel_size, no padding):
// MaxPool1d / AvgPool1d over the last dim of (N, C, L) or (C, L) inputs, MaxPool2d / AvgPool2d /
// AdaptiveAvgPool2d over the last two of (N, C, H, W) or (C, H, W) inputs, MaxPool3d / AvgPool3d
// over the last three of (N, C, D, H, W) or (C, D, H, W) inputs.
#include <tessera/cpp/nn/module.h>

#include <optional>
#include <tuple>
#include <vector>

namespace tessera::nn {

// Sizes: one value for every pooled dim, or one per dim; an empty stride means kernel_size.
struct MaxPoolOptions {
  std::vector<int64_t> stride{};
  std::vector<int64_t> padding{0};
  std::vector<int64_t> dilation{1};
  bool ceil_mode = false;
};
using MaxPool1dOptions = MaxPoolOptions;
using MaxPool2dOptions = MaxPoolOptions;
using MaxPool3dOptions = MaxPoolOptions;

struct AvgPoolOptions {
  std::vector<int64_t> stride{};
  std::vector<int64_t> padding{0};
  bool ceil_mode = false;
  bool count_include_pad = true;
  std::optional<int64_t> divisor_override;  // AvgPool2d and AvgPool3d
};
using AvgPool1dOptions = AvgPoolOptions;
using AvgPool2dOptions = AvgPoolOptions;
using AvgPool3dOptions = AvgPoolOptions;

class MaxPool1d : public Module {
 public:
  explicit MaxPool1d(std::vector<int64_t> kernel_size, const MaxPoolOptions& options = {});
  explicit MaxPool1d(int64_t kernel_size, const MaxPoolOptions& options = {})
      : MaxPool1d(std::vector<int64_t>{kernel_size}, options) {}
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

 private:
  std::vector<int64_t> kernel_size_;
  MaxPoolOptions options_;
};

class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(std::vector<int64_t> kernel_size, const MaxPoolOptions& options = {});
  explicit MaxPool2d(int64_t kernel_size, const MaxPoolOptions& options = {})
      : MaxPool2d(std::vector<int64_t>{kernel_size}, options) {}
  Tensor forward(const Tensor& input) override;
  // The max and its int64 index, flat over H * W of each plane (torch's return_indices).
  std::tuple<Tensor, Tensor> forward_with_indices(const Tensor& input);
  std::string extra_repr() const override;

 private:
  std::vector<int64_t> kernel_size_;
  MaxPoolOptions options_;
};

class MaxPool3d : public Module {
 public:
  explicit MaxPool3d(std::vector<int64_t> kernel_size, const MaxPoolOptions& options = {});
  explicit MaxPool3d(int64_t kernel_size, const MaxPoolOptions& options = {})
      : MaxPool3d(std::vector<int64_t>{kernel_size}, options) {}
  Tensor forward(const Tensor& input) override;
  // The max and its int64 index, flat over D * H * W of each volume (torch's return_indices).
  std::tuple<Tensor, Tensor> forward_with_indices(const Tensor& input);
  std::string extra_repr() const override;

 private:
  std::vector<int64_t> kernel_size_;
  MaxPoolOptions options_;
};

class AvgPool1d : public Module {
 public:
  explicit AvgPool1d(std::vector<int64_t> kernel_size, const AvgPoolOptions& options = {});
  explicit AvgPool1d(int64_t kernel_size, const AvgPoolOptions& options = {})
      : AvgPool1d(std::vector<int64_t>{kernel_size}, options) {}
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

 private:
  std::vector<int64_t> kernel_size_;
  AvgPoolOptions options_;
};

class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(std::vector<int64_t> kernel_size, const AvgPoolOptions& options = {});
  explicit AvgPool2d(int64_t kernel_size, const AvgPoolOptions& options = {})
      : AvgPool2d(std::vector<int64_t>{kernel_size}, options) {}
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

 private:
  std::vector<int64_t> kernel_size_;
  AvgPoolOptions options_;
};

class AvgPool3d : public Module {
 public:
  explicit AvgPool3d(std::vector<int64_t> kernel_size, const AvgPoolOptions& options = {});
  explicit AvgPool3d(int64_t kernel_size, const AvgPoolOptions& options = {})
      : AvgPool3d(std::vector<int64_t>{kernel_size}, options) {}
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

 private:
  std::vector<int64_t> kernel_size_;
  AvgPoolOptions options_;
};

// Averages over windows chosen so that the output's last two dims are output_size (one value or two).
class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(std::vector<int64_t> output_size);
  explicit AdaptiveAvgPool2d(int64_t output_size) : AdaptiveAvgPool2d(std::vector<int64_t>{output_size}) {}
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

 private:
  std::vector<int64_t> output_size_;
};

}  // namespace tessera::nn

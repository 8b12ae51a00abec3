#pragma once
// nn::Conv2d over (N, C_in, H, W) or (C_in, H, W) inputs; weight (C_out, C_in / groups, kH, kW),
// initialised as torch does (kaiming_uniform_(a = sqrt(5)), bias U(-1/sqrt(fan_in), 1/sqrt(fan_in))).
#include <tessera/cpp/nn/module.h>

#include <optional>
#include <vector>

namespace tessera::nn {

struct Conv2dOptions {
  std::vector<int64_t> stride{1};  // one value for both dims, or two
  std::vector<int64_t> padding{0};
  std::vector<int64_t> dilation{1};
  int64_t groups = 1;
  bool bias = true;
  std::optional<ScalarType> dtype;
  std::optional<Device> device;
};

class Conv2d : public Module {
 public:
  // kernel_size: one value (square) or two.
  Conv2d(int64_t in_channels, int64_t out_channels, std::vector<int64_t> kernel_size, const Conv2dOptions& options = {});
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, const Conv2dOptions& options = {})
      : Conv2d(in_channels, out_channels, std::vector<int64_t>{kernel_size}, options) {}
  Tensor forward(const Tensor& input) override;
  void reset_parameters();
  Tensor& weight() { return param("weight"); }
  Tensor& bias() { return param("bias"); }
  std::string extra_repr() const override;

 private:
  int64_t in_channels_, out_channels_;
  std::vector<int64_t> kernel_size_;
  Conv2dOptions options_;
};

}  // namespace tessera::nn

#pragma once
// Convolutions over (N, C_in, *spatial) or unbatched (C_in, *spatial) inputs, initialised as torch
// does (kaiming_uniform_(a = sqrt(5)) for the weight, bias U(-1/sqrt(fan_in), 1/sqrt(fan_in))):
//   Conv1d / Conv2d / Conv3d: weight (C_out, C_in / groups, k...), the `convolution` operator;
//   ConvTranspose1d / 2d / 3d: weight (C_in, C_out / groups, k...), the adjoint of a convolution
//   (`convolution_backward_input`), output size (in - 1) stride - 2 padding + dilation (k - 1) +
//   output_padding + 1 per spatial dim.
#include <tessera/cpp/nn/module.h>

#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tessera::nn {

// torch's padding="same" (the output as long as the input: dilation (k - 1) split over both
// sides, the odd element on the right; stride 1 only) and padding="valid" (none).
enum class PaddingKind { Same, Valid };
inline constexpr PaddingKind kSame = PaddingKind::Same;
inline constexpr PaddingKind kValid = PaddingKind::Valid;

// A convolution's padding: numbers (one for every spatial dim, or one per dim) or kSame / kValid.
struct ConvPadding {
  ConvPadding(std::vector<int64_t> values) : values(std::move(values)) {}  // NOLINT: as torch's options
  ConvPadding(std::initializer_list<int64_t> values) : values(values) {}
  ConvPadding(int64_t value) : values{value} {}  // NOLINT
  ConvPadding(PaddingKind kind) : kind(kind) {}  // NOLINT
  std::vector<int64_t> values{0};
  std::optional<PaddingKind> kind;
};

// stride, padding, dilation: one value for every spatial dim, or one per dim.
struct ConvOptions {
  std::vector<int64_t> stride{1};
  ConvPadding padding{0};
  std::vector<int64_t> dilation{1};
  int64_t groups = 1;
  bool bias = true;
  std::optional<ScalarType> dtype;
  std::optional<Device> device;
};
using Conv1dOptions = ConvOptions;
using Conv2dOptions = ConvOptions;
using Conv3dOptions = ConvOptions;

struct ConvTransposeOptions {
  std::vector<int64_t> stride{1};
  std::vector<int64_t> padding{0};
  std::vector<int64_t> output_padding{0};  // added to one side of the output; < stride or dilation
  int64_t groups = 1;
  bool bias = true;
  std::vector<int64_t> dilation{1};
  std::optional<ScalarType> dtype;
  std::optional<Device> device;
};
using ConvTranspose1dOptions = ConvTransposeOptions;
using ConvTranspose2dOptions = ConvTransposeOptions;
using ConvTranspose3dOptions = ConvTransposeOptions;

// What the convolution modules share: the checks, the parameters and their initialisation.
class ConvNd : public Module {
 public:
  void reset_parameters();
  Tensor& weight() { return param("weight"); }
  Tensor& bias() { return param("bias"); }  // undefined with bias = false
  std::string extra_repr() const override;

 protected:
  // kernel_size: one value for every spatial dim, or `dims` values.
  ConvNd(std::string name, int64_t dims, bool transposed, int64_t in_channels, int64_t out_channels,
         std::vector<int64_t> kernel_size, const ConvTransposeOptions& options);
  int64_t dims_, in_channels_, out_channels_;
  bool transposed_;
  std::vector<int64_t> kernel_size_;
  ConvTransposeOptions options_;  // output_padding unused by the plain convolutions
  std::optional<PaddingKind> padding_kind_;  // the plain convolutions' "same" / "valid"
  // The input padded on the right where "same" needs one more element than the left, and the
  // symmetric padding for the convolution itself.
  std::pair<Tensor, std::vector<int64_t>> same_padding(const Tensor& input) const;
};

class Conv1d : public ConvNd {
 public:
  Conv1d(int64_t in_channels, int64_t out_channels, std::vector<int64_t> kernel_size, const ConvOptions& options = {});
  Conv1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, const ConvOptions& options = {})
      : Conv1d(in_channels, out_channels, std::vector<int64_t>{kernel_size}, options) {}
  Tensor forward(const Tensor& input) override;
};

class Conv2d : public ConvNd {
 public:
  // kernel_size: one value (square) or two.
  Conv2d(int64_t in_channels, int64_t out_channels, std::vector<int64_t> kernel_size, const ConvOptions& options = {});
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, const ConvOptions& options = {})
      : Conv2d(in_channels, out_channels, std::vector<int64_t>{kernel_size}, options) {}
  Tensor forward(const Tensor& input) override;
};

class Conv3d : public ConvNd {
 public:
  Conv3d(int64_t in_channels, int64_t out_channels, std::vector<int64_t> kernel_size, const ConvOptions& options = {});
  Conv3d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, const ConvOptions& options = {})
      : Conv3d(in_channels, out_channels, std::vector<int64_t>{kernel_size}, options) {}
  Tensor forward(const Tensor& input) override;
};

class ConvTranspose1d : public ConvNd {
 public:
  ConvTranspose1d(int64_t in_channels, int64_t out_channels, std::vector<int64_t> kernel_size,
                  const ConvTransposeOptions& options = {});
  ConvTranspose1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, const ConvTransposeOptions& options = {})
      : ConvTranspose1d(in_channels, out_channels, std::vector<int64_t>{kernel_size}, options) {}
  Tensor forward(const Tensor& input) override;
};

class ConvTranspose2d : public ConvNd {
 public:
  ConvTranspose2d(int64_t in_channels, int64_t out_channels, std::vector<int64_t> kernel_size,
                  const ConvTransposeOptions& options = {});
  ConvTranspose2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, const ConvTransposeOptions& options = {})
      : ConvTranspose2d(in_channels, out_channels, std::vector<int64_t>{kernel_size}, options) {}
  Tensor forward(const Tensor& input) override;
};

class ConvTranspose3d : public ConvNd {
 public:
  ConvTranspose3d(int64_t in_channels, int64_t out_channels, std::vector<int64_t> kernel_size,
                  const ConvTransposeOptions& options = {});
  ConvTranspose3d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, const ConvTransposeOptions& options = {})
      : ConvTranspose3d(in_channels, out_channels, std::vector<int64_t>{kernel_size}, options) {}
  Tensor forward(const Tensor& input) override;
};

}  // namespace tessera::nn

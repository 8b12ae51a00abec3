// nn::Conv1d / Conv2d / Conv3d and nn::ConvTranspose1d / 2d / 3d.
#include <tessera/cpp/nn/conv.h>
#include <tessera/cpp/nn/functional.h>
#include <tessera/cpp/nn/init.h>
#include <tessera/ops.h>

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

namespace tessera::nn {
namespace {

// One value for every spatial dim, or `dims` values.
std::vector<int64_t> expand(std::vector<int64_t> v, int64_t dims, const std::string& module, const char* what) {
  if (v.size() == 1) v.resize(size_t(dims), v[0]);
  if (int64_t(v.size()) != dims)
    raise<ValueError>("{}: {} must have 1 or {} values, got {}", module, what, dims, v.size());
  return v;
}

ConvTransposeOptions common(const ConvOptions& o) {
  return {.stride = o.stride, .padding = o.padding.kind ? std::vector<int64_t>{0} : o.padding.values,
          .output_padding = {0}, .groups = o.groups, .bias = o.bias, .dilation = o.dilation, .dtype = o.dtype,
          .device = o.device};
}

// torch prints a 1-tuple as "(3,)".
std::string tuple(const std::vector<int64_t>& v) {
  return v.size() == 1 ? fmt::format("({},)", v[0]) : fmt::format("({})", fmt::join(v, ", "));
}

}  // namespace

ConvNd::ConvNd(std::string name, int64_t dims, bool transposed, int64_t in_channels, int64_t out_channels,
               std::vector<int64_t> kernel_size, const ConvTransposeOptions& options)
    : Module(std::move(name)), dims_(dims), in_channels_(in_channels), out_channels_(out_channels),
      transposed_(transposed), options_(options) {
  const std::string& m = this->name();
  kernel_size_ = expand(std::move(kernel_size), dims, m, "kernel_size");
  options_.stride = expand(options.stride, dims, m, "stride");
  options_.padding = expand(options.padding, dims, m, "padding");
  options_.dilation = expand(options.dilation, dims, m, "dilation");
  options_.output_padding = expand(options.output_padding, dims, m, "output_padding");
  if (in_channels <= 0 || out_channels <= 0)
    raise<ValueError>("{}: in_channels and out_channels must be positive, got {} and {}", m, in_channels, out_channels);
  if (std::any_of(kernel_size_.begin(), kernel_size_.end(), [](int64_t k) { return k <= 0; }))
    raise<ValueError>("{}: kernel_size must be positive, got {}", m, tuple(kernel_size_));
  if (options.groups <= 0) raise<ValueError>("{}: groups must be a positive integer, got {}", m, options.groups);
  if (in_channels % options.groups) raise<ValueError>("{}: in_channels ({}) must be divisible by groups ({})", m, in_channels, options.groups);
  if (out_channels % options.groups) raise<ValueError>("{}: out_channels ({}) must be divisible by groups ({})", m, out_channels, options.groups);
  for (int64_t d = 0; d < dims; ++d) {
    auto i = size_t(d);
    if (options_.output_padding[i] >= options_.stride[i] && options_.output_padding[i] >= options_.dilation[i])
      raise<ValueError>("{}: output_padding must be smaller than either stride or dilation, got output_padding={}, "
                        "stride={}, dilation={}", m, tuple(options_.output_padding), tuple(options_.stride),
                        tuple(options_.dilation));
  }
  std::vector<int64_t> shape = transposed ? std::vector<int64_t>{in_channels, out_channels / options.groups}
                                          : std::vector<int64_t>{out_channels, in_channels / options.groups};
  shape.insert(shape.end(), kernel_size_.begin(), kernel_size_.end());
  register_parameter("weight", empty(shape, options.dtype, options.device), false);
  register_parameter("bias", options.bias ? empty({out_channels}, options.dtype, options.device) : Tensor(), false);
  reset_parameters();
  weight().requires_grad_(true);
  if (bias().defined()) bias().requires_grad_(true);
}

void ConvNd::reset_parameters() {
  init::kaiming_uniform_(weight(), std::sqrt(5.0));
  if (bias().defined()) {
    auto [fan_in, fan_out] = init::calculate_fan_in_and_fan_out(weight());
    double bound = fan_in > 0 ? 1.0 / std::sqrt(double(fan_in)) : 0.0;
    init::uniform_(bias(), -bound, bound);
  }
}

std::string ConvNd::extra_repr() const {
  const ConvTransposeOptions& o = options_;
  auto all = [](const std::vector<int64_t>& v, int64_t x) { return std::all_of(v.begin(), v.end(), [&](int64_t e) { return e == x; }); };
  std::string s = fmt::format("{}, {}, kernel_size={}, stride={}", in_channels_, out_channels_, tuple(kernel_size_), tuple(o.stride));
  if (padding_kind_) s += padding_kind_ == PaddingKind::Same ? ", padding=same" : ", padding=valid";
  else if (!all(o.padding, 0)) s += fmt::format(", padding={}", tuple(o.padding));
  if (!all(o.dilation, 1)) s += fmt::format(", dilation={}", tuple(o.dilation));
  if (transposed_ && !all(o.output_padding, 0)) s += fmt::format(", output_padding={}", tuple(o.output_padding));
  if (o.groups != 1) s += fmt::format(", groups={}", o.groups);
  if (!param("bias").defined()) s += ", bias=false";
  return s;
}

namespace {
// torch's checks of a string padding: "same" needs stride 1 everywhere.
// `stride`: the module's, one per spatial dim.
std::optional<PaddingKind> checked_kind(const ConvOptions& o, const std::vector<int64_t>& stride,
                                        const std::string& module) {
  if (o.padding.kind == PaddingKind::Same && std::any_of(stride.begin(), stride.end(), [](int64_t s) { return s != 1; }))
    raise<ValueError>("{}: padding='same' is not supported for strided convolutions (got stride={})", module,
                      tuple(stride));
  return o.padding.kind;
}
}  // namespace

Conv1d::Conv1d(int64_t in_channels, int64_t out_channels, std::vector<int64_t> kernel_size, const ConvOptions& options)
    : ConvNd("Conv1d", 1, false, in_channels, out_channels, std::move(kernel_size), common(options)) {
  padding_kind_ = checked_kind(options, options_.stride, name());
}
Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, std::vector<int64_t> kernel_size, const ConvOptions& options)
    : ConvNd("Conv2d", 2, false, in_channels, out_channels, std::move(kernel_size), common(options)) {
  padding_kind_ = checked_kind(options, options_.stride, name());
}
Conv3d::Conv3d(int64_t in_channels, int64_t out_channels, std::vector<int64_t> kernel_size, const ConvOptions& options)
    : ConvNd("Conv3d", 3, false, in_channels, out_channels, std::move(kernel_size), common(options)) {
  padding_kind_ = checked_kind(options, options_.stride, name());
}

std::pair<Tensor, std::vector<int64_t>> ConvNd::same_padding(const Tensor& input) const {
  if (padding_kind_ != PaddingKind::Same) return {input, options_.padding};
  std::vector<int64_t> left(static_cast<size_t>(dims_)), pad;  // pad: constant_pad_nd's (left, right) pairs, last dim first
  bool asymmetric = false;
  for (int64_t d = dims_ - 1; d >= 0; --d) {
    const int64_t total = options_.dilation[size_t(d)] * (kernel_size_[size_t(d)] - 1);
    left[size_t(d)] = total / 2;
    pad.push_back(0);
    pad.push_back(total - 2 * (total / 2));  // the odd element, on the right
    asymmetric |= total % 2 != 0;
  }
  return {asymmetric ? tessera::constant_pad_nd(input, pad, 0) : input, left};
}
ConvTranspose1d::ConvTranspose1d(int64_t in_channels, int64_t out_channels, std::vector<int64_t> kernel_size,
                                 const ConvTransposeOptions& options)
    : ConvNd("ConvTranspose1d", 1, true, in_channels, out_channels, std::move(kernel_size), options) {}
ConvTranspose2d::ConvTranspose2d(int64_t in_channels, int64_t out_channels, std::vector<int64_t> kernel_size,
                                 const ConvTransposeOptions& options)
    : ConvNd("ConvTranspose2d", 2, true, in_channels, out_channels, std::move(kernel_size), options) {}
ConvTranspose3d::ConvTranspose3d(int64_t in_channels, int64_t out_channels, std::vector<int64_t> kernel_size,
                                 const ConvTransposeOptions& options)
    : ConvNd("ConvTranspose3d", 3, true, in_channels, out_channels, std::move(kernel_size), options) {}

// The channel check names the module, the expected and the got channel count; the rest (rank,
// geometry) is the functional form's.
namespace {
void check_channels(const Tensor& input, int64_t dims, int64_t channels, const std::string& module) {
  if (!input.defined()) raise<ValueError>("{}: got an undefined input", module);
  if (input.dim() != dims + 1 && input.dim() != dims + 2)
    raise<ValueError>("{}: expected a {}-D (unbatched) or {}-D (batched) input, got {}-D input of shape [{}]", module,
                      dims + 1, dims + 2, input.dim(), fmt::join(input.shape(), ", "));
  int64_t got = input.size(input.dim() - dims - 1);
  if (got != channels)
    raise<ValueError>("{}: expected input with {} channels, got {} channels (input of shape [{}])", module, channels, got,
                      fmt::join(input.shape(), ", "));
}
}  // namespace

Tensor Conv1d::forward(const Tensor& input) {
  check_channels(input, 1, in_channels_, name());
  const auto& o = options_;
  auto [padded, padding] = same_padding(input);
  return functional::conv1d(padded, weight(), bias(), o.stride, padding, o.dilation, o.groups);
}
Tensor Conv2d::forward(const Tensor& input) {
  check_channels(input, 2, in_channels_, name());
  const auto& o = options_;
  auto [padded, padding] = same_padding(input);
  return functional::conv2d(padded, weight(), bias(), o.stride, padding, o.dilation, o.groups);
}
Tensor Conv3d::forward(const Tensor& input) {
  check_channels(input, 3, in_channels_, name());
  const auto& o = options_;
  auto [padded, padding] = same_padding(input);
  return functional::conv3d(padded, weight(), bias(), o.stride, padding, o.dilation, o.groups);
}
Tensor ConvTranspose1d::forward(const Tensor& input) {
  check_channels(input, 1, in_channels_, name());
  const auto& o = options_;
  return functional::conv_transpose1d(input, weight(), bias(), o.stride, o.padding, o.output_padding, o.groups, o.dilation);
}
Tensor ConvTranspose2d::forward(const Tensor& input) {
  check_channels(input, 2, in_channels_, name());
  const auto& o = options_;
  return functional::conv_transpose2d(input, weight(), bias(), o.stride, o.padding, o.output_padding, o.groups, o.dilation);
}
Tensor ConvTranspose3d::forward(const Tensor& input) {
  check_channels(input, 3, in_channels_, name());
  const auto& o = options_;
  return functional::conv_transpose3d(input, weight(), bias(), o.stride, o.padding, o.output_padding, o.groups, o.dilation);
}

}  // namespace tessera::nn

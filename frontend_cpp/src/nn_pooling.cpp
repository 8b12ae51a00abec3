// nn::MaxPool1d/2d/3d, AvgPool1d/2d/3d and AdaptiveAvgPool2d over nn::functional's pooling and the
// 3-D pooling operators.
#include <tessera/cpp/nn/functional.h>
#include <tessera/cpp/nn/pooling.h>
#include <tessera/ops.h>

#include <fmt/ranges.h>

#include <algorithm>
#include <type_traits>

namespace tessera::nn {
namespace {

// One value for every pooled dim, or `dims` values; `positive` rejects zero and negative sizes.
std::vector<int64_t> expand(std::vector<int64_t> v, size_t dims, const char* module, const char* what, bool positive) {
  if (v.size() == 1) v.resize(dims, v[0]);
  if (v.size() != dims) raise<ValueError>("{}: {} must have 1 or {} values, got {}", module, what, dims, v.size());
  for (int64_t x : v)
    if (positive ? x <= 0 : x < 0)
      raise<ValueError>("{}: {} must be {}, got ({})", module, what, positive ? "positive" : "non-negative",
                        fmt::join(v, ", "));
  return v;
}

void check_windows(const std::vector<int64_t>& kernel, const std::vector<int64_t>& padding, const char* module) {
  for (size_t i = 0; i < kernel.size(); ++i)
    if (padding[i] * 2 > kernel[i])
      raise<ValueError>("{}: pad should be at most half of effective kernel size, but got pad=({}) and kernel_size=({})",
                        module, fmt::join(padding, ", "), fmt::join(kernel, ", "));
}

// The input's rank: 2 or 3 for the 1-D poolings, 3 or 4 for the 2-D ones, 4 or 5 for the 3-D ones.
void check_input(const Tensor& input, int64_t dims, const char* module) {
  if (!input.defined()) raise<ValueError>("{}: got an undefined input", module);
  const char* spatial = dims == 1 ? "L" : dims == 2 ? "H, W" : "D, H, W";
  if (input.dim() != dims + 1 && input.dim() != dims + 2)
    raise<ValueError>("{}: expected a {}-D (C, {}) or {}-D (N, C, {}) input, got {}-D input of shape [{}]", module,
                      dims + 1, spatial, dims + 2, spatial, input.dim(), fmt::join(input.shape(), ", "));
}

// An unbatched (C, D, H, W) input runs as a batch of one.
template <class F>
auto unbatched_as_one(const Tensor& input, F&& pool) {
  if (input.dim() == 5) return pool(input);
  auto out = pool(input.unsqueeze(0));
  if constexpr (std::is_same_v<decltype(out), Tensor>) return out.squeeze(0);
  else return std::make_tuple(std::get<0>(out).squeeze(0), std::get<1>(out).squeeze(0));
}

std::string sizes(const std::vector<int64_t>& v) {
  return v.size() == 1 ? fmt::format("{}", v[0]) : fmt::format("({})", fmt::join(v, ", "));
}

}  // namespace

MaxPool1d::MaxPool1d(std::vector<int64_t> kernel_size, const MaxPoolOptions& options)
    : Module("MaxPool1d"), kernel_size_(expand(std::move(kernel_size), 1, "MaxPool1d", "kernel_size", true)), options_(options) {
  if (!options_.stride.empty()) options_.stride = expand(options_.stride, 1, "MaxPool1d", "stride", true);
  options_.padding = expand(options_.padding, 1, "MaxPool1d", "padding", false);
  options_.dilation = expand(options_.dilation, 1, "MaxPool1d", "dilation", true);
  check_windows(kernel_size_, options_.padding, "MaxPool1d");
}
Tensor MaxPool1d::forward(const Tensor& input) {
  check_input(input, 1, "MaxPool1d");
  const auto& o = options_;
  return functional::max_pool1d(input, kernel_size_, o.stride, o.padding, o.dilation, o.ceil_mode);
}
std::string MaxPool1d::extra_repr() const {
  const auto& o = options_;
  return fmt::format("kernel_size={}, stride={}, padding={}, dilation={}, ceil_mode={}", sizes(kernel_size_),
                     sizes(o.stride.empty() ? kernel_size_ : o.stride), sizes(o.padding), sizes(o.dilation), o.ceil_mode);
}

MaxPool2d::MaxPool2d(std::vector<int64_t> kernel_size, const MaxPoolOptions& options)
    : Module("MaxPool2d"), kernel_size_(expand(std::move(kernel_size), 2, "MaxPool2d", "kernel_size", true)), options_(options) {
  if (!options_.stride.empty()) options_.stride = expand(options_.stride, 2, "MaxPool2d", "stride", true);
  options_.padding = expand(options_.padding, 2, "MaxPool2d", "padding", false);
  options_.dilation = expand(options_.dilation, 2, "MaxPool2d", "dilation", true);
  check_windows(kernel_size_, options_.padding, "MaxPool2d");
}
std::tuple<Tensor, Tensor> MaxPool2d::forward_with_indices(const Tensor& input) {
  check_input(input, 2, "MaxPool2d");
  const auto& o = options_;
  return functional::max_pool2d_with_indices(input, kernel_size_, o.stride, o.padding, o.dilation, o.ceil_mode);
}
Tensor MaxPool2d::forward(const Tensor& input) { return std::get<0>(forward_with_indices(input)); }
std::string MaxPool2d::extra_repr() const {
  const auto& o = options_;
  return fmt::format("kernel_size={}, stride={}, padding={}, dilation={}, ceil_mode={}", sizes(kernel_size_),
                     sizes(o.stride.empty() ? kernel_size_ : o.stride), sizes(o.padding), sizes(o.dilation), o.ceil_mode);
}

MaxPool3d::MaxPool3d(std::vector<int64_t> kernel_size, const MaxPoolOptions& options)
    : Module("MaxPool3d"), kernel_size_(expand(std::move(kernel_size), 3, "MaxPool3d", "kernel_size", true)), options_(options) {
  if (!options_.stride.empty()) options_.stride = expand(options_.stride, 3, "MaxPool3d", "stride", true);
  options_.padding = expand(options_.padding, 3, "MaxPool3d", "padding", false);
  options_.dilation = expand(options_.dilation, 3, "MaxPool3d", "dilation", true);
  check_windows(kernel_size_, options_.padding, "MaxPool3d");
}
std::tuple<Tensor, Tensor> MaxPool3d::forward_with_indices(const Tensor& input) {
  check_input(input, 3, "MaxPool3d");
  const auto& o = options_;
  return unbatched_as_one(input, [&](const Tensor& x) {
    return max_pool3d_with_indices(x, kernel_size_, o.stride, o.padding, o.dilation, o.ceil_mode);
  });
}
Tensor MaxPool3d::forward(const Tensor& input) { return std::get<0>(forward_with_indices(input)); }
std::string MaxPool3d::extra_repr() const {
  const auto& o = options_;
  return fmt::format("kernel_size={}, stride={}, padding={}, dilation={}, ceil_mode={}", sizes(kernel_size_),
                     sizes(o.stride.empty() ? kernel_size_ : o.stride), sizes(o.padding), sizes(o.dilation), o.ceil_mode);
}

AvgPool1d::AvgPool1d(std::vector<int64_t> kernel_size, const AvgPoolOptions& options)
    : Module("AvgPool1d"), kernel_size_(expand(std::move(kernel_size), 1, "AvgPool1d", "kernel_size", true)), options_(options) {
  if (!options_.stride.empty()) options_.stride = expand(options_.stride, 1, "AvgPool1d", "stride", true);
  options_.padding = expand(options_.padding, 1, "AvgPool1d", "padding", false);
  check_windows(kernel_size_, options_.padding, "AvgPool1d");
  if (options.divisor_override) raise<ValueError>("AvgPool1d: divisor_override is only supported by AvgPool2d");
}
Tensor AvgPool1d::forward(const Tensor& input) {
  check_input(input, 1, "AvgPool1d");
  const auto& o = options_;
  return functional::avg_pool1d(input, kernel_size_, o.stride, o.padding, o.ceil_mode, o.count_include_pad);
}
std::string AvgPool1d::extra_repr() const {
  const auto& o = options_;
  return fmt::format("kernel_size={}, stride={}, padding={}", sizes(kernel_size_),
                     sizes(o.stride.empty() ? kernel_size_ : o.stride), sizes(o.padding));
}

AvgPool2d::AvgPool2d(std::vector<int64_t> kernel_size, const AvgPoolOptions& options)
    : Module("AvgPool2d"), kernel_size_(expand(std::move(kernel_size), 2, "AvgPool2d", "kernel_size", true)), options_(options) {
  if (!options_.stride.empty()) options_.stride = expand(options_.stride, 2, "AvgPool2d", "stride", true);
  options_.padding = expand(options_.padding, 2, "AvgPool2d", "padding", false);
  check_windows(kernel_size_, options_.padding, "AvgPool2d");
  if (options.divisor_override && *options.divisor_override == 0) raise<ValueError>("AvgPool2d: divisor must be not zero");
}
Tensor AvgPool2d::forward(const Tensor& input) {
  check_input(input, 2, "AvgPool2d");
  const auto& o = options_;
  return functional::avg_pool2d(input, kernel_size_, o.stride, o.padding, o.ceil_mode, o.count_include_pad,
                                o.divisor_override);
}
std::string AvgPool2d::extra_repr() const {
  const auto& o = options_;
  return fmt::format("kernel_size={}, stride={}, padding={}", sizes(kernel_size_),
                     sizes(o.stride.empty() ? kernel_size_ : o.stride), sizes(o.padding));
}

AvgPool3d::AvgPool3d(std::vector<int64_t> kernel_size, const AvgPoolOptions& options)
    : Module("AvgPool3d"), kernel_size_(expand(std::move(kernel_size), 3, "AvgPool3d", "kernel_size", true)), options_(options) {
  if (!options_.stride.empty()) options_.stride = expand(options_.stride, 3, "AvgPool3d", "stride", true);
  options_.padding = expand(options_.padding, 3, "AvgPool3d", "padding", false);
  check_windows(kernel_size_, options_.padding, "AvgPool3d");
  if (options.divisor_override && *options.divisor_override == 0) raise<ValueError>("AvgPool3d: divisor must be not zero");
}
Tensor AvgPool3d::forward(const Tensor& input) {
  check_input(input, 3, "AvgPool3d");
  const auto& o = options_;
  return unbatched_as_one(input, [&](const Tensor& x) {
    return avg_pool3d(x, kernel_size_, o.stride, o.padding, o.ceil_mode, o.count_include_pad, o.divisor_override);
  });
}
std::string AvgPool3d::extra_repr() const {
  const auto& o = options_;
  return fmt::format("kernel_size={}, stride={}, padding={}", sizes(kernel_size_),
                     sizes(o.stride.empty() ? kernel_size_ : o.stride), sizes(o.padding));
}

AdaptiveAvgPool2d::AdaptiveAvgPool2d(std::vector<int64_t> output_size)
    : Module("AdaptiveAvgPool2d"), output_size_(expand(std::move(output_size), 2, "AdaptiveAvgPool2d", "output_size", true)) {}
Tensor AdaptiveAvgPool2d::forward(const Tensor& input) {
  check_input(input, 2, "AdaptiveAvgPool2d");
  return functional::adaptive_avg_pool2d(input, output_size_);
}
std::string AdaptiveAvgPool2d::extra_repr() const { return fmt::format("output_size={}", sizes(output_size_)); }

}  // namespace tessera::nn

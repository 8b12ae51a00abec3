#pragma once
// nn::init: in-place initialisers with torch.nn.init's names, formulas and defaults. Each fills
// the tensor without recording (from the global generator: manual_seed makes it reproducible)
// and returns it. Non-floating tensors raise TypeError.
#include <tessera/tensor.h>

#include <optional>
#include <string>
#include <utility>

namespace tessera::nn::init {

double calculate_gain(const std::string& nonlinearity, std::optional<double> param = std::nullopt);
// (fan_in, fan_out) of a weight of 2 or more dims: dim 1 (dim 0) times the receptive field.
std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t);

Tensor uniform_(const Tensor& t, double a = 0.0, double b = 1.0);
Tensor normal_(const Tensor& t, double mean = 0.0, double std = 1.0);
Tensor constant_(const Tensor& t, double value);
Tensor zeros_(const Tensor& t);
Tensor ones_(const Tensor& t);
// U(-bound, bound), bound = gain * sqrt(3 / fan); mode "fan_in" or "fan_out".
Tensor kaiming_uniform_(const Tensor& t, double a = 0, const std::string& mode = "fan_in",
                        const std::string& nonlinearity = "leaky_relu");
Tensor kaiming_normal_(const Tensor& t, double a = 0, const std::string& mode = "fan_in",
                       const std::string& nonlinearity = "leaky_relu");
Tensor xavier_uniform_(const Tensor& t, double gain = 1.0);
Tensor xavier_normal_(const Tensor& t, double gain = 1.0);

}  // namespace tessera::nn::init

// The policy lists. Matrix products and convolutions gain from lower precision; what sums many
// terms or exponentiates (reductions, softmax, norms, losses) keeps float32's range and
// precision. Element-wise and shape operators are on neither list: they run in whatever dtype
// their inputs arrive in (binary operators promote mixed inputs themselves).
#include "policy.h"

namespace tessera::autocast {

const std::vector<std::pair<const char*, Policy>>& policy_list() {
  using enum Policy;
  static const std::vector<std::pair<const char*, Policy>> list = {
      // lower precision
      {"mm", LowerPrecision}, {"bmm", LowerPrecision}, {"matmul", LowerPrecision}, {"addmm", LowerPrecision},
      {"baddbmm", LowerPrecision}, {"addbmm", LowerPrecision}, {"addmv", LowerPrecision}, {"mv", LowerPrecision},
      {"linear", LowerPrecision}, {"convolution", LowerPrecision}, {"convolution_backward_input", LowerPrecision},
      {"einsum", LowerPrecision}, {"prelu", LowerPrecision},
      // float32
      {"exp", Float32}, {"expm1", Float32}, {"log", Float32}, {"log10", Float32}, {"log2", Float32},
      {"log1p", Float32}, {"reciprocal", Float32}, {"rsqrt", Float32}, {"pow.Tensor_Scalar", Float32},
      {"pow.Tensor_Tensor", Float32}, {"acos", Float32}, {"asin", Float32}, {"cosh", Float32}, {"sinh", Float32},
      {"tan", Float32}, {"erfinv", Float32}, {"softplus", Float32},
      {"sum", Float32}, {"sum.dim_IntList", Float32}, {"prod", Float32}, {"prod.dim_int", Float32},
      {"cumsum", Float32}, {"cumprod", Float32}, {"logsumexp", Float32}, {"norm.Scalar", Float32},
      {"_softmax", Float32}, {"_log_softmax", Float32}, {"softmax.int", Float32}, {"log_softmax.int", Float32},
      {"native_layer_norm", Float32}, {"native_group_norm", Float32}, {"native_batch_norm", Float32},
      {"nll_loss_forward", Float32}, {"mse_loss", Float32}, {"l1_loss", Float32}, {"smooth_l1_loss", Float32},
      {"huber_loss", Float32}, {"kl_div", Float32}, {"binary_cross_entropy", Float32},
      {"binary_cross_entropy_with_logits", Float32}, {"cosine_similarity", Float32}, {"cdist", Float32},
      {"linalg_vector_norm", Float32},
  };
  return list;
}

}  // namespace tessera::autocast

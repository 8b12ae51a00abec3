#pragma once
// torch.func from C++: vmap, grad and jvp as function transforms, over the operators of the vmap
// plugin (vmap::*) and the autograd plugin (autograd::*), as tessera.func does in Python. The
// plugins load on first use. A vmapped function runs once, on batched tensors: each operator's
// batching rule computes the whole batch.
//
//   auto per_sample = tessera::func::vmap([&](const std::vector<Tensor>& in) {
//     return std::vector<Tensor>{in[0].matmul(w).relu()};
//   });
//   Tensor y = per_sample({x})[0];  // x: [batch, features]
#include <tessera/tensor.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tessera::func {

using Function = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

struct VmapOptions {
  // One per input: the dim mapped over, or nullopt for an input shared by the whole batch.
  // Empty: every input mapped over dim 0.
  std::vector<std::optional<int64_t>> in_dims;
  // One per output: where its batch dim goes. Empty: dim 0 for every output.
  std::vector<int64_t> out_dims;
  // Random operators inside: "error" (raise), "different" (a draw per sample) or "same".
  std::string randomness = "error";
};

// f mapped over a batch dim of its inputs; nests (vmap of vmap) and composes with grad/jvp.
Function vmap(Function f, VmapOptions options = {});
// One tensor in, one out.
std::function<Tensor(const Tensor&)> vmap(std::function<Tensor(const Tensor&)> f, int64_t in_dim = 0,
                                          int64_t out_dim = 0);

// grad(f)(inputs): the gradients of f's scalar (0-dim) output with respect to inputs[i] for i in
// argnums (zeros for an input the output does not depend on). Differentiable when an input
// requires grad, so grad(grad(f)) and vmap(grad(f)) work.
Function grad(std::function<Tensor(const std::vector<Tensor>&)> f, std::vector<int64_t> argnums = {0});

// (f(primals), J(primals) tangents) by forward mode: the primals become dual tensors and each
// operator computes its output's tangent with its jvp formula.
std::pair<std::vector<Tensor>, std::vector<Tensor>> jvp(const Function& f, const std::vector<Tensor>& primals,
                                                        const std::vector<Tensor>& tangents);

}  // namespace tessera::func

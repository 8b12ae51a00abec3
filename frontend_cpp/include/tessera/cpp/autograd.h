#pragma once
// Autograd from C++: grad mode guards, tessera::autograd::grad / backward, tensor hooks. It all
// goes through the operators the autograd plugin defines (autograd::*), as the Python frontend's
// does; the plugin (libtessera_autograd.so) loads on first use.
#include <tessera/tensor.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tessera::autograd {

// Loads libtessera_autograd.so from the plugin search path (once); raises RuntimeError naming the
// search path when it is not there.
void ensure_loaded();
// Whether the plugin is loaded; until it is, no tensor requires grad and nothing records.
bool is_loaded();

bool is_grad_enabled();
// Sets grad mode for this thread; returns the previous mode.
bool set_grad_enabled(bool enabled);

// Operators run inside record no history (PyTorch's torch::NoGradGuard); restores the mode on exit.
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

// Turns recording back on inside a NoGradGuard.
class EnableGradGuard {
 public:
  EnableGradGuard();
  ~EnableGradGuard();
  EnableGradGuard(const EnableGradGuard&) = delete;
  EnableGradGuard& operator=(const EnableGradGuard&) = delete;

 private:
  bool previous_;
};

// Accumulates d(tensors)/d(leaf) into each leaf's grad(). grad_tensors: one per tensor, or empty
// (each tensor must then have one element); with `inputs`, only those leaves accumulate.
void backward(const std::vector<Tensor>& tensors, const std::vector<Tensor>& grad_tensors = {},
              bool retain_graph = false, bool create_graph = false, const std::vector<Tensor>& inputs = {});

// The gradients of `outputs` w.r.t. `inputs` (nothing is accumulated into grad()). An input the
// outputs do not depend on raises, or gives an undefined tensor with allow_unused.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, bool retain_graph = false,
                         bool create_graph = false, bool allow_unused = false);

// A hook sees the gradient flowing into `t`; returning a defined tensor replaces it.
using Hook = std::function<Tensor(const Tensor& grad)>;
// Returns the hook's id, for remove_hook.
int64_t register_hook(const Tensor& t, Hook hook);
void remove_hook(const Tensor& t, int64_t id);

}  // namespace tessera::autograd

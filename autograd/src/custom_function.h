#pragma once
// The backward node of a frontend's custom function (tessera.autograd.Function): its backward
// is a callback the frontend registered with the host.
#include "node.h"

#include <string>

namespace tessera::autograd {

struct CustomFunctionNode final : Node {
  CustomFunctionNode(int64_t callback, std::string name) : callback_(callback), name_(std::move(name)) {}
  ~CustomFunctionNode() override { sdk::host().release_callback(callback_); }
  // Calls the callback with the outputs' gradients (one Tensor?[] argument); it returns one
  // value per input: a tensor or None.
  GradList apply(GradList&& grads) override;
  const char* name() const override { return name_.c_str(); }
  const char* op_name() const override { return name_.c_str(); }

 private:
  int64_t callback_;
  std::string name_;
};

}  // namespace tessera::autograd

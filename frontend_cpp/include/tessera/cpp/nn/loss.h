#pragma once
// Loss modules over nn::functional's losses, with torch's defaults (reduction mean, ignore_index
// -100). Each is called with (input, target); a class weight (and BCEWithLogitsLoss's pos_weight)
// is a buffer, so it follows to(dtype | device) and is in state_dict.
//
//   nn::CrossEntropyLoss criterion({.label_smoothing = 0.1});
//   Tensor loss = criterion(model(x), labels);
#include <tessera/cpp/nn/functional.h>
#include <tessera/cpp/nn/module.h>

namespace tessera::nn {

using Reduction = functional::Reduction;

// The two-argument call every loss has; the one-argument forward raises NotImplementedError.
class Loss : public Module {
 public:
  virtual Tensor forward(const Tensor& input, const Tensor& target) = 0;
  Tensor operator()(const Tensor& input, const Tensor& target) { return forward(input, target); }
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

 protected:
  Loss(std::string name, Reduction reduction) : Module(std::move(name)), reduction_(reduction) {}
  Reduction reduction_;
};

struct MSELossOptions {
  Reduction reduction = Reduction::Mean;
};

// (input - target)^2, input and target of the same shape.
class MSELoss : public Loss {
 public:
  explicit MSELoss(const MSELossOptions& options = {}) : Loss("MSELoss", options.reduction) {}
  using Loss::forward;
  Tensor forward(const Tensor& input, const Tensor& target) override;
};

struct L1LossOptions {
  Reduction reduction = Reduction::Mean;
};

// |input - target|, input and target of the same shape.
class L1Loss : public Loss {
 public:
  explicit L1Loss(const L1LossOptions& options = {}) : Loss("L1Loss", options.reduction) {}
  using Loss::forward;
  Tensor forward(const Tensor& input, const Tensor& target) override;
};

struct NLLLossOptions {
  Tensor weight;  // (C,) per-class weights, or undefined
  int64_t ignore_index = -100;
  Reduction reduction = Reduction::Mean;
};

// -w[t] * input[t] for log-probabilities input (N, C[, d...]) or (C,) and class indices target
// (N[, d...]) or (); 'mean' divides by the sum of the targets' weights.
class NLLLoss : public Loss {
 public:
  explicit NLLLoss(const NLLLossOptions& options = {});
  using Loss::forward;
  Tensor forward(const Tensor& input, const Tensor& target) override;

 private:
  int64_t ignore_index_;
};

struct CrossEntropyLossOptions {
  Tensor weight;  // (C,) per-class weights, or undefined
  int64_t ignore_index = -100;
  Reduction reduction = Reduction::Mean;
  double label_smoothing = 0.0;
};

// log_softmax over the class dim then NLLLoss; or, with floating targets of the input's shape,
// class probabilities: -sum_c w_c p_c log q_c.
class CrossEntropyLoss : public Loss {
 public:
  explicit CrossEntropyLoss(const CrossEntropyLossOptions& options = {});
  using Loss::forward;
  Tensor forward(const Tensor& input, const Tensor& target) override;
  std::string extra_repr() const override;

 private:
  int64_t ignore_index_;
  double label_smoothing_;
};

struct BCEWithLogitsLossOptions {
  Tensor weight;      // broadcast over the input, or undefined
  Reduction reduction = Reduction::Mean;
  Tensor pos_weight;  // weight of the positive examples, broadcast over the last dim, or undefined
};

// -w [pw y log sigmoid(x) + (1 - y) log(1 - sigmoid(x))], computed stably from the logits x.
class BCEWithLogitsLoss : public Loss {
 public:
  explicit BCEWithLogitsLoss(const BCEWithLogitsLossOptions& options = {});
  using Loss::forward;
  Tensor forward(const Tensor& input, const Tensor& target) override;
};

}  // namespace tessera::nn

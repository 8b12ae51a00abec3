#pragma once
// optim::Optimizer: the parameters an optimizer updates and zero_grad; subclasses implement step()
// with torch.optim's update rules. The updates run without recording.
#include <tessera/tensor.h>

#include <vector>

namespace tessera::optim {

class Optimizer {
 public:
  // Raises ValueError for an empty list, an undefined tensor or a parameter that is not a leaf.
  explicit Optimizer(std::vector<Tensor> params);
  virtual ~Optimizer() = default;
  virtual void step() = 0;
  // Clears (set_to_none, torch's default) or zeroes every parameter's gradient.
  void zero_grad(bool set_to_none = true);
  const std::vector<Tensor>& parameters() const { return params_; }
  // The number of step() calls so far.
  int64_t steps() const { return steps_; }
  // The learning rate, which the lr schedulers read and set (every optimizer here has one; a
  // subclass without one keeps the base's, which raise NotImplementedError).
  virtual double lr() const;
  virtual void set_lr(double lr);

 protected:
  std::vector<Tensor> params_;
  int64_t steps_ = 0;
};

}  // namespace tessera::optim

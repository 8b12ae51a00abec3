#pragma once
// optim::SGD, torch's rule: g = grad (+ weight_decay * p); with momentum: b = momentum * b +
// (1 - dampening) * g (b = g at the first step), g = g + momentum * b (nesterov) or b;
// p -= lr * g (maximize: g = -grad).
#include <tessera/cpp/optim/optimizer.h>

namespace tessera::optim {

struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
  bool maximize = false;
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, const SGDOptions& options = {});
  void step() override;
  SGDOptions& options() { return options_; }  // e.g. a learning-rate schedule changes lr
  double lr() const override { return options_.lr; }
  void set_lr(double lr) override { options_.lr = lr; }

 private:
  SGDOptions options_;
  std::vector<Tensor> momentum_buffers_;  // one per parameter, undefined until its first step
};

}  // namespace tessera::optim

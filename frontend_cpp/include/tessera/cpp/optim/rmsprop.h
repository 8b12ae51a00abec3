#pragma once
// optim::RMSprop, torch's rule: g = grad (+ weight_decay * p; maximize: -grad); v = alpha v +
// (1 - alpha) g^2; avg = sqrt(v - ga^2) (centered: ga = alpha ga + (1 - alpha) g) or sqrt(v), plus
// eps; p -= lr * g / avg, or with momentum b = momentum b + g / avg, p -= lr * b.
#include <tessera/cpp/optim/optimizer.h>

namespace tessera::optim {

struct RMSpropOptions {
  double lr = 1e-2;
  double alpha = 0.99;
  double eps = 1e-8;
  double weight_decay = 0;
  double momentum = 0;
  bool centered = false;
  bool maximize = false;
};

class RMSprop : public Optimizer {
 public:
  RMSprop(std::vector<Tensor> params, const RMSpropOptions& options = {});
  void step() override;
  RMSpropOptions& options() { return options_; }
  double lr() const override { return options_.lr; }
  void set_lr(double lr) override { options_.lr = lr; }

 private:
  RMSpropOptions options_;
  struct State {
    int64_t step = 0;
    Tensor square_avg, momentum_buffer, grad_avg;
  };
  std::vector<State> state_;
};

}  // namespace tessera::optim

#pragma once
// optim::Adagrad, torch's rule: g = grad (+ weight_decay * p; maximize: -grad); sum += g^2;
// p -= lr / (1 + (t - 1) lr_decay) * g / (sqrt(sum) + eps), t the parameter's step count; sum
// starts at initial_accumulator_value.
#include <tessera/cpp/optim/optimizer.h>

namespace tessera::optim {

struct AdagradOptions {
  double lr = 1e-2;
  double lr_decay = 0;
  double weight_decay = 0;
  double initial_accumulator_value = 0;
  double eps = 1e-10;
  bool maximize = false;
};

class Adagrad : public Optimizer {
 public:
  Adagrad(std::vector<Tensor> params, const AdagradOptions& options = {});
  void step() override;
  AdagradOptions& options() { return options_; }
  double lr() const override { return options_.lr; }
  void set_lr(double lr) override { options_.lr = lr; }

 private:
  AdagradOptions options_;
  std::vector<int64_t> step_;  // per parameter
  std::vector<Tensor> sum_;    // per parameter, created with the optimizer (as torch does)
};

}  // namespace tessera::optim

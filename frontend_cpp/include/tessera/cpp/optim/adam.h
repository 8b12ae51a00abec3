#pragma once
// optim::Adam and optim::AdamW, torch's rules: m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
// p -= lr / (1 - b1^t) * m / (sqrt(v^) / sqrt(1 - b2^t) + eps), v^ = v or its running max (amsgrad).
// Adam's weight_decay adds wd * p to g (L2); AdamW's scales p by 1 - lr * wd first (decoupled).
#include <tessera/cpp/optim/optimizer.h>

#include <utility>

namespace tessera::optim {

struct AdamOptions {
  double lr = 1e-3;
  std::pair<double, double> betas{0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0;
  bool amsgrad = false;
  bool maximize = false;
};

class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, const AdamOptions& options = {});
  void step() override;
  AdamOptions& options() { return options_; }
  double lr() const override { return options_.lr; }
  void set_lr(double lr) override { options_.lr = lr; }

 protected:
  Adam(std::vector<Tensor> params, const AdamOptions& options, bool decoupled_weight_decay);

 private:
  AdamOptions options_;
  bool decoupled_;
  struct State {
    int64_t step = 0;
    Tensor exp_avg, exp_avg_sq, max_exp_avg_sq;
  };
  std::vector<State> state_;
};

struct AdamWOptions {
  double lr = 1e-3;
  std::pair<double, double> betas{0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 1e-2;
  bool amsgrad = false;
  bool maximize = false;
};

class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, const AdamWOptions& options = {});
};

}  // namespace tessera::optim

#pragma once
// Learning-rate schedulers (torch.optim.lr_scheduler's rules, in torch's recursive form, so that
// each reads and scales the optimizer's current lr). Construction records the optimizer's lr as
// base_lr and performs step 0; call step() once per epoch, after optimizer.step(). The scheduler
// holds the optimizer by reference: it must outlive the scheduler.
//
//   optim::SGD opt(model.parameters(), {.lr = 0.1});
//   optim::StepLR sched(opt, /*step_size=*/30, /*gamma=*/0.1);
//   for (int epoch = 0; epoch < 90; ++epoch) { train(opt); sched.step(); }
//
// ReduceLROnPlateau is driven by a metric instead: sched.step(validation_loss).
#include <tessera/cpp/optim/optimizer.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace tessera::optim {

class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;
  // Advances one epoch and sets the optimizer's lr.
  void step();
  // The lr of the last step(), one per parameter group (the optimizers here have one group).
  std::vector<double> get_last_lr() const { return {last_lr_}; }
  int64_t last_epoch() const { return last_epoch_; }
  std::vector<double> base_lrs() const { return {base_lr_}; }

 protected:
  explicit LRScheduler(Optimizer& optimizer);
  // The lr for epoch last_epoch_ from the current one (torch's get_lr). Each subclass's
  // constructor ends with initial_step(), once its own members are set.
  virtual double get_lr() = 0;
  void initial_step();
  double current_lr() const { return optimizer_.lr(); }

  Optimizer& optimizer_;
  double base_lr_;
  int64_t last_epoch_ = -1;
  int64_t step_count_ = 0;
  double last_lr_ = 0;
};

// lr = base_lr * lr_lambda(epoch).
class LambdaLR : public LRScheduler {
 public:
  LambdaLR(Optimizer& optimizer, std::function<double(int64_t)> lr_lambda);

 protected:
  double get_lr() override;

 private:
  std::function<double(int64_t)> lr_lambda_;
};

// Multiplies the lr by gamma every step_size epochs: lr = base_lr * gamma^(epoch / step_size).
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);

 protected:
  double get_lr() override;

 private:
  int64_t step_size_;
  double gamma_;
};

// Multiplies the lr by gamma at each milestone (a milestone listed twice multiplies twice).
class MultiStepLR : public LRScheduler {
 public:
  MultiStepLR(Optimizer& optimizer, const std::vector<int64_t>& milestones, double gamma = 0.1);

 protected:
  double get_lr() override;

 private:
  std::map<int64_t, int64_t> milestones_;  // epoch -> how many times it is listed
  double gamma_;
};

// lr = base_lr * gamma^epoch.
class ExponentialLR : public LRScheduler {
 public:
  ExponentialLR(Optimizer& optimizer, double gamma);

 protected:
  double get_lr() override;

 private:
  double gamma_;
};

// lr = eta_min + (base_lr - eta_min) (1 + cos(pi epoch / T_max)) / 2, computed recursively from the
// current lr as torch does (past T_max it rises again: a cosine of period 2 T_max).
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0.0);

 protected:
  double get_lr() override;

 private:
  int64_t T_max_;
  double eta_min_;
};

// The lr factor goes linearly from start_factor to end_factor over total_iters epochs, then stays:
// lr = base_lr * (start + (end - start) * min(epoch, total_iters) / total_iters).
class LinearLR : public LRScheduler {
 public:
  LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3, double end_factor = 1.0, int64_t total_iters = 5);

 protected:
  double get_lr() override;

 private:
  double start_factor_, end_factor_;
  int64_t total_iters_;
};

struct ReduceLROnPlateauOptions {
  std::string mode = "min";  // "min": lower metrics are better; "max": higher
  double factor = 0.1;       // new_lr = lr * factor, < 1
  int64_t patience = 10;     // epochs without improvement tolerated
  double threshold = 1e-4;   // how much better counts as an improvement
  std::string threshold_mode = "rel";  // "rel": best * (1 -/+ threshold); "abs": best -/+ threshold
  int64_t cooldown = 0;      // epochs to wait after a reduction before counting again
  double min_lr = 0;
  double eps = 1e-8;         // reductions smaller than eps are skipped
};

// Multiplies the lr by factor when the metric given to step() has not improved for more than
// patience epochs (then waits cooldown epochs); never below min_lr.
class ReduceLROnPlateau {
 public:
  explicit ReduceLROnPlateau(Optimizer& optimizer, const ReduceLROnPlateauOptions& options = {});
  ReduceLROnPlateau(const ReduceLROnPlateau&) = delete;
  ReduceLROnPlateau& operator=(const ReduceLROnPlateau&) = delete;
  void step(double metric);
  std::vector<double> get_last_lr() const { return {last_lr_}; }
  int64_t last_epoch() const { return last_epoch_; }
  int64_t num_bad_epochs() const { return num_bad_epochs_; }
  double best() const { return best_; }

 private:
  bool is_better(double a, double best) const;
  Optimizer& optimizer_;
  ReduceLROnPlateauOptions options_;
  int64_t cooldown_counter_ = 0, num_bad_epochs_ = 0, last_epoch_ = 0;
  double best_, last_lr_;
};

}  // namespace tessera::optim

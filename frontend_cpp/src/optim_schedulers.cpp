// The learning-rate schedulers: torch.optim.lr_scheduler's rules, as the Python frontend's.
#include <tessera/cpp/optim/schedulers.h>
#include <tessera/error.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

namespace tessera::optim {

LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(optimizer), base_lr_(optimizer.lr()) {}

void LRScheduler::initial_step() {
  step_count_ = 0;
  step();
}

void LRScheduler::step() {
  ++step_count_;
  ++last_epoch_;
  double lr = get_lr();
  optimizer_.set_lr(lr);
  last_lr_ = optimizer_.lr();
}

LambdaLR::LambdaLR(Optimizer& optimizer, std::function<double(int64_t)> lr_lambda)
    : LRScheduler(optimizer), lr_lambda_(std::move(lr_lambda)) {
  if (!lr_lambda_) raise<ValueError>("LambdaLR: lr_lambda is an empty function");
  initial_step();
}
double LambdaLR::get_lr() { return base_lr_ * lr_lambda_(last_epoch_); }

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  if (step_size <= 0) raise<ValueError>("StepLR: step_size must be positive, got {}", step_size);
  initial_step();
}
double StepLR::get_lr() {
  if (last_epoch_ == 0 || last_epoch_ % step_size_ != 0) return current_lr();
  return current_lr() * gamma_;
}

MultiStepLR::MultiStepLR(Optimizer& optimizer, const std::vector<int64_t>& milestones, double gamma)
    : LRScheduler(optimizer), gamma_(gamma) {
  for (int64_t m : milestones) ++milestones_[m];
  initial_step();
}
double MultiStepLR::get_lr() {
  auto it = milestones_.find(last_epoch_);
  if (it == milestones_.end()) return current_lr();
  return current_lr() * std::pow(gamma_, double(it->second));
}

ExponentialLR::ExponentialLR(Optimizer& optimizer, double gamma) : LRScheduler(optimizer), gamma_(gamma) {
  initial_step();
}
double ExponentialLR::get_lr() { return last_epoch_ == 0 ? current_lr() : current_lr() * gamma_; }

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min)
    : LRScheduler(optimizer), T_max_(T_max), eta_min_(eta_min) {
  if (T_max <= 0) raise<ValueError>("CosineAnnealingLR: T_max must be positive, got {}", T_max);
  initial_step();
}
double CosineAnnealingLR::get_lr() {
  constexpr double pi = std::numbers::pi;
  double lr = current_lr(), t = double(last_epoch_), T = double(T_max_);
  if (last_epoch_ == 0) return lr;
  if ((last_epoch_ - 1 - T_max_) % (2 * T_max_) == 0)
    return lr + (base_lr_ - eta_min_) * (1 - std::cos(pi / T)) / 2;
  return (1 + std::cos(pi * t / T)) / (1 + std::cos(pi * (t - 1) / T)) * (lr - eta_min_) + eta_min_;
}

LinearLR::LinearLR(Optimizer& optimizer, double start_factor, double end_factor, int64_t total_iters)
    : LRScheduler(optimizer), start_factor_(start_factor), end_factor_(end_factor), total_iters_(total_iters) {
  if (start_factor > 1.0 || start_factor <= 0)
    raise<ValueError>("LinearLR: starting multiplicative factor expected to be greater than 0 and less or equal to 1, "
                      "got {}", start_factor);
  if (end_factor > 1.0 || end_factor < 0)
    raise<ValueError>("LinearLR: ending multiplicative factor expected to be between 0 and 1, got {}", end_factor);
  if (total_iters <= 0) raise<ValueError>("LinearLR: total_iters must be positive, got {}", total_iters);
  initial_step();
}
double LinearLR::get_lr() {
  double lr = current_lr();
  if (last_epoch_ == 0) return lr * start_factor_;
  if (last_epoch_ > total_iters_) return lr;
  double span = end_factor_ - start_factor_;
  return lr * (1.0 + span / (double(total_iters_) * start_factor_ + double(last_epoch_ - 1) * span));
}

ReduceLROnPlateau::ReduceLROnPlateau(Optimizer& optimizer, const ReduceLROnPlateauOptions& options)
    : optimizer_(optimizer), options_(options) {
  if (options.factor >= 1.0) raise<ValueError>("ReduceLROnPlateau: factor should be < 1.0, got {}", options.factor);
  if (options.mode != "min" && options.mode != "max")
    raise<ValueError>("ReduceLROnPlateau: mode must be 'min' or 'max', got '{}'", options.mode);
  if (options.threshold_mode != "rel" && options.threshold_mode != "abs")
    raise<ValueError>("ReduceLROnPlateau: threshold_mode must be 'rel' or 'abs', got '{}'", options.threshold_mode);
  if (options.patience < 0) raise<ValueError>("ReduceLROnPlateau: patience must be >= 0, got {}", options.patience);
  best_ = options.mode == "min" ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
  last_lr_ = optimizer.lr();
}

bool ReduceLROnPlateau::is_better(double a, double best) const {
  const auto& o = options_;
  if (o.mode == "min") return o.threshold_mode == "rel" ? a < best * (1.0 - o.threshold) : a < best - o.threshold;
  return o.threshold_mode == "rel" ? a > best * (o.threshold + 1.0) : a > best + o.threshold;
}

void ReduceLROnPlateau::step(double metric) {
  ++last_epoch_;
  if (is_better(metric, best_)) {
    best_ = metric;
    num_bad_epochs_ = 0;
  } else {
    ++num_bad_epochs_;
  }
  if (cooldown_counter_ > 0) {
    --cooldown_counter_;
    num_bad_epochs_ = 0;
  }
  if (num_bad_epochs_ > options_.patience) {
    double lr = optimizer_.lr(), new_lr = std::max(lr * options_.factor, options_.min_lr);
    if (lr - new_lr > options_.eps) optimizer_.set_lr(new_lr);
    cooldown_counter_ = options_.cooldown;
    num_bad_epochs_ = 0;
  }
  last_lr_ = optimizer_.lr();
}

}  // namespace tessera::optim

// The C++ API's optimizers and lr schedulers beyond SGD / Adam: RMSprop and Adagrad trajectories
// against their update rules written out here, each scheduler's lr sequence against the closed
// form torch documents, ReduceLROnPlateau against a sequence worked out by hand.
#include "test_util.h"

#include <tessera/tessera.h>

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

namespace ts = tessera;
using tessera::Tensor;
using tessera::testing::expect_error;

namespace {

// float64 values and a float64 tolerance: the trajectories are compared to 1e-12.
Tensor from(const std::vector<double>& v, std::vector<int64_t> shape) {
  return tessera::testing::from(v, std::move(shape), ts::kFloat64);
}
void expect_close(const Tensor& t, const std::vector<double>& expected) {
  tessera::testing::expect_close(t, expected, 1e-12);
}

// The gradient of step t (1-based) for element k: varied in sign and size.
double grad_at(int t, size_t k) { return std::sin(1.3 * t + 0.7 * double(k)) * (1 + 0.5 * double(k)); }

}  // namespace

// ---------------------------------------------------------------------------- RMSprop
TEST(CppApiOptimMore, RMSpropMatchesRule) {
  std::vector<ts::optim::RMSpropOptions> configs = {
      {.lr = 0.01},
      {.lr = 0.05, .alpha = 0.9, .eps = 1e-6, .weight_decay = 0.1, .momentum = 0.8, .centered = true},
      {.lr = 0.02, .momentum = 0.5, .maximize = true},
  };
  for (const auto& o : configs) {
    std::vector<double> p0 = {0.5, -1.5, 3.0};
    Tensor p = from(p0, {3}).requires_grad_();
    ts::optim::RMSprop opt({p}, o);
    std::vector<double> ref = p0, v(3, 0.0), ga(3, 0.0), buf(3, 0.0);
    for (int t = 1; t <= 4; ++t) {
      std::vector<double> gv = {grad_at(t, 0), grad_at(t, 1), grad_at(t, 2)};
      p.set_grad(from(gv, {3}));
      opt.step();
      for (size_t k = 0; k < 3; ++k) {
        double g = o.maximize ? -gv[k] : gv[k];
        g += o.weight_decay * ref[k];
        v[k] = o.alpha * v[k] + (1 - o.alpha) * g * g;
        double avg;
        if (o.centered) {
          ga[k] = o.alpha * ga[k] + (1 - o.alpha) * g;
          avg = std::sqrt(v[k] - ga[k] * ga[k]) + o.eps;
        } else {
          avg = std::sqrt(v[k]) + o.eps;
        }
        if (o.momentum > 0) {
          buf[k] = o.momentum * buf[k] + g / avg;
          ref[k] -= o.lr * buf[k];
        } else {
          ref[k] -= o.lr * g / avg;
        }
      }
      expect_close(p, ref);
    }
    EXPECT_EQ(opt.steps(), 4);
  }
  // a parameter without a gradient is left alone
  Tensor q = from({1, 2}, {2}).requires_grad_();
  ts::optim::RMSprop idle({q});
  idle.step();
  expect_close(q, {1, 2});
  Tensor r = from({1}, {1}).requires_grad_();
  expect_error<ts::ValueError>([&] { ts::optim::RMSprop({r}, {.lr = -1}); }, {"RMSprop", "learning rate", "-1"});
  expect_error<ts::ValueError>([&] { ts::optim::RMSprop({r}, {.alpha = -0.5}); }, {"RMSprop", "alpha", "-0.5"});
  expect_error<ts::ValueError>([&] { ts::optim::RMSprop({r}, {.momentum = -1}); }, {"RMSprop", "momentum"});
}

// ---------------------------------------------------------------------------- Adagrad
TEST(CppApiOptimMore, AdagradMatchesRule) {
  std::vector<ts::optim::AdagradOptions> configs = {
      {},
      {.lr = 0.1, .lr_decay = 0.05, .weight_decay = 0.2, .initial_accumulator_value = 0.5, .eps = 1e-8},
      {.lr = 0.03, .maximize = true},
  };
  for (const auto& o : configs) {
    std::vector<double> p0 = {2.0, -0.25, 1.0, 0.0};
    Tensor p = from(p0, {2, 2}).requires_grad_();
    ts::optim::Adagrad opt({p}, o);
    std::vector<double> ref = p0, sum(4, o.initial_accumulator_value);
    for (int t = 1; t <= 4; ++t) {
      std::vector<double> gv;
      for (size_t k = 0; k < 4; ++k) gv.push_back(grad_at(t, k));
      p.set_grad(from(gv, {2, 2}));
      opt.step();
      double clr = o.lr / (1 + (t - 1) * o.lr_decay);
      for (size_t k = 0; k < 4; ++k) {
        double g = (o.maximize ? -gv[k] : gv[k]) + o.weight_decay * ref[k];
        sum[k] += g * g;
        ref[k] -= clr * g / (std::sqrt(sum[k]) + o.eps);
      }
      expect_close(p, ref);
    }
  }
  Tensor r = from({1}, {1}).requires_grad_();
  expect_error<ts::ValueError>([&] { ts::optim::Adagrad({r}, {.lr_decay = -1}); }, {"Adagrad", "lr_decay", "-1"});
  expect_error<ts::ValueError>([&] { ts::optim::Adagrad({r}, {.initial_accumulator_value = -0.1}); },
                               {"Adagrad", "initial_accumulator_value", "-0.1"});
}

// ---------------------------------------------------------------------------- schedulers
namespace {

// Runs `epochs` steps of a scheduler built on an SGD optimizer (lr = base) and compares every
// epoch's lr (get_last_lr and the optimizer's) with closed_form(epoch).
template <class Make, class Closed>
void check_schedule(double base, int epochs, Make make, Closed closed_form, const char* what) {
  Tensor p = from({1.0}, {1}).requires_grad_();
  ts::optim::SGD opt({p}, {.lr = base});
  auto sched = make(opt);
  for (int e = 0; e <= epochs; ++e) {
    if (e > 0) {
      p.set_grad(from({1.0}, {1}));
      double before = p.to_double_vector()[0], lr = opt.lr();
      opt.step();  // the optimizer steps with the scheduled lr
      EXPECT_NEAR(p.to_double_vector()[0], before - lr, 1e-12) << what;
      sched->step();
    }
    double expected = closed_form(e);
    ASSERT_EQ(sched->get_last_lr().size(), 1u);
    EXPECT_NEAR(sched->get_last_lr()[0], expected, 1e-12 * std::max(1.0, expected)) << what << " at epoch " << e;
    EXPECT_NEAR(opt.lr(), expected, 1e-12 * std::max(1.0, expected)) << what << " at epoch " << e;
    EXPECT_EQ(sched->last_epoch(), e) << what;
  }
}

}  // namespace

TEST(CppApiOptimMore, SchedulersMatchClosedForms) {
  using namespace ts::optim;
  double base = 0.5;
  check_schedule(base, 12, [](Optimizer& o) { return std::make_unique<StepLR>(o, 3, 0.5); },
                 [&](int e) { return base * std::pow(0.5, e / 3); }, "StepLR");
  check_schedule(base, 12, [](Optimizer& o) { return std::make_unique<MultiStepLR>(o, std::vector<int64_t>{5, 2, 5}, 0.1); },
                 [&](int e) { return base * std::pow(0.1, (e >= 2) + 2 * (e >= 5)); }, "MultiStepLR");
  check_schedule(base, 12, [](Optimizer& o) { return std::make_unique<ExponentialLR>(o, 0.9); },
                 [&](int e) { return base * std::pow(0.9, e); }, "ExponentialLR");
  // the recursive form follows the closed form through T_max and beyond (period 2 T_max)
  double eta_min = 0.01;
  check_schedule(base, 16, [&](Optimizer& o) { return std::make_unique<CosineAnnealingLR>(o, 5, eta_min); },
                 [&](int e) { return eta_min + (base - eta_min) * (1 + std::cos(std::numbers::pi * e / 5)) / 2; },
                 "CosineAnnealingLR");
  check_schedule(base, 8, [](Optimizer& o) { return std::make_unique<LambdaLR>(o, [](int64_t e) { return 1.0 / (1.0 + double(e)); }); },
                 [&](int e) { return base / (1.0 + e); }, "LambdaLR");
  check_schedule(base, 9, [](Optimizer& o) { return std::make_unique<LinearLR>(o, 0.25, 1.0, 4); },
                 [&](int e) { return base * (0.25 + 0.75 * std::min(e, 4) / 4.0); }, "LinearLR");
  check_schedule(base, 9, [](Optimizer& o) { return std::make_unique<LinearLR>(o); },  // torch's defaults
                 [&](int e) { return base * (1.0 / 3 + (1 - 1.0 / 3) * std::min(e, 5) / 5.0); }, "LinearLR defaults");
}

TEST(CppApiOptimMore, SchedulersDriveAdamAndRejectBadArguments) {
  using namespace ts::optim;
  Tensor p = from({1.0, 2.0}, {2}).requires_grad_();
  Adam adam({p}, {.lr = 0.1});
  ExponentialLR sched(adam, 0.5);
  sched.step();
  sched.step();
  EXPECT_NEAR(adam.options().lr, 0.025, 1e-15);
  EXPECT_EQ(sched.base_lrs(), std::vector<double>{0.1});
  RMSprop rms({p}, {.lr = 0.2});
  StepLR step(rms, 1, 0.1);
  step.step();
  EXPECT_NEAR(rms.options().lr, 0.02, 1e-15);

  SGD sgd({p}, {.lr = 0.1});
  expect_error<ts::ValueError>([&] { StepLR(sgd, 0); }, {"StepLR", "step_size", "0"});
  expect_error<ts::ValueError>([&] { LinearLR(sgd, 0.0); }, {"LinearLR", "starting", "0"});
  expect_error<ts::ValueError>([&] { LinearLR(sgd, 0.5, 1.5); }, {"LinearLR", "ending", "1.5"});
  expect_error<ts::ValueError>([&] { CosineAnnealingLR(sgd, 0); }, {"CosineAnnealingLR", "T_max", "0"});
  expect_error<ts::ValueError>([&] { ReduceLROnPlateau(sgd, {.factor = 1.0}); }, {"ReduceLROnPlateau", "factor", "1"});
  expect_error<ts::ValueError>([&] { ReduceLROnPlateau(sgd, {.mode = "up"}); }, {"ReduceLROnPlateau", "mode", "up"});
  EXPECT_NEAR(sgd.lr(), 0.1, 1e-15);  // the failed constructions left the lr alone

  // an optimizer without a learning rate cannot be scheduled
  struct NoLr : Optimizer {
    using Optimizer::Optimizer;
    void step() override {}
  } nolr({p});
  expect_error<ts::NotImplementedError>([&] { ExponentialLR(nolr, 0.5); }, {"learning rate"});
}

// patience 2, factor 0.5, cooldown 1, min_lr 0.2 (lr 1): a reduction after more than 2 epochs
// without improvement, none during the epoch of cooldown, the floor at 0.2.
TEST(CppApiOptimMore, ReduceLROnPlateauMatchesHandTrace) {
  using namespace ts::optim;
  Tensor p = from({1.0}, {1}).requires_grad_();
  SGD sgd({p}, {.lr = 1.0});
  ReduceLROnPlateau sched(sgd, {.factor = 0.5, .patience = 2, .cooldown = 1, .min_lr = 0.2});
  std::vector<double> metrics = {10, 9, 9, 9, 9, 9, 9, 9, 9, 8, 8, 8, 8, 8, 8, 8, 8};
  std::vector<double> expected = {1, 1, 1, 1, 0.5, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25, 0.25, 0.2, 0.2, 0.2, 0.2, 0.2};
  for (size_t e = 0; e < metrics.size(); ++e) {
    sched.step(metrics[e]);
    EXPECT_NEAR(sched.get_last_lr()[0], expected[e], 1e-15) << "epoch " << e + 1;
    EXPECT_NEAR(sgd.lr(), expected[e], 1e-15);
  }
  EXPECT_EQ(sched.best(), 8);
  EXPECT_EQ(sched.last_epoch(), int64_t(metrics.size()));

  // mode max, absolute threshold: 0.5 -> 0.55 is no improvement (needs > best + 0.1)
  SGD sgd2({p}, {.lr = 1.0});
  ReduceLROnPlateau up(sgd2, {.mode = "max", .factor = 0.1, .patience = 0, .threshold = 0.1, .threshold_mode = "abs"});
  up.step(0.5);
  EXPECT_NEAR(sgd2.lr(), 1.0, 1e-15);
  up.step(0.55);
  EXPECT_NEAR(sgd2.lr(), 0.1, 1e-15);
  up.step(0.7);
  EXPECT_NEAR(sgd2.lr(), 0.1, 1e-15);
}

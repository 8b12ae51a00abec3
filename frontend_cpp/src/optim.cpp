// optim::Optimizer, SGD, Adam and AdamW (torch.optim's update rules, as the Python frontend's).
#include <tessera/cpp/autograd.h>
#include <tessera/cpp/optim.h>
#include <tessera/ops.h>

#include <cmath>

namespace tessera::optim {
namespace {

// The gradient to step with (negated for maximize); undefined when the parameter has none.
Tensor grad_of(const Tensor& p, bool maximize) {
  Tensor g = p.grad();
  return g.defined() && maximize ? g.neg() : g;
}

}  // namespace

Optimizer::Optimizer(std::vector<Tensor> params) : params_(std::move(params)) {
  if (params_.empty()) raise<ValueError>("optimizer got an empty parameter list");
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].defined()) raise<ValueError>("optimizer: parameter {} is an undefined tensor", i);
    if (!params_[i].is_leaf()) raise<ValueError>("optimizer: can't optimize a non-leaf Tensor (parameter {})", i);
  }
}

void Optimizer::zero_grad(bool set_to_none) {
  for (const Tensor& p : params_) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (set_to_none) p.set_grad(Tensor());
    else g.fill_(0);
  }
}

double Optimizer::lr() const {
  raise<NotImplementedError>("optimizer: this optimizer has no learning rate (override Optimizer::lr and set_lr)");
}
void Optimizer::set_lr(double) {
  raise<NotImplementedError>("optimizer: this optimizer has no learning rate (override Optimizer::lr and set_lr)");
}

SGD::SGD(std::vector<Tensor> params, const SGDOptions& o)
    : Optimizer(std::move(params)), options_(o), momentum_buffers_(params_.size()) {
  if (o.lr < 0) raise<ValueError>("Invalid learning rate: {}", o.lr);
  if (o.momentum < 0) raise<ValueError>("Invalid momentum value: {}", o.momentum);
  if (o.weight_decay < 0) raise<ValueError>("Invalid weight_decay value: {}", o.weight_decay);
  if (o.nesterov && (o.momentum <= 0 || o.dampening != 0))
    raise<ValueError>("Nesterov momentum requires a momentum and zero dampening");
}

void SGD::step() {
  autograd::NoGradGuard no_grad;
  const SGDOptions& o = options_;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    Tensor g = grad_of(p, o.maximize);
    if (!g.defined()) continue;
    if (o.weight_decay != 0) g = g.add(p, o.weight_decay);
    if (o.momentum != 0) {
      Tensor& buf = momentum_buffers_[i];
      if (!buf.defined()) buf = g.clone();
      else buf.mul_(o.momentum).add_(g, 1 - o.dampening);
      g = o.nesterov ? g.add(buf, o.momentum) : buf;
    }
    p.add_(g, -o.lr);
  }
  ++steps_;
}

Adam::Adam(std::vector<Tensor> params, const AdamOptions& options) : Adam(std::move(params), options, false) {}

Adam::Adam(std::vector<Tensor> params, const AdamOptions& o, bool decoupled)
    : Optimizer(std::move(params)), options_(o), decoupled_(decoupled), state_(params_.size()) {
  if (!(o.lr >= 0)) raise<ValueError>("Invalid learning rate: {}", o.lr);
  if (!(o.eps >= 0)) raise<ValueError>("Invalid epsilon value: {}", o.eps);
  if (!(o.betas.first >= 0 && o.betas.first < 1)) raise<ValueError>("Invalid beta parameter at index 0: {}", o.betas.first);
  if (!(o.betas.second >= 0 && o.betas.second < 1)) raise<ValueError>("Invalid beta parameter at index 1: {}", o.betas.second);
  if (!(o.weight_decay >= 0)) raise<ValueError>("Invalid weight_decay value: {}", o.weight_decay);
}

void Adam::step() {
  autograd::NoGradGuard no_grad;
  const AdamOptions& o = options_;
  auto [beta1, beta2] = o.betas;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    Tensor g = grad_of(p, o.maximize);
    if (!g.defined()) continue;
    State& s = state_[i];
    if (s.step == 0) {
      s.exp_avg = zeros(p.shape(), p.dtype(), p.device());
      s.exp_avg_sq = zeros(p.shape(), p.dtype(), p.device());
      if (o.amsgrad) s.max_exp_avg_sq = zeros(p.shape(), p.dtype(), p.device());
    }
    int64_t t = ++s.step;
    if (o.weight_decay != 0) {
      if (decoupled_) p.mul_(1 - o.lr * o.weight_decay);
      else g = g.add(p, o.weight_decay);
    }
    s.exp_avg.mul_(beta1).add_(g, 1 - beta1);
    s.exp_avg_sq.mul_(beta2).add_(g.mul(g), 1 - beta2);
    double bias_correction1 = 1 - std::pow(beta1, double(t));
    double bias_correction2_sqrt = std::sqrt(1 - std::pow(beta2, double(t)));
    Tensor v = s.exp_avg_sq;
    if (o.amsgrad) {
      s.max_exp_avg_sq.copy_(maximum(s.max_exp_avg_sq, s.exp_avg_sq));
      v = s.max_exp_avg_sq;
    }
    Tensor denom = v.sqrt().div(bias_correction2_sqrt).add_(o.eps);
    p.add_(s.exp_avg.div(denom), -o.lr / bias_correction1);
  }
  ++steps_;
}

AdamW::AdamW(std::vector<Tensor> params, const AdamWOptions& o)
    : Adam(std::move(params), AdamOptions{o.lr, o.betas, o.eps, o.weight_decay, o.amsgrad, o.maximize}, true) {}

}  // namespace tessera::optim

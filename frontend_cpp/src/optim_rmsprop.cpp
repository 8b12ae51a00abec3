// optim::RMSprop (torch.optim.RMSprop's update rule, as the Python frontend's).
#include <tessera/cpp/autograd.h>
#include <tessera/cpp/optim/rmsprop.h>
#include <tessera/ops.h>

namespace tessera::optim {

RMSprop::RMSprop(std::vector<Tensor> params, const RMSpropOptions& o)
    : Optimizer(std::move(params)), options_(o), state_(params_.size()) {
  if (!(o.lr >= 0)) raise<ValueError>("RMSprop: invalid learning rate: {}", o.lr);
  if (!(o.eps >= 0)) raise<ValueError>("RMSprop: invalid epsilon value: {}", o.eps);
  if (!(o.momentum >= 0)) raise<ValueError>("RMSprop: invalid momentum value: {}", o.momentum);
  if (!(o.weight_decay >= 0)) raise<ValueError>("RMSprop: invalid weight_decay value: {}", o.weight_decay);
  if (!(o.alpha >= 0)) raise<ValueError>("RMSprop: invalid alpha value: {}", o.alpha);
}

void RMSprop::step() {
  autograd::NoGradGuard no_grad;
  const RMSpropOptions& o = options_;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (o.maximize) g = g.neg();
    State& s = state_[i];
    if (s.step++ == 0) {
      s.square_avg = zeros(p.shape(), p.dtype(), p.device());
      if (o.momentum > 0) s.momentum_buffer = zeros(p.shape(), p.dtype(), p.device());
      if (o.centered) s.grad_avg = zeros(p.shape(), p.dtype(), p.device());
    }
    if (o.weight_decay != 0) g = g.add(p, o.weight_decay);
    s.square_avg.mul_(o.alpha).add_(g.mul(g), 1 - o.alpha);
    Tensor avg;
    if (o.centered) {
      s.grad_avg.mul_(o.alpha).add_(g, 1 - o.alpha);
      avg = s.square_avg.sub(s.grad_avg.mul(s.grad_avg)).sqrt();
    } else {
      avg = s.square_avg.sqrt();
    }
    avg = avg.add(o.eps);
    if (o.momentum > 0) {
      s.momentum_buffer.mul_(o.momentum).add_(g.div(avg));
      p.add_(s.momentum_buffer, -o.lr);
    } else {
      p.add_(g.div(avg), -o.lr);
    }
  }
  ++steps_;
}

}  // namespace tessera::optim

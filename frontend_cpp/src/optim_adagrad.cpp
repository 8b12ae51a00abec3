// optim::Adagrad (torch.optim.Adagrad's update rule, as the Python frontend's).
#include <tessera/cpp/autograd.h>
#include <tessera/cpp/optim/adagrad.h>
#include <tessera/ops.h>

namespace tessera::optim {

Adagrad::Adagrad(std::vector<Tensor> params, const AdagradOptions& o)
    : Optimizer(std::move(params)), options_(o), step_(params_.size(), 0) {
  if (!(o.lr >= 0)) raise<ValueError>("Adagrad: invalid learning rate: {}", o.lr);
  if (!(o.lr_decay >= 0)) raise<ValueError>("Adagrad: invalid lr_decay value: {}", o.lr_decay);
  if (!(o.weight_decay >= 0)) raise<ValueError>("Adagrad: invalid weight_decay value: {}", o.weight_decay);
  if (!(o.initial_accumulator_value >= 0))
    raise<ValueError>("Adagrad: invalid initial_accumulator_value value: {}", o.initial_accumulator_value);
  if (!(o.eps >= 0)) raise<ValueError>("Adagrad: invalid epsilon value: {}", o.eps);
  for (const Tensor& p : params_) sum_.push_back(full(p.shape(), o.initial_accumulator_value, p.dtype(), p.device()));
}

void Adagrad::step() {
  autograd::NoGradGuard no_grad;
  const AdagradOptions& o = options_;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (o.maximize) g = g.neg();
    int64_t t = ++step_[i];
    if (o.weight_decay != 0) g = g.add(p, o.weight_decay);
    double clr = o.lr / (1 + double(t - 1) * o.lr_decay);
    sum_[i].add_(g.mul(g));
    p.add_(g.div(sum_[i].sqrt().add(o.eps)), -clr);
  }
  ++steps_;
}

}  // namespace tessera::optim

"""Stochastic Weight Averaging and EMA (torch.optim.swa_utils): AveragedModel, the averaging
functions, SWALR and update_bn."""
import copy
import itertools
import math

import tessera
from tessera.nn import _autograd
from tessera.nn.modules.module import Module
from tessera.nn.modules.normalization import _BatchNorm
from tessera.optim.lr_scheduler import LRScheduler

__all__ = ["AveragedModel", "update_bn", "SWALR", "get_ema_multi_avg_fn", "get_swa_multi_avg_fn", "get_ema_avg_fn",
           "get_swa_avg_fn"]


def _check_decay(decay):
    if decay < 0.0 or decay > 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in [0,1] range.")


def _is_float(t):
    return t.dtype.is_floating_point or t.dtype.is_complex


def get_ema_multi_avg_fn(decay=0.999):
    """In place, over lists: ema = decay * ema + (1 - decay) * current (a lerp for float tensors)."""
    _check_decay(decay)

    def ema_update(ema_param_list, current_param_list, _):
        with _autograd.no_grad():
            if _is_float(ema_param_list[0]):
                for ema, cur in zip(ema_param_list, current_param_list):
                    ema.lerp_(cur, 1 - decay)
            else:  # integer buffers: computed in floating point, truncated back by copy_
                for ema, cur in zip(ema_param_list, current_param_list):
                    ema.copy_(ema * decay + cur * (1 - decay))

    return ema_update


def get_swa_multi_avg_fn():
    """In place, over lists: the running mean avg += (current - avg) / (n + 1)."""

    def swa_update(averaged_param_list, current_param_list, num_averaged):
        n = int(num_averaged)
        with _autograd.no_grad():
            for avg, cur in zip(averaged_param_list, current_param_list):
                if _is_float(avg):
                    avg.lerp_(cur, 1 / (n + 1))
                else:
                    avg.copy_(avg + (cur - avg) / (n + 1))

    return swa_update


def get_ema_avg_fn(decay=0.999):
    """Per tensor, returning the new value: decay * ema + (1 - decay) * current."""
    _check_decay(decay)

    def ema_update(ema_param, current_param, num_averaged):
        with _autograd.no_grad():
            return decay * ema_param + (1 - decay) * current_param

    return ema_update


def get_swa_avg_fn():
    """Per tensor, returning the new value: avg + (current - avg) / (n + 1)."""

    def swa_update(averaged_param, current_param, num_averaged):
        with _autograd.no_grad():
            return averaged_param + (current_param - averaged_param) / (int(num_averaged) + 1)

    return swa_update


class AveragedModel(Module):
    """A copy of `model` whose parameters (and buffers, with use_buffers=True) hold a running
    average of the model's: update_parameters(model) copies them the first time, then applies
    avg_fn (per tensor, returns the new value) or multi_avg_fn (in place, over lists grouped by
    device and dtype); with neither, the equal-weight SWA mean. Without use_buffers, buffers are
    copied from the model as they are. n_averaged (a buffer) counts the updates."""

    def __init__(self, model, device=None, avg_fn=None, multi_avg_fn=None, use_buffers=False):
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = copy.deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", tessera.tensor(0, dtype=tessera.long, device=device))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def _averaged_tensors(self, model):
        if self.use_buffers:
            return (itertools.chain(self.module.parameters(), self.module.buffers()),
                    itertools.chain(model.parameters(), model.buffers()))
        return self.parameters(), model.parameters()

    def update_parameters(self, model):
        mine, theirs = self._averaged_tensors(model)
        pairs = [(a.detach(), m.detach().to(a.device)) for a, m in zip(mine, theirs)]
        n = int(self.n_averaged.item())
        with _autograd.no_grad():
            if n == 0:
                for avg, cur in pairs:
                    avg.copy_(cur)
            elif self.multi_avg_fn is not None:
                # list-wise functions see tensors of one device and dtype at a time, as in torch
                groups = {}
                for avg, cur in pairs:
                    groups.setdefault((str(avg.device), avg.dtype), []).append((avg, cur))
                for group in groups.values():
                    self.multi_avg_fn([a for a, _ in group], [c for _, c in group],
                                      self.n_averaged.to(group[0][0].device))
            else:
                # the default is the per-tensor SWA mean (torch's CPU path; its CUDA path lerps)
                fn = self.avg_fn if self.avg_fn is not None else get_swa_avg_fn()
                for avg, cur in pairs:
                    avg.copy_(fn(avg, cur, self.n_averaged.to(avg.device)))
            if not self.use_buffers:
                for b_avg, b_model in zip(self.module.buffers(), model.buffers()):
                    b_avg.detach().copy_(b_model.detach().to(b_avg.device))
            self.n_averaged.add_(1)


def update_bn(loader, model, device=None):
    """Recomputes the BatchNorm running statistics of `model` with one pass over `loader` (each
    batch a tensor, or a list/tuple whose first item is the input): the statistics are reset and
    momentum set to None for the pass, so they become the plain average over the batches."""
    momenta = {}
    for module in model.modules():
        if isinstance(module, _BatchNorm):
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None
    with _autograd.no_grad():
        for batch in loader:
            if isinstance(batch, (list, tuple)):
                batch = batch[0]
            if device is not None:
                batch = batch.to(device)
            model(batch)
    for module, momentum in momenta.items():
        module.momentum = momentum
    model.train(was_training)


class SWALR(LRScheduler):
    """Anneals each group's lr from its value when the scheduler starts to swa_lr over
    anneal_epochs steps ("cos" or "linear"), then holds it at swa_lr. Each step re-derives the
    starting lr from the current one, so SWALR composes with other schedulers as torch's does."""

    def __init__(self, optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos", last_epoch=-1,
                 verbose="deprecated"):
        groups = optimizer.param_groups
        if isinstance(swa_lr, (list, tuple)):
            if len(swa_lr) != len(groups):
                raise ValueError(f"swa_lr must have the same length as optimizer.param_groups. swa_lr has "
                                 f"{len(swa_lr)} values, param_groups has {len(groups)}.")
            swa_lrs = list(swa_lr)
        else:
            swa_lrs = [swa_lr] * len(groups)
        for value, group in zip(swa_lrs, groups):
            group["swa_lr"] = value
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}")
        self._set_anneal_func(anneal_strategy)
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}")
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch, verbose)

    @staticmethod
    def _linear_anneal(t):
        return t

    @staticmethod
    def _cosine_anneal(t):
        return (1 - math.cos(math.pi * t)) / 2

    @staticmethod
    def _get_initial_lr(lr, swa_lr, alpha):
        # inverts lr = alpha * swa_lr + (1 - alpha) * lr0 for lr0
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def _set_anneal_func(self, anneal_strategy):
        self._anneal_strategy = anneal_strategy
        self.anneal_func = self._cosine_anneal if anneal_strategy == "cos" else self._linear_anneal

    def get_lr(self):
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        span = max(1, self.anneal_epochs)
        prev_alpha = self.anneal_func(max(0, min(1, (step - 1) / span)))
        alpha = self.anneal_func(max(0, min(1, step / span)))
        lrs = []
        for group in self.optimizer.param_groups:
            start = self._get_initial_lr(group["lr"], group["swa_lr"], prev_alpha)
            lrs.append(group["swa_lr"] * alpha + start * (1 - alpha))
        return lrs

    def state_dict(self):
        """Every attribute except the optimizer and the annealing function (restored by name)."""
        return {key: value for key, value in self.__dict__.items() if key not in ("optimizer", "anneal_func")}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)
        self._set_anneal_func(self._anneal_strategy)

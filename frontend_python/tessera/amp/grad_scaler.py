"""torch.amp.GradScaler for tessera: dynamic loss scaling. scale() multiplies the loss, so small
float16 gradients survive; unscale_() divides the gradients back and notes whether any is
inf/NaN; step() skips the optimizer step when one is; update() halves the scale after an
overflow and doubles it after growth_interval clean steps."""
import math
import warnings
from collections import abc

import tessera

__all__ = ["GradScaler"]

_READY, _UNSCALED, _STEPPED = 0, 1, 2


class GradScaler:
    def __init__(self, device="cuda", init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        self._device = str(device)
        if enabled and self._device.split(":")[0] == "cuda" and not tessera.cuda.is_available():
            warnings.warn("torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  Disabling.")
            enabled = False
        self._enabled = bool(enabled)
        if self._enabled:
            if growth_factor <= 1.0:
                raise AssertionError("The growth factor must be > 1.0.")
            if backoff_factor >= 1.0:
                raise AssertionError("The backoff factor must be < 1.0.")
        self._init_scale = float(init_scale)
        self._scale = None  # a float once the first scale() ran
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = int(growth_interval)
        self._init_growth_tracker = 0
        self._growth_tracker = None
        self._per_optimizer = {}  # id(optimizer) -> {"stage", "found_inf"}

    # ---- scaling the loss
    def scale(self, outputs):
        """outputs (a tensor or nested lists/tuples of them) times the current scale."""
        if not self._enabled:
            return outputs
        if self._scale is None:
            self._scale, self._growth_tracker = self._init_scale, self._init_growth_tracker

        def apply(value):
            if isinstance(value, tessera.Tensor):
                return value * self._scale
            if isinstance(value, abc.Iterable) and not isinstance(value, (str, bytes)):
                items = [apply(v) for v in value]
                return type(value)(items) if isinstance(value, (list, tuple)) else items
            raise ValueError("outputs must be a Tensor or an iterable of Tensors")
        return apply(outputs)

    def _state(self, optimizer):
        return self._per_optimizer.setdefault(id(optimizer), {"stage": _READY, "found_inf": False})

    def _check_scale_initialized(self, funcname):
        if self._scale is None:
            raise RuntimeError(f"Attempted {funcname} but _scale is None.  This may indicate your script did not use "
                               "scaler.scale(loss or outputs) earlier in the iteration.")

    # ---- the optimizer's gradients
    def unscale_(self, optimizer):
        """Divides optimizer's gradients by the scale, in place, and records whether any is inf/NaN."""
        if not self._enabled:
            return
        self._check_scale_initialized("unscale_")
        state = self._state(optimizer)
        if state["stage"] == _UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        if state["stage"] == _STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        inv_scale = 1.0 / self._scale
        found_inf = False
        with tessera.no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    g = p.grad
                    if g is None:
                        continue
                    if g.dtype == tessera.float16:
                        raise ValueError("Attempting to unscale FP16 gradients.")
                    g.mul_(inv_scale)
                    if not found_inf and not bool(tessera.isfinite(g).all()):
                        found_inf = True
        state["found_inf"] = found_inf
        state["stage"] = _UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """optimizer.step(*args, **kwargs) unless the (unscaled) gradients hold an inf/NaN; returns
        what step returned, or None when it was skipped."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        self._check_scale_initialized("step")
        state = self._state(optimizer)
        if state["stage"] == _STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state["stage"] == _READY:
            self.unscale_(optimizer)
        result = None if state["found_inf"] else optimizer.step(*args, **kwargs)
        state["stage"] = _STEPPED
        return result

    def update(self, new_scale=None):
        """The scale for the next iteration: new_scale when given, else backed off after an overflow
        in any optimizer this iteration, grown after growth_interval clean iterations."""
        if not self._enabled:
            return
        self._check_scale_initialized("update")
        if new_scale is not None:
            if isinstance(new_scale, tessera.Tensor):
                if new_scale.numel() != 1:
                    raise AssertionError("new_scale should be a single-element tensor")
                new_scale = float(new_scale.item())
            self._scale = float(new_scale)
        else:
            found = [s["found_inf"] for s in self._per_optimizer.values()]
            if not found:
                raise AssertionError("No inf checks were recorded prior to update.")
            if any(found):
                self._scale *= self._backoff_factor
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1
                if self._growth_tracker == self._growth_interval:
                    grown = self._scale * self._growth_factor
                    if math.isfinite(grown):  # as torch: the scale never becomes inf
                        self._scale = grown
                    self._growth_tracker = 0
        self._per_optimizer = {}

    # ---- accessors and checkpoints
    def get_scale(self):
        if not self._enabled:
            return 1.0
        return self._init_scale if self._scale is None else self._scale

    def get_growth_factor(self):
        return self._growth_factor

    def set_growth_factor(self, new_factor):
        self._growth_factor = float(new_factor)

    def get_backoff_factor(self):
        return self._backoff_factor

    def set_backoff_factor(self, new_factor):
        self._backoff_factor = float(new_factor)

    def get_growth_interval(self):
        return self._growth_interval

    def set_growth_interval(self, new_interval):
        self._growth_interval = int(new_interval)

    def is_enabled(self):
        return self._enabled

    def state_dict(self):
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor, "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval,
                "_growth_tracker": self._init_growth_tracker if self._growth_tracker is None else self._growth_tracker}

    def load_state_dict(self, state_dict):
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved from a disabled "
                               "instance of GradScaler.")
        self._init_scale = float(state_dict["scale"])
        if self._scale is not None:
            self._scale = self._init_scale
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._init_growth_tracker = int(state_dict["_growth_tracker"])
        if self._growth_tracker is not None:
            self._growth_tracker = self._init_growth_tracker

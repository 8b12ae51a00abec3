"""optim.Optimizer: parameter groups, per-parameter state and torch's state_dict format."""
from collections import defaultdict
import copy

import tessera
from tessera.nn import _autograd

_Tensor = tessera.Tensor


class _RequiredParameter:
    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()


def _StateDict():
    """optimizer.state: per-parameter dicts keyed by the parameter (tensors hash by identity)."""
    return defaultdict(dict)


class Optimizer:
    """Base class: holds param_groups (dicts with "params" and the hyper-parameters; defaults fill
    what a group leaves out) and state (per parameter). Subclasses implement step()."""

    def __init__(self, params, defaults):
        self.defaults = defaults
        self.state = _StateDict()
        self.param_groups = []
        if isinstance(params, _Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors or dicts, but "
                            "got " + type(params).__name__)
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for group in param_groups:
            self.add_param_group(group)

    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def __setstate__(self, state):
        self.__dict__.update(state)

    def __repr__(self):
        s = self.__class__.__name__ + " ("
        for i, group in enumerate(self.param_groups):
            s += "\n"
            s += f"Parameter Group {i}\n"
            for key in sorted(group.keys()):
                if key != "params":
                    s += f"    {key}: {group[key]}\n"
        s += ")"
        return s

    def add_param_group(self, param_group):
        """Adds a group of parameters (a dict with "params"), filling hyper-parameters from defaults."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, _Tensor):
            param_group["params"] = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, but the ordering of "
                            "tensors in sets will change between runs. Please use a list instead.")
        else:
            param_group["params"] = list(params)
        for param in param_group["params"]:
            if not isinstance(param, _Tensor):
                raise TypeError("optimizer can only optimize Tensors, but one of the params is " + type(param).__name__)
            if _autograd.has_autograd() and not param.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError(f"parameter group didn't specify a value of required optimization parameter {name}")
            param_group.setdefault(name, default)
        params = param_group["params"]
        if len(params) != len({id(p) for p in params}):
            raise ValueError("optimizer contains a parameter group with duplicate parameters")
        seen = {id(p) for group in self.param_groups for p in group["params"]}
        if any(id(p) in seen for p in params):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    def zero_grad(self, set_to_none=True):
        """Resets the gradients of every parameter: to None (default) or to zeros in place."""
        for group in self.param_groups:
            for p in group["params"]:
                g = getattr(p, "grad", None)
                if g is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    if getattr(g, "grad_fn", None) is not None:
                        g = g.detach()
                        p.grad = g
                    elif _autograd.has_autograd():
                        g.requires_grad_(False)
                    g.zero_()

    def step(self, closure=None):
        raise NotImplementedError

    # ---- state_dict in torch's format
    def state_dict(self):
        """{"state": {index: {...}}, "param_groups": [{..., "params": [indices]}]}: parameters are
        numbered in group order, starting at 0."""
        index_of = {}
        start = 0

        def pack_group(group):
            nonlocal start
            for i, p in enumerate(group["params"], start):
                index_of.setdefault(id(p), i)
            packed = {k: v for k, v in group.items() if k != "params"}
            packed["params"] = [index_of[id(p)] for p in group["params"]]
            start += len(packed["params"])
            return packed

        param_groups = [pack_group(g) for g in self.param_groups]
        packed_state = {index_of[id(p)]: v for p, v in self.state.items() if id(p) in index_of}
        return {"state": packed_state, "param_groups": param_groups}

    @staticmethod
    def _cast(param, value, key=None):
        if isinstance(value, _Tensor):
            if key == "step":  # step stays as saved (float32 scalar), as torch keeps it
                return value.clone()
            if param.dtype.is_floating_point and value.dtype.is_floating_point:
                return value.to(device=param.device, dtype=param.dtype, copy=True)
            return value.to(device=param.device, copy=True)
        if isinstance(value, dict):
            return {k: Optimizer._cast(param, v, k) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(Optimizer._cast(param, v) for v in value)
        return copy.deepcopy(value)

    def load_state_dict(self, state_dict):
        """Restores hyper-parameters and state saved by state_dict() (the state is copied, cast to
        each parameter's dtype and device)."""
        groups = self.param_groups
        saved_groups = state_dict["param_groups"]
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        param_lens = (len(g["params"]) for g in groups)
        saved_lens = (len(g["params"]) for g in saved_groups)
        if any(p_len != s_len for p_len, s_len in zip(param_lens, saved_lens)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match the size of optimizer's "
                             "group")
        id_map = {}
        for g, sg in zip(groups, saved_groups):
            for old_id, p in zip(sg["params"], g["params"]):
                id_map[old_id] = p
        state = _StateDict()
        for k, v in state_dict["state"].items():
            key = int(k) if isinstance(k, str) and k.isdigit() else k
            if key in id_map:
                param = id_map[key]
                state[param] = self._cast(param, v)
        new_groups = []
        for g, sg in zip(groups, saved_groups):
            ng = {k: copy.deepcopy(v) for k, v in sg.items() if k != "params"}
            ng["params"] = g["params"]
            new_groups.append(ng)
        self.state = state
        self.param_groups = new_groups


def _grad(p, maximize):
    g = getattr(p, "grad", None)
    if g is None:
        return None
    return -g if maximize else g


def _step_tensor(state):
    if "step" not in state:
        state["step"] = tessera.tensor(0.0, dtype=tessera.float32)
    state["step"].add_(1)
    return state["step"].item()



class _PerParameterOptimizer(Optimizer):
    """An optimizer whose step updates each parameter on its own: subclasses give `_init_state(p,
    state, group)` and `_update(p, g, state, group, step)`; this runs the closure, skips parameters
    without a gradient, negates it for maximize and adds L2 weight decay."""

    def _init_state(self, p, state, group):
        pass

    def _fused_update(self, p, grad, state, group, step):
        """A one-pass step from the raw gradient (maximize and L2 decay applied inside), where the
        subclass has one for these tensors: True when it ran, False to take `_update`."""
        return False

    def step(self, closure=None):
        loss = None
        if closure is not None:
            with _autograd.enable_grad():
                loss = closure()
        with _autograd.no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    raw = getattr(p, "grad", None)
                    if raw is None:
                        continue
                    state = self.state[p]
                    if len(state) == 0:
                        state["step"] = tessera.tensor(0.0, dtype=tessera.float32)
                        self._init_state(p, state, group)
                    step = _step_tensor(state)
                    if self._fused_update(p, raw, state, group, step):
                        continue
                    g = _grad(p, group.get("maximize", False))
                    if group.get("weight_decay", 0) != 0 and not group.get("decoupled_weight_decay", False):
                        g = g.add(p, alpha=group["weight_decay"])
                    self._update(p, g, state, group, step)
        return loss


def _check_nonnegative(**values):
    names = {"lr": "learning rate", "eps": "epsilon value", "weight_decay": "weight_decay value",
             "lr_decay": "lr_decay value", "rho": "rho value", "momentum_decay": "momentum_decay value"}
    for key, value in values.items():
        if not 0.0 <= value:
            raise ValueError(f"Invalid {names.get(key, key)}: {value}")


def _check_betas(betas):
    for i, b in enumerate(betas):
        if not 0.0 <= b < 1.0:
            raise ValueError(f"Invalid beta parameter at index {i}: {b}")

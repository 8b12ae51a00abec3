"""nn.Module: the base of every layer. Parameters, buffers and submodules assigned as attributes
are registered (in assignment order) and found by parameters(), state_dict(), to(), ..."""

__all__ = ["Module"]
from collections import OrderedDict, namedtuple
import itertools

import tessera
from tessera.nn import _autograd
from tessera.nn.parameter import Buffer, Parameter

_Tensor = tessera.Tensor
# Bumped by every change of any module's attributes, parameters, buffers, submodules or mode:
# ts.compile's guards recompute a module's state only when it moved.
STATE_VERSION = [0]


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    __slots__ = ()

    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


def _addindent(s, n):
    lines = s.split("\n")
    if len(lines) == 1:
        return s
    return lines[0] + "\n" + "\n".join(" " * n + line for line in lines[1:])


class Module:
    """Base class for all neural network modules (torch.nn.Module semantics)."""

    training: bool
    _version = 1

    def __init__(self, *args, **kwargs):
        if args or kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() got unexpected arguments (Module.__init__ takes none)")
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = OrderedDict()
        d["_buffers"] = OrderedDict()
        d["_non_persistent_buffers_set"] = set()
        d["_modules"] = OrderedDict()
        d["_forward_pre_hooks"] = OrderedDict()
        d["_forward_hooks"] = OrderedDict()

    def forward(self, *input):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    # ---- calling
    def __call__(self, *args, **kwargs):
        compiled = self.__dict__.get("_compiled_call_impl")
        if compiled is not None:
            return compiled(*args, **kwargs)
        return self._call_impl(*args, **kwargs)

    def _call_impl(self, *args, **kwargs):
        for hook in self._forward_pre_hooks.values():
            r = hook(self, args)
            if r is not None:
                args = r if isinstance(r, tuple) else (r,)
        out = self.forward(*args, **kwargs)
        for hook in self._forward_hooks.values():
            r = hook(self, args, out)
            if r is not None:
                out = r
        return out

    def compile(self, *args, **kwargs):
        """Compiles this module's calls in place with ts.compile's arguments (torch's Module.compile)."""
        from tessera.compiler import CompiledFunction
        self.__dict__["_compiled_call_impl"] = CompiledFunction(self._call_impl, *args, module=self, **kwargs)

    def register_forward_pre_hook(self, hook):
        return _Handle(self._forward_pre_hooks, hook)

    def register_forward_hook(self, hook):
        return _Handle(self._forward_hooks, hook)

    # ---- registration
    def _check_name(self, kind, name):
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"cannot assign {kind} before Module.__init__() call")
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string. Got {type(name).__name__}")
        if name == "":
            raise KeyError(f'{kind} name can\'t be empty string ""')
        if "." in name:
            raise KeyError(f'{kind} name can\'t contain ".", got: {name}')

    def register_buffer(self, name, tensor, persistent=True):
        """Adds a tensor (or None) that is part of the module's state but not a parameter;
        non-persistent buffers are left out of state_dict()."""
        STATE_VERSION[0] += 1
        self._check_name("buffer", name)
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, _Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' (torch Tensor or None "
                            "required)")
        if isinstance(tensor, Buffer):
            persistent = tensor.persistent
            tensor = tensor.detach()
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def register_parameter(self, name, param):
        """Adds a parameter (or None) under `name`."""
        STATE_VERSION[0] += 1
        self._check_name("parameter", name)
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter '{name}' "
                            "(nn.Parameter or None required)")
        self._parameters[name] = param

    def add_module(self, name, module):
        """Adds a child module (or None) under `name`."""
        STATE_VERSION[0] += 1
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self._check_name("module", name)
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        self._modules[name] = module

    register_module = add_module

    def get_submodule(self, target):
        if target == "":
            return self
        mod = self
        for item in target.split("."):
            if not hasattr(mod, item):
                raise AttributeError(f"{mod._get_name()} has no attribute `{item}`")
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                raise AttributeError(f"`{item}` is not an nn.Module")
        return mod

    def get_parameter(self, target):
        module_path, _, name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if name not in mod._parameters:
            raise AttributeError(f"{mod._get_name()} has no parameter `{name}`")
        return mod._parameters[name]

    def __getattr__(self, name):
        d = self.__dict__
        if "_parameters" in d:
            if name in d["_parameters"]:
                return d["_parameters"][name]
            if name in d["_buffers"]:
                return d["_buffers"][name]
            if name in d["_modules"]:
                return d["_modules"][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name, value):
        STATE_VERSION[0] += 1
        d = self.__dict__
        params = d.get("_parameters")

        def remove_from(*dicts):
            for dd in dicts:
                if name in dd:
                    if isinstance(dd, set):
                        dd.discard(name)
                    else:
                        del dd[name]

        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            remove_from(d, d["_buffers"], d["_modules"], d["_non_persistent_buffers_set"])
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as parameter '{name}' (nn.Parameter or None "
                                "expected)")
            self.register_parameter(name, value)
        elif isinstance(value, Module):
            if params is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            remove_from(d, params, d["_buffers"], d["_non_persistent_buffers_set"])
            d["_modules"][name] = value
        elif d.get("_modules") is not None and name in d["_modules"]:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as child module '{name}' (nn.Module or None "
                                "expected)")
            d["_modules"][name] = value
        elif isinstance(value, Buffer):
            if params is None:
                raise AttributeError("cannot assign buffer before Module.__init__() call")
            remove_from(d, params, d["_modules"])
            self.register_buffer(name, value)
        elif d.get("_buffers") is not None and name in d["_buffers"]:
            if value is not None and not isinstance(value, _Tensor):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' (Tensor or None expected)")
            d["_buffers"][name] = value
        else:
            object.__setattr__(self, name, value)

    def __delattr__(self, name):
        STATE_VERSION[0] += 1
        for key in ("_parameters", "_buffers", "_modules"):
            if name in self.__dict__.get(key, ()):
                del self.__dict__[key][name]
                self._non_persistent_buffers_set.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        keys = list(super().__dir__()) + list(self._parameters) + list(self._modules) + list(self._buffers)
        return sorted(k for k in set(keys) if not k[0].isdigit())

    # ---- iteration
    def _named_members(self, get_members, prefix="", recurse=True, remove_duplicate=True):
        memo = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for module_prefix, module in modules:
            for k, v in get_members(module):
                if v is None:
                    continue
                if remove_duplicate:
                    if id(v) in memo:
                        continue
                    memo.add(id(v))
                yield (module_prefix + ("." if module_prefix else "") + k, v)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members(lambda m: m._parameters.items(), prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members(lambda m: m._buffers.items(), prefix, recurse, remove_duplicate)

    def children(self):
        for _, m in self.named_children():
            yield m

    def named_children(self):
        memo = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in memo:
                memo.add(id(m))
                yield name, m

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        if memo is None:
            memo = set()
        if id(self) in memo and remove_duplicate:
            return
        if remove_duplicate:
            memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is None:
                continue
            yield from m.named_modules(memo, prefix + ("." if prefix else "") + name, remove_duplicate)

    # ---- modes
    def train(self, mode=True):
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for m in self.children():
            m.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            _autograd.set_requires_grad(p, requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        """Resets every parameter's .grad: to None (default), or zeroes it in place."""
        for p in self.parameters():
            g = getattr(p, "grad", None)
            if g is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                if getattr(g, "grad_fn", None) is not None:
                    g = g.detach()
                    p.grad = g
                g.zero_()

    # ---- transforms of the parameters
    def apply(self, fn):
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    def _apply(self, fn):
        """Replaces every parameter and buffer by fn(tensor) (parameters stay Parameters with their
        requires_grad); a tensor fn returns unchanged is kept as is."""
        for m in self.children():
            m._apply(fn)
        for key, p in self._parameters.items():
            if p is None:
                continue
            with _autograd.no_grad():
                new = fn(p)
            if new is p:
                continue
            self._parameters[key] = Parameter(new, _autograd.requires_grad(p) or not _autograd.has_autograd())
            g = getattr(p, "grad", None)
            if g is not None:
                with _autograd.no_grad():
                    self._parameters[key].grad = fn(g)
        for key, b in self._buffers.items():
            if b is not None:
                self._buffers[key] = fn(b)
        return self

    def to(self, *args, **kwargs):
        """to(device), to(dtype), to(device, dtype), to(tensor): moves/casts parameters and buffers
        (a dtype applies only to floating-point tensors). Parameters are replaced by new Parameter
        objects when they change, so build optimizers after moving a model."""
        device, dtype = kwargs.pop("device", None), kwargs.pop("dtype", None)
        kwargs.pop("non_blocking", None)
        if kwargs:
            raise TypeError(f"to() got an unexpected keyword argument '{next(iter(kwargs))}'")
        for a in args:
            if isinstance(a, tessera.dtype):
                dtype = a
            elif isinstance(a, _Tensor):
                device, dtype = a.device, a.dtype
            elif isinstance(a, (str, tessera.device)):
                device = a
            elif isinstance(a, bool):
                pass
            else:
                raise TypeError(f"to() received an invalid argument of type {type(a).__name__}")
        if dtype is not None and not dtype.is_floating_point:
            raise TypeError(f"nn.Module.to only accepts floating point dtypes, but got desired dtype={dtype}")

        def convert(t):
            d = dtype if (dtype is not None and t.dtype.is_floating_point) else None
            if device is None:
                return t.to(d) if d is not None else t
            return t.to(device, d) if d is not None else t.to(device)

        return self._apply(convert)

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None):
        return self.to("cuda" if device is None else (f"cuda:{device}" if isinstance(device, int) else device))

    def type(self, dst_type):
        return self._apply(lambda t: t.to(dst_type))

    def float(self):
        return self._apply(lambda t: t.float() if t.dtype.is_floating_point else t)

    def double(self):
        return self._apply(lambda t: t.double() if t.dtype.is_floating_point else t)

    def half(self):
        return self._apply(lambda t: t.half() if t.dtype.is_floating_point else t)

    def bfloat16(self):
        return self._apply(lambda t: t.bfloat16() if t.dtype.is_floating_point else t)

    # ---- state
    def _save_to_state_dict(self, destination, prefix, keep_vars):
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        """An OrderedDict from dotted names to the parameters and persistent buffers (detached
        tensors sharing their storage, unless keep_vars)."""
        if args:  # positional (destination, prefix, keep_vars), as old torch code calls it
            destination = args[0]
            if len(args) > 1:
                prefix = args[1]
            if len(args) > 2:
                keep_vars = args[2]
        if destination is None:
            destination = OrderedDict()
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, m in self._modules.items():
            if m is not None:
                m.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
        return destination

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs, assign=False):
        persistent_buffers = {k: v for k, v in self._buffers.items() if k not in self._non_persistent_buffers_set}
        local_state = {k: v for k, v in itertools.chain(self._parameters.items(), persistent_buffers.items())
                       if v is not None}
        for name, param in local_state.items():
            key = prefix + name
            if key not in state_dict:
                if strict:
                    missing_keys.append(key)
                continue
            input_param = state_dict[key]
            if not isinstance(input_param, _Tensor):
                error_msgs.append(f'While copying the parameter named "{key}", expected torch.Tensor or Tensor-like '
                                  f"object from checkpoint but received {type(input_param)}")
                continue
            if tuple(input_param.shape) != tuple(param.shape):
                error_msgs.append(f"size mismatch for {key}: copying a param with shape {_shape_str(input_param)} "
                                  f"from checkpoint, the shape in current model is {_shape_str(param)}.")
                continue
            try:
                if assign:
                    if name in self._parameters:
                        self._parameters[name] = input_param if isinstance(input_param, Parameter) else Parameter(
                            input_param, _autograd.requires_grad(param) or not _autograd.has_autograd())
                    else:
                        self._buffers[name] = input_param
                else:
                    with _autograd.no_grad():
                        param.copy_(input_param)
            except Exception as ex:  # noqa: BLE001  (reported with the others, as torch does)
                error_msgs.append(f'While copying the parameter named "{key}", whose dimensions in the model are '
                                  f"{_shape_str(param)} and whose dimensions in the checkpoint are "
                                  f"{_shape_str(input_param)}, an exception occurred : {ex.args}.")
        if strict:
            for key in state_dict.keys():
                if key.startswith(prefix):
                    input_name = key[len(prefix):].split(".", 1)
                    if input_name[0] not in self._modules and input_name[0] not in local_state:
                        unexpected_keys.append(key)

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Copies parameters and buffers from state_dict into this module (in place, so optimizers
        keep working). strict: the keys must match exactly (else RuntimeError listing the
        missing and unexpected keys). Returns (missing_keys, unexpected_keys)."""
        if not hasattr(state_dict, "keys") or not hasattr(state_dict, "__getitem__"):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing_keys, unexpected_keys, error_msgs = [], [], []

        def load(module, prefix=""):
            module._load_from_state_dict(state_dict, prefix, {}, True, missing_keys, unexpected_keys, error_msgs,
                                         assign)
            for name, child in module._modules.items():
                if child is not None:
                    load(child, prefix + name + ".")

        load(self)
        if strict:
            if unexpected_keys:
                error_msgs.insert(0, "Unexpected key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in unexpected_keys)))
            if missing_keys:
                error_msgs.insert(0, "Missing key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in missing_keys)))
        if error_msgs:
            raise RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(
                type(self).__name__, "\n\t".join(error_msgs)))
        return _IncompatibleKeys(missing_keys, unexpected_keys)

    # ---- printing
    def extra_repr(self):
        return ""

    def _get_name(self):
        return type(self).__name__

    def __repr__(self):
        extra_lines = []
        extra = self.extra_repr()
        if extra:
            extra_lines = extra.split("\n")
        child_lines = []
        for key, module in self._modules.items():
            mod_str = _addindent(repr(module), 2)
            child_lines.append("(" + key + "): " + mod_str)
        lines = extra_lines + child_lines
        main_str = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                main_str += extra_lines[0]
            else:
                main_str += "\n  " + "\n  ".join(lines) + "\n"
        main_str += ")"
        return main_str

    def __getstate__(self):
        return self.__dict__.copy()

    def __setstate__(self, state):
        self.__dict__.update(state)


def _shape_str(t):
    return "tessera.Size([" + ", ".join(str(s) for s in t.shape) + "])"


class _Handle:
    """What register_*_hook returns: .remove() unregisters the hook."""
    _next_id = 0

    def __init__(self, hooks, hook):
        self._hooks = hooks
        self.id = _Handle._next_id
        _Handle._next_id += 1
        hooks[self.id] = hook

    def remove(self):
        self._hooks.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()

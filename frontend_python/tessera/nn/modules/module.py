"""nn.Module: the base of every layer. Parameters, buffers and submodules assigned as attributes
are registered (in assignment order) and found by parameters(), state_dict(), to(), ..."""

__all__ = ["Module"]
from collections import OrderedDict, namedtuple
from collections.abc import Mapping
import itertools
import warnings
import weakref

import tessera
from tessera.nn import _autograd
from tessera.nn.parameter import Buffer, Parameter

_Tensor = tessera.Tensor
# Bumped by every change of any module's attributes, parameters, buffers, submodules or mode:
# ts.compile's guards recompute a module's state only when it moved.
STATE_VERSION = [0]
_EXTRA_STATE_KEY_SUFFIX = "_extra_state"


class RemovableHandle:
    """What register_*_hook returns (torch.utils.hooks.RemovableHandle): .remove() takes the hook
    out of its table (and its id out of the flag tables in extra_dict); usable as a context manager.
    Ids come from one counter shared by every table, so a module's flag tables can hold the ids of
    global hooks too."""
    next_id = 0

    def __init__(self, hooks_dict, *, extra_dict=None):
        self.id = RemovableHandle.next_id
        RemovableHandle.next_id += 1
        self.hooks_dict_ref = _ref(hooks_dict)
        extras = [extra_dict] if isinstance(extra_dict, dict) else list(extra_dict or ())
        self.extra_dict_ref = tuple(_ref(d) for d in extras)

    def remove(self):
        for ref in (self.hooks_dict_ref,) + self.extra_dict_ref:
            d = ref()
            if d is not None:
                d.pop(self.id, None)

    def __getstate__(self):
        return (self.hooks_dict_ref(), self.id, tuple(ref() for ref in self.extra_dict_ref))

    def __setstate__(self, state):
        self.hooks_dict_ref = _ref(state[0] if state[0] is not None else OrderedDict())
        self.id = state[1]
        RemovableHandle.next_id = max(RemovableHandle.next_id, self.id + 1)
        self.extra_dict_ref = tuple(_ref(d) for d in (state[2] if len(state) > 2 else ()) if d is not None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def _ref(d):
    # A handle must not keep a module's hook tables alive (torch holds them weakly too); plain
    # dicts cannot be weakly referenced, so those are held strongly.
    try:
        return weakref.ref(d)
    except TypeError:
        return lambda: d


def _add_hook(table, hook, prepend=False, extra_dict=None):
    handle = RemovableHandle(table, extra_dict=extra_dict)
    table[handle.id] = hook
    if prepend:
        table.move_to_end(handle.id, last=False)
    return handle


# Hooks of every module, run before each module's own (torch.nn.modules.module's globals).
_global_forward_pre_hooks = OrderedDict()
_global_forward_hooks = OrderedDict()
_global_forward_hooks_with_kwargs = OrderedDict()
_global_forward_hooks_always_called = OrderedDict()
_global_backward_pre_hooks = OrderedDict()
_global_backward_hooks = OrderedDict()
_global_is_full_backward_hook = None
_global_buffer_registration_hooks = OrderedDict()
_global_module_registration_hooks = OrderedDict()
_global_parameter_registration_hooks = OrderedDict()


def register_module_forward_pre_hook(hook):
    """hook(module, args) -> None or new args, before every module's forward."""
    return _add_hook(_global_forward_pre_hooks, hook)


def register_module_forward_hook(hook, *, with_kwargs=False, always_call=False):
    """hook(module, args, output) (or (module, args, kwargs, output) with_kwargs) -> None or a new
    output, after every module's forward; always_call: also when forward raised."""
    handle = _add_hook(_global_forward_hooks, hook,
                       extra_dict=[_global_forward_hooks_with_kwargs, _global_forward_hooks_always_called])
    if with_kwargs:
        _global_forward_hooks_with_kwargs[handle.id] = True
    if always_call:
        _global_forward_hooks_always_called[handle.id] = True
    return handle


def register_module_full_backward_pre_hook(hook):
    """hook(module, grad_output) -> None or new grad_output, for every module."""
    return _add_hook(_global_backward_pre_hooks, hook)


def register_module_full_backward_hook(hook):
    """hook(module, grad_input, grad_output) -> None or new grad_input, for every module."""
    global _global_is_full_backward_hook
    _global_is_full_backward_hook = True
    return _add_hook(_global_backward_hooks, hook)


def register_module_backward_hook(hook):
    """Deprecated in torch; tessera runs the hook as a full backward hook."""
    warnings.warn("register_module_backward_hook is deprecated; tessera runs the hook as a full backward hook "
                  "(register_module_full_backward_hook)", FutureWarning, stacklevel=2)
    return register_module_full_backward_hook(hook)


def register_module_buffer_registration_hook(hook):
    """hook(module, name, buffer) -> None or a replacement, on every register_buffer."""
    return _add_hook(_global_buffer_registration_hooks, hook)


def register_module_module_registration_hook(hook):
    """hook(module, name, submodule) -> None or a replacement, whenever a submodule is added."""
    return _add_hook(_global_module_registration_hooks, hook)


def register_module_parameter_registration_hook(hook):
    """hook(module, name, param) -> None or a replacement, on every register_parameter."""
    return _add_hook(_global_parameter_registration_hooks, hook)


def _has_global_hooks():
    return bool(_global_forward_pre_hooks or _global_forward_hooks or _global_backward_pre_hooks
                or _global_backward_hooks)


class _WrappedHook:
    """A load_state_dict pre-hook, called with its module first when registered through the public API."""

    def __init__(self, hook, module=None):
        self.hook, self.module = hook, module

    def __call__(self, *args):
        return self.hook(self.module, *args) if self.module is not None else self.hook(*args)


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
        d.update(_fresh_hook_tables())

    def forward(self, *input):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    # ---- calling
    def __call__(self, *args, **kwargs):
        compiled = self.__dict__.get("_compiled_call_impl")
        if compiled is not None:
            return compiled(*args, **kwargs)
        return self._call_impl(*args, **kwargs)

    def _call_impl(self, *args, **kwargs):
        d = self.__dict__
        if not (d["_forward_pre_hooks"] or d["_forward_hooks"] or d["_backward_hooks"] or d["_backward_pre_hooks"]
                or _has_global_hooks()):
            return self.forward(*args, **kwargs)
        return self._call_with_hooks(args, kwargs)

    def _call_with_hooks(self, args, kwargs):
        result = None
        ran_always = set()  # always_call hooks that already ran: the error path must not run them twice
        try:
            full_bw_hooks = list(_global_backward_hooks.values()) + list(self._backward_hooks.values())
            bw_pre_hooks = list(_global_backward_pre_hooks.values()) + list(self._backward_pre_hooks.values())
            for hook_id, hook in (*_global_forward_pre_hooks.items(), *self._forward_pre_hooks.items()):
                if hook_id in self._forward_pre_hooks_with_kwargs:
                    r = hook(self, args, kwargs)
                    if r is not None:
                        if not (isinstance(r, tuple) and len(r) == 2):
                            raise RuntimeError("forward pre-hook must return None or a tuple of "
                                               f"(new_args, new_kwargs), but got {r}.")
                        args, kwargs = r
                else:
                    r = hook(self, args)
                    if r is not None:
                        args = r if isinstance(r, tuple) else (r,)
            bw = None
            if full_bw_hooks or bw_pre_hooks:
                bw = _BackwardHook(self, full_bw_hooks, bw_pre_hooks)
                args = bw.setup_inputs(args)
            result = self.forward(*args, **kwargs)
            for hook_id, hook in (*_global_forward_hooks.items(), *self._forward_hooks.items()):
                if hook_id in self._forward_hooks_always_called or hook_id in _global_forward_hooks_always_called:
                    ran_always.add(hook_id)
                if hook_id in self._forward_hooks_with_kwargs or hook_id in _global_forward_hooks_with_kwargs:
                    r = hook(self, args, kwargs, result)
                else:
                    r = hook(self, args, result)
                if r is not None:
                    result = r
            if bw is not None:
                if not isinstance(result, (_Tensor, tuple)):
                    warnings.warn("For backward hooks to be called, module output should be a Tensor or a tuple of "
                                  f"Tensors but received {type(result)}", stacklevel=3)
                result = bw.setup_outputs(result)
            return result
        except Exception:
            for hooks, always, with_kwargs in ((_global_forward_hooks, _global_forward_hooks_always_called,
                                                _global_forward_hooks_with_kwargs),
                                               (self._forward_hooks, self._forward_hooks_always_called,
                                                self._forward_hooks_with_kwargs)):
                for hook_id, hook in list(hooks.items()):
                    if hook_id not in always or hook_id in ran_always:
                        continue
                    try:
                        r = hook(self, args, kwargs, result) if hook_id in with_kwargs else hook(self, args, result)
                        if r is not None:
                            result = r
                    except Exception as e:  # noqa: BLE001  (forward's own error is the one raised)
                        warnings.warn("module forward hook with ``always_call=True`` raised an exception that was "
                                      f"silenced as another error was raised in forward: {e}", stacklevel=3)
            raise

    def compile(self, *args, **kwargs):
        """Compiles this module's calls in place with ts.compile's arguments (torch's Module.compile)."""
        from tessera.compiler import CompiledFunction
        self.__dict__["_compiled_call_impl"] = CompiledFunction(self._call_impl, *args, module=self, **kwargs)

    # ---- hooks
    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """hook(module, args) -> None, a new args tuple or a single new argument; with_kwargs:
        hook(module, args, kwargs) -> None or (new_args, new_kwargs). prepend: run before the
        hooks already registered (global hooks still run first)."""
        handle = _add_hook(self._forward_pre_hooks, hook, prepend, extra_dict=self._forward_pre_hooks_with_kwargs)
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs[handle.id] = True
        return handle

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False, always_call=False):
        """hook(module, args, output) (with_kwargs: hook(module, args, kwargs, output)) -> None or a
        new output. always_call: also run (with output None) when forward or a hook raised."""
        handle = _add_hook(self._forward_hooks, hook, prepend,
                           extra_dict=[self._forward_hooks_with_kwargs, self._forward_hooks_always_called])
        if with_kwargs:
            self._forward_hooks_with_kwargs[handle.id] = True
        if always_call:
            self._forward_hooks_always_called[handle.id] = True
        return handle

    def register_full_backward_pre_hook(self, hook, prepend=False):
        """hook(module, grad_output) -> None or new grad_output (a tuple as long as grad_output), run
        when the gradients of the module's outputs are known. grad_output has an entry per output
        (None for non-tensors and outputs that got no gradient)."""
        return _add_hook(self._backward_pre_hooks, hook, prepend)

    def register_full_backward_hook(self, hook, prepend=False):
        """hook(module, grad_input, grad_output) -> None or new grad_input (a tuple as long as
        grad_input), run when the gradients of the module's positional inputs are known (or with
        grad_output alone, grad_input all None, when no input requires grad). Entries are None for
        non-tensor arguments and where no gradient flows. The forward sees views of its tensor
        inputs and the caller gets views of the outputs (an identity autograd Function on each side)."""
        self._is_full_backward_hook = True
        return _add_hook(self._backward_hooks, hook, prepend)

    def register_backward_hook(self, hook):
        """Deprecated in torch (its grad_input were those of the last operator only); tessera runs
        the hook as a full backward hook."""
        warnings.warn("register_backward_hook is deprecated; tessera runs the hook as a full backward hook "
                      "(register_full_backward_hook)", FutureWarning, stacklevel=2)
        return self.register_full_backward_hook(hook)

    def register_state_dict_pre_hook(self, hook):
        """hook(module, prefix, keep_vars), before state_dict() saves this module."""
        return _add_hook(self._state_dict_pre_hooks, hook)

    def _register_state_dict_hook(self, hook):
        """hook(module, state_dict, prefix, local_metadata) -> None or a state_dict to return
        instead (torch's private, older post-hook)."""
        if getattr(hook, "_from_public_api", False):
            raise RuntimeError("Cannot register the same function as the state dict post hook that was previously "
                               "registered via register_state_dict_post_hook")
        return _add_hook(self._state_dict_hooks, hook)

    def register_state_dict_post_hook(self, hook):
        """hook(module, state_dict, prefix, local_metadata) -> None, after state_dict() saved this
        module and its children; it may edit state_dict in place."""
        try:
            hook._from_public_api = True
        except AttributeError:  # a bound method takes no attributes: remembered by handle id instead
            pass
        handle = _add_hook(self._state_dict_hooks, hook)
        self._state_dict_public_hooks.add(handle.id)
        return handle

    def _register_load_state_dict_pre_hook(self, hook, with_module=False):
        """hook([module,] state_dict, prefix, local_metadata, strict, missing_keys,
        unexpected_keys, error_msgs), before this module loads its entries."""
        return _add_hook(self._load_state_dict_pre_hooks, _WrappedHook(hook, self if with_module else None))

    def register_load_state_dict_pre_hook(self, hook):
        """hook(module, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
        error_msgs), before this module loads its entries; it may edit state_dict in place."""
        return self._register_load_state_dict_pre_hook(hook, with_module=True)

    def register_load_state_dict_post_hook(self, hook):
        """hook(module, incompatible_keys) -> None, after this module and its children loaded;
        it may edit incompatible_keys.missing_keys / .unexpected_keys in place (strict checks them after)."""
        return _add_hook(self._load_state_dict_post_hooks, hook)

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
        for hook in _global_buffer_registration_hooks.values():
            out = hook(self, name, tensor)
            if out is not None:
                tensor = out
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
        for hook in _global_parameter_registration_hooks.values():
            out = hook(self, name, param)
            if out is not None:
                param = out
        self._parameters[name] = param

    def add_module(self, name, module):
        """Adds a child module (or None) under `name`."""
        STATE_VERSION[0] += 1
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self._check_name("module", name)
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        self._modules[name] = _module_registered(self, name, module)

    def register_module(self, name, module):
        """Alias of add_module."""
        self.add_module(name, module)

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

    def set_submodule(self, target, module, strict=False):
        """Puts `module` at the dotted path `target` (its parent must exist); strict: only
        replace an existing submodule."""
        if target == "":
            raise ValueError("Cannot set the submodule without a target name!")
        if not isinstance(module, Module):
            raise ValueError(f"`module` is not an nn.Module, found {type(module)}")
        parent_path, _, name = target.rpartition(".")
        parent = self.get_submodule(parent_path)
        if strict and not hasattr(parent, name):
            raise AttributeError(f"{parent._get_name()} has no attribute `{name}`")
        if hasattr(parent, name) and not isinstance(getattr(parent, name), Module):
            raise AttributeError(f"`{name}` is not an nn.Module")
        setattr(parent, name, module)

    def get_parameter(self, target):
        module_path, _, name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if not hasattr(mod, name):
            raise AttributeError(f"{mod._get_name()} has no attribute `{name}`")
        param = getattr(mod, name)
        if not isinstance(param, Parameter):
            raise AttributeError(f"`{name}` is not an nn.Parameter")
        return param

    def get_buffer(self, target):
        module_path, _, name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if not hasattr(mod, name):
            raise AttributeError(f"{mod._get_name()} has no attribute `{name}`")
        if name not in mod._buffers:
            raise AttributeError(f"`{name}` is not a buffer")
        return getattr(mod, name)

    def get_extra_state(self):
        """Overridden (with set_extra_state) by modules that keep non-tensor state: state_dict()
        stores its result under '<prefix>_extra_state'."""
        raise RuntimeError("Module.get_extra_state() is only called when a subclass overrides it")

    def set_extra_state(self, state):
        """Overridden (with get_extra_state): load_state_dict() hands it the '_extra_state' entry."""
        raise RuntimeError("Module.set_extra_state() is only called when a subclass overrides it")

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
            d["_modules"][name] = _module_registered(self, name, value)
        elif d.get("_modules") is not None and name in d["_modules"]:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as child module '{name}' (nn.Module or None "
                                "expected)")
            d["_modules"][name] = _module_registered(self, name, value)
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

    def _apply(self, fn, recurse=True):
        """Replaces every parameter and buffer by fn(tensor) (parameters stay Parameters with their
        requires_grad); a tensor fn returns unchanged is kept as is."""
        if recurse:
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
        """to(device), to(dtype), to(device, dtype), to(tensor), to(memory_format=...): moves/casts
        parameters and buffers (a dtype applies only to floating-point tensors, a memory format to
        the 4-D and 5-D ones). Parameters are replaced by new Parameter
        objects when they change, so build optimizers after moving a model."""
        device, dtype = kwargs.pop("device", None), kwargs.pop("dtype", None)
        memory_format = kwargs.pop("memory_format", None)
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
            if memory_format is not None and t.ndim in (4, 5):  # as torch: the 4-D and 5-D ones only
                t = t.to(memory_format=memory_format)
            if device is None:
                return t.to(d) if d is not None else t
            return t.to(device, d) if d is not None else t.to(device)

        return self._apply(convert)

    def to_empty(self, *, device, recurse=True):
        """Replaces parameters and buffers by uninitialised tensors of the same shape and dtype on
        `device` (for modules built on the meta device, then initialised in place)."""
        def empty(t):
            return tessera.empty_like(t, device=device)
        return self._apply(empty) if recurse else self._apply(empty, recurse=False)

    def share_memory(self):
        """Moves every parameter and buffer into shared memory (Tensor.share_memory_), in place:
        processes that get this module (fork, or tessera.multiprocessing) then train the same
        weights (Hogwild)."""
        for t in list(self.parameters()) + list(self.buffers()):
            t.share_memory_()
        return self

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
        """Writes this module's own parameters, persistent buffers and extra state (not its
        children's) into destination; overridden by modules that save differently."""
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()
        if type(self).get_extra_state is not Module.get_extra_state:
            destination[prefix + _EXTRA_STATE_KEY_SUFFIX] = self.get_extra_state()

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        """An OrderedDict from dotted names to the parameters and persistent buffers (detached
        tensors sharing their storage, unless keep_vars). Its _metadata attribute maps each
        module's prefix to {"version": module._version}, which load_state_dict hands back."""
        if args:  # positional (destination, prefix, keep_vars), as old torch code calls it
            if destination is None:
                destination = args[0]
            if len(args) > 1 and prefix == "":
                prefix = args[1]
            if len(args) > 2 and keep_vars is False:
                keep_vars = args[2]
        if destination is None:
            destination = OrderedDict()
            destination._metadata = OrderedDict()
        local_metadata = dict(version=self._version)
        if hasattr(destination, "_metadata"):
            destination._metadata[prefix[:-1]] = local_metadata
        for hook in self._state_dict_pre_hooks.values():
            hook(self, prefix, keep_vars)
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, m in self._modules.items():
            if m is not None:
                m.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
        for hook_id, hook in self._state_dict_hooks.items():
            r = hook(self, destination, prefix, local_metadata)
            if hook_id in self._state_dict_public_hooks or getattr(hook, "_from_public_api", False):
                if r is not None:
                    raise RuntimeError("state_dict post-hook must return None")
            elif r is not None:  # the private hook's replacement (torch honours it likewise)
                destination = r
        return destination

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        """Loads this module's own entries (keys prefix + name) from state_dict, appending to
        missing_keys / unexpected_keys / error_msgs; local_metadata["assign_to_params_buffers"]
        makes it assign the checkpoint's tensors instead of copying into the current ones.
        Overridden by modules whose saved form differs from their attributes."""
        for hook in self._load_state_dict_pre_hooks.values():
            hook(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)
        persistent_buffers = {k: v for k, v in self._buffers.items() if k not in self._non_persistent_buffers_set}
        local_state = {k: v for k, v in itertools.chain(self._parameters.items(), persistent_buffers.items())
                       if v is not None}
        assign = local_metadata.get("assign_to_params_buffers", False)
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
            # Checkpoints of torch < 0.4 stored scalars as 1-element vectors.
            if param.dim() == 0 and tuple(input_param.shape) == (1,):
                input_param = input_param[0]
            if tuple(input_param.shape) != tuple(param.shape):
                error_msgs.append(f"size mismatch for {key}: copying a param with shape {_shape_str(input_param)} "
                                  f"from checkpoint, the shape in current model is {_shape_str(param)}.")
                continue
            try:
                with _autograd.no_grad():
                    if assign:
                        if isinstance(param, Parameter):
                            wants_grad = _autograd.requires_grad(param) or not _autograd.has_autograd()
                            if isinstance(input_param, Parameter):
                                _autograd.set_requires_grad(input_param, wants_grad)
                            else:
                                input_param = Parameter(input_param, wants_grad)
                        setattr(self, name, input_param)
                    else:
                        param.copy_(input_param)
            except Exception as ex:  # noqa: BLE001  (reported with the others, as torch does)
                error_msgs.append(f'While copying the parameter named "{key}", whose dimensions in the model are '
                                  f"{_shape_str(param)} and whose dimensions in the checkpoint are "
                                  f"{_shape_str(input_param)}, an exception occurred : {ex.args}.")
        extra_key = prefix + _EXTRA_STATE_KEY_SUFFIX
        if type(self).set_extra_state is not Module.set_extra_state:
            if extra_key in state_dict:
                self.set_extra_state(state_dict[extra_key])
            elif strict:
                missing_keys.append(extra_key)
        elif strict and extra_key in state_dict:
            unexpected_keys.append(extra_key)
        if strict:
            for key in state_dict.keys():
                if key.startswith(prefix) and key != extra_key:
                    head = key[len(prefix):].split(".", 1)
                    # a dotted rest names a child's entry; the child checks the rest itself
                    if (head[0] not in self._modules) if len(head) > 1 else (head[0] not in local_state):
                        unexpected_keys.append(key)

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Copies parameters and buffers from state_dict into this module (in place, so optimizers
        keep working; assign=True takes the checkpoint's tensors instead). strict: the keys must
        match exactly (else RuntimeError listing the missing and unexpected keys). Returns
        _IncompatibleKeys(missing_keys, unexpected_keys)."""
        if not isinstance(state_dict, Mapping) and not (hasattr(state_dict, "keys")
                                                        and hasattr(state_dict, "__getitem__")):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing_keys, unexpected_keys, error_msgs = [], [], []
        metadata = getattr(state_dict, "_metadata", None)
        state_dict = OrderedDict((k, state_dict[k]) for k in state_dict.keys())  # a copy the pre-hooks may edit
        if metadata is not None:
            state_dict._metadata = metadata

        def load(module, local_state_dict, prefix=""):
            local_metadata = {} if metadata is None else dict(metadata.get(prefix[:-1], {}))
            if assign:
                local_metadata["assign_to_params_buffers"] = assign
            module._load_from_state_dict(local_state_dict, prefix, local_metadata, True, missing_keys,
                                         unexpected_keys, error_msgs)
            for name, child in module._modules.items():
                if child is not None:
                    child_prefix = prefix + name + "."
                    load(child, {k: v for k, v in local_state_dict.items() if k.startswith(child_prefix)},
                         child_prefix)
            incompatible = _IncompatibleKeys(missing_keys, unexpected_keys)
            for hook in module._load_state_dict_post_hooks.values():
                if hook(module, incompatible) is not None:
                    raise AssertionError("Hooks registered with ``register_load_state_dict_post_hook`` are not "
                                         "expected to return new values, if incompatible_keys need to be modified, "
                                         "it should be done inplace.")

        load(self, state_dict)
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
        state = self.__dict__.copy()
        state.pop("_compiled_call_impl", None)  # a compiled call is rebuilt by compile(), not pickled
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        # Modules pickled before the hook tables existed get empty ones.
        for key, value in _fresh_hook_tables().items():
            self.__dict__.setdefault(key, value)
        self.__dict__.setdefault("_non_persistent_buffers_set", set())


def _fresh_hook_tables():
    return {
        "_forward_pre_hooks": OrderedDict(), "_forward_pre_hooks_with_kwargs": OrderedDict(),
        "_forward_hooks": OrderedDict(), "_forward_hooks_with_kwargs": OrderedDict(),
        "_forward_hooks_always_called": OrderedDict(),
        "_backward_pre_hooks": OrderedDict(), "_backward_hooks": OrderedDict(), "_is_full_backward_hook": None,
        "_state_dict_pre_hooks": OrderedDict(), "_state_dict_hooks": OrderedDict(), "_state_dict_public_hooks": set(),
        "_load_state_dict_pre_hooks": OrderedDict(), "_load_state_dict_post_hooks": OrderedDict(),
    }


def _module_registered(parent, name, module):
    for hook in _global_module_registration_hooks.values():
        out = hook(parent, name, module)
        if out is not None:
            module = out
    return module


def _shape_str(t):
    return "tessera.Size([" + ", ".join(str(s) for s in t.shape) + "])"


_HOOK_FUNCTION = []


def _hook_function():
    """The identity autograd Function that full backward hooks wrap around a module's inputs and
    outputs (made on first use: tessera.autograd may load after this module)."""
    if not _HOOK_FUNCTION:
        from tessera.autograd import Function

        class BackwardHookFunction(Function):
            @staticmethod
            def forward(ctx, on_backward, *tensors):
                ctx.on_backward = on_backward
                ctx.set_materialize_grads(False)
                return tensors

            @staticmethod
            def backward(ctx, *grads):
                return (None,) + tuple(ctx.on_backward(grads))

        _HOOK_FUNCTION.append(BackwardHookFunction)
    return _HOOK_FUNCTION[0]


class _BackwardHook:
    """One module call's full backward hooks. The outputs' node sees grad_output first: it runs the
    pre-hooks and keeps grad_output; the inputs' node then runs the hooks with grad_input. When no
    input requires grad there is no inputs' node, so the hooks run at the outputs' node."""

    def __init__(self, module, hooks, pre_hooks):
        self.module, self.hooks, self.pre_hooks = module, hooks, pre_hooks
        self.grad_outputs = None
        self.n_inputs = self.n_outputs = 0
        self.input_positions = self.output_positions = None  # None: nothing there needs a gradient

    @staticmethod
    def _wrap(values, on_backward, mark_none):
        positions = [i for i, v in enumerate(values) if isinstance(v, _Tensor) and _autograd.requires_grad(v)]
        if not positions or not _autograd.is_grad_enabled():
            return values, None, None
        wrapped = _hook_function().apply(on_backward, *(values[i] for i in positions))
        got_none = [False] * len(positions)
        if mark_none:
            # The engine hands a node zeros for an output that got no gradient, where torch's
            # grad_output has None. A tensor hook sees that None and marks the slot. (grad_input
            # keeps the zeros: torch's materialise there too.)
            for k, t in enumerate(wrapped):
                t.register_hook(_mark_none(got_none, k))
        out = list(values)
        for i, t in zip(positions, wrapped):
            out[i] = t
        return tuple(out), positions, got_none

    @staticmethod
    def _spread(positions, grads, got_none, n):
        full = [None] * n
        for k, (i, g) in enumerate(zip(positions, grads)):
            full[i] = None if got_none[k] else g
            got_none[k] = False  # reset for the next backward through a retained graph
        return tuple(full)

    def setup_inputs(self, args):
        self.n_inputs = len(args)
        args, self.input_positions, self._inputs_none = self._wrap(args, self._inputs_backward, False)
        return args

    def setup_outputs(self, result):
        single = not isinstance(result, tuple)
        outs = (result,) if single else result
        self.n_outputs = len(outs)
        outs, self.output_positions, self._outputs_none = self._wrap(outs, self._outputs_backward, True)
        return outs[0] if single else outs

    def _outputs_backward(self, grads):
        grad_outputs = self._spread(self.output_positions, grads, self._outputs_none, self.n_outputs)
        for hook in self.pre_hooks:
            r = hook(self.module, grad_outputs)
            if r is None:
                continue
            r = (r,) if isinstance(r, _Tensor) else tuple(r)
            if len(r) != len(grad_outputs):
                raise RuntimeError("Backward pre hook returned an invalid number of grad_output, got "
                                   f"{len(r)}, but expected {len(grad_outputs)}")
            grad_outputs = r
        if self.input_positions is None and self.hooks:
            warnings.warn("Full backward hook is firing when gradients are computed with respect to module outputs "
                          "since no inputs require gradients (grad_input is all None)", stacklevel=2)
            grad_inputs = (None,) * self.n_inputs
            for hook in self.hooks:
                r = hook(self.module, grad_inputs, grad_outputs)
                if r is not None and not (isinstance(r, tuple) and all(g is None for g in r)):
                    raise RuntimeError("Backward hook for Modules where no input requires gradient should always "
                                       "return None or None for all gradients.")
        elif self.input_positions is not None:
            self.grad_outputs = grad_outputs
        return [grad_outputs[i] for i in self.output_positions]

    def _inputs_backward(self, grads):
        grad_inputs = self._spread(self.input_positions, grads, self._inputs_none, self.n_inputs)
        if self.grad_outputs is None:  # the outputs' gradients never came through this call
            return [grad_inputs[i] for i in self.input_positions]
        for hook in self.hooks:
            r = hook(self.module, grad_inputs, self.grad_outputs)
            if r is None:
                continue
            r = (r,) if isinstance(r, _Tensor) else tuple(r)
            if len(r) != len(grad_inputs):
                raise RuntimeError("Backward hook returned an invalid number of grad_input, got "
                                   f"{len(r)}, but expected {len(grad_inputs)}")
            grad_inputs = r
        self.grad_outputs = None
        return [grad_inputs[i] for i in self.input_positions]


def _mark_none(got_none, k):
    def hook(grad):
        got_none[k] = grad is None
    return hook

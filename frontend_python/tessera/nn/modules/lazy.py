"""Lazy modules: layers whose input size (in_features, in_channels, num_features) is inferred from
the first input (torch.nn.modules.lazy and the Lazy* classes of linear, conv, batchnorm and
instancenorm). Their weights are UninitializedParameters until the first forward (or a
load_state_dict) materialises them; then the module becomes its ordinary class (LazyLinear ->
Linear).

Unlike torch, materialising replaces the uninitialised Parameter object by a new one (tessera's
tensors cannot change shape in place): build optimizers after the first forward, as torch's
documentation advises anyway."""
import importlib
import itertools

import tessera
from tessera.nn import _autograd, init
from tessera.nn.modules.conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from tessera.nn.modules.instancenorm import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d
from tessera.nn.modules.linear import Linear
from tessera.nn.modules.normalization import BatchNorm1d, BatchNorm2d, BatchNorm3d
from tessera.nn.parameter import UninitializedBuffer, UninitializedParameter, is_lazy

# LazyModuleMixin is not a torch.nn name (only torch.nn.modules.lazy's), so it stays out of __all__.
__all__ = ["LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d", "LazyConv1d", "LazyConv2d", "LazyConv3d",
           "LazyConvTranspose1d", "LazyConvTranspose2d", "LazyConvTranspose3d", "LazyInstanceNorm1d",
           "LazyInstanceNorm2d", "LazyInstanceNorm3d", "LazyLinear"]


def _materialize(module, name, shape):
    """Replaces module.<name>, an uninitialised parameter or buffer, by its materialised tensor of
    `shape` (a buffer keeps its persistence)."""
    if name in module._parameters:
        module._parameters[name] = module._parameters[name].materialize(shape)
    else:
        module._buffers[name] = module._buffers[name].materialize(shape)


class LazyModuleMixin:
    """Mixed in before a module class: registers a forward pre-hook that calls
    initialize_parameters(*args, **kwargs) on the first call, then turns the module into
    cls_to_become; and a load_state_dict pre-hook that materialises uninitialised tensors to the
    checkpoint's shapes."""

    cls_to_become = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._load_hook = self._register_load_state_dict_pre_hook(self._lazy_load_hook)
        self._initialize_hook = self.register_forward_pre_hook(self._infer_parameters, with_kwargs=True)

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        super()._save_to_state_dict(destination, prefix, keep_vars)
        # uninitialised tensors are saved as themselves (torch: not detached)
        for name, t in itertools.chain(self._parameters.items(), self._buffers.items()):
            if is_lazy(t) and (name in self._parameters or name not in self._non_persistent_buffers_set):
                destination[prefix + name] = t

    def _lazy_load_hook(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs):
        for name, t in list(itertools.chain(self._parameters.items(), self._buffers.items())):
            key = prefix + name
            if key in state_dict and t is not None and is_lazy(t) and not is_lazy(state_dict[key]):
                with _autograd.no_grad():
                    _materialize(self, name, tuple(state_dict[key].shape))

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        # An uninitialised entry loaded into an uninitialised tensor leaves it so (nothing to copy).
        both_lazy = {prefix + n for n, t in itertools.chain(self._parameters.items(), self._buffers.items())
                     if is_lazy(t) and is_lazy(state_dict.get(prefix + n))}
        if both_lazy:
            state_dict = {k: v for k, v in state_dict.items() if k not in both_lazy}
        first = len(missing_keys)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)
        missing_keys[first:] = [k for k in missing_keys[first:] if k not in both_lazy]

    def _apply(self, fn, recurse=True):
        # to()/float()/... keep an uninitialised tensor uninitialised, with fn's device and dtype.
        lazy = []
        for table in (self._parameters, self._buffers):
            for name, t in table.items():
                if is_lazy(t):
                    lazy.append((table, name, t))
                    table[name] = None
        try:
            super()._apply(fn, recurse)
        finally:
            for table, name, t in lazy:
                with _autograd.no_grad():
                    probe = fn(tessera.Tensor.detach(t))
                new = type(t)(_autograd.requires_grad(t), probe.device, probe.dtype)
                if isinstance(t, UninitializedBuffer):
                    new.persistent = getattr(t, "persistent", True)
                table[name] = new
        return self

    def initialize_parameters(self, *args, **kwargs):
        """Materialises the uninitialised tensors from the first input (each lazy class defines it)."""
        raise NotImplementedError(f"initialize_parameters is not implemented for {self.__class__.__name__}")

    def has_uninitialized_params(self):
        """Whether any parameter or buffer is still uninitialised."""
        return any(is_lazy(t) for t in itertools.chain(self._parameters.values(), self._buffers.values()))

    def _infer_parameters(self, module, args, kwargs=None):
        kwargs = kwargs if kwargs else {}
        module.initialize_parameters(*args, **kwargs)
        if module.has_uninitialized_params():
            raise RuntimeError(f"module {self._get_name()} has not been fully initialized")
        module._initialize_hook.remove()
        module._load_hook.remove()
        delattr(module, "_initialize_hook")
        delattr(module, "_load_hook")
        if module.cls_to_become is not None:
            module.__class__ = module.cls_to_become

    def _replicate_for_data_parallel(self):
        raise RuntimeError("Modules with uninitialized parameters can't be used with `DataParallel`. Run a dummy "
                           "forward pass to correctly initialize the modules")


# ---------------------------------------------------------------------------- linear
class LazyLinear(LazyModuleMixin, Linear):
    """Linear with in_features inferred from the first input's last dim."""

    cls_to_become = Linear

    def __init__(self, out_features, bias=True, device=None, dtype=None):
        super().__init__(0, 0, False)  # no bias yet: it is made uninitialised below
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_features = out_features
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input):
        if self.has_uninitialized_params():
            with _autograd.no_grad():
                self.in_features = input.shape[-1]
                _materialize(self, "weight", (self.out_features, self.in_features))
                if self.bias is not None:
                    _materialize(self, "bias", (self.out_features,))
                self.reset_parameters()
        if self.in_features == 0:
            if input.shape[-1] != self.weight.shape[-1]:
                raise AssertionError(f"The in_features inferred from input: {input.shape[-1]} is not equal to "
                                     f"in_features from self.weight: {self.weight.shape[-1]}")
            self.in_features = input.shape[-1]


# ---------------------------------------------------------------------------- convolutions
class _LazyConvXdMixin(LazyModuleMixin):
    # the number of spatial dims is the convolution class's _n
    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.in_channels != 0:
            super().reset_parameters()

    def initialize_parameters(self, input, *args, **kwargs):
        if self.has_uninitialized_params():
            self.in_channels = self._get_in_channels(input)
            if self.in_channels % self.groups != 0:
                raise ValueError(f"{self._get_name()}: in_channels must be divisible by groups, got in_channels "
                                 f"{self.in_channels} and groups {self.groups}")
            with _autograd.no_grad():
                if self._transposed:
                    shape = (self.in_channels, self.out_channels // self.groups, *self.kernel_size)
                else:
                    shape = (self.out_channels, self.in_channels // self.groups, *self.kernel_size)
                _materialize(self, "weight", shape)
                if self.bias is not None:
                    _materialize(self, "bias", (self.out_channels,))
                self.reset_parameters()

    def _get_in_channels(self, input):
        no_batch = self._n + 1
        if input.dim() not in (no_batch, no_batch + 1):
            raise RuntimeError(f"Expected {no_batch}D (unbatched) or {no_batch + 1}D (batched) input to "
                               f"{self.__class__.__name__}, but got input of size: {list(input.shape)}")
        return input.shape[1] if input.dim() == no_batch + 1 else input.shape[0]


def _lazy_conv_init(self, out_channels, bias, device, dtype):
    self.weight = UninitializedParameter(device=device, dtype=dtype)
    self.out_channels = out_channels
    if bias:
        self.bias = UninitializedParameter(device=device, dtype=dtype)


class LazyConv1d(_LazyConvXdMixin, Conv1d):
    """Conv1d with in_channels inferred from the first input (dim 1, or 0 unbatched)."""

    cls_to_become = Conv1d

    def __init__(self, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        super().__init__(0, 0, kernel_size, stride, padding, dilation, groups, False, padding_mode, device, dtype)
        _lazy_conv_init(self, out_channels, bias, device, dtype)


class LazyConv2d(_LazyConvXdMixin, Conv2d):
    """Conv2d with in_channels inferred from the first input."""

    cls_to_become = Conv2d

    def __init__(self, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        super().__init__(0, 0, kernel_size, stride, padding, dilation, groups, False, padding_mode, device, dtype)
        _lazy_conv_init(self, out_channels, bias, device, dtype)


class LazyConv3d(_LazyConvXdMixin, Conv3d):
    """Conv3d with in_channels inferred from the first input."""

    cls_to_become = Conv3d

    def __init__(self, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        super().__init__(0, 0, kernel_size, stride, padding, dilation, groups, False, padding_mode, device, dtype)
        _lazy_conv_init(self, out_channels, bias, device, dtype)


class _LazyConvTransposeMixin(_LazyConvXdMixin):
    def __init__(self, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1, bias=True,
                 dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__(0, 0, kernel_size, stride, padding, output_padding, groups, False, dilation, padding_mode,
                         device, dtype)
        _lazy_conv_init(self, out_channels, bias, device, dtype)


class LazyConvTranspose1d(_LazyConvTransposeMixin, ConvTranspose1d):
    """ConvTranspose1d with in_channels inferred from the first input."""

    cls_to_become = ConvTranspose1d


class LazyConvTranspose2d(_LazyConvTransposeMixin, ConvTranspose2d):
    """ConvTranspose2d with in_channels inferred from the first input."""

    cls_to_become = ConvTranspose2d


class LazyConvTranspose3d(_LazyConvTransposeMixin, ConvTranspose3d):
    """ConvTranspose3d with in_channels inferred from the first input."""

    cls_to_become = ConvTranspose3d


# ---------------------------------------------------------------------------- normalization
class _LazyNormBase(LazyModuleMixin):
    """num_features inferred from the first input's dim 1 (weight, bias, running_mean and
    running_var uninitialised until then; num_batches_tracked is a plain 0 buffer)."""

    def __init__(self, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None, dtype=None):
        super().__init__(0, eps, momentum, False, False, device, dtype)
        self.affine = affine
        self.track_running_stats = track_running_stats
        if self.affine:
            self.weight = UninitializedParameter(device=device, dtype=dtype)
            self.bias = UninitializedParameter(device=device, dtype=dtype)
        if self.track_running_stats:
            self.running_mean = UninitializedBuffer(device=device, dtype=dtype)
            self.running_var = UninitializedBuffer(device=device, dtype=dtype)
            self.num_batches_tracked = tessera.tensor(0, dtype=tessera.int64, device=device)

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.num_features != 0:
            if self.track_running_stats:
                self.running_mean.zero_()
                self.running_var.fill_(1)
                self.num_batches_tracked.zero_()
            if self.affine:
                init.ones_(self.weight)
                init.zeros_(self.bias)

    def initialize_parameters(self, input):
        if self.has_uninitialized_params():
            if input.dim() < 2:
                raise ValueError(f"{self._get_name()}: expected an input with a channel dim (N, C, ...), got "
                                 f"{input.dim()}D input")
            self.num_features = input.shape[1]
            with _autograd.no_grad():
                if self.affine:
                    _materialize(self, "weight", (self.num_features,))
                    if self.bias is not None:
                        _materialize(self, "bias", (self.num_features,))
                if self.track_running_stats:
                    _materialize(self, "running_mean", (self.num_features,))
                    _materialize(self, "running_var", (self.num_features,))
                self.reset_parameters()


class LazyBatchNorm1d(_LazyNormBase, BatchNorm1d):
    """BatchNorm1d with num_features inferred from the first input."""

    cls_to_become = BatchNorm1d


class LazyBatchNorm2d(_LazyNormBase, BatchNorm2d):
    """BatchNorm2d with num_features inferred from the first input."""

    cls_to_become = BatchNorm2d


class LazyBatchNorm3d(_LazyNormBase, BatchNorm3d):
    """BatchNorm3d with num_features inferred from the first input."""

    cls_to_become = BatchNorm3d


class _LazyInstanceNorm(_LazyNormBase):
    def __init__(self, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None, dtype=None):
        super().__init__(eps, momentum, affine, track_running_stats, device, dtype)
        self._has_bias = affine

    def initialize_parameters(self, input):
        if self.has_uninitialized_params() and input.dim() == self._spatial + 1:  # unbatched: channels are dim 0
            input = input.unsqueeze(0)
        super().initialize_parameters(input)


class LazyInstanceNorm1d(_LazyInstanceNorm, InstanceNorm1d):
    """InstanceNorm1d with num_features inferred from the first input."""

    cls_to_become = InstanceNorm1d


class LazyInstanceNorm2d(_LazyInstanceNorm, InstanceNorm2d):
    """InstanceNorm2d with num_features inferred from the first input."""

    cls_to_become = InstanceNorm2d


class LazyInstanceNorm3d(_LazyInstanceNorm, InstanceNorm3d):
    """InstanceNorm3d with num_features inferred from the first input."""

    cls_to_become = InstanceNorm3d


# torch's import paths name each Lazy class in its family's file (torch.nn.modules.conv.LazyConv2d,
# ...); they are defined here, after those files, and set there as attributes.
for _family, _names in (("linear", ["LazyLinear"]),
                        ("conv", ["LazyConv1d", "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d",
                                  "LazyConvTranspose2d", "LazyConvTranspose3d"]),
                        ("batchnorm", ["LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d"]),
                        ("instancenorm", ["LazyInstanceNorm1d", "LazyInstanceNorm2d", "LazyInstanceNorm3d"])):
    _module = importlib.import_module(f"tessera.nn.modules.{_family}")
    for _name in _names:
        setattr(_module, _name, globals()[_name])
del _family, _names, _module, _name

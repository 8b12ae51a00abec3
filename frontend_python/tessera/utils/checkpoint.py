"""torch.utils.checkpoint: activation checkpointing. The checkpointed function runs without
recording a graph (its activations are not kept); the backward pass runs it again, with the
random generator's state as it was (dropout draws the same masks), and backpropagates through
that recomputation. Parameters the function uses get their gradients from it as usual.

A context_fn (use_reentrant=False) gives two context managers: the first is entered around the
forward run, the second around the recomputation. Selective activation checkpointing (contexts
from create_selective_checkpoint_contexts that decide per operator call whether to save or
recompute) needs per-operator dispatch hooks below autograd that Tessera does not have: creating
them raises NotImplementedError."""
import contextlib
import enum
import warnings

import tessera
from tessera.autograd import Function

__all__ = ["CheckpointError", "CheckpointFunction", "CheckpointPolicy", "checkpoint", "checkpoint_sequential",
           "create_selective_checkpoint_contexts", "detach_variable", "get_device_states", "noop_context_fn",
           "set_checkpoint_debug_enabled", "set_checkpoint_early_stop", "set_device_states"]

_flags = {"early_stop": True, "debug": None}  # recorded: the recomputation always runs the whole function


class CheckpointError(RuntimeError):
    """A checkpointed function's recomputation disagreed with its first run."""


class CheckpointPolicy(enum.Enum):
    MUST_SAVE = 0
    PREFER_SAVE = 1
    MUST_RECOMPUTE = 2
    PREFER_RECOMPUTE = 3
    MUST_CPU_OFFLOAD = 4
    PREFER_CPU_OFFLOAD = 5


def noop_context_fn():
    """context_fn's default: no context around either the forward run or the recomputation."""
    return contextlib.nullcontext(), contextlib.nullcontext()


def create_selective_checkpoint_contexts(policy_fn_or_list, allow_cache_entry_mutation=False):
    if not (callable(policy_fn_or_list) or isinstance(policy_fn_or_list, list)):
        raise TypeError("policy_fn_or_list must be either a function or a list of ops.")
    raise NotImplementedError("create_selective_checkpoint_contexts: selective activation checkpointing decides per "
                              "operator call whether to save or recompute, which needs per-operator dispatch hooks "
                              "that Tessera does not have; call checkpoint without context_fn (every activation is "
                              "recomputed, with the same results)")


@contextlib.contextmanager
def set_checkpoint_early_stop(enable):
    """Whether the recomputation may stop once it has what backward needs (recorded: Tessera's runs
    the whole function either way, with the same results)."""
    previous = _flags["early_stop"]
    _flags["early_stop"] = bool(enable)
    try:
        yield
    finally:
        _flags["early_stop"] = previous


@contextlib.contextmanager
def set_checkpoint_debug_enabled(enabled):
    """checkpoint's debug= overridden inside the block (None: each call's own)."""
    previous = _flags["debug"]
    _flags["debug"] = enabled
    try:
        yield
    finally:
        _flags["debug"] = previous


def detach_variable(inputs):
    """The tensors of tuple inputs detached, requiring grad where the originals did (the
    recomputation's leaves); other elements as they are."""
    if not isinstance(inputs, tuple):
        raise RuntimeError(f"Only tuple of tensors is supported. Got Unsupported input type: {type(inputs).__name__}")
    out = []
    for a in inputs:
        if isinstance(a, tessera.Tensor):
            d = a.detach()
            d.requires_grad_(a.requires_grad)
            out.append(d)
        else:
            out.append(a)
    return tuple(out)


def _accelerator_devices(args):
    devices = []
    for a in args:
        if isinstance(a, tessera.Tensor) and a.device.type != "cpu" and a.device not in devices:
            devices.append(a.device)
    return devices


def get_device_states(*args):
    """(device ids, RNG states) of the accelerator devices the tensor arguments are on."""
    devices = _accelerator_devices(args)
    return [d.index or 0 for d in devices], [tessera._C._default_generator(d).get_state() for d in devices]


def set_device_states(devices, states, *, device_type=None):
    """Restores get_device_states' RNG states."""
    from tessera.accelerator import current_accelerator
    if device_type is None:
        accelerator = current_accelerator()
        device_type = accelerator.type if accelerator is not None else "cuda"
    for index, state in zip(devices, states):
        tessera._C._default_generator(tessera.device(device_type, index)).set_state(state)


class _CheckpointFunction(Function):
    @staticmethod
    def forward(ctx, run_function, preserve_rng_state, kwargs, *args):
        ctx.run_function, ctx.kwargs, ctx.preserve_rng_state = run_function, kwargs, preserve_rng_state
        ctx.rng_state = tessera.get_rng_state() if preserve_rng_state else None
        ctx.tensor_positions = [i for i, a in enumerate(args) if isinstance(a, tessera.Tensor)]
        ctx.others = [None if isinstance(a, tessera.Tensor) else a for a in args]
        ctx.save_for_backward(*[args[i] for i in ctx.tensor_positions])
        with tessera.no_grad():
            return run_function(*args, **kwargs)

    @staticmethod
    def backward(ctx, *grads):
        args = list(ctx.others)
        for i, t in zip(ctx.tensor_positions, ctx.saved_tensors):
            args[i] = t
        inputs = list(detach_variable(tuple(args)))
        saved_rng = tessera.get_rng_state() if ctx.preserve_rng_state else None
        try:
            if ctx.preserve_rng_state:
                tessera.set_rng_state(ctx.rng_state)
            with tessera.enable_grad():
                outputs = ctx.run_function(*inputs, **ctx.kwargs)
        finally:
            if saved_rng is not None:
                tessera.set_rng_state(saved_rng)
        if isinstance(outputs, tessera.Tensor):
            outputs = (outputs,)
        pairs = [(o, g) for o, g in zip(outputs, grads)
                 if isinstance(o, tessera.Tensor) and o.requires_grad and g is not None]
        if not pairs:
            raise RuntimeError("checkpoint: none of the checkpointed function's outputs requires grad, so there is "
                               "nothing to backpropagate (does any input or parameter it uses require grad?)")
        tessera.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
        input_grads = tuple(a.grad if isinstance(a, tessera.Tensor) and a.requires_grad else None for a in inputs)
        return (None, None, None) + input_grads


class CheckpointFunction(Function):
    """torch's reentrant checkpoint as an autograd Function: apply(run_function, preserve_rng_state, *args)."""

    @staticmethod
    def forward(ctx, run_function, preserve_rng_state, *args):
        return _CheckpointFunction.forward(ctx, run_function, preserve_rng_state, {}, *args)

    @staticmethod
    def backward(ctx, *grads):
        return _CheckpointFunction.backward(ctx, *grads)[1:]  # no gradient slot for the kwargs


def checkpoint(function, *args, use_reentrant=None, context_fn=noop_context_fn, determinism_check="default",
               debug=False, preserve_rng_state=True, **kwargs):
    """function(*args, **kwargs) without keeping its activations: they are recomputed in backward.
    Tensors in args are checkpoint inputs; keyword arguments are passed through."""
    if use_reentrant is None:
        warnings.warn("torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly; both "
                      "values run the same recomputation here", stacklevel=2)
    custom_context = context_fn is not None and context_fn is not noop_context_fn
    if use_reentrant and (custom_context or debug):
        raise ValueError("Passing `context_fn`, `debug`, or `respect_saved_tensors_hooks` is only supported when "
                         "use_reentrant=False.")
    if not tessera.is_grad_enabled():
        return function(*args, **kwargs)
    if custom_context:
        function = _in_contexts(function, *context_fn())
    return _CheckpointFunction.apply(function, preserve_rng_state, kwargs, *args)


def _in_contexts(function, forward_context, recompute_context):
    """function, run inside forward_context the first time (the forward) and inside
    recompute_context after (the recomputation in backward)."""
    runs = []

    def run(*args, **kwargs):
        with forward_context if not runs else recompute_context:
            runs.append(1)
            return function(*args, **kwargs)
    return run


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    """Runs `functions` (a Sequential or a list of modules) in `segments` checkpointed pieces; the last
    piece is not checkpointed (its activations are needed at once), as torch does."""
    if isinstance(functions, tessera.nn.Sequential):
        functions = list(functions.children())
    functions = list(functions)
    if segments <= 0:
        raise ValueError(f"checkpoint_sequential: expected segments > 0, got {segments}")
    size = len(functions) // segments
    end = -1

    def run(start, stop):
        def forward(x):
            for f in functions[start:stop + 1]:
                x = f(x)
            return x
        return forward

    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(run(start, end), input, use_reentrant=True if use_reentrant is None else use_reentrant,
                           **kwargs)
    return run(end + 1, len(functions) - 1)(input)

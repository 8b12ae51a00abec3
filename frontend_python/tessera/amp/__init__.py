"""tessera.amp: automatic mixed precision, as torch.amp. `autocast` runs matrix products and
convolutions in float16 / bfloat16 and keeps reductions, softmax, norms and losses in float32
(the policy lists are in the autocast plugin, libtessera_autocast.so); `GradScaler` scales the
loss so that float16 gradients do not underflow, and skips steps whose gradients overflowed."""
from tessera.amp.autocast_mode import (
    autocast, get_autocast_dtype, is_autocast_available, is_autocast_enabled, set_autocast_dtype,
    set_autocast_enabled,
)
from tessera.amp.grad_scaler import GradScaler

__all__ = ["autocast", "GradScaler", "is_autocast_available", "is_autocast_enabled", "get_autocast_dtype",
           "set_autocast_enabled", "set_autocast_dtype", "custom_fwd", "custom_bwd"]


def custom_fwd(fwd=None, *, device_type="cuda", cast_inputs=None):
    """torch.amp.custom_fwd: runs an autograd.Function's forward with autocast off (inputs cast
    to cast_inputs first when given), as torch does for custom functions under autocast."""
    import functools

    import tessera

    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def wrapper(*args, **kwargs):
        if cast_inputs is None or not is_autocast_enabled(device_type):
            return fwd(*args, **kwargs)
        cast = (lambda v: v.to(cast_inputs) if isinstance(v, tessera.Tensor) and v.is_floating_point() else v)
        with autocast(device_type, enabled=False):
            return fwd(*[cast(a) for a in args], **{k: cast(v) for k, v in kwargs.items()})
    return wrapper


def custom_bwd(bwd=None, *, device_type="cuda"):
    """torch.amp.custom_bwd: the backward runs as it is (tessera's backward is not under autocast)."""
    if bwd is None:
        import functools
        return functools.partial(custom_bwd, device_type=device_type)
    return bwd

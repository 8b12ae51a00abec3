"""scatter / gather: splitting a batch (tensors inside tuples, lists and dicts) into one chunk per
device along dim, and concatenating the per-device outputs back on one device. An int device is
CUDA's when it has one, else the tensor's own device: on the CPU this is single-device chunking."""
import tessera

__all__ = ["gather", "scatter", "scatter_kwargs"]


def _device(d, like):
    if d is None or (isinstance(d, int) and d < 0 and d != -1):
        return like.device
    if isinstance(d, int):
        if d == -1:
            return tessera.device("cpu")
        return tessera.device("cuda", d) if tessera.cuda.is_available() else like.device
    return tessera.device(d) if isinstance(d, str) else d


def scatter(inputs, target_gpus, dim=0):
    """inputs split into len(target_gpus) pieces: tensors chunked along dim (each chunk on its
    device), tuples, lists and dicts split element by element, other objects repeated."""
    def split(obj):
        if isinstance(obj, tessera.Tensor):
            return [c.to(_device(d, obj)) for c, d in zip(obj.chunk(len(target_gpus), dim), target_gpus)]
        if isinstance(obj, tuple) and obj and hasattr(obj, "_fields"):  # a namedtuple keeps its type
            return [type(obj)(*parts) for parts in zip(*map(split, obj))]
        if isinstance(obj, tuple) and obj:
            return list(zip(*map(split, obj)))
        if isinstance(obj, list) and obj:
            return [list(parts) for parts in zip(*map(split, obj))]
        if isinstance(obj, dict) and obj:
            return [type(obj)(parts) for parts in zip(*map(split, obj.items()))]
        return [obj for _ in target_gpus]

    try:
        return split(inputs)
    finally:
        split = None  # the closure refers to itself: break the cycle, as torch does


def scatter_kwargs(inputs, kwargs, target_gpus, dim=0):
    """scatter of the positional and keyword arguments, padded to the same number of pieces."""
    scattered_inputs = scatter(inputs, target_gpus, dim) if inputs else []
    scattered_kwargs = scatter(kwargs, target_gpus, dim) if kwargs else []
    if len(scattered_inputs) < len(scattered_kwargs):
        scattered_inputs.extend(() for _ in range(len(scattered_kwargs) - len(scattered_inputs)))
    elif len(scattered_kwargs) < len(scattered_inputs):
        scattered_kwargs.extend({} for _ in range(len(scattered_inputs) - len(scattered_kwargs)))
    return tuple(scattered_inputs), tuple(scattered_kwargs)


def gather(outputs, target_device, dim=0):
    """The per-device outputs joined: tensors concatenated along dim on target_device (-1: the
    CPU), tuples and dicts gathered element by element, None stays None."""
    def join(outs):
        out = outs[0]
        if isinstance(out, tessera.Tensor):
            device = _device(target_device, out)
            return tessera.cat([o.to(device) for o in outs], dim)
        if out is None:
            return None
        if isinstance(out, dict):
            if not all(len(out) == len(d) for d in outs):
                raise ValueError("All dicts must have the same number of keys")
            return type(out)((k, join([d[k] for d in outs])) for k in out)
        if isinstance(out, tuple) and hasattr(out, "_fields"):
            return type(out)(*map(join, zip(*outs)))
        return type(out)(map(join, zip(*outs)))

    try:
        return join(outputs)
    finally:
        join = None

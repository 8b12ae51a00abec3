"""default_convert and default_collate: samples to batches."""
import collections.abc

import tessera

_Tensor = tessera.Tensor


def _in_worker():
    from tessera.utils.data._worker import get_worker_info
    return get_worker_info() is not None


# ---------------------------------------------------------------------------- collation
def default_convert(data):
    if isinstance(data, _Tensor):
        return data
    if type(data).__module__ == "numpy" and hasattr(data, "dtype") and data.dtype.kind not in "SUO":
        return tessera.as_tensor(data)
    if isinstance(data, collections.abc.Mapping):
        return type(data)({k: default_convert(v) for k, v in data.items()})
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, (list, tuple)):
        return type(data)(default_convert(d) for d in data)
    return data


def default_collate(batch):
    """Stacks a list of samples into a batch: tensors (and NumPy arrays) are stacked along a new
    dim 0, Python floats become float64 tensors, ints int64, bools bool; tuples, lists, named
    tuples and dicts are collated field by field; strings stay lists."""
    elem = batch[0]
    if isinstance(elem, _Tensor):
        shapes = {tuple(b.shape) for b in batch}
        if len(shapes) != 1:
            raise RuntimeError(f"default_collate: stack expects each tensor to be equal size, but got shapes "
                               f"{sorted(shapes)}")
        if elem.device.type == "cpu" and _in_worker():
            # Stacked straight into shared memory: the batch then crosses to the parent without a copy.
            out = tessera.empty((len(batch),) + tuple(elem.shape), dtype=elem.dtype).share_memory_()
            return tessera.stack(list(batch), 0, out=out)
        return tessera.stack(list(batch), 0)
    if type(elem).__module__ == "numpy" and hasattr(elem, "dtype"):
        if elem.dtype.kind in "SUO":
            raise TypeError(f"default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; "
                            f"found {elem.dtype}")
        if getattr(elem, "shape", ()) == ():  # NumPy scalar
            return tessera.as_tensor(__import__("numpy").asarray(batch))
        return default_collate([tessera.as_tensor(b) for b in batch])
    if isinstance(elem, bool):
        return tessera.tensor(batch, dtype=tessera.bool)
    if isinstance(elem, float):
        return tessera.tensor(batch, dtype=tessera.float64)
    if isinstance(elem, int):
        return tessera.tensor(batch, dtype=tessera.int64)
    if isinstance(elem, (str, bytes)):
        return list(batch)
    if isinstance(elem, collections.abc.Mapping):
        return type(elem)({key: default_collate([d[key] for d in batch]) for key in elem})
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):
        return type(elem)(*(default_collate(samples) for samples in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        if any(len(e) != size for e in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        transposed = list(zip(*batch))
        if isinstance(elem, tuple):
            return [default_collate(samples) for samples in transposed]
        return [default_collate(samples) for samples in transposed]
    raise TypeError(f"default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found "
                    f"{type(elem)}")


# ---------------------------------------------------------------------------- DataLoader
def _pin_batch(batch, device):
    """The batch with every CPU tensor in it copied to page-locked memory of `device`."""
    if isinstance(batch, _Tensor):
        return batch.pin_memory(device) if batch.device.type == "cpu" else batch
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(_pin_batch(b, device) for b in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(_pin_batch(b, device) for b in batch)
    if isinstance(batch, dict):
        return {k: _pin_batch(v, device) for k, v in batch.items()}
    return batch

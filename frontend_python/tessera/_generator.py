"""torch.Generator and the global RNG state functions. A Generator is a seed stream on the host;
while a call runs inside `with g:` (what `generator=g` arguments do), every kernel seed comes from
it, on any device and through composite operators too."""
import contextlib

from tessera import _C

Generator = _C.Generator


def _get_state(self):
    """The generator's state as a uint8 tensor (set_state restores it)."""
    from tessera._factories import tensor
    from tessera._dtypes import uint8
    return tensor(list(self._state_bytes()), dtype=uint8)


def _set_state(self, new_state):
    if not isinstance(new_state, _C.Tensor) or new_state.dtype.name != "uint8":
        raise TypeError(f"Generator.set_state: expected a torch.ByteTensor (uint8), got {type(new_state).__name__}"
                        + (f" of dtype {new_state.dtype.name}" if isinstance(new_state, _C.Tensor) else ""))
    self._set_state_bytes(bytes(new_state.tolist()))
    return self


Generator.get_state = _get_state
Generator.set_state = _set_state
Generator.device = property(lambda self: _C.device(self._device_str))
Generator.__doc__ = "Generator(device='cpu'): a seedable random stream (torch.Generator)."

default_generator = _C._default_generator()  # the CPU's (naming no device loads no plugin)


def get_rng_state():
    return default_generator.get_state()


def set_rng_state(new_state):
    default_generator.set_state(new_state)


def initial_seed():
    return default_generator.initial_seed()


def seed():
    """Reseeds the default CPU generator from a non-deterministic source; returns the seed."""
    return default_generator.seed()


def using(generator):
    """A context in which kernel seeds come from `generator` (None: the default generators)."""
    return generator if generator is not None else contextlib.nullcontext()

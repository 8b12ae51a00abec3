"""torch.autograd.graph: hooks on the tensors autograd saves for backward.

saved_tensors_hooks(pack_hook, unpack_hook): while active (on this thread), every tensor an
operator saves for its backward goes through pack_hook(tensor) -> any object, and the backward
gets it back as unpack_hook(that object) -> tensor. What pack_hook returns is kept instead of the
tensor, so a hook can move saved activations elsewhere (save_on_cpu) or drop them and rebuild
them in backward (FSDP re-gathers its sharded parameters). The autograd plugin calls one callback
per active hook pair, by mode: 0 pack (tensor -> key), 1 unpack (key -> tensor), 2 release (the
saved tensor is gone)."""
import itertools
import threading

from tessera import _C
from tessera.autograd import _plugin

__all__ = ["saved_tensors_hooks", "save_on_cpu", "disable_saved_tensors_hooks"]

_PACK, _UNPACK, _RELEASE = 0, 1, 2
_disabled = threading.local()  # disable_saved_tensors_hooks' message on this thread


def _tensor_type():
    import tessera
    return tessera.Tensor


class saved_tensors_hooks:
    def __init__(self, pack_hook, unpack_hook):
        if not callable(pack_hook) or not callable(unpack_hook):
            raise TypeError("saved_tensors_hooks: pack_hook and unpack_hook must be callables")
        self.pack_hook, self.unpack_hook = pack_hook, unpack_hook

    def _callback(self):
        packed, keys = {}, itertools.count()
        pack_hook, unpack_hook = self.pack_hook, self.unpack_hook

        def callback(mode, value):
            if mode == _PACK:
                key = next(keys)
                packed[key] = pack_hook(value)
                return key
            if mode == _UNPACK:
                tensor = unpack_hook(packed[value])
                if not isinstance(tensor, _tensor_type()):
                    raise TypeError(f"Output of saved tensor unpack_hook expected to be a Tensor but got result of "
                                    f"type {type(tensor).__name__}")
                return tensor
            packed.pop(value, None)
            return None
        return callback

    def __enter__(self):
        message = getattr(_disabled, "message", None)
        if message:
            raise RuntimeError(message)
        _plugin.call("push_saved_tensors_hooks", (_C.register_callback(self._callback()),))  # the id's hold passes on
        return self

    def __exit__(self, *exc):
        _plugin.call("pop_saved_tensors_hooks", ())
        return False


class save_on_cpu(saved_tensors_hooks):
    """Saved tensors are kept on the CPU (pinned with pin_memory=True) and moved back to their
    device in backward: less device memory for a copy each way."""

    def __init__(self, pin_memory=False, device_type="cuda"):
        def pack(tensor):
            if tensor.device.type == "cpu":
                return (tensor.device, tensor)
            packed = tensor.to("cpu")
            return (tensor.device, packed.pin_memory() if pin_memory else packed)

        def unpack(packed):
            device, tensor = packed
            return tensor.to(device, non_blocking=pin_memory)
        super().__init__(pack, unpack)


class disable_saved_tensors_hooks:
    """Inside it, entering saved_tensors_hooks raises RuntimeError(error_message)."""

    def __init__(self, error_message):
        self.error_message = error_message

    def __enter__(self):
        self._previous = getattr(_disabled, "message", None)
        _disabled.message = self.error_message
        return self

    def __exit__(self, *exc):
        _disabled.message = self._previous
        return False

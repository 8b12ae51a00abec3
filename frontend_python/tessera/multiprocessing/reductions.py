"""How a tensor crosses a process boundary through multiprocessing: its CPU storage moves into
shared memory and the receiver maps the same memory file from a duplicated descriptor."""
from multiprocessing import reduction

import tessera
from tessera import _C
from tessera.nn.parameter import Parameter


class SenderExitedError(RuntimeError):
    """A shared tensor could not be received: the process that sent it exited first."""


def _rebuild_shared(fd_holder, nbytes, dtype_name, shape, stride, offset, requires_grad, as_parameter):
    try:
        fd = fd_holder.detach()
    except (OSError, EOFError) as e:  # the sender's descriptor server is gone
        raise SenderExitedError(f"tessera.multiprocessing: receiving a shared tensor of shape {tuple(shape)} failed: the "
                           f"process that sent it exited before this one received it ({type(e).__name__}: {e}); keep "
                           f"the sender alive until its tensors are received") from e
    t = _C._open_shared_memory(fd, nbytes, getattr(tessera, dtype_name), list(shape), list(stride), offset)
    if as_parameter:
        return Parameter(t, requires_grad)
    return t.requires_grad_(True) if requires_grad else t


def reduce_tensor(t):
    if t.device.type != "cpu":
        return t.__reduce_ex__(2)  # a copy: device memory is not shared between processes here
    if t.requires_grad and not t.is_leaf:
        raise RuntimeError("Cowardly refusing to serialize non-leaf tensor which requires_grad, since autograd does "
                           "not support crossing process boundaries.  If you just want to transfer the data, call "
                           "detach() on the tensor before serializing (e.g., putting it on the queue).")
    _C._share_memory(t)
    fd, nbytes = _C._shared_memory_handle(t)
    return (_rebuild_shared, (reduction.DupFd(fd), nbytes, t.dtype.name, tuple(t.shape), tuple(t.stride()),
                              t.storage_offset(), t.requires_grad, isinstance(t, Parameter)))


def init_reductions():
    for cls in (tessera.Tensor, Parameter):
        reduction.ForkingPickler.register(cls, reduce_tensor)

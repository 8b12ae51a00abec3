"""Streams and events (tessera.Stream, tessera.Event): ordered queues of device work and
markers on them, as torch.Stream / torch.Event. A device whose plugin has no streams (the CPU)
has only its default stream, and everything here is synchronous for it."""
import contextlib

from tessera import _C

Stream = _C.Stream
Event = _C.Event
current_stream = _C.current_stream
default_stream = _C.default_stream
set_stream = _C.set_stream
synchronize = _C.synchronize


@contextlib.contextmanager
def stream(s):
    """Makes `s` the current stream of its device inside the block (None: no change), as
    torch.cuda.stream."""
    if s is None:
        yield
        return
    with s:
        yield s

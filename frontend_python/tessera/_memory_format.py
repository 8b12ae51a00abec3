"""Memory formats, as torch's: ts.contiguous_format (row-major), ts.channels_last (a 4-D NCHW
tensor laid out NHWC), ts.channels_last_3d (5-D NCDHW laid out NDHWC) and ts.preserve_format
(keep the input's). A format is a layout only: shapes, indexing and results are those of the
logical NCHW tensor. Convolutions run on oneDNN's NHWC path for channels-last inputs and return
channels-last outputs, as PyTorch's do."""
from tessera import _C

_call = _C.call_op
_E = {}
_native_is_contiguous = _C.Tensor.is_contiguous  # row-major; Tensor.is_contiguous becomes is_contiguous below


class memory_format:
    """One of tessera.contiguous_format, channels_last, channels_last_3d, preserve_format."""
    __slots__ = ("_name",)

    def __init__(self, name):
        self._name = name

    def __repr__(self):
        return f"tessera.{self._name}"

    def __reduce__(self):  # pickles as the module constant
        return self._name


contiguous_format = memory_format("contiguous_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")
preserve_format = memory_format("preserve_format")

# The channel dim moved last: the permutation that makes a channels-last tensor row-major.
_TO_CHANNELS_LAST = {channels_last: (4, (0, 2, 3, 1), (0, 3, 1, 2)),
                     channels_last_3d: (5, (0, 2, 3, 4, 1), (0, 4, 1, 2, 3))}


def _check(fmt, where):
    if not isinstance(fmt, memory_format):
        raise TypeError(f"{where}: memory_format must be a tessera.memory_format, not {type(fmt).__name__}")


def _rank_of(fmt, t, where):
    rank, to_last, back = _TO_CHANNELS_LAST[fmt]
    if t.ndim != rank:
        raise RuntimeError(f"{where}: required rank {rank} tensor to use {fmt._name} format, got a "
                           f"{t.ndim}-D tensor")
    return to_last, back


def strides_for(shape, fmt):
    """The dense strides of `shape` in `fmt` (contiguous_format or a channels-last format)."""
    order = list(range(len(shape))) if fmt is contiguous_format else list(_TO_CHANNELS_LAST[fmt][1])
    strides, step = [0] * len(shape), 1
    for d in reversed(order):
        strides[d] = step
        step *= max(shape[d], 1)
    return tuple(strides)


def is_contiguous_as(t, fmt):
    """Whether t is dense in `fmt`; dims of size 1 may have any stride (as PyTorch)."""
    if fmt is contiguous_format:
        return _native_is_contiguous(t)
    if t.ndim != _TO_CHANNELS_LAST[fmt][0]:
        return False
    want = strides_for(t.shape, fmt)
    return all(size == 1 or got == w for size, got, w in zip(t.shape, t.stride(), want))


def suggest(t):
    """preserve_format's choice: channels_last(_3d) for a tensor dense in it but not row-major."""
    if _native_is_contiguous(t):
        return contiguous_format
    for fmt in (channels_last, channels_last_3d):
        if is_contiguous_as(t, fmt):
            return fmt
    return contiguous_format


def to_format(t, fmt, where):
    """t itself when it is already dense in fmt, else a copy laid out in fmt (differentiable)."""
    _check(fmt, where)
    if fmt is preserve_format:
        fmt = suggest(t)
    if fmt is contiguous_format:
        return _call("contiguous", (t,), _E)
    to_last, back = _rank_of(fmt, t, where)
    if is_contiguous_as(t, fmt):
        return t
    moved = _call("contiguous", (_call("permute", (t, list(to_last)), _E),), _E)
    return _call("permute", (moved, list(back)), _E)


def like(result, input, fmt, where):
    """A new tensor `result` made like `input` (its *_like factories), laid out in fmt."""
    _check(fmt, where)
    if fmt is preserve_format:
        fmt = suggest(input)
    return result if fmt is contiguous_format else to_format(result, fmt, where)



def is_contiguous(self, memory_format=contiguous_format):
    """True when the elements are dense in `memory_format` (row-major by default)."""
    _check(memory_format, "is_contiguous")
    if memory_format is preserve_format:
        raise RuntimeError("is_contiguous: preserve memory format is unsupported by the contiguous operator")
    return is_contiguous_as(self, memory_format)


def contiguous(self, memory_format=contiguous_format):
    """self when already dense in `memory_format`, else a copy laid out so."""
    _check(memory_format, "contiguous")
    if memory_format is preserve_format:
        raise RuntimeError("contiguous: preserve memory format is unsupported by the contiguous operator")
    return to_format(self, memory_format, "contiguous")


def clone(self, *, memory_format=preserve_format):
    """A copy; preserve_format keeps a channels-last layout (other layouts come back row-major)."""
    _check(memory_format, "clone")
    fmt = suggest(self) if memory_format is preserve_format else memory_format
    if fmt is contiguous_format:
        return _call("clone", (self,), _E)
    to_last, back = _rank_of(fmt, self, "clone")
    # clone writes row-major, so cloning the NHWC view lays the copy out channels-last
    return _call("permute", (_call("clone", (_call("permute", (self, list(to_last)), _E),), _E), list(back)), _E)

"""repr() of tensors, formatted as PyTorch formats them (torch/_tensor_str.py): 4 decimals,
an integer mode for whole floats, scientific notation when the magnitudes call for it,
summarisation with `...` above 1000 elements, 80-column lines, dtype/device/size suffixes."""
import math

from tessera import _C

_DT = _C.dtypes
_IMPLICIT_DTYPES = (_DT["int64"], _DT["bool"])


class _PrintOptions:
    precision = 4
    threshold = 1000
    edgeitems = 3
    linewidth = 80
    sci_mode = None


PRINT_OPTS = _PrintOptions()


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None,
                     sci_mode=None):
    """As torch.set_printoptions: profile is "default", "short" or "full"."""
    if profile is not None:
        presets = {"default": (4, 1000, 3, 80), "short": (2, 1000, 2, 80), "full": (4, math.inf, 3, 80)}
        if profile not in presets:
            raise ValueError(f"set_printoptions: unknown profile {profile!r}, expected one of {sorted(presets)}")
        (PRINT_OPTS.precision, PRINT_OPTS.threshold, PRINT_OPTS.edgeitems, PRINT_OPTS.linewidth) = presets[profile]
    if precision is not None:
        PRINT_OPTS.precision = precision
    if threshold is not None:
        PRINT_OPTS.threshold = threshold
    if edgeitems is not None:
        PRINT_OPTS.edgeitems = edgeitems
    if linewidth is not None:
        PRINT_OPTS.linewidth = linewidth
    PRINT_OPTS.sci_mode = sci_mode


def get_printoptions():
    return {"precision": PRINT_OPTS.precision, "threshold": PRINT_OPTS.threshold,
            "edgeitems": PRINT_OPTS.edgeitems, "linewidth": PRINT_OPTS.linewidth, "sci_mode": PRINT_OPTS.sci_mode}


class _Formatter:
    """Chooses one format for every element, from the (summarised) values, as PyTorch does."""

    def __init__(self, values, floating):
        self.floating = floating
        self.int_mode = True
        self.sci_mode = False
        self.max_width = 1
        p = PRINT_OPTS.precision
        if not floating:
            for v in values:
                self.max_width = max(self.max_width, len(str(v)))
        else:
            nz = [v for v in values if v != 0 and math.isfinite(v)]
            if nz:
                mags = [abs(v) for v in nz]
                lo, hi = min(mags), max(mags)
                for v in nz:
                    if v != math.ceil(v):
                        self.int_mode = False
                        break
                if self.int_mode:
                    if hi / lo > 1000.0 or hi > 1.0e8:
                        self.sci_mode = True
                        self.max_width = max(len(f"{v:.{p}e}") for v in nz)
                    else:
                        self.max_width = max(self.max_width, max(len(f"{v:.0f}") + 1 for v in nz))
                else:
                    if hi / lo > 1000.0 or hi > 1.0e8 or lo < 1.0e-4:
                        self.sci_mode = True
                        self.max_width = max(len(f"{v:.{p}e}") for v in nz)
                    else:
                        self.max_width = max(len(f"{v:.{p}f}") for v in nz)
        if PRINT_OPTS.sci_mode is not None:
            self.sci_mode = PRINT_OPTS.sci_mode

    def format(self, v):
        p = PRINT_OPTS.precision
        if self.floating:
            if self.sci_mode:
                s = f"{v:{self.max_width}.{p}e}"
            elif self.int_mode:
                s = f"{v:.0f}"
                if math.isfinite(v):
                    s += "."
            else:
                s = f"{v:.{p}f}"
        else:
            s = str(v)
        return (self.max_width - len(s)) * " " + s


class _ComplexFormatter:
    """a+bj with each part formatted as PyTorch formats floats (one format per part)."""

    def __init__(self, values):
        self.real = _Formatter([v.real for v in values], True)
        self.imag = _Formatter([abs(v.imag) for v in values], True)
        self.max_width = self.real.max_width + self.imag.max_width + 2

    def format(self, v):
        imag = self.imag.format(abs(v.imag)).lstrip()
        sign = "-" if math.copysign(1.0, v.imag) < 0 else "+"
        s = f"{self.real.format(v.real)}{sign}{imag}j"
        return (self.max_width - len(s)) * " " + s


# Summarised data: nested lists of Python numbers where `...` (Ellipsis) stands for the
# elided middle of a dimension.
def _summarized(t, edge):
    if t.ndim == 0:
        return t.item()
    n = t.shape[0]
    if t.ndim == 1:
        if n > 2 * edge:
            return t[:edge].tolist() + [...] + t[n - edge:].tolist()
        return t.tolist()
    if n > 2 * edge:
        rows = list(range(edge)) + [None] + list(range(n - edge, n))
    else:
        rows = range(n)
    return [... if i is None else _summarized(t[i], edge) for i in rows]


def _flat(data, out):
    if isinstance(data, list):
        for x in data:
            _flat(x, out)
    elif data is not ...:
        out.append(data)
    return out


def _vector_str(data, indent, fmt):
    element_length = fmt.max_width + 2
    per_line = max(1, int(math.floor((PRINT_OPTS.linewidth - indent) / element_length)))
    items = [" ..." if v is ... else fmt.format(v) for v in data]
    lines = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
    return "[" + ("," + "\n" + " " * (indent + 1)).join(lines) + "]"


def _nested_str(data, dim, indent, fmt):
    if dim == 0:
        return fmt.format(data)
    if dim == 1:
        return _vector_str(data, indent, fmt)
    slices = ["..." if row is ... else _nested_str(row, dim - 1, indent + 1, fmt) for row in data]
    return "[" + ("," + "\n" * (dim - 1) + " " * (indent + 1)).join(slices) + "]"


def _tensor_str(t, indent):
    if t.numel() == 0:
        return "[]"
    summarize = t.numel() > PRINT_OPTS.threshold
    data = _summarized(t, PRINT_OPTS.edgeitems) if summarize else t.tolist()
    values = _flat(data, [])
    fmt = _ComplexFormatter(values) if t.dtype.is_complex else _Formatter(values, t.dtype.is_floating_point)
    return _nested_str(data, t.ndim, indent, fmt)


def _add_suffixes(tensor_str, suffixes, indent):
    parts = [tensor_str]
    last_line_len = len(tensor_str) - tensor_str.rfind("\n") + 1
    for suffix in suffixes:
        if last_line_len + len(suffix) + 2 > PRINT_OPTS.linewidth:
            parts.append(",\n" + " " * indent + suffix)
            last_line_len = indent + len(suffix)
        else:
            parts.append(", " + suffix)
            last_line_len += len(suffix) + 2
    parts.append(")")
    return "".join(parts)


def tensor_repr(t):
    if t._is_batched:  # inside vmap: its own elements are one sample's view, not its value
        from tessera._functorch.vmap import batched_repr
        return batched_repr(t)
    prefix = "tensor("
    indent = len(prefix)
    suffixes = []
    device = t.device
    if device.type != "cpu":
        suffixes.append(f"device='{device}'")
    dtype = t.dtype
    default = _C.get_default_dtype()
    if t.numel() == 0:
        if t.ndim != 1:
            suffixes.append("size=" + str(tuple(t.shape)))
        if dtype != default:
            suffixes.append("dtype=" + repr(dtype))
        body = "[]"
    else:
        default_complex = _DT["complex128"] if default == _DT["float64"] else _DT["complex64"]
        if dtype != default and dtype not in _IMPLICIT_DTYPES and dtype != default_complex:
            suffixes.append("dtype=" + repr(dtype))
        body = _tensor_str(t, indent)
    return _add_suffixes(prefix + body, suffixes, indent)


def tensor_format(t, spec):
    if t.ndim == 0:
        return t.item().__format__(spec)
    return object.__format__(tensor_repr(t), spec)

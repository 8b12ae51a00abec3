"""Constant folding (do_constant_folding): an operator whose tensor inputs are all constants of
the program (lifted tensors, or results of folded operators) runs once at export, with
tessera, and its result becomes an initializer. Parameters and buffers are not folded: they
stay initializers under their own names."""
import tessera
from tessera._ops import op_overload
from tessera.fx._from_ir import device_of, dtype_of, tensor_ids
from tessera.onnx._ops import RANDOM

# A folded result larger than this stays an operator (a broadcast would bloat the file).
MAX_FOLDED_ELEMENTS = 1 << 20


def _outputs(node):
    for out in node["outputs"]:
        yield from (out if isinstance(out, list) else [out])


def fold(ctx, index, node, constants):
    """The results of the node by output id when it can run now, else None. `constants` maps
    value ids to the tessera tensors known at export."""
    if node["op"] in RANDOM or node.get("mutates"):
        return None
    if index in ctx.sym_nodes:
        return None  # an integer that follows a dynamic dim
    if any(vid not in constants for vid in tensor_ids(node)):
        return None
    for vid in _outputs(node):
        if vid >= 0:
            numel = 1
            for s in ctx.values[vid]["shape"]:
                numel *= s
            if numel > MAX_FOLDED_ELEMENTS:
                return None

    def value(arg):
        (kind, v), = arg.items()
        if kind == "tensor":
            return constants[v]
        if kind == "tensors":
            return [None if i is None else constants[i] for i in v]
        if kind == "double":
            return float(v)
        if kind == "doubles":
            return [float(x) for x in v]
        if kind == "dtype":
            return dtype_of(v)
        if kind == "device":
            return device_of(v)
        return None if kind == "none" else v

    try:
        target = op_overload(node["op"])
        args, kwargs = [], {}
        for (name, keyword_only), arg in zip(target.arguments(), node["args"]):
            if keyword_only:
                kwargs[name] = value(arg)
            else:
                args.append(value(arg))
        with tessera.no_grad():
            result = target(*args, **kwargs)
    except Exception:  # noqa: BLE001  (an operator that cannot run here is translated instead)
        return None
    results = list(result) if isinstance(result, (tuple, list)) and len(node["outputs"]) > 1 else [result]
    out = {}
    for ids, r in zip(node["outputs"], results):
        if isinstance(ids, list):
            out.update({vid: t for vid, t in zip(ids, r)})
        elif ids >= 0:
            out[ids] = r
    if not all(isinstance(t, tessera.Tensor) for t in out.values()):
        return None
    return out

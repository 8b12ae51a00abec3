"""ts.save / ts.load: state dicts in the safetensors format.

A flat dict of str -> Tensor (a Module's state dict) is written as exactly those tensors, so any
safetensors reader sees the names as they are. Anything else (an optimizer's state dict: nested
dicts and lists of tensors, ints, floats, bools, strings and None, dict keys that are ints) is
flattened: each tensor is stored under its dotted path ("state.0.exp_avg") and the structure,
with tensors replaced by {"tensor": name}, is kept as JSON under one __metadata__ key. Loading
never runs code: the file holds data and JSON only.

Structure encoding: None, bool, int, float and str stand for themselves; a list is a JSON array;
a dict is {"dict": [[key, value], ...]} (keys in order, of any JSON scalar type); a tuple is
{"tuple": [...]}; a tensor is {"tensor": name}.
"""
import json
import os
from collections.abc import Mapping

from tessera import _C

STRUCTURE_KEY = "tessera.structure"
_SCALARS = (type(None), bool, int, float, str)

__all__ = ["save", "load"]


def _is_flat_state_dict(obj):
    return all(isinstance(k, str) and isinstance(v, _C.Tensor) for k, v in obj.items())


def _flatten(obj):
    """Returns ([(name, tensor), ...], structure) for a nested container."""
    tensors = []
    used = set()
    active = set()  # ids of the containers on the current path: a cycle cannot be saved

    def unique(name):
        if name not in used:
            used.add(name)
            return name
        i = 1
        while f"{name}#{i}" in used:
            i += 1
        used.add(f"{name}#{i}")
        return f"{name}#{i}"

    def walk(value, path):
        if isinstance(value, _C.Tensor):
            name = unique(".".join(path) if path else "tensor")
            tensors.append((name, value))
            return {"tensor": name}
        if isinstance(value, _SCALARS):
            return value
        if isinstance(value, (Mapping, list, tuple)):
            if id(value) in active:
                raise ValueError(f"save: the object holds a reference cycle at '{'.'.join(path)}'")
            active.add(id(value))
            try:
                if isinstance(value, Mapping):
                    items = []
                    for k, v in value.items():
                        if not isinstance(k, _SCALARS):
                            raise TypeError(f"save: dict keys must be str, int, float, bool or None, got "
                                            f"{type(k).__name__} at '{'.'.join(path)}'")
                        items.append([k, walk(v, path + [str(k)])])
                    return {"dict": items}
                out = [walk(v, path + [str(i)]) for i, v in enumerate(value)]
                return out if isinstance(value, list) else {"tuple": out}
            finally:
                active.discard(id(value))
        raise TypeError(f"save: cannot save a value of type {type(value).__name__} at '{'.'.join(path)}': expected "
                        "tensors, dicts, lists, tuples, str, int, float, bool or None")

    structure = walk(obj, [])
    return tensors, structure


def _unflatten(node, tensors, where):
    def bad(msg):
        return ValueError(f"safetensors file '{where}': malformed '{STRUCTURE_KEY}' metadata: {msg}")

    def build(n):
        if isinstance(n, _SCALARS):
            return n
        if isinstance(n, list):
            return [build(v) for v in n]
        if isinstance(n, dict) and len(n) == 1:
            (tag, body), = n.items()
            if tag == "tensor":
                if not isinstance(body, str) or body not in tensors:
                    raise bad(f"it names tensor {body!r}, which the file does not hold")
                return tensors[body]
            if tag == "tuple" and isinstance(body, list):
                return tuple(build(v) for v in body)
            if tag == "dict" and isinstance(body, list):
                out = {}
                for item in body:
                    if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], _SCALARS)):
                        raise bad(f"expected [key, value] pairs in a dict, got {item!r:.80}")
                    out[item[0]] = build(item[1])
                return out
        raise bad(f"unexpected node {n!r:.80}")

    return build(node)


def save(obj, f):
    """Saves a state dict to the file `f` (a path) in the safetensors format, atomically.

    `obj` is a dict: str -> Tensor (a Module's state dict, written with exactly those names), or
    nested dicts/lists/tuples of tensors and plain ints, floats, bools, strings and None (an
    optimizer's state dict). Tensors on any device and of any layout are written contiguous.
    """
    path = os.fspath(f)
    if not isinstance(path, str):
        path = os.fsdecode(path)
    if not isinstance(obj, Mapping):
        raise TypeError(f"save: expected a dict (a state dict), got {type(obj).__name__}")
    if _is_flat_state_dict(obj):
        _C._save_safetensors(path, list(obj.items()), {})
        return
    tensors, structure = _flatten(obj)
    _C._save_safetensors(path, tensors, {STRUCTURE_KEY: json.dumps(structure, separators=(",", ":"))})


def _restore(tensors, metadata, where, map_location):
    if map_location is not None:
        tensors = [(n, t.to(map_location)) for n, t in tensors]
    text = metadata.get(STRUCTURE_KEY)
    if text is None:
        return dict(tensors)
    try:
        structure = json.loads(text)
    except ValueError as e:
        raise ValueError(f"safetensors file '{where}': '{STRUCTURE_KEY}' metadata is not valid JSON ({e})") from None
    return _unflatten(structure, dict(tensors), where)


def load(f, map_location=None):
    """Loads what save() wrote (or any safetensors file: a dict of name -> tensor in file order).

    Tensors load on the CPU, or on `map_location` (a device or device string) when given.
    Raises ValueError for a malformed file, OSError when it cannot be read.
    """
    path = os.fspath(f)
    if not isinstance(path, str):
        path = os.fsdecode(path)
    tensors, metadata = _C._load_safetensors(path)
    return _restore(tensors, metadata, path, map_location)


def loads(data, map_location=None):
    """Like load(), from the bytes of a whole safetensors file."""
    tensors, metadata = _C._parse_safetensors(bytes(data))
    return _restore(tensors, metadata, "<bytes>", map_location)

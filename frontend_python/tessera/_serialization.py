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

ts.load also reads PyTorch's checkpoints (torch.save files, zip or legacy format) without torch,
through a restricted unpickler that runs no code (see _torch_checkpoint.py); the format is told by
the file's first bytes. Both functions take a path or a binary file object.
"""
import io
import json
import os
import pickle
import tempfile
from collections.abc import Mapping

from tessera import _C
from tessera import _torch_checkpoint

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


def _is_path(f):
    return isinstance(f, (str, bytes, os.PathLike))


def _path(f):
    path = os.fspath(f)
    return path if isinstance(path, str) else os.fsdecode(path)


def save(obj, f, pickle_module=None, pickle_protocol=None, _use_new_zipfile_serialization=True,
         _disable_byteorder_record=False):
    """Saves a state dict to `f` in the safetensors format: a path (written atomically) or a
    binary file object (anything with write()), written at its position.

    `obj` is a dict: str -> Tensor (a Module's state dict, written with exactly those names), or
    nested dicts/lists/tuples of tensors and plain ints, floats, bools, strings and None (an
    optimizer's state dict). Tensors on any device and of any layout are written contiguous.
    pickle_module, pickle_protocol and the underscored arguments are torch.save's; they are
    accepted so its calls run unchanged, and change nothing: the file is always safetensors.
    """
    if not isinstance(obj, Mapping):
        raise TypeError(f"save: expected a dict (a state dict), got {type(obj).__name__}")
    if _is_flat_state_dict(obj):
        tensors, metadata = list(obj.items()), {}
    else:
        tensors, structure = _flatten(obj)
        metadata = {STRUCTURE_KEY: json.dumps(structure, separators=(",", ":"))}
    if _is_path(f):
        _C._save_safetensors(_path(f), tensors, metadata)
        return
    if not callable(getattr(f, "write", None)):
        raise TypeError(f"save: expected a path (str or os.PathLike) or a binary file object with write(), "
                        f"got {type(f).__name__}")
    # The C++ writer writes files: through a private temporary one, so a failed save writes nothing to f.
    with tempfile.TemporaryDirectory(prefix="tessera-save-") as tmp:
        tmp_path = os.path.join(tmp, "state.safetensors")
        _C._save_safetensors(tmp_path, tensors, metadata)
        with open(tmp_path, "rb") as src:
            data = src.read()
    f.write(data)


def _restore(tensors, metadata, where, map_location):
    if map_location is not None:
        tensors = [(n, _torch_checkpoint.place(t, "cpu", map_location, where)) for n, t in tensors]
    text = metadata.get(STRUCTURE_KEY)
    if text is None:
        return dict(tensors)
    try:
        structure = json.loads(text)
    except ValueError as e:
        raise ValueError(f"safetensors file '{where}': '{STRUCTURE_KEY}' metadata is not valid JSON ({e})") from None
    return _unflatten(structure, dict(tensors), where)


def _load_options(pickle_module, weights_only, pickle_load_args):
    if pickle_module is not None and pickle_module is not pickle:
        got = getattr(pickle_module, "__name__", pickle_module)
        raise ValueError(f"load: pickle_module must be None (or the standard pickle): tessera reads checkpoints "
                         f"with its own restricted unpickler, got {got!r}")
    if weights_only is not None and not isinstance(weights_only, bool):
        raise TypeError(f"load: weights_only must be a bool or None, got {type(weights_only).__name__}")
    unknown = set(pickle_load_args) - {"encoding"}
    if unknown:
        raise TypeError(f"load() got an unexpected keyword argument {sorted(unknown)[0]!r}: of torch.load's pickle "
                        "arguments only encoding is accepted")
    return weights_only is not False, pickle_load_args.get("encoding", "utf-8")


def _refuse_tar(where):
    return ValueError(f"'{where}' is a PyTorch checkpoint in the tar format of torch before 0.1.10, which ts.load does "
                      "not read: load it with torch and save it again with a newer torch.save")


def load(f, map_location=None, pickle_module=None, *, weights_only=None, mmap=None, **pickle_load_args):
    """Loads what save() wrote, any safetensors file (a dict of name -> tensor in file order), or a
    PyTorch checkpoint written by torch.save (zip format, or the legacy format of torch < 1.6),
    without running any code from the file, whatever weights_only says.

    f: a path or a binary file object (read()/seek()). map_location, as torch.load's: None (each
    tensor on the device it was saved on; safetensors load on the CPU), a device or device string,
    a dict from saved locations to locations, or fn(storage, location) returning a tensor or None.
    weights_only: True (the default) or False read the same way: tensors and plain containers
    only; a checkpoint naming any other global raises pickle.UnpicklingError naming it.
    mmap=True maps a PyTorch zip checkpoint's storages from the file (a path) instead of reading
    them (private: writes to the tensors never reach the file); other files are read. encoding
    (torch's pickle argument) decodes Python 2 strings. pickle_module must be None or pickle.

    Raises ValueError for a malformed or truncated file (for a PyTorch checkpoint one that is also
    a pickle.UnpicklingError), OSError when it cannot be read.
    """
    weights_only, encoding = _load_options(pickle_module, weights_only, pickle_load_args)
    if not _is_path(f):
        if not callable(getattr(f, "read", None)):
            raise TypeError(f"load: expected a path (str or os.PathLike) or a binary file object with read(), "
                            f"got {type(f).__name__}")
        if mmap:
            raise ValueError("load: mmap=True needs a path, got a file object")
        data = f.read()
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"load: expected a binary file object (read() returning bytes), got one returning "
                            f"{type(data).__name__}")
        where = getattr(f, "name", None)
        return _loads(bytes(data), where if isinstance(where, str) else "<file object>", map_location,
                      weights_only, encoding)
    path = _path(f)
    with open(path, "rb") as fh:
        kind = _torch_checkpoint.sniff(fh.read(512))
        if kind == "legacy":
            fh.seek(0)
            return _torch_checkpoint.load_legacy(fh, path, map_location, weights_only, encoding)
    if kind == "zip":
        return _torch_checkpoint.load_zip(path, path, map_location, weights_only, bool(mmap), encoding)
    if kind == "tar":
        raise _refuse_tar(path)
    tensors, metadata = _C._load_safetensors(path)
    return _restore(tensors, metadata, path, map_location)


def _loads(data, where, map_location, weights_only=True, encoding="utf-8"):
    kind = _torch_checkpoint.sniff(data[:512])
    if kind == "zip":
        return _torch_checkpoint.load_zip(io.BytesIO(data), where, map_location, weights_only, False, encoding)
    if kind == "legacy":
        return _torch_checkpoint.load_legacy(io.BytesIO(data), where, map_location, weights_only, encoding)
    if kind == "tar":
        raise _refuse_tar(where)
    tensors, metadata = _C._parse_safetensors(data)
    return _restore(tensors, metadata, where, map_location)


def loads(data, map_location=None, *, weights_only=None):
    """Like load(), from the bytes of a whole file (safetensors or a PyTorch checkpoint)."""
    return _loads(bytes(data), "<bytes>", map_location, weights_only is not False)

"""Reading PyTorch checkpoints (files written by torch.save) without torch, for ts.load.

torch.save pickles the object with each tensor reduced to a call such as
torch._utils._rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, hooks) and
each storage replaced by a persistent id ('storage', <storage class>, key, location, numel). The zip
format (torch >= 1.6) holds that pickle as <name>/data.pkl and each storage's bytes as
<name>/data/<key>, in the byte order <name>/byteorder names. The legacy format is a stream: three
small pickles (magic number, protocol version, system info), the main pickle, the list of storage
keys, then each storage as an int64 element count and its little-endian bytes.

The pickle is read by a restricted unpickler. find_class hands out stand-ins for the globals a
checkpoint of tensors and plain containers needs (those torch's weights_only=True allows for them)
and refuses every other global with pickle.UnpicklingError naming it; so no code from the file
runs. tessera never runs such code: weights_only=False reads the same restricted set.

Tensors come back as tessera tensors, views of one buffer per storage, so tensors saved as views of
one storage still share memory. Not read: sparse, quantized, meta and nested tensors, dtypes tessera
lacks (uint16, float8...), whole pickled nn.Modules, TorchScript archives. Python attributes set on
a saved tensor (t.foo = 1) are dropped: tessera tensors hold none.
"""
import io
import json
import mmap as _mmap
import pickle
import struct
import zipfile
from collections import Counter, OrderedDict

from tessera import _C

__all__ = ["CheckpointError", "sniff", "load_zip", "load_legacy", "place"]

# torch.save's legacy format starts with this number, pickled.
LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
LEGACY_PROTOCOL = 1001
_CHUNK = 16 << 20  # bytes read from a zip record at a time: no second copy of a large storage

# torch storage class -> tessera dtype name. UntypedStorage holds bytes; _rebuild_tensor_v3 names
# the tensor's dtype.
_STORAGE_DTYPES = {
    "FloatStorage": "float32", "DoubleStorage": "float64", "HalfStorage": "float16",
    "BFloat16Storage": "bfloat16", "ByteStorage": "uint8", "CharStorage": "int8",
    "ShortStorage": "int16", "IntStorage": "int32", "LongStorage": "int64", "BoolStorage": "bool",
    "ComplexFloatStorage": "complex64", "ComplexDoubleStorage": "complex128",
}
# torch.<name> dtype globals -> tessera dtype name
_TORCH_DTYPES = {
    "float32": "float32", "float": "float32", "float64": "float64", "double": "float64",
    "float16": "float16", "half": "float16", "bfloat16": "bfloat16", "uint8": "uint8",
    "int8": "int8", "int16": "int16", "short": "int16", "int32": "int32", "int": "int32",
    "int64": "int64", "long": "int64", "bool": "bool", "complex64": "complex64",
    "cfloat": "complex64", "complex128": "complex128", "cdouble": "complex128",
}
_ITEMSIZE = {"bool": 1, "uint8": 1, "int8": 1, "int16": 2, "int32": 4, "int64": 8, "float16": 2,
             "bfloat16": 2, "float32": 4, "float64": 8, "complex64": 8, "complex128": 16}

# Globals torch allows but tessera cannot honour: refused with the reason.
_SPARSE = "sparse tensors are not supported"
_QUANTIZED = "quantized tensors are not supported"
_UNSUPPORTED = {
    "torch._utils._rebuild_sparse_tensor": _SPARSE,
    "torch._utils._rebuild_sparse_csr_tensor": _SPARSE,
    "torch.serialization._get_layout": _SPARSE,
    "torch._utils._rebuild_qtensor": _QUANTIZED,
    "torch._utils._rebuild_meta_tensor_no_storage": "meta tensors (shape only, no data) are not supported",
    "torch._utils._rebuild_nested_tensor": "nested tensors are not supported",
    "torch._utils._rebuild_wrapper_subclass": "tensor subclasses are not supported",
    "torch._utils._rebuild_device_tensor_from_cpu_tensor": "tensors of storage-less backends are not supported",
}
for _q in ("QInt8Storage", "QUInt8Storage", "QInt32Storage", "QUInt4x2Storage", "QUInt2x4Storage",
           "per_tensor_affine", "per_tensor_symmetric", "per_channel_affine", "per_channel_symmetric",
           "per_channel_affine_float_qparams", "qint8", "quint8", "qint32", "quint4x2", "quint2x4"):
    _UNSUPPORTED["torch." + _q] = _QUANTIZED
for _d in ("uint16", "uint32", "uint64", "complex32", "chalf", "float8_e4m3fn", "float8_e5m2",
           "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu", "float4_e2m1fn_x2", "bits8", "bits16",
           "bits1x8", "bits2x4", "bits4x2", *(f"int{i}" for i in range(1, 8)), *(f"uint{i}" for i in range(1, 8))):
    _UNSUPPORTED["torch." + _d] = f"tessera has no dtype {_d}"
del _q, _d

_PY2_MODULES = {"__builtin__": "builtins", "copy_reg": "copyreg"}  # protocol-2 pickles use these names


class CheckpointError(pickle.UnpicklingError, ValueError):
    """A PyTorch checkpoint that cannot be read: malformed, truncated, or naming a global that is
    not allowed. Both an UnpicklingError (as torch raises) and a ValueError (as ts.load raises for
    any malformed file)."""


class _Escape(Exception):
    """Carries an error that is not the file's fault (a device that is not there, the user's
    map_location raising) through the unpickler, to be raised as it is."""

    def __init__(self, error):
        super().__init__(error)
        self.error = error


class _Frozen:
    """Base of the objects find_class and persistent_load hand to the pickle: no __dict__ and no
    settable attributes, so a BUILD opcode in the file cannot alter them."""
    __slots__ = ()

    def __setattr__(self, name, value):
        raise AttributeError(f"{type(self).__name__} is read-only")

    def _init(self, **fields):
        for k, v in fields.items():
            object.__setattr__(self, k, v)


class _Callable(_Frozen):
    __slots__ = ("fn", "name")

    def __init__(self, name, fn):
        self._init(name=name, fn=fn)

    def __call__(self, *args):
        return self.fn(*args)

    def __repr__(self):
        return f"<{self.name}>"


class _Marker(_Frozen):
    """A global that is named but never called: torch.Tensor, nn.Parameter, a storage class."""
    __slots__ = ("name", "dtype")

    def __init__(self, name, dtype=None):
        self._init(name=name, dtype=dtype)

    def __repr__(self):
        return f"<{self.name}>"


class _StorageRef(_Frozen):
    """A storage (or, in legacy files, a view of one) named by a persistent id: byte offset and
    length within the storage `key`."""
    __slots__ = ("key", "dtype", "offset", "nbytes")

    def __init__(self, key, dtype, offset, nbytes):
        self._init(key=key, dtype=dtype, offset=offset, nbytes=nbytes)


def _numpy():
    try:
        import numpy
    except ImportError:
        raise ImportError("ts.load: reading PyTorch checkpoints needs NumPy (pip install numpy)") from None
    return numpy


def _storage_tensor(buf, dtype, big_endian):
    """A 1-D tessera tensor over the storage bytes `buf` (shared when no conversion is needed)."""
    np = _numpy()
    numel = len(buf) // _ITEMSIZE[dtype]
    if dtype == "bfloat16":  # NumPy has no bfloat16: the safetensors parser makes it from raw bits
        bits = np.frombuffer(buf, dtype=">u2" if big_endian else "<u2", count=numel).astype("<u2")
        header = json.dumps({"s": {"dtype": "BF16", "shape": [numel], "data_offsets": [0, 2 * numel]}}).encode()
        (_, t), = _C._parse_safetensors(struct.pack("<Q", len(header)) + header + bits.tobytes())[0]
        return t
    native = np.dtype(dtype)
    arr = np.frombuffer(buf, dtype=native.newbyteorder(">" if big_endian else "<"), count=numel)
    if arr.dtype != native:  # the other byte order: swapped into a copy (complex: each part)
        arr = arr.astype(native)
    elif not arr.flags.aligned:  # a mapped record at an odd offset
        arr = arr.copy()
    return _C.from_numpy(arr)


def place(tensor, location, map_location, where="checkpoint"):
    """Puts a loaded storage (a tessera tensor) where map_location says, as torch.load does:
    None -> the device it was saved on; a str or device -> there; a dict -> the saved location
    looked up in it; a callable -> fn(storage, location), returning a tensor, or None for the
    saved device."""
    target = location
    if isinstance(map_location, dict):
        target = map_location.get(location, location)
    elif callable(map_location) and not isinstance(map_location, _C.device):
        out = map_location(tensor, location)
        if isinstance(out, _C.Tensor):
            return out
        if out is not None:
            raise TypeError(f"{where}: map_location returned {type(out).__name__}: expected a tessera tensor "
                            "(the storage it was given, moved or not) or None")
    elif map_location is not None:
        target = map_location
    text = str(target)  # a str, ts.device or torch.device
    try:
        device = _C.device(text)
    except Exception as e:  # noqa: BLE001  (tessera's message says which device and why)
        hint = "" if map_location is not None else "; pass map_location='cpu' to load it on the CPU"
        raise RuntimeError(f"{where}: a storage saved on '{location}' is to be restored on '{text}', which tessera "
                           f"cannot use here: {e}{hint}") from None
    return tensor if device == tensor.device else tensor.to(device)


class _Reader:
    """The state of one load: the storages the pickle names, their buffers and tensors.

    fetch(key, nbytes) returns the storage's bytes as a writable buffer. dry: only record the
    storages (the legacy format's first pass), build no tensor."""

    def __init__(self, where, map_location, fetch=None, big_endian=False, legacy=False, dry=False):
        self.where = where
        self.map_location = map_location
        self.fetch = fetch
        self.big_endian = big_endian
        self.legacy = legacy
        self.dry = dry
        self.storages = {}  # key -> [nbytes, location, dtype]
        self._buffers = {}
        self._bases = {}  # (key, dtype) -> placed 1-D tensor
        self.globals = self._make_globals()

    def error(self, msg):
        return CheckpointError(f"{self.where}: {msg}")

    # ---- globals
    def _make_globals(self):
        g = {}
        for cls, dtype in _STORAGE_DTYPES.items():
            g["torch." + cls] = _Marker("torch." + cls, dtype)
        g["torch.storage.UntypedStorage"] = g["torch.UntypedStorage"] = _Marker("torch.UntypedStorage", "uint8")
        for name, dtype in _TORCH_DTYPES.items():
            g["torch." + name] = _C.dtypes[dtype]
        g["torch.Tensor"] = _Marker("torch.Tensor")
        g["torch.nn.parameter.Parameter"] = _Marker("torch.nn.parameter.Parameter")
        for name, fn in (("_rebuild_tensor", self._rebuild_tensor), ("_rebuild_tensor_v2", self._rebuild_tensor_v2),
                         ("_rebuild_tensor_v3", self._rebuild_tensor_v3),
                         ("_rebuild_parameter", self._rebuild_parameter),
                         ("_rebuild_parameter_with_state", self._rebuild_parameter_with_state)):
            g["torch._utils." + name] = _Callable("torch._utils." + name, fn)
        g["torch._tensor._rebuild_from_type_v2"] = _Callable("torch._tensor._rebuild_from_type_v2",
                                                             self._rebuild_from_type_v2)
        g["torch.Size"] = _Callable("torch.Size", lambda dims=(): tuple(dims))
        g["torch.device"] = _Callable("torch.device", _device)
        for name, fn in (("collections.OrderedDict", OrderedDict), ("collections.Counter", Counter),
                         ("builtins.set", set), ("builtins.frozenset", frozenset), ("builtins.slice", slice),
                         ("builtins.complex", complex), ("builtins.bytes", _bytes),
                         ("builtins.bytearray", _bytearray), ("_codecs.encode", _encode)):
            # wrapped, even the immutable builtins: a pickle may only call them, never NEWOBJ them
            g[name] = _Callable(name, fn)
        return g

    # ---- storages
    def persistent_load(self, pid):
        n = 6 if self.legacy else 5
        if not (isinstance(pid, tuple) and len(pid) == n and pid[0] == "storage"):
            layout = "('storage', <storage class>, key, location, numel" + (", view)" if self.legacy else ")")
            raise self.error(f"expected a persistent id {layout}, got {pid!r:.120}")
        _, cls, key, location, numel = pid[:5]
        if not isinstance(cls, _Marker) or cls.dtype is None:
            raise self.error(f"persistent id of storage {key!r:.40}: expected a storage class, got {cls!r:.60}")
        if not isinstance(key, str) or not isinstance(location, str) or type(numel) is not int or numel < 0:
            raise self.error(f"persistent id: expected a str key, a str location and a count >= 0, got "
                             f"{key!r:.40}, {location!r:.40}, {numel!r:.40}")
        item = _ITEMSIZE[cls.dtype]
        nbytes = numel * item
        seen = self.storages.setdefault(key, [nbytes, location, cls.dtype])
        if seen[0] != nbytes:
            raise self.error(f"storage '{key}' is named with {seen[0]} bytes and with {nbytes} bytes")
        offset = 0
        view = pid[5] if self.legacy else None
        if view is not None:  # legacy storage view: (view key, element offset, element count)
            if not (isinstance(view, tuple) and len(view) == 3 and type(view[1]) is int and type(view[2]) is int
                    and 0 <= view[1] and 0 <= view[2] and view[1] + view[2] <= numel):
                raise self.error(f"storage '{key}': expected a view (key, offset, count) within its {numel} "
                                 f"elements, got {view!r:.80}")
            offset, nbytes = view[1] * item, view[2] * item
        return _StorageRef(key, cls.dtype, offset, nbytes)

    def _base(self, key, dtype):
        """The storage `key` as a 1-D tensor of `dtype`, on its device (one per key and dtype)."""
        base = self._bases.get((key, dtype))
        if base is None:
            nbytes, location, _ = self.storages[key]
            buf = self._buffers.get(key)
            if buf is None:
                buf = self._buffers[key] = self.fetch(key, nbytes)
            try:
                base = place(_storage_tensor(buf, dtype, self.big_endian), location, self.map_location, self.where)
            except Exception as e:  # noqa: BLE001  (not the file's fault: raised as it is)
                raise _Escape(e) from None
            self._bases[(key, dtype)] = base
        return base

    def _tensor(self, storage, dtype, storage_offset, size, stride):
        if not isinstance(storage, _StorageRef):
            raise self.error(f"a tensor's storage: expected a storage persistent id, got {type(storage).__name__}")
        size, stride = _int_tuple(size), _int_tuple(stride)
        if size is None or stride is None or len(size) != len(stride) or type(storage_offset) is not int \
                or storage_offset < 0 or min(size + stride, default=0) < 0:
            raise self.error(f"a tensor of storage '{storage.key}': expected sizes and strides of equal length and "
                             f"an offset, all ints >= 0, got {size!r:.60}, {stride!r:.60}, {storage_offset!r:.20}")
        item = _ITEMSIZE[dtype]
        if storage.offset % item or storage.nbytes % item:
            raise self.error(f"storage '{storage.key}' of {storage.nbytes} bytes cannot hold {dtype} elements "
                             f"of {item} bytes")
        numel = storage.nbytes // item
        if 0 not in size:
            last = storage_offset + sum((n - 1) * s for n, s in zip(size, stride))
            if last >= numel:
                raise self.error(f"a tensor of sizes {list(size)}, strides {list(stride)} at offset {storage_offset} "
                                 f"reaches element {last} of storage '{storage.key}', which holds {numel}")
        else:
            storage_offset = 0  # an empty tensor reads nothing
        if self.dry:
            return None
        base = self._base(storage.key, dtype)
        return base.as_strided(size, stride, storage.offset // item + storage_offset)

    # ---- the rebuild functions torch's pickles call
    def _finish(self, t, requires_grad, metadata):
        if not isinstance(requires_grad, bool) or not isinstance(metadata, (dict, type(None))):
            raise self.error(f"a tensor: expected requires_grad a bool and metadata a dict, got "
                             f"{requires_grad!r:.20} and {metadata!r:.40}")
        if t is None:
            return None
        if metadata:  # torch's lazy conjugate / negative views: the storage holds the plain values
            if metadata.get("conj"):
                t = t.conj_physical()
            if metadata.get("neg"):
                t = t.neg()
        if requires_grad:
            t.requires_grad_(True)
        return t

    def _rebuild_tensor(self, storage, storage_offset, size, stride):
        return self._tensor(storage, getattr(storage, "dtype", None), storage_offset, size, stride)

    def _rebuild_tensor_v2(self, storage, storage_offset, size, stride, requires_grad=False, backward_hooks=None,
                           metadata=None):
        t = self._tensor(storage, getattr(storage, "dtype", None), storage_offset, size, stride)
        return self._finish(t, requires_grad, metadata)

    def _rebuild_tensor_v3(self, storage, storage_offset, size, stride, requires_grad, backward_hooks, dtype,
                           metadata=None):
        if not isinstance(dtype, _C.dtype):
            raise self.error(f"_rebuild_tensor_v3: expected a dtype, got {dtype!r:.40}")
        t = self._tensor(storage, dtype.name, storage_offset, size, stride)
        return self._finish(t, requires_grad, metadata)

    def _rebuild_parameter(self, data, requires_grad, backward_hooks=None):
        return self._rebuild_parameter_with_state(data, requires_grad, backward_hooks, None)

    def _rebuild_parameter_with_state(self, data, requires_grad, backward_hooks, state):
        if self.dry:
            return None
        if not isinstance(data, _C.Tensor) or not isinstance(requires_grad, bool):
            raise self.error(f"_rebuild_parameter: expected a tensor and a bool, got {type(data).__name__} and "
                             f"{requires_grad!r:.20}")
        from tessera.nn import Parameter
        return Parameter(data, requires_grad)

    def _rebuild_from_type_v2(self, func, new_type, args, state):
        # A tensor with Python attributes: rebuilt without them (tessera tensors hold none).
        rebuilders = {self.globals[f"torch._utils.{n}"] for n in ("_rebuild_tensor", "_rebuild_tensor_v2",
                                                                  "_rebuild_tensor_v3", "_rebuild_parameter",
                                                                  "_rebuild_parameter_with_state")}
        if func not in rebuilders or not isinstance(args, tuple) or \
                new_type not in (self.globals["torch.Tensor"], self.globals["torch.nn.parameter.Parameter"]):
            raise self.error(f"_rebuild_from_type_v2: expected a tensor rebuild function, torch.Tensor or "
                             f"nn.Parameter and arguments, got {func!r:.40}, {new_type!r:.40}, {args!r:.40}")
        t = func(*args)
        if t is not None and new_type is self.globals["torch.nn.parameter.Parameter"]:
            from tessera.nn import Parameter
            if not isinstance(t, Parameter):
                t = Parameter(t, t.requires_grad)
        return t


def _int_tuple(v):
    if isinstance(v, (tuple, list)) and all(type(x) is int for x in v):
        return tuple(v)
    return None


def _device(*args):
    """torch.device('cuda', 0) -> ts.device, or its text when this tessera has no such device."""
    text = args[0] if len(args) == 1 else f"{args[0]}:{args[1]}"
    if not isinstance(text, str):
        raise TypeError(f"torch.device: expected a device string, got {text!r:.40}")
    try:
        return _C.device(text)
    except Exception:  # noqa: BLE001
        return text


def _encode(text, encoding="utf-8"):
    # protocol-2 pickles store bytes as _codecs.encode(latin-1 text, 'latin1'); no other codec
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise TypeError(f"_codecs.encode: expected (str, 'latin1'), got ({type(text).__name__}, {encoding!r:.20})")
    return text.encode("latin1")


def _bytes(*args):
    if args and not isinstance(args[0], (bytes, bytearray, str)):  # bytes(n) would allocate n bytes
        raise TypeError(f"bytes: expected no argument or bytes, got {type(args[0]).__name__}")
    return bytes(*args)


def _bytearray(*args):
    if args and not isinstance(args[0], (bytes, bytearray, str)):
        raise TypeError(f"bytearray: expected no argument, bytes or text, got {type(args[0]).__name__}")
    return bytearray(*args)


class _Unpickler(pickle.Unpickler):
    def __init__(self, file, reader, weights_only, encoding):
        super().__init__(file, encoding=encoding)
        self._reader = reader
        self._weights_only = weights_only

    def find_class(self, module, name):
        module = _PY2_MODULES.get(module, module)
        full = f"{module}.{name}"
        found = self._reader.globals.get(full) if self._reader is not None else None
        if found is not None:
            return found
        reason = f" ({_UNSUPPORTED[full]})" if full in _UNSUPPORTED else ""
        also = "" if self._weights_only else (" tessera never runs code from a checkpoint: weights_only=False loads "
                                              "the same restricted set.")
        where = self._reader.where if self._reader is not None else "checkpoint"
        raise CheckpointError(
            f"{where}: weights-only load failed: Unsupported global: GLOBAL {full}{reason}. A checkpoint may name "
            "only torch's tensor rebuild functions, storage classes, dtypes, torch.Size, torch.device and plain "
            f"containers (OrderedDict, Counter, set, frozenset, slice, complex, bytes); nothing was run.{also}")

    def persistent_load(self, pid):
        if self._reader is None:
            raise CheckpointError(f"checkpoint: a persistent id {pid!r:.60} where none was expected")
        return self._reader.persistent_load(pid)


def _unpickle(file, reader, weights_only, encoding, what="data.pkl"):
    try:
        return _Unpickler(file, reader, weights_only, encoding).load()
    except CheckpointError:
        raise
    except _Escape as e:
        raise e.error from None
    except Exception as e:  # noqa: BLE001  (a malformed pickle fails in many ways: all are the file's fault)
        where = reader.where if reader is not None else "checkpoint"
        raise CheckpointError(f"{where}: {what} is malformed: {type(e).__name__}: {e}") from None


# ---------------------------------------------------------------------------- format detection

def sniff(head):
    """'zip', 'legacy', 'tar' or None (anything else: safetensors) from a file's first 512 bytes."""
    if head[:4] in (b"PK\x03\x04", b"PK\x05\x06"):
        return "zip"
    if head[257:262] == b"ustar":  # a tar file: torch before 0.1.10
        return "tar"
    # PROTO n, an optional FRAME (protocol 4+), then LONG1 of the magic number
    if len(head) >= 2 and head[0] == 0x80:
        i = 11 if head[2:3] == b"\x95" else 2
        if head[i:i + 12] == b"\x8a\x0a" + LEGACY_MAGIC.to_bytes(10, "little"):
            return "legacy"
    return None


# ---------------------------------------------------------------------------- the zip format

def _wrap_zip_error(where, e):
    return CheckpointError(f"{where}: truncated or corrupt PyTorch checkpoint (expected a zip archive "
                           f"holding <name>/data.pkl): {type(e).__name__}: {e}")


def _archive_prefix(zf, where):
    names = zf.namelist()
    pkls = [n for n in names if n.endswith("/data.pkl") and n.count("/") == 1]
    if not pkls:
        if "program.json" in names or any(n.endswith("/program.json") for n in names):
            raise CheckpointError(f"{where}: this is a tessera export archive, not a checkpoint: read it with "
                                  "ts.export.load")
        raise CheckpointError(f"{where}: not a PyTorch checkpoint: expected an entry '<name>/data.pkl', the zip holds "
                              f"{names[:5]}{' ...' if len(names) > 5 else ''}")
    prefix = pkls[0][:-len("data.pkl")]
    if prefix + "constants.pkl" in names:
        raise CheckpointError(f"{where}: this is a TorchScript archive (torch.jit.save), which holds code: ts.load "
                              "reads checkpoints written by torch.save (save the model's state_dict() instead)")
    return prefix


def load_zip(source, where, map_location=None, weights_only=True, mmap=False, encoding="utf-8"):
    """Reads a torch.save zip checkpoint from `source` (a path or a seekable binary file object)."""
    try:
        zf = zipfile.ZipFile(source)
    except (FileNotFoundError, PermissionError, IsADirectoryError):
        raise
    except Exception as e:  # noqa: BLE001  (BadZipFile, EOFError, OSError on a short file...)
        raise _wrap_zip_error(where, e) from None
    mapped = []  # the private mapping of the file, made on first use
    with zf:
        prefix = _archive_prefix(zf, where)
        try:
            pkl = zf.read(prefix + "data.pkl")
            order = zf.read(prefix + "byteorder").decode("ascii", "replace") if prefix + "byteorder" in \
                zf.NameToInfo else "little"  # torch before 1.12 wrote none: little-endian
        except Exception as e:  # noqa: BLE001
            raise _wrap_zip_error(where, e) from None
        if order not in ("little", "big"):
            raise CheckpointError(f"{where}: {prefix}byteorder: expected 'little' or 'big', got {order!r:.40}")

        def fetch(key, nbytes):
            name = f"{prefix}data/{key}"
            info = zf.NameToInfo.get(name)
            if info is None:
                raise CheckpointError(f"{where}: storage '{key}' has no record '{name}' in the archive")
            if info.file_size != nbytes:
                raise CheckpointError(f"{where}: record '{name}': expected {nbytes} bytes (its storage's size), "
                                      f"got {info.file_size}")
            try:
                if mmap and isinstance(source, str) and info.compress_type == zipfile.ZIP_STORED:
                    return _mapped_record(source, info, mapped)
                return _read_record(zf, info)
            except CheckpointError:
                raise
            except Exception as e:  # noqa: BLE001
                raise _wrap_zip_error(where, e) from None

        reader = _Reader(where, map_location, fetch, big_endian=order == "big")
        return _unpickle(io.BytesIO(pkl), reader, weights_only, encoding)


def _read_record(zf, info):
    buf = bytearray(info.file_size)
    view = memoryview(buf)
    with zf.open(info) as r:  # checks the record's CRC as it reaches the end
        pos = 0
        while pos < len(buf):
            n = r.readinto(view[pos:pos + _CHUNK])
            if not n:
                raise EOFError(f"record '{info.filename}' ends after {pos} of {len(buf)} bytes")
            pos += n
    return buf


def _mapped_record(path, info, mapped):
    # mmap=True: the record's bytes in a private (copy-on-write) mapping of the file: tensors that
    # are written to never change the file. The mapping lives as long as the tensors over it.
    if not mapped:
        with open(path, "rb") as fh:
            mapped.append(_mmap.mmap(fh.fileno(), 0, access=_mmap.ACCESS_COPY))
    mm = mapped[0]
    header = mm[info.header_offset:info.header_offset + 30]
    if len(header) < 30 or header[:4] != b"PK\x03\x04":
        raise EOFError(f"record '{info.filename}': no local header at offset {info.header_offset}")
    name_len, extra_len = struct.unpack("<HH", header[26:30])
    start = info.header_offset + 30 + name_len + extra_len
    if start + info.file_size > len(mm):
        raise EOFError(f"record '{info.filename}' runs past the end of the file")
    return memoryview(mm)[start:start + info.file_size]


# ---------------------------------------------------------------------------- the legacy format

def load_legacy(fh, where, map_location=None, weights_only=True, encoding="utf-8"):
    """Reads a checkpoint in torch's legacy (pre-1.6, not zip) format from a seekable binary file.

    The storages follow the pickle that names them, so the pickle is read twice: first to learn
    each storage's dtype and size (no tensor built), then, with the bytes read, for real."""
    def small(what):
        return _unpickle(fh, _Reader(where, None), weights_only, encoding, what)

    magic = small("the magic number")
    if magic != LEGACY_MAGIC:
        raise CheckpointError(f"{where}: expected torch's legacy magic number {LEGACY_MAGIC:#x}, got {magic!r:.40}")
    version = small("the protocol version")
    if version != LEGACY_PROTOCOL:
        raise CheckpointError(f"{where}: expected legacy protocol version {LEGACY_PROTOCOL}, got {version!r:.40}")
    small("the system information")
    start = fh.tell()
    dry = _Reader(where, None, legacy=True, dry=True)
    _unpickle(fh, dry, weights_only, encoding)
    keys = small("the storage key list")
    if not isinstance(keys, list) or set(keys) != set(dry.storages):
        raise CheckpointError(f"{where}: expected the list of the {len(dry.storages)} storage keys the pickle names, "
                              f"got {keys!r:.80}")
    buffers = {}
    pos = fh.tell()
    end = fh.seek(0, io.SEEK_END)
    fh.seek(pos)
    for key in keys:  # each: int64 element count, then the bytes, little-endian
        nbytes, _, dtype = dry.storages[key]
        head = fh.read(8)
        count = struct.unpack("<q", head)[0] if len(head) == 8 else None
        if count != nbytes // _ITEMSIZE[dtype]:
            raise CheckpointError(f"{where}: storage '{key}': expected a record of {nbytes // _ITEMSIZE[dtype]} "
                                  f"elements, got {'the end of the file' if count is None else count}")
        if nbytes > end - fh.tell():  # checked before allocating: the count is the file's word
            raise CheckpointError(f"{where}: storage '{key}': truncated: expected {nbytes} bytes, the file has "
                                  f"{end - fh.tell()} left")
        buf = bytearray(nbytes)
        if fh.readinto(buf) != nbytes:
            raise CheckpointError(f"{where}: storage '{key}': truncated: expected {nbytes} bytes")
        buffers[key] = buf
    fh.seek(start)
    reader = _Reader(where, map_location, lambda key, nbytes: buffers[key], legacy=True)
    return _unpickle(fh, reader, weights_only, encoding)

"""Collectives of Python objects (all_gather_object, broadcast_object_list, gather_object,
scatter_object_list), as torch's: each object is pickled into a uint8 tensor, sizes are exchanged
first, then the bytes. Unpickling is restricted as for checkpoints: plain containers, numbers,
strings, tensors and dtypes load; any other global is refused, so a peer cannot make this process
run code of its choosing."""
import io
import pickle

from ._c10d import _resolve
from ._collectives import all_gather, broadcast, gather, scatter

# What a received object may name: the builtins that plain data pickles through, and tessera's
# own tensor and dtype rebuilders.
_ALLOWED = {
    ("builtins", n) for n in ("set", "frozenset", "complex", "slice", "range", "bytearray", "list", "dict",
                              "tuple", "int", "float", "str", "bytes", "bool")
} | {("collections", "OrderedDict"), ("collections", "defaultdict"), ("collections", "deque"),
     ("datetime", "timedelta"), ("datetime", "datetime"), ("datetime", "date"),
     ("tessera._tensor", "_rebuild"), ("tessera._tensor", "_rebuild_from_bytes"),
     ("tessera._C", "_dtype_from_name"), ("tessera._size", "Size")}


class _RestrictedUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) in _ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(
            f"object collective: refused to load global {module}.{name} sent by a peer: objects exchanged between "
            "ranks may hold plain containers, numbers, strings, tensors and dtypes only (as checkpoints)")


def _device(pg):
    """Where the group's backend takes tensors: the CPU, or the current CUDA device (nccl)."""
    from .. import _C
    if "cpu" in _C._process_group_backend_devices(pg.name()):
        return "cpu"
    import tessera
    return f"cuda:{tessera.cuda.current_device()}"


def _to_tensor(obj, device="cpu"):
    import numpy as np
    import tessera
    buffer = io.BytesIO()
    pickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    data = buffer.getvalue()
    return tessera.from_numpy(np.frombuffer(data, dtype=np.uint8).copy()).to(device), len(data)


def _from_tensor(t, size):
    return _RestrictedUnpickler(io.BytesIO(t[:size].cpu().numpy().tobytes())).load()


def _sizes(pg, size, device):
    import tessera
    mine = tessera.tensor([size], dtype=tessera.int64).to(device)
    sizes = [tessera.zeros(1, dtype=tessera.int64, device=device) for _ in range(pg.size())]
    all_gather(sizes, mine, group=pg)
    return [int(s.item()) for s in sizes]


def all_gather_object(object_list, obj, group=None):
    pg = _resolve(group, "all_gather_object")
    if pg is None:
        return
    if not isinstance(object_list, list) or len(object_list) != pg.size():
        raise ValueError(f"all_gather_object: object_list must be a list of the group's size ({pg.size()})")
    import tessera
    device = _device(pg)
    data, size = _to_tensor(obj, device)
    sizes = _sizes(pg, size, device)
    longest = max(sizes)
    padded = tessera.zeros(longest, dtype=tessera.uint8, device=device)
    padded[:size] = data
    received = [tessera.empty(longest, dtype=tessera.uint8, device=device) for _ in range(pg.size())]
    all_gather(received, padded, group=pg)
    for i in range(pg.size()):
        object_list[i] = _from_tensor(received[i], sizes[i])


def gather_object(obj, object_gather_list=None, dst=0, group=None):
    pg = _resolve(group, "gather_object")
    if pg is None:
        return
    import tessera
    from ._c10d import _group_rank
    root = _group_rank(pg, dst, "gather_object", "dst")
    if pg.rank() == root and (not isinstance(object_gather_list, list) or len(object_gather_list) != pg.size()):
        raise ValueError(f"gather_object: object_gather_list must be a list of the group's size ({pg.size()}) on dst")
    device = _device(pg)
    data, size = _to_tensor(obj, device)
    sizes = _sizes(pg, size, device)
    longest = max(sizes)
    padded = tessera.zeros(longest, dtype=tessera.uint8, device=device)
    padded[:size] = data
    received = ([tessera.empty(longest, dtype=tessera.uint8, device=device) for _ in range(pg.size())]
                if pg.rank() == root else None)
    gather(padded, received, dst=dst, group=pg)
    if pg.rank() == root:
        for i in range(pg.size()):
            object_gather_list[i] = _from_tensor(received[i], sizes[i])


def broadcast_object_list(object_list, src=0, group=None, device=None):
    pg = _resolve(group, "broadcast_object_list")
    if pg is None:
        return
    if not isinstance(object_list, list):
        raise TypeError(f"broadcast_object_list: object_list must be a list, got {type(object_list).__name__}")
    import tessera
    from ._c10d import _group_rank
    root = _group_rank(pg, src, "broadcast_object_list", "src")
    device = _device(pg)
    sizes = tessera.zeros(len(object_list), dtype=tessera.int64, device=device)
    if pg.rank() == root:
        encoded = [_to_tensor(o, device) for o in object_list]
        sizes = tessera.tensor([n for _, n in encoded], dtype=tessera.int64).to(device)
    broadcast(sizes, src=src, group=pg)
    total = int(sizes.sum().item()) if len(object_list) else 0
    if pg.rank() == root:
        payload = tessera.cat([t for t, _ in encoded]) if encoded else tessera.empty(0, dtype=tessera.uint8, device=device)
    else:
        payload = tessera.empty(total, dtype=tessera.uint8, device=device)
    broadcast(payload, src=src, group=pg)
    if pg.rank() != root:
        at = 0
        for i, n in enumerate(int(s) for s in sizes.cpu().tolist()):
            object_list[i] = _from_tensor(payload[at:at + n], n)
            at += n


def scatter_object_list(scatter_object_output_list, scatter_object_input_list=None, src=0, group=None):
    pg = _resolve(group, "scatter_object_list")
    if pg is None:
        return
    if not isinstance(scatter_object_output_list, list) or len(scatter_object_output_list) < 1:
        raise ValueError("scatter_object_list: Expected argument scatter_object_output_list to be a list of size at "
                         "least 1.")
    import tessera
    from ._c10d import _group_rank
    root = _group_rank(pg, src, "scatter_object_list", "src")
    device = _device(pg)
    longest = tessera.zeros(1, dtype=tessera.int64, device=device)
    if pg.rank() == root:
        if not isinstance(scatter_object_input_list, list) or len(scatter_object_input_list) != pg.size():
            raise ValueError(f"scatter_object_list: the input list must hold one object per rank ({pg.size()}) on src")
        encoded = [_to_tensor(o) for o in scatter_object_input_list]
        longest = tessera.tensor([max(n for _, n in encoded)], dtype=tessera.int64).to(device)
    broadcast(longest, src=src, group=pg)
    n = int(longest.item())
    blocks = None
    if pg.rank() == root:
        blocks = []
        for t, size in encoded:
            block = tessera.zeros(n + 8, dtype=tessera.uint8)
            block[:8] = tessera.from_numpy(__import__("numpy").array([size], dtype="<i8").view("uint8"))
            block[8:8 + size] = t
            blocks.append(block.to(device))
    mine = tessera.empty(n + 8, dtype=tessera.uint8, device=device)
    scatter(mine, blocks, src=src, group=pg)
    size = int(__import__("numpy").frombuffer(mine[:8].cpu().numpy().tobytes(), dtype="<i8")[0])
    scatter_object_output_list[0] = _from_tensor(mine[8:], size)

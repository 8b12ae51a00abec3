"""The collectives of torch.distributed over a ProcessGroup.

Each call checks its arguments, hands contiguous buffers to the backend and, when the backend is
done (at once, or at Work.wait() with async_op=True), puts the results where the caller asked:
into non-contiguous tensors, lists of tensors, and AVG's division by the group's size.
"""
import sys

from .. import _C
from ._c10d import _group_rank, _resolve
from ._process_group import (ALL_GATHER, ALL_REDUCE, ALL_TO_ALL, BARRIER, BROADCAST, GATHER, RECV, REDUCE,
                             REDUCE_SCATTER, SCATTER, SEND, DistBackendError, ReduceOp, Work, _KIND_NAMES,
                             _reduce_code)


def _tensor_type():
    import tessera
    return tessera.Tensor


def _check_tensor(t, where, what="tensor"):
    if not isinstance(t, _tensor_type()):
        raise TypeError(f"{where}: {what} must be a Tensor, got {type(t).__name__}")
    return t


def _check_list(tensors, where, what, size=None):
    if not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{where}: {what} must be a list of tensors, got {type(tensors).__name__}")
    for i, t in enumerate(tensors):
        _check_tensor(t, where, f"{what}[{i}]")
    if size is not None and len(tensors) != size:
        raise ValueError(f"{where}: {what} must hold one tensor per rank of the group ({size}), got {len(tensors)}")
    return list(tensors)


def _contiguous(t):
    """(buffer, copy_back): the buffer the backend writes, and what puts it back into t."""
    if t.is_contiguous():
        return t, None
    buffer = t.contiguous()
    return buffer, (lambda: t.copy_(buffer))


def _flat(t):
    return t.reshape(-1)


def _copy_blocks(flat, tensors):
    """Fills each tensor, in order, from the next t.numel() elements of the 1-D `flat`."""
    at = 0
    for t in tensors:
        t.copy_(flat[at:at + t.numel()].view(t.shape))
        at += t.numel()


def _note_for_compile(kind):
    """Inside ts.compile's capture, a collective that is no operator (async_op=True, lists of
    tensors, point-to-point) cannot live in the graph (a replay would skip the communication): it
    breaks the graph, so the function runs eagerly (fullgraph=True: GraphBreakError)."""
    capture = sys.modules.get("tessera.compiler._capture")
    if capture is not None and getattr(capture._local, "capturing", False):
        on_read = getattr(capture._local, "on_read", None)
        if on_read is not None:
            on_read(f"the collective c10d::{_KIND_NAMES[kind]}", verbatim=True)


def _as_operator(pg, kind, inputs, outputs, op, root, input_splits, output_splits):
    """The call of the c10d operator (collective_operators.cpp) that runs this collective, or None
    when none does (lists of tensors, point-to-point)."""
    group = pg._impl.operator_handle()
    if kind == BARRIER:
        return "c10d::barrier", (group,)
    if kind in (ALL_REDUCE, BROADCAST, REDUCE) and len(inputs) == 1 and not outputs:
        if kind == ALL_REDUCE:
            return "c10d::all_reduce_", (inputs[0], op, group)
        if kind == BROADCAST:
            return "c10d::broadcast_", (inputs[0], root, group)
        return "c10d::reduce_", (inputs[0], op, root, group)
    if kind in (ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL) and len(inputs) == 1 and len(outputs) == 1:
        if kind == ALL_GATHER:
            return "c10d::all_gather_into_tensor_", (outputs[0], inputs[0], group)
        if kind == REDUCE_SCATTER:
            return "c10d::reduce_scatter_tensor_", (outputs[0], inputs[0], op, group)
        return "c10d::all_to_all_single_", (outputs[0], inputs[0], list(output_splits), list(input_splits), group)
    return None


def _run_operator(pg, kind, inputs, name, args, finish):
    """A synchronous collective through its operator: the tracer records it (a compiled graph
    communicates on every replay), the profiler shows it as an operator event."""
    sequence = pg._next_sequence(kind, inputs)
    try:
        _C.call_op(name, args, {})
    except RuntimeError as e:  # a ValueError (bad arguments) is no RuntimeError and passes as it is
        raise DistBackendError(pg._diagnose(sequence, _KIND_NAMES[kind], e)) from None
    if finish is not None:
        finish()


def _run(pg, kind, inputs, outputs, async_op, finish=None, op=0, root=0, tag=0, input_splits=(),
         output_splits=(), result=None):
    if not async_op:
        call = _as_operator(pg, kind, inputs, outputs, op, root, input_splits, output_splits)
        if call is not None:
            return _run_operator(pg, kind, inputs, *call, finish)
    _note_for_compile(kind)
    impl, sequence = pg._start(kind, inputs, outputs, op, root, tag, input_splits, output_splits)
    work = Work(pg, impl, sequence, _KIND_NAMES[kind], finish, result)
    if async_op:
        return work
    work.wait()
    return None


def _steps(*steps):
    steps = [s for s in steps if s is not None]
    if not steps:
        return None

    def run():
        for s in steps:
            s()
    return run


def _check_avg(op, t, where):
    if op == ReduceOp.AVG and not (t.dtype.is_floating_point or t.dtype.is_complex):
        raise TypeError(f"{where}: ReduceOp.AVG needs a floating or complex tensor, got {t.dtype}")


def _average(buffer, pg, op):
    if op == ReduceOp.AVG:
        return lambda: buffer.div_(pg.size())
    return None


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    where = "all_reduce"
    _check_tensor(tensor, where)
    code = _reduce_code(op, where)
    pg = _resolve(group, where)
    if pg is None:
        return None
    _check_avg(op, tensor, where)
    buffer, copy_back = _contiguous(tensor)
    return _run(pg, ALL_REDUCE, [buffer], [], async_op, _steps(_average(buffer, pg, op), copy_back),
                op=0 if op == ReduceOp.AVG else code, result=[tensor])


def broadcast(tensor, src=None, group=None, async_op=False, group_src=None):
    where = "broadcast"
    _check_tensor(tensor, where)
    pg = _resolve(group, where)
    if pg is None:
        return None
    root = _root(pg, src, group_src, where, "src")
    buffer, copy_back = _contiguous(tensor)
    return _run(pg, BROADCAST, [buffer], [], async_op, copy_back, root=root, result=[tensor])


def reduce(tensor, dst=None, op=ReduceOp.SUM, group=None, async_op=False, group_dst=None):
    where = "reduce"
    _check_tensor(tensor, where)
    code = _reduce_code(op, where)
    pg = _resolve(group, where)
    if pg is None:
        return None
    _check_avg(op, tensor, where)
    root = _root(pg, dst, group_dst, where, "dst")
    buffer, copy_back = _contiguous(tensor)
    average = _average(buffer, pg, op) if pg.rank() == root else None
    return _run(pg, REDUCE, [buffer], [], async_op, _steps(average, copy_back),
                op=0 if op == ReduceOp.AVG else code, root=root)


def _root(pg, global_rank, group_rank, where, what):
    if group_rank is not None:
        if global_rank is not None:
            raise ValueError(f"{where}: give {what} or group_{what}, not both")
        if not 0 <= group_rank < pg.size():
            raise ValueError(f"{where}: group_{what}={group_rank} is not in a group of size {pg.size()}")
        return group_rank
    return _group_rank(pg, 0 if global_rank is None else int(global_rank), where, what)


def _same_shape(tensors, like, where, what):
    for i, t in enumerate(tensors):
        if t.numel() != like.numel() or t.dtype != like.dtype:
            raise ValueError(f"{where}: {what}[{i}] has {t.numel()} elements of {t.dtype}, expected "
                             f"{like.numel()} of {like.dtype} (like the input)")


def all_gather(tensor_list, tensor, group=None, async_op=False):
    where = "all_gather"
    _check_tensor(tensor, where)
    pg = _resolve(group, where)
    if pg is None:
        return None
    tensor_list = _check_list(tensor_list, where, "tensor_list", pg.size())
    _same_shape(tensor_list, tensor, where, "tensor_list")
    import tessera
    gathered = tessera.empty(pg.size() * tensor.numel(), dtype=tensor.dtype, device=tensor.device)
    return _run(pg, ALL_GATHER, [_flat(tensor.contiguous())], [gathered], async_op,
                lambda: _copy_blocks(gathered, tensor_list),
                result=[tensor_list])


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    where = "all_gather_into_tensor"
    _check_tensor(output_tensor, where, "output_tensor")
    _check_tensor(input_tensor, where, "input_tensor")
    pg = _resolve(group, where)
    if pg is None:
        return None
    if output_tensor.dtype != input_tensor.dtype:
        raise TypeError(f"{where}: output dtype {output_tensor.dtype} differs from the input's {input_tensor.dtype}")
    if output_tensor.numel() != input_tensor.numel() * pg.size():
        raise ValueError(f"{where}: output tensor size must be equal to world_size times input tensor size: "
                         f"{output_tensor.numel()} != {pg.size()} x {input_tensor.numel()}")
    buffer, copy_back = _contiguous(output_tensor)
    return _run(pg, ALL_GATHER, [_flat(input_tensor.contiguous())], [_flat(buffer)], async_op, copy_back,
                result=[output_tensor])


def _all_gather_base(output_tensor, input_tensor, group=None, async_op=False):
    return all_gather_into_tensor(output_tensor, input_tensor, group, async_op)


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    where = "reduce_scatter"
    _check_tensor(output, where, "output")
    code = _reduce_code(op, where)
    pg = _resolve(group, where)
    if pg is None:
        return None
    input_list = _check_list(input_list, where, "input_list", pg.size())
    _same_shape(input_list, output, where, "input_list")
    _check_avg(op, output, where)
    import tessera
    whole = tessera.cat([_flat(t) for t in input_list])
    buffer, copy_back = _contiguous(output)
    return _run(pg, REDUCE_SCATTER, [whole], [_flat(buffer)], async_op, _steps(_average(buffer, pg, op), copy_back),
                op=0 if op == ReduceOp.AVG else code)


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    where = "reduce_scatter_tensor"
    _check_tensor(output, where, "output")
    _check_tensor(input, where, "input")
    code = _reduce_code(op, where)
    pg = _resolve(group, where)
    if pg is None:
        return None
    if input.numel() != output.numel() * pg.size():
        raise ValueError(f"{where}: input tensor must be the same size as output size times world size: "
                         f"{input.numel()} != {pg.size()} x {output.numel()}")
    if output.dtype != input.dtype:
        raise TypeError(f"{where}: output dtype {output.dtype} differs from the input's {input.dtype}")
    _check_avg(op, output, where)
    buffer, copy_back = _contiguous(output)
    return _run(pg, REDUCE_SCATTER, [_flat(input.contiguous())], [_flat(buffer)], async_op,
                _steps(_average(buffer, pg, op), copy_back), op=0 if op == ReduceOp.AVG else code)


def _reduce_scatter_base(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    return reduce_scatter_tensor(output, input, op, group, async_op)


def gather(tensor, gather_list=None, dst=None, group=None, async_op=False, group_dst=None):
    where = "gather"
    _check_tensor(tensor, where)
    pg = _resolve(group, where)
    if pg is None:
        return None
    root = _root(pg, dst, group_dst, where, "dst")
    outputs, finish = [], None
    if pg.rank() == root:
        gather_list = _check_list(gather_list if gather_list is not None else [], where, "gather_list", pg.size())
        _same_shape(gather_list, tensor, where, "gather_list")
        import tessera
        gathered = tessera.empty(pg.size() * tensor.numel(), dtype=tensor.dtype, device=tensor.device)
        outputs = [gathered]

        def finish():
            _copy_blocks(gathered, gather_list)
    elif gather_list:
        raise ValueError(f"{where}: Argument ``gather_list`` must NOT be specified on non-destination ranks.")
    return _run(pg, GATHER, [_flat(tensor.contiguous())], outputs, async_op, finish, root=root)


def scatter(tensor, scatter_list=None, src=None, group=None, async_op=False, group_src=None):
    where = "scatter"
    _check_tensor(tensor, where)
    pg = _resolve(group, where)
    if pg is None:
        return None
    root = _root(pg, src, group_src, where, "src")
    inputs = []
    if pg.rank() == root:
        scatter_list = _check_list(scatter_list if scatter_list is not None else [], where, "scatter_list", pg.size())
        _same_shape(scatter_list, tensor, where, "scatter_list")
        import tessera
        inputs = [tessera.cat([_flat(t) for t in scatter_list])]
    elif scatter_list:
        raise ValueError(f"{where}: Argument ``scatter_list`` must NOT be specified on non-source ranks.")
    buffer, copy_back = _contiguous(tensor)
    return _run(pg, SCATTER, inputs, [_flat(buffer)], async_op, copy_back, root=root)


def _row_splits(splits, t, size, where, what):
    if splits is None or len(splits) == 0:
        if t.shape[0] % size if t.dim() else True:
            raise ValueError(f"{where}: {what}'s first dimension ({t.shape[0] if t.dim() else 'a scalar'}) must "
                             f"split evenly over {size} ranks when no split sizes are given")
        return []
    splits = [int(s) for s in splits]
    if len(splits) != size:
        raise ValueError(f"{where}: {what} split sizes must have one entry per rank ({size}), got {len(splits)}")
    if any(s < 0 for s in splits) or sum(splits) != t.shape[0]:
        raise ValueError(f"{where}: {what} split sizes {splits} must be >= 0 and add up to its first dimension "
                         f"({t.shape[0]})")
    row = t.numel() // t.shape[0] if t.shape[0] else 0
    return [s * row for s in splits]


def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None, group=None, async_op=False):
    where = "all_to_all_single"
    _check_tensor(output, where, "output")
    _check_tensor(input, where, "input")
    pg = _resolve(group, where)
    if pg is None:
        return None
    if output.dtype != input.dtype:
        raise TypeError(f"{where}: output dtype {output.dtype} differs from the input's {input.dtype}")
    in_splits = _row_splits(input_split_sizes, input, pg.size(), where, "input")
    out_splits = _row_splits(output_split_sizes, output, pg.size(), where, "output")
    buffer, copy_back = _contiguous(output)
    return _run(pg, ALL_TO_ALL, [_flat(input.contiguous())], [_flat(buffer)], async_op, copy_back,
                input_splits=in_splits, output_splits=out_splits)


def all_to_all(output_tensor_list, input_tensor_list, group=None, async_op=False):
    where = "all_to_all"
    pg = _resolve(group, where)
    if pg is None:
        return None
    outputs = _check_list(output_tensor_list, where, "output_tensor_list", pg.size())
    inputs = _check_list(input_tensor_list, where, "input_tensor_list", pg.size())
    import tessera
    whole_in = tessera.cat([_flat(t.contiguous()) for t in inputs])
    whole_out = tessera.empty(sum(t.numel() for t in outputs), dtype=whole_in.dtype, device=whole_in.device)
    return _run(pg, ALL_TO_ALL, [whole_in], [whole_out], async_op, lambda: _copy_blocks(whole_out, outputs),
                input_splits=[t.numel() for t in inputs], output_splits=[t.numel() for t in outputs])


def barrier(group=None, async_op=False, device_ids=None):
    pg = _resolve(group, "barrier")
    if pg is None:
        return None
    return _run(pg, BARRIER, [], [], async_op)


def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
    """A barrier through the store that names the ranks that did not reach it: rank 0 waits for
    every other rank's arrival (up to `timeout`), then releases them."""
    import time
    from ._c10d import _world
    pg = _resolve(group, "monitored_barrier")
    if pg is None:
        return None
    timeout = timeout or pg._timeout
    sequence = pg._sequence
    pg._sequence += 1
    store, me, size = pg._store, pg.rank(), pg.size()
    key = f"monitored_barrier/{sequence}"
    if me != 0:
        store.set(f"{key}/arrived/{me}", "1")
        store.wait([f"{key}/released"], timeout)
        return None
    deadline = time.monotonic() + timeout.total_seconds()
    missing = list(range(1, size))
    while missing:
        missing = [r for r in missing if not store.check([f"{key}/arrived/{r}"])]
        if not missing:
            break
        if time.monotonic() >= deadline:
            ranks = missing if wait_all_ranks else missing[:1]
            global_ranks = ", ".join(str(_world.groups[pg][r]) for r in ranks)
            raise RuntimeError(f"[Rank 0]: Rank{'s' if len(ranks) > 1 else ''} {global_ranks} failed to pass "
                               f"monitoredBarrier in {timeout} timeout")
        time.sleep(0.01)
    store.set(f"{key}/released", "1")
    return None


def _peer(pg, rank, group_rank, where, what):
    return _root(pg, rank, group_rank, where, what)


def send(tensor, dst=None, group=None, tag=0, group_dst=None):
    isend(tensor, dst, group, tag, group_dst).wait()


def recv(tensor, src=None, group=None, tag=0, group_src=None):
    """Receives into tensor from src (a global rank; None: any rank); returns the sender's rank."""
    work = irecv(tensor, src, group, tag, group_src)
    if work is None:
        return -1  # not a member of the group
    work.wait()
    if src is not None:
        return src
    return _world_rank_of(group, group_src if group_src is not None else work._source_rank())


def _world_rank_of(group, group_rank):
    from ._c10d import get_global_rank
    return get_global_rank(group, group_rank)


def isend(tensor, dst=None, group=None, tag=0, group_dst=None):
    where = "isend"
    _check_tensor(tensor, where)
    pg = _resolve(group, where)
    if pg is None:
        return None
    peer = _peer(pg, dst, group_dst, where, "dst")
    return _run(pg, SEND, [_flat(tensor.contiguous())], [], True, root=peer, tag=int(tag))


def irecv(tensor, src=None, group=None, tag=0, group_src=None):
    where = "irecv"
    _check_tensor(tensor, where)
    pg = _resolve(group, where)
    if pg is None:
        return None
    # src=None: from any rank (the backend reports which; Work._source_rank() after wait).
    peer = -1 if src is None and group_src is None else _peer(pg, src, group_src, where, "src")
    buffer, copy_back = _contiguous(tensor)
    return _run(pg, RECV, [], [_flat(buffer)], True, copy_back, root=peer, tag=int(tag))


class P2POp:
    """One send or receive of batch_isend_irecv: P2POp(dist.isend, tensor, peer)."""

    def __init__(self, op, tensor, peer=None, group=None, tag=0, group_peer=None):
        if op not in (isend, irecv):
            raise ValueError("Invalid ``op``. Expected ``op`` to be of type ``torch.distributed.isend`` or "
                             "``torch.distributed.irecv``.")
        self.op, self.tensor, self.peer, self.group, self.tag, self.group_peer = op, tensor, peer, group, tag, group_peer


def batch_isend_irecv(p2p_op_list):
    if not isinstance(p2p_op_list, (list, tuple)) or not all(isinstance(p, P2POp) for p in p2p_op_list):
        raise ValueError("batch_isend_irecv: expected a list of P2POp")
    if not p2p_op_list:
        raise ValueError("batch_isend_irecv: the list of P2POp is empty")
    return [p.op(p.tensor, p.peer, p.group, p.tag) if p.group_peer is None
            else p.op(p.tensor, None, p.group, p.tag, p.group_peer) for p in p2p_op_list]

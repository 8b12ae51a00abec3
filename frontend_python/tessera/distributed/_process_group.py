"""Process groups and their work handles: the Python side of a group made by a backend plugin.

A ProcessGroup wraps the C++ group (tessera._C._ProcessGroup) with what Python callers expect:
global and group ranks, a sequence number per collective (every rank numbers them the same way),
TESSERA_DISTRIBUTED_DEBUG=DETAIL's cross-rank check, and errors that name the operation, the
group and the ranks that did not arrive.
"""
import os
import time
from datetime import timedelta

from .. import _C

DistError = _C.DistError
DistStoreError = _C.DistStoreError
DistBackendError = _C.DistBackendError
DistNetworkError = _C.DistNetworkError

# ts_collective_kind codes (sdk/include/tessera/abi.h).
ALL_REDUCE, BROADCAST, REDUCE, ALL_GATHER, GATHER, SCATTER, REDUCE_SCATTER, ALL_TO_ALL, BARRIER, SEND, RECV = range(11)
_KIND_NAMES = ["all_reduce", "broadcast", "reduce", "all_gather", "gather", "scatter", "reduce_scatter",
               "all_to_all", "barrier", "send", "recv"]

default_pg_timeout = timedelta(minutes=10)


class _RedOp:
    __slots__ = ("name", "code")

    def __init__(self, name, code):
        self.name, self.code = name, code

    def __repr__(self):
        return f"<RedOpType.{self.name}: {self.code}>"

    def __eq__(self, other):
        return isinstance(other, _RedOp) and other.code == self.code

    def __hash__(self):
        return hash(self.code)


class ReduceOp:
    """The reductions: SUM, AVG, PRODUCT, MIN, MAX (BAND/BOR/BXOR are not offered by Gloo)."""
    SUM = _RedOp("SUM", 0)
    PRODUCT = _RedOp("PRODUCT", 1)
    MIN = _RedOp("MIN", 2)
    MAX = _RedOp("MAX", 3)
    AVG = _RedOp("AVG", 100)  # SUM, then divided by the group's size

    class RedOpType:
        pass


for _op in (ReduceOp.SUM, ReduceOp.PRODUCT, ReduceOp.MIN, ReduceOp.MAX, ReduceOp.AVG):
    setattr(ReduceOp.RedOpType, _op.name, _op)


def _reduce_code(op, where):
    if isinstance(op, _RedOp):
        return op.code
    raise TypeError(f"{where}: op must be a ReduceOp (ReduceOp.SUM, ...), got {op!r}")


class Backend(str):
    """Backend names, as torch.distributed.Backend: Backend('GLOO') == 'gloo'."""
    UNDEFINED = "undefined"
    GLOO = "gloo"
    NCCL = "nccl"
    MPI = "mpi"

    def __new__(cls, name):
        if not isinstance(name, str):
            raise ValueError(f"Backend name must be a string, but got: {name!r}")
        return str.__new__(cls, name.lower())

    @classmethod
    def register_backend(cls, name, func=None, extended_api=False, devices=None):
        raise NotImplementedError("Backend.register_backend: a tessera backend is a plugin (libtessera_<name>.so "
                                  "registering a process-group backend through the C ABI 1.7), not a Python function")


def _debug_level():
    return (os.environ.get("TESSERA_DISTRIBUTED_DEBUG") or os.environ.get("TORCH_DISTRIBUTED_DEBUG") or "OFF").upper()


def _fingerprint(kind, tensors):
    shapes = ";".join(f"{list(t.shape)}:{t.dtype}" for t in tensors)
    return f"OpType={_KIND_NAMES[kind]}, TensorShapes/Dtypes=[{shapes}]"


class ProcessGroup:
    """A group of ranks with one backend. Collectives go through tessera.distributed's functions."""

    def __init__(self, backend, store, rank, size, ranks, timeout, name):
        self._backend_name = str(backend)
        self._store = store
        self._ranks = list(ranks)  # global ranks, in group-rank order
        self._name = name
        self._timeout = timeout
        self._sequence = 0
        self._detail = _debug_level() == "DETAIL"  # read once, at creation, as torch does
        self._impl = _C._ProcessGroup(self._backend_name, store._impl, rank, size, timeout)

    def rank(self):
        return self._impl.rank()

    def size(self):
        return self._impl.size()

    def name(self):
        return self._backend_name

    @property
    def group_name(self):
        return self._name

    def _describe(self):
        return f"process group '{self._name}' ({self._backend_name}, rank {self.rank()} of {self.size()})"

    def _next_sequence(self, kind, inputs):
        """The collective's number in this group (DETAIL: checked against the other ranks first)."""
        sequence = self._sequence
        self._sequence += 1
        if kind not in (SEND, RECV) and self._detail:
            self._check_same_collective(sequence, kind, inputs)
        return sequence

    def _start(self, kind, inputs, outputs, op=0, root=0, tag=0, input_splits=(), output_splits=(), timeout=None):
        sequence = self._next_sequence(kind, inputs)
        timeout_ms = -1 if timeout is None else int(timeout.total_seconds() * 1000)
        impl = self._impl.start(kind, list(inputs), list(outputs), op, root, tag, list(input_splits),
                                list(output_splits), timeout_ms)
        return impl, sequence

    def _check_same_collective(self, sequence, kind, tensors):
        """DETAIL: every rank publishes what it is about to run and compares with the others."""
        mine = _fingerprint(kind, tensors)
        key = f"detail/{sequence}"
        self._store.set(f"{key}/{self.rank()}", mine)
        for r in range(self.size()):
            theirs = self._store.get(f"{key}/{r}").decode()
            if theirs != mine:
                raise RuntimeError(
                    f"Detected mismatch between collectives on ranks. Rank {self.rank()} is running collective: "
                    f"CollectiveFingerPrint(SequenceNumber={sequence}, {mine}), but Rank {r} is running collective: "
                    f"CollectiveFingerPrint(SequenceNumber={sequence}, {theirs}) [{self._describe()}]")

    def _diagnose(self, sequence, what, error):
        """After a failed collective: which ranks reported reaching it (through the store)."""
        try:
            key = f"failed/{sequence}"
            self._store.set(f"{key}/{self.rank()}", "1")
            deadline = time.monotonic() + 2.0
            missing = list(range(self.size()))
            while missing and time.monotonic() < deadline:
                missing = [r for r in missing if not self._store.check([f"{key}/{r}"])]
                time.sleep(0.05)
            if missing:
                ranks = ", ".join(str(self._ranks[r]) for r in missing)
                return (f"{what} #{sequence} failed on {self._describe()}: ranks that did not arrive: [{ranks}]. "
                        f"Cause: {error}")
            return f"{what} #{sequence} failed on {self._describe()}: {error}"
        except Exception as store_error:  # the store may have died with the rank that served it
            return (f"{what} #{sequence} failed on {self._describe()}: {error} (the store could not say which "
                    f"ranks arrived: {store_error})")

    def __repr__(self):
        return f"<ProcessGroup {self._name} backend={self._backend_name} rank={self.rank()} size={self.size()}>"


class Work:
    """A started collective (async_op=True). wait() finishes it: results land in the caller's
    tensors then (copies back to non-contiguous tensors, AVG's division, lists filled)."""

    def __init__(self, group, impl, sequence, what, finish=None, result=None):
        self._group = group
        self._impl = impl
        self._sequence = sequence
        self._what = what
        self._finish = finish
        self._result = result
        self._done = False
        self._exception = None

    def wait(self, timeout=None):
        if self._done:
            if self._exception is not None:
                raise self._exception
            return True
        timeout_ms = -1 if timeout is None else int(timeout.total_seconds() * 1000)
        try:
            self._impl.wait(timeout_ms)
        except DistBackendError as e:
            self._exception = DistBackendError(self._group._diagnose(self._sequence, self._what, e))
            self._done = True
            raise self._exception from None
        self._done = True
        if self._finish is not None:
            self._finish()
        return True

    def is_completed(self):
        return self._done or self._impl.is_completed()

    def _source_rank(self):
        """The group rank a finished receive from any rank got its data from (torch's name)."""
        return self._impl.source_rank()

    def is_success(self):
        return self._done and self._exception is None

    def exception(self):
        return self._exception

    def result(self):
        return self._result

    def get_future(self):
        return _Future(self)

    def synchronize(self):
        self.wait()


class _Future:
    """The part of torch.futures.Future that callers of Work.get_future() use."""

    def __init__(self, work):
        self._work = work

    def wait(self):
        self._work.wait()
        return self._work.result()

    def value(self):
        return self.wait()

    def done(self):
        return self._work.is_completed()

    def then(self, callback):
        work = self._work

        class _Then(_Future):
            def wait(inner):
                work.wait()
                return callback(self)

        return _Then(work)

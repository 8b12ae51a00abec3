"""Tensors in shared memory across processes: Tensor.share_memory_ / is_shared, Module.share_memory,
tessera.multiprocessing (queues and Process arguments with fork and spawn, both directions
writing the same memory, Hogwild training), spawn() and its errors, DataLoader batches in shared
memory; the faults: a sender that exits before its tensor is received, a corrupt handle, a child
that raises or dies. Every wait has a timeout."""
import os
import signal

import numpy as np
import pytest

import tessera as ts
import tessera.multiprocessing as mp
from tessera import _C

TIMEOUT = 60


# ---- process bodies (module level: spawn pickles them by name)
def _add(i, t, amount):
    t += amount


def _put_view(q, done):
    base = ts.arange(12.).reshape(3, 4)
    q.put(base[:, 1:3])  # a strided view of a larger storage
    q.put(ts.nn.Parameter(ts.ones(2, 2)))
    done.wait(TIMEOUT)


def _put_then_exit(q):
    q.put(ts.ones(1000))


def _write_received(q_in, q_out):
    t = q_in.get(timeout=TIMEOUT)
    t.mul_(2)
    q_out.put("written")


def _hogwild(rank, model, steps):
    ts.manual_seed(rank)
    opt = ts.optim.SGD(model.parameters(), lr=0.1)
    x = ts.randn(16, 4)
    y = x.sum(1, keepdim=True)
    for _ in range(steps):
        opt.zero_grad()
        ts.nn.functional.mse_loss(model(x), y).backward()
        opt.step()


def _raise(i, message):
    if i == 1:
        raise ValueError(message)


def _exit(i, code):
    os._exit(code if i == 0 else 0)


def _kill_self(i):
    os.kill(os.getpid(), signal.SIGKILL)


# ---- share_memory_
def test_share_memory_moves_every_view_in_place():
    t = ts.arange(10, dtype=ts.float32)
    view = t[2:6]
    assert not t.is_shared()
    assert t.share_memory_() is t
    assert t.is_shared() and view.is_shared()
    np.testing.assert_array_equal(t.numpy(), np.arange(10, dtype=np.float32))  # the values moved with it
    view.fill_(-1)  # views still alias the (moved) storage
    assert t.tolist()[2:6] == [-1.0] * 4
    t.share_memory_()  # already shared: a no-op
    assert t.is_shared() and view.tolist() == [-1.0] * 4
    empty = ts.empty(0).share_memory_()
    assert empty.is_shared() and empty.numel() == 0


def test_forked_child_writes_the_parents_memory():
    t = ts.zeros(5, dtype=ts.float64).share_memory_()
    p = mp.get_context("fork").Process(target=_add, args=(0, t, 3.0))
    p.start()
    p.join(TIMEOUT)
    assert p.exitcode == 0
    assert t.tolist() == [3.0] * 5
    # Without share_memory_, a fork()ed child writes its own copy.
    u = ts.zeros(5, dtype=ts.float64)
    p = mp.get_context("fork").Process(target=_add, args=(0, u, 3.0))
    p.start()
    p.join(TIMEOUT)
    assert u.tolist() == [0.0] * 5


def test_module_share_memory():
    m = ts.nn.Sequential(ts.nn.Linear(3, 4), ts.nn.BatchNorm1d(4))
    assert m.share_memory() is m
    assert all(p.is_shared() for p in m.parameters()) and all(b.is_shared() for b in m.buffers())
    assert all(p.requires_grad for p in m.parameters())


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_queue_sends_views_and_parameters_through_shared_memory(method):
    ctx = mp.get_context(method)
    q, done = ctx.Queue(), ctx.Event()
    p = ctx.Process(target=_put_view, args=(q, done))
    p.start()
    try:
        view = q.get(timeout=TIMEOUT)
        param = q.get(timeout=TIMEOUT)
    finally:
        done.set()
        p.join(TIMEOUT)
    assert view.is_shared() and view.stride() == (4, 1) and view.storage_offset() == 1
    np.testing.assert_array_equal(view.numpy(), np.arange(12.).reshape(3, 4)[:, 1:3])
    assert isinstance(param, ts.nn.Parameter) and param.requires_grad and param.tolist() == [[1.0, 1.0]] * 2


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_receiver_writes_are_seen_by_the_sender(method):
    ctx = mp.get_context(method)
    q_in, q_out = ctx.Queue(), ctx.Queue()
    t = ts.full((4,), 1.5)
    p = ctx.Process(target=_write_received, args=(q_in, q_out))
    p.start()
    q_in.put(t)
    assert q_out.get(timeout=TIMEOUT) == "written"
    p.join(TIMEOUT)
    assert t.is_shared()  # sending moved it into shared memory
    assert t.tolist() == [3.0] * 4


def test_non_leaf_requiring_grad_is_refused():
    x = ts.ones(3, requires_grad=True)
    q = mp.get_context("fork").Queue()
    with pytest.raises(RuntimeError, match="non-leaf tensor which requires_grad"):
        mp.reductions.reduce_tensor(x * 2)
    q.close()


def test_hogwild_training_updates_the_shared_model():
    ts.manual_seed(0)
    model = ts.nn.Linear(4, 1)
    model.share_memory()
    before = model.weight.detach().clone()
    mp.spawn(_hogwild, args=(model, 20), nprocs=2, start_method="fork")
    after = model.weight.detach()
    assert not np.allclose(before.numpy(), after.numpy())
    # Both workers pulled the weights toward the all-ones solution of y = x.sum(1).
    assert np.abs(after.numpy() - 1).max() < np.abs(before.numpy() - 1).max()


# ---- faults
def test_sender_that_exits_before_the_receive_gives_a_clear_error():
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_put_then_exit, args=(q,))
    p.start()
    p.join(TIMEOUT)
    with pytest.raises(RuntimeError, match="exited before this one received it"):
        q.get(timeout=TIMEOUT)


def test_corrupt_handle_is_refused():
    t = ts.zeros(4).share_memory_()
    fd, nbytes = _C._shared_memory_handle(t)
    assert nbytes == 16
    with pytest.raises(ValueError, match="does not fit a shared storage of 16 bytes"):
        _C._open_shared_memory(os.dup(fd), nbytes, ts.float32, [5], [1], 0)
    alias = _C._open_shared_memory(os.dup(fd), nbytes, ts.float32, [2], [2], 1)  # a strided alias of the same file
    alias.fill_(7)
    assert t.tolist() == [0.0, 7.0, 0.0, 7.0]


def test_spawn_reraises_the_childs_exception_with_its_traceback():
    with pytest.raises(mp.ProcessRaisedException, match=r"(?s)in _raise.*ValueError: bad input in rank 1") as info:
        mp.spawn(_raise, args=("bad input in rank 1",), nprocs=2, start_method="fork")
    assert info.value.error_index == 1


def test_spawn_reports_exit_codes_and_signals():
    with pytest.raises(mp.ProcessExitedException, match="process 0 terminated with exit code 3") as info:
        mp.spawn(_exit, args=(3,), nprocs=2, start_method="fork")
    assert info.value.exit_code == 3
    with pytest.raises(mp.ProcessExitedException, match="terminated with signal SIGKILL"):
        mp.spawn(_kill_self, nprocs=1, start_method="fork")


def test_spawn_without_join_and_sharing_strategies():
    t = ts.zeros(2).share_memory_()
    ctx = mp.spawn(_add, args=(t, 1.0), nprocs=2, join=False, start_method="fork")
    assert len(ctx.pids()) == 2
    deadline = 0
    while not ctx.join(timeout=1):
        deadline += 1
        assert deadline < TIMEOUT, "spawned processes did not finish"
    assert t.tolist() == [2.0, 2.0]
    assert mp.get_sharing_strategy() == "file_descriptor" and mp.get_all_sharing_strategies() == {"file_descriptor"}
    with pytest.raises(ValueError, match="set_sharing_strategy: expected one of"):
        mp.set_sharing_strategy("file_system")
    assert mp.Queue is not None and mp.cpu_count() >= 1  # the standard module's names


def test_dataloader_batches_arrive_in_shared_memory():
    data = ts.arange(64, dtype=ts.float32).reshape(16, 4)
    loader = ts.utils.data.DataLoader(ts.utils.data.TensorDataset(data), batch_size=5, num_workers=2)
    batches = [b for (b,) in loader]
    assert all(b.is_shared() for b in batches)
    np.testing.assert_array_equal(ts.cat(batches).numpy(), data.numpy())

"""tessera.distributed with real processes on loopback (the gloo backend): every collective against
its definition (NumPy on every rank's known input), in every dtype Gloo reduces; groups, async work,
point-to-point, object collectives; and the faults: a rank that dies, a rank that never comes,
mismatched collectives under DETAIL."""
import time

import pytest

import tessera.distributed as dist
from dist_harness import finish_world, run_world, run_world_to_ok, start_world

pytestmark = pytest.mark.skipif(not dist.is_gloo_available(), reason="the gloo backend plugin is not built")

COLLECTIVES = """
dist.init_process_group("gloo")
assert dist.get_rank() == RANK and dist.get_world_size() == WORLD and dist.is_initialized()
assert dist.get_backend() == "gloo"

def value(rank, dtype, n=6):
    # Per-rank data every rank can compute: the oracle for every collective.
    if dtype == "bool":
        return (np.arange(n) + rank) % 3 == 0
    return (np.arange(n) % 4 + rank + 1).astype(dtype)

def tensor(a, dtype):
    if dtype == "bfloat16":
        return ts.tensor(a.astype("float32").tolist(), dtype=ts.bfloat16)
    return ts.from_numpy(np.ascontiguousarray(a))

def numpy(t):
    return t.float().numpy() if t.dtype == ts.bfloat16 else t.numpy()

everyone = lambda dtype: [value(r, dtype if dtype != "bfloat16" else "float32") for r in range(WORLD)]
reducers = {dist.ReduceOp.SUM: lambda a: np.sum(a, axis=0), dist.ReduceOp.PRODUCT: lambda a: np.prod(a, axis=0),
            dist.ReduceOp.MIN: lambda a: np.min(a, axis=0), dist.ReduceOp.MAX: lambda a: np.max(a, axis=0)}
for dtype in ["float32", "float64", "float16", "bfloat16", "int8", "uint8", "int16", "int32", "int64"]:
    src = "float32" if dtype == "bfloat16" else dtype
    for op, ref in reducers.items():
        t = tensor(value(RANK, src), dtype)
        dist.all_reduce(t, op=op)
        expected = ref(np.stack(everyone(dtype))).astype(src)
        np.testing.assert_allclose(numpy(t).astype("float64"), expected.astype("float64"), rtol=1e-2,
                                   err_msg=f"all_reduce {op} {dtype}")
    if dtype.startswith("float") or dtype == "bfloat16":
        t = tensor(value(RANK, src), dtype)
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        np.testing.assert_allclose(numpy(t), np.mean(np.stack(everyone(dtype)), axis=0), rtol=1e-2)
    # reduce to the last rank
    t = tensor(value(RANK, src), dtype)
    dist.reduce(t, dst=WORLD - 1, op=dist.ReduceOp.SUM)
    if RANK == WORLD - 1:
        np.testing.assert_allclose(numpy(t).astype("float64"), np.sum(np.stack(everyone(dtype)), 0).astype(src).astype("float64"), rtol=1e-2)
    else:
        np.testing.assert_array_equal(numpy(t), value(RANK, src))  # untouched off the root
# bool: SUM/MAX are any, PRODUCT/MIN are all
for op, ref in [(dist.ReduceOp.SUM, np.any), (dist.ReduceOp.MIN, np.all)]:
    t = ts.from_numpy(value(RANK, "bool"))
    dist.all_reduce(t, op=op)
    np.testing.assert_array_equal(t.numpy(), ref(np.stack(everyone("bool")), axis=0))
# complex: SUM
c = ts.from_numpy((np.arange(4) + 1j * RANK).astype("complex64"))
dist.all_reduce(c)
np.testing.assert_allclose(c.numpy(), sum((np.arange(4) + 1j * r) for r in range(WORLD)))

for dtype in ["float32", "int64", "bool", "float16", "uint8"]:
    # broadcast from rank 1
    t = ts.from_numpy(value(RANK, dtype).copy())
    dist.broadcast(t, src=1)
    np.testing.assert_array_equal(t.numpy(), value(1, dtype))
    # all_gather into a list and into one tensor
    outs = [ts.from_numpy(np.zeros(6, dtype)) for _ in range(WORLD)]
    dist.all_gather(outs, ts.from_numpy(value(RANK, dtype)))
    for r in range(WORLD):
        np.testing.assert_array_equal(outs[r].numpy(), value(r, dtype))
    big = ts.from_numpy(np.zeros((WORLD, 6), dtype))
    dist.all_gather_into_tensor(big, ts.from_numpy(value(RANK, dtype)))
    np.testing.assert_array_equal(big.numpy(), np.stack(everyone(dtype)))
    # gather / scatter with root 0
    lst = [ts.from_numpy(np.zeros(6, dtype)) for _ in range(WORLD)] if RANK == 0 else None
    dist.gather(ts.from_numpy(value(RANK, dtype)), lst, dst=0)
    if RANK == 0:
        for r in range(WORLD):
            np.testing.assert_array_equal(lst[r].numpy(), value(r, dtype))
    out = ts.from_numpy(np.zeros(6, dtype))
    dist.scatter(out, [ts.from_numpy(value(r + 10, dtype)) for r in range(WORLD)] if RANK == 0 else None, src=0)
    np.testing.assert_array_equal(out.numpy(), value(RANK + 10, dtype))

# reduce_scatter: block r of the sum goes to rank r
inputs = [ts.from_numpy((np.arange(3) + 10 * r + RANK).astype("float32")) for r in range(WORLD)]
out = ts.zeros(3)
dist.reduce_scatter(out, inputs)
np.testing.assert_allclose(out.numpy(), sum((np.arange(3) + 10 * RANK + k) for k in range(WORLD)))
whole = ts.from_numpy((np.arange(3 * WORLD) * (RANK + 1)).astype("float64"))
out = ts.zeros(3, dtype=ts.float64)
dist.reduce_scatter_tensor(out, whole, op=dist.ReduceOp.MAX)
np.testing.assert_allclose(out.numpy(), (np.arange(3 * WORLD) * WORLD)[3 * RANK:3 * RANK + 3])

# all_to_all_single with uneven splits: rank r sends (r + 1 + k) rows to rank k, rows filled with 100r + k
send_rows = [RANK + 1 + k for k in range(WORLD)]
recv_rows = [k + 1 + RANK for k in range(WORLD)]
x = np.concatenate([np.full((send_rows[k], 2), 100 * RANK + k, "float32") for k in range(WORLD)])
y = ts.zeros(sum(recv_rows), 2)
dist.all_to_all_single(y, ts.from_numpy(x), output_split_sizes=recv_rows, input_split_sizes=send_rows)
expected = np.concatenate([np.full((recv_rows[k], 2), 100 * k + RANK, "float32") for k in range(WORLD)])
np.testing.assert_array_equal(y.numpy(), expected)
outs = [ts.zeros(2, dtype=ts.int64) for _ in range(WORLD)]
dist.all_to_all(outs, [ts.tensor([RANK, k], dtype=ts.int64) for k in range(WORLD)])
for k in range(WORLD):
    assert outs[k].tolist() == [k, RANK]

# non-contiguous tensors are written back
t = ts.from_numpy(np.arange(12, dtype="float32").reshape(3, 4) * (RANK + 1)).t()
dist.all_reduce(t)
np.testing.assert_allclose(t.numpy(), (np.arange(12).reshape(3, 4) * sum(range(1, WORLD + 1))).T)

# async work: results land at wait()
works = [dist.all_reduce(ts.full((1000,), float(RANK)), async_op=True) for _ in range(3)]
t = ts.full((5,), 1.0)
w = dist.all_reduce(t, op=dist.ReduceOp.AVG, async_op=True)
assert w.wait() is True and w.is_completed() and w.is_success()
np.testing.assert_allclose(t.numpy(), 1.0)
for w in works:
    w.wait()

# point to point: a ring, blocking and non-blocking, and batch_isend_irecv
right, left = (RANK + 1) % WORLD, (RANK - 1) % WORLD
got = ts.zeros(4)
if RANK % 2 == 0:
    dist.send(ts.full((4,), float(RANK)), dst=right)
    assert dist.recv(got, src=left) == left
else:
    assert dist.recv(got, src=left) == left
    dist.send(ts.full((4,), float(RANK)), dst=right)
np.testing.assert_array_equal(got.numpy(), np.full(4, left))
got = ts.zeros(3, dtype=ts.int32)
reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, ts.tensor([RANK, 7, 9], dtype=ts.int32), right, tag=3),
                               dist.P2POp(dist.irecv, got, left, tag=3)])
for r in reqs:
    r.wait()
assert got.tolist() == [left, 7, 9]

# object collectives
objs = [None] * WORLD
dist.all_gather_object(objs, {"rank": RANK, "name": f"r{RANK}", "t": ts.tensor([float(RANK)])})
assert [o["rank"] for o in objs] == list(range(WORLD)) and objs[1]["name"] == "r1"
assert [o["t"].item() for o in objs] == [float(r) for r in range(WORLD)]
lst = [{"cfg": [1, 2, 3]}, "text", 4.5] if RANK == 0 else [None, None, None]
dist.broadcast_object_list(lst, src=0)
assert lst == [{"cfg": [1, 2, 3]}, "text", 4.5]
got = [None] * WORLD if RANK == 0 else None
dist.gather_object(("x", RANK), got, dst=0)
if RANK == 0:
    assert got == [("x", r) for r in range(WORLD)]
out = [None]
dist.scatter_object_list(out, [f"item{r}" * (r + 1) for r in range(WORLD)] if RANK == 0 else None, src=0)
assert out[0] == f"item{RANK}" * (RANK + 1)

# a subgroup of ranks {0, WORLD-1}: the others are not members
sub = dist.new_group([0, WORLD - 1])
if RANK in (0, WORLD - 1):
    t = ts.tensor([float(RANK)])
    dist.all_reduce(t, group=sub)
    assert t.item() == float(WORLD - 1)
    assert dist.get_world_size(sub) == 2 and dist.get_rank(sub) == (0 if RANK == 0 else 1)
    assert dist.get_process_group_ranks(sub) == [0, WORLD - 1]
else:
    assert sub is dist.GroupMember.NON_GROUP_MEMBER
    assert dist.all_reduce(ts.ones(1), group=sub) is None
dist.barrier()
dist.monitored_barrier(timeout=__import__("datetime").timedelta(seconds=30))
dist.destroy_process_group()
assert not dist.is_initialized()
print("ok", RANK)
"""


@pytest.mark.parametrize("world", [2, 3])
def test_every_collective_against_its_definition(tmp_path, world):
    results = run_world(tmp_path, world, COLLECTIVES, timeout=180)
    assert all(out.strip().endswith(f"ok {r}") for r, (_, out, _) in enumerate(results))


def test_rank_that_dies_mid_training_fails_its_peers_quickly(tmp_path):
    body = """
    import time
    dist.init_process_group("gloo", timeout=__import__("datetime").timedelta(seconds=60))
    for step in range(1000):
        if RANK == 1 and step == 5:
            os._exit(17)  # dies without a word, mid-training
        t = ts.ones(1000)
        start = time.monotonic()
        try:
            dist.all_reduce(t)
        except dist.DistBackendError as e:
            print("ERROR", type(e).__name__, round(time.monotonic() - start, 1), str(e).replace("\\n", " "))
            sys.exit(3)
    """
    started = time.monotonic()
    results = finish_world(start_world(tmp_path, 2, body), timeout=90)
    assert results[1][0] == 17
    rc, out, err = results[0]
    assert rc == 3, (out, err)
    assert "ERROR DistBackendError" in out and "all_reduce" in out
    # the peer's death is seen from its closed connection, not after the 60 s timeout
    assert time.monotonic() - started < 45, out


def test_rank_that_never_arrives_times_out_naming_it(tmp_path):
    body = """
    import datetime, time
    dist.init_process_group("gloo")
    if RANK == 1:
        time.sleep(8)  # alive, but never joins the collective in time
        sys.exit(0)
    t = ts.ones(10)
    w = dist.all_reduce(t, async_op=True)
    try:
        w.wait(timeout=datetime.timedelta(seconds=2))
    except dist.DistBackendError as e:
        print("ERROR", str(e).replace("\\n", " "))
        sys.exit(3)
    """
    results = finish_world(start_world(tmp_path, 2, body), timeout=60)
    rc, out, err = results[0]
    assert rc == 3, (out, err)
    assert "all_reduce" in out and "ranks that did not arrive: [1]" in out, out


def test_detail_debug_reports_mismatched_collectives(tmp_path):
    body = """
    dist.init_process_group("gloo")
    try:
        dist.all_reduce(ts.ones(3 + RANK))
    except RuntimeError as e:
        print("ERROR", e)
        sys.exit(3)
    """
    results = finish_world(start_world(tmp_path, 2, body, {"TESSERA_DISTRIBUTED_DEBUG": "DETAIL"}), timeout=60)
    for rank, (rc, out, err) in enumerate(results):
        assert rc == 3, (out, err)
        assert "Detected mismatch between collectives on ranks" in out
        assert f"Rank {1 - rank} is running collective" in out and "[4]" in out and "[3]" in out


def test_init_methods_file_and_tcp(tmp_path):
    body = """
    method = os.environ["METHOD"]
    dist.init_process_group("gloo", init_method=method, rank=RANK, world_size=WORLD)
    t = ts.tensor([RANK + 1.0])
    dist.all_reduce(t)
    assert t.item() == WORLD * (WORLD + 1) / 2
    dist.destroy_process_group()
    """
    run_world(tmp_path, 2, body, extra_env={"METHOD": f"file://{tmp_path}/rendezvous"}, timeout=60)
    from dist_harness import free_port
    run_world(tmp_path, 2, body, extra_env={"METHOD": f"tcp://127.0.0.1:{free_port()}"}, timeout=60)


def test_bad_arguments_raise_clear_errors(tmp_path):
    body = """
    dist.init_process_group("gloo")
    import pytest
    with pytest.raises(ValueError, match="twice"):
        dist.init_process_group("gloo")
    with pytest.raises(ValueError, match="tensor_list must hold one tensor per rank"):
        dist.all_gather([ts.zeros(2)], ts.zeros(2))
    with pytest.raises(ValueError, match="src=5 is not a rank of the group"):
        dist.broadcast(ts.zeros(2), src=5)
    with pytest.raises(TypeError, match="op must be a ReduceOp"):
        dist.all_reduce(ts.zeros(2), op="sum")
    with pytest.raises(TypeError, match="AVG needs a floating"):
        dist.all_reduce(ts.zeros(2, dtype=ts.int64), op=dist.ReduceOp.AVG)
    with pytest.raises(ValueError, match="world_size times input"):
        dist.all_gather_into_tensor(ts.zeros(3), ts.zeros(2))
    with pytest.raises(ValueError, match="split sizes"):
        dist.all_to_all_single(ts.zeros(4), ts.zeros(4), [1, 1], [3, 3])
    with pytest.raises(TypeError, match="must be a Tensor"):
        dist.all_reduce([1, 2])
    # the group still works after refusals
    t = ts.ones(2)
    dist.all_reduce(t)
    assert t.tolist() == [2.0, 2.0]
    """
    run_world(tmp_path, 2, body, timeout=60)


def test_errors_before_init():
    import tessera as ts
    with pytest.raises(ValueError, match="Default process group has not been initialized"):
        dist.all_reduce(ts.ones(1))
    with pytest.raises(ValueError, match="RANK expected"):
        import os
        env = {k: os.environ.pop(k) for k in ("RANK", "WORLD_SIZE") if k in os.environ}
        try:
            dist.init_process_group("gloo", init_method="env://")
        finally:
            os.environ.update(env)
    with pytest.raises(ValueError, match="rank 3 is not in a world of size 2"):
        dist.init_process_group("gloo", store=dist.HashStore(), rank=3, world_size=2)
    with pytest.raises(ValueError, match="unknown backend"):
        dist.init_process_group("carrier-pigeon", store=dist.HashStore(), rank=0, world_size=1)
    assert not dist.is_initialized()


def test_world_of_one_in_process():
    import tessera as ts
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        t = ts.tensor([1.0, 2.0])
        dist.all_reduce(t)
        assert t.tolist() == [1.0, 2.0]
        outs = [ts.zeros(2)]
        dist.all_gather(outs, t)
        assert outs[0].tolist() == [1.0, 2.0]
        objs = [None]
        dist.all_gather_object(objs, {"a": 1})
        assert objs == [{"a": 1}]
    finally:
        dist.destroy_process_group()


def test_async_collectives_overlap_yet_stay_ordered_where_they_must(tmp_path):
    # Gloo runs two collectives at once (one bucket's all-reduce beside the next, as torch's
    # ProcessGroupGloo): collectives on distinct tensors overlap, those on the same tensor run in
    # the order they were started, and a barrier waits for everything started before it.
    run_world_to_ok(tmp_path, 2, """
        dist.init_process_group("gloo")
        n = 1 << 20
        for trial in range(5):
            a = ts.full((n,), float(RANK + 1))
            b = ts.full((n,), float(10 * (RANK + 1)))
            works = [dist.all_reduce(a, async_op=True), dist.all_reduce(b, async_op=True),
                     dist.all_reduce(a, async_op=True), dist.broadcast(b, src=1, async_op=True)]
            last = dist.all_reduce(ts.ones(3), async_op=True)
            dist.barrier()
            assert last.is_completed() and all(w.is_completed() for w in works)
            for w in works:
                w.wait()
            assert a.min().item() == a.max().item() == 6.0, (trial, a.min().item(), a.max().item())
            assert b.min().item() == b.max().item() == 30.0, (trial, b.min().item(), b.max().item())
        dist.destroy_process_group()
        print("ok")
    """)


def test_recv_from_any_rank_names_the_sender(tmp_path):
    # recv(src=None) takes the first message from any rank and returns the sender's global rank;
    # in a subgroup, the group rank the backend reports becomes the sender's global rank.
    run_world_to_ok(tmp_path, 3, """
        dist.init_process_group("gloo")
        got = ts.zeros(2)
        if RANK == 0:
            senders = set()
            for _ in range(2):
                sender = dist.recv(got, tag=5)
                assert got.tolist() == [sender * 10.0, sender * 10.0 + 1], (sender, got.tolist())
                senders.add(sender)
            assert senders == {1, 2}, senders
            work = dist.irecv(got, tag=6)
            work.wait()
            assert work._source_rank() == 2 and got.tolist() == [6.0, 6.0]
        else:
            dist.send(ts.tensor([RANK * 10.0, RANK * 10.0 + 1]), dst=0, tag=5)
            if RANK == 2:
                dist.send(ts.full((2,), 6.0), dst=0, tag=6)
        sub = dist.new_group([2, 1])
        if RANK == 2:
            assert dist.recv(got, group=sub) == 1 and got.tolist() == [3.0, 3.0]
        elif RANK == 1:
            dist.send(ts.full((2,), 3.0), dst=2, group=sub)
        # Rank 0 hosts the store the subgroup meets through: it must not leave before ranks 1
        # and 2 have (a loaded machine once let it exit first, and they waited on the store).
        dist.barrier()
        dist.destroy_process_group()
        print("ok")
    """)


def test_collectives_are_operators_that_autograd_passes_and_export_refuses():
    import tessera as ts
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        # As torch (its c10d operators have no autograd kernel): the gradient flows past the
        # collective as if it had not run.
        x = ts.ones(3, requires_grad=True)
        y = x * 2
        dist.all_reduce(y)
        y.sum().backward()
        assert x.grad.tolist() == [2.0, 2.0, 2.0]
        # Called directly, with a handle no group has: a clear error naming the operator.
        with pytest.raises(ValueError, match="c10d::all_reduce_.*no process group has the handle 12345"):
            ts.ops.c10d.all_reduce_(ts.ones(2), 0, 12345)

        class Synced(ts.nn.Module):
            def forward(self, x):
                dist.all_reduce(x)
                return x + 1
        with pytest.raises(ts.export.ExportError, match="collective.*c10d::all_reduce_.*process group"):
            ts.export.export(Synced(), (ts.ones(2),))
    finally:
        dist.destroy_process_group()


def test_profiler_sees_collectives():
    import tessera as ts
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        t = ts.ones(16)
        with ts.profiler.profile() as prof:
            dist.all_reduce(t)
            dist.broadcast(t, src=0)
        names = {e.key for e in prof.key_averages()}
        assert "c10d::all_reduce" in names and "c10d::broadcast" in names, names
        assert "c10d::all_reduce (wait)" in names
        assert "c10d::all_reduce_" in names and "c10d::broadcast_" in names, names  # the operator events
    finally:
        dist.destroy_process_group()


def test_compiled_graphs_hold_the_collectives(tmp_path):
    # The synchronous tensor collectives are operators (c10d::all_reduce_, ...): ts.compile keeps
    # them in its graph, and every replay communicates again; async ones still break the graph.
    run_world_to_ok(tmp_path, 2, """
        dist.init_process_group("gloo")

        def step(x, w):
            y = x * 2
            dist.all_reduce(y)
            out = ts.empty(2 * y.numel())
            dist.all_gather_into_tensor(out, y)
            dist.broadcast(w, src=1)
            return (out + 1) * w.sum()

        report = ts.compiler.explain(step)(ts.ones(3), ts.ones(2))
        assert report.graph_break_count == 0, report
        ops = report.ops_per_graph[0]
        assert any("c10d.all_reduce_" in o for o in ops) and any("c10d.broadcast_" in o for o in ops), ops
        for fullgraph in (False, True):
            compiled = ts.compile(step, fullgraph=fullgraph)
            for call in range(3):  # capture, then replays of the compiled graph
                x = ts.full((3,), float(RANK + 1 + call))
                w = ts.full((2,), float(RANK + 1))
                got = compiled(x, w).tolist()
                total = 2.0 * (1 + call) + 2.0 * (2 + call)  # y summed over both ranks
                assert got == [(total + 1) * 4.0] * 6, (RANK, call, got)  # w broadcast from rank 1: [2, 2]
                assert w.tolist() == [2.0, 2.0]
            assert not compiled.graph_breaks, compiled.graph_breaks

        def async_step(x):
            dist.all_reduce(x, async_op=True).wait()
            return x + 1
        import pytest
        with pytest.raises(Exception, match="c10d::all_reduce"):
            ts.compile(async_step, fullgraph=True)(ts.ones(3))
        dist.destroy_process_group()
        print("ok")
    """)


def test_work_future_carries_the_tensors():
    import tessera as ts
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        t = ts.ones(3)
        fut = dist.all_reduce(t, async_op=True).get_future()
        assert fut.value()[0] is t
        assert fut.then(lambda f: f.value()[0].sum().item()).wait() == 3.0
    finally:
        dist.destroy_process_group()


def test_exit_with_a_collective_in_flight_and_no_destroy(tmp_path):
    # Regression: a Work dropped at exit while its collective still ran freed the tensors Gloo was
    # writing into (heap corruption, SIGABRT in about one run of three). Dropped works now park
    # their tensors until the collective ends.
    body = """
    dist.init_process_group("gloo")
    t = ts.ones(100000)
    for _ in range(3):
        dist.all_reduce(t)
    dropped = [dist.all_reduce(ts.ones(100000), async_op=True) for _ in range(3)]
    del dropped  # never waited on
    w = dist.all_reduce(t, async_op=True)  # still in flight at exit, and no destroy_process_group
    print("done", RANK, flush=True)
    """
    for attempt in range(6):
        run_world(tmp_path, 2, body, timeout=60)

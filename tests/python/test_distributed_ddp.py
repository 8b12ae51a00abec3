"""DistributedDataParallel with real processes (2 ranks on loopback, gloo): training equals one
process on the whole batch (the reference runs inside rank 0 from the same initial weights), with
plain, bucket-view, small-bucket and static-graph reducers; no_sync accumulation; unused parameters;
bucket order the same on every rank; buffers broadcast from rank 0; bad input. DistributedSampler
needs no processes. Torch is the oracle only where marked."""
import pytest

import tessera as ts
import tessera.distributed as dist
from tessera.nn.parallel import DistributedDataParallel
from tessera.nn.parallel._bucket_assignment import compute_bucket_assignment_by_size
from tessera.utils.data import DistributedSampler
from dist_harness import run_world

needs_gloo = pytest.mark.skipif(not dist.is_gloo_available(), reason="the gloo backend plugin is not built")


def run_ranks(tmp_path, body, world=2, timeout=120):
    """Runs `body` on `world` ranks; every rank must reach its last line (it prints "ok")."""
    results = run_world(tmp_path, world, COMMON + body, timeout=timeout)
    for rank, (_, out, err) in enumerate(results):
        assert out.strip().endswith("ok"), f"rank {rank} did not finish:\n{out}\n{err}"

# Shared by the bodies: a small CNN, a deterministic batch, and a check that every rank holds
# the same tensors (all_gather of the flattened values).
COMMON = """
from tessera.nn.parallel import DistributedDataParallel as DDP
import tessera.nn as nn

def cnn(seed):
    ts.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 8, 3),
                         nn.ReLU(), nn.Flatten(), nn.Linear(8 * 2 * 2, 10))

def batch(step, n=8):
    rng = np.random.default_rng(100 + step)
    x = ts.from_numpy(rng.standard_normal((n, 3, 8, 8)).astype("float32"))
    y = ts.from_numpy(rng.integers(0, 10, n).astype("int64"))
    return x, y

def half(t):
    n = t.shape[0] // WORLD
    return t[RANK * n:(RANK + 1) * n]

def same_on_every_rank(tensors, what):
    flat = ts.cat([t.detach().reshape(-1) for t in tensors])
    everyone = [ts.zeros_like(flat) for _ in range(WORLD)]
    dist.all_gather(everyone, flat)
    for r in range(WORLD):
        np.testing.assert_array_equal(everyone[r].numpy(), flat.numpy(), err_msg=f"{what}: rank {r} differs")

def close(a, b, what, tol=1e-5):
    for i, (p, q) in enumerate(zip(a, b)):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=tol, atol=tol, err_msg=f"{what} [{i}]")

dist.init_process_group("gloo")
"""


@needs_gloo
def test_ddp_training_equals_one_process_on_the_whole_batch(tmp_path):
    # each configuration: 5 SGD steps (momentum) of DDP on half the batch per rank against one
    # process on the whole batch; every rank ends with the same parameters
    run_ranks(tmp_path, """
configs = [dict(), dict(gradient_as_bucket_view=True), dict(bucket_cap_mb=0.001),
           dict(bucket_cap_mb=0.001, gradient_as_bucket_view=True), dict(static_graph=True),
           dict(find_unused_parameters=True)]
for config in configs:
    model = cnn(seed=RANK)             # different on each rank: DDP must broadcast rank 0's
    reference = cnn(seed=0)            # rank 0's initial weights
    ddp = DDP(model, **config)
    close(list(model.parameters()), list(reference.parameters()), f"{config}: broadcast at construction", 0)
    opt = ts.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    ref_opt = ts.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)
    for step in range(5):
        x, y = batch(step)
        opt.zero_grad()
        nn.functional.cross_entropy(ddp(half(x)), half(y)).backward()
        ref_opt.zero_grad()
        nn.functional.cross_entropy(reference(x), y).backward()
        close([p.grad for p in model.parameters()], [p.grad for p in reference.parameters()], f"{config} grad {step}")
        opt.step()
        ref_opt.step()
    close(list(model.parameters()), list(reference.parameters()), f"{config}: after 5 steps")
    same_on_every_rank(list(model.parameters()), str(config))
    if config.get("bucket_cap_mb"):
        assert len(ddp._get_bucket_indices()) > 1, ddp._get_bucket_indices()
    if config.get("gradient_as_bucket_view"):  # .grad lives in the bucket after a synced backward
        flat = {b.buffer.data_ptr() for b in ddp.reducer.buckets}
        views = [v.data_ptr() for b in ddp.reducer.buckets for v in b.views]
        assert all(p.grad.data_ptr() in views for p in model.parameters())
print("ok")
""", timeout=180)


@needs_gloo
def test_sampler_loader_and_ddp_equal_one_process_over_the_dataset(tmp_path):
    # each rank reads its DistributedSampler share; the union of the ranks' k-th batches is the
    # k-th chunk of the shuffled dataset, so 2 epochs equal one process reading those chunks
    run_ranks(tmp_path, """
from tessera.utils.data import DataLoader, DistributedSampler, TensorDataset
from tessera.utils.data.distributed import torch_randperm
rng = np.random.default_rng(0)
xs = ts.from_numpy(rng.standard_normal((24, 3, 8, 8)).astype("float32"))
ys = ts.from_numpy(rng.integers(0, 10, 24).astype("int64"))
data = TensorDataset(xs, ys)
sampler = DistributedSampler(data, seed=7)
loader = DataLoader(data, batch_size=4, sampler=sampler)
model, reference = cnn(RANK), cnn(0)
ddp = DDP(model)
opt = ts.optim.SGD(ddp.parameters(), lr=0.1)
ref_opt = ts.optim.SGD(reference.parameters(), lr=0.1)
for epoch in range(2):
    sampler.set_epoch(epoch)
    steps = 0
    for x, y in loader:
        opt.zero_grad()
        nn.functional.cross_entropy(ddp(x), y).backward()
        opt.step()
        steps += 1
    assert steps == 3
    order = torch_randperm(24, 7 + epoch)
    for k in range(3):
        chunk = ts.tensor(order[8 * k:8 * k + 8])
        ref_opt.zero_grad()
        nn.functional.cross_entropy(reference(xs[chunk]), ys[chunk]).backward()
        ref_opt.step()
close(list(model.parameters()), list(reference.parameters()), "sampler + loader + DDP")
print("ok")
""")


@needs_gloo
def test_no_sync_accumulates_then_averages_the_sum(tmp_path):
    run_ranks(tmp_path, """
for as_view in (False, True):
    model, reference = cnn(seed=RANK + 7), cnn(seed=7)
    ddp = DDP(model, gradient_as_bucket_view=as_view, bucket_cap_mb=0.002)
    opt = ts.optim.SGD(ddp.parameters(), lr=0.05)
    ref_opt = ts.optim.SGD(reference.parameters(), lr=0.05)
    for step in range(3):
        opt.zero_grad()
        ref_opt.zero_grad()
        micro = [batch(10 * step + k) for k in range(3)]
        with ddp.no_sync():
            for k in range(2):
                nn.functional.cross_entropy(ddp(half(micro[k][0])), half(micro[k][1])).backward()
                local = ts.cat([p.grad.reshape(-1) for p in model.parameters()])
                others = [ts.zeros_like(local) for _ in range(WORLD)]
                dist.all_gather(others, local)
                assert not np.allclose(others[0].numpy(), others[1].numpy()), "no_sync must not average"
        nn.functional.cross_entropy(ddp(half(micro[2][0])), half(micro[2][1])).backward()
        for x, y in micro:
            nn.functional.cross_entropy(reference(x), y).backward()
        close([p.grad for p in model.parameters()], [p.grad for p in reference.parameters()], f"no_sync grad {step}")
        opt.step()
        ref_opt.step()
    close(list(model.parameters()), list(reference.parameters()), "no_sync: after 3 steps")
    same_on_every_rank(list(model.parameters()), "no_sync")
print("ok")
""", timeout=120)


@needs_gloo
def test_unused_parameters(tmp_path):
    run_ranks(tmp_path, """
class Branchy(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Linear(4, 4)
        self.branch = nn.Linear(4, 4)
        self.head = nn.Linear(4, 2)
    def forward(self, x, use_branch):
        h = self.trunk(x).relu()
        if use_branch:
            h = self.branch(h)
        return self.head(h)

def grads(m):
    return [None if p.grad is None else p.grad.clone() for p in m.parameters()]

x = ts.from_numpy(np.random.default_rng(RANK).standard_normal((3, 4)).astype("float32"))
for kwargs in (dict(find_unused_parameters=True), dict(static_graph=True)):
    # the branch taken by no rank: its gradients stay None, the rest are averaged
    model = Branchy()
    ddp = DDP(model, **kwargs)
    local = Branchy()
    local.load_state_dict(model.state_dict())
    for it in range(3):
        model.zero_grad(); local.zero_grad()
        ddp(x, False).sum().backward()
        local(x, False).sum().backward()
        assert model.branch.weight.grad is None and model.branch.bias.grad is None, kwargs
        mine = ts.cat([model.trunk.weight.grad.reshape(-1), model.head.weight.grad.reshape(-1)])
        alone = ts.cat([local.trunk.weight.grad.reshape(-1), local.head.weight.grad.reshape(-1)])
        total = alone.clone()
        dist.all_reduce(total)
        np.testing.assert_allclose(mine.numpy(), total.numpy() / WORLD, rtol=1e-6, atol=1e-7)

# find_unused_parameters: the branch taken on rank 0 only: both ranks get rank 0's gradient / 2
model = Branchy()
ddp = DDP(model, find_unused_parameters=True)
local = Branchy()
local.load_state_dict(model.state_dict())
for it in range(2):
    model.zero_grad(); local.zero_grad()
    ddp(x, RANK == 0).sum().backward()
    local(x, True).sum().backward()
    contribution = local.branch.weight.grad if RANK == 0 else ts.zeros_like(local.branch.weight.grad)
    dist.all_reduce(contribution)
    np.testing.assert_allclose(model.branch.weight.grad.numpy(), contribution.numpy() / WORLD, rtol=1e-6)
    same_on_every_rank([p.grad for p in model.parameters()], "branch on rank 0 only")

# without find_unused_parameters, an unused parameter is reported at the next forward (torch's error)
model = Branchy()
ddp = DDP(model)
ddp(x, False).sum().backward()
try:
    ddp(x, False)
    raise AssertionError("expected the unfinished reduction to be reported")
except RuntimeError as e:
    assert "Expected to have finished reduction in the prior iteration" in str(e), e
    assert "2 3" in str(e), e   # branch.weight and branch.bias are parameters 2 and 3
print("ok")
""", timeout=120)


@needs_gloo
def test_buckets_are_reduced_in_the_same_order_on_every_rank(tmp_path):
    run_ranks(tmp_path, """
import tessera.distributed as d
launched = []
real_all_reduce = d.all_reduce
def logging_all_reduce(tensor, *args, **kwargs):
    launched.append(tensor.numel())
    return real_all_reduce(tensor, *args, **kwargs)

model = cnn(seed=3)
ddp = DDP(model, bucket_cap_mb=0.002)   # ~2 KB buckets: several for this model
# before the first iteration: one bucket; after it, buckets in the order gradients became ready
assert ddp._get_bucket_indices() == [list(range(6))], ddp._get_bucket_indices()
x, y = batch(0)
for step in range(3):
    d.all_reduce = logging_all_reduce
    launched.clear()
    nn.functional.cross_entropy(ddp(half(x)), half(y)).backward()
    d.all_reduce = real_all_reduce
    buckets = ddp._get_bucket_indices()
    sizes = [sum(list(model.parameters())[i].numel() for i in b) for b in buckets]
    assert launched == sizes, (launched, sizes)
    everyone = [None] * WORLD
    dist.all_gather_object(everyone, (buckets, launched))
    assert all(e == everyone[0] for e in everyone), everyone
    if step > 0:
        assert len(buckets) > 1, buckets
        assert sorted(i for b in buckets for i in b) == list(range(6))
        assert buckets[0][0] == 5, buckets   # the last layer's bias: its gradient comes first
print("ok")
""", timeout=120)


@needs_gloo
def test_buffers_are_broadcast_from_rank_0_at_each_forward(tmp_path):
    run_ranks(tmp_path, """
def bn_model(seed):
    ts.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 2))

for broadcast in (True, False):
    model = bn_model(RANK)
    if RANK == 1:
        model[1].running_mean.fill_(5.0)   # a buffer only rank 1 has
    ddp = DDP(model, broadcast_buffers=broadcast)
    bn = model[1]
    if broadcast:
        same_on_every_rank([bn.running_mean, bn.running_var], "buffers at construction")
    for step in range(3):
        x = ts.from_numpy(np.random.default_rng(10 * step + RANK).standard_normal((4, 3, 8, 8)).astype("float32"))
        before = bn.running_mean.clone()
        zero = [ts.zeros_like(before) for _ in range(WORLD)]
        dist.all_gather(zero, before)
        ddp(x).sum().backward()
        # what BatchNorm adds from this rank's own batch: the module alone, from rank 0's buffers
        probe = bn_model(0)
        probe.load_state_dict(model.state_dict())
        start = zero[0] if broadcast else before
        probe[1].running_mean.copy_(start)
        probe(x)
        np.testing.assert_allclose(bn.running_mean.numpy(), probe[1].running_mean.numpy(), rtol=1e-5, atol=1e-6)
    if not broadcast and RANK == 1:
        assert bn.running_mean.numpy().mean() > 1.0   # rank 1 kept its own buffer
# the state_dict carries torch's "module." prefix and loads back
sd = ddp.state_dict()
assert all(k.startswith("module.") for k in sd), list(sd)
assert "module.1.running_mean" in sd and "module.0.weight" in sd
fresh = DDP(bn_model(9))
fresh.load_state_dict(sd)
close([fresh.module[0].weight], [model[0].weight], "load_state_dict", 0)
print("ok")
""", timeout=120)


@needs_gloo
def test_comm_hooks(tmp_path):
    run_ranks(tmp_path, """
import pytest
from tessera.distributed.algorithms.ddp_comm_hooks import default_hooks

def train(ddp, model, reference, steps=3, tol=1e-5, factor=1.0):
    opt = ts.optim.SGD(ddp.parameters(), lr=0.1)
    ref_opt = ts.optim.SGD(reference.parameters(), lr=0.1)
    for step in range(steps):
        x, y = batch(step)
        opt.zero_grad(); ref_opt.zero_grad()
        nn.functional.cross_entropy(ddp(half(x)), half(y)).backward()
        nn.functional.cross_entropy(reference(x), y).backward()
        for p, q in zip(model.parameters(), reference.parameters()):
            scale = float(q.grad.abs().max()) * factor
            np.testing.assert_allclose(p.grad.numpy(), factor * q.grad.numpy(), rtol=0, atol=tol * scale + 1e-7)
        with ts.no_grad():   # the same step on both sides, so only this step's compression error shows
            opt.step()
            for p, q in zip(model.parameters(), reference.parameters()):
                q.copy_(p)
        same_on_every_rank(list(model.parameters()), "hooked")

# torch's default hooks: plain all-reduce (exact), and float16 / bfloat16 on the wire (rounded)
for hook, tol in ((default_hooks.allreduce_hook, 1e-6), (default_hooks.fp16_compress_hook, 5e-3),
                  (default_hooks.bf16_compress_hook, 4e-2)):
    model, reference = cnn(RANK), cnn(0)
    ddp = DDP(model, bucket_cap_mb=0.002)
    ddp.register_comm_hook(None, hook)
    train(ddp, model, reference, tol=tol)

# a hook of one's own: every bucket once per iteration, in order, the last one flagged; it sums
model, reference = cnn(RANK), cnn(0)
ddp = DDP(model, bucket_cap_mb=0.002, gradient_as_bucket_view=True)
seen = []
def summing_hook(state, bucket):
    assert state == "my state"
    ids = [id(p) for p in bucket.parameters()]
    seen.append((bucket.index(), bucket.is_last(), ids))
    assert [tuple(g.shape) for g in bucket.gradients()] == [tuple(p.shape) for p in bucket.parameters()]
    return dist.all_reduce(bucket.buffer(), async_op=True).get_future().then(lambda fut: bucket.buffer())
ddp.register_comm_hook("my state", summing_hook)
with pytest.raises(RuntimeError, match="can only be called once"):
    ddp.register_comm_hook(None, default_hooks.allreduce_hook)
train(ddp, model, reference, factor=WORLD)   # summed, not averaged: WORLD times the mean gradient
buckets = ddp._get_bucket_indices()
last = seen[-len(buckets):]
assert [i for i, _, _ in last] == list(range(len(buckets)))
assert [flag for _, flag, _ in last] == [False] * (len(buckets) - 1) + [True]
ids = [id(p) for p in model.parameters()]
assert [[ids.index(i) for i in bucket_ids] for _, _, bucket_ids in last] == buckets
with pytest.raises(TypeError, match="must be callable"):
    DDP(cnn(0)).register_comm_hook(None, 3)
print("ok")
""")


@pytest.mark.torch
@needs_gloo
def test_unused_parameter_semantics_match_torch(tmp_path):
    # torch's DDP and tessera's side by side in the same 2 ranks (torch on a port of its own): the
    # same model and data; .grad None or averaged exactly where torch's is
    from dist_harness import free_port
    results = run_world(tmp_path, 2, COMMON + """
import torch
import torch.distributed as tdist
tdist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{os.environ['TORCH_PORT']}", rank=RANK, world_size=WORLD)

def build(lib):
    class Branchy(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.trunk, self.branch, self.head = lib.nn.Linear(4, 4), lib.nn.Linear(4, 4), lib.nn.Linear(4, 2)
        def forward(self, x, use_branch):
            h = self.trunk(x).relu()
            return self.head(self.branch(h) if use_branch else h)
    return Branchy()

rng = np.random.default_rng(RANK)
for case in ("nobody", "rank0", "everyone"):
    for options in (dict(find_unused_parameters=True), dict(static_graph=True), dict(find_unused_parameters=True, gradient_as_bucket_view=True)):
        if case == "rank0" and options.get("static_graph"):
            continue   # a static graph must be the same each iteration, not across ranks' choices
        ours, theirs = build(ts), build(torch)
        with torch.no_grad():
            for p, q in zip(ours.parameters(), theirs.parameters()):
                q.copy_(torch.from_numpy(p.detach().numpy().copy()))
        ddp_ours = DDP(ours, **options)
        ddp_theirs = torch.nn.parallel.DistributedDataParallel(theirs, **options)
        for it in range(3):
            x = rng.standard_normal((3, 4)).astype("float32")
            use = {"nobody": False, "rank0": RANK == 0, "everyone": True}[case]
            ddp_ours(ts.from_numpy(x), use).sum().backward()
            ddp_theirs(torch.from_numpy(x), use).sum().backward()
            for (name, p), q in zip(ours.named_parameters(), theirs.parameters()):
                what = f"{case} {options} iteration {it} {name}"
                assert (p.grad is None) == (q.grad is None), what
                if p.grad is not None:
                    np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-6, err_msg=what)
tdist.destroy_process_group()
print("ok")
""", timeout=120, extra_env={"TORCH_PORT": str(free_port())})
    for rank, (_, out, err) in enumerate(results):
        assert out.strip().endswith("ok"), f"rank {rank} did not finish:\n{out}\n{err}"


@needs_gloo
def test_join_trains_on_uneven_inputs(tmp_path):
    run_ranks(tmp_path, """
import pytest
steps_of = {0: 3, 1: 5}   # rank 0 runs out of data first
for divide_by_initial in (True, False):
    for options in (dict(), dict(bucket_cap_mb=0.002), dict(find_unused_parameters=True)):
        model, reference = cnn(RANK), cnn(0)
        ddp = DDP(model, **options)
        opt = ts.optim.SGD(ddp.parameters(), lr=0.1)
        ref_opt = ts.optim.SGD(reference.parameters(), lr=0.1)
        with ddp.join(divide_by_initial_world_size=divide_by_initial):
            for step in range(steps_of[RANK]):
                x, y = batch(step)
                opt.zero_grad()
                nn.functional.cross_entropy(ddp(half(x)), half(y)).backward()
                opt.step()
        # the reference: both halves while both ranks train; then rank 1's half alone, its gradient
        # divided by the initial world size (or by the one rank left)
        for step in range(max(steps_of.values())):
            x, y = batch(step)
            ref_opt.zero_grad()
            if step < steps_of[0]:
                nn.functional.cross_entropy(reference(x), y).backward()
            else:
                loss = nn.functional.cross_entropy(reference(x[4:]), y[4:])
                (loss / WORLD if divide_by_initial else loss).backward()
            ref_opt.step()
        close(list(model.parameters()), list(reference.parameters()), f"join {divide_by_initial} {options}")
        same_on_every_rank(list(model.parameters()), "after join")   # the last joiner's copy everywhere

# buffers: broadcast from the highest rank still training; every rank ends with the last joiner's
ts.manual_seed(0)
model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.Flatten(), nn.Linear(4 * 6 * 6, 10))
ddp = DDP(model)
with ddp.join():
    for step in range(steps_of[RANK]):
        x, y = batch(step)
        nn.functional.cross_entropy(ddp(half(x)), half(y)).backward()
same_on_every_rank([model[1].running_mean, model[1].running_var], "buffers after join")

# throw_on_early_termination: every rank raises when the first one runs out
ddp = DDP(cnn(0))
with pytest.raises(RuntimeError, match="exhausted" ):
    with ddp.join(throw_on_early_termination=True):
        for step in range(steps_of[RANK]):
            x, y = batch(step)
            nn.functional.cross_entropy(ddp(half(x)), half(y)).backward()
print("ok")
""", timeout=180)


@needs_gloo
def test_bad_input_in_a_world(tmp_path):
    run_ranks(tmp_path, """
import pytest
from tessera.utils.data import DistributedSampler
frozen = nn.Linear(2, 2)
frozen.requires_grad_(False)
with pytest.raises(RuntimeError, match="doesn't have any parameter that requires a gradient"):
    DDP(frozen)
with pytest.raises(ValueError, match="device_ids"):
    DDP(nn.Linear(2, 2), device_ids=[0])
with pytest.raises(ValueError, match="bucket_cap_mb"):
    DDP(nn.Linear(2, 2), bucket_cap_mb=-1)
# the sampler takes its rank and replica count from the default group
sampler = DistributedSampler(range(10))
assert (sampler.num_replicas, sampler.rank) == (WORLD, RANK)
assert list(sampler) == list(DistributedSampler(range(10), WORLD, RANK))
# a DDP that is gone takes its hooks off the parameters: a second one on the same module works alone
import gc
shared = nn.Linear(3, 2)
first = DDP(shared)
handles = first.reducer._hook_handles
assert len(handles) == 2
del first
gc.collect()
assert handles == []   # removed from the parameters
second = DDP(shared)
shared(ts.ones(1, 3)).sum().backward()   # outside DDP's forward: no hook of either may act
second(ts.ones(1, 3)).sum().backward()
np.testing.assert_allclose(shared.weight.grad.numpy(), np.ones((2, 3)) * 2, rtol=1e-6)
# a rank with a different model: every rank reports it
with pytest.raises(RuntimeError, match="DDP expects same model across all ranks"):
    DDP(nn.Linear(2, 3 if RANK == 0 else 4))
print("ok")
""", timeout=60)


def test_ddp_before_init_process_group_raises():
    assert not dist.is_initialized()
    with pytest.raises(ValueError, match="Default process group has not been initialized"):
        DistributedDataParallel(ts.nn.Linear(2, 2))
    with pytest.raises(TypeError, match="nn.Module"):
        DistributedDataParallel(ts.ones(2))


def test_bucket_assignment_closes_buckets_at_each_limit():
    params = [ts.zeros(256), ts.zeros(10), ts.zeros(300), ts.zeros(5, dtype=ts.float64), ts.zeros(100)]
    # 1 KiB then 2 KiB: [0] closes at 1024 bytes, then [1, 2] at 1240 < 2048 stays open, float64 apart
    assert compute_bucket_assignment_by_size(params, [1024, 2048]) == [
        ([0], 1024), ([1, 2, 4], 2048), ([3], 1024)]
    assert compute_bucket_assignment_by_size(params, [1], [4, 3, 2, 1, 0]) == [
        ([4], 1), ([3], 1), ([2], 1), ([1], 1), ([0], 1)]
    with pytest.raises(ValueError, match="bucket size limit"):
        compute_bucket_assignment_by_size(params, [])


@pytest.mark.torch
def test_bucket_assignment_matches_torch():
    import numpy as np
    import torch
    import torch.distributed as tdist
    rng = np.random.default_rng(0)
    for trial in range(20):
        sizes = rng.integers(1, 400, rng.integers(1, 12)).tolist()
        doubles = rng.random(len(sizes)) < 0.3
        ours = [ts.zeros(n, dtype=ts.float64 if d else ts.float32) for n, d in zip(sizes, doubles)]
        theirs = [torch.zeros(n, dtype=torch.float64 if d else torch.float32) for n, d in zip(sizes, doubles)]
        limits = [int(x) for x in rng.integers(8, 3000, rng.integers(1, 3))]
        expected, expected_limits = tdist._compute_bucket_assignment_by_size(theirs, limits, [False] * len(sizes))
        got = compute_bucket_assignment_by_size(ours, limits)
        assert sorted(map(sorted, [g for g, _ in got])) == sorted(map(sorted, expected)), (sizes, limits)
        if not doubles.any():  # one dtype: the order is defined too
            assert [g for g, _ in got] == [list(e) for e in expected]
            assert [lim for _, lim in got] == list(expected_limits)


# ---------------------------------------------------------------- DistributedSampler (no processes)
def _all_ranks(n, world, **kwargs):
    return [list(DistributedSampler(range(n), num_replicas=world, rank=r, **kwargs)) for r in range(world)]


@pytest.mark.parametrize("n,world", [(10, 2), (10, 3), (7, 4), (3, 5), (1, 2), (12, 4)])
@pytest.mark.parametrize("shuffle", [False, True])
def test_sampler_partitions_every_index(n, world, shuffle):
    ranks = _all_ranks(n, world, shuffle=shuffle, seed=3)
    per_rank = -(-n // world)
    assert all(len(r) == per_rank for r in ranks)
    assert [len(DistributedSampler(range(n), num_replicas=world, rank=r)) for r in range(world)] == [per_rank] * world
    flat = [i for r in ranks for i in r]
    assert set(flat) == set(range(n))                     # every index, at least once
    assert len(flat) - n == per_rank * world - n          # padding: just enough to even out
    if not shuffle:  # rank r takes r, r + world, ...; the padding repeats the head
        order = (list(range(n)) * (per_rank * world // n + 1))[:per_rank * world]
        assert ranks == [order[r::world] for r in range(world)]


@pytest.mark.parametrize("n,world", [(10, 3), (7, 4), (12, 4), (3, 5)])
def test_sampler_drop_last_drops_the_tail(n, world):
    ranks = _all_ranks(n, world, shuffle=True, seed=1, drop_last=True)
    per_rank = n // world if n % world else n // world
    assert all(len(r) == per_rank for r in ranks)
    flat = [i for r in ranks for i in r]
    assert len(flat) == len(set(flat)) == per_rank * world  # each index at most once


def test_sampler_epochs_and_seeds():
    s = DistributedSampler(range(50), num_replicas=2, rank=0, seed=0)
    first = list(s)
    assert list(s) == first                    # same epoch: same order
    s.set_epoch(1)
    assert list(s) != first and sorted(list(s) + list(DistributedSampler(range(50), 2, 1, seed=0))) != []
    other = DistributedSampler(range(50), num_replicas=2, rank=1, seed=0)
    other.set_epoch(1)
    assert sorted(list(s) + list(other)) == list(range(50))
    assert list(DistributedSampler(range(50), 2, 0, seed=1)) != first


def test_sampler_bad_input():
    with pytest.raises(ValueError, match=r"Invalid rank 2, rank should be in the interval \[0, 1\]"):
        DistributedSampler(range(4), num_replicas=2, rank=2)
    with pytest.raises(ValueError, match="Invalid rank -1"):
        DistributedSampler(range(4), num_replicas=2, rank=-1)
    with pytest.raises(ValueError, match="num_replicas should be a positive integer"):
        DistributedSampler(range(4), num_replicas=0, rank=0)
    with pytest.raises(ValueError, match="default process group has not been initialized"):
        DistributedSampler(range(4))


def test_sampler_feeds_a_dataloader():
    data = ts.utils.data.TensorDataset(ts.arange(10))
    loader = ts.utils.data.DataLoader(data, batch_size=2, sampler=DistributedSampler(data, 2, 1, shuffle=False))
    assert [b[0].tolist() for b in loader] == [[1, 3], [5, 7], [9]]


@pytest.mark.torch
@pytest.mark.parametrize("n,world,drop_last", [(10, 3, False), (10, 3, True), (1000, 4, False), (37, 5, True)])
def test_sampler_order_matches_torch(n, world, drop_last):
    import torch.utils.data as tdata
    for seed in (0, 5, 2 ** 33 + 1):
        for epoch in (0, 3):
            for rank in range(world):
                ours = DistributedSampler(range(n), world, rank, shuffle=True, seed=seed, drop_last=drop_last)
                theirs = tdata.DistributedSampler(range(n), world, rank, shuffle=True, seed=seed, drop_last=drop_last)
                ours.set_epoch(epoch)
                theirs.set_epoch(epoch)
                assert list(ours) == list(theirs), (seed, epoch, rank)
                assert len(ours) == len(theirs)

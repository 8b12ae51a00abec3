"""ZeroRedundancyOptimizer with real processes (2 ranks, gloo): each rank owns a shard of the
parameters and of Adam's state, and training equals plain Adam (the same averaged gradients given to
a plain Adam on every rank, and one process on the whole batch); consolidate_state_dict /
state_dict / load_state_dict round-trip in torch's format; bad input."""
import pytest

import tessera as ts
import tessera.distributed as dist
from tessera.distributed.optim import ZeroRedundancyOptimizer
from dist_harness import run_world

needs_gloo = pytest.mark.skipif(not dist.is_gloo_available(), reason="the gloo backend plugin is not built")

COMMON = """
import tessera.nn as nn
from tessera.nn.parallel import DistributedDataParallel as DDP
from tessera.distributed.optim import ZeroRedundancyOptimizer

def mlp(seed):
    ts.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 32), nn.Tanh(), nn.Linear(32, 16), nn.Tanh(), nn.Linear(16, 3))

def batch(step, n=8):
    rng = np.random.default_rng(step)
    return (ts.from_numpy(rng.standard_normal((n, 6)).astype("float32")),
            ts.from_numpy(rng.standard_normal((n, 3)).astype("float32")))

def half(t):
    n = t.shape[0] // WORLD
    return t[RANK * n:(RANK + 1) * n]

def close(a, b, what, tol):
    for i, (p, q) in enumerate(zip(a, b)):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=tol, atol=tol, err_msg=f"{what} [{i}]")

dist.init_process_group("gloo")
"""


def run_ranks(tmp_path, body, timeout=120):
    results = run_world(tmp_path, 2, COMMON + body, timeout=timeout)
    for rank, (_, out, err) in enumerate(results):
        assert out.strip().endswith("ok"), f"rank {rank} did not finish:\n{out}\n{err}"


@needs_gloo
def test_zero_equals_plain_adam(tmp_path):
    run_ranks(tmp_path, """
for bucket_view in (False, True):
    model = mlp(RANK)
    ddp = DDP(model)
    zero = ZeroRedundancyOptimizer(ddp.parameters(), ts.optim.Adam, lr=0.01, betas=(0.8, 0.99),
                                   parameters_as_bucket_view=bucket_view)
    twin = mlp(0)                      # plain Adam on the same averaged gradients, on every rank
    twin_opt = ts.optim.Adam(twin.parameters(), lr=0.01, betas=(0.8, 0.99))
    reference = mlp(0)                 # one process on the whole batch
    ref_opt = ts.optim.Adam(reference.parameters(), lr=0.01, betas=(0.8, 0.99))
    params = list(model.parameters())
    owner = zero._param_to_rank
    mine = [p for p in params if owner[p] == RANK]
    assert 0 < len(mine) < len(params)
    everyone = [None] * WORLD
    dist.all_gather_object(everyone, sorted(i for i, p in enumerate(params) if owner[p] == RANK))
    assert sorted(everyone[0] + everyone[1]) == list(range(len(params)))   # every parameter, one owner
    for step in range(5):
        x, y = batch(step)
        zero.zero_grad()
        nn.functional.mse_loss(ddp(half(x)), half(y)).backward()
        for p, q in zip(params, twin.parameters()):
            q.grad = p.grad.clone()
        zero.step()
        twin_opt.step()
        ref_opt.zero_grad()
        nn.functional.mse_loss(reference(x), y).backward()
        ref_opt.step()
        # only this rank's shard has optimizer state
        assert len(zero.optim.state) == len(mine) and all(owner[p] == RANK for p in zero.optim.state)
        close(params, list(twin.parameters()), f"zero vs adam step {step}", 1e-6)
        close(params, list(reference.parameters()), f"zero vs one process step {step}", 1e-5)
    flat = ts.cat([p.detach().reshape(-1) for p in params])
    both = [ts.zeros_like(flat) for _ in range(WORLD)]
    dist.all_gather(both, flat)
    np.testing.assert_array_equal(both[0].numpy(), both[1].numpy())

    # state_dict: only after consolidate_state_dict, only on the rank it went to; torch's format
    import pytest
    with pytest.raises(RuntimeError, match="has not been consolidated"):
        zero.state_dict()
    zero.consolidate_state_dict(to=0)
    if RANK == 0:
        sd = zero.state_dict()
        expected = twin_opt.state_dict()
        assert sorted(sd["state"]) == sorted(expected["state"]) == list(range(len(params)))
        assert [g["params"] for g in sd["param_groups"]] == [g["params"] for g in expected["param_groups"]]
        assert sd["param_groups"][0]["lr"] == 0.01 and sd["param_groups"][0]["betas"] == (0.8, 0.99)
        for i in sd["state"]:
            for key in ("exp_avg", "exp_avg_sq"):
                np.testing.assert_allclose(sd["state"][i][key].numpy(), expected["state"][i][key].numpy(), rtol=1e-6,
                                           atol=1e-9)
            assert float(sd["state"][i]["step"]) == 5
    else:
        with pytest.raises(RuntimeError, match="consolidate_state_dict"):
            zero.state_dict()
        sd = None
    # load it into a fresh optimizer on every rank (sent from rank 0) and keep training: still plain Adam
    box = [sd]
    dist.broadcast_object_list(box, src=0)
    resumed = ZeroRedundancyOptimizer(ddp.parameters(), ts.optim.Adam, lr=0.5)
    resumed.load_state_dict(box[0])
    assert resumed.param_groups[0]["lr"] == 0.01 and resumed.optim.param_groups[0]["lr"] == 0.01
    assert len(resumed.optim.state) == len(mine)
    for step in range(5, 8):
        x, y = batch(step)
        resumed.zero_grad()
        nn.functional.mse_loss(ddp(half(x)), half(y)).backward()
        for p, q in zip(params, twin.parameters()):
            q.grad = p.grad.clone()
        resumed.step()
        twin_opt.step()
        close(params, list(twin.parameters()), f"resumed step {step}", 1e-6)
print("ok")
""")


@needs_gloo
def test_zero_param_groups_closure_and_lr_changes(tmp_path):
    run_ranks(tmp_path, """
model = mlp(0)
params = list(model.parameters())
groups = [{"params": params[:2], "lr": 0.1}, {"params": params[2:4]}]
zero = ZeroRedundancyOptimizer(groups, ts.optim.SGD, lr=0.01, momentum=0.5)
twin = mlp(0)
tp = list(twin.parameters())
twin_opt = ts.optim.SGD([{"params": tp[:2], "lr": 0.1}, {"params": tp[2:4]}], lr=0.01, momentum=0.5)
zero.add_param_group({"params": params[4:], "lr": 0.05})
twin_opt.add_param_group({"params": tp[4:], "lr": 0.05})
assert sorted(len(g["params"]) for g in zero.param_groups) == [2, 2, 2]
for step in range(3):
    if step == 2:   # an LR change on the wrapper reaches the local optimizer
        zero.param_groups[1]["lr"] = 0.2
        twin_opt.param_groups[1]["lr"] = 0.2
    x, y = batch(step)
    def closure():
        zero.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        return loss
    loss = zero.step(closure)
    assert abs(float(loss) - float(nn.functional.mse_loss(twin(x), y))) < 1e-6
    twin_opt.zero_grad()
    nn.functional.mse_loss(twin(x), y).backward()
    twin_opt.step()
    close(params, tp, f"groups step {step}", 1e-6)
print("ok")
""")


def test_zero_bad_input():
    p = ts.nn.Parameter(ts.ones(2))
    with pytest.raises(TypeError, match="iterable of Tensors"):
        ZeroRedundancyOptimizer(p, ts.optim.SGD, lr=0.1)
    with pytest.raises(ValueError, match="did not receive any parameters"):
        ZeroRedundancyOptimizer([], ts.optim.SGD, lr=0.1)
    with pytest.raises(TypeError, match="optimizer_class must be an Optimizer subclass"):
        ZeroRedundancyOptimizer([p], "SGD", lr=0.1)
    with pytest.raises(NotImplementedError, match="overlap_with_ddp"):
        ZeroRedundancyOptimizer([p], ts.optim.SGD, overlap_with_ddp=True, lr=0.1)
    with pytest.raises(ValueError, match="Default process group has not been initialized"):
        ZeroRedundancyOptimizer([p], ts.optim.SGD, lr=0.1)


@pytest.mark.torch
@needs_gloo
def test_partition_and_state_dict_match_torch(tmp_path):
    # torch's ZeroRedundancyOptimizer beside ours in the same 2 ranks (torch on a port of its own):
    # the same owner for each parameter, and the same consolidated state_dict
    from dist_harness import free_port
    results = run_world(tmp_path, 2, COMMON + """
import torch
import torch.distributed as tdist
from torch.distributed.optim import ZeroRedundancyOptimizer as TorchZero
tdist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{os.environ['TORCH_PORT']}", rank=RANK, world_size=WORLD)
shapes = [(7, 3), (5,), (12, 2), (3, 3), (1,), (40,), (6, 6)]
ours = [nn.Parameter(ts.from_numpy(np.random.default_rng(i).standard_normal(s).astype("float32"))) for i, s in enumerate(shapes)]
theirs = [torch.nn.Parameter(torch.from_numpy(p.detach().numpy().copy())) for p in ours]
groups = lambda ps: [{"params": ps[:4]}, {"params": ps[4:], "lr": 0.05}]
zero = ZeroRedundancyOptimizer(groups(ours), ts.optim.Adam, lr=0.01)
torch_zero = TorchZero(groups(theirs), torch.optim.Adam, lr=0.01)
assert [zero._param_to_rank[p] for p in ours] == [torch_zero._param_to_rank[p] for p in theirs]
for step in range(3):
    for i, (p, q) in enumerate(zip(ours, theirs)):
        g = np.random.default_rng(100 * step + i).standard_normal(p.shape).astype("float32")
        p.grad = ts.from_numpy(g)
        q.grad = torch.from_numpy(g.copy())
    zero.step()
    torch_zero.step()
    for p, q in zip(ours, theirs):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6)
zero.consolidate_state_dict(to=1)
torch_zero.consolidate_state_dict(to=1)
if RANK == 1:
    sd, tsd = zero.state_dict(), torch_zero.state_dict()
    assert list(sd["state"]) == list(tsd["state"])
    assert [g["params"] for g in sd["param_groups"]] == [g["params"] for g in tsd["param_groups"]]
    assert [g["lr"] for g in sd["param_groups"]] == [g["lr"] for g in tsd["param_groups"]]
    for i in sd["state"]:
        assert sorted(sd["state"][i]) == sorted(tsd["state"][i])
        np.testing.assert_allclose(sd["state"][i]["exp_avg_sq"].numpy(), tsd["state"][i]["exp_avg_sq"].numpy(), rtol=1e-5)
        assert float(sd["state"][i]["step"]) == float(tsd["state"][i]["step"]) == 3
tdist.destroy_process_group()
print("ok")
""", timeout=120, extra_env={"TORCH_PORT": str(free_port())})
    for rank, (_, out, err) in enumerate(results):
        assert out.strip().endswith("ok"), f"rank {rank} did not finish:\n{out}\n{err}"

"""fully_shard (FSDP2's API) with real processes (2 ranks, gloo): parameters are row shards of the
full ones; training with nested fully_shard equals DDP and one process on the whole batch (SGD and
Adam); gradient accumulation with set_requires_gradient_sync(False); full_state_dict; bad input."""
import pytest

import tessera as ts
import tessera.distributed as dist
from tessera.distributed.fsdp import FSDPModule, fully_shard
from dist_harness import run_world_to_ok

needs_gloo = pytest.mark.skipif(not dist.is_gloo_available(), reason="the gloo backend plugin is not built")

COMMON = """
import tessera.nn as nn
from tessera.nn.parallel import DistributedDataParallel as DDP
from tessera.distributed.fsdp import FSDPModule, fully_shard, full_state_dict, load_full_state_dict

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 5, 3)              # 5 output channels: rank 1 holds 2 rows, rank 0 holds 3
        self.layers = nn.ModuleList([nn.Linear(5 * 6 * 6, 7), nn.Linear(7, 7)])
        self.head = nn.Linear(7, 3)
        self.scale = nn.Parameter(ts.tensor(1.5))   # 0-d: one row, on rank 0
    def forward(self, x):
        h = self.conv(x).relu().flatten(1)
        for layer in self.layers:
            h = layer(h).tanh()
        return self.head(h) * self.scale

def net(seed=0):
    ts.manual_seed(seed)
    return Net()

def batch(step, n=8):
    rng = np.random.default_rng(step)
    return (ts.from_numpy(rng.standard_normal((n, 3, 8, 8)).astype("float32")),
            ts.from_numpy(rng.standard_normal((n, 3)).astype("float32")))

def half(t):
    n = t.shape[0] // WORLD
    return t[RANK * n:(RANK + 1) * n]

def shard_everything(model):
    for layer in model.layers:
        fully_shard(layer)
    return fully_shard(model)

def close(a, b, what, tol=1e-5):
    assert len(a) == len(b), (what, len(a), len(b))
    for i, (p, q) in enumerate(zip(a, b)):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=tol, atol=tol, err_msg=f"{what} [{i}]")

def full_params(model):
    sd = full_state_dict(model)
    return [sd[name] for name, _ in net().named_parameters()]

dist.init_process_group("gloo")
"""


def run_ranks(tmp_path, body, timeout=120):
    run_world_to_ok(tmp_path, 2, COMMON + body, timeout=timeout)


@needs_gloo
def test_fsdp_equals_ddp_and_one_process(tmp_path):
    run_ranks(tmp_path, """
for make_opt in (lambda ps: ts.optim.SGD(ps, lr=0.05, momentum=0.9), lambda ps: ts.optim.Adam(ps, lr=0.01)):
    sharded = shard_everything(net())
    assert isinstance(sharded, FSDPModule) and isinstance(sharded, Net) and type(sharded).__name__ == "FSDPNet"
    assert isinstance(sharded.layers[0], FSDPModule) and not isinstance(sharded.head, FSDPModule)
    reference = net()
    # the parameters are this rank's rows of the full ones
    for (name, shard), full in zip(sharded.named_parameters(), reference.parameters()):
        rows = full.shape[0] if full.dim() else 1
        per_rank = -(-rows // WORLD)
        expected = full.detach().reshape(rows, -1)[RANK * per_rank:(RANK + 1) * per_rank]
        np.testing.assert_array_equal(shard.detach().reshape(expected.shape).numpy(), expected.numpy(), err_msg=name)
    assert sharded.conv.weight.shape == ((3, 3, 3, 3) if RANK == 0 else (2, 3, 3, 3))
    assert sharded.scale.shape == ((1,) if RANK == 0 else (0,))
    ddp_model = net(seed=RANK)
    ddp = DDP(ddp_model)
    opt, ref_opt, ddp_opt = make_opt(sharded.parameters()), make_opt(reference.parameters()), make_opt(ddp.parameters())
    for step in range(5):
        x, y = batch(step)
        for o in (opt, ref_opt, ddp_opt):
            o.zero_grad()
        nn.functional.mse_loss(sharded(half(x)), half(y)).backward()
        nn.functional.mse_loss(ddp(half(x)), half(y)).backward()
        nn.functional.mse_loss(reference(x), y).backward()
        # between forwards the shards are back in place; their gradients are the rows of DDP's
        assert sharded.conv.weight.shape[0] == (3 if RANK == 0 else 2)
        for o in (opt, ref_opt, ddp_opt):
            o.step()
        close(full_params(sharded), list(ddp_model.parameters()), f"fsdp vs ddp, step {step}")
    close(full_params(sharded), list(reference.parameters()), "fsdp vs one process")
    state_elements = sum(v.numel() for s in opt.state.values() for v in s.values() if hasattr(v, "numel") and v.dim())
    ddp_elements = sum(v.numel() for s in ddp_opt.state.values() for v in s.values() if hasattr(v, "numel") and v.dim())
    assert state_elements < 0.6 * ddp_elements, (state_elements, ddp_elements)   # optimizer state is sharded too
# eval under no_grad gathers too, and leaves the shards in place
with ts.no_grad():
    out = sharded(batch(0)[0])
    expected = reference(batch(0)[0])
np.testing.assert_allclose(out.numpy(), expected.numpy(), rtol=1e-5, atol=1e-5)
assert sharded.conv.weight.shape[0] == (3 if RANK == 0 else 2)
# sharded state_dict: the same keys as the plain model's, local rows as values; full_state_dict gathers
sd = sharded.state_dict()
assert list(sd) == list(reference.state_dict())
assert sd["conv.weight"].shape[0] == (3 if RANK == 0 else 2)
full = full_state_dict(sharded)
close([full[k] for k in reference.state_dict()], list(reference.state_dict().values()), "full_state_dict")
assert (full_state_dict(sharded, rank0_only=True) == {}) == (RANK != 0)
plain = net(seed=5)
plain.load_state_dict(full)
close(list(plain.parameters()), [full[name] for name, _ in plain.named_parameters()], "loaded full state", 0)
# a full state dict loads into a freshly sharded model: each rank takes its rows
fresh = shard_everything(net(seed=9))
load_full_state_dict(fresh, full)
close(full_params(fresh), [full[name] for name, _ in plain.named_parameters()], "load_full_state_dict", 0)
with ts.no_grad():
    np.testing.assert_array_equal(fresh(batch(0)[0]).numpy(), sharded(batch(0)[0]).numpy())
import pytest
bad = dict(full)
bad["head.weight"] = ts.zeros(4, 7)
with pytest.raises(RuntimeError, match="size mismatch for head.weight"):
    load_full_state_dict(fresh, bad)
# unshard()/reshard()
sharded.unshard()
assert sharded.conv.weight.shape == (5, 3, 3, 3)
sharded.reshard()
assert sharded.conv.weight.shape[0] == (3 if RANK == 0 else 2)
print("ok")
""", timeout=180)


@needs_gloo
def test_fsdp_gradient_accumulation_without_sync(tmp_path):
    run_ranks(tmp_path, """
sharded = shard_everything(net())
reference = net()
opt = ts.optim.SGD(sharded.parameters(), lr=0.05)
ref_opt = ts.optim.SGD(reference.parameters(), lr=0.05)
for step in range(2):
    opt.zero_grad(); ref_opt.zero_grad()
    micro = [batch(10 * step + k) for k in range(3)]
    sharded.set_requires_gradient_sync(False)
    for x, y in micro[:2]:
        nn.functional.mse_loss(sharded(half(x)), half(y)).backward()
    assert all(p.grad is None for p in sharded.parameters())   # nothing reduced yet
    sharded.set_requires_gradient_sync(True)
    nn.functional.mse_loss(sharded(half(micro[2][0])), half(micro[2][1])).backward()
    for x, y in micro:
        nn.functional.mse_loss(reference(x), y).backward()
    # clipping sees the norm of the whole model, not of this rank's shards
    for norm_type, max_norm in ((2.0, 0.05), (float("inf"), 0.001)):
        total = sharded.clip_grad_norm_(max_norm, norm_type=norm_type)
        expected = ts.nn.utils.clip_grad_norm_(reference.parameters(), max_norm, norm_type=norm_type)
        np.testing.assert_allclose(float(total), float(expected), rtol=1e-5)
        assert float(total) > max_norm   # the clip did something
    opt.step(); ref_opt.step()
close(full_params(sharded), list(reference.parameters()), "accumulated and clipped")
print("ok")
""")


@needs_gloo
def test_fsdp_bad_input_in_a_world(tmp_path):
    run_ranks(tmp_path, """
import pytest
m = fully_shard(nn.Linear(2, 2))
with pytest.raises(ValueError, match="already applied"):
    fully_shard(m)
with pytest.raises(TypeError, match="expected an nn.Module"):
    fully_shard(ts.ones(2))
with pytest.raises(NotImplementedError, match="mp_policy"):
    fully_shard(nn.Linear(2, 2), mp_policy=object())
mixed = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2).double())
with pytest.raises(TypeError, match="share a dtype"):
    fully_shard(mixed)
print("ok")
""")


def test_fully_shard_before_init_process_group_raises():
    assert not dist.is_initialized()
    with pytest.raises(ValueError, match="Default process group has not been initialized"):
        fully_shard(ts.nn.Linear(2, 2))
    assert FSDPModule.__name__ == "FSDPModule"


@needs_gloo
def test_reshard_after_forward_gathers_again_in_backward(tmp_path):
    # With reshard_after_forward (the default) autograd keeps no full parameter: what it saves of
    # them is packed as a reference and backward all-gathers each module once more. Training is
    # the same either way.
    run_ranks(tmp_path, """
import gc, weakref
results = {}
for reshard in (True, False):
    model = net()
    for layer in model.layers:
        fully_shard(layer, reshard_after_forward=reshard)
    fully_shard(model, reshard_after_forward=reshard)
    installed = []  # the full weight fully_shard put in place for the forward
    model.layers[0].register_forward_pre_hook(lambda m, args: installed.append(weakref.ref(m.weight)))
    gathers = []
    state = model.layers[0]._fsdp_state
    original = state.gather
    state.gather = lambda shards: (gathers.append(1), original(shards))[1]
    opt = ts.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    for step in range(3):
        gathers.clear()
        opt.zero_grad()
        x, y = batch(step)
        loss = nn.functional.mse_loss(model(half(x)), half(y))
        assert len(gathers) == 1
        gc.collect()
        if reshard:  # nothing holds the full weight between forward and backward
            assert installed[-1]() is None, "the full parameter outlived the forward"
        loss.backward()
        assert len(gathers) == (2 if reshard else 1), (reshard, gathers)
        assert state._regathered is None  # dropped once the module's gradients were reduce-scattered
        opt.step()
        losses.append(float(loss.detach()))
    results[reshard] = (losses, full_params(model))
assert results[True][0] == results[False][0], results
close(results[True][1], results[False][1], "reshard vs keep", 0)
print("ok")
""")

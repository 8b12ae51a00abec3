"""SyncBatchNorm with real processes (2 ranks, gloo): a CNN with batch norm, converted with
convert_sync_batchnorm and trained with DDP on half the batch per rank, equals one process with
plain BatchNorm on the whole batch (parameters and running statistics); outside a process group it
is BatchNorm."""
import numpy as np
import pytest

import tessera as ts
import tessera.distributed as dist
from tessera.nn.modules._sync_batchnorm import SyncBatchNorm
from dist_harness import run_world

needs_gloo = pytest.mark.skipif(not dist.is_gloo_available(), reason="the gloo backend plugin is not built")


@needs_gloo
def test_ddp_with_sync_batchnorm_equals_one_process(tmp_path):
    results = run_world(tmp_path, 2, """
import tessera.nn as nn
from tessera.nn.parallel import DistributedDataParallel as DDP
from tessera.nn.modules._sync_batchnorm import SyncBatchNorm
dist.init_process_group("gloo")

def model(seed, momentum=0.1):
    ts.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4, momentum=momentum), nn.ReLU(), nn.Flatten(),
                         nn.Linear(4 * 6 * 6, 8), nn.BatchNorm1d(8, momentum=momentum), nn.Linear(8, 3))

def close(a, b, what, tol=1e-5):
    for i, (p, q) in enumerate(zip(a, b)):
        np.testing.assert_allclose(p.detach().numpy().astype("float64"), q.detach().numpy().astype("float64"),
                                   rtol=tol, atol=tol, err_msg=f"{what} [{i}]")

for momentum in (0.1, None):
    synced = SyncBatchNorm.convert_sync_batchnorm(model(RANK, momentum))
    assert isinstance(synced[1], SyncBatchNorm) and isinstance(synced[5], SyncBatchNorm)
    reference = model(0, momentum)
    ddp = DDP(synced)
    opt = ts.optim.SGD(ddp.parameters(), lr=0.1)
    ref_opt = ts.optim.SGD(reference.parameters(), lr=0.1)
    for step in range(4):
        rng = np.random.default_rng(step)
        x = ts.from_numpy(rng.standard_normal((8, 3, 8, 8)).astype("float32") * (1 + step))
        y = ts.from_numpy(rng.integers(0, 3, 8).astype("int64"))
        opt.zero_grad(); ref_opt.zero_grad()
        nn.functional.cross_entropy(ddp(x[4 * RANK:4 * RANK + 4]), y[4 * RANK:4 * RANK + 4]).backward()
        nn.functional.cross_entropy(reference(x), y).backward()
        close([p.grad for p in synced.parameters()], [p.grad for p in reference.parameters()], f"grads {step}")
        opt.step(); ref_opt.step()
    close(list(synced.parameters()), list(reference.parameters()), "parameters")
    close(list(synced.buffers()), list(reference.buffers()), "running statistics")
    # evaluation uses the running statistics, as BatchNorm does
    synced.eval(); reference.eval()
    with ts.no_grad():
        close([synced(x)], [reference(x)], "eval")
print("ok")
""", timeout=120)
    for rank, (_, out, err) in enumerate(results):
        assert out.strip().endswith("ok"), f"rank {rank} did not finish:\n{out}\n{err}"


def test_sync_batchnorm_without_a_group_is_batchnorm():
    assert not dist.is_initialized()
    ts.manual_seed(0)
    plain = ts.nn.BatchNorm2d(3)
    synced = SyncBatchNorm.convert_sync_batchnorm(plain)
    assert isinstance(synced, SyncBatchNorm) and synced.weight is plain.weight
    x = ts.randn(4, 3, 5, 5)
    reference = ts.nn.BatchNorm2d(3)
    np.testing.assert_allclose(synced(x).detach().numpy(), reference(x).detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(synced.running_mean.numpy(), reference.running_mean.numpy(), rtol=1e-6)
    with pytest.raises(ValueError, match="expected at least 2D input"):
        SyncBatchNorm(3)(ts.ones(3))
    with pytest.raises(ValueError, match="expected 3 channels"):
        SyncBatchNorm(3)(ts.ones(2, 4))

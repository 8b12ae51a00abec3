"""The nccl process-group backend on CUDA tensors: a world of one in this process, and two ranks
in two processes where the machine has two GPUs. Skipped without CUDA (runs in the device check)."""
import pytest

import tessera as ts
import tessera.distributed as dist
from dist_harness import run_world


def _cuda_devices():
    try:
        return ts.cuda.device_count() if ts.cuda.is_available() else 0
    except Exception:
        return 0


pytestmark = pytest.mark.skipif(_cuda_devices() == 0 or not dist.is_nccl_available(),
                                reason="needs a CUDA device and the nccl backend plugin")


def test_world_of_one():
    dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1)
    try:
        t = ts.tensor([1.0, 2.0, 3.0], device="cuda")
        dist.all_reduce(t)
        assert t.cpu().tolist() == [1.0, 2.0, 3.0]
        out = [ts.zeros(3, device="cuda")]
        dist.all_gather(out, t)
        assert out[0].cpu().tolist() == [1.0, 2.0, 3.0]
        dist.broadcast(t, src=0)
        dist.barrier()
        with pytest.raises(ValueError, match="takes tensors on \\[cuda\\]"):
            dist.all_reduce(ts.ones(2))
    finally:
        dist.destroy_process_group()


@pytest.mark.skipif(_cuda_devices() < 2, reason="needs two GPUs")
def test_two_ranks(tmp_path):
    run_world(tmp_path, 2, """
    dist.init_process_group("nccl")
    dev = f"cuda:{RANK}"
    t = ts.full((1 << 20,), float(RANK + 1), device=dev)
    dist.all_reduce(t)
    assert t.cpu()[:3].tolist() == [3.0, 3.0, 3.0]
    big = ts.zeros(2, 4, device=dev)
    dist.all_gather_into_tensor(big, ts.full((4,), float(RANK), device=dev))
    assert big.cpu().tolist() == [[0.0] * 4, [1.0] * 4]
    out = ts.zeros(2, device=dev)
    dist.reduce_scatter_tensor(out, ts.arange(4, device=dev).float())
    assert out.cpu().tolist() == [2.0 * (2 * RANK), 2.0 * (2 * RANK + 1)]
    got = ts.zeros(3, device=dev)
    if RANK == 0:
        dist.send(ts.tensor([7.0, 8.0, 9.0], device=dev), dst=1)
    else:
        dist.recv(got, src=0)
        assert got.cpu().tolist() == [7.0, 8.0, 9.0]
    dist.destroy_process_group()
    """, timeout=180)

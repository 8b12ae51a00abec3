"""A child made by fork() after the parent ran parallel CPU operators: before, its first parallel
operator waited forever for OpenMP threads that did not survive the fork. Every child here runs
under a timeout that names what it waited for, and its results are checked against NumPy."""
import multiprocessing
import os
import pickle
import time

import numpy as np
import pytest

import tessera as ts

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")


def _warm_parallel():
    """Parallel regions in the parent (GEMM through oneDNN, element-wise and reductions through OpenMP)."""
    a = ts.randn(512, 512)
    (a @ a).sum()
    ts.exp(ts.randn(1 << 21)).sum()


def _child_work(seed):
    rng = np.random.default_rng(seed)
    a, x = rng.standard_normal((300, 300)).astype(np.float32), rng.standard_normal(1 << 20).astype(np.float32)
    got_mm = (ts.tensor(a) @ ts.tensor(a)).numpy()
    got_sum = float(ts.exp(ts.tensor(x) * 0.1).sum())
    conv = ts.nn.functional.conv2d(ts.tensor(a[None, None]), ts.ones(1, 1, 3, 3)).numpy()
    lstm_out = ts.nn.LSTM(8, 8)(ts.ones(5, 2, 8))[0].shape
    want_conv = sum(a[i:i + 298, j:j + 298] for i in range(3) for j in range(3))
    ok = (np.allclose(got_mm, a @ a, rtol=1e-4, atol=1e-3) and np.isclose(got_sum, np.exp(x * 0.1).sum(), rtol=1e-4)
          and np.allclose(conv[0, 0], want_conv, rtol=1e-4, atol=1e-4) and tuple(lstm_out) == (5, 2, 8))
    return ok


def _wait(pid, seconds, what):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    pytest.fail(f"the forked child ({what}) did not finish in {seconds} s")


def test_forked_child_runs_parallel_operators():
    _warm_parallel()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report through the pipe, never return into pytest
        try:
            result = _child_work(1)
        except BaseException as e:  # noqa: BLE001 - reported to the parent
            result = repr(e)
        os.write(write, pickle.dumps(result))
        os._exit(0)
    os.close(write)
    status = _wait(pid, 60, "matmul, exp, sum, conv2d and an LSTM after the parent's parallel operators")
    with os.fdopen(read, "rb") as f:
        result = pickle.loads(f.read())
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert result is True, result
    # The parent keeps its threads.
    _warm_parallel()


def test_fork_pool_workers():
    _warm_parallel()
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(2) as pool:
        results = pool.map_async(_child_work, [2, 3, 4]).get(timeout=120)
    assert results == [True, True, True]

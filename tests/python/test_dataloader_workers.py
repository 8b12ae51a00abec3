"""DataLoader with worker processes: the same batches in the same order as num_workers=0,
IterableDataset split with get_worker_info, worker_init_fn, persistent workers, a worker's
exception re-raised with its traceback, and the fault cases (a worker that dies, a batch that
takes too long) ending in errors that name what was waited for, never a hang."""
import os
import time

import numpy as np
import pytest

import tessera as ts
from tessera.utils.data import DataLoader, Dataset, IterableDataset, TensorDataset, get_worker_info

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="workers are forked")


def _dataset(n=53):
    return TensorDataset(ts.arange(2 * n).float().reshape(n, 2), ts.arange(n))


def _as_lists(loader):
    return [[t.numpy().tolist() for t in batch] for batch in loader]


@pytest.mark.parametrize("kw", [dict(batch_size=8), dict(batch_size=5, drop_last=True), dict(batch_size=None),
                                dict(batch_size=4, shuffle=True, seed=3), dict(batch_size=7, prefetch_factor=1)])
def test_same_batches_as_in_process(kw):
    kw0 = {k: v for k, v in kw.items() if k != "prefetch_factor"}
    want = _as_lists(DataLoader(_dataset(), num_workers=0, **kw0))
    got = _as_lists(DataLoader(_dataset(), num_workers=3, **kw))
    assert got == want


class _Shards(IterableDataset):
    def __iter__(self):
        info = get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        return iter(ts.tensor([i]) for i in range(start, 23, step))


def test_iterable_dataset_split_by_worker_info():
    got = sorted(int(x) for b in DataLoader(_Shards(), batch_size=4, num_workers=2) for x in b.reshape(-1).tolist())
    assert got == list(range(23))
    assert get_worker_info() is None  # the main process


class _Seeds(Dataset):
    def __len__(self):
        return 6

    def __getitem__(self, i):
        info = get_worker_info()
        return ts.tensor([info.id, os.getpid(), float(ts.rand(()))])


def test_worker_init_fn_seeds_and_persistent_workers():
    calls = []
    loader = DataLoader(_Seeds(), batch_size=1, num_workers=2, persistent_workers=True,
                        worker_init_fn=lambda wid: calls.append(wid))  # runs in the worker: not seen here
    first = [b[0].tolist() for b in loader]
    second = [b[0].tolist() for b in loader]
    assert calls == []
    pids = {int(r[1]) for r in first}
    assert len(pids) == 2 and pids == {int(r[1]) for r in second}  # the same processes serve both passes
    assert os.getpid() not in pids
    ts.manual_seed(11)
    a = [b[0][2] for b in DataLoader(_Seeds(), batch_size=1, num_workers=2)]
    ts.manual_seed(11)
    b = [b[0][2] for b in DataLoader(_Seeds(), batch_size=1, num_workers=2)]
    assert a == b  # worker seeds follow ts.manual_seed


class _Raises(Dataset):
    def __len__(self):
        return 10

    def __getitem__(self, i):
        if i == 7:
            raise KeyError(f"no sample {i}")
        return ts.tensor([i])


def test_worker_exception_is_reraised_with_its_traceback():
    with pytest.raises(KeyError) as info:
        list(DataLoader(_Raises(), batch_size=2, num_workers=2))
    text = str(info.value)
    assert "Caught KeyError in DataLoader worker process" in text
    assert "no sample 7" in text and "__getitem__" in text  # the worker's own traceback


class _Dies(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        if i == 5:
            os._exit(3)  # a worker killed mid-batch
        return ts.tensor([i])


def test_a_worker_that_dies_is_an_error_not_a_hang():
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=r"DataLoader worker \(pid\(s\) \d+\) exited unexpectedly"):
        list(DataLoader(_Dies(), batch_size=1, num_workers=2))
    assert time.monotonic() - start < 30


class _Slow(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        time.sleep(5 if i == 2 else 0)
        return ts.tensor([i])


def test_timeout_names_the_wait():
    with pytest.raises(RuntimeError, match="DataLoader timed out after 1 seconds"):
        list(DataLoader(_Slow(), batch_size=1, num_workers=1, timeout=1))


def test_option_errors():
    with pytest.raises(ValueError, match="persistent_workers option needs num_workers > 0"):
        DataLoader(_dataset(), persistent_workers=True)
    with pytest.raises(ValueError, match="prefetch_factor option could only be specified in multiprocessing"):
        DataLoader(_dataset(), prefetch_factor=2)
    with pytest.raises(ValueError, match="num_workers option should be non-negative"):
        DataLoader(_dataset(), num_workers=-1)


def test_training_with_workers_matches_in_process():
    def run(workers):
        ts.manual_seed(0)
        model = ts.nn.Linear(2, 1)
        opt = ts.optim.SGD(model.parameters(), lr=0.01)
        for x, y in DataLoader(_dataset(40), batch_size=8, num_workers=workers):
            opt.zero_grad()
            ((model(x).squeeze(1) - y.float()) ** 2).mean().backward()
            opt.step()
        return model.weight.detach().numpy()
    np.testing.assert_array_equal(run(2), run(0))

"""tessera.utils.data: datasets, samplers, default_collate and DataLoader batching / shuffling."""
import random
from collections import namedtuple

import numpy as np
import pytest

import tessera as ts
from conftest import assert_close, to_np
from tessera.utils.data import (
    BatchSampler, ConcatDataset, DataLoader, Dataset, IterableDataset, RandomSampler, SequentialSampler, Subset,
    TensorDataset, default_collate, random_split,
)


def make_dataset(n=10):
    x = ts.arange(n * 3, dtype=ts.float32).reshape(n, 3)
    y = ts.arange(n)
    return TensorDataset(x, y)


def test_tensor_dataset():
    ds = make_dataset()
    assert len(ds) == 10
    x, y = ds[4]
    assert_close(x, [12.0, 13.0, 14.0])
    assert y.item() == 4
    with pytest.raises(ValueError, match="Size mismatch"):
        TensorDataset(ts.zeros(3, 2), ts.zeros(4))
    with pytest.raises(TypeError):
        TensorDataset(np.zeros(3))


def test_sequential_batches_and_last_batch():
    dl = DataLoader(make_dataset(), batch_size=4)
    batches = list(dl)
    assert len(dl) == 3 and len(batches) == 3
    assert [tuple(b[0].shape) for b in batches] == [(4, 3), (4, 3), (2, 3)]
    assert_close(batches[1][1], [4, 5, 6, 7])
    assert batches[0][1].dtype == ts.int64
    dl = DataLoader(make_dataset(), batch_size=4, drop_last=True)
    assert len(dl) == 2 and [tuple(b[1].shape) for b in dl] == [(4,), (4,)]
    xs, ys = next(iter(DataLoader(make_dataset(), batch_size=None)))
    assert tuple(xs.shape) == (3,) and ys.item() == 0


def test_shuffle_is_a_permutation_and_reproducible():
    def order(**kw):
        dl = DataLoader(make_dataset(20), batch_size=6, shuffle=True, **kw)
        return [[int(v) for v in to_np(y)] for _, y in dl]

    a = order(seed=7)
    assert sorted(sum(a, [])) == list(range(20))
    assert a == order(seed=7)
    assert a != order(seed=8)
    assert sum(a, []) != list(range(20))
    assert order(generator=random.Random(3)) == order(generator=random.Random(3))
    ts.manual_seed(11)
    b = order()
    ts.manual_seed(11)
    assert order() == b

    dl = DataLoader(make_dataset(20), batch_size=20, shuffle=True, seed=1)
    e1 = to_np(next(iter(dl))[1]).tolist()
    e2 = to_np(next(iter(dl))[1]).tolist()
    assert e1 != e2  # a new permutation each epoch


def test_samplers():
    assert list(SequentialSampler(range(4))) == [0, 1, 2, 3]
    rs = RandomSampler(range(5), seed=0)
    assert sorted(rs) == [0, 1, 2, 3, 4] and len(rs) == 5
    rs = RandomSampler(range(5), replacement=True, num_samples=12, seed=0)
    drawn = list(rs)
    assert len(drawn) == 12 and all(0 <= i < 5 for i in drawn)
    drawn = list(RandomSampler(range(3), num_samples=7, seed=0))  # permutations, concatenated
    assert len(drawn) == 7 and sorted(drawn[:3]) == [0, 1, 2] and sorted(drawn[3:6]) == [0, 1, 2]
    assert list(BatchSampler(range(5), 2, False)) == [[0, 1], [2, 3], [4]]
    assert list(BatchSampler(range(5), 2, True)) == [[0, 1], [2, 3]]
    with pytest.raises(ValueError):
        BatchSampler(range(5), 0, False)
    with pytest.raises(ValueError):
        RandomSampler([], seed=0)
    dl = DataLoader(make_dataset(), batch_sampler=[[0, 9], [3]])
    assert [to_np(y).tolist() for _, y in dl] == [[0, 9], [3]]


def test_default_collate_kinds():
    assert_close(default_collate([1.5, 2.5]), [1.5, 2.5], ts.float64)
    assert_close(default_collate([1, 2]), [1, 2], ts.int64)
    assert_close(default_collate([True, False]), [True, False], ts.bool)
    out = default_collate([(ts.zeros(2), 1), (ts.ones(2), 2)])
    assert isinstance(out, list) and tuple(out[0].shape) == (2, 2) and to_np(out[1]).tolist() == [1, 2]
    d = default_collate([{"a": ts.ones(1), "b": "x"}, {"a": ts.zeros(1), "b": "y"}])
    assert tuple(d["a"].shape) == (2, 1) and d["b"] == ["x", "y"]
    Point = namedtuple("Point", "x y")
    p = default_collate([Point(1, 2.0), Point(3, 4.0)])
    assert isinstance(p, Point) and to_np(p.x).tolist() == [1, 3] and p.y.dtype == ts.float64
    arr = default_collate([np.ones((2, 2), dtype=np.float32), np.zeros((2, 2), dtype=np.float32)])
    assert tuple(arr.shape) == (2, 2, 2) and arr.dtype == ts.float32
    with pytest.raises(RuntimeError, match="equal size"):
        default_collate([ts.zeros(2), ts.zeros(3)])
    with pytest.raises(TypeError):
        default_collate([object(), object()])


def test_custom_dataset_collate_fn_and_errors():
    class Squares(Dataset):
        def __len__(self):
            return 5

        def __getitem__(self, i):
            return {"x": ts.tensor([float(i)]), "y": i * i}

    batches = list(DataLoader(Squares(), batch_size=2))
    assert to_np(batches[2]["y"]).tolist() == [16] and tuple(batches[0]["x"].shape) == (2, 1)
    lens = [len(b) for b in DataLoader(Squares(), batch_size=3, collate_fn=lambda b: b)]
    assert lens == [3, 2]
    with pytest.raises(ValueError, match="mutually exclusive"):
        DataLoader(Squares(), sampler=SequentialSampler(range(5)), shuffle=True)
    with pytest.raises(ValueError, match="mutually exclusive"):
        DataLoader(Squares(), batch_sampler=[[0]], batch_size=2)
    with pytest.raises(ValueError):
        DataLoader(Squares(), batch_size=0)
    with pytest.raises(ValueError):
        DataLoader(Squares(), num_workers=-1)


def test_iterable_dataset():
    class Count(IterableDataset):
        def __iter__(self):
            return iter(range(7))

        def __len__(self):
            return 7

    dl = DataLoader(Count(), batch_size=3)
    assert [to_np(b).tolist() for b in dl] == [[0, 1, 2], [3, 4, 5], [6]]
    assert len(dl) == 3
    with pytest.raises(ValueError):
        DataLoader(Count(), shuffle=True)


def test_concat_subset_and_random_split():
    a, b = make_dataset(3), make_dataset(4)
    c = ConcatDataset([a, b])
    assert len(c) == 7 and c[3][1].item() == 0 and c[-1][1].item() == 3
    assert len(a + b) == 7
    s = Subset(b, [3, 1])
    assert len(s) == 2 and s[0][1].item() == 3
    parts = random_split(make_dataset(10), [7, 3], seed=0)
    idx = sorted(parts[0].indices + parts[1].indices)
    assert idx == list(range(10)) and len(parts[0]) == 7
    assert random_split(make_dataset(10), [0.5, 0.5], seed=0)[0].indices == \
        random_split(make_dataset(10), [0.5, 0.5], seed=0)[0].indices
    with pytest.raises(ValueError):
        random_split(make_dataset(10), [3, 3])


def test_zero_length_dataset_and_noncontiguous_tensors():
    ds = TensorDataset(ts.zeros(0, 2))
    assert list(DataLoader(ds, batch_size=4)) == []
    x = ts.arange(12, dtype=ts.float64).reshape(3, 4).T  # 4 samples of 3, non-contiguous
    (batch,) = next(iter(DataLoader(TensorDataset(x), batch_size=4)))
    assert_close(batch, np.arange(12.0).reshape(3, 4).T, ts.float64)

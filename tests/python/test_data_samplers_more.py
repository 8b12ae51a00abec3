"""WeightedRandomSampler, SubsetRandomSampler, ChainDataset and StackDataset: torch's sampling
semantics (statistical checks of the drawn frequencies), generator handling, checks and batching."""
import random

import numpy as np
import pytest

import tessera as ts
from tessera.utils.data import (ChainDataset, DataLoader, IterableDataset, StackDataset, SubsetRandomSampler,
                                TensorDataset, WeightedRandomSampler)


def _generator(seed):
    g = ts.Generator()
    g.manual_seed(seed)
    return g


def test_weighted_sampler_frequencies_follow_the_weights():
    weights = [1.0, 2.0, 3.0, 4.0]
    n = 40000
    drawn = np.array(list(WeightedRandomSampler(weights, n, generator=_generator(0))))
    counts = np.bincount(drawn, minlength=4)
    expected = n * np.array(weights) / sum(weights)
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < 16.27, (counts, chi2)  # the 0.999 quantile of chi-square with 3 degrees of freedom


def test_weighted_sampler_zero_weight_never_drawn_and_without_replacement_is_distinct():
    drawn = list(WeightedRandomSampler([0.0, 1.0, 0.0, 2.0], 500, generator=_generator(1)))
    assert set(drawn) <= {1, 3}
    once = list(WeightedRandomSampler([5, 1, 1, 1, 1, 0.5], 6, replacement=False, generator=_generator(2)))
    assert sorted(once) == list(range(6))
    # Without replacement the heaviest index comes first most often (5 / 9.5 of the time).
    firsts = [next(iter(WeightedRandomSampler([5, 1, 1, 1, 1, 0.5], 3, replacement=False, generator=_generator(s))))
              for s in range(400)]
    assert abs(firsts.count(0) / 400 - 5 / 9.5) < 0.1


def test_weighted_sampler_generator_reproduces_and_checks():
    a = list(WeightedRandomSampler([0.2, 0.3, 0.5], 20, generator=_generator(7)))
    b = list(WeightedRandomSampler([0.2, 0.3, 0.5], 20, generator=_generator(7)))
    assert a == b and len(WeightedRandomSampler([1, 2], 20)) == 20
    s = WeightedRandomSampler(ts.tensor([1.0, 1.0]), 5)
    assert s.weights.dtype == ts.float64 and s.replacement
    with pytest.raises(ValueError, match="num_samples should be a positive integer value, but got num_samples=0"):
        WeightedRandomSampler([1, 2], 0)
    with pytest.raises(ValueError, match="replacement should be a boolean value, but got replacement=1"):
        WeightedRandomSampler([1, 2], 2, replacement=1)
    with pytest.raises(ValueError, match=r"weights should be a 1d sequence but given weights have shape \(1, 2\)"):
        WeightedRandomSampler([[1, 2]], 2)


def test_subset_random_sampler_permutes_the_subset():
    indices = [10, 11, 12, 13, 14, 15]
    orders = [tuple(SubsetRandomSampler(indices, generator=_generator(s))) for s in range(50)]
    assert all(sorted(o) == indices for o in orders)
    assert len(set(orders)) > 40
    assert len(SubsetRandomSampler(indices)) == 6
    first = np.bincount([o[0] - 10 for o in orders], minlength=6)
    assert first.min() >= 1  # every element leads some permutation
    sampler = SubsetRandomSampler(indices, generator=_generator(3))
    assert len({tuple(sampler) for _ in range(10)}) > 1  # each iteration draws anew from the generator
    assert tuple(SubsetRandomSampler(indices, generator=_generator(5))) == \
        tuple(SubsetRandomSampler(indices, generator=_generator(5)))
    assert sorted(SubsetRandomSampler(indices, generator=random.Random(0))) == indices


class _Range(IterableDataset):
    def __init__(self, a, b):
        self.a, self.b = a, b

    def __iter__(self):
        return iter(range(self.a, self.b))

    def __len__(self):
        return self.b - self.a


def test_chain_dataset():
    chain = ChainDataset([_Range(0, 3), _Range(10, 12)])
    assert list(chain) == [0, 1, 2, 10, 11] and len(chain) == 5
    assert list(_Range(0, 2) + _Range(5, 6)) == [0, 1, 5]
    with pytest.raises(AssertionError, match="ChainDataset only supports IterableDataset"):
        list(ChainDataset([[1, 2]]))


def test_stack_dataset_tuple_dict_and_checks():
    x, y = ts.arange(6.0).reshape(3, 2), ts.tensor([0, 1, 2])
    stacked = StackDataset(TensorDataset(x), y)
    assert len(stacked) == 3 and stacked[1][1].item() == 1
    named = StackDataset(inp=x, label=[7, 8, 9])
    assert named[2]["label"] == 9 and named.__getitems__([0, 2])[1]["label"] == 9
    batch = next(iter(DataLoader(StackDataset(x, y), batch_size=2)))
    assert batch[0].shape == (2, 2) and batch[1].tolist() == [0, 1]
    with pytest.raises(ValueError, match="Size mismatch between datasets"):
        StackDataset(x, [1])
    with pytest.raises(ValueError, match="At least one dataset should be passed"):
        StackDataset()
    with pytest.raises(ValueError, match="but both types are given"):
        StackDataset(x, label=y)


@pytest.mark.torch
def test_same_behaviour_as_torch_on_deterministic_cases():
    import torch
    from torch.utils import data as td
    assert list(WeightedRandomSampler([0, 0, 1], 4)) == list(td.WeightedRandomSampler([0, 0, 1], 4))
    assert sorted(SubsetRandomSampler([3, 1, 4])) == sorted(td.SubsetRandomSampler([3, 1, 4]))
    tstack = td.StackDataset(a=[1, 2], b=[3, 4])
    assert StackDataset(a=[1, 2], b=[3, 4]).__getitems__([1, 0]) == tstack.__getitems__([1, 0])
    assert len(td.ChainDataset([_TorchRange(0, 2)])) == len(ChainDataset([_Range(0, 2)]))
    with pytest.raises(ValueError) as ours:
        WeightedRandomSampler([1, 2], -3)
    with pytest.raises(ValueError) as theirs:
        td.WeightedRandomSampler([1, 2], -3)
    assert str(ours.value) == str(theirs.value)
    del torch


def _torch_range_class():
    import torch.utils.data as td

    class R(td.IterableDataset):
        def __init__(self, a, b):
            self.a, self.b = a, b

        def __iter__(self):
            return iter(range(self.a, self.b))

        def __len__(self):
            return self.b - self.a
    return R


def _TorchRange(a, b):
    return _torch_range_class()(a, b)

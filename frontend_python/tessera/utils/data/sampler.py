"""Samplers: the order (and batches) in which a DataLoader reads a dataset."""
import random

import tessera

_Tensor = tessera.Tensor
from tessera.utils.data.dataset import _global_seed, _make_rng  # noqa: F401


# ---------------------------------------------------------------------------- samplers
class Sampler:
    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """A new random permutation of the indices at each iteration (without replacement), or
    num_samples indices drawn with replacement."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None, seed=None):
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = _make_rng(generator, seed)
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got num_samples={self.num_samples}")

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n = len(self.data_source)
        rng = self.generator if self.generator is not None else random.Random(_global_seed())
        if self.replacement:
            for _ in range(self.num_samples):
                yield rng.randrange(n)
            return
        count = self.num_samples
        while count > 0:
            perm = list(range(n))
            rng.shuffle(perm)
            yield from perm[:count]
            count -= n

    def __len__(self):
        return self.num_samples


def _tessera_generator(generator):
    """A torch-style generator argument as a tessera.Generator (None: the global one). An int
    seeds a new one; a random.Random (the other samplers' convention) seeds one per draw."""
    if generator is None or isinstance(generator, tessera.Generator):
        return generator
    if isinstance(generator, random.Random):
        g = tessera.Generator()
        g.manual_seed(generator.getrandbits(63))
        return g
    if isinstance(generator, int) and not isinstance(generator, bool):
        g = tessera.Generator()
        g.manual_seed(generator)
        return g
    raise TypeError(f"generator must be a tessera.Generator, a random.Random or an int seed, got "
                    f"{type(generator).__name__}")


class SubsetRandomSampler(Sampler):
    """The given indices in a new random order at each iteration (a randperm from generator)."""

    def __init__(self, indices, generator=None):
        self.indices = indices
        self.generator = generator

    def __iter__(self):
        for i in tessera.randperm(len(self.indices), generator=_tessera_generator(self.generator)).tolist():
            yield self.indices[i]

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """num_samples indices in [0, len(weights)) drawn with probabilities proportional to weights
    (tessera.multinomial, with or without replacement) at each iteration."""

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        if isinstance(num_samples, bool) or not isinstance(num_samples, int) or num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got num_samples={num_samples}")
        if not isinstance(replacement, bool):
            raise ValueError(f"replacement should be a boolean value, but got replacement={replacement}")
        weights_tensor = tessera.as_tensor(weights, dtype=tessera.float64)
        if weights_tensor.ndim != 1:
            raise ValueError(f"weights should be a 1d sequence but given weights have shape "
                             f"{tuple(weights_tensor.shape)}")
        self.weights = weights_tensor
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def __iter__(self):
        drawn = tessera.multinomial(self.weights, self.num_samples, self.replacement,
                                    generator=_tessera_generator(self.generator))
        yield from drawn.tolist()

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """Groups a sampler's indices into lists of batch_size (the last shorter unless drop_last)."""

    def __init__(self, sampler, batch_size, drop_last):
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self):
        batch = []
        for idx in self.sampler:
            batch.append(idx)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else (n + self.batch_size - 1) // self.batch_size

"""DistributedSampler: each of num_replicas processes reads its own 1/num_replicas of a dataset
(torch.utils.data.distributed). The shuffled order is torch's own for the same seed and epoch
(torch.randperm under torch.Generator().manual_seed(seed + epoch)), so a job that moves between
the two frameworks reads the same samples in the same order on every rank."""
import math
import random

from tessera.utils.data.sampler import Sampler

_MT_WORDS = 624


def _mt19937_seeded(seed):
    """A random.Random whose stream is std::mt19937(seed): the engine behind torch's CPU generator.
    (random.Random(seed) seeds differently, by init_by_array, so the state is built here.)"""
    state = [seed & 0xFFFFFFFF]
    for i in range(1, _MT_WORDS):
        previous = state[-1]
        state.append((1812433253 * (previous ^ (previous >> 30)) + i) & 0xFFFFFFFF)
    engine = random.Random()
    engine.setstate((3, tuple(state) + (_MT_WORDS,), None))  # position 624: the next draw regenerates
    return engine


def torch_randperm(n, seed):
    """torch.randperm(n, generator=torch.Generator().manual_seed(seed)).tolist() on the CPU: a
    forward Fisher-Yates shuffle whose swap partner is one 32-bit draw modulo the rest (two draws
    made into 64 bits when n is large enough for 32 to skew the choice)."""
    engine = _mt19937_seeded(seed)
    perm = list(range(n))
    wide = n >= (2 ** 32 - 1) // 20
    for i in range(n - 1):
        if wide:
            draw = (engine.getrandbits(32) << 32) | engine.getrandbits(32)
        else:
            draw = engine.getrandbits(32)
        j = i + draw % (n - i)
        perm[i], perm[j] = perm[j], perm[i]
    return perm


def _default_from_group(value, query, what):
    if value is not None:
        return value
    import tessera.distributed as dist  # here, not at import: samplers given both need no process group
    if not dist.is_available():
        raise RuntimeError("Requires distributed package to be available")
    if not dist.is_initialized():
        raise ValueError(f"DistributedSampler: {what} was not given and the default process group has not been "
                         "initialized; pass it or call init_process_group first")
    return query(dist)


class DistributedSampler(Sampler):
    """The indices of rank `rank` out of `num_replicas`: the (shuffled) index list is padded by
    repeating its head to a multiple of num_replicas (or cut to one, with drop_last), and rank r
    takes every num_replicas-th index from position r."""

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0, drop_last=False):
        num_replicas = _default_from_group(num_replicas, lambda dist: dist.get_world_size(), "num_replicas")
        rank = _default_from_group(rank, lambda dist: dist.get_rank(), "rank")
        if isinstance(num_replicas, bool) or not isinstance(num_replicas, int) or num_replicas <= 0:
            raise ValueError(f"DistributedSampler: num_replicas should be a positive integer, got {num_replicas!r}")
        if isinstance(rank, bool) or not isinstance(rank, int) or rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        size = len(dataset)
        if drop_last and size % num_replicas != 0:
            self.num_samples = math.ceil((size - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(size / num_replicas)
        self.total_size = self.num_samples * num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self):
        size = len(self.dataset)
        indices = torch_randperm(size, self.seed + self.epoch) if self.shuffle else list(range(size))
        if self.drop_last:
            indices = indices[:self.total_size]
        else:
            padding = self.total_size - len(indices)
            if padding <= len(indices):
                indices += indices[:padding]
            elif indices:
                indices += (indices * math.ceil(padding / len(indices)))[:padding]
        if len(indices) != self.total_size:
            raise AssertionError(f"Number of indices ({len(indices)}) does not match total_size ({self.total_size})")
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self):
        return self.num_samples

    def set_epoch(self, epoch):
        """A new shuffle for each epoch: call it on every rank before making the epoch's iterator."""
        self.epoch = epoch

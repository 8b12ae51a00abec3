"""tessera.utils.data: Dataset, TensorDataset, samplers and DataLoader (torch's API, in-process).

Shuffling draws a permutation per epoch from a random.Random: the one passed as `generator`, one
seeded with `seed`, or else one seeded from Tessera's global generator at each epoch (so
ts.manual_seed makes shuffles reproducible, as torch.manual_seed does)."""
import bisect
import collections.abc
import numbers
import random
import warnings

import tessera

_Tensor = tessera.Tensor


class Dataset:
    """A map-style dataset: __getitem__(index) and __len__."""

    def __getitem__(self, index):
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """An iterable-style dataset: __iter__ yields samples."""

    def __iter__(self):
        raise NotImplementedError("Subclasses of IterableDataset should implement __iter__.")


class TensorDataset(Dataset):
    """Sample i is (t[i] for t in tensors); all tensors share their first dimension."""

    def __init__(self, *tensors):
        if not tensors:
            raise ValueError("TensorDataset: expected at least one tensor")
        for t in tensors:
            if not isinstance(t, _Tensor):
                raise TypeError(f"TensorDataset: expected Tensors, got {type(t).__name__}")
            if t.ndim == 0:
                raise ValueError("TensorDataset: tensors must have at least one dimension")
        n = tensors[0].shape[0]
        if any(t.shape[0] != n for t in tensors):
            raise ValueError(f"Size mismatch between tensors: first dimensions {[t.shape[0] for t in tensors]}")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].shape[0]


class ConcatDataset(Dataset):
    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("datasets should not be an empty iterable")
        self.cumulative_sizes = []
        total = 0
        for d in self.datasets:
            total += len(d)
            self.cumulative_sizes.append(total)

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx = len(self) + idx
        d = bisect.bisect_right(self.cumulative_sizes, idx)
        sample_idx = idx if d == 0 else idx - self.cumulative_sizes[d - 1]
        return self.datasets[d][sample_idx]


class Subset(Dataset):
    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = list(indices)

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return [self.dataset[self.indices[i]] for i in idx]
        return self.dataset[self.indices[idx]]

    def __len__(self):
        return len(self.indices)


def _make_rng(generator, seed):
    if generator is not None:
        if isinstance(generator, random.Random):
            return generator
        if isinstance(generator, numbers.Integral):
            return random.Random(int(generator))
        raise TypeError(f"generator must be a random.Random or an int seed, got {type(generator).__name__}")
    if seed is not None:
        return random.Random(int(seed))
    return None


def _global_seed():
    """A seed drawn from Tessera's global generator."""
    return int(tessera.randint(0, 2 ** 62, (1,), dtype=tessera.int64).item())


def random_split(dataset, lengths, generator=None, seed=None):
    """Splits into non-overlapping Subsets of the given lengths (or fractions summing to 1)."""
    n = len(dataset)
    lengths = list(lengths)
    if all(0 <= x <= 1 for x in lengths) and abs(sum(lengths) - 1) < 1e-9 and sum(lengths) != n:
        counts = [int(n * f) for f in lengths]
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
        lengths = counts
    if sum(lengths) != n:
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    rng = _make_rng(generator, seed) or random.Random(_global_seed())
    perm = list(range(n))
    rng.shuffle(perm)
    out, offset = [], 0
    for length in lengths:
        out.append(Subset(dataset, perm[offset:offset + length]))
        offset += length
    return out


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


# ---------------------------------------------------------------------------- collation
def default_convert(data):
    if isinstance(data, _Tensor):
        return data
    if type(data).__module__ == "numpy" and hasattr(data, "dtype") and data.dtype.kind not in "SUO":
        return tessera.as_tensor(data)
    if isinstance(data, collections.abc.Mapping):
        return type(data)({k: default_convert(v) for k, v in data.items()})
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, (list, tuple)):
        return type(data)(default_convert(d) for d in data)
    return data


def default_collate(batch):
    """Stacks a list of samples into a batch: tensors (and NumPy arrays) are stacked along a new
    dim 0, Python floats become float64 tensors, ints int64, bools bool; tuples, lists, named
    tuples and dicts are collated field by field; strings stay lists."""
    elem = batch[0]
    if isinstance(elem, _Tensor):
        shapes = {tuple(b.shape) for b in batch}
        if len(shapes) != 1:
            raise RuntimeError(f"default_collate: stack expects each tensor to be equal size, but got shapes "
                               f"{sorted(shapes)}")
        return tessera.stack(list(batch), 0)
    if type(elem).__module__ == "numpy" and hasattr(elem, "dtype"):
        if elem.dtype.kind in "SUO":
            raise TypeError(f"default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; "
                            f"found {elem.dtype}")
        if getattr(elem, "shape", ()) == ():  # NumPy scalar
            return tessera.as_tensor(__import__("numpy").asarray(batch))
        return default_collate([tessera.as_tensor(b) for b in batch])
    if isinstance(elem, bool):
        return tessera.tensor(batch, dtype=tessera.bool)
    if isinstance(elem, float):
        return tessera.tensor(batch, dtype=tessera.float64)
    if isinstance(elem, int):
        return tessera.tensor(batch, dtype=tessera.int64)
    if isinstance(elem, (str, bytes)):
        return list(batch)
    if isinstance(elem, collections.abc.Mapping):
        return type(elem)({key: default_collate([d[key] for d in batch]) for key in elem})
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):
        return type(elem)(*(default_collate(samples) for samples in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        if any(len(e) != size for e in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        transposed = list(zip(*batch))
        if isinstance(elem, tuple):
            return [default_collate(samples) for samples in transposed]
        return [default_collate(samples) for samples in transposed]
    raise TypeError(f"default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found "
                    f"{type(elem)}")


# ---------------------------------------------------------------------------- DataLoader
def _pin_batch(batch, device):
    """The batch with every CPU tensor in it copied to page-locked memory of `device`."""
    if isinstance(batch, _Tensor):
        return batch.pin_memory(device) if batch.device.type == "cpu" else batch
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(_pin_batch(b, device) for b in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(_pin_batch(b, device) for b in batch)
    if isinstance(batch, dict):
        return {k: _pin_batch(v, device) for k, v in batch.items()}
    return batch


class DataLoader:
    """Iterates over a dataset in batches.

    DataLoader(dataset, batch_size=1, shuffle=False, sampler=None, batch_sampler=None,
    num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, generator=None, seed=None).
    Loading runs in the calling process (num_workers > 0 is accepted and behaves as 0).
    generator: a random.Random (or an int seed) for the shuffle order; seed: the same as an int
    generator. batch_size=None yields single samples, converted but not collated."""

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers=0,
                 collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
                 multiprocessing_context=None, generator=None, *, prefetch_factor=None, persistent_workers=False,
                 pin_memory_device="", seed=None):
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable "
                             "multiprocessing.")
        self.dataset = dataset
        self.num_workers = num_workers
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device or "cuda"
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self._is_iterable = isinstance(dataset, IterableDataset)
        if self._is_iterable:
            if shuffle not in (None, False):
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified shuffle option, but got "
                                 f"shuffle={shuffle}")
            if sampler is not None or batch_sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified sampler / batch_sampler")
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and "
                                 "drop_last")
            batch_size = None
            drop_last = False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually exclusive with drop_last")
        if sampler is None and not self._is_iterable:
            sampler = RandomSampler(dataset, generator=generator, seed=seed) if shuffle else SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None and not self._is_iterable:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.generator = generator
        if collate_fn is None:
            collate_fn = default_collate if (batch_size is not None or batch_sampler is not None) else default_convert
        self.collate_fn = collate_fn

    def _fetch(self, indices):
        ds = self.dataset
        if hasattr(ds, "__getitems__"):
            return ds.__getitems__(indices)
        return [ds[i] for i in indices]

    def __iter__(self):
        batches = self._batches()
        if not self.pin_memory:
            yield from batches
            return
        for batch in batches:
            try:
                yield _pin_batch(batch, self.pin_memory_device)
            except (NotImplementedError, RuntimeError, ValueError) as e:
                # As PyTorch without an accelerator: say why once, then load unpinned.
                warnings.warn(f"DataLoader: pin_memory=True but pinning on '{self.pin_memory_device}' failed ({e}); "
                              "loading without pinned memory", stacklevel=2)
                yield batch
                yield from batches
                return

    def _batches(self):
        if self._is_iterable:
            it = iter(self.dataset)
            if self.batch_size is None:
                for sample in it:
                    yield self.collate_fn(sample)
                return
            batch = []
            for sample in it:
                batch.append(sample)
                if len(batch) == self.batch_size:
                    yield self.collate_fn(batch)
                    batch = []
            if batch and not self.drop_last:
                yield self.collate_fn(batch)
            return
        if self.batch_sampler is not None:
            for indices in self.batch_sampler:
                yield self.collate_fn(self._fetch(indices))
        else:
            for idx in self.sampler:
                yield self.collate_fn(self.dataset[idx])

    def __len__(self):
        if self._is_iterable:
            n = len(self.dataset)
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else (n + self.batch_size - 1) // self.batch_size
        if self.batch_sampler is not None:
            return len(self.batch_sampler)
        return len(self.sampler)

"""DataLoader: iterates over a dataset in batches (torch's API, in-process).

Shuffling draws a permutation per epoch from a random.Random: the one passed as `generator`, one
seeded with `seed`, or else one seeded from Tessera's global generator at each epoch (so
ts.manual_seed makes shuffles reproducible, as torch.manual_seed does)."""
import warnings

import tessera
from tessera.utils.data.dataset import IterableDataset
from tessera.utils.data.sampler import BatchSampler, RandomSampler, SequentialSampler  # noqa: F401
from tessera.utils.data._collate import _pin_batch, default_collate, default_convert  # noqa: F401

_Tensor = tessera.Tensor


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

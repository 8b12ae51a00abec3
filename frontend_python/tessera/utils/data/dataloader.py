"""DataLoader: iterates over a dataset in batches (torch's API), in the calling process or, with
num_workers > 0, in worker processes (_worker.py).

Shuffling draws a permutation per epoch from a random.Random: the one passed as `generator`, one
seeded with `seed`, or else one seeded from Tessera's global generator at each epoch (so
ts.manual_seed makes shuffles reproducible, as torch.manual_seed does)."""
import itertools
import warnings

import tessera
from tessera.utils.data.dataset import IterableDataset
from tessera.utils.data.sampler import BatchSampler, RandomSampler, SequentialSampler  # noqa: F401
from tessera.utils.data._collate import _pin_batch, default_collate, default_convert  # noqa: F401

_Tensor = tessera.Tensor


class DataLoader:
    """Iterates over a dataset in batches.

    DataLoader(dataset, batch_size=1, shuffle=False, sampler=None, batch_sampler=None,
    num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
    multiprocessing_context=None, generator=None, prefetch_factor=None, persistent_workers=False, seed=None).
    num_workers > 0 loads in that many worker processes (get_worker_info() inside them), keeping
    prefetch_factor batches per worker in flight; a worker's exception is re-raised here with its
    traceback; timeout (seconds) bounds the wait for each batch.
    generator: a random.Random (or an int seed) for the shuffle order; seed: the same as an int
    generator. batch_size=None yields single samples, converted but not collated."""

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers=0,
                 collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
                 multiprocessing_context=None, generator=None, *, prefetch_factor=None, persistent_workers=False,
                 pin_memory_device="", seed=None):
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable "
                             "multiprocessing.")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in multiprocessing.let num_workers > 0 "
                             "to enable multiprocessing, otherwise set prefetch_factor to None.")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = 2 if prefetch_factor is None and num_workers > 0 else prefetch_factor
        self.persistent_workers = persistent_workers
        self.multiprocessing_context = multiprocessing_context
        self._iterator = None  # the worker pool, kept between passes when persistent
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

    # ---- worker processes (_worker.py)
    def _base_seed(self):
        """Worker w seeds its generators with this + w: a fresh draw from tessera's global
        generator per pool, so ts.manual_seed makes workers' randomness reproducible."""
        return int(tessera.randint(0, 2 ** 62, (1,), dtype=tessera.int64)[0])

    def _worker_tasks(self):
        """What the workers are asked for, in order: index lists, single indices, or (for an
        IterableDataset) "the next batch" until every worker's copy is exhausted."""
        if self._is_iterable:
            return itertools.repeat(None)
        if self.batch_sampler is not None:
            return iter(self.batch_sampler)
        return iter(self.sampler)

    @property
    def _worker_fetch(self):
        return _Fetcher(self.dataset, self._is_iterable, self.batch_size, self.drop_last, self.collate_fn,
                        self.batch_sampler is not None)

    def __iter__(self):
        if self.num_workers > 0:
            from tessera.utils.data._worker import MultiProcessIterator
            if self.persistent_workers and self._iterator is not None and not self._iterator._shut:
                self._iterator._reset()
            else:
                self._iterator = MultiProcessIterator(self)
            batches = self._iterator
        else:
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


class _Fetcher:
    """Builds one batch in a worker (a plain object, so a spawn context can pickle it)."""

    def __init__(self, dataset, is_iterable, batch_size, drop_last, collate_fn, auto_collation):
        self.dataset, self.is_iterable, self.batch_size = dataset, is_iterable, batch_size
        self.drop_last, self.collate_fn, self.auto_collation = drop_last, collate_fn, auto_collation

    def __call__(self, source, indices=None):
        if self.is_iterable:  # source: this worker's iterator over its dataset copy
            if self.batch_size is None:
                return self.collate_fn(next(source))
            batch = list(itertools.islice(source, self.batch_size))
            if not batch or (self.drop_last and len(batch) < self.batch_size):
                raise StopIteration
            return self.collate_fn(batch)
        if self.auto_collation:  # source: a list of indices
            ds = self.dataset
            samples = ds.__getitems__(source) if hasattr(ds, "__getitems__") else [ds[i] for i in source]
            return self.collate_fn(samples)
        return self.collate_fn(self.dataset[source])

"""DataLoader worker processes (num_workers > 0), as torch.utils.data's.

Each worker owns an index queue; all share one result queue. The parent keeps up to
prefetch_factor * num_workers batches in flight, hands them out round-robin, and yields results in
sampler order. A worker builds a batch (fetch, collate, its tensors stacked straight into shared
memory) and sends it back through tessera.multiprocessing, so a batch's tensors cross as memory
file descriptors instead of being copied through the pipe; an exception
there comes back as text with the worker's traceback and is re-raised in the parent. Workers are
forked by default on Linux (the CPU plugin makes a forked child single-threaded, so its operators
do not wait for OpenMP threads that did not survive the fork). Every wait in the parent has a
bound: a worker that dies is noticed within a second, and `timeout` bounds each batch.
"""
import itertools
import multiprocessing
import os
import queue
import random
import sys
import traceback

import tessera

_POLL_SECONDS = 1.0  # how often a waiting parent checks that its workers are alive

_worker_info = None
_NO_MORE = object()  # the sampler is exhausted (an IterableDataset's tasks are all None)


class WorkerInfo:
    """What get_worker_info() returns inside a worker: id, num_workers, seed and its dataset copy."""

    def __init__(self, id, num_workers, seed, dataset):
        self.id, self.num_workers, self.seed, self.dataset = id, num_workers, seed, dataset

    def __repr__(self):
        return f"WorkerInfo(id={self.id}, num_workers={self.num_workers}, seed={self.seed}, dataset={self.dataset!r})"


def get_worker_info():
    """The WorkerInfo of the calling DataLoader worker, or None in the main process."""
    return _worker_info


class _WorkerError:
    """An exception raised in a worker, carried to the parent as its type and formatted traceback."""

    def __init__(self, worker_id, exc):
        self.exc_type = type(exc)
        self.worker_id = worker_id
        self.text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))

    def reraise(self):
        message = (f"Caught {self.exc_type.__name__} in DataLoader worker process {self.worker_id}.\n"
                   f"Original {self.text}")
        try:
            error = self.exc_type(message)
        except Exception:  # an exception type whose constructor wants other arguments
            error = RuntimeError(message)
        raise error


class _IterableEnd:
    """A worker's IterableDataset copy is exhausted."""

    def __init__(self, worker_id):
        self.worker_id = worker_id


def _worker_loop(dataset, is_iterable, fetch_collate, index_queue, result_queue, worker_id, num_workers, seed,
                 worker_init_fn, parent_pid):
    global _worker_info
    import tessera.multiprocessing  # noqa: F401 - tensors on result_queue go through shared memory
    try:
        tessera.manual_seed(seed)
        random.seed(seed)
        _worker_info = WorkerInfo(worker_id, num_workers, seed, dataset)
        if worker_init_fn is not None:
            worker_init_fn(worker_id)
        iterator = iter(dataset) if is_iterable else None
    except Exception as e:  # noqa: BLE001 - reported to the parent with the next task
        init_error = _WorkerError(worker_id, e)
    else:
        init_error = None
    while True:
        try:
            task = index_queue.get(timeout=_POLL_SECONDS)
        except queue.Empty:
            if os.getppid() != parent_pid:  # the parent died: nobody will read our results
                return
            continue
        if task is None:  # shut down
            return
        task_id, indices = task
        if init_error is not None:
            result_queue.put((task_id, init_error))
            continue
        try:
            if is_iterable:
                batch = fetch_collate(iterator, indices)
            else:
                batch = fetch_collate(indices)
            result_queue.put((task_id, batch))
        except StopIteration:
            result_queue.put((task_id, _IterableEnd(worker_id)))
        except Exception as e:  # noqa: BLE001 - re-raised in the parent
            result_queue.put((task_id, _WorkerError(worker_id, e)))
        del task


class MultiProcessIterator:
    """One pass over a DataLoader with worker processes (reused across passes when persistent)."""

    def __init__(self, loader):
        # Imported here, not at `import tessera`: it registers how tensors cross processes.
        from tessera.multiprocessing.reductions import SenderExitedError  # receives shared-memory tensors
        self._sender_exited = SenderExitedError
        self._loader = loader
        self._num_workers = loader.num_workers
        self._prefetch = loader.prefetch_factor * loader.num_workers
        self._timeout = loader.timeout
        context = loader.multiprocessing_context
        if context is None:
            context = multiprocessing.get_context("fork" if sys.platform.startswith("linux") else None)
        elif isinstance(context, str):
            context = multiprocessing.get_context(context)
        self._result_queue = context.Queue()
        self._index_queues, self._workers = [], []
        base_seed = loader._base_seed()
        for wid in range(self._num_workers):
            index_queue = context.Queue()
            worker = context.Process(
                target=_worker_loop,
                args=(loader.dataset, loader._is_iterable, loader._worker_fetch, index_queue, self._result_queue, wid,
                      self._num_workers, base_seed + wid, loader.worker_init_fn, os.getpid()),
                daemon=True)
            worker.start()
            self._index_queues.append(index_queue)
            self._workers.append(worker)
        self._shut = False
        self._reset()

    def _reset(self):
        self._tasks = self._loader._worker_tasks()
        self._next_task = 0      # the next task id to send
        self._next_result = 0    # the next task id to yield
        self._pending = {}       # task id -> result that arrived early
        self._task_worker = {}   # task id -> worker it went to
        self._active = [True] * self._num_workers  # IterableDataset: workers not yet exhausted
        self._worker_cycle = itertools.cycle(range(self._num_workers))
        for _ in range(self._prefetch):
            self._send()

    def _send(self):
        if not any(self._active):
            return
        indices = next(self._tasks, _NO_MORE)
        if indices is _NO_MORE:
            return
        for _ in range(self._num_workers):
            wid = next(self._worker_cycle)
            if self._active[wid]:
                break
        self._index_queues[wid].put((self._next_task, indices))
        self._task_worker[self._next_task] = wid
        self._next_task += 1

    def _get(self):
        """The next result from any worker, within the timeout, noticing dead workers."""
        waited = 0.0
        while True:
            step = _POLL_SECONDS if not self._timeout else min(_POLL_SECONDS, self._timeout - waited)
            try:
                return self._result_queue.get(timeout=max(step, 0.01))
            except RuntimeError as e:
                if not isinstance(e, self._sender_exited):
                    raise
                # A batch sent before its worker died: its shared memory went with the worker.
                for w in self._workers:
                    w.join(timeout=_POLL_SECONDS)
                self._raise_if_a_worker_died(cause=e)
                raise
            except queue.Empty:
                waited += step
                self._raise_if_a_worker_died()
                if self._timeout and waited >= self._timeout:
                    self._shutdown()
                    raise RuntimeError(f"DataLoader timed out after {self._timeout} seconds") from None

    def _raise_if_a_worker_died(self, cause=None):
        dead = [w for w in self._workers if not w.is_alive()]
        if dead:
            pids = ", ".join(str(w.pid) for w in dead)
            codes = ", ".join(str(w.exitcode) for w in dead)
            self._shutdown()
            raise RuntimeError(f"DataLoader worker (pid(s) {pids}) exited unexpectedly (exit code(s) {codes})") \
                from cause

    def __iter__(self):
        return self

    def __next__(self):
        while True:
            if self._next_result >= self._next_task:  # nothing in flight: the pass is over
                if not self._loader.persistent_workers:
                    self._shutdown()
                raise StopIteration
            if self._next_result in self._pending:
                result = self._pending.pop(self._next_result)
            else:
                task_id, result = self._get()
                if task_id != self._next_result:
                    self._pending[task_id] = result
                    continue
            self._task_worker.pop(self._next_result, None)
            self._next_result += 1
            if isinstance(result, _IterableEnd):
                self._active[result.worker_id] = False
                self._send()  # keep the others busy
                continue
            self._send()
            if isinstance(result, _WorkerError):
                self._shutdown()
                result.reraise()
            return result

    def _shutdown(self):
        if self._shut:
            return
        self._shut = True
        for q in self._index_queues:
            try:
                q.put(None)
            except (OSError, ValueError):
                pass
        for w in self._workers:
            w.join(timeout=5)
            if w.is_alive():  # stuck in user code: do not hang the parent
                w.terminate()
                w.join(timeout=5)
        for q in self._index_queues + [self._result_queue]:
            q.cancel_join_thread()
            q.close()

    def __del__(self):
        self._shutdown()

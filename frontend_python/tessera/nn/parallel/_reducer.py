"""DistributedDataParallel's gradient reducer (torch's c10d Reducer, in Python over tessera's
collectives).

Parameters are grouped into buckets, each a flat buffer with one view per parameter. A
post-accumulate-grad hook copies each gradient, scaled by 1/world, into its view as soon as
autograd has accumulated it; a bucket whose gradients are all in is all-reduced (SUM, async) at
once, but buckets are launched strictly in bucket order so every rank issues the same collectives
in the same order. A callback queued on the autograd engine waits for every bucket when the
backward pass ends and writes the averaged gradients back to .grad (or leaves .grad as the bucket
view with gradient_as_bucket_view).

As in torch, the first iteration runs with one bucket (unless find_unused_parameters without
static_graph), records the order in which gradients became ready, and the next forward rebuilds
the buckets in that order (limits: first bucket 1 MiB, then bucket_cap_mb), taking rank 0's order
on every rank."""
import threading
import weakref

from tessera.nn.parallel._bucket_assignment import compute_bucket_assignment_by_size


def _dist():
    import tessera.distributed as dist
    return dist


class _Bucket:
    """A flat gradient buffer, the parameters (indices) it holds and a view per parameter."""

    def __init__(self, indices, params, divisor):
        import tessera
        self.indices = list(indices)
        first = params[self.indices[0]]
        sizes = [params[i].numel() for i in self.indices]
        self.buffer = tessera.zeros(sum(sizes), dtype=first.dtype, device=first.device)
        self.views = []
        offset = 0
        for i, size in zip(self.indices, sizes):
            self.views.append(self.buffer[offset:offset + size].view(params[i].shape))
            offset += size
        self.pending = len(self.indices)
        self.work = None                   # a Work, or the comm hook's future: wait() finishes the reduction
        self.scale = tessera.tensor(1.0 / divisor, dtype=first.dtype, device=first.device)


def _is_tensor(value):
    import tessera
    return isinstance(value, tessera.Tensor)


def _same_memory(a, b):
    return a.data_ptr() == b.data_ptr() and a.shape == b.shape and a.dtype == b.dtype


def _hook_for(reducer_ref, index):
    def on_grad_accumulated(_param):
        reducer = reducer_ref()
        if reducer is not None:
            reducer._on_grad_accumulated(index)
    return on_grad_accumulated


def _remove_hooks(handles):
    for handle in handles:
        handle.remove()
    handles.clear()


def _reachable_parameters(outputs):
    """Data pointers of the leaves that the autograd graph of `outputs` reaches, or None where the
    graph cannot be walked (tessera's grad_fn has no next_functions yet): then unused parameters
    are found at the end of backward instead, and their buckets are reduced last."""
    seen, reached, stack = set(), set(), []
    for t in outputs:
        fn = getattr(t, "grad_fn", None)
        if fn is not None:
            stack.append(fn)
    while stack:
        fn = stack.pop()
        if id(fn) in seen:
            continue
        seen.add(id(fn))
        variable = getattr(fn, "variable", None)
        if variable is not None:
            reached.add(variable.data_ptr())
        try:
            nexts = fn.next_functions
        except Exception:
            return None
        for next_fn, _ in nexts:
            if next_fn is not None:
                stack.append(next_fn)
    return reached or None  # no leaf seen: the nodes do not name their variables, so trust nothing


class Reducer:
    def __init__(self, params, bucket_indices, process_group, find_unused_parameters, gradient_as_bucket_view,
                 first_bucket_bytes_cap, bucket_bytes_cap, static_graph=False):
        self.params = list(params)
        self.process_group = process_group
        self.world_size = process_group.size()
        self.find_unused_parameters = find_unused_parameters
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.first_bucket_bytes_cap = first_bucket_bytes_cap
        self.bucket_bytes_cap = bucket_bytes_cap
        self.static_graph = False
        self._static_first_iteration = False
        self._static_locally_unused = []   # static graph: parameters this rank left out in the first iteration
        self._static_globally_unused = []  # ... and those every rank left out (their .grad is not touched)
        self._lock = threading.RLock()
        self._expect_hooks = False
        self._require_finalize = False
        self._callback_queued = False
        self._has_rebuilt = False
        self._ready_order = []             # first iteration: the order gradients became ready (for the rebuild)
        self._unused_to_mark = []
        self._marked_unused = False
        self._locally_used = [False] * len(self.params)
        self._ready = [False] * len(self.params)
        self._next_bucket = 0
        self.num_iterations = 0
        self.comm_hook = None              # (state, hook): replaces the all-reduce (it then does the averaging)
        self._divisor = self.world_size
        self._install(bucket_indices)
        me = weakref.ref(self)
        self._hook_handles = [p.register_post_accumulate_grad_hook(_hook_for(me, i)) for i, p in enumerate(self.params)]
        # a reducer that is gone takes its hooks off the parameters (a new DDP may wrap them again)
        weakref.finalize(self, _remove_hooks, self._hook_handles)
        if static_graph:
            self.set_static_graph()

    # ---------------------------------------------------------------- buckets
    def _install(self, bucket_indices):
        self.buckets = [_Bucket(indices, self.params, self._divisor) for indices in bucket_indices]
        self._where = {}
        for b, bucket in enumerate(self.buckets):
            for position, i in enumerate(bucket.indices):
                self._where[i] = (b, position)
                if self.gradient_as_bucket_view:  # gradients move into their new views (torch does too)
                    grad = self.params[i].grad
                    if grad is not None:
                        bucket.views[position].copy_(grad)
                        self.params[i].grad = bucket.views[position]
        if sorted(self._where) != list(range(len(self.params))):
            raise RuntimeError(f"DistributedDataParallel: the buckets must hold every parameter exactly once, got "
                               f"{[b.indices for b in self.buckets]} for {len(self.params)} parameters")

    def bucket_indices(self):
        return [list(b.indices) for b in self.buckets]

    def set_static_graph(self):
        self.static_graph = True
        self._static_first_iteration = self.num_iterations == 0

    def _should_rebuild(self):
        return (self.static_graph or not self.find_unused_parameters) and not self._has_rebuilt

    def rebuild_buckets(self):
        """At a forward after the first synced backward: buckets in the order gradients became ready,
        rank 0's order on every rank. True when the buckets changed."""
        with self._lock:
            if not self._should_rebuild() or len(self._ready_order) != len(self.params):
                return False
            assignment = compute_bucket_assignment_by_size(
                self.params, [self.first_bucket_bytes_cap, self.bucket_bytes_cap], self._ready_order)
            indices = [list(bucket) for bucket, _ in assignment]
            dist = _dist()
            message = [indices]
            dist.broadcast_object_list(message, src=dist.get_global_rank(self.process_group, 0),
                                       group=self.process_group)
            self._install(message[0])
            self._has_rebuilt = True
            self._ready_order = []
            return True

    def set_divisor(self, divisor):
        """What gradients are divided by before the sum (the world size; join() may say otherwise)."""
        import tessera
        if divisor != self._divisor:
            self._divisor = divisor
            for bucket in self.buckets:
                bucket.scale = tessera.tensor(1.0 / divisor, dtype=bucket.buffer.dtype, device=bucket.buffer.device)

    def shadow_backward(self):
        """For a rank that has joined (out of data): the collectives of one synced backward, with
        zeros, in bucket order, so the ranks still training are matched."""
        import tessera
        dist = _dist()
        works = []
        for b, bucket in enumerate(self.buckets):
            zeros = _Bucket(bucket.indices, self.params, self.world_size)
            if self.comm_hook is None:
                works.append(dist.all_reduce(zeros.buffer, group=self.process_group, async_op=True))
            else:
                from tessera.nn.parallel._grad_bucket import GradBucket
                state, hook = self.comm_hook
                works.append(hook(state, GradBucket(b, zeros, self.params, b == len(self.buckets) - 1)))
        if self.find_unused_parameters or self._static_first_iteration:
            used = tessera.zeros(len(self.params), dtype=tessera.int32)
            works.append(dist.all_reduce(used, group=self.process_group, async_op=True))
        for work in works:
            work.wait()
        if self._should_rebuild() and len(self._ready_order) != len(self.params):
            self._ready_order = list(range(len(self.params)))  # so this rank takes part in the rebuild
        self._static_first_iteration = False
        self.num_iterations += 1

    # ---------------------------------------------------------------- one iteration
    def ensure_prior_reduction_finished(self):
        if self._require_finalize:
            missing = [i for i, ready in enumerate(self._ready) if not ready]
            raise RuntimeError(
                "Expected to have finished reduction in the prior iteration before starting a new one. This error "
                "indicates that your module has parameters that were not used in producing loss. You can enable "
                "unused parameter detection by passing the keyword argument `find_unused_parameters=True` to "
                "`torch.nn.parallel.DistributedDataParallel`, and by making sure all `forward` function outputs "
                "participate in calculating loss. If you already have done the above, then the distributed data "
                "parallel module wasn't able to locate the output tensors in the return value of your module's "
                "`forward` function. Please include the loss function and the structure of the return value of "
                "`forward` of your module when reporting this issue (e.g. list, dict, iterable).\n"
                f"Parameter indices which did not receive grad for rank {self.process_group.rank()}: "
                + " ".join(map(str, missing)))

    def prepare_for_backward(self, outputs):
        """After a forward that will be synced: expect the hooks, and know which parameters the
        graph leaves out (find_unused_parameters, or a static graph after its first iteration)."""
        with self._lock:
            self.ensure_prior_reduction_finished()
            self._expect_hooks = True
            self._callback_queued = False
            self._marked_unused = False
            self._ready = [False] * len(self.params)
            self._next_bucket = 0
            for bucket in self.buckets:
                bucket.pending = len(bucket.indices)
                bucket.work = None
            self._unused_to_mark = []
            if self._should_rebuild() and not self._static_first_iteration:
                self._ready_order = []  # an order the last forward did not use (incomplete): record afresh
            if self.static_graph and not self._static_first_iteration:
                self._unused_to_mark = list(self._static_locally_unused)
            elif self.find_unused_parameters and not self.static_graph:
                reached = _reachable_parameters(outputs)
                if reached is not None:
                    self._unused_to_mark = [i for i, p in enumerate(self.params) if p.data_ptr() not in reached]

    def _on_grad_accumulated(self, index):
        with self._lock:
            self._locally_used[index] = True  # under no_sync too: used in any accumulated micro-batch
            if not self._expect_hooks:
                return
            if not self._callback_queued:
                from tessera.autograd import Variable
                Variable._execution_engine.queue_callback(self._finalize_backward)
                self._callback_queued = True
            if self._should_rebuild():
                self._ready_order.append(index)
            if self._static_first_iteration:
                return  # the first iteration of a static graph reduces everything at the end
            if not self._marked_unused:
                self._marked_unused = True
                for unused in self._unused_to_mark:
                    self._mark_ready(unused)
            self._mark_ready(index)

    def _mark_ready(self, index):
        if self._ready[index]:
            raise RuntimeError(
                f"Expected to mark a variable ready only once. This error is caused by one of the following reasons: "
                f"1) Use of a module parameter outside the `forward` function. 2) Reused parameters in multiple "
                f"reentrant backward passes. 3) Incorrect unused parameter detection. Parameter at index {index} has "
                f"been marked as ready twice.")
        self._ready[index] = True
        self._require_finalize = True
        b, position = self._where[index]
        bucket = self.buckets[b]
        view = bucket.views[position]
        param = self.params[index]
        grad = param.grad
        if grad is None:
            view.zero_()
        elif self.comm_hook is not None:  # the hook averages: the gradient goes in as it is
            if not _same_memory(grad, view):
                view.copy_(grad)
                if self.gradient_as_bucket_view:
                    param.grad = view
        elif self.gradient_as_bucket_view and _same_memory(grad, view):
            view.div_(self._divisor)
        else:
            import tessera
            tessera.mul(grad, bucket.scale, out=view)  # torch scales while copying in (one pass), then sums
            if self.gradient_as_bucket_view:
                param.grad = view
        bucket.pending -= 1
        if bucket.pending == 0:
            self._launch_ready_buckets()

    def _launch_ready_buckets(self):
        dist = _dist()
        while self._next_bucket < len(self.buckets) and self.buckets[self._next_bucket].pending == 0:
            bucket = self.buckets[self._next_bucket]
            if self.comm_hook is None:
                bucket.work = dist.all_reduce(bucket.buffer, group=self.process_group, async_op=True)
            else:
                from tessera.nn.parallel._grad_bucket import GradBucket
                state, hook = self.comm_hook
                grad_bucket = GradBucket(self._next_bucket, bucket, self.params,
                                         self._next_bucket == len(self.buckets) - 1)
                bucket.work = hook(state, grad_bucket)
                if not callable(getattr(bucket.work, "wait", None)):
                    raise TypeError(f"DDP communication hook {getattr(hook, '__qualname__', hook)} must return a "
                                    f"future (an object with wait()), got {type(bucket.work).__name__}")
            self._next_bucket += 1

    def _finalize_backward(self):
        """End of backward: mark what is left (unused parameters), wait for every bucket, write .grad."""
        with self._lock:
            self._expect_hooks = False
            self._callback_queued = False
            find_used = self.find_unused_parameters or self._static_first_iteration
            if find_used:
                if self._static_first_iteration:  # every parameter now, in the order gradients came
                    seen = set(self._ready_order)
                    order = self._ready_order + [i for i in range(len(self.params)) if i not in seen]
                    self._static_locally_unused = [i for i in range(len(self.params)) if i not in seen]
                    if self._should_rebuild():
                        self._ready_order = order
                else:
                    order = range(len(self.params))
                for i in order:
                    if not self._ready[i]:
                        self._mark_ready(i)
            elif self._next_bucket < len(self.buckets):
                return  # a parameter got no gradient: the next forward reports it, as torch does
            globally_used = None
            if find_used:
                import tessera
                used = tessera.tensor([int(u) for u in self._locally_used], dtype=tessera.int32)
                _dist().all_reduce(used, group=self.process_group)
                globally_used = [bool(u) for u in used.tolist()]
            for bucket in self.buckets:
                result = bucket.work.wait()
                if self.comm_hook is not None:
                    if isinstance(result, (list, tuple)) and len(result) == 1:
                        result = result[0]
                    if _is_tensor(result) and not _same_memory(result.reshape(-1), bucket.buffer):
                        bucket.buffer.copy_(result.reshape(-1))
            if self._static_first_iteration:
                self._static_globally_unused = [i for i, u in enumerate(globally_used) if not u]
                self._static_first_iteration = False
            skip = set(self._static_globally_unused) if self.static_graph else set()
            for bucket in self.buckets:
                for i, view in zip(bucket.indices, bucket.views):
                    if (globally_used is not None and not globally_used[i]) or i in skip:
                        continue  # no rank produced a gradient: .grad stays as it was (torch)
                    self._write_grad(self.params[i], view)
            self._locally_used = [False] * len(self.params)
            self._require_finalize = False
            self.num_iterations += 1

    def _write_grad(self, param, view):
        grad = param.grad
        if self.gradient_as_bucket_view:
            if grad is None:
                param.grad = view
            elif not _same_memory(grad, view):
                grad.copy_(view)
        elif grad is None:
            param.grad = view.clone()
        else:
            grad.copy_(view)

    def remove_hooks(self):
        _remove_hooks(self._hook_handles)

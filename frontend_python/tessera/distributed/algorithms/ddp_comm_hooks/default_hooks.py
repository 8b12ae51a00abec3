"""torch's default DDP communication hooks: allreduce_hook (what DDP does without a hook) and the
compressing ones, which all-reduce the bucket in float16 or bfloat16 (half the bytes on the wire)
and write the result back into the bucket. state is the process group (None: the default one)."""


def _group(process_group):
    from tessera.distributed._c10d import _resolve
    return _resolve(process_group, "DDP communication hook")


class _Reduced:
    """A future for an all-reduce: wait() finishes it and returns `finish()`'s tensor."""

    def __init__(self, work, finish):
        self._work = work
        self._finish = finish
        self._value = None

    def wait(self):
        if self._value is None:
            self._work.wait()
            self._value = self._finish()
        return self._value

    def value(self):
        return self.wait()

    def done(self):
        return self._work.is_completed()


def _allreduce_fut(process_group, tensor):
    """Averages `tensor` in place over the group: divides first (no overflow in low precision), then sums."""
    import tessera.distributed as dist
    group = _group(process_group)
    tensor.div_(group.size())
    return _Reduced(dist.all_reduce(tensor, group=group, async_op=True), lambda: tensor)


def allreduce_hook(process_group, bucket):
    return _allreduce_fut(process_group, bucket.buffer())


def _compress_hook(dtype, process_group, bucket):
    import tessera.distributed as dist
    group = _group(process_group)
    buffer = bucket.buffer()
    compressed = buffer.to(dtype).div_(group.size())

    def decompress():
        buffer.copy_(compressed)
        return buffer
    return _Reduced(dist.all_reduce(compressed, group=group, async_op=True), decompress)


def fp16_compress_hook(process_group, bucket):
    import tessera
    return _compress_hook(tessera.float16, process_group, bucket)


def bf16_compress_hook(process_group, bucket):
    import tessera
    return _compress_hook(tessera.bfloat16, process_group, bucket)

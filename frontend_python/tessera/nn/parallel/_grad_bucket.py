"""GradBucket: what a DDP communication hook receives (torch.distributed.GradBucket): one bucket's
flat gradient buffer, views of it per parameter, and the parameters."""


class GradBucket:
    def __init__(self, index, bucket, params, is_last):
        self._index = index
        self._bucket = bucket
        self._params = params
        self._is_last = is_last

    def index(self):
        """The bucket's position in reduction order (0 is reduced first)."""
        return self._index

    def buffer(self):
        """The flat gradient buffer (already holding this rank's gradients, not yet averaged)."""
        return self._bucket.buffer

    def gradients(self):
        """Views of buffer(), one per parameter, shaped as the parameters."""
        return list(self._bucket.views)

    def parameters(self):
        return [self._params[i] for i in self._bucket.indices]

    def is_last(self):
        """True for the bucket reduced last in the iteration."""
        return self._is_last

    def set_buffer(self, tensor):
        """Replaces the buffer's contents (the hook's result is read from the buffer)."""
        self._bucket.buffer.copy_(tensor.reshape(-1))

"""LinearCrossEntropyOptions: the chunking of F.linear_cross_entropy's memory-saving path (torch's
torch.nn.modules.linear_cross_entropy_options)."""
import dataclasses
import math

__all__ = ["LinearCrossEntropyOptions"]

_POLICIES = ("accurate", "compact", "auto")


@dataclasses.dataclass(frozen=True)
class LinearCrossEntropyOptions:
    """Opt-in to the chunked linear_cross_entropy: the batch is processed batch_chunk_size rows at
    a time, so the (batch, classes) logits are never whole in memory; the gradients are computed
    with the loss and scaled in backward.

    allow_retain_graph: allow a second backward through the same loss (the gradients are kept).
    batch_chunk_size: rows per chunk (None: one chunk, unless chunking_method picks one).
    chunking_method: "auto" or "aspect_ratio" (a chunk's logits as large as the input:
    next_pow2(ceil(rows / ceil(classes / in_features)))), "aspect_ratio:N" (that divided by N), or
    None (batch_chunk_size decides).
    acc_policy, acc_dtype: accepted as torch's; the chunks accumulate in the input's dtype."""

    allow_retain_graph: bool = False
    batch_chunk_size: int | None = None
    chunking_method: str | None = "auto"
    acc_policy: str = "auto"
    acc_dtype: object = None

    def __post_init__(self):
        if self.batch_chunk_size is not None and (not isinstance(self.batch_chunk_size, int)
                                                  or self.batch_chunk_size < 1):
            raise ValueError(f"batch_chunk_size must be a positive integer or None, got {self.batch_chunk_size!r}")
        if self.acc_policy not in _POLICIES:
            raise ValueError(f"acc_policy must be one of {_POLICIES}, got {self.acc_policy!r}")
        _aspect_divisor(self.chunking_method)  # validates

    def chunk_rows(self, rows, in_features, num_classes):
        """The rows per chunk for a (rows, in_features) input and num_classes classes."""
        if self.chunking_method is None:
            return max(1, min(self.batch_chunk_size or rows, rows))
        divisor = _aspect_divisor(self.chunking_method)
        chunk = math.ceil(rows / max(1, math.ceil(num_classes / max(1, in_features))))
        chunk = 1 << max(0, (chunk - 1).bit_length())  # the next power of two
        chunk = max(1, min(chunk // divisor, rows))
        if self.batch_chunk_size is not None and self.batch_chunk_size != chunk:
            raise ValueError(f"batch_chunk_size (={self.batch_chunk_size}) and chunking_method "
                             f"('{self.chunking_method}') give different chunk sizes ({self.batch_chunk_size} vs "
                             f"{chunk}); pass only one.")
        return chunk


def _aspect_divisor(method):
    """1 for "auto" / "aspect_ratio", N for "aspect_ratio:N"; ValueError for anything else."""
    if method is None or method in ("auto", "aspect_ratio"):
        return 1
    if isinstance(method, str) and method.startswith("aspect_ratio:"):
        tail = method[len("aspect_ratio:"):]
        if tail.isdigit() and int(tail) >= 1:
            return int(tail)
    raise ValueError(f"chunking_method must be 'auto', 'aspect_ratio', 'aspect_ratio:N' (N >= 1) or None, got "
                     f"{method!r}")

"""tessera.backends.cuda: torch.backends.cuda's switches over the CUDA plugin's operators.

    >>> ts.backends.cuda.matmul.allow_tf32 = True   # float32 GEMMs and convolutions may use TF32

Off by default, as in PyTorch, so float32 results match the CPU to float32 precision. Reading it
loads the plugin; without the plugin allow_tf32 reads False, and setting it raises RuntimeError.
"""


class _Matmul:
    @property
    def allow_tf32(self):
        from tessera import cuda

        ops = cuda._ops()
        return bool(ops and ops.allow_tf32())

    @allow_tf32.setter
    def allow_tf32(self, allow):
        from tessera import cuda

        cuda._require().set_allow_tf32(bool(allow))

    def __repr__(self):
        return f"tessera.backends.cuda.matmul(allow_tf32={self.allow_tf32})"


matmul = _Matmul()


def is_built():
    """True when the CUDA plugin is installed (it loads, with or without a device)."""
    from tessera import cuda

    return cuda._ops() is not None

"""tessera.backends: per-backend switches, as torch.backends (cuda, cudnn, mkldnn, opt_einsum,
quantized, mps). None of them loads a plugin on import."""
from tessera.backends import cuda, cudnn, mkldnn, mps, opt_einsum, quantized  # noqa: F401

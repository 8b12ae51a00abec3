"""tessera.backends: per-backend switches, as torch.backends (tessera.backends.cuda)."""
from tessera.backends import cuda  # noqa: F401  (loads no plugin)

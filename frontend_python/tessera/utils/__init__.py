"""tessera.utils: data loading (tessera.utils.data)."""
from tessera.utils import data

__all__ = ["data"]

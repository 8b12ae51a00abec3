"""InstanceNorm1d/2d/3d."""

__all__ = []

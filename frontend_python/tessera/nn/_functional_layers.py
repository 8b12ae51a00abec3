"""Functional forms of layer families (padding, interpolation, pixel shuffle, pooling variants, ...),
re-exported by tessera.nn.functional. Helpers of functional.py are imported from it: it imports this
file last, so they exist by then."""

__all__ = []

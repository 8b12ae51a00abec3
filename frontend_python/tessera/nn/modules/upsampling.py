"""Upsample and its subclasses."""

__all__ = []

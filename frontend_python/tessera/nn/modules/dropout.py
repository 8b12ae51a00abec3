"""Dropout variants (Dropout is in misc.py)."""

__all__ = []

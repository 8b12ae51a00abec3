"""Recurrent layers."""

__all__ = []

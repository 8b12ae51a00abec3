"""PairwiseDistance and CosineSimilarity."""

__all__ = []

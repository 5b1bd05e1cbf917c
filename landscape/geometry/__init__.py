"""Geometry of a landscape: which parameters move, random and PCA directions, grid axes."""

__all__: list[str] = []

"""``landscapes.h5``: finished landscapes in Li et al.'s layout, and the resumable store."""

from landscape.io._h5 import read_h5, write_h5

__all__ = ["read_h5", "write_h5"]

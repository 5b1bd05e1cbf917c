"""HDF5 files of landscapes (``landscapes.h5``, Li et al.'s layout) and the resumable store."""

from landscape.io._h5 import H5_NAME, Stored, is_hdf5, read_h5, stored_landscapes, write_h5, write_h5_single

__all__ = ["read_h5", "write_h5", "write_h5_single", "is_hdf5", "stored_landscapes", "Stored", "H5_NAME"]

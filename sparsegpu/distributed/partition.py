"""Contiguous partitions of an index range over the ranks of a communicator.

Rank r owns indices ``offsets[r]:offsets[r+1]``; every rank holds the same ``offsets``. Row
partitions are balanced by nonzeros (:func:`balanced_offsets`); an optional permutation
(reverse Cuthill-McKee) says which original index sits at each position.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sparsegpu.distributed._comm import check_comm


def balanced_offsets(indptr: Any, size: int) -> np.ndarray:
    """Contiguous row ranges for ``size`` ranks, balanced by nonzeros.

    Each row weighs its entries plus one, so empty rows spread over the ranks too. Rank r's
    range starts at the first row whose preceding weight reaches ``r / size`` of the total.

    Parameters
    ----------
    indptr : array_like of int
        A CSR row pointer (length rows + 1).
    size : int
        Ranks.

    Returns
    -------
    ndarray of int64
        ``offsets``, length ``size + 1``, ``offsets[0] == 0``, ``offsets[-1] == rows``.

    Examples
    --------
    >>> balanced_offsets([0, 9, 10, 11, 12], 2).tolist()
    [0, 1, 4]
    """
    indptr = np.asarray(indptr, dtype=np.int64)
    if size < 1:
        raise ValueError(f"size must be at least 1, got {size}")
    rows = indptr.size - 1
    weight = indptr + np.arange(rows + 1, dtype=np.int64)  # weight of rows [0, i)
    targets = np.arange(size + 1, dtype=np.int64) * weight[-1]
    # First row i with weight[i] * size >= r * total: exact integer arithmetic.
    offsets = np.searchsorted(weight * size, targets, side="left").astype(np.int64)
    offsets[0], offsets[-1] = 0, rows
    return np.maximum.accumulate(offsets)


def even_offsets(n: int, size: int) -> np.ndarray:
    """``n`` indices split into ``size`` contiguous ranges of sizes differing by at most one."""
    return np.array([(r * n) // size for r in range(size + 1)], dtype=np.int64)


class Partition:
    """Which contiguous range of a length-``n`` index space each rank owns.

    Parameters
    ----------
    offsets : array_like of int
        Length ``comm.Get_size() + 1``, non-decreasing, from 0 to ``n``; the same on every rank.
    comm : communicator, optional
        An mpi4py communicator (default :func:`sparsegpu.distributed.world`).
    permutation : array_like of int, optional
        ``permutation[k]`` is the original index stored at position k (reverse Cuthill-McKee
        from :meth:`DistributedCSR.from_scipy`); None for the identity.

    Raises
    ------
    ValueError
        ``offsets`` of the wrong length, decreasing or not starting at 0; a permutation of
        the wrong length.

    Examples
    --------
    >>> from sparsegpu.distributed import Partition, world
    >>> p = Partition([0, 5], world())
    >>> p.n, p.start, p.stop, p.local_size
    (5, 0, 5, 5)
    """

    def __init__(self, offsets: Any, comm: Any = None, permutation: Any = None) -> None:
        self.comm = check_comm(comm)
        self.size, self.rank = self.comm.Get_size(), self.comm.Get_rank()
        offsets = np.array(offsets, dtype=np.int64).ravel()
        if offsets.size != self.size + 1:
            raise ValueError(f"offsets must have {self.size + 1} entries (ranks + 1), got {offsets.size}")
        if offsets[0] != 0 or np.any(np.diff(offsets) < 0):
            raise ValueError(f"offsets must start at 0 and never decrease, got {offsets.tolist()[:8]}")
        offsets.setflags(write=False)
        self.offsets = offsets
        if permutation is not None:
            permutation = np.asarray(permutation, dtype=np.int64)
            if permutation.shape != (self.n,):
                raise ValueError(f"permutation must have length {self.n}, got shape {permutation.shape}")
            permutation.setflags(write=False)
        self.permutation = permutation

    @property
    def n(self) -> int:
        """The length of the whole index space."""
        return int(self.offsets[-1])

    @property
    def start(self) -> int:
        """The first index this rank owns."""
        return int(self.offsets[self.rank])

    @property
    def stop(self) -> int:
        """One past the last index this rank owns."""
        return int(self.offsets[self.rank + 1])

    @property
    def local_size(self) -> int:
        return self.stop - self.start

    @property
    def counts(self) -> np.ndarray:
        """Indices per rank."""
        return np.diff(self.offsets)

    def owners(self, indices: np.ndarray) -> np.ndarray:
        """The rank owning each of ``indices`` (positions in the partitioned order)."""
        return np.searchsorted(self.offsets, indices, side="right") - 1

    def same_as(self, other: Partition) -> bool:
        """Whether ``other`` splits the same index space the same way over the same ranks."""
        if self is other:
            return True
        same_permutation = (self.permutation is None and other.permutation is None) or (
            self.permutation is not None and other.permutation is not None
            and np.array_equal(self.permutation, other.permutation))
        return self.comm is other.comm and np.array_equal(self.offsets, other.offsets) and same_permutation

    def local_slice(self, x: Any) -> Any:
        """This rank's part of a global array ``x`` in the original order (permutation applied)."""
        if self.permutation is None:
            return x[self.start:self.stop]
        rows = self.permutation[self.start:self.stop]
        return x[rows if isinstance(x, np.ndarray) else _to_like(rows, x)]

    def __repr__(self) -> str:
        reordered = ", permuted" if self.permutation is not None else ""
        return f"Partition(n={self.n}, ranks={self.size}{reordered})"


def _to_like(indices: np.ndarray, like: Any) -> Any:
    """``indices`` on the same library as ``like`` (a CuPy array gets CuPy indices)."""
    import cupy

    return cupy.asarray(indices)

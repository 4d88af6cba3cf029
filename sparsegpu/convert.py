"""Layout changes on whichever backend holds the arrays (NumPy or CuPy), without a host trip.

These are the building blocks of format conversion: expanding a pointer array into one index
per entry, compressing sorted indices back into pointers, and swapping the major axis of a
compressed layout (CSR <-> CSC, which is also the transpose). Results are canonical: indices
sorted within each row or column, so conversions are deterministic.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np


def expand_pointers(indptr: Any, xp: ModuleType) -> Any:
    """The major index of every stored entry: ``[0, 0, 1, 3, ...]`` from ``indptr``.

    >>> import numpy as np
    >>> expand_pointers(np.array([0, 2, 2, 3]), np).tolist()
    [0, 0, 2]
    """
    nnz = int(indptr[-1])
    positions = xp.arange(nnz, dtype=indptr.dtype)
    return (xp.searchsorted(indptr, positions, side="right") - 1).astype(indptr.dtype, copy=False)


def compress(sorted_major: Any, n_major: int, index_dtype: Any, xp: ModuleType) -> Any:
    """Pointers from sorted major indices: ``indptr[i+1] - indptr[i]`` entries have index i."""
    indptr = xp.zeros(n_major + 1, dtype=index_dtype)
    if sorted_major.size:
        xp.cumsum(xp.bincount(sorted_major, minlength=n_major), out=indptr[1:])
    return indptr


def swap_major(indptr: Any, indices: Any, data: Any, n_minor: int, xp: ModuleType) -> tuple[Any, Any, Any]:
    """CSR arrays of A -> CSR arrays of A^T (equally: CSR <-> CSC of the same matrix).

    Entries are ordered by (new major, new minor) through a sort on a unique int64 key, so the
    result does not depend on the sort's stability.
    """
    n_major = indptr.size - 1
    major = expand_pointers(indptr, xp).astype(np.int64)
    key = indices.astype(np.int64) * max(n_major, 1) + major
    order = xp.argsort(key)
    new_indices = major[order].astype(indptr.dtype)
    new_data = data[order]
    new_indptr = compress(indices[order], n_minor, indptr.dtype, xp)
    return new_indptr, new_indices, new_data

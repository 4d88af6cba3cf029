"""Pointers to rows: the major index of every stored entry of a compressed layout, and the length
of every line."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

from sparsegpu._kernels import KernelFile, blocks_for
from sparsegpu.primitives.scan import inclusive_scan

POINTERS_BLOCK = 256  # kernels/pointers.cu POINTERS_BLOCK
_INDEX_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))
# Index-only kernel: the value type is a placeholder (int32), the index type is I.
POINTER_KERNELS = KernelFile("pointers.cu", ["mark_row_starts<{I}>"], (np.int32,), _INDEX_DTYPES)
LENGTH_KERNELS = KernelFile("pointers.cu", ["line_lengths<{I}>"], (np.int32,), _INDEX_DTYPES)


def expand_pointers(indptr: Any, xp: ModuleType) -> Any:
    """The major index (row of a CSR, column of a CSC) of every stored entry.

    Parameters
    ----------
    indptr : ndarray
        Non-decreasing integer pointers: row i's entries are ``indptr[i]:indptr[i+1]``. Not
        checked here (callers pass a matrix's validated pointers).
    xp : module
        ``numpy`` or ``cupy``, the module of ``indptr``.

    Returns
    -------
    ndarray
        ``indptr[-1]`` entries in ``indptr``'s dtype: row i repeated ``indptr[i+1] - indptr[i]``
        times, after -1 for each position before ``indptr[0]``.

    Notes
    -----
    On the GPU a driver memset presets -1, each non-empty row writes its number at its first
    entry (kernels/pointers.cu ``mark_row_starts``) and an inclusive max-scan carries it over
    the row (exact; the output is written twice and read once).

    Examples
    --------
    >>> import numpy as np
    >>> expand_pointers(np.array([0, 2, 2, 3]), np).tolist()
    [0, 0, 2]
    """
    n_major = indptr.size - 1
    nnz = int(indptr[-1]) if indptr.size else 0
    if xp is np:
        first = int(indptr[0]) if indptr.size else 0
        rows = np.repeat(np.arange(n_major, dtype=indptr.dtype), np.diff(indptr))
        return np.concatenate([np.full(first, -1, dtype=indptr.dtype), rows]) if first else rows
    if nnz == 0:
        return xp.empty(0, dtype=indptr.dtype)
    work = xp.ascontiguousarray(indptr if indptr.dtype in _INDEX_DTYPES else indptr.astype(np.int64))
    marks = xp.empty(nnz, dtype=work.dtype)
    marks.data.memset_async(0xFF, marks.nbytes)  # -1 in any signed integer type; a driver memset
    POINTER_KERNELS.function("mark_row_starts<{I}>", np.int32, work.dtype)(
        (blocks_for(n_major, POINTERS_BLOCK),), (POINTERS_BLOCK,), (work, np.int64(n_major), np.int64(nnz), marks))
    return inclusive_scan(marks, op="max").astype(indptr.dtype, copy=False)


def line_lengths(indptr: Any, xp: ModuleType) -> Any:
    """Entries of each major line (row of a CSR, column of a CSC): ``indptr[1:] - indptr[:-1]``.

    Parameters
    ----------
    indptr : ndarray
        1-D integer pointers with at least one entry. Not checked here.
    xp : module
        ``numpy`` or ``cupy``, the module of ``indptr``.

    Returns
    -------
    ndarray
        ``indptr.size - 1`` lengths in ``indptr``'s dtype, the same values as the difference of
        the two slices.

    Notes
    -----
    On the GPU one kernel, a thread per line (kernels/pointers.cu ``line_lengths``), built
    ahead of time with the other kernels: no array expression for CuPy to compile on first use.

    Examples
    --------
    >>> import numpy as np
    >>> line_lengths(np.array([0, 2, 2, 5]), np).tolist()
    [2, 0, 3]
    """
    if xp is np or indptr.dtype not in _INDEX_DTYPES:
        return indptr[1:] - indptr[:-1]
    n_major = indptr.size - 1
    work = xp.ascontiguousarray(indptr)
    lengths = xp.empty(n_major, dtype=indptr.dtype)
    if n_major:
        LENGTH_KERNELS.function("line_lengths<{I}>", np.int32, work.dtype)(
            (blocks_for(n_major, POINTERS_BLOCK),), (POINTERS_BLOCK,), (work, np.int64(n_major), lengths))
    return lengths

"""The bytes model: the least memory traffic an operation must cause, so "effective GB/s" means
the same thing in asv and in ``python -m sparsegpu.bench``.

Effective bandwidth = :func:`spmv_bytes` (or the primitive's model) / measured seconds. The
model counts what any implementation must read or write at least once; it never counts a
format's padding, explicit zeros added by a format, permutation arrays, row-length tables or
a second read of x. A format that moves more than this (padding, rereading x from DRAM) shows
as a lower effective bandwidth: the overhead is charged, never credited.

>>> spmv_bytes(rows=3, cols=4, nnz=5)          # float64 values, int32 indices
132
>>> round(effective_gbps(spmv_bytes(9_000_000, 9_000_000, 44_988_000), 0.000321472), 1)  # H200 anchor
2239.2
"""

from __future__ import annotations

from typing import Any

import numpy as np


def _size(dtype: Any) -> int:
    return int(np.dtype(dtype).itemsize)


def spmv_bytes(rows: int, cols: int, nnz: int, value_dtype: Any = np.float64, index_dtype: Any = np.int32) -> int:
    """Least bytes ``y = A @ x`` moves for a ``rows x cols`` matrix of ``nnz`` stored entries:

    ``nnz * (value + index)`` (each entry's value and column index, read once)
    ``+ (rows + 1) * index`` (the row pointers)
    ``+ cols * value`` (x read once)
    ``+ rows * value`` (y written once).

    ``nnz`` is the matrix's own count of stored entries, never a format's padded count. With
    float64 values and int32 indices this is 12 B per nonzero + 4 B per row pointer + 8 B per
    x and y entry.

    >>> spmv_bytes(9_000_000, 9_000_000, 44_988_000)   # 2-D Poisson 3000^2, as in the anchors
    719856004
    >>> spmv_bytes(3, 4, 5, np.float32, np.int64)      # 5*12 + 4*8 + 4*4 + 3*4
    120
    """
    value, index = _size(value_dtype), _size(index_dtype)
    return int(nnz) * (value + index) + (int(rows) + 1) * index + int(cols) * value + int(rows) * value


def spmv_bytes_of(A: Any, value_dtype: Any = None) -> int:
    """:func:`spmv_bytes` for a matrix: a scipy sparse matrix (index type from its indices) or
    a sparsegpu matrix (its ``index_dtype``). ``value_dtype`` overrides the matrix's own (for a
    product run in another precision).

    >>> import scipy.sparse as sp
    >>> spmv_bytes_of(sp.csr_array(sp.eye(3)))       # 3*12 + 4*4 + 3*8 + 3*8
    100
    """
    index = A.index_dtype if hasattr(A, "index_dtype") else A.indices.dtype
    rows, cols = A.shape
    return spmv_bytes(rows, cols, A.nnz, A.dtype if value_dtype is None else value_dtype, index)


def copy_bytes(nbytes: int) -> int:
    """A device-to-device copy of ``nbytes`` reads and writes each byte once: ``2 * nbytes``."""
    return 2 * int(nbytes)


def scan_bytes(n: int, dtype: Any) -> int:
    """An inclusive or exclusive scan of ``n`` elements reads them and writes as many:
    ``2 * n * itemsize``."""
    return 2 * int(n) * _size(dtype)


def reduce_bytes(n: int, dtype: Any) -> int:
    """A reduction reads ``n`` elements once (the scalar written is not counted)."""
    return int(n) * _size(dtype)


def histogram_bytes(n: int, dtype: Any) -> int:
    """A histogram reads ``n`` values once (the bin counts written are not counted: for the
    256 bins the target names they are a few kB)."""
    return int(n) * _size(dtype)


def cg_iteration_bytes(rows: int, nnz: int, value_dtype: Any = np.float64, index_dtype: Any = np.int32) -> int:
    """Least bytes one unpreconditioned CG iteration on a square matrix moves with the fusion
    the solver targets count: one SpMV (``q = A p`` with the dot product ``p.q`` in its epilogue), one
    pass updating ``x += alpha p`` and ``r -= alpha q`` with ``r.r`` (reads x, p, r, q; writes
    x, r) and one pass ``p = r + beta p`` (reads r, p; writes p): the SpMV plus 9 vectors.

    >>> cg_iteration_bytes(10, 28) - spmv_bytes(10, 10, 28)    # 9 vectors of 10 float64
    720
    """
    return spmv_bytes(rows, rows, nnz, value_dtype, index_dtype) + 9 * int(rows) * _size(value_dtype)


def effective_gbps(nbytes: int, seconds: float) -> float:
    """``nbytes / seconds`` in GB/s (10^9 bytes per second); NaN when ``seconds`` is not
    positive."""
    return nbytes / seconds / 1e9 if seconds > 0 else float("nan")

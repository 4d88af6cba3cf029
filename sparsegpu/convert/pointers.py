"""Pointer arrays: compression of major indices and row-length statistics."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np

from sparsegpu import _validate, primitives
from sparsegpu._backend import is_device_array

#: Quantiles :func:`row_length_stats` reports.
QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9, 0.99)
#: Largest row length for which quantiles come from a length histogram (one bin per length);
#: longer rows fall back to sorting the lengths.
HISTOGRAM_QUANTILE_LIMIT = 1 << 22


def _xp_of(a: Any) -> ModuleType:
    if is_device_array(a):
        import cupy

        return cupy
    return np


def compress(sorted_major: Any, n_major: int, index_dtype: Any, xp: ModuleType) -> Any:
    """Pointers from major indices: ``indptr[i+1] - indptr[i]`` entries have index i.

    Parameters
    ----------
    sorted_major : ndarray
        Integer major indices in [0, n_major) (need not be sorted; not checked here).
    n_major : int
        Rows (of a CSR) or columns (of a CSC).
    index_dtype : dtype
        The pointers' dtype.
    xp : module
        ``numpy`` or ``cupy``, the module of ``sorted_major``.

    Returns
    -------
    ndarray
        ``n_major + 1`` pointers: a histogram of the indices (one bin per major index), then
        an inclusive scan.

    Examples
    --------
    >>> import numpy as np
    >>> compress(np.array([0, 0, 2]), 4, np.int32, np).tolist()
    [0, 2, 2, 3, 3]
    """
    indptr = xp.zeros(n_major + 1, dtype=index_dtype)
    if sorted_major.size and n_major:
        major = sorted_major if sorted_major.dtype in primitives.DTYPES else sorted_major.astype(np.int64)
        counts = primitives.histogram(major, n_major, range=(0, n_major))
        indptr[1:] = primitives.inclusive_scan(counts.astype(index_dtype, copy=False))
    return indptr


def row_lengths(indptr: Any) -> Any:
    """Entries per row, ``indptr[1:] - indptr[:-1]`` (on the GPU by a kernel built ahead of time,
    :func:`sparsegpu.primitives.line_lengths`).

    Parameters
    ----------
    indptr : ndarray
        1-D integer row pointers, NumPy or CuPy.

    Returns
    -------
    ndarray
        In ``indptr``'s dtype, on its backend.

    Raises
    ------
    ValueError
        ``indptr`` is not 1-D or is empty.
    TypeError
        ``indptr`` is not a NumPy or CuPy array of integers.

    Examples
    --------
    >>> import numpy as np
    >>> row_lengths(np.array([0, 2, 2, 5])).tolist()
    [2, 0, 3]
    """
    indptr = _validate.as_array("indptr", indptr)
    _validate.check_index_array("indptr", indptr)
    if indptr.size == 0:
        raise ValueError("indptr must have at least one entry")
    return primitives.line_lengths(indptr, _xp_of(indptr))


@dataclass(frozen=True)
class RowLengthStats:
    """Row-length statistics of a compressed layout, as plain Python numbers.

    ``std`` is the population standard deviation (``np.std``, ddof=0); ``quantiles`` maps
    each of :data:`QUANTILES` to its value with linear interpolation (``np.quantile``'s
    default). All zeros for a matrix with no rows.
    """

    rows: int
    nnz: int
    mean: float
    std: float
    min: int
    max: int
    empty_rows: int
    quantiles: dict[float, float] = field(default_factory=dict)


def row_length_stats(indptr: Any) -> RowLengthStats:
    """Row-length statistics of a compressed layout, computed on ``indptr``'s backend.

    Reductions give the extremes and moments; a histogram of the lengths (one bin per length)
    and its scan give the quantiles and the empty rows. Only a few scalars reach the host.

    Parameters
    ----------
    indptr : ndarray
        1-D integer row pointers, NumPy or CuPy.

    Returns
    -------
    RowLengthStats
        Plain Python numbers; all zeros for a matrix with no rows.

    Raises
    ------
    ValueError
        ``indptr`` is not 1-D, is empty or is not monotone.
    TypeError
        ``indptr`` is not a NumPy or CuPy array of integers.

    Examples
    --------
    >>> import numpy as np
    >>> s = row_length_stats(np.array([0, 2, 2, 5, 9]))
    >>> s.rows, s.nnz, s.min, s.max, s.empty_rows, s.quantiles[0.5]
    (4, 9, 0, 4, 1, 2.5)
    """
    lengths = row_lengths(indptr).astype(np.int64)
    if lengths.size and int(lengths.min()) < 0:
        raise ValueError("indptr is not monotone (row pointers go down somewhere)")
    rows = int(lengths.size)
    if rows == 0:
        return RowLengthStats(0, 0, 0.0, 0.0, 0, 0, 0, {q: 0.0 for q in QUANTILES})
    xp = _xp_of(lengths)
    nnz = int(primitives.reduce(lengths, "sum"))
    low, high = int(primitives.reduce(lengths, "min")), int(primitives.reduce(lengths, "max"))
    mean = nnz / rows
    deviation = lengths.astype(np.float64) - mean
    std = math.sqrt(float(primitives.reduce(deviation * deviation, "sum")) / rows)
    if high < HISTOGRAM_QUANTILE_LIMIT:
        # One bin per length 0..high; the scan of the counts is the distribution function, and
        # the k-th smallest length is the first one whose cumulative count exceeds k.
        counts = primitives.histogram(lengths, high + 1, range=(0, high + 1))
        empty_rows = int(counts[0])
        cumulative = primitives.inclusive_scan(counts)

        def order_statistic(k: Any) -> Any:
            return xp.searchsorted(cumulative, k, side="right")
    else:
        empty_rows = int(primitives.reduce((lengths == 0).astype(np.int64), "sum"))
        ordered = xp.sort(lengths)

        def order_statistic(k: Any) -> Any:
            return ordered[k]

    positions = np.array(QUANTILES) * (rows - 1)
    below = np.floor(positions).astype(np.int64)
    above = np.minimum(below + 1, rows - 1)
    ranks = xp.asarray(np.concatenate([below, above]))
    values = order_statistic(ranks)
    values = (values.get() if is_device_array(values) else values).astype(np.float64)
    lower, upper = values[: len(QUANTILES)], values[len(QUANTILES):]
    fraction = positions - below
    # np.quantile's linear interpolation, written as NumPy writes it (_lerp).
    interpolated = np.where(fraction >= 0.5, upper - (upper - lower) * (1 - fraction), lower + (upper - lower) * fraction)
    quantiles = {q: float(v) for q, v in zip(QUANTILES, interpolated)}
    return RowLengthStats(rows, nnz, mean, std, low, high, empty_rows, quantiles)

"""Layout changes on whichever backend holds the arrays (NumPy or CuPy), without a host trip.

These are the building blocks of format conversion, built on :mod:`sparsegpu.primitives`:

- :func:`expand_pointers`: one major index per stored entry (a max-scan of row starts);
- :func:`compress`: pointers from major indices (a histogram of the indices, then a scan);
- :func:`swap_major`: CSR <-> CSC of the same matrix (which is also the transpose);
- :func:`coo_to_csr` / :func:`csr_to_coo`: coordinates <-> compressed rows;
- :func:`row_lengths` / :func:`row_length_stats`: what the advisor reads off a pointer array.

Results are canonical (indices sorted within each row or column, duplicates summed in input
order), so conversions are deterministic: bitwise the same run to run.
"""

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


def expand_pointers(indptr: Any, xp: ModuleType) -> Any:
    """The major index of every stored entry: ``[0, 0, 2, ...]`` from ``indptr`` (positions
    before ``indptr[0]``, if any, get -1).

    On the GPU: each non-empty row writes its number at its first entry, and an inclusive
    max-scan carries it over the row (exact, one pass over the output).

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
    marks = xp.full(nnz + 1, -1, dtype=indptr.dtype)
    starts = indptr[:-1]
    # Empty rows share their start with the next row: they write to the spare slot nnz instead.
    marks[xp.where(indptr[1:] > starts, starts, nnz)] = xp.arange(n_major, dtype=indptr.dtype)
    return primitives.inclusive_scan(marks[:nnz], op="max")


def compress(sorted_major: Any, n_major: int, index_dtype: Any, xp: ModuleType) -> Any:
    """Pointers from major indices: ``indptr[i+1] - indptr[i]`` entries have index i.

    A histogram of the indices (one bin per major index) and an inclusive scan; the indices
    need not be sorted for the pointers to be right.

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


def swap_major(indptr: Any, indices: Any, data: Any, n_minor: int, xp: ModuleType) -> tuple[Any, Any, Any]:
    """CSR arrays of A -> CSR arrays of A^T (equally: CSR <-> CSC of the same matrix).

    Entries are ordered by (new major, new minor) through a sort on a unique int64 key, so the
    result does not depend on the sort's stability.

    >>> import numpy as np
    >>> p, i, d = swap_major(np.array([0, 2, 3]), np.array([0, 1, 1]), np.array([1., 2., 3.]), 2, np)
    >>> p.tolist(), i.tolist(), d.tolist()
    ([0, 1, 3], [0, 0, 1], [1.0, 2.0, 3.0])
    """
    n_major = indptr.size - 1
    major = expand_pointers(indptr, xp).astype(np.int64)
    key = indices.astype(np.int64) * max(n_major, 1) + major
    order = xp.argsort(key)
    new_indices = major[order].astype(indptr.dtype)
    new_data = data[order]
    new_indptr = compress(indices[order], n_minor, indptr.dtype, xp)
    return new_indptr, new_indices, new_data


def row_lengths(indptr: Any) -> Any:
    """Entries per row, ``indptr[1:] - indptr[:-1]``, in indptr's dtype, on its backend.

    >>> import numpy as np
    >>> row_lengths(np.array([0, 2, 2, 5])).tolist()
    [2, 0, 3]
    """
    _validate.check_index_array("indptr", indptr)
    if indptr.size == 0:
        raise ValueError("indptr must have at least one entry")
    return indptr[1:] - indptr[:-1]


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
    """Row-length statistics computed on indptr's backend with the primitives: reductions for
    the extremes and moments, a histogram of the lengths (one bin per length) and its scan for
    the quantiles and the empty rows. Only a few scalars come back to the host.

    >>> import numpy as np
    >>> s = row_length_stats(np.array([0, 2, 2, 5, 9]))
    >>> s.rows, s.nnz, s.min, s.max, s.empty_rows, s.quantiles[0.5]
    (4, 9, 0, 4, 1, 2.5)
    """
    lengths = row_lengths(indptr).astype(np.int64)
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


def _segment_sums(data: Any, offsets: Any) -> Any:
    """Sum of each run ``data[offsets[i]:offsets[i+1]]`` in order; complex parts separately."""
    if data.dtype.kind == "c":
        parts = data.view(data.real.dtype).reshape(-1, 2)
        real = primitives.segmented_reduce(parts[:, 0].copy(), offsets)
        imag = primitives.segmented_reduce(parts[:, 1].copy(), offsets)
        return (real + 1j * imag).astype(data.dtype, copy=False)
    return primitives.segmented_reduce(data, offsets)


def coo_to_csr(rows: Any, cols: Any, data: Any, shape: Any, *, index_dtype: Any = None) -> tuple[Any, Any, Any]:
    """CSR arrays ``(indptr, indices, data)`` of the matrix with entries ``(rows, cols, data)``.

    The input may be in any order and hold duplicates: entries are sorted by (row, column)
    (a stable sort on one 32- or 64-bit key) and duplicates are summed in their input order
    with a segmented reduction, so the result is canonical and bitwise reproducible. Input
    already strictly sorted skips the sort: the pointers come from a histogram and a scan of
    the rows, and ``cols``/``data`` are returned as they are (not copied; ``cols`` cast when
    its dtype differs). Explicit zeros are kept. Runs on the arrays' backend.
    ``index_dtype``: int32 or int64 (default: int32 when everything fits).

    >>> import numpy as np
    >>> p, i, d = coo_to_csr(np.array([1, 0, 1]), np.array([2, 1, 2]), np.array([1., 2., 4.]), (2, 3))
    >>> p.tolist(), i.tolist(), d.tolist()
    ([0, 1, 2], [1, 2], [2.0, 5.0])
    """
    m, n = _validate.shape2d(shape)
    xp = _xp_of(data)
    if is_device_array(data):
        rows, cols = xp.asarray(rows), xp.asarray(cols)
    _validate.check_index_array("rows", rows)
    _validate.check_index_array("cols", cols, rows.size)
    if data.ndim != 1 or data.size != rows.size:
        raise ValueError(f"data has shape {tuple(data.shape)}; expected ({rows.size},) like rows and cols")
    if data.dtype.kind != "c" and data.dtype not in primitives.DTYPES:
        raise TypeError(f"data has dtype {data.dtype}; supported: int32, int64, float32, float64, complex64, complex128")
    _validate.check_indices_in_range("rows", rows, m, "rows")
    _validate.check_indices_in_range("cols", cols, n, "columns")
    index_dt = _validate.index_dtype((m, n), rows.size, index_dtype)
    nnz = rows.size
    if nnz == 0:
        return xp.zeros(m + 1, dtype=index_dt), xp.empty(0, dtype=index_dt), data.copy()
    if not _strictly_sorted(rows, cols):
        # One sort key per entry, row-major; 32-bit when it fits (half the radix-sort passes).
        width = max(n, 1)
        key_dtype = np.dtype(np.uint32) if m * width <= 2**32 else np.dtype(np.int64)
        key = rows.astype(key_dtype) * key_dtype.type(width) + cols.astype(key_dtype)
        order = xp.argsort(key, kind="stable")  # CuPy sorts stably too: duplicates keep input order
        key, data = key[order], data[order]
        starts = xp.ones(nnz, dtype=bool)
        starts[1:] = key[1:] != key[:-1]
        first = xp.flatnonzero(starts)
        if first.size != nnz:
            offsets = xp.empty(first.size + 1, dtype=np.int64)
            offsets[:-1], offsets[-1] = first, nnz
            data = _segment_sums(data, offsets)
            key = key[first]
        rows, cols = key // key_dtype.type(width), key % key_dtype.type(width)
    indptr = compress(rows.astype(index_dt, copy=False), m, index_dt, xp)
    return indptr, cols.astype(index_dt, copy=False), data


def _strictly_sorted(rows: Any, cols: Any) -> bool:
    """Entries strictly increasing in (row, column): sorted, and no duplicates."""
    if rows.size < 2:
        return True
    r0, r1, c0, c1 = rows[:-1], rows[1:], cols[:-1], cols[1:]
    return not bool(((r1 < r0) | ((r1 == r0) & (c1 <= c0))).any())


def csr_to_coo(indptr: Any, indices: Any, data: Any) -> tuple[Any, Any, Any]:
    """COO arrays ``(rows, cols, data)`` of a CSR matrix, on its backend: ``rows`` by
    :func:`expand_pointers`; ``cols`` and ``data`` are the CSR's own arrays (not copied).

    >>> import numpy as np
    >>> r, c, d = csr_to_coo(np.array([0, 2, 2, 3]), np.array([0, 4, 1]), np.array([1., 2., 3.]))
    >>> r.tolist(), c.tolist()
    ([0, 0, 2], [0, 4, 1])
    """
    _validate.check_index_array("indptr", indptr)
    _validate.check_index_array("indices", indices)
    if indptr.size == 0:
        raise ValueError("indptr must have at least one entry")
    if data.ndim != 1 or data.size != indices.size:
        raise ValueError(f"data has shape {tuple(data.shape)}; expected ({indices.size},) like indices")
    if int(indptr[-1]) != indices.size:
        raise ValueError(f"indptr[-1] is {int(indptr[-1])} but there are {indices.size} stored entries")
    return expand_pointers(indptr, _xp_of(indptr)), indices, data

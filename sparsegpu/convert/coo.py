"""Coordinates <-> compressed rows: :func:`coo_to_csr`, :func:`csr_to_coo` and :func:`inspect_coo`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from sparsegpu import _validate, primitives
from sparsegpu._backend import is_device_array
from sparsegpu._kernels import blocks_for
from sparsegpu.convert.coo_sort import (
    _INDEX_DTYPES,
    BLOCKS_PER_SM,
    CONVERT_BLOCK,
    INSPECT_ITEMS,
    _index_kernel,
    _launch,
    _multiprocessors,
    _segment_sums,
    _sort_by_rows,
)
from sparsegpu.convert.pointers import _xp_of, compress
from sparsegpu.primitives import expand_pointers
from sparsegpu.reference import convert as reference


def coo_to_csr(rows: Any, cols: Any, data: Any, shape: Any, *, index_dtype: Any = None) -> tuple[Any, Any, Any]:
    """CSR arrays of the matrix with entries ``(rows, cols, data)``, on the arrays' backend.

    Parameters
    ----------
    rows, cols : ndarray
        1-D integer coordinates of one length, in any order, duplicates allowed.
    data : ndarray
        Values of the same length: int32, int64, float32, float64, complex64 or complex128.
        With CuPy ``data``, NumPy coordinates are uploaded.
    shape : (int, int)
        The matrix's shape.
    index_dtype : dtype, optional
        int32 or int64 for ``indptr`` and ``indices`` (default: int32 when everything fits).

    Returns
    -------
    (indptr, indices, data) : tuple of ndarray
        Canonical: entries ordered by (row, column), stably, duplicates summed in input order
        by a segmented reduction (bitwise reproducible), explicit zeros kept. Input already
        strictly sorted skips the sort: ``cols`` and ``data`` come back as they are (not
        copied; ``cols`` cast when its dtype differs).

    Raises
    ------
    ValueError
        A bad ``shape``; coordinates not 1-D or of different lengths; ``data`` of another
        length; an index out of range or negative; indices that do not fit ``index_dtype``.
    TypeError
        Arguments that are not arrays; non-integer coordinates; an unsupported ``data`` dtype
        or ``index_dtype``.

    Notes
    -----
    On the GPU: one inspection kernel reads rows and cols once for the range checks and the
    sortedness test (one small readback). Sorted input: pointers by a binary search per row.
    Unsorted input: (row, column, position) triples partitioned by 8 row bits a pass into
    contiguous row ranges (coalesced writes, no random scatter) until each range fits a block,
    then each range sorted by (row, column, position) in shared memory and written with its
    gathered data at its final place (rows longer than LOCAL_ROW: by chunks and merges);
    duplicates summed afterwards (see kernels/convert.cu). On the CPU: a stable NumPy sort on
    one 32- or 64-bit key.

    Examples
    --------
    >>> import numpy as np
    >>> p, i, d = coo_to_csr(np.array([1, 0, 1]), np.array([2, 1, 2]), np.array([1., 2., 4.]), (2, 3))
    >>> p.tolist(), i.tolist(), d.tolist()
    ([0, 1, 2], [1, 2], [2.0, 5.0])
    """
    m, n = _validate.shape2d(shape)
    rows, cols, data = (_validate.as_array(name, a) for name, a in (("rows", rows), ("cols", cols), ("data", data)))
    xp = _xp_of(data)
    if is_device_array(data):
        rows, cols = xp.asarray(rows), xp.asarray(cols)
    _validate.check_index_array("rows", rows)
    _validate.check_index_array("cols", cols, rows.size)
    if data.ndim != 1 or data.size != rows.size:
        raise ValueError(f"data has shape {tuple(data.shape)}; expected ({rows.size},) like rows and cols")
    if data.dtype.kind != "c" and data.dtype not in primitives.DTYPES:
        raise TypeError(f"data has dtype {data.dtype}; supported: int32, int64, float32, float64, complex64, complex128")
    if xp is not np:
        return _coo_to_csr_gpu(rows, cols, data, m, n, index_dtype)
    _validate.check_indices_in_range("rows", rows, m, "rows")
    _validate.check_indices_in_range("cols", cols, n, "columns")
    index_dt = _validate.index_dtype((m, n), rows.size, index_dtype)
    nnz = rows.size
    if nnz == 0:
        return xp.zeros(m + 1, dtype=index_dt), xp.empty(0, dtype=index_dt), data.copy()
    if not _strictly_sorted(rows, cols):
        width = max(n, 1)
        if m * width <= 2**63:
            # One sort key per entry, row-major; 32-bit when it fits (half the radix-sort passes).
            key_dtype = np.dtype(np.uint32) if m * width <= 2**32 else np.dtype(np.int64)
            key = rows.astype(key_dtype) * key_dtype.type(width) + cols.astype(key_dtype)
            order = xp.argsort(key, kind="stable")  # duplicates keep input order
            key = key[order]
            rows, cols = key // key_dtype.type(width), key % key_dtype.type(width)
        else:  # the key would overflow 64 bits: a stable sort of the (row, column) pairs
            order = np.lexsort((cols, rows))
            rows, cols = rows[order], cols[order]
        data = data[order]
        starts = xp.ones(nnz, dtype=bool)
        starts[1:] = (rows[1:] != rows[:-1]) | (cols[1:] != cols[:-1])
        first = xp.flatnonzero(starts)
        if first.size != nnz:
            offsets = xp.empty(first.size + 1, dtype=np.int64)
            offsets[:-1], offsets[-1] = first, nnz
            data = _segment_sums(data, offsets)
            rows, cols = rows[first], cols[first]
    indptr = compress(rows.astype(index_dt, copy=False), m, index_dt, xp)
    return indptr, cols.astype(index_dt, copy=False), data


def _strictly_sorted(rows: Any, cols: Any) -> bool:
    """Entries strictly increasing in (row, column): sorted, and no duplicates."""
    if rows.size < 2:
        return True
    r0, r1, c0, c1 = rows[:-1], rows[1:], cols[:-1], cols[1:]
    return not bool(((r1 < r0) | ((r1 == r0) & (c1 <= c0))).any())


@dataclass(frozen=True)
class CooFacts:
    """What one read of a COO's coordinates tells (:func:`inspect_coo`): index extremes (None
    when there are no entries) and the adjacent pairs not strictly increasing in (row, col)."""

    row_min: int | None
    row_max: int | None
    col_min: int | None
    col_max: int | None
    unsorted_pairs: int

    def check(self, m: int, n: int) -> None:
        """The errors of :func:`sparsegpu._validate.check_indices_in_range`, rows first."""
        for name, low, high, bound, axis in (("rows", self.row_min, self.row_max, m, "rows"),
                                             ("cols", self.col_min, self.col_max, n, "columns")):
            if low is not None:
                _validate.check_index_extremes(name, low, high, bound, axis)


def _as_signed_index(name: str, a: Any, bound: int, axis: str) -> Any:
    """``a`` as int32 or int64 for the kernels; uint64 values beyond int64 are out of range."""
    if a.dtype in _INDEX_DTYPES:
        return a
    if a.dtype == np.uint64 and a.size and int(a.max()) > np.iinfo(np.int64).max:
        raise ValueError(f"{name} holds index {int(a.max())}, out of range for {bound} {axis}")
    return a.astype(np.int64)


def inspect_csr_chunk(cols: Any, row_starts: Any, offset: int, words: Any) -> Any:
    """Accumulate into ``words`` (uint64[4], zeroed before the first chunk) what one read of a
    chunk of a CSR's column indices tells: its column extremes as order keys (max ~key, max
    key: :func:`sparsegpu.reference.convert.decode_key` reads them), the adjacent pairs in the
    chunk that do not strictly increase, and how many of those start a row: ``words[2] -
    words[3]`` pairs are out of order within a row. ``offset`` is the chunk's global position;
    ``row_starts`` the sorted global positions of the rows starting strictly inside it. For
    streamed uploads, chunk by chunk as they arrive: one kernel (on the current CUDA stream) or
    its NumPy reference. Pairs across chunks are the caller's to check.

    Parameters
    ----------
    cols, row_starts : int32 or int64 array of one library and dtype
    offset : int
    words : uint64 array of 4, same library

    Returns
    -------
    words

    Examples
    --------
    >>> import numpy as np
    >>> words = np.zeros(4, np.uint64)
    >>> _ = inspect_csr_chunk(np.array([4, 2, 5, 5]), np.array([11]), 10, words)
    >>> int(words[2] - words[3])  # 4 -> 2 starts a row at position 11; 5 -> 5 repeats within one
    1
    """
    if cols.dtype != row_starts.dtype or cols.dtype not in _INDEX_DTYPES:
        raise TypeError(f"cols and row_starts must both be int32 or both int64, got {cols.dtype} and {row_starts.dtype}")
    if cols.size == 0:
        return words
    if not is_device_array(cols):
        return reference.inspect_csr_chunk(cols, row_starts, offset, words)
    blocks = min(blocks_for(cols.size, CONVERT_BLOCK * INSPECT_ITEMS), BLOCKS_PER_SM * _multiprocessors())
    _index_kernel("inspect_csr_chunk", cols.dtype)(
        (blocks,), (CONVERT_BLOCK,),
        (cols, np.int64(cols.size), row_starts, np.int64(row_starts.size), np.int64(offset), words))
    return words


def inspect_coo(rows: Any, cols: Any) -> CooFacts:
    """Index extremes and sortedness of COO coordinates, in one pass.

    On the GPU one kernel and one readback of five words; on the CPU its NumPy reference.

    Parameters
    ----------
    rows, cols : ndarray
        1-D coordinates of one length, both int32 or both int64, both NumPy or both CuPy.

    Returns
    -------
    CooFacts
        The index extremes (None without entries) and the count of adjacent pairs not
        strictly increasing in (row, column).

    Raises
    ------
    ValueError
        Coordinates not 1-D or of different lengths.
    TypeError
        Coordinates that are not arrays, of different or unsupported dtypes, or of different
        array libraries.

    Examples
    --------
    >>> import numpy as np
    >>> inspect_coo(np.array([0, 0, 3]), np.array([5, 2, 1]))
    CooFacts(row_min=0, row_max=3, col_min=1, col_max=5, unsorted_pairs=1)
    """
    rows, cols = _validate.as_array("rows", rows), _validate.as_array("cols", cols)
    _validate.check_index_array("rows", rows)
    _validate.check_index_array("cols", cols, rows.size)
    if rows.dtype != cols.dtype or rows.dtype not in _INDEX_DTYPES:
        raise TypeError(f"rows and cols must both be int32 or both int64, got {rows.dtype} and {cols.dtype}")
    if _xp_of(rows) is not _xp_of(cols):
        raise TypeError("rows and cols must both be NumPy or both CuPy arrays")
    out_xp = _xp_of(rows)
    words = out_xp.zeros(5, dtype=np.uint64)
    if rows.size == 0:
        return CooFacts(None, None, None, None, 0)
    if out_xp is np:
        reference.inspect_coo(rows, cols, words)
    else:
        blocks = min(blocks_for(rows.size, CONVERT_BLOCK * INSPECT_ITEMS), BLOCKS_PER_SM * _multiprocessors())
        _index_kernel("inspect_coo", rows.dtype)((blocks,), (CONVERT_BLOCK,), (rows, cols, np.int64(rows.size), words))
        words = words.get()
    return CooFacts(*reference.decode_inspection(words))


def _coo_to_csr_gpu(rows: Any, cols: Any, data: Any, m: int, n: int, index_dtype: Any) -> tuple[Any, Any, Any]:
    import cupy

    nnz = rows.size
    if nnz:
        rows_k = cupy.ascontiguousarray(_as_signed_index("rows", rows, m, "rows"))
        cols_k = cupy.ascontiguousarray(_as_signed_index("cols", cols, n, "columns"))
        if rows_k.dtype != cols_k.dtype:
            rows_k, cols_k = rows_k.astype(np.int64), cols_k.astype(np.int64)
        facts = inspect_coo(rows_k, cols_k)
        facts.check(m, n)
    index_dt = _validate.index_dtype((m, n), nnz, index_dtype)
    if nnz == 0:
        return cupy.zeros(m + 1, dtype=index_dt), cupy.empty(0, dtype=index_dt), data.copy()
    rows_i, cols_i = rows_k.astype(index_dt, copy=False), cols_k.astype(index_dt, copy=False)
    if facts.unsorted_pairs == 0:
        indptr = cupy.empty(m + 1, dtype=index_dt)
        _launch("compress_sorted", index_dt, m + 1, (rows_i, np.int64(nnz), np.int64(m), indptr))
        return indptr, cols_i if cols.dtype != index_dt else cols, data
    return _sort_by_rows(rows_i, cols_i, cupy.ascontiguousarray(data), m)


def csr_to_coo(indptr: Any, indices: Any, data: Any) -> tuple[Any, Any, Any]:
    """COO arrays of a CSR matrix, on its backend.

    Parameters
    ----------
    indptr, indices, data : ndarray
        A CSR layout: ``indptr[0] == 0``, non-decreasing, ``indptr[-1] == len(indices)``.

    Returns
    -------
    (rows, cols, data) : tuple of ndarray
        ``rows`` by :func:`expand_pointers`; ``cols`` and ``data`` are the CSR's own arrays
        (not copied).

    Raises
    ------
    ValueError
        ``indptr`` empty or not a valid pointer array for ``indices``; arrays not 1-D or of
        mismatched lengths.
    TypeError
        Arguments that are not arrays, or non-integer ``indptr`` or ``indices``.

    Examples
    --------
    >>> import numpy as np
    >>> r, c, d = csr_to_coo(np.array([0, 2, 2, 3]), np.array([0, 4, 1]), np.array([1., 2., 3.]))
    >>> r.tolist(), c.tolist()
    ([0, 0, 2], [0, 4, 1])
    """
    indptr, indices, data = (_validate.as_array(name, a) for name, a in
                             (("indptr", indptr), ("indices", indices), ("data", data)))
    _validate.check_index_array("indptr", indptr)
    if indptr.size == 0:
        raise ValueError("indptr must have at least one entry")
    # The pointers are checked; the columns pass through unread.
    _validate.check_pointers(indptr, indices, data, indptr.size - 1, "rows")
    return expand_pointers(indptr, _xp_of(indptr)), indices, data

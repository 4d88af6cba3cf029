"""Layout changes on whichever backend holds the arrays (NumPy or CuPy), without a host trip.

These are the building blocks of format conversion, built on :mod:`sparsegpu.primitives`:

- :func:`expand_pointers`: one major index per stored entry (a max-scan of row starts);
- :func:`compress`: pointers from major indices (a histogram of the indices, then a scan);
- :func:`swap_major`: CSR <-> CSC of the same matrix (which is also the transpose);
- :func:`coo_to_csr` / :func:`csr_to_coo`: coordinates <-> compressed rows (on the GPU with
  the kernels of ``kernels/convert.cu``: one inspection pass, pointers by binary search for
  sorted input, a row-bucket sort for unsorted input);
- :func:`inspect_coo`: index extremes and sortedness of coordinates in one pass;
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
from sparsegpu._kernels import KernelFile, blocks_for
from sparsegpu.reference import convert as twin

#: Quantiles :func:`row_length_stats` reports.
QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9, 0.99)
#: Largest row length for which quantiles come from a length histogram (one bin per length);
#: longer rows fall back to sorting the lengths.
HISTOGRAM_QUANTILE_LIMIT = 1 << 22

CONVERT_BLOCK = 256  # kernels/convert.cu CONVERT_BLOCK
SHORT_ROW = twin.SHORT_ROW  # kernels/convert.cu SHORT_ROW: rows sorted by one warp
INSPECT_ITEMS = 4  # kernels/convert.cu INSPECT_ITEMS
#: Resident blocks per multiprocessor the grid-stride kernels are sized for.
BLOCKS_PER_SM = 8
_INDEX_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))
#: Value types emit_csr gathers (everything coo_to_csr accepts).
DATA_DTYPES = tuple(np.dtype(t) for t in (np.int32, np.int64, np.float32, np.float64, np.complex64, np.complex128))
# Index-only kernels: the value type is a placeholder (int32), the index type is I.
INDEX_KERNELS = KernelFile(
    "convert.cu",
    [f"{name}<{{I}}>" for name in ("inspect_coo", "mark_row_starts", "compress_sorted", "rank_in_row",
                                   "scatter_by_row", "sort_short_rows", "sort_long_chunks", "merge_runs",
                                   "scatter_long_rows", "final_pointers")],
    (np.int32,),
    _INDEX_DTYPES,
)
EMIT_KERNELS = KernelFile("convert.cu", ["emit_csr<{V}, {I}, false>", "emit_csr<{V}, {I}, true>"], DATA_DTYPES, _INDEX_DTYPES)


def _xp_of(a: Any) -> ModuleType:
    if is_device_array(a):
        import cupy

        return cupy
    return np


def _index_kernel(name: str, index_dtype: Any) -> Any:
    return INDEX_KERNELS.function(f"{name}<{{I}}>", np.int32, index_dtype)


def _multiprocessors() -> int:
    from sparsegpu._kernels import device_properties

    return device_properties()["multiprocessors"]


def _launch(name: str, index_dtype: Any, threads: int, args: tuple) -> None:
    """One thread per item (``threads`` of them) of an index kernel."""
    _index_kernel(name, index_dtype)((blocks_for(threads, CONVERT_BLOCK),), (CONVERT_BLOCK,), args)


def expand_pointers(indptr: Any, xp: ModuleType) -> Any:
    """The major index of every stored entry: ``[0, 0, 2, ...]`` from ``indptr`` (positions
    before ``indptr[0]``, if any, get -1).

    On the GPU: a driver memset presets -1, each non-empty row writes its number at its first
    entry (kernels/convert.cu mark_row_starts), and an inclusive max-scan carries it over the
    row (exact; the output is written twice and read once).

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
    _launch("mark_row_starts", work.dtype, n_major, (work, np.int64(n_major), np.int64(nnz), marks))
    return primitives.inclusive_scan(marks, op="max").astype(indptr.dtype, copy=False)


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

    The input may be in any order and hold duplicates: entries are ordered by (row, column),
    stably, and duplicates are summed in their input order with a segmented reduction, so the
    result is canonical and bitwise reproducible. Input already strictly sorted skips the sort:
    ``cols``/``data`` are returned as they are (not copied; ``cols`` cast when its dtype
    differs). Explicit zeros are kept. Runs on the arrays' backend.
    ``index_dtype``: int32 or int64 (default: int32 when everything fits).

    On the GPU: one inspection kernel reads rows and cols once for the range checks and the
    sortedness test (one small readback). Sorted input: pointers by a binary search per row.
    Unsorted input: entries bucketed by row (a counting sort: atomic slots, a scan, a scatter of
    (column, position) pairs), each row sorted by (column, position) (a warp per row; long rows
    by chunks and merges), then one gather of the data (see kernels/convert.cu). On the CPU: a
    stable NumPy sort on one 32- or 64-bit key.

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


def inspect_coo(rows: Any, cols: Any) -> CooFacts:
    """Index extremes and sortedness of COO coordinates (int32 or int64, same dtype, same
    length) in one pass: on the GPU one kernel and one readback of five words; on the CPU its
    NumPy twin.

    >>> import numpy as np
    >>> inspect_coo(np.array([0, 0, 3]), np.array([5, 2, 1]))
    CooFacts(row_min=0, row_max=3, col_min=1, col_max=5, unsorted_pairs=1)
    """
    out_xp = _xp_of(rows)
    words = out_xp.zeros(5, dtype=np.uint64)
    if rows.size == 0:
        return CooFacts(None, None, None, None, 0)
    if out_xp is np:
        twin.inspect_coo(rows, cols, words)
    else:
        blocks = min(blocks_for(rows.size, CONVERT_BLOCK * INSPECT_ITEMS), BLOCKS_PER_SM * _multiprocessors())
        _index_kernel("inspect_coo", rows.dtype)((blocks,), (CONVERT_BLOCK,), (rows, cols, np.int64(rows.size), words))
        words = words.get()
    return CooFacts(*twin.decode_inspection(words))


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


def _sort_by_rows(rows: Any, cols: Any, data: Any, m: int) -> tuple[Any, Any, Any]:
    """Unsorted, valid COO (rows and cols of the index dtype, contiguous) -> canonical CSR by row
    buckets (kernels/convert.cu), on the arrays' backend: kernels on the GPU, their twins on
    the CPU (the CPU's coo_to_csr sorts with NumPy instead; tests run this path on both)."""
    xp = _xp_of(rows)
    gpu = xp is not np
    nnz, index_dt = rows.size, rows.dtype
    n_, m_ = np.int64(nnz), np.int64(m)
    counts = xp.zeros(m, dtype=index_dt)
    slot = xp.empty(nnz, dtype=index_dt)
    if gpu:
        _launch("rank_in_row", index_dt, nnz, (rows, n_, counts, slot))
    else:
        twin.rank_in_row(rows, counts, slot)
    bucket_ptr = xp.empty(m + 1, dtype=index_dt)
    bucket_ptr[:1] = 0
    bucket_ptr[1:] = primitives.inclusive_scan(counts)
    entries = xp.empty((nnz, 2), dtype=index_dt)
    if gpu:
        _launch("scatter_by_row", index_dt, nnz, (rows, cols, slot, bucket_ptr, n_, entries))
    else:
        twin.scatter_by_row(rows, cols, slot, bucket_ptr, entries)
    del slot
    heads = xp.empty(nnz, dtype=index_dt)
    tallies = xp.zeros(2, dtype=np.uint64)
    if gpu:
        blocks = min(blocks_for(m * 32, CONVERT_BLOCK), BLOCKS_PER_SM * _multiprocessors())
        _index_kernel("sort_short_rows", index_dt)((blocks,), (CONVERT_BLOCK,), (bucket_ptr, m_, entries, heads, tallies))
    else:
        twin.sort_short_rows(bucket_ptr, entries, heads, tallies)
    long_rows, repeats = (int(t) for t in (tallies.get() if gpu else tallies))
    if long_rows:
        _sort_long_rows(bucket_ptr, counts, entries, heads, tallies)
        repeats = int(tallies[1])
    del counts
    distinct = nnz - repeats
    indices = xp.empty(distinct, dtype=index_dt)
    if repeats == 0:
        values = xp.empty(nnz, dtype=data.dtype)
        if gpu:
            EMIT_KERNELS.function("emit_csr<{V}, {I}, false>", data.dtype, index_dt)(
                (blocks_for(nnz, CONVERT_BLOCK),), (CONVERT_BLOCK,), (entries, data, heads, n_, indices, values, heads))
        else:
            twin.emit_csr(entries, data, None, indices, values, None)
        return bucket_ptr, indices, values
    heads_scan = primitives.inclusive_scan(heads)
    gathered = xp.empty(nnz, dtype=data.dtype)
    run_start = xp.empty(distinct + 1, dtype=index_dt)
    run_start[distinct:] = nnz
    indptr = xp.empty(m + 1, dtype=index_dt)
    if gpu:
        EMIT_KERNELS.function("emit_csr<{V}, {I}, true>", data.dtype, index_dt)(
            (blocks_for(nnz, CONVERT_BLOCK),), (CONVERT_BLOCK,),
            (entries, data, heads_scan, n_, indices, gathered, run_start))
        _launch("final_pointers", index_dt, m + 1, (bucket_ptr, heads_scan, m_, indptr))
    else:
        twin.emit_csr(entries, data, heads_scan, indices, gathered, run_start)
        twin.final_pointers(bucket_ptr, heads_scan, indptr)
    return indptr, indices, _segment_sums(gathered, run_start)


def _sort_long_rows(bucket_ptr: Any, counts: Any, entries: Any, heads: Any, tallies: Any) -> None:
    """Rows longer than SHORT_ROW: padded copies, chunks sorted by warps, runs merged pairwise
    until each row is one run, then copied back with their run heads (kernels/convert.cu)."""
    xp = _xp_of(entries)
    gpu = xp is not np
    index_dt = entries.dtype
    long_rows = xp.flatnonzero(counts > SHORT_ROW).astype(index_dt)
    chunks = (counts[long_rows] + (SHORT_ROW - 1)) // SHORT_ROW
    chunk_first = xp.empty(long_rows.size + 1, dtype=index_dt)
    chunk_first[:1] = 0
    chunk_first[1:] = primitives.inclusive_scan(chunks)
    n_chunks = int(chunk_first[-1])
    longest = int(chunks.max()) * SHORT_ROW
    chunk_owner = expand_pointers(chunk_first, xp)
    n_padded = n_chunks * SHORT_ROW
    work, spare = xp.empty((n_padded, 2), dtype=index_dt), xp.empty((n_padded, 2), dtype=index_dt)
    if gpu:
        _launch("sort_long_chunks", index_dt, n_chunks * 32,
                (bucket_ptr, long_rows, chunk_first, chunk_owner, np.int64(n_chunks), entries, work))
    else:
        twin.sort_long_chunks(bucket_ptr, long_rows, chunk_first, chunk_owner, entries, work)
    width = SHORT_ROW
    while width < longest:
        if gpu:
            _launch("merge_runs", index_dt, n_padded,
                    (chunk_first, chunk_owner, np.int64(n_padded), np.int64(width), work, spare))
        else:
            twin.merge_runs(chunk_first, chunk_owner, width, work, spare)
        work, spare, width = spare, work, 2 * width
    if gpu:
        _launch("scatter_long_rows", index_dt, n_padded,
                (bucket_ptr, long_rows, chunk_first, chunk_owner, np.int64(n_padded), work, entries, heads, tallies))
    else:
        twin.scatter_long_rows(bucket_ptr, long_rows, chunk_first, chunk_owner, work, entries, heads, tallies)


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

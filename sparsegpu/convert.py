"""Layout changes on whichever backend holds the arrays (NumPy or CuPy), without a host trip.

These are the building blocks of format conversion, built on :mod:`sparsegpu.primitives`:

- :func:`expand_pointers`: one major index per stored entry (a max-scan of row starts);
- :func:`compress`: pointers from major indices (a histogram of the indices, then a scan);
- :func:`swap_major`: CSR <-> CSC of the same matrix (which is also the transpose);
- :func:`coo_to_csr` / :func:`csr_to_coo`: coordinates <-> compressed rows (on the GPU with
  the kernels of ``kernels/convert.cu``: one inspection pass, pointers by binary search for
  sorted input, row-range partitions and a sort in shared memory for unsorted input);
- :func:`inspect_coo`: index extremes and sortedness of coordinates in one pass;
- :func:`row_lengths` / :func:`row_length_stats`: what the advisor reads off a pointer array.

Results are canonical (indices sorted within each row or column, duplicates summed in input
order), so conversions are deterministic: bitwise the same run to run.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np

from sparsegpu import _validate, primitives
from sparsegpu._backend import is_device_array
from sparsegpu._kernels import KernelFile, blocks_for, device_properties
from sparsegpu.primitives import expand_pointers  # noqa: F401  (part of this module's API)
from sparsegpu.reference import convert as reference

#: Quantiles :func:`row_length_stats` reports.
QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9, 0.99)
#: Largest row length for which quantiles come from a length histogram (one bin per length);
#: longer rows fall back to sorting the lengths.
HISTOGRAM_QUANTILE_LIMIT = 1 << 22

CONVERT_BLOCK = 256  # kernels/convert.cu CONVERT_BLOCK
SHORT_ROW = reference.SHORT_ROW  # kernels/convert.cu SHORT_ROW: long rows are sorted in chunks this long
DIGIT_BITS = reference.DIGIT_BITS  # kernels/convert.cu DIGIT_BITS: row bits a partition pass splits by
DIGITS = reference.DIGITS
PARTITION_TILE = reference.PARTITION_TILE  # kernels/convert.cu PARTITION_TILE
LOCAL_ROW = reference.LOCAL_ROW  # kernels/convert.cu LOCAL_ROW: longer rows take the long-row path
INSPECT_ITEMS = 4  # kernels/convert.cu INSPECT_ITEMS
#: Resident blocks per multiprocessor the grid-stride kernels are sized for.
BLOCKS_PER_SM = 8
#: Most blocks a grid-stride launch over tiles or segments asks for (more work loops).
MAX_GRID = 1 << 20
_INDEX_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))
#: Value types sort_segments and scatter_long_rows gather (everything coo_to_csr accepts).
DATA_DTYPES = tuple(np.dtype(t) for t in (np.int32, np.int64, np.float32, np.float64, np.complex64, np.complex128))
# Index-only kernels: the value type is a placeholder (int32), the index type is I.
INDEX_KERNELS = KernelFile(
    "convert.cu",
    [f"{name}<{{I}}>" for name in ("inspect_coo", "compress_sorted", "count_digits",
                                   "partition_tiles", "sort_long_chunks", "merge_runs")],
    (np.int32,),
    _INDEX_DTYPES,
)
GATHER_KERNELS = KernelFile("convert.cu", ["sort_segments<{V}, {I}>", "scatter_long_rows<{V}, {I}>"], DATA_DTYPES,
                            _INDEX_DTYPES)


def _xp_of(a: Any) -> ModuleType:
    if is_device_array(a):
        import cupy

        return cupy
    return np


def _index_kernel(name: str, index_dtype: Any) -> Any:
    return INDEX_KERNELS.function(f"{name}<{{I}}>", np.int32, index_dtype)


def _multiprocessors() -> int:

    return device_properties()["multiprocessors"]


def _launch(name: str, index_dtype: Any, threads: int, args: tuple) -> None:
    """One thread per item (``threads`` of them) of an index kernel."""
    _index_kernel(name, index_dtype)((blocks_for(threads, CONVERT_BLOCK),), (CONVERT_BLOCK,), args)


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
    indptr = _validate.as_array("indptr", indptr)
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
    Unsorted input: (row, column, position) triples partitioned by 8 row bits a pass into
    contiguous row ranges (coalesced writes, no random scatter) until each range fits a block,
    then each range sorted by (row, column, position) in shared memory and written with its
    gathered data at its final place (rows longer than LOCAL_ROW: by chunks and merges);
    duplicates summed afterwards (see kernels/convert.cu). On the CPU: a stable NumPy sort on
    one 32- or 64-bit key.

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


def inspect_coo(rows: Any, cols: Any) -> CooFacts:
    """Index extremes and sortedness of COO coordinates (int32 or int64, same dtype, same
    length) in one pass: on the GPU one kernel and one readback of five words; on the CPU its
    NumPy reference.

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


def _sort_by_rows(rows: Any, cols: Any, data: Any, m: int) -> tuple[Any, Any, Any]:
    """Unsorted, valid COO (rows and cols of the index dtype, contiguous) -> canonical CSR on the
    arrays' backend: kernels on the GPU, their NumPy references on the CPU (the CPU's coo_to_csr sorts with
    NumPy instead; tests run this path on both). See kernels/convert.cu.

    Bytes per entry for 10^8 random entries over 10^7 rows (int32, float64): two partition
    levels (rows 2^24 -> 2^16 -> 2^8 per range), each a count (4 read) and a move (level one
    reads 8 and writes 12, level two reads and writes 12, in runs of ~16 entries), then
    sort_segments (12 read, the data gathered at random: a 32-byte sector per 8-byte value,
    12 written in order): about 108 bytes, every write coalesced; the one random access left
    is the data gather (a random scatter would cost a sector read-modify-write per write)."""
    xp = _xp_of(rows)
    nnz, index_dt = rows.size, rows.dtype
    segments, buffers = _partition_rows(rows, cols, m)
    row_ptr = xp.empty(m + 1, dtype=index_dt)
    row_ptr[m:] = nnz
    indices = xp.empty(nnz, dtype=index_dt)
    values = xp.empty(nnz, dtype=data.dtype)
    long_entries = xp.empty((nnz, 2), dtype=index_dt)
    tallies = xp.zeros(2, dtype=np.uint64)
    if xp is np:
        reference.sort_segments(segments, buffers, data, row_ptr, indices, values, long_entries, tallies)
    else:
        n_segments = segments.shape[0]
        GATHER_KERNELS.function("sort_segments<{V}, {I}>", data.dtype, index_dt)(
            (min(n_segments, MAX_GRID),), (CONVERT_BLOCK,),
            (segments, np.int64(n_segments), buffers, np.int64(nnz), np.int64(m), data, row_ptr, indices, values,
             long_entries, tallies))
    del buffers
    long_rows, repeats = (int(t) for t in (tallies if xp is np else tallies.get()))
    if long_rows:
        _sort_long_rows(row_ptr, long_entries, data, indices, values, tallies)
        repeats = int(tallies[1])
    if repeats == 0:
        return row_ptr, indices, values
    return _sum_duplicates(row_ptr, indices, values)


def _partition_rows(rows: Any, cols: Any, m: int) -> tuple[Any, Any]:
    """(leaf segments, buffers): the entries (row, col, position) moved into contiguous row ranges
    by DIGIT_BITS row bits a level, until every range is a leaf: empty, or one row, or at most
    SEGMENT_ROWS rows holding at most segment_capacity entries (a longer row is then cut into
    pieces). Leaves are int64 rows (start, count, first_row, bits | buffer << 8 | flags), their
    entries in ``buffers[buffer]`` (rows, cols, positions) at [start, start + count)."""
    xp = _xp_of(rows)
    nnz, index_dt = rows.size, rows.dtype
    capacity = reference.segment_capacity(index_dt)
    buffers = xp.empty((2, 3, nnz), dtype=index_dt)
    parents = xp.asarray(np.array([[0, nnz, 0]], dtype=np.int64))
    # Children of the top range (2^bits >= m rows) span 2^shift rows: the top digit is the high byte.
    parent_bits = int(m - 1).bit_length()  # parents span 2^parent_bits rows
    shift = max(parent_bits - DIGIT_BITS, 0)
    source = (rows, cols, rows)  # positions implicit on the first level
    leaves = []
    for level in itertools.count():
        target = buffers[level % 2]
        counts, starts = _partition_level(source, level == 0, parents, shift, target)
        digit = xp.arange(DIGITS, dtype=np.int64)
        first_rows = parents[:, 2:3] + (digit << shift)
        info = xp.full(counts.shape, shift | (level % 2) << 8, dtype=np.int64)
        children = xp.stack([starts, counts, first_rows, info], axis=-1).reshape(-1, 4)
        # Children past the matrix, or past a parent narrower than DIGITS children (the last
        # levels), hold no rows.
        exists = ((first_rows < m) & (digit < 1 << (parent_bits - shift))).ravel()
        counts = counts.ravel()
        if 1 << shift > reference.SEGMENT_ROWS:  # too many rows for a leaf: split unless empty
            split = exists & (counts > 0)
        elif shift > 0:  # few enough rows: split only if too many entries
            split = exists & (counts > capacity)
        else:  # single rows: leaves, long or not
            split = xp.zeros_like(exists)
        leaves.append(children[exists & ~split])
        if not bool(split.any()):
            break
        parents = xp.ascontiguousarray(children[split][:, :3])
        source = (target[0], target[1], target[2])
        parent_bits, shift = shift, max(shift - DIGIT_BITS, 0)
    return _cut_long_rows(xp.concatenate(leaves), capacity), buffers


def _cut_long_rows(leaves: Any, capacity: int) -> Any:
    """Leaves of more than ``capacity`` entries (single rows) cut into LONG_PIECE leaves of at most
    ``capacity`` entries (the first one FIRST_PIECE), so that many blocks of sort_segments copy
    such a row, not one."""
    xp = _xp_of(leaves)
    count = leaves[:, 1]
    long = count > capacity
    if not bool(long.any()):
        return xp.ascontiguousarray(leaves)
    pieces = xp.where(long, (count + (capacity - 1)) // capacity, 1)
    piece_first = xp.zeros(pieces.size + 1, dtype=np.int64)
    piece_first[1:] = xp.cumsum(pieces)
    owner = expand_pointers(piece_first, xp)
    k = xp.arange(owner.size, dtype=np.int64) - piece_first[owner]
    long = long[owner]
    cut = leaves[owner]
    cut[:, 0] += k * capacity
    cut[:, 1] = xp.where(long, xp.minimum(capacity, cut[:, 1] - k * capacity), cut[:, 1])
    cut[:, 3] |= xp.where(long, reference.LONG_PIECE | xp.where(k == 0, reference.FIRST_PIECE, 0), 0)
    return cut


def _partition_level(source: tuple[Any, Any, Any], implicit_pos: bool, parents: Any, shift: int,
                     target: Any) -> tuple[Any, Any]:
    """One partition level: the entries of each parent (start, count, first_row) into its DIGITS
    children of 2^shift rows in ``target`` (rows, cols, positions). Returns the children's counts
    and starts, ``(P, DIGITS)`` int64."""
    xp = _xp_of(parents)
    n_parents = parents.shape[0]
    tiles = (parents[:, 1] + (PARTITION_TILE - 1)) // PARTITION_TILE
    tile_first = xp.zeros(n_parents + 1, dtype=np.int64)
    tile_first[1:] = xp.cumsum(tiles)
    n_tiles = int(tile_first[-1])
    counts = xp.zeros(n_parents * DIGITS, dtype=np.uint64)
    grid = (min(max(n_tiles, 1), MAX_GRID),)
    shift_ = np.int32(shift)
    if xp is np:
        reference.count_digits(source[0], parents, tile_first, shift, counts)
    else:
        _index_kernel("count_digits", source[0].dtype)(
            grid, (CONVERT_BLOCK,),
            (source[0], parents, tile_first, np.int64(n_parents), np.int64(n_tiles), shift_, counts))
    counts = counts.astype(np.int64).reshape(n_parents, DIGITS)
    starts = parents[:, :1] + xp.cumsum(counts, axis=1) - counts  # exact: integer sums
    cursors = starts.astype(np.uint64).ravel()
    if xp is np:
        reference.partition_tiles(*source, int(implicit_pos), parents, tile_first, shift, cursors, *target)
    else:
        _index_kernel("partition_tiles", source[0].dtype)(
            grid, (CONVERT_BLOCK,),
            (*source, np.int32(implicit_pos), parents, tile_first, np.int64(n_parents), np.int64(n_tiles), shift_,
             cursors, target[0], target[1], target[2]))
    return counts, starts


def _sort_long_rows(row_ptr: Any, entries: Any, data: Any, indices: Any, values: Any, tallies: Any) -> None:
    """Rows longer than LOCAL_ROW (their (col, pos) pairs in ``entries`` at their row_ptr): padded
    copies, chunks sorted by warps, runs merged pairwise until each row is one run, then written
    to indices and values (kernels/convert.cu)."""
    xp = _xp_of(entries)
    gpu = xp is not np
    index_dt = entries.dtype
    lengths = row_ptr[1:] - row_ptr[:-1]
    long_rows = xp.flatnonzero(lengths > LOCAL_ROW).astype(index_dt)
    chunks = (lengths[long_rows] + (SHORT_ROW - 1)) // SHORT_ROW
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
                (row_ptr, long_rows, chunk_first, chunk_owner, np.int64(n_chunks), entries, work))
    else:
        reference.sort_long_chunks(row_ptr, long_rows, chunk_first, chunk_owner, entries, work)
    width = SHORT_ROW
    while width < longest:
        if gpu:
            _launch("merge_runs", index_dt, n_padded,
                    (chunk_first, chunk_owner, np.int64(n_padded), np.int64(width), work, spare))
        else:
            reference.merge_runs(chunk_first, chunk_owner, width, work, spare)
        work, spare, width = spare, work, 2 * width
    if gpu:
        GATHER_KERNELS.function("scatter_long_rows<{V}, {I}>", data.dtype, index_dt)(
            (blocks_for(n_padded, CONVERT_BLOCK),), (CONVERT_BLOCK,),
            (row_ptr, long_rows, chunk_first, chunk_owner, np.int64(n_padded), work, data, indices, values, tallies))
    else:
        reference.scatter_long_rows(row_ptr, long_rows, chunk_first, chunk_owner, work, data, indices, values, tallies)


def _sum_duplicates(row_ptr: Any, indices: Any, values: Any) -> tuple[Any, Any, Any]:
    """Sorted CSR with repeated columns in rows -> each run of equal (row, column) summed in its
    order (input order: rows are sorted by (column, position)), with the pointers recounted."""
    xp = _xp_of(indices)
    nnz, index_dt = indices.size, indices.dtype
    heads = xp.ones(nnz, dtype=bool)
    heads[1:] = indices[1:] != indices[:-1]
    starts = row_ptr[:-1]
    heads[starts[starts < row_ptr[1:]]] = True  # every non-empty row starts a run
    run_start = xp.flatnonzero(heads)
    offsets = xp.empty(run_start.size + 1, dtype=index_dt)
    offsets[:-1], offsets[-1] = run_start, nnz
    indptr = xp.searchsorted(run_start, row_ptr.astype(np.int64)).astype(index_dt)  # runs before each row
    return indptr, indices[run_start], _segment_sums(values, offsets)


def csr_to_coo(indptr: Any, indices: Any, data: Any) -> tuple[Any, Any, Any]:
    """COO arrays ``(rows, cols, data)`` of a CSR matrix, on its backend: ``rows`` by
    :func:`expand_pointers`; ``cols`` and ``data`` are the CSR's own arrays (not copied).

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
    # Rows are checked; columns are passed through, so any bound holds them.
    _validate.check_compressed(indptr, indices, data, indptr.size - 1, np.iinfo(np.int64).max, "rows", "columns")
    return expand_pointers(indptr, _xp_of(indptr)), indices, data

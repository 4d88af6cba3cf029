"""The unsorted COO -> CSR path on the GPU (kernels/convert.cu): row-range partitions, a sort in
shared memory per range, long rows by chunks and merges, then duplicates summed in input order.

Each kernel launch has a NumPy reference (:mod:`sparsegpu.reference.convert`) that runs the same
steps on the CPU, so the tests can compare every stage.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from sparsegpu import primitives
from sparsegpu._kernels import KernelFile, blocks_for, device_properties
from sparsegpu.convert.pointers import _xp_of
from sparsegpu.primitives import expand_pointers
from sparsegpu.reference import convert as reference

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
    [f"{name}<{{I}}>" for name in ("inspect_coo", "inspect_csr_chunk", "compress_sorted", "count_digits",
                                   "partition_tiles", "sort_long_chunks", "merge_runs")],
    (np.int32,),
    _INDEX_DTYPES,
)
GATHER_KERNELS = KernelFile("convert.cu", ["sort_segments<{V}, {I}>", "scatter_long_rows<{V}, {I}>"], DATA_DTYPES,
                            _INDEX_DTYPES)


def _index_kernel(name: str, index_dtype: Any) -> Any:
    return INDEX_KERNELS.function(f"{name}<{{I}}>", np.int32, index_dtype)


def _multiprocessors() -> int:

    return device_properties()["multiprocessors"]


def _launch(name: str, index_dtype: Any, threads: int, args: tuple) -> None:
    """One thread per item (``threads`` of them) of an index kernel."""
    _index_kernel(name, index_dtype)((blocks_for(threads, CONVERT_BLOCK),), (CONVERT_BLOCK,), args)


def _segment_sums(data: Any, offsets: Any) -> Any:
    """Sum of each run ``data[offsets[i]:offsets[i+1]]`` in order; complex parts separately."""
    if data.dtype.kind == "c":
        parts = data.view(data.real.dtype).reshape(-1, 2)
        real = primitives.segmented_reduce(parts[:, 0].copy(), offsets)
        imag = primitives.segmented_reduce(parts[:, 1].copy(), offsets)
        return (real + 1j * imag).astype(data.dtype, copy=False)
    return primitives.segmented_reduce(data, offsets)


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

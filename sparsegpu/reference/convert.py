"""NumPy references of kernels/convert.cu: same arguments, same array layouts, outputs written in place
(and returned). GPU tests run each kernel and its reference on the same data and compare.

Layouts: partition parents are int64 ``(P, 3)`` rows (start, count, first_row), leaf segments
int64 ``(S, 4)`` rows (start, count, first_row, bits | buffer << 8 | flags); the partition buffers are
``(2, 3, nnz)`` of the index dtype (rows, cols, positions per buffer). A long-row ``entries``
array is ``(n, 2)`` of the index dtype, row k holding (column, original position) (the kernels'
``Entry<I>``); a long-row work array is the same, padded per row to a multiple of
:data:`SHORT_ROW` with :func:`padding` pairs. ``tallies`` is ``uint64[2]``: (rows longer than
LOCAL_ROW, entries repeating an earlier column of their row).

>>> import numpy as np
>>> out = np.zeros(5, dtype=np.uint64)
>>> decode_inspection(inspect_coo(np.array([0, 2, 1]), np.array([4, 1, 3]), out))
(0, 2, 1, 4, 1)
"""

from __future__ import annotations

import numpy as np

SHORT_ROW = 32  # kernels/convert.cu SHORT_ROW: long rows are sorted in chunks of a warp's width
DIGIT_BITS = 8  # kernels/convert.cu DIGIT_BITS: row bits a partition pass splits by
DIGITS = 1 << DIGIT_BITS
PARTITION_TILE = 4096  # kernels/convert.cu PARTITION_TILE
SEGMENT_ROWS = 256  # kernels/convert.cu SEGMENT_ROWS: most rows a leaf segment spans
LOCAL_ROW = 256  # kernels/convert.cu LOCAL_ROW: longer rows take the long-row path


LONG_PIECE, FIRST_PIECE = 1 << 9, 1 << 10  # kernels/convert.cu leaf flags


def segment_capacity(index_dtype: np.dtype) -> int:
    """kernels/convert.cu segment_capacity<I>: most entries a leaf sorted in shared memory holds."""
    return 4096 if np.dtype(index_dtype).itemsize == 4 else 2048
SIGN_BIT = np.uint64(1 << 63)


def order_key(values: np.ndarray) -> np.ndarray:
    """Signed values as uint64 ordered like them (the sign bit flipped)."""
    return values.astype(np.int64).view(np.uint64) ^ SIGN_BIT


def decode_key(key: int) -> int:
    """The signed value of an :func:`order_key`."""
    u = int(key) ^ (1 << 63)
    return u - (1 << 64) if u >= 1 << 63 else u


def decode_inspection(out: np.ndarray) -> tuple[int, int, int, int, int]:
    """(row min, row max, col min, col max, unsorted pairs) from ``inspect_coo``'s five words."""
    words = [int(w) for w in out]
    mask = (1 << 64) - 1
    return (decode_key(~words[0] & mask), decode_key(words[1]), decode_key(~words[2] & mask),
            decode_key(words[3]), words[4])


def inspect_coo(rows: np.ndarray, cols: np.ndarray, out: np.ndarray) -> np.ndarray:
    """out (uint64[5], zeroed) <- max ~key(row), max key(row), max ~key(col), max key(col), and
    the count of j >= 1 with (rows[j], cols[j]) <= (rows[j-1], cols[j-1])."""
    if rows.size:
        r, c = order_key(rows), order_key(cols)
        out[0] = max(int(out[0]), int((~r).max()))
        out[1] = max(int(out[1]), int(r.max()))
        out[2] = max(int(out[2]), int((~c).max()))
        out[3] = max(int(out[3]), int(c.max()))
        r0, r1, c0, c1 = rows[:-1], rows[1:], cols[:-1], cols[1:]
        out[4] += np.uint64(np.count_nonzero((r1 < r0) | ((r1 == r0) & (c1 <= c0))))
    return out


def inspect_csr_chunk(cols: np.ndarray, row_starts: np.ndarray, offset: int, out: np.ndarray) -> np.ndarray:
    """out (uint64[4], accumulated over chunks) <- max ~key(col), max key(col), the count of j >= 1
    with cols[j] <= cols[j-1], and the count of those at a row start (each distinct position of
    ``row_starts``, global, inside the chunk): a chunk of a CSR's column indices, as
    kernels/convert.cu inspects it. Pairs inside rows out of order: out[2] - out[3]."""
    if cols.size:
        keys = order_key(cols)
        out[0] = max(int(out[0]), int((~keys).max()))
        out[1] = max(int(out[1]), int(keys.max()))
        down = cols[1:] <= cols[:-1]
        out[2] += np.uint64(np.count_nonzero(down))
        starts = np.unique(np.asarray(row_starts, dtype=np.int64) - offset)
        starts = starts[(starts > 0) & (starts < cols.size)]
        out[3] += np.uint64(np.count_nonzero(down[starts - 1]))
    return out


def mark_row_starts(indptr: np.ndarray, marks: np.ndarray) -> np.ndarray:
    """marks[indptr[r]] = r for every non-empty row r whose start lies in [0, len(marks))."""
    starts, ends = indptr[:-1], indptr[1:]
    rows = np.flatnonzero((ends > starts) & (starts >= 0) & (starts < marks.size))
    marks[starts[rows]] = rows
    return marks


def compress_sorted(rows: np.ndarray, indptr: np.ndarray) -> np.ndarray:
    """indptr[r] = the first entry of sorted ``rows`` with row >= r, for r in [0, len(indptr))."""
    indptr[:] = np.searchsorted(rows, np.arange(indptr.size), side="left")
    return indptr


def _parent_entries(segments: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For segments given as rows (start, count, ...): the segment of every entry they hold and its
    position, segment by segment in position order."""
    start, count = segments[:, 0].astype(np.int64), segments[:, 1].astype(np.int64)
    owner = np.repeat(np.arange(segments.shape[0]), count)
    before = np.cumsum(count) - count
    return owner, np.repeat(start - before, count) + np.arange(owner.size)


def tile_first_of(parents: np.ndarray) -> np.ndarray:
    """The first PARTITION_TILE tile of each parent (and the tile count last): the kernels' tiling."""
    tiles = (parents[:, 1].astype(np.int64) + PARTITION_TILE - 1) // PARTITION_TILE
    return np.concatenate([[0], np.cumsum(tiles)]).astype(np.int64)


def _digits(rows: np.ndarray, first_row: np.ndarray, shift: int) -> np.ndarray:
    return (rows.astype(np.int64) - first_row) >> shift


def count_digits(rows: np.ndarray, parents: np.ndarray, tile_first: np.ndarray, shift: int,
                 counts: np.ndarray) -> np.ndarray:
    """counts[p * DIGITS + d] += entries of parent p = (start, count, first_row) whose row lies in
    [first_row + d 2^shift, first_row + (d + 1) 2^shift). ``tile_first``: the kernel's tiling
    (:func:`tile_first_of`), checked."""
    assert np.array_equal(tile_first, tile_first_of(parents)), "tile_first does not match the parents"
    owner, where = _parent_entries(parents)
    digit = _digits(rows[where], parents[owner, 2], shift)
    counts += np.bincount(owner * DIGITS + digit, minlength=counts.size).astype(counts.dtype)
    return counts


def partition_tiles(src_rows: np.ndarray, src_cols: np.ndarray, src_pos: np.ndarray, implicit_pos: int,
                    parents: np.ndarray, tile_first: np.ndarray, shift: int, cursors: np.ndarray,
                    dst_rows: np.ndarray, dst_cols: np.ndarray, dst_pos: np.ndarray) -> tuple[np.ndarray, ...]:
    """Every entry (row, col, pos) of every parent goes to dst at its child's cursor, which advances
    (cursors[p * DIGITS + d] start at the children's starts). pos is src_pos[j], or j itself when
    ``implicit_pos``. This reference keeps input order inside a child; the kernel's order inside a child
    depends on timing (tests compare children as sets)."""
    assert np.array_equal(tile_first, tile_first_of(parents)), "tile_first does not match the parents"
    owner, where = _parent_entries(parents)
    key = owner * DIGITS + _digits(src_rows[where], parents[owner, 2], shift)
    order = np.argsort(key, kind="stable")
    sorted_key = key[order]
    rank = np.arange(key.size) - np.searchsorted(sorted_key, sorted_key, side="left")
    dest = cursors[sorted_key].astype(np.int64) + rank
    src = where[order]
    dst_rows[dest] = src_rows[src]
    dst_cols[dest] = src_cols[src]
    dst_pos[dest] = src if implicit_pos else src_pos[src]
    cursors += np.bincount(key, minlength=cursors.size).astype(cursors.dtype)
    return dst_rows, dst_cols, dst_pos, cursors


def sort_segments(segments: np.ndarray, buffers: np.ndarray, data: np.ndarray, row_ptr: np.ndarray,
                  indices: np.ndarray, values: np.ndarray, long_entries: np.ndarray,
                  tallies: np.ndarray) -> tuple[np.ndarray, ...]:
    """Leaf segments (start, count, first_row, bits | buffer << 8 | flags), entries in
    ``buffers[buffer] = (rows, cols, positions)``: row_ptr[r] (its first position) for every row
    r < len(row_ptr) - 1 of every segment; LONG_PIECE segments (pieces of one long row; the
    FIRST_PIECE alone covers the row and counts it in tallies[0]) give their (col, pos) pairs to
    long_entries; in other segments entries are ordered by (row, col, pos), and rows of at most
    LOCAL_ROW entries give indices = col and values = data[pos] at their positions (tallies[1] +=
    entries repeating an earlier column of their row), longer rows give (col, pos) pairs in
    long_entries instead (tallies[0] += such rows). The kernel leaves long_entries in any order
    within a row."""
    n_rows = row_ptr.size - 1
    start, count, first_row, info = (segments[:, k].astype(np.int64) for k in range(4))
    bits, which = info & 255, (info >> 8) & 1
    piece, first_piece = (info & LONG_PIECE) != 0, (info & FIRST_PIECE) != 0
    owner, where = _parent_entries(segments)
    rows = buffers[which[owner], 0, where].astype(np.int64)
    cols, pos = buffers[which[owner], 1, where], buffers[which[owner], 2, where]
    order = np.lexsort((pos, cols, rows, owner))
    owner, rows, cols, pos = owner[order], rows[order], cols[order], pos[order]
    out = start[owner] + np.arange(owner.size) - np.searchsorted(owner, owner, side="left")
    # (segment, local row) keys, sorted; a segment with entries spans at most SEGMENT_ROWS rows.
    entry_key = owner * SEGMENT_ROWS + (rows - first_row[owner])
    span = np.maximum(np.minimum(first_row + (np.int64(1) << bits), n_rows) - first_row, 0)
    span[piece & ~first_piece] = 0  # a long row's other pieces cover no row
    row_owner = np.repeat(np.arange(segments.shape[0]), span)
    row = np.repeat(first_row - (np.cumsum(span) - span), span) + np.arange(row_owner.size)
    local = np.minimum(row - first_row[row_owner], SEGMENT_ROWS - 1)  # empty segments: any row counts 0
    below = (np.searchsorted(entry_key, row_owner * SEGMENT_ROWS + local, side="left")
             - np.searchsorted(entry_key, row_owner * SEGMENT_ROWS, side="left"))
    row_ptr[row] = start[row_owner] + below
    length = np.searchsorted(entry_key, entry_key, side="right") - np.searchsorted(entry_key, entry_key, side="left")
    long = piece[owner] | (length > LOCAL_ROW)
    long_entries[out[long], 0], long_entries[out[long], 1] = cols[long], pos[long]
    row_head = np.ones(owner.size, dtype=bool)
    row_head[1:] = entry_key[1:] != entry_key[:-1]
    tallies[0] += np.uint64(np.count_nonzero(long & row_head & ~piece[owner]) + np.count_nonzero(first_piece))
    short = ~long
    indices[out[short]] = cols[short]
    values[out[short]] = data[pos[short]]
    repeat = np.zeros(owner.size, dtype=bool)
    repeat[1:] = ~row_head[1:] & (cols[1:] == cols[:-1])
    tallies[1] += np.uint64(np.count_nonzero(repeat & short))
    return row_ptr, indices, values, long_entries, tallies


def padding(dtype: np.dtype) -> np.ndarray:
    """The pair that pads long rows: the largest value of the index type, twice."""
    top = np.iinfo(dtype).max
    return np.array([top, top], dtype=dtype)


def _sort_groups(pairs: np.ndarray, group: np.ndarray) -> np.ndarray:
    """Positions that sort ``pairs`` by (group, column, position), stably."""
    return np.lexsort((pairs[:, 1], pairs[:, 0], group))


def _run_heads(pairs: np.ndarray, row_start: np.ndarray) -> np.ndarray:
    """1 where an entry starts its row or changes column, else 0."""
    first = row_start.copy()
    first[1:] |= pairs[1:, 0] != pairs[:-1, 0]
    if first.size:
        first[0] = True
    return first


def _long_layout(row_ptr: np.ndarray, long_rows: np.ndarray, chunk_first: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per padded entry: its long row k, its index in the row, the row's length and start."""
    n_padded = int(chunk_first[-1]) * SHORT_ROW
    owner = np.repeat(np.arange(long_rows.size), np.diff(chunk_first).astype(np.int64) * SHORT_ROW)
    index = np.arange(n_padded) - chunk_first[owner].astype(np.int64) * SHORT_ROW
    start = row_ptr[long_rows].astype(np.int64)
    length = row_ptr[long_rows + 1].astype(np.int64) - start
    return owner, index, length[owner], start[owner]


def sort_long_chunks(row_ptr: np.ndarray, long_rows: np.ndarray, chunk_first: np.ndarray,
                     chunk_owner: np.ndarray, entries: np.ndarray, work: np.ndarray) -> np.ndarray:
    """work <- each long row's entries, padded, every aligned SHORT_ROW chunk sorted."""
    owner, index, length, start = _long_layout(row_ptr, long_rows, chunk_first)
    assert np.array_equal(owner[::SHORT_ROW], chunk_owner), "chunk_owner does not match chunk_first"
    valid = index < length
    work[:] = padding(work.dtype)
    work[valid] = entries[(start + index)[valid]]
    chunk = np.arange(work.shape[0]) // SHORT_ROW
    work[:] = work[_sort_groups(work, chunk)]
    return work


def merge_runs(chunk_first: np.ndarray, chunk_owner: np.ndarray, width: int, src: np.ndarray,
               dst: np.ndarray) -> np.ndarray:
    """dst <- src with each long row's pairs of sorted runs of ``width`` merged."""
    owner = np.repeat(chunk_owner.astype(np.int64), SHORT_ROW)
    index = np.arange(src.shape[0]) - chunk_first[owner].astype(np.int64) * SHORT_ROW
    group = owner * (1 << 40) + index // (2 * width)  # (row, merged run), ordered
    dst[:] = src[_sort_groups(src, group)]
    return dst


def scatter_long_rows(row_ptr: np.ndarray, long_rows: np.ndarray, chunk_first: np.ndarray,
                      chunk_owner: np.ndarray, work: np.ndarray, data: np.ndarray, indices: np.ndarray,
                      values: np.ndarray, tallies: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The sorted long rows (padding dropped) at their row_ptr: indices = col, values = data[pos];
    tallies[1] += entries repeating the column of their predecessor in the row."""
    owner, index, length, start = _long_layout(row_ptr, long_rows, chunk_first)
    valid = index < length
    pairs = work[valid]
    first = _run_heads(pairs, index[valid] == 0)
    where = (start + index)[valid]
    indices[where] = pairs[:, 0]
    values[where] = data[pairs[:, 1]]
    tallies[1] += np.uint64(np.count_nonzero(~first))
    return indices, values, tallies

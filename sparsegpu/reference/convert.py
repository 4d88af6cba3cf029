"""NumPy twins of kernels/convert.cu: same arguments, same array layouts, outputs written in place
(and returned). GPU tests run each kernel and its twin on the same data and compare.

Layouts: an ``entries`` array of a sorting step is ``(n, 2)`` of the index dtype, row k holding
(column, original position) (the kernels' ``Entry<I>``); a long-row work array is the same,
padded per row to a multiple of :data:`SHORT_ROW` with :func:`padding` pairs. ``tallies`` is
``uint64[2]``: (rows longer than SHORT_ROW, entries repeating an earlier column of their row).

>>> import numpy as np
>>> out = np.zeros(5, dtype=np.uint64)
>>> decode_inspection(inspect_coo(np.array([0, 2, 1]), np.array([4, 1, 3]), out))
(0, 2, 1, 4, 1)
"""

from __future__ import annotations

import numpy as np

SHORT_ROW = 32  # kernels/convert.cu SHORT_ROW
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


def rank_in_row(rows: np.ndarray, counts: np.ndarray, slot: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """counts[r] += entries of row r; slot[j] = j's place among its row's entries. The kernel's
    atomics give the places in any order; this twin gives them in input order."""
    order = np.argsort(rows, kind="stable")
    sorted_rows = rows[order]
    first = np.searchsorted(sorted_rows, sorted_rows, side="left")
    slot[order] = (np.arange(rows.size) - first).astype(slot.dtype) + counts[sorted_rows]
    counts += np.bincount(rows, minlength=counts.size).astype(counts.dtype)
    return counts, slot


def scatter_by_row(rows: np.ndarray, cols: np.ndarray, slot: np.ndarray, bucket_ptr: np.ndarray,
                   entries: np.ndarray) -> np.ndarray:
    """entries[bucket_ptr[rows[j]] + slot[j]] = (cols[j], j)."""
    place = bucket_ptr[rows].astype(np.int64) + slot
    entries[place, 0] = cols
    entries[place, 1] = np.arange(rows.size)
    return entries


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


def sort_short_rows(bucket_ptr: np.ndarray, entries: np.ndarray, heads: np.ndarray,
                    tallies: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows of 1..SHORT_ROW entries sorted by (column, position) in place, with their run
    heads; longer rows left alone and counted in tallies[0]; repeated columns in tallies[1]."""
    lengths = np.diff(bucket_ptr).astype(np.int64)
    short = (lengths >= 1) & (lengths <= SHORT_ROW)
    tallies[0] += np.uint64(np.count_nonzero(lengths > SHORT_ROW))
    rows = np.flatnonzero(short)
    row_lengths = lengths[rows]
    owner = np.repeat(rows, row_lengths)
    first_of_row = np.cumsum(row_lengths) - row_lengths
    where = np.repeat(bucket_ptr[rows].astype(np.int64) - first_of_row, row_lengths) + np.arange(owner.size)
    pairs = entries[where]
    order = _sort_groups(pairs, owner)
    pairs = pairs[order]
    starts = np.zeros(where.size, dtype=bool)
    starts[np.searchsorted(owner, rows)] = True
    first = _run_heads(pairs, starts)
    entries[where] = pairs
    heads[where] = first
    tallies[1] += np.uint64(np.count_nonzero(~first))
    return entries, heads, tallies


def _long_layout(bucket_ptr: np.ndarray, long_rows: np.ndarray, chunk_first: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per padded entry: its long row k, its index in the row, the row's length and start."""
    n_padded = int(chunk_first[-1]) * SHORT_ROW
    owner = np.repeat(np.arange(long_rows.size), np.diff(chunk_first).astype(np.int64) * SHORT_ROW)
    index = np.arange(n_padded) - chunk_first[owner].astype(np.int64) * SHORT_ROW
    start = bucket_ptr[long_rows].astype(np.int64)
    length = bucket_ptr[long_rows + 1].astype(np.int64) - start
    return owner, index, length[owner], start[owner]


def sort_long_chunks(bucket_ptr: np.ndarray, long_rows: np.ndarray, chunk_first: np.ndarray,
                     chunk_owner: np.ndarray, entries: np.ndarray, work: np.ndarray) -> np.ndarray:
    """work <- each long row's entries, padded, every aligned SHORT_ROW chunk sorted."""
    owner, index, length, start = _long_layout(bucket_ptr, long_rows, chunk_first)
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


def scatter_long_rows(bucket_ptr: np.ndarray, long_rows: np.ndarray, chunk_first: np.ndarray,
                      chunk_owner: np.ndarray, work: np.ndarray, entries: np.ndarray, heads: np.ndarray,
                      tallies: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The sorted long rows back into entries (padding dropped), with run heads."""
    owner, index, length, start = _long_layout(bucket_ptr, long_rows, chunk_first)
    valid = index < length
    pairs = work[valid]
    first = _run_heads(pairs, index[valid] == 0)
    where = (start + index)[valid]
    entries[where] = pairs
    heads[where] = first
    tallies[1] += np.uint64(np.count_nonzero(~first))
    return entries, heads, tallies


def final_pointers(bucket_ptr: np.ndarray, heads_scan: np.ndarray, indptr: np.ndarray) -> np.ndarray:
    """indptr[r] = heads_scan[bucket_ptr[r] - 1] (0 where bucket_ptr[r] is 0)."""
    b = bucket_ptr.astype(np.int64)
    indptr[:] = np.where(b == 0, 0, heads_scan[np.maximum(b - 1, 0)] if heads_scan.size else 0)
    return indptr


def emit_csr(entries: np.ndarray, data: np.ndarray, heads_scan: np.ndarray | None, indices: np.ndarray,
             values: np.ndarray, run_start: np.ndarray | None) -> tuple[np.ndarray, ...]:
    """values[j] = data[entries[j, 1]]; without duplicates (heads_scan None) indices[j] =
    entries[j, 0]; with them, each run's first entry j writes its column and j at slot
    heads_scan[j] - 1."""
    values[:] = data[entries[:, 1]]
    if heads_scan is None:
        indices[:] = entries[:, 0]
        return indices, values
    previous = np.concatenate([[0], heads_scan[:-1]]).astype(heads_scan.dtype)
    head = np.flatnonzero(heads_scan != previous)
    indices[heads_scan[head] - 1] = entries[head, 0]
    run_start[heads_scan[head] - 1] = head
    return indices, values, run_start

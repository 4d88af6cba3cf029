"""Twins of kernels/matrix_stats.cu: the advisor's statistics buffer, computed with NumPy.

Both kernels write one buffer of unsigned 64-bit words (the layout constants below match the
``.cu`` file's): ``[0:5]`` where the entries sit relative to the diagonal (:func:`csr_structure`),
``[5]`` the summed widths of slices of :data:`SELL_SLICE` rows, ``[6]`` the number of rows of
length at least :data:`ROW_STATS_BINS`, ``[7:7 + ROW_STATS_BINS]`` the histogram of the
shorter rows' lengths, then the longer rows' lengths (:func:`csr_row_stats`). The kernel
appends those in no particular order, the twin in row order; read them as a multiset.

``csr_row_stats`` also fills ``tile_rows`` (a separate array, never read back): the row holding
the first entry of each tile of :func:`stats_tile` entries, where ``csr_structure`` starts its
tile's search (:func:`tile_first_rows`).
"""

from __future__ import annotations

import numpy as np

#: Bins of the row-length histogram kept per block in shared memory (kernels/matrix_stats.cu).
ROW_STATS_BINS = 4096
#: Rows per SELL slice whose widths the row kernel sums: one warp.
SELL_SLICE = 32
OUT_SLICE_WIDTHS, OUT_OVERFLOW_ROWS, OUT_BINS = 5, 6, 7
OUT_OVERFLOW = OUT_BINS + ROW_STATS_BINS
#: Threads per block of csr_structure; a thread takes 64 bytes of consecutive column indices.
STATS_BLOCK = 256


def stats_tile(index_itemsize: int) -> int:
    """Entries per tile of ``csr_structure`` (kernels/matrix_stats.cu ``STATS_TILE<I>``)."""
    return STATS_BLOCK * (64 // index_itemsize)


def tile_first_rows(indptr: np.ndarray, nnz: int, tile: int) -> np.ndarray:
    """The row holding entry ``t * tile`` for every tile ``t`` of ``nnz`` entries (int64).

    >>> tile_first_rows(np.array([0, 3, 3, 9]), 9, 4).tolist()
    [0, 2, 2]
    """
    firsts = np.arange(0, nnz, tile, dtype=np.int64)
    return np.searchsorted(indptr, firsts, side="right").astype(np.int64) - 1


def overflow_capacity(nnz: int) -> int:
    """Room in the buffer for rows of length ``>= ROW_STATS_BINS``: there are at most
    ``nnz // ROW_STATS_BINS`` of them."""
    return nnz // ROW_STATS_BINS + 1


def csr_structure(indptr: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """[entries below the diagonal, on it, above it, sum of |i - j|, max |i - j|] as int64.

    >>> csr_structure(np.array([0, 2, 3]), np.array([0, 1, 0])).tolist()
    [1, 1, 1, 2, 1]
    """
    rows = np.repeat(np.arange(indptr.size - 1, dtype=np.int64), np.diff(indptr))
    offset = indices.astype(np.int64) - rows
    distance = np.abs(offset)
    return np.array([(offset < 0).sum(), (offset == 0).sum(), (offset > 0).sum(), distance.sum(),
                     distance.max() if distance.size else 0], dtype=np.int64)


def csr_row_stats(indptr: np.ndarray, n_rows: int, capacity: int, out: np.ndarray, tile_rows: np.ndarray) -> None:
    """Add the row-length part of the buffer to ``out`` (uint64, its words 5 .. 7 +
    ROW_STATS_BINS zero on entry), as kernels/matrix_stats.cu ``csr_row_stats`` does: slice
    widths, the histogram of lengths below :data:`ROW_STATS_BINS`, and the longer rows' lengths
    (at most ``capacity`` of them stored; ``out[6]`` counts them all). Also writes
    ``tile_rows`` (int64, one per tile of :func:`stats_tile` entries for indptr's item size).

    >>> out, tile_rows = np.zeros(OUT_OVERFLOW + 2, np.uint64), np.zeros(2, np.int64)
    >>> csr_row_stats(np.array([0, 2, 2, 5000], np.int32), 3, 2, out, tile_rows)
    >>> out[OUT_SLICE_WIDTHS], out[OUT_OVERFLOW_ROWS], out[OUT_BINS:OUT_BINS + 3].tolist(), out[OUT_OVERFLOW]
    (np.uint64(4998), np.uint64(1), [1, 0, 1], np.uint64(4998))
    >>> tile_rows.tolist()  # int32 tiles of 4096 entries: entries 0 and 4096 lie in rows 0 and 2
    [0, 2]
    """
    lengths = np.diff(indptr[: n_rows + 1]).astype(np.int64)
    whole = n_rows - n_rows % SELL_SLICE
    widths = int(lengths[:whole].reshape(-1, SELL_SLICE).max(axis=1).sum()) if whole else 0
    if whole < n_rows:
        widths += int(lengths[whole:].max())
    out[OUT_SLICE_WIDTHS] += np.uint64(widths)
    # Compared as unsigned like the kernel: a negative length (corrupt indptr) is never binned.
    binned = lengths.view(np.uint64) < ROW_STATS_BINS
    out[OUT_BINS:OUT_OVERFLOW] += np.bincount(lengths[binned], minlength=ROW_STATS_BINS).astype(np.uint64)
    longer = lengths[~binned].view(np.uint64)
    first = int(out[OUT_OVERFLOW_ROWS])
    stored = max(min(longer.size, capacity - first), 0)
    out[OUT_OVERFLOW + first : OUT_OVERFLOW + first + stored] = longer[:stored]
    out[OUT_OVERFLOW_ROWS] += np.uint64(longer.size)
    nnz = int(indptr[n_rows])
    tile_rows[:] = tile_first_rows(indptr[: n_rows + 1], nnz, stats_tile(indptr.dtype.itemsize))

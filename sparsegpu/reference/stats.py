"""Twins of kernels/matrix_stats.cu: the advisor's statistics buffer, computed with NumPy.

Both kernels write one buffer of unsigned 64-bit words (the layout constants below match the
``.cu`` file's): ``[0:5]`` where the entries sit relative to the diagonal (:func:`csr_structure`),
``[5]`` the summed widths of slices of :data:`SELL_SLICE` rows, ``[6]`` the number of rows of
length at least :data:`ROW_STATS_BINS`, ``[7:7 + ROW_STATS_BINS]`` the histogram of the
shorter rows' lengths, then the longer rows' lengths (:func:`csr_row_stats`). The kernel
appends those in no particular order, the twin in row order; read them as a multiset.
"""

from __future__ import annotations

import numpy as np

#: Bins of the row-length histogram kept per block in shared memory (kernels/matrix_stats.cu).
ROW_STATS_BINS = 4096
#: Rows per SELL slice whose widths the row kernel sums: one warp.
SELL_SLICE = 32
OUT_SLICE_WIDTHS, OUT_OVERFLOW_ROWS, OUT_BINS = 5, 6, 7
OUT_OVERFLOW = OUT_BINS + ROW_STATS_BINS


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


def csr_row_stats(indptr: np.ndarray, n_rows: int, capacity: int, out: np.ndarray) -> None:
    """Add the row-length part of the buffer to ``out`` (uint64, its words 5 .. 7 +
    ROW_STATS_BINS zero on entry), as kernels/matrix_stats.cu ``csr_row_stats`` does: slice
    widths, the histogram of lengths below :data:`ROW_STATS_BINS`, and the longer rows' lengths
    (at most ``capacity`` of them stored; ``out[6]`` counts them all).

    >>> out = np.zeros(OUT_OVERFLOW + 2, np.uint64)
    >>> csr_row_stats(np.array([0, 2, 2, 5000]), 3, 2, out)
    >>> out[OUT_SLICE_WIDTHS], out[OUT_OVERFLOW_ROWS], out[OUT_BINS:OUT_BINS + 3].tolist(), out[OUT_OVERFLOW]
    (np.uint64(4998), np.uint64(1), [1, 0, 1], np.uint64(4998))
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

"""Reference of kernels/matrix_stats_*.cu: the advisor's statistics buffer, computed with NumPy.

The kernels ``csr_stats`` and ``csr_stats_direct`` write one buffer of unsigned 64-bit words (the
layout constants below match kernels/matrix_stats_common.cuh): ``[0:5]`` where the entries sit relative to the diagonal, ``[5]`` the
summed widths of slices of :data:`SELL_SLICE` rows, ``[6]`` the number of rows of length at
least :data:`ROW_STATS_BINS`, ``[7]`` the longest row's length, ``[8:8 + ROW_STATS_BINS]`` the
histogram of the shorter rows' lengths, then the longer rows' lengths. The kernel appends those
in no particular order, the reference in row order; read them as a multiset.

The kernel's other arguments (its tile size, its work counters and chunk queue, the call's
epoch) only schedule its work; they change nothing in the buffer, so the reference has none.
"""

from __future__ import annotations

import numpy as np

#: Bins of the row-length histogram kept per block in shared memory (kernels/matrix_stats_common.cuh
#: STATS_BINS).
ROW_STATS_BINS = 4096
#: Rows per SELL slice whose widths the kernel sums: one warp.
SELL_SLICE = 32
OUT_SLICE_WIDTHS, OUT_OVERFLOW_ROWS, OUT_LONGEST, OUT_BINS = 5, 6, 7, 8
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


def csr_stats(indptr: np.ndarray, indices: np.ndarray, n_rows: int, capacity: int, out: np.ndarray) -> None:
    """Add the statistics of the CSR pattern (indptr, indices) to ``out`` (uint64, its words
    0 .. OUT_OVERFLOW zero on entry), as kernels/matrix_stats_tiled.cu ``csr_stats`` does: the
    structure words, slice widths, the longest row (0 when every length is negative: a corrupt
    indptr), the histogram of lengths below :data:`ROW_STATS_BINS`, and
    the longer rows' lengths (at most ``capacity`` of them stored; ``out[6]`` counts them all).

    >>> out = np.zeros(OUT_OVERFLOW + 2, np.uint64)
    >>> csr_stats(np.array([0, 2, 2, 5000], np.int32), np.arange(5000, dtype=np.int32) % 3, 3, 2, out)
    >>> out[OUT_SLICE_WIDTHS], out[OUT_OVERFLOW_ROWS], out[OUT_LONGEST], out[OUT_BINS:OUT_BINS + 3].tolist()
    (np.uint64(4998), np.uint64(1), np.uint64(4998), [1, 0, 1])
    >>> out[OUT_OVERFLOW]  # the one row past the bins
    np.uint64(4998)
    >>> out[:OUT_SLICE_WIDTHS].tolist()  # below, on, above the diagonal; sum and max of |i - j|
    [3332, 1667, 1, 4999, 2]
    """
    if n_rows == 0:
        return
    out[:OUT_SLICE_WIDTHS] += csr_structure(indptr[: n_rows + 1], indices).astype(np.uint64)
    lengths = np.diff(indptr[: n_rows + 1]).astype(np.int64)
    whole = n_rows - n_rows % SELL_SLICE
    widths = int(lengths[:whole].reshape(-1, SELL_SLICE).max(axis=1).sum()) if whole else 0
    if whole < n_rows:
        widths += int(lengths[whole:].max())
    out[OUT_SLICE_WIDTHS] += np.uint64(widths)
    out[OUT_LONGEST] = max(int(out[OUT_LONGEST]), int(lengths.max()), 0)
    # Compared as unsigned like the kernel: a negative length (corrupt indptr) is never binned.
    binned = lengths.view(np.uint64) < ROW_STATS_BINS
    out[OUT_BINS:OUT_OVERFLOW] += np.bincount(lengths[binned], minlength=ROW_STATS_BINS).astype(np.uint64)
    longer = lengths[~binned].view(np.uint64)
    first = int(out[OUT_OVERFLOW_ROWS])
    stored = max(min(longer.size, capacity - first), 0)
    out[OUT_OVERFLOW + first : OUT_OVERFLOW + first + stored] = longer[:stored]
    out[OUT_OVERFLOW_ROWS] += np.uint64(longer.size)

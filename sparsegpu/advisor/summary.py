"""The host summary of the advisor's statistics buffer, and :class:`MatrixStats`.

The statistics buffer (layout in sparsegpu/reference/stats.py) holds the row-length histogram,
the rows past its bins, and where the entries sit. The summary turns it into the words of the
record the device's summary writes (kernels/matrix_stats_summary.cuh), identical bit for bit,
and :func:`stats_of_record` turns a record into :class:`MatrixStats`. On the CPU backend, and
where the device leaves the head to the host, the summary is made here.
"""

from __future__ import annotations

import bisect
import itertools
import math
import operator
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from sparsegpu.formats import sell
from sparsegpu.formats._compressed import THREADS_PER_ROW, long_row_limit, threads_per_row
from sparsegpu.reference.stats import OUT_BINS, OUT_OVERFLOW_ROWS, ROW_STATS_BINS, SELL_SLICE

#: Words of the row lengths' summary in the record (kernels/matrix_stats_common.cuh SUMMARY_WORDS).
SUMMARY_WORDS = 10


@dataclass(slots=True)
class MatrixStats:
    """What the advisor reads off a matrix (:func:`sparsegpu.matrix_stats`). Row lengths count
    stored entries per row.

    Attributes
    ----------
    rows, cols, nnz : int
        The shape and the stored entries.
    density : float
        ``nnz / (rows * cols)``.
    row_mean, row_std, row_cv : float
        Mean row length, its standard deviation, and their ratio.
    row_min, row_max : int
        Shortest and longest row.
    row_quantiles : dict of str to int
        ``"p50"``, ``"p90"``, ``"p99"``: the shortest length with at least that share of the rows
        at or below it.
    empty_rows : int
        Rows without entries.
    ell_fill : float
        Padding slots per stored entry if stored as ELL.
    hyb_width : int
        HYB's ELL width (:func:`sparsegpu.formats.hyb.width_for_counts`).
    hyb_ell_fraction : float
        Share of the entries in HYB's ELL part at that width.
    sell_fill : float
        Padding per entry for SELL with 32 rows per slice, before sorting rows by length.
    csr_long_rows : int
        Rows past CSR's sub-warp limit (split across blocks).
    bandwidth : int
        Largest ``|i - j|`` of an entry.
    mean_distance : float
        Mean ``|i - j|`` over the entries.
    lower_fraction, upper_fraction, diagonal_fraction : float
        Shares of the entries below, above and on the diagonal.
    value_bytes, index_bytes : int
        Item sizes of the values and indices.
    longest_rows_fraction : float
        Share of the entries in the rows whose columns SELL would stage in shared memory, when
        some row is long enough for that (else 0).
    triangular : {"lower", "upper", None}
        Whether the entries lie on one side of the diagonal (property).

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from sparsegpu import matrix_stats
    >>> S = sp.csr_array(sp.diags_array([1.0, -2.0, 1.0], offsets=[-1, 0, 1], shape=(100, 100)))
    >>> s = matrix_stats(sp.csr_array(sp.tril(S)), backend="cpu")
    >>> s.rows, s.nnz, s.row_max, s.row_quantiles["p50"], s.triangular
    (100, 199, 2, 2, 'lower')
    """

    rows: int
    cols: int
    nnz: int
    density: float
    row_mean: float
    row_std: float
    row_min: int
    row_max: int
    row_quantiles: dict[str, int]
    row_cv: float
    empty_rows: int
    ell_fill: float  # padding slots per stored entry if stored as ELL
    hyb_width: int
    hyb_ell_fraction: float  # share of entries in HYB's ELL part at that width
    sell_fill: float  # padding per entry for SELL with C rows per slice, before the sigma sort
    csr_long_rows: int  # rows past the CSR sub-warp limit (split across blocks)
    bandwidth: int  # largest |i - j|
    mean_distance: float  # mean |i - j| over entries
    lower_fraction: float  # entries with j < i
    upper_fraction: float  # entries with j > i
    diagonal_fraction: float
    value_bytes: int
    index_bytes: int
    #: Share of the entries in the longest rows that SELL's staged columns would hold as many of
    #: (sell.HOT_BYTES / value_bytes rows), when some row reaches sell.HOT_MIN_GATHERS entries
    #: (else 0): the share of the gathers those columns would serve, exact for symmetric structure.
    longest_rows_fraction: float = 0.0

    @property
    def triangular(self) -> str | None:
        """``"lower"`` or ``"upper"`` when every entry lies on that side of the diagonal or on it,
        else None."""
        if self.nnz and self.upper_fraction == 0:
            return "lower"
        if self.nnz and self.lower_fraction == 0:
            return "upper"
        return None


def _length_histogram(head: np.ndarray, longer: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(row lengths ascending, rows of each) as int64 arrays, from a statistics buffer's head and
    the overflow list as far as the buffer holds it. Only the bins up to the longest row are read.
    The lengths in the bins are distinct; the overflow rows follow one by one, sorted (a length
    may repeat there, which the summaries allow: it saves a unique)."""
    overflow_rows, longest = head[OUT_OVERFLOW_ROWS:OUT_BINS].tolist()
    if overflow_rows > longer.size:
        raise RuntimeError(f"{overflow_rows} rows of {ROW_STATS_BINS} entries or more cannot fit in "
                           f"{longer.size} entries: the matrix's indptr is not monotone")
    bins = head[OUT_BINS:OUT_BINS + (longest + 1 if 0 <= longest < ROW_STATS_BINS else ROW_STATS_BINS)]
    # A bool array's nonzero is several times faster than an int64 array's.
    lengths = bins.astype(bool).nonzero()[0]
    counts = bins.take(lengths)
    if longer.size:
        lengths = np.concatenate((lengths, np.sort(longer)))
        counts = np.concatenate((counts, np.ones(longer.size, counts.dtype)))
    return lengths, counts


def hyb_width_from_lengths(lengths: np.ndarray, counts: np.ndarray, value_dtype: Any, index_dtype: Any) -> int:
    """:func:`sparsegpu.formats.hyb.width_for_counts` of the dense histogram with ``counts[t]``
    rows of length ``lengths[t]`` (ascending, distinct), evaluated at the distinct lengths only,
    so the work does not grow with the longest row. HYB's cost is linear in the width between
    consecutive distinct lengths, so its first minimum over all widths lies at one of them; below
    the shortest length every row overflows and a wider ELL part only saves, so 0 never wins
    unless it is a length.

    >>> hyb_width_from_lengths(np.array([2, 4]), np.array([7, 1]), np.float64, np.int32)
    2
    """
    return _summary_of_many(lengths, counts, int(counts.sum()), np.dtype(value_dtype).itemsize,
                            np.dtype(index_dtype).itemsize, 0)[5]


#: Row-count fractions of the reported length quantiles (MatrixStats.row_quantiles).
QUANTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99}
QUANTILE_FRACTIONS = tuple(QUANTILES.values())
#: The host summary's bins are read whole into Python when the longest row is shorter than
#: DENSE_BINS and none is past the bins, and summed there when at most FEW_LENGTHS of them hold
#: rows (most matrices): a NumPy call costs about half a microsecond whatever its size, a Python
#: step over an empty bin a few tens of nanoseconds, over a length about a quarter microsecond.
DENSE_BINS = 64
FEW_LENGTHS = 16
#: Lengths at most that :func:`_summary_of_bins` evaluates HYB's cost at, in Python.
HYB_WINDOW = 64
#: Rows up to this long never count as CSR's long rows (its sub-warp limit at one thread a row),
#: so the limit, a few Python calls, is only looked up for matrices with longer rows.
SHORTEST_LONG_ROW_LIMIT = long_row_limit(THREADS_PER_ROW[0])
_DENSE_SQUARES = [k * k for k in range(DENSE_BINS)]
_BIN_LENGTHS = np.arange(ROW_STATS_BINS, dtype=np.int64)
_BIN_SQUARES = (_BIN_LENGTHS * _BIN_LENGTHS).astype(np.float64)  # for a BLAS dot, exact below 2^53

# The host summary of the row lengths (m rows in all), in three equal ways: (shortest length,
# longest, empty rows, sum of squared lengths, the QUANTILES' lengths, HYB's width, entries in
# HYB's ELL part at that width, rows longer than `limit`). _summary_of_dense sums a short dense
# histogram in Python; _summary_of_bins takes the statistics buffer's bins (the dense histogram
# of the lengths below ROW_STATS_BINS) as they are and the longer rows' lengths apart, and
# declines (None) what it cannot settle from the bins; _summary_of_many takes every length,
# ascending, with its rows (_length_histogram). The q-quantile is the shortest length whose
# cumulative row count reaches q * m. The sum of squares is exact, then rounded once.
#
# HYB's width is the first minimum over the lengths w of its cost (R rows, E entries; `over`
# rows longer than w, holding `after` entries; v, i the value and index bytes)
#     cost(w) = R * w * (v + i) + (after - w * over) * (v + 2 i) + over * 2 v,
# evaluated with the same float64 operations, in the same order, as
# sparsegpu.formats.hyb.width_for_counts. A repeated length's first copy costs more than its
# last (by 2 v), where the minimum falls. The entries in the ELL part at that width are those of
# the rows up to it, plus w for every longer row.


def _cheapest_of_few(lengths: Iterable[int], counts: list[int], rows_to: int, entries_to: int, rows: int,
                     entries: int, value_bytes: int, index_bytes: int) -> tuple[int, int, int]:
    """HYB's first cheapest width among ``lengths`` (ascending, with ``counts`` rows of each: a
    length of none is skipped), past ``rows_to`` shorter rows holding ``entries_to`` entries, of
    ``rows`` rows and ``entries`` entries in all; with the rows and the entries up to it."""
    total, per_slot, per_overflow, per_over_row = float(rows), value_bytes + index_bytes, \
        value_bytes + 2 * index_bytes, 2 * value_bytes
    best = math.inf
    for length, count in zip(lengths, counts):
        if count:
            rows_to, entries_to = rows_to + count, entries_to + count * length
            over, w = float(rows - rows_to), float(length)
            cost = (total * w * per_slot + (float(entries - entries_to) - w * over) * per_overflow
                    + over * per_over_row)
            if cost < best:
                best, cheapest = cost, (length, rows_to, entries_to)
    return cheapest


def _summary_of_dense(bins: list[int], m: int, entries: int, value_bytes: int, index_bytes: int,
                      limit: int) -> tuple[int, int, int, float, list[int], int, float, int]:
    """The summary of a short dense histogram in Python integers: ``bins[k]`` rows of length k,
    up to the longest row, ``entries`` entries in all."""
    rows_upto = list(itertools.accumulate(bins))
    rows = rows_upto[-1]
    squares = sum(map(operator.mul, bins, _DENSE_SQUARES))
    quantiles = [bisect.bisect_left(rows_upto, q * m) for q in QUANTILE_FRACTIONS]  # position k: length k
    width, rows_to, entries_to = _cheapest_of_few(range(len(bins)), bins, 0, 0, rows, entries, value_bytes,
                                                  index_bytes)
    return (bisect.bisect_left(rows_upto, 1), len(bins) - 1, bins[0], float(squares), quantiles, width,
            float(entries_to + width * (rows - rows_to)), rows - rows_upto[min(limit, len(bins) - 1)])


def _summary_of_many(lengths: np.ndarray, counts: np.ndarray, m: int, value_bytes: int, index_bytes: int,
                     limit: int) -> tuple[int, int, int, float, list[int], int, float, int]:
    """The summary of every length, ascending (a length may repeat), with its rows: NumPy arrays."""
    rows_upto = counts.cumsum()
    products = counts * lengths
    entries_upto = products.cumsum()
    rows, entries, longest = int(rows_upto[-1]), int(entries_upto[-1]), int(lengths[-1])
    # Exact in int64 below 2^63 (any matrix a device holds), the float64 sum past it.
    squares = float(products @ (lengths if entries * longest < 2**63 else lengths.astype(np.float64)))
    quantiles = lengths[rows_upto.searchsorted(np.array(QUANTILE_FRACTIONS) * m)].tolist()
    widths = lengths.astype(np.float64)
    over = (rows - rows_upto).astype(np.float64)
    cost = (float(rows) * widths * (value_bytes + index_bytes)
            + ((entries - entries_upto).astype(np.float64) - widths * over) * (value_bytes + 2 * index_bytes)
            + over * (2 * value_bytes))
    t = int(cost.argmin())
    width = int(lengths[t])
    up_to_limit = int(lengths.searchsorted(limit, "right"))
    return (int(lengths[0]), longest, int(counts[0]) if lengths[0] == 0 else 0, squares, quantiles, width,
            float(entries_upto[t] + width * (rows - rows_upto[t])),
            rows - (int(rows_upto[up_to_limit - 1]) if up_to_limit else 0))


# _summary_of_bins evaluates HYB's cost only at the lengths that can hold its minimum, where every
# cost is exact (integers below 2^53, which R * (longest * (2 v + 3 i) + 2 v) bounds). With r_w
# the rows of length w or shorter, the exact cost falls from a length w to the next, w', by
#     2 v * (rows of length w') - (w' - w) * gain_w,  gain_w = (v + 2 i) * r_w - i * R,
# and gain grows with w. So the cost falls strictly while gain_w <= 0: the minimum lies at or past
# `first`, the shortest length with gain > 0. From any length p with gain_p > 0 on, the cost falls
# by at most 2 v * (R - r_p) in all and grows by at least gain_p per unit of width, so lengths past
# p + 2 v * (R - r_p) // gain_p (`reach`) cost more than p. With p the shortest length where
# gain_p >= i * R, reach is at most p + 2 v / i: the candidates are the lengths from about the
# i / (v + 2 i) quantile of the rows to a few past the 2 i / (v + 2 i) quantile (p50 at fp64 and
# int32), and the rows past the bins are never among them when reach is shorter than
# ROW_STATS_BINS.


def _summary_of_bins(bins: np.ndarray, longer: np.ndarray, longest: int, m: int, entries: int, value_bytes: int,
                     index_bytes: int, limit: int) -> tuple[int, int, int, float, list[int], int, float, int] | None:
    """The summary from the buffer's bins (``bins[k]`` rows of length k, up to the longest row or
    ROW_STATS_BINS) and the longer rows' lengths ``longer`` (unsorted), of ``entries`` entries
    in all, the longest row ``longest`` long; None where a quantile, HYB's width or ``limit``
    lies past the bins, where the costs are not exact, or where more than HYB_WINDOW lengths may
    hold HYB's width (see the comment above)."""
    rows_upto = np.add.accumulate(bins)  # rows of length k or shorter: position k
    rows = rows_upto.item(-1) + longer.size
    per_overflow = value_bytes + 2 * index_bytes
    if (rows * (longest * (2 * value_bytes + 3 * index_bytes) + 2 * value_bytes) > 2**53  # inexact costs
            or rows * (bins.size - 1) ** 2 >= 2**53  # an inexact float64 sum of the bins' squares
            or longer.size and (limit >= ROW_STATS_BINS or longer.size * longest * longest >= 2**63)):
        return None
    # Searched in integers: rows_upto >= 1, >= q * m; gain > 0; gain >= i * R; all the bins' rows.
    positions = rows_upto.searchsorted([1, *[math.ceil(q * m) for q in QUANTILE_FRACTIONS],
                                        index_bytes * rows // per_overflow + 1,
                                        -(-2 * index_bytes * rows // per_overflow), rows - longer.size]).tolist()
    if max(positions) >= bins.size:
        return None
    shortest, *quantiles, first, pivot, last = positions
    pivot_rows = rows_upto.item(pivot)
    reach = pivot + 2 * value_bytes * (rows - pivot_rows) // (per_overflow * pivot_rows - index_bytes * rows)
    if longer.size and reach >= ROW_STATS_BINS or min(reach, bins.size - 1) - first >= HYB_WINDOW:
        return None
    stop = min(reach, bins.size - 1) + 1
    width, rows_to, entries_to = _cheapest_of_few(
        range(first, stop), bins[first:stop].tolist(), rows_upto.item(first - 1) if first else 0,
        int(bins[:first].dot(_BIN_LENGTHS[:first])) if first else 0, rows, entries, value_bytes, index_bytes)
    squares = int(_BIN_SQUARES[:last + 1].dot(bins[:last + 1])) + (int(longer.dot(longer)) if longer.size else 0)
    return (shortest, longest, bins.item(0), float(squares), quantiles, width,
            float(entries_to + width * (rows - rows_to)), rows - rows_upto.item(min(limit, bins.size - 1)))


def _entries_in_longest_rows(bins: np.ndarray, longer: np.ndarray, rows: int) -> int:
    """Entries in the ``rows`` longest rows, from the statistics buffer's bins (``bins[k]`` rows
    of length k) and the longer rows' lengths (unsorted).

    >>> bins = np.array([5, 0, 3, 1])  # five empty rows, three of 2 entries, one of 3
    >>> _entries_in_longest_rows(bins, np.array([9, 7]), 4), _entries_in_longest_rows(bins, np.array([9, 5, 7]), 2)
    (21, 16)
    """
    if longer.size >= rows:
        return int(np.partition(longer, longer.size - rows)[longer.size - rows:].sum())
    rows -= longer.size
    at_most = np.add.accumulate(bins)  # rows of length k or shorter: position k
    # The shortest length t taken: rows of length t or longer are at least `rows`, longer ones fewer.
    t = int(at_most.searchsorted(at_most.item(-1) - rows, "right"))
    longer_rows = at_most.item(-1) - at_most.item(t)  # rows in the bins longer than t
    return int(longer.sum()) + int(bins[t + 1:] @ _BIN_LENGTHS[t + 1:bins.size]) + (rows - longer_rows) * t


def _summary_words(head: np.ndarray, longer: np.ndarray, m: int, nnz: int, value_bytes: int,
                   index_bytes: int) -> list:
    """The summary of the row lengths from a statistics buffer's head and overflow list, on the
    host (the reference of ``summarise`` in kernels/matrix_stats_summary.cuh): the shortest
    length, the empty rows, the sum of squared lengths, the QUANTILES' lengths, HYB's width, the entries in HYB's
    ELL part at that width, the rows longer than CSR's long-row limit, and the entries in the
    ``sell.HOT_BYTES // value_bytes`` longest rows (0 when SELL would stage no columns:
    :func:`stats_of_record` ignores it then)."""
    overflow_rows, longest = head[OUT_OVERFLOW_ROWS:OUT_BINS].tolist()
    if not m:
        return [0] * SUMMARY_WORDS
    limit = long_row_limit(threads_per_row(nnz / m)) if longest > SHORTEST_LONG_ROW_LIMIT else longest
    # The lengths: the bins up to the longest row, then the longer rows' (at most
    # nnz / ROW_STATS_BINS): few values whatever the matrix's size. Summed in Python when
    # they are few and short, else from the bins as they are, else merged into one histogram.
    # The entries in all are nnz: a CSR's row lengths sum to it.
    summary = None
    if not overflow_rows and 0 <= longest < DENSE_BINS:
        bins = head[OUT_BINS:OUT_BINS + longest + 1].tolist()
        if len(bins) - bins.count(0) <= FEW_LENGTHS:
            summary = _summary_of_dense(bins, m, nnz, value_bytes, index_bytes, limit)
    if summary is None and 0 <= longest and overflow_rows <= longer.size:
        summary = _summary_of_bins(head[OUT_BINS:OUT_BINS + min(longest + 1, ROW_STATS_BINS)], longer, longest, m,
                                   nnz, value_bytes, index_bytes, limit)
    if summary is None:
        summary = _summary_of_many(*_length_histogram(head, longer), m, value_bytes, index_bytes, limit)
    row_min, row_max, empty, squares, quantiles, width, in_ell, long_rows = summary
    hot_entries = 0
    if nnz and row_max >= sell.HOT_MIN_GATHERS:
        bins = head[OUT_BINS:OUT_BINS + min(row_max + 1, ROW_STATS_BINS)]
        hot_entries = _entries_in_longest_rows(bins, longer, sell.HOT_BYTES // value_bytes)
    return [row_min, empty, squares, *quantiles, width, in_ell, long_rows, hot_entries]


def record_of_buffer(head: np.ndarray, longer: np.ndarray, m: int, nnz: int, value_bytes: int,
                      index_bytes: int) -> list:
    """The record's words from RECORD_HEAD on, from a statistics buffer's head and overflow list."""
    return head[:OUT_BINS].tolist() + _summary_words(head, longer, m, nnz, value_bytes, index_bytes)


def _summarise(head: np.ndarray, longer: np.ndarray, shape: tuple[int, int], nnz: int, value_bytes: int,
               index_bytes: int) -> MatrixStats:
    """:class:`MatrixStats` from a statistics buffer's head and overflow list (host work only)."""
    return stats_of_record(record_of_buffer(head, longer, shape[0], nnz, value_bytes, index_bytes), shape, nnz,
                            value_bytes, index_bytes)


def stats_of_record(words: list, shape: tuple[int, int], nnz: int, value_bytes: int,
                     index_bytes: int) -> MatrixStats:
    """:class:`MatrixStats` from the record's words from RECORD_HEAD on (the head's first
    OUT_BINS words, then :func:`_summary_words`'s); the squares and HYB's ELL entries are
    rounded to float64 once, whichever side summed them. (Every call of :func:`sparsegpu.matrix_stats`
    pays for this: one flat unpacking, and the fields positionally, in their order.)"""
    m, n = shape
    (below, on, above, distance, band, slice_widths, _, longest,
     row_min, empty, squares, p50, p90, p99, width, in_ell, long_rows, hot_entries) = words
    quantiles = {"p50": p50, "p90": p90, "p99": p99}  # QUANTILES' keys
    if not nnz:  # (also every matrix without rows)
        return MatrixStats(m, n, 0, 0.0, 0.0, 0.0, row_min, longest if m else 0, quantiles, 0.0, empty, 0.0, width,
                           1.0, 0.0, long_rows, band, 0.0, 0.0, 0.0, 0.0, value_bytes, index_bytes, 0.0)
    mean = nnz / m
    var = float(squares) / m - mean * mean
    std = math.sqrt(var) if var > 0.0 else 0.0
    return MatrixStats(m, n, nnz, nnz / (m * n), mean, std, row_min, longest, quantiles, std / mean, empty,
                       (m * longest - nnz) / nnz, width, float(in_ell) / nnz, (slice_widths * SELL_SLICE - nnz) / nnz,
                       long_rows, band, distance / nnz, below / nnz, above / nnz, on / nnz, value_bytes, index_bytes,
                       hot_entries / nnz if longest >= sell.HOT_MIN_GATHERS else 0.0)


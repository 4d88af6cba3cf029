"""Matrices, reference statistics and GPU-pass switches shared by the advisor's tests."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import strategies as st

from sparsegpu import advisor, datasets
from sparsegpu._kernels import read_source
from sparsegpu.advisor import statistics
from sparsegpu.formats import sell as sell_module
from sparsegpu.formats._compressed import long_row_limit, threads_per_row
from sparsegpu.formats.hyb import width_for_counts
from sparsegpu.formats.sell import DEFAULT_C
from sparsegpu.reference import stats as reference_stats

BINS = reference_stats.ROW_STATS_BINS
#: Lengths the warp summary takes (kernels/matrix_stats_summary.cuh WARP_SUMMARY_BINS).
WARP_SUMMARY_BINS = 128


def tridiagonal(n: int) -> sp.csr_array:
    return sp.csr_array(sp.diags_array([1.0, -2.0, 1.0], offsets=[-1, 0, 1], shape=(n, n)))


def numpy_stats(csr) -> advisor.MatrixStats:
    """The advisor's statistics straight from the arrays: every row's entries, SELL slices padded
    with empty rows, then :func:`stats_of_lengths`."""
    indptr, indices = np.asarray(csr.indptr).astype(np.int64), np.asarray(csr.indices).astype(np.int64)
    m, nnz = csr.shape[0], csr.nnz
    lengths = np.diff(indptr)
    rows = np.repeat(np.arange(m), lengths)
    offset = indices - rows
    distance = np.abs(offset)
    padded = np.zeros(-(-m // DEFAULT_C) * DEFAULT_C, dtype=np.int64)
    padded[:m] = lengths
    slots = int(padded.reshape(-1, DEFAULT_C).max(axis=1).sum()) * DEFAULT_C
    structure = [(offset < 0).sum(), (offset == 0).sum(), (offset > 0).sum(), distance.sum(),
                 distance.max() if nnz else 0]
    return stats_of_lengths(lengths, csr.shape[1], structure, slots, csr.dtype.itemsize, csr.index_dtype.itemsize)


def stats_of_lengths(lengths, n_cols: int, structure, sell_slots: int, value_bytes: int,
                     index_bytes: int) -> advisor.MatrixStats:
    """The advisor's statistics of rows of these lengths, in any order: sorted lengths, the dense
    length histogram, HYB's own width_for_counts; the entries' places (below, on and above the
    diagonal, sum and max of |i - j|) and SELL's slots as given."""
    lengths = np.asarray(lengths, dtype=np.int64)
    below, on, above, distance, band = (int(word) for word in structure)
    m, nnz = lengths.size, int(lengths.sum())
    mean = nnz / m if m else 0.0
    var = max(float((lengths.astype(np.float64) ** 2).sum()) / m - mean * mean, 0.0) if m else 0.0
    row_max = int(lengths.max()) if m else 0
    counts = np.bincount(lengths, minlength=1)
    width = width_for_counts(counts, BYTES_DTYPES[value_bytes], BYTES_DTYPES[index_bytes]) if m else 0
    ordered = np.sort(lengths)
    hot_rows = sell_module.HOT_BYTES // value_bytes
    longest_rows = int(ordered[::-1][:hot_rows].sum()) / nnz if row_max >= sell_module.HOT_MIN_GATHERS else 0.0
    return advisor.MatrixStats(
        rows=m, cols=n_cols, nnz=nnz, density=nnz / (m * n_cols) if m and n_cols else 0.0,
        row_mean=mean, row_std=math.sqrt(var), row_min=int(lengths.min()) if m else 0, row_max=row_max,
        row_quantiles={f"p{int(q * 100)}": int(ordered[math.ceil(q * m) - 1]) if m else 0 for q in (0.5, 0.9, 0.99)},
        row_cv=math.sqrt(var) / mean if mean else 0.0, empty_rows=int((lengths == 0).sum()),
        ell_fill=(m * row_max - nnz) / nnz if nnz else 0.0, hyb_width=width,
        hyb_ell_fraction=float(np.minimum(lengths, width).sum()) / nnz if nnz else 1.0,
        sell_fill=(sell_slots - nnz) / nnz if nnz else 0.0,
        csr_long_rows=int((lengths > long_row_limit(threads_per_row(mean))).sum()),
        bandwidth=band, mean_distance=distance / nnz if nnz else 0.0,
        lower_fraction=below / nnz if nnz else 0.0, upper_fraction=above / nnz if nnz else 0.0,
        diagonal_fraction=on / nnz if nnz else 0.0, value_bytes=value_bytes, index_bytes=index_bytes,
        longest_rows_fraction=longest_rows)


#: A dtype of each item size (width_for_counts reads only the item sizes).
BYTES_DTYPES = {4: np.dtype(np.int32), 8: np.dtype(np.int64), 16: np.dtype(np.complex128)}


def from_lengths(lengths, n_cols: int, rng) -> sp.csr_array:
    """A matrix whose row i holds lengths[i] consecutive columns starting at a random one."""
    lengths = np.asarray(lengths, dtype=np.int64)
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    start = rng.integers(0, n_cols - lengths + 1) if lengths.size else lengths
    rows = np.repeat(np.arange(lengths.size), lengths)
    indices = start[rows] + np.arange(indptr[-1]) - indptr[rows]
    return sp.csr_array((rng.standard_normal(indptr[-1]), indices, indptr), shape=(lengths.size, n_cols))


def edge_matrices(rng) -> dict[str, sp.csr_array]:
    """Awkward shapes and row lengths around the kernel's histogram limit."""
    lengths = rng.integers(0, 9, 1000)
    lengths[[3, 40, 41, 999]] = BINS - 1, BINS, BINS + 1, 3 * BINS + 7
    return {
        "no rows": sp.csr_array((0, 7)),
        "no columns": sp.csr_array((45, 0)),
        "all rows empty": sp.csr_array((77, 50)),
        "one row longer than the bins": from_lengths([2 * BINS + 5], 3 * BINS, rng),
        "lengths at the limit": from_lengths(lengths, 4 * BINS, rng),
        "33 rows": from_lengths(rng.integers(0, 40, 33), 64, rng),
        "31 rows": from_lengths(rng.integers(1, 5, 31), 31, rng),
        "one row": from_lengths([3], 5, rng),
        "single column": sp.csr_array(np.ones((70, 1))),
        "every row at the limit": from_lengths(np.full(65, BINS), BINS + 3, rng),
        "many distinct lengths": from_lengths(rng.integers(0, 300, 2000), 400, rng),
        "a long row among equal ones": from_lengths(np.where(np.arange(96) == 40, BINS + 5, 3), BINS + 9, rng),
        "the warp summary's longest row": from_lengths(np.append(rng.integers(0, 9, 500), WARP_SUMMARY_BINS - 1),
                                                       2 * WARP_SUMMARY_BINS, rng),
        "one past the warp summary's bins": from_lengths(np.append(rng.integers(0, 9, 500), WARP_SUMMARY_BINS),
                                                         2 * WARP_SUMMARY_BINS, rng),
    }


#: The statistics' kernel files, each with the headers it includes.
STATS_SOURCES = "\n".join(read_source(kernels.filename) for kernels in (statistics.TILED_KERNELS,
                                                                        statistics.DIRECT_KERNELS))


def kernel_constant(name: str) -> int:
    """A ``constexpr int NAME = value;`` of the statistics' kernels (kernels/matrix_stats_*)."""
    match = re.search(rf"\b{name} = (\d+)[;,]", STATS_SOURCES)
    assert match, name
    return int(match.group(1))


def statistics_buffer(lengths, rng) -> tuple[np.ndarray, np.ndarray, list[int], int]:
    """The statistics buffer's head and overflow list (kernels/matrix_stats_common.cuh's layout, as the
    reference writes it) for rows of these lengths, with made-up words for the entries' places and
    SELL's slices (the summary only passes them on); and those words, and SELL's slots."""
    lengths = np.asarray(lengths, dtype=np.int64)
    head = np.zeros(reference_stats.OUT_OVERFLOW, np.int64)
    nnz = int(lengths.sum())
    head[:reference_stats.OUT_SLICE_WIDTHS] = structure = [*rng.multinomial(nnz, [0.3, 0.4, 0.3]),
                                                         rng.integers(0, 10**12),
                                                 rng.integers(0, 10**6)]
    head[reference_stats.OUT_SLICE_WIDTHS] = slice_widths = rng.integers(0, 2 * nnz + 1)
    head[reference_stats.OUT_BINS:] = np.bincount(lengths[lengths < BINS], minlength=BINS)
    longer = rng.permutation(lengths[lengths >= BINS])
    head[reference_stats.OUT_OVERFLOW_ROWS], head[reference_stats.OUT_LONGEST] = longer.size, lengths.max()
    return head, longer, structure, int(slice_widths) * reference_stats.SELL_SLICE


@st.composite
def length_groups(draw) -> dict[int, int]:
    """Row lengths as {length: rows}: a few short lengths (the Python summary's), lengths anywhere
    in the bins, a few rows past the bins (sometimes more than a percent)."""
    groups = draw(st.dictionaries(st.integers(0, 63), st.integers(1, 3000), max_size=12))
    groups.update(draw(st.dictionaries(st.integers(0, BINS - 1), st.integers(1, 3000), max_size=draw(
        st.sampled_from([0, 3, 30])))))
    groups.update(draw(st.dictionaries(st.integers(BINS, 3 * BINS), st.integers(1, draw(st.sampled_from([3, 300]))),
                                       max_size=6)))
    return groups or {draw(st.integers(0, 3 * BINS)): 1}


#: (DIRECT_MAX_ENTRIES, SINGLE_BLOCK_ITEMS) that send every matrix through one of the GPU passes:
#: csr_stats_direct on as many blocks as its rule gives (one only below 2048 items), on one block
#: wherever the rows fit it (at most STATS_WINDOW), or csr_stats then stats_summary.
PASSES = {"direct": (2**62, 0), "single": (2**62, 2**62), "tiled": (-1, 0)}


def use_pass(patch: pytest.MonkeyPatch, name: str) -> None:
    patch.setattr(statistics, "DIRECT_MAX_ENTRIES", PASSES[name][0])
    patch.setattr(statistics, "SINGLE_BLOCK_ITEMS", PASSES[name][1])


def model_cases(rng) -> dict[str, sp.csr_array]:
    """Generated families, the awkward shapes, and a power-law graph with hub rows."""
    cases = {family: datasets.generate(family, "small") for family in sorted(datasets.GENERATED)}
    cases.update(edge_matrices(rng))
    lengths = np.minimum(rng.zipf(1.8, 3000), 2500)
    cases["hub rows"] = from_lengths(lengths, 3000, rng)
    return cases


def assert_workspace_zero() -> None:
    space = statistics._workspace()
    assert space.zero and not space.buffer[:statistics.STATS_COUNTERS + reference_stats.OUT_OVERFLOW].any()

"""The format advisor: statistics (kernel vs twin vs NumPy), estimates, choices, bad input."""

from __future__ import annotations

import dataclasses
import json
import math
import re

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import sparsegpu
from sparsegpu import advisor, datasets
from sparsegpu.formats._compressed import long_row_limit, threads_per_row
from sparsegpu.formats.hyb import width_for_counts
from sparsegpu.formats import sell as sell_module
from sparsegpu.formats.sell import DEFAULT_C
from sparsegpu.reference import stats as twins
from tests.conftest import REAL_MATRICES, requires_matrices

BINS = twins.ROW_STATS_BINS
#: Lengths the warp summary takes (kernels/matrix_stats.cu WARP_SUMMARY_BINS).
WARP_SUMMARY_BINS = 128


def tridiagonal(n: int) -> sp.csr_array:
    return sp.csr_array(sp.diags_array([1.0, -2.0, 1.0], offsets=[-1, 0, 1], shape=(n, n)))


def test_stats_of_a_known_matrix(backend):
    s = advisor.matrix_stats(tridiagonal(1000), backend=backend)
    assert (s.rows, s.cols, s.nnz) == (1000, 1000, 2998)
    assert (s.row_min, s.row_max, s.empty_rows, s.bandwidth) == (2, 3, 0, 1)
    assert s.row_mean == pytest.approx(2.998)
    assert s.lower_fraction == pytest.approx(999 / 2998) and s.diagonal_fraction == pytest.approx(1000 / 2998)
    assert s.mean_distance == pytest.approx(1998 / 2998)
    assert s.ell_fill == pytest.approx((3000 - 2998) / 2998)
    assert s.hyb_width == 3 and s.hyb_ell_fraction == 1.0
    assert s.row_quantiles == {"p50": 3, "p90": 3, "p99": 3}
    assert s.triangular is None


def test_stats_match_numpy(backend, rng):
    S = sp.random_array((700, 500), density=0.03, rng=rng, format="csr")
    S = sp.csr_array(S.multiply(rng.random((700, 1)) < 0.8))  # some empty rows
    s = advisor.matrix_stats(S, backend=backend)
    lengths = np.diff(S.indptr)
    coo = S.tocoo()
    offset = coo.col.astype(np.int64) - coo.row
    assert s.row_max == lengths.max() and s.row_min == lengths.min() and s.empty_rows == (lengths == 0).sum()
    assert s.row_std == pytest.approx(lengths.std())
    assert s.bandwidth == np.abs(offset).max()
    assert s.upper_fraction == pytest.approx((offset > 0).mean())
    assert s.row_quantiles["p90"] == int(np.quantile(lengths, 0.9, method="inverted_cdf"))


# --------------------------------------------------------------------------- the statistics pass


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


def test_sell_slices_are_warps():
    assert twins.SELL_SLICE == DEFAULT_C == 32


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_stats_match_numpy_on_edge_cases(index_dtype, rng):
    for label, S in edge_matrices(rng).items():
        csr = sparsegpu.CSR.from_scipy(S, index_dtype=index_dtype, backend="cpu")
        assert advisor.matrix_stats(csr) == numpy_stats(csr), label


@requires_matrices
def test_stats_match_numpy_on_real_matrices():
    for name in REAL_MATRICES:
        csr = sparsegpu.CSR.from_scipy(datasets.load_matrix(name), backend="cpu")
        assert advisor.matrix_stats(csr) == numpy_stats(csr), name


@pytest.mark.parametrize("family", sorted(datasets.GENERATED))
def test_stats_match_numpy_on_generated_families(family):
    csr = sparsegpu.CSR.from_scipy(datasets.generate(family, "small"), backend="cpu")
    assert advisor.matrix_stats(csr) == numpy_stats(csr)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(st.integers(0, 40), st.sampled_from([BINS - 1, BINS, BINS + 1, 2 * BINS + 3])),
                max_size=90),
       st.sampled_from([np.int32, np.int64]), st.integers(0, 2**32 - 1))
def test_stats_match_numpy_on_any_lengths(lengths, index_dtype, seed):
    rng = np.random.default_rng(seed)
    csr = sparsegpu.CSR.from_scipy(from_lengths(lengths, 3 * BINS, rng), index_dtype=index_dtype, backend="cpu")
    assert advisor.matrix_stats(csr) == numpy_stats(csr)


def test_twin_buffer_layout(rng):
    S = edge_matrices(rng)["lengths at the limit"]
    lengths = np.diff(S.indptr)
    capacity = twins.overflow_capacity(S.nnz)
    out = np.zeros(twins.OUT_OVERFLOW + capacity, np.uint64)
    twins.csr_stats(S.indptr, S.indices, S.shape[0], capacity, out)
    offset = S.tocoo().col.astype(np.int64) - S.tocoo().row
    assert out[:twins.OUT_SLICE_WIDTHS].tolist() == [(offset < 0).sum(), (offset == 0).sum(), (offset > 0).sum(),
                                                     np.abs(offset).sum(), np.abs(offset).max()]
    assert out[twins.OUT_SLICE_WIDTHS] == sum(lengths[i:i + 32].max() for i in range(0, lengths.size, 32))
    assert out[twins.OUT_OVERFLOW_ROWS] == 3 and 3 < capacity
    assert out[twins.OUT_LONGEST] == lengths.max() == 3 * BINS + 7
    assert out[twins.OUT_BINS:twins.OUT_OVERFLOW].tolist() == np.bincount(lengths[lengths < BINS], minlength=BINS).tolist()
    assert out[twins.OUT_OVERFLOW:].tolist() == [BINS, BINS + 1, 3 * BINS + 7] + [0] * (capacity - 3)


def test_overflow_past_capacity_is_refused():
    head = np.zeros(twins.OUT_OVERFLOW, np.int64)
    head[twins.OUT_OVERFLOW_ROWS] = 3
    with pytest.raises(RuntimeError, match="not monotone"):
        advisor._length_histogram(head, np.zeros(2, np.int64))
    with pytest.raises(RuntimeError, match="not monotone"):
        advisor._summarise(head, np.zeros(2, np.int64), (5, 5), 3, 8, 4)


def kernel_constant(name: str) -> int:
    """A ``constexpr int NAME = value;`` of kernels/matrix_stats.cu."""
    from sparsegpu._kernels import read_source

    match = re.search(rf"\b{name} = (\d+)[;,]", read_source("matrix_stats.cu"))
    assert match, name
    return int(match.group(1))


def test_host_mirrors_the_kernels_constants():
    assert kernel_constant("STATS_BINS") == twins.ROW_STATS_BINS
    assert [kernel_constant(f"OUT_{w}") for w in ("SLICE_WIDTHS", "OVERFLOW_ROWS", "LONGEST", "BINS")] == [
        twins.OUT_SLICE_WIDTHS, twins.OUT_OVERFLOW_ROWS, twins.OUT_LONGEST, twins.OUT_BINS]
    assert kernel_constant("STATS_BLOCK") == advisor.STATS_BLOCK
    assert kernel_constant("STATS_WINDOW") == advisor.STATS_WINDOW and advisor.STATS_WINDOW % 32 == 0
    assert kernel_constant("QUEUE_WORDS") == advisor.QUEUE_WORDS
    assert kernel_constant("COUNTER_TILES_DONE") < kernel_constant("STATS_COUNTERS") == advisor.STATS_COUNTERS
    assert [kernel_constant(f"RECORD_{w}") for w in ("EPOCH", "STATUS", "HEAD", "SUMMARY")] == [
        advisor.RECORD_EPOCH, advisor.RECORD_STATUS, advisor.RECORD_HEAD, advisor.RECORD_SUMMARY]
    assert kernel_constant("SUMMARY_WORDS") == advisor.SUMMARY_WORDS == len(advisor._summary_words(
        np.zeros(twins.OUT_OVERFLOW, np.int64), np.zeros(0, np.int64), 0, 0, 8, 4))
    assert [kernel_constant(f"STATUS_{w}") for w in ("SUMMARISED", "HEAD_KEPT")] == [
        advisor.STATUS_SUMMARISED, advisor.STATUS_HEAD_KEPT]
    assert all(expression == f"csr_stats_direct<{{I}}, {blocks}, {advisor.DIRECT_VECTORS[blocks]}>"
               for blocks, expression in advisor.DIRECT_EXPRESSIONS.items())
    assert 32 * kernel_constant("WARP_BINS") == WARP_SUMMARY_BINS
    from sparsegpu._kernels import read_source

    assert f"STATS_ITEM = {advisor.STATS_ITEM_BYTES} / sizeof(I)" in read_source("matrix_stats.cu")


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 10**9), st.integers(0, 10**10), st.sampled_from([4, 8]), st.sampled_from([1, 660, 792]))
def test_stats_tiles_are_whole_slices_within_the_window(rows, nnz, itemsize, blocks):
    tile = advisor.stats_tile_rows(rows, nnz, itemsize, blocks)
    assert tile % twins.SELL_SLICE == 0 and 32 <= tile <= advisor.STATS_WINDOW
    spread = -(-rows // blocks)  # rows a block when every block takes a tile
    assert tile < spread + 32 or tile == 32
    item = advisor.STATS_ITEM_BYTES // itemsize
    if 32 < tile < min(advisor.STATS_WINDOW, spread):  # not clamped: 3/4 of an item per tile on average
        assert (tile + 32) * nnz / rows > 0.75 * item >= tile * nnz / rows * (1 - 1e-12)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.integers(0, 5000), st.integers(1, 10**6), min_size=1, max_size=30),
       st.sampled_from([np.float32, np.float64, np.complex128]), st.sampled_from([np.int32, np.int64]))
def test_hyb_width_from_distinct_lengths_is_hybs_width(histogram, value_dtype, index_dtype):
    lengths = np.array(sorted(histogram), dtype=np.int64)
    counts = np.array([histogram[k] for k in lengths.tolist()], dtype=np.int64)
    dense = np.zeros(lengths[-1] + 1, dtype=np.int64)
    dense[lengths] = counts
    assert (advisor.hyb_width_from_lengths(lengths, counts, value_dtype, index_dtype)
            == width_for_counts(dense, value_dtype, index_dtype))


def statistics_buffer(lengths, rng) -> tuple[np.ndarray, np.ndarray, list[int], int]:
    """The statistics buffer's head and overflow list (kernels/matrix_stats.cu's layout, as the
    twin writes it) for rows of these lengths, with made-up words for the entries' places and
    SELL's slices (the summary only passes them on); and those words, and SELL's slots."""
    lengths = np.asarray(lengths, dtype=np.int64)
    head = np.zeros(twins.OUT_OVERFLOW, np.int64)
    nnz = int(lengths.sum())
    head[:twins.OUT_SLICE_WIDTHS] = structure = [*rng.multinomial(nnz, [0.3, 0.4, 0.3]), rng.integers(0, 10**12),
                                                 rng.integers(0, 10**6)]
    head[twins.OUT_SLICE_WIDTHS] = slice_widths = rng.integers(0, 2 * nnz + 1)
    head[twins.OUT_BINS:] = np.bincount(lengths[lengths < BINS], minlength=BINS)
    longer = rng.permutation(lengths[lengths >= BINS])
    head[twins.OUT_OVERFLOW_ROWS], head[twins.OUT_LONGEST] = longer.size, lengths.max()
    return head, longer, structure, int(slice_widths) * twins.SELL_SLICE


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


@settings(max_examples=150, deadline=None)
@given(length_groups(), st.sampled_from([(4, 4), (8, 4), (16, 4), (8, 8), (16, 8)]), st.integers(0, 2**32 - 1))
def test_summary_matches_numpy_on_any_length_histogram(groups, value_and_index_bytes, seed):
    """The host summary of a statistics buffer, against the statistics computed afresh from every
    row's length, on histograms of every shape: few lengths, lengths over all the bins, rows
    past the bins (a quantile, HYB's width among them or not)."""
    rng = np.random.default_rng(seed)
    lengths = rng.permutation(np.repeat(np.array(list(groups), dtype=np.int64), list(groups.values())))
    head, longer, structure, slots = statistics_buffer(lengths, rng)
    value_bytes, index_bytes = value_and_index_bytes
    n_cols = int(rng.integers(1, 10**6))
    assert (advisor._summarise(head, longer, (lengths.size, n_cols), int(lengths.sum()), value_bytes, index_bytes)
            == stats_of_lengths(lengths, n_cols, structure, slots, value_bytes, index_bytes))


@pytest.mark.parametrize("label, groups", [
    ("most rows past the bins", {BINS + 904: 50, 3: 10}),
    ("p99 past the bins", {BINS + 904: 3, 3: 197}),
    ("HYB's width may be past the bins", {BINS: 300, BINS - 1: 1000, 0: 5}),
    ("more candidate widths than HYB_WINDOW", {k: 1 + k % 3 for k in range(0, 4000, 3)}),
    ("a long row among short ones", {3: 5000, 3 * BINS + 7: 1}),
])
def test_summary_of_the_bins_declines_what_the_bins_do_not_settle(label, groups, rng):
    """Where a quantile or a candidate for HYB's width lies past the bins, or too many lengths
    are candidates, the summary of the bins declines and the merged histogram's gives the same."""
    lengths = rng.permutation(np.repeat(np.array(list(groups), dtype=np.int64), list(groups.values())))
    head, longer, structure, slots = statistics_buffer(lengths, rng)
    longest = int(lengths.max())
    bins = head[twins.OUT_BINS:twins.OUT_BINS + min(longest + 1, BINS)]
    settled = advisor._summary_of_bins(bins, longer, longest, lengths.size, int(lengths.sum()), 8, 4, 64)
    assert (settled is None) == (label != "a long row among short ones"), label
    assert (advisor._summarise(head, longer, (lengths.size, 5 * BINS), int(lengths.sum()), 8, 4)
            == stats_of_lengths(lengths, 5 * BINS, structure, slots, 8, 4)), label


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.integers(0, 3000), st.integers(1, 10**5), min_size=1, max_size=40),
       st.sampled_from([4, 8, 16]), st.sampled_from([4, 8]), st.integers(0, 3000))
def test_the_host_summaries_agree(histogram, value_bytes, index_bytes, limit):
    """The NumPy summary of the distinct lengths, the summary of the dense bins (where it settles
    the histogram) and the Python one of a short dense histogram give the same bits: their
    float64 costs are exact here, below 2^53, as for any matrix that fits in device memory."""
    lengths = np.array(sorted(histogram), dtype=np.int64)
    counts = np.array([histogram[k] for k in lengths.tolist()], dtype=np.int64)
    dense = np.zeros(lengths[-1] + 1, dtype=np.int64)
    dense[lengths] = counts
    m, entries = int(counts.sum()), int(counts @ lengths)
    many = advisor._summary_of_many(lengths, counts, m, value_bytes, index_bytes, limit)
    assert all(type(a) is type(b) for a, b in zip(many, (0, 0, 0, 0.0, [], 0, 0.0, 0)))
    bins = advisor._summary_of_bins(dense, np.zeros(0, np.int64), int(lengths[-1]), m, entries, value_bytes,
                                    index_bytes, limit)
    assert bins is None or bins == many
    if dense.size <= advisor.DENSE_BINS:
        assert advisor._summary_of_dense(dense.tolist(), m, entries, value_bytes, index_bytes, limit) == many


#: (DIRECT_MAX_ENTRIES, SINGLE_BLOCK_ITEMS) that send every matrix through one of the GPU passes:
#: csr_stats_direct on as many blocks as its rule gives (one only below 2048 items), on one block
#: wherever the rows fit it (at most STATS_WINDOW), or csr_stats then stats_summary.
PASSES = {"direct": (2**62, 0), "single": (2**62, 2**62), "tiled": (-1, 0)}


def use_pass(patch: pytest.MonkeyPatch, name: str) -> None:
    patch.setattr(advisor, "DIRECT_MAX_ENTRIES", PASSES[name][0])
    patch.setattr(advisor, "SINGLE_BLOCK_ITEMS", PASSES[name][1])


@pytest.fixture(params=list(PASSES))
def statistics_pass(request, monkeypatch) -> str:
    """Runs the test with each GPU pass (:data:`PASSES`) for every matrix, whatever its size."""
    use_pass(monkeypatch, request.param)
    return request.param


def gpu_and_cpu_buffers(S, index_dtype):
    gpu = sparsegpu.CSR.from_scipy(S, index_dtype=index_dtype, backend="gpu")
    cpu = sparsegpu.CSR.from_scipy(S, index_dtype=index_dtype, backend="cpu")
    return gpu, cpu, advisor._statistics_buffer(gpu), advisor._statistics_buffer(cpu)


def assert_same_buffer(kernel: np.ndarray, twin: np.ndarray, label: str) -> None:
    """Bitwise equal, the overflow list compared as a multiset (the kernel appends in any order)."""
    assert kernel.dtype == twin.dtype and kernel.shape == twin.shape, label
    head = twins.OUT_OVERFLOW
    np.testing.assert_array_equal(kernel[:head], twin[:head], err_msg=label)
    longer = int(twin[twins.OUT_OVERFLOW_ROWS])
    np.testing.assert_array_equal(np.sort(kernel[head:head + longer]), np.sort(twin[head:head + longer]), err_msg=label)
    np.testing.assert_array_equal(kernel[head + longer:], twin[head + longer:], err_msg=label)


@pytest.mark.gpu
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_gpu_statistics_match_twin_on_edge_and_generated_matrices(index_dtype, rng, statistics_pass):
    cases = edge_matrices(rng)
    cases.update({family: datasets.generate(family, "small") for family in datasets.GENERATED})
    # Many more tiles than resident blocks, so every block takes several tickets, with rows
    # past the bins scattered over many blocks and a partial last slice.
    lengths = rng.integers(0, 12, 3_000_017)
    lengths[rng.choice(lengths.size, 40, replace=False)] = rng.integers(BINS - 2, 3 * BINS, 40)
    cases["three million rows"] = from_lengths(lengths, 4 * BINS, rng)
    cases["uniform rows"] = datasets.generate("poisson2d", "medium")
    for label, S in cases.items():
        gpu, cpu, kernel, twin = gpu_and_cpu_buffers(S, index_dtype)
        assert_same_buffer(kernel, twin, label)
        assert advisor.matrix_stats(gpu) == advisor.matrix_stats(cpu) == numpy_stats(cpu), label


@requires_matrices
@pytest.mark.gpu
@pytest.mark.parametrize("name", REAL_MATRICES)
def test_gpu_statistics_match_twin_on_real_matrices(name, statistics_pass):
    gpu, cpu, kernel, twin = gpu_and_cpu_buffers(datasets.load_matrix(name), None)
    assert_same_buffer(kernel, twin, name)
    assert advisor.matrix_stats(gpu) == advisor.matrix_stats(cpu)


@pytest.mark.gpu
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_gpu_kernel_writes_only_its_words(index_dtype, rng):
    """The overflow list's unused room keeps its poison; every counted word is the twin's; the
    kernel runs again on the same queue with a later epoch (its slots from the first run are
    stale) and gives the same buffer."""
    import cupy

    lengths = rng.integers(0, 30, 5000)
    lengths[[7, 2500, 4999]] = 40 * BINS, 2 * BINS, BINS + 1  # one row handed on in chunks
    S = from_lengths(lengths, 41 * BINS, rng)
    gpu = sparsegpu.CSR.from_scipy(S, index_dtype=index_dtype, backend="gpu")
    poison = np.uint64(0xDEADBEEFDEADBEEF)
    counters, head = advisor.STATS_COUNTERS, twins.OUT_OVERFLOW
    queue = cupy.zeros(advisor.QUEUE_WORDS * advisor.queue_capacity(S.nnz, np.dtype(index_dtype).itemsize), np.uint64)
    cpu = sparsegpu.CSR.from_scipy(S, index_dtype=index_dtype, backend="cpu")
    twin = advisor._statistics_buffer(cpu).view(np.uint64)
    for epoch in (1, 2):
        buffer = cupy.full(counters + head + twins.overflow_capacity(S.nnz), poison, dtype=np.uint64)
        buffer[:counters + head] = 0
        advisor._statistics_kernel(gpu, buffer, queue, epoch)
        kernel = buffer.get()[counters:]
        np.testing.assert_array_equal(kernel[:head], twin[:head])
        assert sorted(kernel[head:head + 3].tolist()) == [BINS + 1, 2 * BINS, 40 * BINS]
        assert (kernel[head + 3:] == poison).all()
    published = queue.get().reshape(-1, advisor.QUEUE_WORDS)[:, 2]
    assert (published == 2).sum() >= 40 * BINS // (advisor.STATS_ITEM_BYTES // np.dtype(index_dtype).itemsize) - 1


@pytest.mark.gpu
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_gpu_direct_pass_writes_only_its_words(index_dtype, rng):
    """csr_stats_direct launched afresh without a record: the overflow list's unused room keeps
    its poison, every counted word is the twin's, and the counters hold only the blocks' tickets
    (none: without a record no block takes one)."""
    import cupy

    lengths = rng.integers(0, 30, 5000)
    lengths[[7, 2500, 4999]] = 40 * BINS, 2 * BINS, BINS + 1  # one row spread over many blocks
    S = from_lengths(lengths, 41 * BINS, rng)
    gpu = sparsegpu.CSR.from_scipy(S, index_dtype=index_dtype, backend="gpu")
    cpu = sparsegpu.CSR.from_scipy(S, index_dtype=index_dtype, backend="cpu")
    twin = advisor._statistics_buffer(cpu).view(np.uint64)
    poison = np.uint64(0xDEADBEEFDEADBEEF)
    counters, head = advisor.STATS_COUNTERS, twins.OUT_OVERFLOW
    buffer = cupy.full(counters + head + twins.overflow_capacity(S.nnz), poison, dtype=np.uint64)
    buffer[:counters + head] = 0
    expression, grid, arguments = advisor._direct_arguments(gpu, buffer, 1, 0)
    assert grid[0] > 1
    advisor.STATS_KERNELS.function(expression, np.float64, index_dtype)(grid, (advisor.STATS_BLOCK,), arguments)
    words = buffer.get()
    assert not words[:counters].any()
    kernel = words[counters:]
    np.testing.assert_array_equal(kernel[:head], twin[:head])
    assert sorted(kernel[head:head + 3].tolist()) == [BINS + 1, 2 * BINS, 40 * BINS]
    assert (kernel[head + 3:] == poison).all()


def structure_cases(rng) -> dict[str, sp.csr_array]:
    """Matrices for csr_stats's tiles (up to 2016 rows), work items (16384 int32 or 8192 int64
    entries) and pieces (2048 or 1024 entries): tiles of empty rows only, rows longer than an
    item (handed on in chunks), a row of millions of entries (chunks spread over the device),
    every tile handing on chunks, entry counts off the item and the piece, trailing empty rows,
    tiles mixing rows walked by a thread (under 32 entries in a piece) with rows shared by the
    block in 32-entry segments, rows of equal even lengths (the walks' skew), rows ending exactly
    at piece ends followed by empty rows; and rows far from their mean length, a drift that
    csr_stats_direct's guessed windows miss."""
    mixed = np.concatenate([rng.integers(0, 11, 3000), rng.integers(20, 41, 1500), rng.integers(100, 5000, 60)])
    rng.shuffle(mixed)
    at_piece_ends = np.zeros(6000, np.int64)
    at_piece_ends[::3] = 64
    sparse_rows = np.zeros(300_000, np.int64)
    sparse_rows[rng.choice(sparse_rows.size, 700, replace=False)] = rng.integers(1, 40, 700)
    around_items = np.full(4096, 4)  # items end at row ends (int32 and int64 items)
    long_rows = rng.integers(0, 5, 9000)
    long_rows[[10, 4000, 8999]] = 3 * 16384 + 11, 16384, 2 * 8192 + 1
    very_long = rng.integers(0, 3, 50_000)
    very_long[31_337] = 3_000_000
    # Rows unlike their mean (csr_stats_direct guesses a block's rows from it): the split falls
    # before, inside and past the guessed window of pointers, by a little and by a lot.
    drifting = np.concatenate([np.full(60_000, 9), np.full(60_000, 1)])
    return {
        "long rows, then short ones": from_lengths(drifting, 3000, rng),
        "short rows, then long ones": from_lengths(drifting[::-1].copy(), 3000, rng),
        "rows growing with the index": from_lengths(np.arange(120_000) // 8000, 3000, rng),
        "few entries among 300000 rows": from_lengths(sparse_rows, 50_000, rng),
        "items end at row ends": from_lengths(around_items, 5000, rng),
        "rows longer than an item": from_lengths(long_rows, 5 * 16384, rng),
        "one row of three million entries": from_lengths(very_long, 3_000_001, rng),
        "every tile hands on chunks": from_lengths(rng.integers(500, 700, 2000), 800, rng),
        "one entry per row, nnz off the item": from_lengths(np.ones(3 * 16384 + 5, np.int64), 20_000, rng),
        "trailing empty rows": from_lengths(np.concatenate([rng.integers(0, 9, 7000), np.zeros(20_000, np.int64)]),
                                            9000, rng),
        "short and long rows in one tile": from_lengths(mixed, 7000, rng),
        "rows of 31, 32 and 33 entries": from_lengths(rng.choice([0, 31, 32, 33], 3000), 4000, rng),
        "rows of equal even lengths": from_lengths(rng.choice([2, 4, 8, 16], 6000), 3000, rng),
        "rows ending at piece ends, then empty rows": from_lengths(at_piece_ends, 500, rng),
        "one entry": from_lengths([0, 0, 1, 0], 4, rng),
        "1x1": sp.csr_array(np.ones((1, 1))),
        "empty 1x1": sp.csr_array((1, 1)),
    }


@pytest.mark.gpu
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_gpu_structure_tiles_and_chunks(index_dtype, rng, statistics_pass):
    """Each case, then each again after a larger one (the reused workspace holds stale counts,
    overflow lengths and queue slots of older epochs), and with indices not 16-byte aligned
    (the scalar loads)."""
    import cupy

    cases = structure_cases(rng)
    for label, S in list(cases.items()) + list(cases.items())[::-1]:
        gpu, cpu, kernel, twin = gpu_and_cpu_buffers(S, index_dtype)
        assert_same_buffer(kernel, twin, label)
        assert advisor.matrix_stats(gpu) == advisor.matrix_stats(cpu) == numpy_stats(cpu), label
        shifted = cupy.empty(gpu.indices.size + 1, gpu.indices.dtype)
        shifted[1:] = gpu.indices
        unaligned = sparsegpu.CSR._make(gpu.data, shifted[1:], gpu.indptr, gpu.shape, "gpu")
        assert_same_buffer(advisor._statistics_buffer(unaligned), twin, label + " (indices not 16-byte aligned)")


@pytest.mark.gpu
def test_gpu_workspace_launches_what_a_fresh_launch_would(monkeypatch, rng, statistics_pass):
    """The launch the workspace packs and keeps between calls (grid, arguments) is the one
    _statistics_arguments (_direct_arguments) builds afresh on the same buffer, queue and epoch:
    matrices one after another, growing the workspace, then smaller again, then of the same shape
    with other arrays, with either index type; the statistics stay right."""
    import cupy

    from sparsegpu._kernels import PackedLaunch

    launched, launch = [], PackedLaunch.__call__

    def recording(self, grid, block, stream):
        launched.append((self.handle, grid, block, self.values()))
        launch(self, grid, block, stream)

    monkeypatch.setattr(PackedLaunch, "__call__", recording)
    monkeypatch.setattr(advisor, "_WORKSPACES", advisor._Workspaces())
    small = from_lengths(rng.integers(0, 9, 3000), 500, rng)
    large = from_lengths(np.concatenate([rng.integers(0, 40, 200_000), [3 * BINS, 40 * BINS]]), 41 * BINS, rng)
    for index_dtype in (np.int32, np.int64, np.int32):
        for S in (small, large, small, small.copy()):
            gpu = sparsegpu.CSR.from_scipy(S, index_dtype=index_dtype, backend="gpu")
            launched.clear()
            advisor._read_statistics(gpu)  # the statistics alone, left in the buffer
            space = advisor._workspace()
            if statistics_pass != "tiled":
                expression, (grid,), arguments = advisor._direct_arguments(gpu, space.buffer, space.epoch, 0)
            else:
                expression = "csr_stats<{I}>"
                (grid,), arguments = advisor._statistics_arguments(gpu, space.buffer, space.queue, space.epoch)
            kernel = advisor.STATS_KERNELS.function(expression, np.float64, index_dtype).kernel.ptr
            assert launched == [(kernel, grid, advisor.STATS_BLOCK,
                                 [a.data.ptr if isinstance(a, cupy.ndarray) else int(a) for a in arguments])]
            assert advisor.matrix_stats(gpu) == numpy_stats(sparsegpu.CSR.from_scipy(S, index_dtype=index_dtype,
                                                                                      backend="cpu"))
            # then the direct pass summarising into the record, or csr_stats and stats_summary
            assert len(launched) == (3 if statistics_pass == "tiled" else 2)
            if statistics_pass != "tiled":
                assert launched[-1][3][10] == space.record.ctypes.data


@pytest.mark.gpu
def test_gpu_statistics_are_the_same_every_run(rng, statistics_pass):
    S = datasets.generate("powerlaw", "medium")
    gpu = sparsegpu.CSR.from_scipy(S, backend="gpu")
    first = advisor._statistics_buffer(gpu)
    for _ in range(5):
        again = advisor._statistics_buffer(gpu)
        np.testing.assert_array_equal(again[:twins.OUT_OVERFLOW], first[:twins.OUT_OVERFLOW])
        np.testing.assert_array_equal(np.sort(again[twins.OUT_OVERFLOW:]), np.sort(first[twins.OUT_OVERFLOW:]))


@pytest.mark.gpu
@pytest.mark.parametrize("copied_with_head", [1024, 2])
def test_gpu_overflow_rows_read_with_the_head_or_after(monkeypatch, rng, copied_with_head, statistics_pass):
    # Five rows past the bins, with a repeated length: the head that a launch leaves to the host
    # is read with them, or (when fewer are copied with it) by a second copy.
    monkeypatch.setattr(advisor, "HEAD_OVERFLOW_ROWS", copied_with_head)
    lengths = np.array([3] * 50 + [5000, 7000, 5000, 4096, 9000] + [0] * 20)
    rng.shuffle(lengths)
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    indices = np.concatenate([np.sort(rng.choice(10000, k, replace=False)) for k in lengths]).astype(np.int32)
    S = sp.csr_array((rng.standard_normal(indices.size), indices, indptr), shape=(lengths.size, 10000))
    gpu, cpu = (sparsegpu.CSR.from_scipy(S, backend=b) for b in ("gpu", "cpu"))
    assert_same_buffer(advisor._statistics_buffer(gpu), advisor._statistics_buffer(cpu), str(copied_with_head))
    assert advisor.matrix_stats(gpu) == advisor.matrix_stats(cpu) == numpy_stats(cpu)


@pytest.mark.gpu
def test_gpu_statistics_of_empty_matrices(statistics_pass):
    for shape in [(0, 0), (0, 5), (5, 0), (1, 1), (3000, 7)]:
        S = sp.csr_array(shape)
        gpu = sparsegpu.CSR.from_scipy(S, backend="gpu")
        cpu = sparsegpu.CSR.from_scipy(S, backend="cpu")
        assert advisor.matrix_stats(gpu) == advisor.matrix_stats(cpu) == numpy_stats(cpu), shape


def test_lower_triangular_is_recognised(backend):
    S = sp.csr_array(sp.tril(sp.random_array((300, 300), density=0.05, rng=0)) + sp.eye_array(300))
    assert advisor.matrix_stats(S, backend=backend).triangular == "lower"


def test_advice_is_complete_and_readable(backend):
    advice = sparsegpu.advise(tridiagonal(2000), backend=backend)
    assert advice.format in advisor.CANDIDATES
    assert advice.ranking[0] == advice.format and set(advice.ranking) <= set(advisor.CANDIDATES)
    assert all(e.bytes > 0 and e.time_us > 0 for e in advice.estimates.values())
    assert len(advice.reason) > 40 and advice.reason.endswith(".")
    text = repr(advice)
    assert text.startswith(f"Advice: {advice.format}") and "predicted" in text
    assert advice.as_dict()["stats"]["rows"] == 2000


def test_advice_avoids_row_per_thread_formats_for_one_huge_row(backend, rng):
    S = sp.random_array((20000, 20000), density=2e-4, rng=rng, format="lil")
    S[7, :] = 1.0
    advice = sparsegpu.advise(sp.csr_array(S), backend=backend)
    # SELL qualifies only because its conversion splits the long row into parts.
    assert advice.format in ("csr", "hyb", "coo", "sell"), repr(advice)
    assert advisor.sell_layout(advice.stats).mode == "units"
    assert advice.estimates["ell"].refused
    assert advice.estimates["jds"].time_us > 10 * advice.estimates[advice.format].time_us


def test_conversion_must_pay_off(backend, rng):
    S = sp.random_array((5000, 5000), density=1e-3, rng=rng, format="csr")
    once = sparsegpu.advise(S, n_spmv=1, backend=backend)
    assert once.format == "csr" and set(once.payoff) >= {"csr"}
    many = sparsegpu.advise(S, n_spmv=10**6, backend=backend)
    assert many.format == min(many.payoff, key=many.payoff.__getitem__)
    with pytest.raises(ValueError, match="n_spmv"):
        sparsegpu.advise(S, n_spmv=0, backend=backend)


def test_from_scipy_auto(backend, rng):
    S = sp.random_array((400, 300), density=0.02, rng=rng, format="csr")
    A = sparsegpu.from_scipy(S, format="auto", backend=backend)
    assert A.format == (sparsegpu.advise(S, backend=backend).format if backend == "gpu" else "csr")
    x = rng.standard_normal(300)
    np.testing.assert_allclose(np.asarray(A @ x), S @ x, rtol=1e-12, atol=1e-12)


def test_sparsegpu_matrices_are_accepted(backend, rng):
    S = sp.random_array((100, 100), density=0.05, rng=rng, format="csr")
    for fmt in ("coo", "csc"):
        assert sparsegpu.advise(sparsegpu.from_scipy(S, format=fmt, backend=backend)).stats.nnz == S.nnz


def test_bad_input():
    with pytest.raises(TypeError, match="dense 3-D"):
        sparsegpu.advise(np.ones((2, 2, 2)))
    with pytest.raises(TypeError, match="scipy.sparse"):
        sparsegpu.advise("not a matrix")
    S = tridiagonal(10)
    S.indices = S.indices.astype(np.float64)
    S.indices[3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        sparsegpu.advise(S)


def test_autotune_needs_the_gpu():
    with pytest.raises(ValueError, match="GPU"):
        sparsegpu.advise(tridiagonal(10), autotune=True, backend="cpu")


# --------------------------------------------------------------------------- the model


def calibrate_script():
    """scripts/calibrate_advisor.py as a module (its fit is what writes the calibration)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "scripts" / "calibrate_advisor.py"
    spec = importlib.util.spec_from_file_location("calibrate_advisor", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def model_cases(rng) -> dict[str, sp.csr_array]:
    """Generated families, the awkward shapes, and a power-law graph with hub rows."""
    cases = {family: datasets.generate(family, "small") for family in sorted(datasets.GENERATED)}
    cases.update(edge_matrices(rng))
    lengths = np.minimum(rng.zipf(1.8, 3000), 2500)
    cases["hub rows"] = from_lengths(lengths, 3000, rng)
    return cases


def test_estimates_are_finite_and_follow_the_model(rng):
    model = advisor.calibration()
    for label, S in model_cases(rng).items():
        est = advisor.estimates(advisor.matrix_stats(S, backend="cpu"))
        assert set(est) == set(advisor.CANDIDATES), label
        for name, e in est.items():
            assert all(math.isfinite(t) and t > 0 for t in (e.time_us, e.host_us, e.device_us)), (label, name)
            assert e.time_us == max(e.host_us, e.device_us), (label, name)
            assert e.host_us >= model["call_us"][name] and e.device_us >= e.launches * model["kernel_us"], (label, name)
            assert e.bytes >= 0 and e.launches >= 1 and e.serial_steps >= 0, (label, name)


def test_rows_past_the_sub_warp_limit_cost_csr_two_launches_and_an_array(rng):
    model = advisor.calibration()
    stats = advisor.matrix_stats(sp.random_array((3000, 3000), density=0.002, rng=rng, format="csr"), backend="cpu")
    assert stats.csr_long_rows == 0
    plain = advisor.estimates(stats)["csr"]
    split = advisor.estimates(dataclasses.replace(stats, csr_long_rows=5, row_max=5000))["csr"]
    assert (plain.launches, split.launches) == (1, 3)
    assert split.host_us == pytest.approx(plain.host_us + 2 * model["launch_us"] + model["alloc_us"])


def test_the_coo_tree_adds_a_launch_and_two_arrays_per_level():
    model = advisor.calibration()
    stats = advisor.matrix_stats(tridiagonal(200), backend="cpu")  # 598 entries: two tiles, two levels
    coo = advisor.estimates(stats)["coo"]
    assert advisor._coo_launches(598) == 2 and advisor._coo_launches(advisor.COO_TILE) == 1
    assert coo.launches == 3  # y scaled, then the tree
    assert coo.host_us == pytest.approx(model["call_us"]["coo"] + 2 * model["launch_us"] + 2 * model["alloc_us"])


def test_ranking_leaves_out_refused_formats_and_prefers_csr_within_its_margin(backend, rng):
    def estimate(time_us: float) -> advisor.Estimate:
        return advisor.Estimate(bytes=1, launches=1, serial_steps=0, time_us=time_us)

    est = {"csr": estimate(10.4), "jds": estimate(10.0), "sell": estimate(5.0)}
    assert advisor.rank(est, ["csr", "jds"]) == ["csr", "jds"]
    assert advisor.rank(est, ["jds", "csr", "sell"]) == ["sell", "jds", "csr"]
    est["csr"] = estimate(10.0 * advisor.CSR_MARGIN * 1.01)
    assert advisor.rank(est, ["csr", "jds"]) == ["jds", "csr"]
    advice = sparsegpu.advise(model_cases(rng)["hub rows"], backend=backend)
    assert advice.estimates["ell"].refused and "ell" not in advice.ranking
    assert advice.format == advice.ranking[0] and advice.estimates[advice.format].refused is None


def test_sell_layout_follows_sells_own_rules(rng):
    """On matrices too small for ``split`` to exceed SPLIT_MIN, the predicted split, parts and
    mode are the conversion's (the mode where the hot columns are predicted right), and the
    slots within a factor of two of its slots when the sigma is (the sigma is predicted from
    estimated slots, so it may differ near choose_sigma's threshold; on the real matrices the
    slots come within 25%)."""
    from sparsegpu.formats import SELL

    for label, S in model_cases(rng).items():
        if S.shape[0] == 0:
            continue
        A = SELL.from_scipy(S, backend="cpu")
        layout = advisor.sell_layout(advisor.matrix_stats(S, backend="cpu"))
        widest = int(np.diff(A.slice_ptr).max()) // DEFAULT_C
        assert layout.split == A.split, label
        assert layout.parts_of_longest == (-(-widest // A.split) if widest > A.split else 1), label
        if layout.hot == bool(A.hot):
            assert layout.mode == A.mode, label
        if layout.sigma == A.sigma:
            assert int(A.slice_ptr[-1]) / 2 <= layout.slots <= 2 * int(A.slice_ptr[-1]), label


@requires_matrices
def test_sell_layout_predicts_the_mode_of_every_real_matrix():
    from sparsegpu.formats import SELL

    for name in REAL_MATRICES:
        S = datasets.load_matrix(name)
        A = SELL.from_scipy(S, backend="cpu")
        layout = advisor.sell_layout(advisor.matrix_stats(S, backend="cpu"))
        assert (layout.split, layout.mode) == (A.split, A.mode), name
        if layout.sigma == A.sigma:
            assert layout.slots == pytest.approx(int(A.slice_ptr[-1]), rel=0.25), name


def source_constant(file: str, name: str) -> int:
    """A ``constexpr int NAME = value;`` of kernels/FILE."""
    from sparsegpu._kernels import read_source

    match = re.search(rf"\b{name} = (\d+);", read_source(file))
    assert match, (file, name)
    return int(match.group(1))


def test_the_model_mirrors_the_kernels_constants():
    assert advisor.SELL_PARTS_IN_FLIGHT == source_constant("spmv_sell.cu", "PARTS_IN_FLIGHT")
    assert advisor.ROUND_SLOTS == source_constant("spmv_ell.cu", "PADDED_UNROLL") == source_constant(
        "spmv_jds.cu", "JDS_UNROLL")
    assert advisor.COO_TILE == source_constant("spmv_coo.cu", "TILE")


def test_calibration_file_holds_every_fitted_constant_within_its_bounds():
    script = calibrate_script()
    model = advisor.calibration()
    for k, name in enumerate(script._names()):
        group, _, key = name.partition(".")
        value = model[group][key] if key else model[group]
        _, low, high = script._bounds(k)
        assert low * (1 - 1e-9) <= value <= high * (1 + 1e-9), name
    assert model["copy_GBps"] > 0
    assert set(model["conversion_in_csr_spmv"]) == set(advisor.CANDIDATES)


def synthetic_measurements(rng, model: dict) -> dict:
    """Records as ``calibrate_advisor.py measure`` writes them, timed by ``model`` itself."""
    records = []
    for label, S in model_cases(rng).items():
        if S.nnz == 0:
            continue
        stats = advisor.matrix_stats(S, backend="cpu")
        est = advisor.estimates(stats, model)
        records.append({"matrix": label, "stats": dataclasses.asdict(stats),
                        "time_us": {f: e.time_us for f, e in est.items() if e.refused is None},
                        "conversion_in_csr_spmv": {f: 1.0 for f in advisor.CANDIDATES}})
    return {"device": "the model itself", "copy_GBps": model["copy_GBps"], "records": records}


def test_fit_reproduces_times_made_by_the_model(rng, tmp_path, monkeypatch, capsys):
    """The fit (from its own starting point) and its leave-one-out report, on times the current
    calibration predicts: every refit predicts them again and advises the fastest."""
    script = calibrate_script()
    data = synthetic_measurements(rng, advisor.calibration())
    measurements = tmp_path / "measurements.json"
    measurements.write_text(json.dumps(data))
    monkeypatch.setattr(advisor, "CALIBRATION_FILE", tmp_path / "calibration.json")
    advisor.calibration.cache_clear()
    try:
        script.fit(measurements)
        fitted = advisor.calibration()
        for record in data["records"]:
            est = advisor.estimates(advisor.MatrixStats(**record["stats"]), fitted)
            for f, t in record["time_us"].items():
                assert est[f].time_us == pytest.approx(t, rel=0.02), (record["matrix"], f)
    finally:
        advisor.calibration.cache_clear()
    out = capsys.readouterr().out
    n = len(data["records"])
    assert f"in-sample: advised within 10% of the measured best on {n}/{n}" in out
    assert f"leave-one-out: advised within 10% of the measured best on {n}/{n}" in out


def test_reasons_describe_sells_mode_and_csrs_margin(rng):
    hubs = advisor.matrix_stats(model_cases(rng)["hub rows"], backend="cpu")
    assert advisor.sell_layout(hubs).mode == "units"
    units = advisor._sell_reason(hubs)
    assert "cut into parts" in units and "one launch" in units and "two more launches" in units
    assert "a thread per row" in advisor._sell_reason(advisor.matrix_stats(tridiagonal(500), backend="cpu"))
    stats = advisor.matrix_stats(tridiagonal(500), backend="cpu")
    est = advisor.estimates(stats)
    est["csr"].time_us, est["jds"].time_us = 10.3, 10.0
    ranking = advisor.rank(est, ["csr", "jds"])
    assert ranking == ["csr", "jds"]
    assert "so CSR is kept" in advisor._reason("csr", stats, est, ranking)


# --------------------------------------------------------------------------- the kernel's own summary


@st.composite
def gpu_length_groups(draw) -> dict[int, int]:
    """Row lengths as {length: rows} for matrices built on the device: a few short lengths,
    lengths anywhere in the bins, a few rows past the bins (repeated lengths among them), so
    that each quantile and HYB's width fall among the bins or past them."""
    groups = draw(st.dictionaries(st.integers(0, 63), st.integers(1, 3000), max_size=8))
    groups.update(draw(st.dictionaries(st.integers(0, BINS - 1), st.integers(1, 300), max_size=draw(
        st.sampled_from([0, 3, 30])))))
    groups.update(draw(st.dictionaries(st.integers(BINS, 3 * BINS), st.integers(1, 4), max_size=6)))
    return groups or {draw(st.integers(0, 3 * BINS)): 1}


@pytest.mark.gpu
@settings(max_examples=60, deadline=None)
@given(gpu_length_groups(), st.sampled_from([np.float32, np.float64, np.complex128]),
       st.sampled_from([np.int32, np.int64]), st.sampled_from(list(PASSES)), st.integers(0, 2**32 - 1))
def test_gpu_summary_matches_the_host_summary(groups, value_dtype, index_dtype, statistics_pass, seed):
    """Matrices on the device, summarised into host memory (by stats_summary, or by the direct
    pass's last block), against the host's summary of the same statistics (its twin) and against
    NumPy, on histograms of every shape."""
    rng = np.random.default_rng(seed)
    lengths = rng.permutation(np.repeat(np.array(list(groups), dtype=np.int64), list(groups.values())))
    S = from_lengths(lengths, 3 * BINS + 1, rng).astype(value_dtype)
    gpu, cpu = (sparsegpu.CSR.from_scipy(S, index_dtype=index_dtype, backend=b) for b in ("gpu", "cpu"))
    with pytest.MonkeyPatch.context() as patch:
        use_pass(patch, statistics_pass)
        assert advisor.matrix_stats(gpu) == advisor.matrix_stats(cpu) == numpy_stats(cpu)
        assert advisor._workspace().record[advisor.RECORD_STATUS] == advisor.STATUS_SUMMARISED


@st.composite
def short_length_groups(draw) -> dict[int, int]:
    """Row lengths as {length: rows} for the warp summary (every length below WARP_SUMMARY_BINS):
    a few short lengths, sometimes a few rows at its last bins or just past them."""
    groups = draw(st.dictionaries(st.integers(0, 40), st.integers(1, 400), min_size=1, max_size=6))
    groups.update(draw(st.dictionaries(st.integers(WARP_SUMMARY_BINS - 3, WARP_SUMMARY_BINS + 1), st.integers(1, 3),
                                       max_size=draw(st.sampled_from([0, 2])))))
    return groups


@pytest.mark.gpu
@settings(max_examples=60, deadline=None)
@given(short_length_groups(), st.sampled_from([np.float32, np.float64, np.complex128]),
       st.sampled_from([np.int32, np.int64]), st.sampled_from(list(PASSES)), st.integers(0, 2**32 - 1))
def test_gpu_short_rows_summary_is_the_hosts_word_for_word(groups, value_dtype, index_dtype, statistics_pass, seed):
    """Matrices of short rows, most small enough for one block (the warp summary from its shared
    bins, or from the buffer after many blocks or csr_stats, or past its bins the block's): the
    record, poisoned first, word for word the host's, and the buffer zero again."""
    rng = np.random.default_rng(seed)
    lengths = rng.permutation(np.repeat(np.array(list(groups), dtype=np.int64), list(groups.values())))
    S = from_lengths(lengths, 2 * WARP_SUMMARY_BINS, rng).astype(value_dtype)
    gpu, cpu = (sparsegpu.CSR.from_scipy(S, index_dtype=index_dtype, backend=b) for b in ("gpu", "cpu"))
    with pytest.MonkeyPatch.context() as patch:
        use_pass(patch, statistics_pass)
        space = advisor._workspace()
        space.record[advisor.RECORD_HEAD:] = -7
        assert advisor.matrix_stats(gpu) == advisor.matrix_stats(cpu) == numpy_stats(cpu)
        assert space.record[advisor.RECORD_STATUS] == advisor.STATUS_SUMMARISED
        host = advisor._record_of_buffer(*advisor._read_statistics(cpu), S.shape[0], S.nnz, S.dtype.itemsize,
                                         np.dtype(index_dtype).itemsize)
        kernel = space.record[advisor.RECORD_HEAD:].tolist()
        used = len(host) if host[twins.OUT_LONGEST] >= sell_module.HOT_MIN_GATHERS else len(host) - 1
        for word in (twins.OUT_BINS + 2, twins.OUT_BINS + 7):  # (floats where the host sums in float64)
            kernel[word], host[word] = float(kernel[word]), float(host[word])
        assert kernel[:used] == host[:used]
        assert_workspace_zero()


def assert_workspace_zero() -> None:
    space = advisor._workspace()
    assert space.zero and not space.buffer[:advisor.STATS_COUNTERS + twins.OUT_OVERFLOW].any()


@pytest.mark.gpu
def test_gpu_summary_or_head_left_to_the_host(monkeypatch, rng, statistics_pass):
    """The kernel summarises unless more rows are past the bins than its list holds, or at least
    as many as SELL would stage (then the host summarises the head it leaves); either way the
    statistics are the host's and the buffer is zero again for the next call. Summarising calls
    write the record afresh: its words are poisoned first."""
    monkeypatch.setattr(advisor, "_WORKSPACES", advisor._Workspaces())
    past_list = np.concatenate([np.full(1100, BINS), rng.integers(0, 9, 3000)])
    cases = {"tridiagonal": (tridiagonal(5000), advisor.STATUS_SUMMARISED),
             "R-MAT": (datasets.generate("rmat", "small"), advisor.STATUS_SUMMARISED),
             "1100 rows past the bins": (from_lengths(past_list, BINS + 1, rng), advisor.STATUS_HEAD_KEPT),
             "after it": (from_lengths(rng.integers(0, 60, 7000), 100, rng), advisor.STATUS_SUMMARISED)}
    for label, (S, status) in cases.items():
        gpu, cpu = (sparsegpu.CSR.from_scipy(S, backend=b) for b in ("gpu", "cpu"))
        space = advisor._workspace()
        space.record[advisor.RECORD_HEAD:] = -7
        assert advisor.matrix_stats(gpu) == advisor.matrix_stats(cpu) == numpy_stats(cpu), label
        assert space.record[advisor.RECORD_STATUS] == status, label
        if status == advisor.STATUS_SUMMARISED:  # word for word the host's (hot rows' entries where used)
            host = advisor._record_of_buffer(*advisor._read_statistics(cpu), *S.shape[:1], S.nnz, 8, 4)
            kernel = space.record[advisor.RECORD_HEAD:].tolist()
            used = len(host) if host[twins.OUT_LONGEST] >= sell_module.HOT_MIN_GATHERS else len(host) - 1
            assert kernel[:used] == host[:used], label
        assert_workspace_zero()
    # At least as many rows past the bins as SELL stages rows (a small HOT_BYTES): left to the host.
    monkeypatch.setattr(sell_module, "HOT_BYTES", 4 * 8)
    monkeypatch.setattr(advisor, "_WORKSPACES", advisor._Workspaces())
    for rows_past, status in [(3, advisor.STATUS_SUMMARISED), (4, advisor.STATUS_HEAD_KEPT)]:
        lengths = np.concatenate([rng.integers(0, 300, 2000), BINS + rng.integers(0, 50, rows_past)])
        S = from_lengths(rng.permutation(lengths), 2 * BINS, rng)
        gpu, cpu = (sparsegpu.CSR.from_scipy(S, backend=b) for b in ("gpu", "cpu"))
        assert advisor.matrix_stats(gpu) == advisor.matrix_stats(cpu) == numpy_stats(cpu), rows_past
        assert advisor._workspace().record[advisor.RECORD_STATUS] == status, rows_past
        assert_workspace_zero()


@pytest.mark.gpu
@pytest.mark.parametrize("blocks_per_sm", advisor.DIRECT_BLOCKS_PER_SM)
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_gpu_every_direct_instantiation_gives_the_statistics(monkeypatch, rng, blocks_per_sm, index_dtype):
    """Each instantiation of csr_stats_direct (its launch bounds and round: the grid picks one) on
    every grid: the statistics of the arrays, on rows short and long, regular and power-law; and
    on grids of a few blocks, each taking many rounds of columns and windows of pointers
    (DIRECT_POINTERS: 2048 or 1024 rows), with rows ending anywhere in a round."""
    expression = advisor.DIRECT_EXPRESSIONS[blocks_per_sm]
    monkeypatch.setattr(advisor, "direct_expression", lambda grid, sms: expression)
    monkeypatch.setattr(advisor, "_WORKSPACES", advisor._Workspaces())
    use_pass(monkeypatch, "direct")

    def few_blocks(m, nnz, itemsize, sms):  # as few as the rows allow: STATS_WINDOW rows a block
        grid = -(-m // advisor.STATS_WINDOW)
        return grid, advisor.STATS_WINDOW, -(-(m + nnz) // grid)

    def check(S):
        gpu, cpu = (sparsegpu.CSR.from_scipy(S, index_dtype=index_dtype, backend=b) for b in ("gpu", "cpu"))
        assert advisor.matrix_stats(gpu) == advisor.matrix_stats(cpu) == numpy_stats(cpu)
        assert advisor._workspace().last_plan.first.handle == advisor.STATS_KERNELS.function(
            expression, np.float64, index_dtype).kernel.ptr

    for S in (from_lengths(rng.integers(0, 40, 60_000), 64, rng), datasets.poisson2d(300),
              datasets.generate("rmat", "small"), from_lengths(rng.integers(0, 9, 3000), 500, rng)):
        check(S)
    monkeypatch.setattr(advisor, "direct_launch", few_blocks)
    check(from_lengths(rng.integers(0, 80, 5000), 3000, rng))  # three blocks of 10 to 22 rounds each
    # Two blocks, the first's entries spanning about 3500 rows (3000 empty).
    check(from_lengths(np.concatenate([np.zeros(3000, np.int64), rng.integers(60, 140, 1000)]), 900, rng))
    assert advisor._workspace().last_plan.grid == 2


@pytest.mark.gpu
def test_gpu_head_left_as_counted_when_the_rows_are_not_the_matrixs(rng, statistics_pass):
    """A CSR whose indptr was changed after its checks (its last row one entry short, so the
    bins count one entry fewer than the matrix holds): the warp summary, which zeroes the buffer
    while it works, puts the head back and leaves it to the host, so the statistics of the row
    lengths are the host's summary of those lengths, and the buffer is zero again afterwards."""
    S = from_lengths(rng.integers(1, 40, 5000), 64, rng).tocsr()
    gpu = sparsegpu.CSR.from_scipy(S, backend="gpu")
    gpu.indptr[-1] -= 1
    last = int(S.indptr[-1]) - 1
    counted = sp.csr_array((S.data[:last], S.indices[:last], np.append(S.indptr[:-1], last)), shape=S.shape)
    head, longer = advisor._read_statistics(sparsegpu.CSR.from_scipy(counted, backend="cpu"))
    expected = advisor._stats_of_record(advisor._record_of_buffer(head, longer, S.shape[0], S.nnz, 8, 4), S.shape,
                                        S.nnz, 8, 4)
    got = advisor.matrix_stats(gpu)
    assert advisor._workspace().record[advisor.RECORD_STATUS] == advisor.STATUS_HEAD_KEPT
    lengths_only = ("row_mean", "row_std", "row_min", "row_max", "row_quantiles", "row_cv", "empty_rows", "ell_fill",
                    "hyb_width", "hyb_ell_fraction", "sell_fill", "csr_long_rows")
    assert {k: getattr(got, k) for k in lengths_only} == {k: getattr(expected, k) for k in lengths_only}
    assert_workspace_zero()


@pytest.mark.gpu
def test_gpu_workspace_recovers_from_a_call_broken_off(rng, statistics_pass):
    """A call broken off between its launch and its end (here: a launch whose head is never read)
    leaves the workspace marked; the next call zeroes it first and gives the right statistics."""
    S = from_lengths(rng.integers(0, 40, 5000), 64, rng)
    gpu, cpu = (sparsegpu.CSR.from_scipy(S, backend=b) for b in ("gpu", "cpu"))
    space = advisor._workspace()
    space.launch(gpu, summarise=False)  # leaves its counts in the head, as a broken-off call would
    assert not space.zero
    assert advisor.matrix_stats(gpu) == numpy_stats(cpu)
    assert_workspace_zero()


@pytest.mark.gpu
@pytest.mark.parametrize("waiting", ["polled", "poll given up", "synchronised"])
def test_gpu_record_polled_or_waited_for(monkeypatch, rng, waiting, statistics_pass):
    """The record is read once its epoch shows (polled), or after the stream's synchronisation
    when the poll gives up or the host does not poll: the same statistics either way, and a
    record that never shows raises, after which the workspace gives the right statistics."""
    import cupy

    monkeypatch.setattr(advisor, "POLL_RECORD", waiting != "synchronised")
    if waiting == "poll given up":
        monkeypatch.setattr(advisor, "RECORD_POLL_NS", 0)
    for S in (from_lengths(rng.integers(0, 40, 5000), 64, rng), datasets.generate("rmat", "small")):
        gpu, cpu = (sparsegpu.CSR.from_scipy(S, backend=b) for b in ("gpu", "cpu"))
        assert advisor.matrix_stats(gpu) == numpy_stats(cpu)
        space = advisor._workspace()
        space.launch(gpu, summarise=True)
        space.epoch += 1  # not the epoch the kernel writes
        with pytest.raises(RuntimeError, match="without writing its record"):
            space.await_record(cupy.cuda.get_current_stream().ptr)
        assert advisor.matrix_stats(gpu) == numpy_stats(cpu)
        assert_workspace_zero()


@pytest.mark.gpu
def test_gpu_calls_on_other_streams(rng, statistics_pass):
    """Calls one after another on other streams, each read as soon as its record shows (its
    kernel may not have ended: it has zeroed the buffer before it published the record)."""
    import cupy

    matrices = [from_lengths(rng.integers(0, n, 20_000), 4 * n, rng) for n in (3, 40, 300)]
    streams = [cupy.cuda.Stream(non_blocking=True) for _ in range(3)]
    for _ in range(3):
        for S, stream in zip(matrices, streams):
            with stream:
                gpu = sparsegpu.CSR.from_scipy(S, backend="gpu")
                assert advisor.matrix_stats(gpu) == numpy_stats(sparsegpu.CSR.from_scipy(S, backend="cpu"))
                assert_workspace_zero()


def kernel_summary(head: np.ndarray, longer: np.ndarray, m: int, nnz: int, value_bytes: int,
                   index_dtype) -> list | None:
    """stats_summary run on this statistics buffer: the record's words from RECORD_HEAD on, or
    None where it leaves the head to the host; the head zeroed, or left as it was."""
    import cupy

    capacity = longer.size + 1  # (room for nnz / ROW_STATS_BINS rows would be too large for scaled histograms)
    words = np.zeros(advisor.STATS_COUNTERS + twins.OUT_OVERFLOW + capacity, np.int64)
    words[:advisor.STATS_COUNTERS] = 5  # counters as csr_stats leaves them
    words[advisor.STATS_COUNTERS:advisor.STATS_COUNTERS + twins.OUT_OVERFLOW] = head
    words[advisor.STATS_COUNTERS + twins.OUT_OVERFLOW:][:longer.size] = longer
    buffer = cupy.asarray(words.view(np.uint64))
    record = np.frombuffer(cupy.cuda.alloc_pinned_memory(advisor.RECORD_WORDS * 8), np.int64, advisor.RECORD_WORDS)
    record[:] = -7
    pointer = buffer.data.ptr
    advisor.STATS_KERNELS.function("stats_summary<{I}>", np.float64, index_dtype)(
        (1,), (advisor.STATS_BLOCK,), (np.uint64(pointer), np.uint64(pointer + 8 * advisor.STATS_COUNTERS),
                                        np.int64(m), np.int64(nnz), np.int64(capacity), np.uint64(11),
                                        np.uint64(record.ctypes.data), *advisor._summary_arguments(m, nnz, value_bytes)))
    cupy.cuda.runtime.deviceSynchronize()
    assert record[advisor.RECORD_EPOCH] == 11
    after = buffer.get().view(np.int64)
    if record[advisor.RECORD_STATUS] == advisor.STATUS_HEAD_KEPT:
        np.testing.assert_array_equal(after, words)
        return None
    assert record[advisor.RECORD_STATUS] == advisor.STATUS_SUMMARISED
    assert not after[:advisor.STATS_COUNTERS + twins.OUT_OVERFLOW].any()
    return record[advisor.RECORD_HEAD:].tolist()


@pytest.mark.gpu
@settings(max_examples=150, deadline=None)
@given(st.one_of(length_groups(), short_length_groups()), st.sampled_from([1, 1000, 10**6, 10**9]),
       st.sampled_from([(4, np.int32), (8, np.int32), (16, np.int32), (8, np.int64), (16, np.int64)]),
       st.integers(0, 2**32 - 1))
def test_gpu_summary_kernel_matches_its_twin(groups, scale, value_bytes_and_index, seed):
    """stats_summary on statistics buffers made on the host, against the host's summary word for
    word: histograms of every shape (few lengths, lengths over all the bins, rows past the bins,
    sometimes more than the kernel lists, only short rows: the warp summary's), their rows in the
    bins multiplied by up to 10^9 (costs
    past float64's exact integers, which the kernel leaves to the host). Unscaled histograms with
    at most SUMMARY_OVERFLOW_ROWS rows past the bins are always the kernel's own."""
    value_bytes, index_dtype = value_bytes_and_index
    rng = np.random.default_rng(seed)
    head = np.zeros(twins.OUT_OVERFLOW, np.int64)
    for length, rows in groups.items():
        if length < BINS:
            head[twins.OUT_BINS + length] = rows * scale
    longer = rng.permutation(np.repeat(np.array([k for k in groups if k >= BINS], dtype=np.int64),
                                       [groups[k] for k in groups if k >= BINS]))
    bins = head[twins.OUT_BINS:]
    m = int(bins.sum()) + longer.size
    nnz = int(bins @ np.arange(BINS)) + int(longer.sum())
    head[:twins.OUT_SLICE_WIDTHS] = [*rng.integers(0, nnz + 1, 3), rng.integers(0, 10**12), rng.integers(0, 10**6)]
    head[twins.OUT_SLICE_WIDTHS] = rng.integers(0, 2 * nnz + 1)
    head[twins.OUT_OVERFLOW_ROWS], head[twins.OUT_LONGEST] = longer.size, max(groups)
    words = kernel_summary(head, longer, m, nnz, value_bytes, index_dtype)
    if words is None:
        assert scale > 1 or longer.size > kernel_constant("SUMMARY_OVERFLOW_ROWS")
        return
    host = advisor._record_of_buffer(head, longer, m, nnz, value_bytes, np.dtype(index_dtype).itemsize)
    used = len(host) if max(groups) >= sell_module.HOT_MIN_GATHERS else len(host) - 1  # hot rows' entries
    # The squares and HYB's ELL entries: integers here, floats there where the host sums in
    # float64; the statistics round both once.
    for word in (twins.OUT_BINS + 2, twins.OUT_BINS + 7):
        words[word], host[word] = float(words[word]), float(host[word])
    assert words[:used] == host[:used]

"""sparsegpu/advisor/summary.py: the host summary of the statistics buffer against NumPy, its
three ways against each other, and the device's summary word for word against it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sparsegpu
from sparsegpu import advisor, datasets
from sparsegpu.advisor import statistics, summary
from sparsegpu.formats import sell as sell_module
from sparsegpu.formats.hyb import width_for_counts
from sparsegpu.reference import stats as reference_stats
from tests.advisor.helpers import (BINS, PASSES, WARP_SUMMARY_BINS, assert_workspace_zero, from_lengths,
                                   kernel_constant, length_groups, numpy_stats, statistics_buffer, stats_of_lengths,
                                   tridiagonal, use_pass)


def test_overflow_past_capacity_is_refused():
    head = np.zeros(reference_stats.OUT_OVERFLOW, np.int64)
    head[reference_stats.OUT_OVERFLOW_ROWS] = 3
    with pytest.raises(RuntimeError, match="not monotone"):
        summary._length_histogram(head, np.zeros(2, np.int64))
    with pytest.raises(RuntimeError, match="not monotone"):
        summary._summarise(head, np.zeros(2, np.int64), (5, 5), 3, 8, 4)


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
    assert (summary._summarise(head, longer, (lengths.size, n_cols), int(lengths.sum()), value_bytes, index_bytes)
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
    bins = head[reference_stats.OUT_BINS:reference_stats.OUT_BINS + min(longest + 1, BINS)]
    settled = summary._summary_of_bins(bins, longer, longest, lengths.size, int(lengths.sum()), 8, 4, 64)
    assert (settled is None) == (label != "a long row among short ones"), label
    assert (summary._summarise(head, longer, (lengths.size, 5 * BINS), int(lengths.sum()), 8, 4)
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
    many = summary._summary_of_many(lengths, counts, m, value_bytes, index_bytes, limit)
    assert all(type(a) is type(b) for a, b in zip(many, (0, 0, 0, 0.0, [], 0, 0.0, 0)))
    bins = summary._summary_of_bins(dense, np.zeros(0, np.int64), int(lengths[-1]), m, entries, value_bytes,
                                    index_bytes, limit)
    assert bins is None or bins == many
    if dense.size <= summary.DENSE_BINS:
        assert summary._summary_of_dense(dense.tolist(), m, entries, value_bytes, index_bytes, limit) == many


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
    pass's last block), against the host's summary of the same statistics (its reference) and against
    NumPy, on histograms of every shape."""
    rng = np.random.default_rng(seed)
    lengths = rng.permutation(np.repeat(np.array(list(groups), dtype=np.int64), list(groups.values())))
    S = from_lengths(lengths, 3 * BINS + 1, rng).astype(value_dtype)
    gpu, cpu = (sparsegpu.CSR.from_scipy(S, index_dtype=index_dtype, backend=b) for b in ("gpu", "cpu"))
    with pytest.MonkeyPatch.context() as patch:
        use_pass(patch, statistics_pass)
        assert advisor.matrix_stats(gpu) == advisor.matrix_stats(cpu) == numpy_stats(cpu)
        assert statistics._workspace().record[statistics.RECORD_STATUS] == statistics.STATUS_SUMMARISED


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
        space = statistics._workspace()
        space.record[statistics.RECORD_HEAD:] = -7
        assert advisor.matrix_stats(gpu) == advisor.matrix_stats(cpu) == numpy_stats(cpu)
        assert space.record[statistics.RECORD_STATUS] == statistics.STATUS_SUMMARISED
        host = summary.record_of_buffer(*statistics._read_statistics(cpu), S.shape[0], S.nnz, S.dtype.itemsize,
                                         np.dtype(index_dtype).itemsize)
        kernel = space.record[statistics.RECORD_HEAD:].tolist()
        used = len(host) if host[reference_stats.OUT_LONGEST] >= sell_module.HOT_MIN_GATHERS else len(host) - 1
        # (floats where the host sums in float64)
        for word in (reference_stats.OUT_BINS + 2, reference_stats.OUT_BINS + 7):
            kernel[word], host[word] = float(kernel[word]), float(host[word])
        assert kernel[:used] == host[:used]
        assert_workspace_zero()


@pytest.mark.gpu
def test_gpu_summary_or_head_left_to_the_host(monkeypatch, rng, statistics_pass):
    """The kernel summarises unless more rows are past the bins than its list holds, or at least
    as many as SELL would stage (then the host summarises the head it leaves); either way the
    statistics are the host's and the buffer is zero again for the next call. Summarising calls
    write the record afresh: its words are poisoned first."""
    monkeypatch.setattr(statistics, "_WORKSPACES", statistics._Workspaces())
    past_list = np.concatenate([np.full(1100, BINS), rng.integers(0, 9, 3000)])
    cases = {"tridiagonal": (tridiagonal(5000), statistics.STATUS_SUMMARISED),
             "R-MAT": (datasets.generate("rmat", "small"), statistics.STATUS_SUMMARISED),
             "1100 rows past the bins": (from_lengths(past_list, BINS + 1, rng), statistics.STATUS_HEAD_KEPT),
             "after it": (from_lengths(rng.integers(0, 60, 7000), 100, rng), statistics.STATUS_SUMMARISED)}
    for label, (S, status) in cases.items():
        gpu, cpu = (sparsegpu.CSR.from_scipy(S, backend=b) for b in ("gpu", "cpu"))
        space = statistics._workspace()
        space.record[statistics.RECORD_HEAD:] = -7
        assert advisor.matrix_stats(gpu) == advisor.matrix_stats(cpu) == numpy_stats(cpu), label
        assert space.record[statistics.RECORD_STATUS] == status, label
        if status == statistics.STATUS_SUMMARISED:  # word for word the host's (hot rows' entries where used)
            host = summary.record_of_buffer(*statistics._read_statistics(cpu), *S.shape[:1], S.nnz, 8, 4)
            kernel = space.record[statistics.RECORD_HEAD:].tolist()
            used = len(host) if host[reference_stats.OUT_LONGEST] >= sell_module.HOT_MIN_GATHERS else len(host) - 1
            assert kernel[:used] == host[:used], label
        assert_workspace_zero()
    # At least as many rows past the bins as SELL stages rows (a small HOT_BYTES): left to the host.
    monkeypatch.setattr(sell_module, "HOT_BYTES", 4 * 8)
    monkeypatch.setattr(statistics, "_WORKSPACES", statistics._Workspaces())
    for rows_past, status in [(3, statistics.STATUS_SUMMARISED), (4, statistics.STATUS_HEAD_KEPT)]:
        lengths = np.concatenate([rng.integers(0, 300, 2000), BINS + rng.integers(0, 50, rows_past)])
        S = from_lengths(rng.permutation(lengths), 2 * BINS, rng)
        gpu, cpu = (sparsegpu.CSR.from_scipy(S, backend=b) for b in ("gpu", "cpu"))
        assert advisor.matrix_stats(gpu) == advisor.matrix_stats(cpu) == numpy_stats(cpu), rows_past
        assert statistics._workspace().record[statistics.RECORD_STATUS] == status, rows_past
        assert_workspace_zero()


def kernel_summary(head: np.ndarray, longer: np.ndarray, m: int, nnz: int, value_bytes: int,
                   index_dtype) -> list | None:
    """stats_summary run on this statistics buffer: the record's words from RECORD_HEAD on, or
    None where it leaves the head to the host; the head zeroed, or left as it was."""
    import cupy

    capacity = longer.size + 1  # (room for nnz / ROW_STATS_BINS rows would be too large for scaled histograms)
    words = np.zeros(statistics.STATS_COUNTERS + reference_stats.OUT_OVERFLOW + capacity, np.int64)
    words[:statistics.STATS_COUNTERS] = 5  # counters as csr_stats leaves them
    words[statistics.STATS_COUNTERS:statistics.STATS_COUNTERS + reference_stats.OUT_OVERFLOW] = head
    words[statistics.STATS_COUNTERS + reference_stats.OUT_OVERFLOW:][:longer.size] = longer
    buffer = cupy.asarray(words.view(np.uint64))
    record = np.frombuffer(cupy.cuda.alloc_pinned_memory(statistics.RECORD_WORDS * 8), np.int64,
                           statistics.RECORD_WORDS)
    record[:] = -7
    pointer = buffer.data.ptr
    statistics.stats_kernel("stats_summary<{I}>", index_dtype)(
        (1,), (statistics.STATS_BLOCK,), (np.uint64(pointer), np.uint64(pointer + 8 * statistics.STATS_COUNTERS),
                                        np.int64(m), np.int64(nnz), np.int64(capacity), np.uint64(11),
                                        np.uint64(record.ctypes.data),
                                        *statistics._summary_arguments(m, nnz, value_bytes)))
    cupy.cuda.runtime.deviceSynchronize()
    assert record[statistics.RECORD_EPOCH] == 11
    after = buffer.get().view(np.int64)
    if record[statistics.RECORD_STATUS] == statistics.STATUS_HEAD_KEPT:
        np.testing.assert_array_equal(after, words)
        return None
    assert record[statistics.RECORD_STATUS] == statistics.STATUS_SUMMARISED
    assert not after[:statistics.STATS_COUNTERS + reference_stats.OUT_OVERFLOW].any()
    return record[statistics.RECORD_HEAD:].tolist()


@pytest.mark.gpu
@settings(max_examples=150, deadline=None)
@given(st.one_of(length_groups(), short_length_groups()), st.sampled_from([1, 1000, 10**6, 10**9]),
       st.sampled_from([(4, np.int32), (8, np.int32), (16, np.int32), (8, np.int64), (16, np.int64)]),
       st.integers(0, 2**32 - 1))
def test_gpu_summary_kernel_matches_its_reference(groups, scale, value_bytes_and_index, seed):
    """stats_summary on statistics buffers made on the host, against the host's summary word for
    word: histograms of every shape (few lengths, lengths over all the bins, rows past the bins,
    sometimes more than the kernel lists, only short rows: the warp summary's), their rows in the
    bins multiplied by up to 10^9 (costs
    past float64's exact integers, which the kernel leaves to the host). Unscaled histograms with
    at most SUMMARY_OVERFLOW_ROWS rows past the bins are always the kernel's own."""
    value_bytes, index_dtype = value_bytes_and_index
    rng = np.random.default_rng(seed)
    head = np.zeros(reference_stats.OUT_OVERFLOW, np.int64)
    for length, rows in groups.items():
        if length < BINS:
            head[reference_stats.OUT_BINS + length] = rows * scale
    longer = rng.permutation(np.repeat(np.array([k for k in groups if k >= BINS], dtype=np.int64),
                                       [groups[k] for k in groups if k >= BINS]))
    bins = head[reference_stats.OUT_BINS:]
    m = int(bins.sum()) + longer.size
    nnz = int(bins @ np.arange(BINS)) + int(longer.sum())
    head[:reference_stats.OUT_SLICE_WIDTHS] = [*rng.integers(0, nnz + 1, 3), rng.integers(0, 10**12),
                                               rng.integers(0, 10**6)]
    head[reference_stats.OUT_SLICE_WIDTHS] = rng.integers(0, 2 * nnz + 1)
    head[reference_stats.OUT_OVERFLOW_ROWS], head[reference_stats.OUT_LONGEST] = longer.size, max(groups)
    words = kernel_summary(head, longer, m, nnz, value_bytes, index_dtype)
    if words is None:
        assert scale > 1 or longer.size > kernel_constant("SUMMARY_OVERFLOW_ROWS")
        return
    host = summary.record_of_buffer(head, longer, m, nnz, value_bytes, np.dtype(index_dtype).itemsize)
    used = len(host) if max(groups) >= sell_module.HOT_MIN_GATHERS else len(host) - 1  # hot rows' entries
    # The squares and HYB's ELL entries: integers here, floats there where the host sums in
    # float64; the statistics round both once.
    for word in (reference_stats.OUT_BINS + 2, reference_stats.OUT_BINS + 7):
        words[word], host[word] = float(words[word]), float(host[word])
    assert words[:used] == host[:used]

"""sparsegpu/advisor/statistics.py: matrix_stats on both backends, the GPU passes against the
NumPy reference, launch plans, the workspace, the record's polling."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import sparsegpu
from sparsegpu import advisor, datasets
from sparsegpu._kernels import PackedLaunch
from sparsegpu.advisor import statistics, summary
from sparsegpu.formats.sell import DEFAULT_C
from sparsegpu.reference import stats as reference_stats
from tests.advisor.helpers import (BINS, STATS_SOURCES, WARP_SUMMARY_BINS, assert_workspace_zero, edge_matrices,
                                   from_lengths, kernel_constant, numpy_stats, tridiagonal, use_pass)
from tests.conftest import REAL_MATRICES, requires_matrices


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


def test_sell_slices_are_warps():
    assert reference_stats.SELL_SLICE == DEFAULT_C == 32


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


def test_reference_buffer_layout(rng):
    S = edge_matrices(rng)["lengths at the limit"]
    lengths = np.diff(S.indptr)
    capacity = reference_stats.overflow_capacity(S.nnz)
    out = np.zeros(reference_stats.OUT_OVERFLOW + capacity, np.uint64)
    reference_stats.csr_stats(S.indptr, S.indices, S.shape[0], capacity, out)
    offset = S.tocoo().col.astype(np.int64) - S.tocoo().row
    assert out[:reference_stats.OUT_SLICE_WIDTHS].tolist() == [(offset < 0).sum(), (offset == 0).sum(),
                                                                (offset > 0).sum(),
                                                     np.abs(offset).sum(), np.abs(offset).max()]
    assert out[reference_stats.OUT_SLICE_WIDTHS] == sum(lengths[i:i + 32].max() for i in range(0, lengths.size, 32))
    assert out[reference_stats.OUT_OVERFLOW_ROWS] == 3 and 3 < capacity
    assert out[reference_stats.OUT_LONGEST] == lengths.max() == 3 * BINS + 7
    assert (out[reference_stats.OUT_BINS:reference_stats.OUT_OVERFLOW].tolist()
            == np.bincount(lengths[lengths < BINS], minlength=BINS).tolist())
    assert out[reference_stats.OUT_OVERFLOW:].tolist() == [BINS, BINS + 1, 3 * BINS + 7] + [0] * (capacity - 3)


def test_host_mirrors_the_kernels_constants():
    assert kernel_constant("STATS_BINS") == reference_stats.ROW_STATS_BINS
    assert [kernel_constant(f"OUT_{w}") for w in ("SLICE_WIDTHS", "OVERFLOW_ROWS", "LONGEST", "BINS")] == [
        reference_stats.OUT_SLICE_WIDTHS, reference_stats.OUT_OVERFLOW_ROWS, reference_stats.OUT_LONGEST,
        reference_stats.OUT_BINS]
    assert kernel_constant("STATS_BLOCK") == statistics.STATS_BLOCK
    assert kernel_constant("STATS_WINDOW") == statistics.STATS_WINDOW and statistics.STATS_WINDOW % 32 == 0
    assert kernel_constant("QUEUE_WORDS") == statistics.QUEUE_WORDS
    assert kernel_constant("COUNTER_TILES_DONE") < kernel_constant("STATS_COUNTERS") == statistics.STATS_COUNTERS
    assert [kernel_constant(f"RECORD_{w}") for w in ("EPOCH", "STATUS", "HEAD", "SUMMARY")] == [
        statistics.RECORD_EPOCH, statistics.RECORD_STATUS, statistics.RECORD_HEAD, statistics.RECORD_SUMMARY]
    assert kernel_constant("SUMMARY_WORDS") == summary.SUMMARY_WORDS == len(summary._summary_words(
        np.zeros(reference_stats.OUT_OVERFLOW, np.int64), np.zeros(0, np.int64), 0, 0, 8, 4))
    assert [kernel_constant(f"STATUS_{w}") for w in ("SUMMARISED", "HEAD_KEPT")] == [
        statistics.STATUS_SUMMARISED, statistics.STATUS_HEAD_KEPT]
    assert all(expression == f"csr_stats_direct<{{I}}, {blocks}, {statistics.DIRECT_VECTORS[blocks]}>"
               for blocks, expression in statistics.DIRECT_EXPRESSIONS.items())
    assert 32 * kernel_constant("WARP_BINS") == WARP_SUMMARY_BINS
    assert f"STATS_ITEM = {statistics.STATS_ITEM_BYTES} / sizeof(I)" in STATS_SOURCES


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 10**9), st.integers(0, 10**10), st.sampled_from([4, 8]), st.sampled_from([1, 660, 792]))
def test_stats_tiles_are_whole_slices_within_the_window(rows, nnz, itemsize, blocks):
    tile = statistics.stats_tile_rows(rows, nnz, itemsize, blocks)
    assert tile % reference_stats.SELL_SLICE == 0 and 32 <= tile <= statistics.STATS_WINDOW
    spread = -(-rows // blocks)  # rows a block when every block takes a tile
    assert tile < spread + 32 or tile == 32
    item = statistics.STATS_ITEM_BYTES // itemsize
    if 32 < tile < min(statistics.STATS_WINDOW, spread):  # not clamped: 3/4 of an item per tile on average
        assert (tile + 32) * nnz / rows > 0.75 * item >= tile * nnz / rows * (1 - 1e-12)


def gpu_and_cpu_buffers(S, index_dtype):
    gpu = sparsegpu.CSR.from_scipy(S, index_dtype=index_dtype, backend="gpu")
    cpu = sparsegpu.CSR.from_scipy(S, index_dtype=index_dtype, backend="cpu")
    return gpu, cpu, statistics._statistics_buffer(gpu), statistics._statistics_buffer(cpu)


def assert_same_buffer(kernel: np.ndarray, reference: np.ndarray, label: str) -> None:
    """Bitwise equal, the overflow list compared as a multiset (the kernel appends in any order)."""
    assert kernel.dtype == reference.dtype and kernel.shape == reference.shape, label
    head = reference_stats.OUT_OVERFLOW
    np.testing.assert_array_equal(kernel[:head], reference[:head], err_msg=label)
    longer = int(reference[reference_stats.OUT_OVERFLOW_ROWS])
    np.testing.assert_array_equal(np.sort(kernel[head:head + longer]), np.sort(reference[head:head + longer]),
                                  err_msg=label)
    np.testing.assert_array_equal(kernel[head + longer:], reference[head + longer:], err_msg=label)


@pytest.mark.gpu
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_gpu_statistics_match_reference_on_edge_and_generated_matrices(index_dtype, rng, statistics_pass):
    cases = edge_matrices(rng)
    cases.update({family: datasets.generate(family, "small") for family in datasets.GENERATED})
    # Many more tiles than resident blocks, so every block takes several tickets, with rows
    # past the bins scattered over many blocks and a partial last slice.
    lengths = rng.integers(0, 12, 3_000_017)
    lengths[rng.choice(lengths.size, 40, replace=False)] = rng.integers(BINS - 2, 3 * BINS, 40)
    cases["three million rows"] = from_lengths(lengths, 4 * BINS, rng)
    cases["uniform rows"] = datasets.generate("poisson2d", "medium")
    for label, S in cases.items():
        gpu, cpu, kernel, reference = gpu_and_cpu_buffers(S, index_dtype)
        assert_same_buffer(kernel, reference, label)
        assert advisor.matrix_stats(gpu) == advisor.matrix_stats(cpu) == numpy_stats(cpu), label


@requires_matrices
@pytest.mark.gpu
@pytest.mark.parametrize("name", REAL_MATRICES)
def test_gpu_statistics_match_reference_on_real_matrices(name, statistics_pass):
    gpu, cpu, kernel, reference = gpu_and_cpu_buffers(datasets.load_matrix(name), None)
    assert_same_buffer(kernel, reference, name)
    assert advisor.matrix_stats(gpu) == advisor.matrix_stats(cpu)


@pytest.mark.gpu
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_gpu_kernel_writes_only_its_words(index_dtype, rng):
    """The overflow list's unused room keeps its poison; every counted word is the reference's; the
    kernel runs again on the same queue with a later epoch (its slots from the first run are
    stale) and gives the same buffer."""
    import cupy

    lengths = rng.integers(0, 30, 5000)
    lengths[[7, 2500, 4999]] = 40 * BINS, 2 * BINS, BINS + 1  # one row handed on in chunks
    S = from_lengths(lengths, 41 * BINS, rng)
    gpu = sparsegpu.CSR.from_scipy(S, index_dtype=index_dtype, backend="gpu")
    poison = np.uint64(0xDEADBEEFDEADBEEF)
    counters, head = statistics.STATS_COUNTERS, reference_stats.OUT_OVERFLOW
    queue = cupy.zeros(statistics.QUEUE_WORDS * statistics.queue_capacity(S.nnz, np.dtype(index_dtype).itemsize),
                       np.uint64)
    cpu = sparsegpu.CSR.from_scipy(S, index_dtype=index_dtype, backend="cpu")
    reference = statistics._statistics_buffer(cpu).view(np.uint64)
    for epoch in (1, 2):
        buffer = cupy.full(counters + head + reference_stats.overflow_capacity(S.nnz), poison, dtype=np.uint64)
        buffer[:counters + head] = 0
        statistics._statistics_kernel(gpu, buffer, queue, epoch)
        kernel = buffer.get()[counters:]
        np.testing.assert_array_equal(kernel[:head], reference[:head])
        assert sorted(kernel[head:head + 3].tolist()) == [BINS + 1, 2 * BINS, 40 * BINS]
        assert (kernel[head + 3:] == poison).all()
    published = queue.get().reshape(-1, statistics.QUEUE_WORDS)[:, 2]
    assert (published == 2).sum() >= 40 * BINS // (statistics.STATS_ITEM_BYTES // np.dtype(index_dtype).itemsize) - 1


@pytest.mark.gpu
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_gpu_direct_pass_writes_only_its_words(index_dtype, rng):
    """csr_stats_direct launched afresh without a record: the overflow list's unused room keeps
    its poison, every counted word is the reference's, and the counters hold only the blocks' tickets
    (none: without a record no block takes one)."""
    import cupy

    lengths = rng.integers(0, 30, 5000)
    lengths[[7, 2500, 4999]] = 40 * BINS, 2 * BINS, BINS + 1  # one row spread over many blocks
    S = from_lengths(lengths, 41 * BINS, rng)
    gpu = sparsegpu.CSR.from_scipy(S, index_dtype=index_dtype, backend="gpu")
    cpu = sparsegpu.CSR.from_scipy(S, index_dtype=index_dtype, backend="cpu")
    reference = statistics._statistics_buffer(cpu).view(np.uint64)
    poison = np.uint64(0xDEADBEEFDEADBEEF)
    counters, head = statistics.STATS_COUNTERS, reference_stats.OUT_OVERFLOW
    buffer = cupy.full(counters + head + reference_stats.overflow_capacity(S.nnz), poison, dtype=np.uint64)
    buffer[:counters + head] = 0
    expression, grid, arguments = statistics._direct_arguments(gpu, buffer, 1, 0)
    assert grid[0] > 1
    statistics.stats_kernel(expression, index_dtype)(grid, (statistics.STATS_BLOCK,), arguments)
    words = buffer.get()
    assert not words[:counters].any()
    kernel = words[counters:]
    np.testing.assert_array_equal(kernel[:head], reference[:head])
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
        gpu, cpu, kernel, reference = gpu_and_cpu_buffers(S, index_dtype)
        assert_same_buffer(kernel, reference, label)
        assert advisor.matrix_stats(gpu) == advisor.matrix_stats(cpu) == numpy_stats(cpu), label
        shifted = cupy.empty(gpu.indices.size + 1, gpu.indices.dtype)
        shifted[1:] = gpu.indices
        unaligned = sparsegpu.CSR._make(gpu.data, shifted[1:], gpu.indptr, gpu.shape, "gpu")
        assert_same_buffer(statistics._statistics_buffer(unaligned), reference,
                           label + " (indices not 16-byte aligned)")


@pytest.mark.gpu
def test_gpu_workspace_launches_what_a_fresh_launch_would(monkeypatch, rng, statistics_pass):
    """The launch the workspace packs and keeps between calls (grid, arguments) is the one
    _statistics_arguments (_direct_arguments) builds afresh on the same buffer, queue and epoch:
    matrices one after another, growing the workspace, then smaller again, then of the same shape
    with other arrays, with either index type; the statistics stay right."""
    import cupy

    launched, launch = [], PackedLaunch.__call__

    def recording(self, grid, block, stream):
        launched.append((self.handle, grid, block, self.values()))
        launch(self, grid, block, stream)

    monkeypatch.setattr(PackedLaunch, "__call__", recording)
    monkeypatch.setattr(statistics, "_WORKSPACES", statistics._Workspaces())
    small = from_lengths(rng.integers(0, 9, 3000), 500, rng)
    large = from_lengths(np.concatenate([rng.integers(0, 40, 200_000), [3 * BINS, 40 * BINS]]), 41 * BINS, rng)
    for index_dtype in (np.int32, np.int64, np.int32):
        for S in (small, large, small, small.copy()):
            gpu = sparsegpu.CSR.from_scipy(S, index_dtype=index_dtype, backend="gpu")
            launched.clear()
            statistics._read_statistics(gpu)  # the statistics alone, left in the buffer
            space = statistics._workspace()
            if statistics_pass != "tiled":
                expression, (grid,), arguments = statistics._direct_arguments(gpu, space.buffer, space.epoch, 0)
            else:
                expression = "csr_stats<{I}>"
                (grid,), arguments = statistics._statistics_arguments(gpu, space.buffer, space.queue, space.epoch)
            kernel = statistics.stats_kernel(expression, index_dtype).kernel.ptr
            assert launched == [(kernel, grid, statistics.STATS_BLOCK,
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
    first = statistics._statistics_buffer(gpu)
    for _ in range(5):
        again = statistics._statistics_buffer(gpu)
        np.testing.assert_array_equal(again[:reference_stats.OUT_OVERFLOW], first[:reference_stats.OUT_OVERFLOW])
        np.testing.assert_array_equal(np.sort(again[reference_stats.OUT_OVERFLOW:]),
                                      np.sort(first[reference_stats.OUT_OVERFLOW:]))


@pytest.mark.gpu
@pytest.mark.parametrize("copied_with_head", [1024, 2])
def test_gpu_overflow_rows_read_with_the_head_or_after(monkeypatch, rng, copied_with_head, statistics_pass):
    # Five rows past the bins, with a repeated length: the head that a launch leaves to the host
    # is read with them, or (when fewer are copied with it) by a second copy.
    monkeypatch.setattr(statistics, "HEAD_OVERFLOW_ROWS", copied_with_head)
    lengths = np.array([3] * 50 + [5000, 7000, 5000, 4096, 9000] + [0] * 20)
    rng.shuffle(lengths)
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    indices = np.concatenate([np.sort(rng.choice(10000, k, replace=False)) for k in lengths]).astype(np.int32)
    S = sp.csr_array((rng.standard_normal(indices.size), indices, indptr), shape=(lengths.size, 10000))
    gpu, cpu = (sparsegpu.CSR.from_scipy(S, backend=b) for b in ("gpu", "cpu"))
    assert_same_buffer(statistics._statistics_buffer(gpu), statistics._statistics_buffer(cpu), str(copied_with_head))
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


@pytest.mark.gpu
@pytest.mark.parametrize("blocks_per_sm", statistics.DIRECT_BLOCKS_PER_SM)
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_gpu_every_direct_instantiation_gives_the_statistics(monkeypatch, rng, blocks_per_sm, index_dtype):
    """Each instantiation of csr_stats_direct (its launch bounds and round: the grid picks one) on
    every grid: the statistics of the arrays, on rows short and long, regular and power-law; and
    on grids of a few blocks, each taking many rounds of columns and windows of pointers
    (DIRECT_POINTERS: 2048 or 1024 rows), with rows ending anywhere in a round."""
    expression = statistics.DIRECT_EXPRESSIONS[blocks_per_sm]
    monkeypatch.setattr(statistics, "direct_expression", lambda grid, sms: expression)
    monkeypatch.setattr(statistics, "_WORKSPACES", statistics._Workspaces())
    use_pass(monkeypatch, "direct")

    def few_blocks(m, nnz, itemsize, sms):  # as few as the rows allow: STATS_WINDOW rows a block
        grid = -(-m // statistics.STATS_WINDOW)
        return grid, statistics.STATS_WINDOW, -(-(m + nnz) // grid)

    def check(S):
        gpu, cpu = (sparsegpu.CSR.from_scipy(S, index_dtype=index_dtype, backend=b) for b in ("gpu", "cpu"))
        assert advisor.matrix_stats(gpu) == advisor.matrix_stats(cpu) == numpy_stats(cpu)
        assert statistics._workspace().last_plan.first.handle == statistics.stats_kernel(
            expression, index_dtype).kernel.ptr

    for S in (from_lengths(rng.integers(0, 40, 60_000), 64, rng), datasets.poisson2d(300),
              datasets.generate("rmat", "small"), from_lengths(rng.integers(0, 9, 3000), 500, rng)):
        check(S)
    monkeypatch.setattr(statistics, "direct_launch", few_blocks)
    check(from_lengths(rng.integers(0, 80, 5000), 3000, rng))  # three blocks of 10 to 22 rounds each
    # Two blocks, the first's entries spanning about 3500 rows (3000 empty).
    check(from_lengths(np.concatenate([np.zeros(3000, np.int64), rng.integers(60, 140, 1000)]), 900, rng))
    assert statistics._workspace().last_plan.grid == 2


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
    head, longer = statistics._read_statistics(sparsegpu.CSR.from_scipy(counted, backend="cpu"))
    expected = summary.stats_of_record(summary.record_of_buffer(head, longer, S.shape[0], S.nnz, 8, 4), S.shape,
                                        S.nnz, 8, 4)
    got = advisor.matrix_stats(gpu)
    assert statistics._workspace().record[statistics.RECORD_STATUS] == statistics.STATUS_HEAD_KEPT
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
    space = statistics._workspace()
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

    monkeypatch.setattr(statistics, "POLL_RECORD", waiting != "synchronised")
    if waiting == "poll given up":
        monkeypatch.setattr(statistics, "RECORD_POLL_NS", 0)
    for S in (from_lengths(rng.integers(0, 40, 5000), 64, rng), datasets.generate("rmat", "small")):
        gpu, cpu = (sparsegpu.CSR.from_scipy(S, backend=b) for b in ("gpu", "cpu"))
        assert advisor.matrix_stats(gpu) == numpy_stats(cpu)
        space = statistics._workspace()
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

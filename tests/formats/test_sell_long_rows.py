"""SELL-C-sigma with long rows: slices split into parts, the sort window rule, hot columns of x
staged in shared memory, and the kernel mode the layout picks (direct or units) (CPU references
against scipy; CUDA kernels against their references and scipy, marked gpu)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from sparsegpu import datasets
from sparsegpu.formats import CSR, SELL
from sparsegpu.formats import sell as sell_module
from sparsegpu.formats.sell import (
    DEFAULT_SIGMA,
    HOT_BYTES,
    HOT_MIN_GATHERS,
    SPLIT_GROUPS,
    SPLIT_MIN,
    choose_sigma,
    choose_split,
    staged_columns,
)
from sparsegpu.reference import regular as regular_reference
from tests.conftest import poisoned, to_numpy
from tests.formats.test_regular import (
    _gpu_vs_reference,
    assert_close,
    assert_same_matrix,
    check_products,
    equal_rows_matrix,
    long_row_matrix,
    random_matrix,
    random_vector,
)


def hub_matrix(rng, m=600, n=700, hubs=(0, 5, 300), hub_length=650) -> sp.csr_array:
    """Short random rows, some empty, and a few hub rows of ``hub_length`` entries."""
    S = sp.lil_array(random_matrix(rng, m, n, 0.01, empty_rows=100))
    for r in hubs:
        S[r, rng.choice(n, size=hub_length, replace=False)] = rng.standard_normal(hub_length)
    return sp.csr_array(S)


def hot_matrix(rng, m=1200, n=900, hot=(3, 17, 500, 899), per_row=4) -> sp.csr_array:
    """Random rows that all also gather the columns ``hot`` (each then gathered m times)."""
    rows, cols = [], []
    for r in range(m):
        chosen = np.union1d(rng.choice(n, size=per_row, replace=False), hot)
        rows.append(np.full(chosen.size, r))
        cols.append(chosen)
    rows, cols = np.concatenate(rows), np.concatenate(cols)
    return sp.csr_array((rng.standard_normal(rows.size), (rows, cols)), shape=(m, n))


def expected_parts(A) -> tuple[np.ndarray, np.ndarray]:
    widths = np.diff(to_numpy(A.slice_ptr)) // A.C
    slices, parts = [], []
    if A.split:
        for s in np.flatnonzero(widths > A.split):
            count = -(-int(widths[s]) // A.split)
            slices += [s] * count
            parts += list(range(count))
    return np.array(slices, dtype=np.int64), np.array(parts, dtype=np.int64)


# --------------------------------------------------------------------------- split slices


@pytest.mark.parametrize(("C", "split"), [(32, None), (32, 1), (32, 7), (8, 3), (1, 50), (256, 2), (4, 0)])
def test_hub_rows_split_into_parts(C, split, rng, backend):
    S = hub_matrix(rng)
    params = {"C": C} if split is None else {"C": C, "split": split}
    A = SELL.from_scipy(S, backend=backend, **params)
    slices, parts = expected_parts(A)
    np.testing.assert_array_equal(to_numpy(A.split_slice), slices)
    np.testing.assert_array_equal(to_numpy(A.split_part), parts)
    assert A.split_slice.dtype == A.split_part.dtype == A.index_dtype
    if split is None:
        assert A.split == choose_split(int(A.slice_ptr[-1]), C) and A.split_slice.size > 0
    assert_same_matrix(A, S)
    check_products(A, S, rng, backend)


def test_split_rule():
    assert choose_split(0, 32) == SPLIT_MIN
    assert choose_split(32 * SPLIT_GROUPS * SPLIT_MIN, 32) == SPLIT_MIN
    assert choose_split(32 * SPLIT_GROUPS * 100, 32) == 100
    assert choose_split(32 * SPLIT_GROUPS * 100 + 1, 32) == 101  # slots per lane over the groups, rounded up
    assert choose_split(8 * SPLIT_GROUPS * 100, 8) == 100


REGULAR = ("poisson2d", "stencil27", "random_uniform", "lower_triangular")


def test_regular_matrices_are_not_split_and_keep_the_default_window(backend):
    for name in REGULAR:
        A = SELL.from_scipy(datasets.generate(name, "small"), backend=backend)
        assert A.split_slice.size == 0 and A.hot == 0 and A.sigma == DEFAULT_SIGMA, name
        assert A.mode == "direct", name


# --------------------------------------------------------------------------- the kernel mode


def counting_construction(monkeypatch) -> dict[str, int]:
    """Count the CPU launches of the SELL construction kernels (their NumPy references)."""
    calls: dict[str, int] = {}
    for expression, reference_kernel in sell_module._CONSTRUCTION_REFERENCES.items():
        def counted(*arguments, _reference=reference_kernel, _name=expression.split("<")[0]):
            calls[_name] = calls.get(_name, 0) + 1
            return _reference(*arguments)
        monkeypatch.setitem(sell_module._CONSTRUCTION_REFERENCES, expression, counted)
    return calls


def test_regular_matrices_take_the_direct_mode_and_the_shared_slot_copy(rng, monkeypatch):
    """No parts and no hot columns: mode "direct", slots from csr_to_slots (LAYOUT_SELL), and
    neither the part list nor the part-wise fill runs."""
    calls = counting_construction(monkeypatch)
    cases = {name: datasets.generate(name, "small") for name in REGULAR}
    cases |= {"empty rows": random_matrix(rng, 300, 250, 0.03, empty_rows=120),
              "all rows equal": equal_rows_matrix(rng, 333, 100, 7),
              "hubs, split=0 hot=0": hub_matrix(rng)}
    for name, S in cases.items():
        params = {"split": 0, "hot": 0} if "split=0" in name else {}
        A = SELL.from_scipy(S, backend="cpu", **params)
        assert A.mode == "direct" and A.split_slice.size == 0 and A.hot == 0, name
        csr = CSR.from_scipy(S, backend="cpu")
        indices, data = np.empty_like(A.indices), np.empty_like(A.data)
        n_slices = A.slice_ptr.size - 1
        regular_reference.csr_to_slots(csr.indptr, csr.indices, csr.data, A.perm, A.slice_ptr, A.C, 0,
                                       S.shape[0], n_slices * A.C, regular_reference.LAYOUT_SELL, indices, data)
        np.testing.assert_array_equal(A.indices, indices, err_msg=name)
        np.testing.assert_array_equal(A.data, data, err_msg=name)
        assert_same_matrix(A, S)
    assert "sell_fill_slots" not in calls and "sell_split_units" not in calls, calls


@pytest.mark.parametrize(("case", "params"), [("hubs", {}), ("hubs", {"hot": 0}), ("hot columns", {}),
                                              ("hot columns", {"split": 0}), ("rmat", {})])
def test_long_rows_or_hot_columns_take_the_units_mode(case, params, rng, monkeypatch):
    calls = counting_construction(monkeypatch)
    S = {"hubs": lambda: hub_matrix(rng), "hot columns": lambda: hot_matrix(rng),
         "rmat": lambda: datasets.rmat(12, 16, seed=2)}[case]()
    A = SELL.from_scipy(S, backend="cpu", **params)
    assert A.mode == "units" and (A.split_slice.size > 0 or A.hot > 0)
    assert calls.get("sell_fill_slots") == 1
    if case == "hubs":
        assert A.split_slice.size > 0  # the hub rows' slices are split by the default rule
    assert_same_matrix(A, S)
    check_products(A, S, rng, "cpu")


def test_reference_needs_every_part(rng):
    S = hub_matrix(rng, m=100, n=700, hubs=(3,))
    A = SELL.from_scipy(S, backend="cpu", split=8)
    x = rng.standard_normal(700)
    y = np.empty(100)
    arrays = (A.slice_ptr, A.indices, A.data, A.perm)
    regular_reference.sell_spmv(*arrays, A.split_slice, A.split_part, A.split, A.hot_cols, A.C, x, y)
    np.testing.assert_allclose(y, S @ x, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="does not cover"):
        regular_reference.sell_spmv(*arrays, A.split_slice[:-1], A.split_part[:-1], A.split, A.hot_cols, A.C, x, y)


def test_slot_fill_equals_the_shared_layout_copy(rng):
    """Without hot columns, the part-wise fill writes exactly the slots csr_to_slots writes."""
    S = hub_matrix(rng)
    A = SELL.from_scipy(S, backend="cpu", split=5, hot=0, sigma=64)
    csr = CSR.from_scipy(S, backend="cpu")
    indices = np.empty_like(A.indices)
    data = np.empty_like(A.data)
    n_slices = A.slice_ptr.size - 1
    regular_reference.csr_to_slots(csr.indptr, csr.indices, csr.data, A.perm, A.slice_ptr, A.C, 0, S.shape[0],
                                   n_slices * A.C, regular_reference.LAYOUT_SELL, indices, data)
    np.testing.assert_array_equal(A.indices, indices)
    np.testing.assert_array_equal(A.data, data)


# --------------------------------------------------------------------------- the sort window


def test_sigma_rule(rng, backend):
    assert choose_sigma(1000, 100, 125) == DEFAULT_SIGMA
    assert choose_sigma(1000, 100, 126) == 1000
    assert choose_sigma(200, 100, 400) == DEFAULT_SIGMA  # one window already holds every row
    assert choose_sigma(1000, 0, 0) == DEFAULT_SIGMA
    S = datasets.rmat(12, 16, seed=2)
    A = SELL.from_scipy(S, backend=backend)
    windowed = SELL.from_scipy(S, backend="cpu", sigma=DEFAULT_SIGMA)
    assert windowed.fill > sell_module.SIGMA_FILL_LIMIT and A.sigma == S.shape[0] and A.fill < windowed.fill
    assert SELL.from_scipy(S, backend=backend, sigma=77).sigma == 77
    assert_same_matrix(A, S)
    check_products(A, S, rng, backend)


@pytest.mark.parametrize("C", [1, 8, 32, 256])
def test_window_slots_count_the_default_sigma_layout(C, rng, backend):
    """sell_window_slots counts the slots of the layout at DEFAULT_SIGMA without building it, and
    finds the longest row: both as sorted_slices and the lengths say."""
    cases = [datasets.rmat(12, 16, seed=3), random_matrix(rng, 1000, 300, 0.02, empty_rows=200),
             long_row_matrix(rng, m=900, n=3000, long=3000), equal_rows_matrix(rng, 700, 50, 6),
             random_matrix(rng, DEFAULT_SIGMA + 1, 40, 0.1)]
    for S in cases:
        csr = CSR.from_scipy(S, backend=backend)
        _, slice_ptr = sell_module.sorted_slices(csr, C, DEFAULT_SIGMA)
        expected = (int(slice_ptr[-1]), int(np.diff(S.indptr).max()))
        assert sell_module.window_slots(csr, C) == expected, (S.shape, C)


# --------------------------------------------------------------------------- hot columns


def brute_force_hot(S, capacity, least) -> np.ndarray:
    counts = np.bincount(sp.csr_array(S).indices, minlength=S.shape[1])
    for t in range(max(least, 1), int(counts.max()) + 2):
        if np.count_nonzero(counts >= t) <= capacity:
            return np.flatnonzero(counts >= t)[:capacity]
    return np.zeros(0, dtype=np.int64)


def test_hot_columns_rule(rng, backend):
    S = hot_matrix(rng)
    csr = CSR.from_scipy(S, backend=backend)
    # Auto: every column gathered at least HOT_MIN_GATHERS times (here the 4 planted ones,
    # 1200 times each; the random columns about 5 times).
    np.testing.assert_array_equal(to_numpy(staged_columns(csr, None)[0]), [3, 17, 500, 899])
    for capacity in (0, 1, 3, 4, 10, 900):
        np.testing.assert_array_equal(to_numpy(staged_columns(csr, capacity)[0]), brute_force_hot(S, capacity, 1),
                                      err_msg=f"hot={capacity}")
    for capacity in (1, 3, 900):
        cols, slots = (to_numpy(a) for a in staged_columns(csr, capacity))
        expected = np.full(S.shape[1] if cols.size else 0, -1)  # both empty when none is staged
        expected[cols] = np.arange(cols.size)
        np.testing.assert_array_equal(slots, expected)
        assert cols.dtype == slots.dtype == csr.index_dtype
    few = CSR.from_scipy(random_matrix(rng, 300, 200, 0.05), backend=backend)
    assert staged_columns(few, None)[0].size == 0  # nothing gathered HOT_MIN_GATHERS times
    assert HOT_MIN_GATHERS > 30 and HOT_BYTES // 8 >= 4


def test_hot_columns_past_the_count_clip(rng, monkeypatch, backend):
    """Counts are clipped past HOT_COUNT_BINS - 1: when more columns than fit are counted that
    often, the lowest of them are staged; otherwise the rule is unchanged."""
    monkeypatch.setattr(sell_module, "HOT_COUNT_BINS", 8)
    top = 7
    S = hot_matrix(rng)
    counts = np.bincount(S.indices, minlength=S.shape[1])
    csr = CSR.from_scipy(S, backend=backend)
    for capacity in (1, 3, 5, 40, 900):
        fitting = [t for t in range(1, top + 1) if np.count_nonzero(counts >= t) <= capacity]
        threshold = fitting[0] if fitting else top
        expected = np.flatnonzero(counts >= threshold)[:capacity]
        np.testing.assert_array_equal(to_numpy(staged_columns(csr, capacity)[0]), expected, err_msg=f"hot={capacity}")


def test_hot_columns_from_a_sample(rng, monkeypatch):
    """Above HOT_SAMPLE entries the counts come from a sample; the planted columns, gathered by
    every row, are still found."""
    monkeypatch.setattr(sell_module, "HOT_SAMPLE", 1000)
    S = hot_matrix(rng)
    np.testing.assert_array_equal(staged_columns(CSR.from_scipy(S, backend="cpu"), None)[0], [3, 17, 500, 899])


def test_hot_columns_sample_is_out_of_step_with_uniform_rows(rng, monkeypatch, backend):
    """Rows of exactly 16 sorted columns and a sample of one entry in 16: sampling every 16th
    entry would take each row's smallest column and stage low columns that no row favours."""
    m, n, per_row = 6000, 5000, 16
    monkeypatch.setattr(sell_module, "HOT_SAMPLE", m)
    monkeypatch.setattr(sell_module, "HOT_MIN_GATHERS", 160)  # 10 in the sample; every column is gathered ~19 times
    cols = np.sort(np.stack([rng.choice(n, per_row, replace=False) for _ in range(m)]), axis=1).ravel()
    S = sp.csr_array((rng.standard_normal(m * per_row), cols, np.arange(0, m * per_row + 1, per_row)), shape=(m, n))
    assert np.bincount(cols, minlength=n).max() < 160
    assert staged_columns(CSR.from_scipy(S, backend=backend), None)[0].size == 0


def test_hot_columns_ignore_sampling_noise(monkeypatch, backend):
    """A 27-point stencil sampled 1 entry in 90 (as at 150^3): a few hundred columns, each
    gathered 27 times, are counted HOT_MIN_GATHERS / 90 times or more by chance; together they
    take a few per cent of the gathers, under HOT_MIN_SHARE, so none is staged (and the product
    keeps the direct mode)."""
    S = datasets.stencil27(40)
    samples = S.nnz // 90
    monkeypatch.setattr(sell_module, "HOT_SAMPLE", samples)
    csr = CSR.from_scipy(S, backend=backend)
    counts = np.bincount(S.indices[sell_module.sample_positions(S.nnz, samples, np)], minlength=S.shape[1])
    least = -(-HOT_MIN_GATHERS * samples // S.nnz)
    noise = counts >= least
    assert noise.sum() > 10 and counts[noise].sum() < sell_module.HOT_MIN_SHARE * samples
    assert staged_columns(csr, None)[0].size == 0
    assert staged_columns(csr, 10)[0].size > 0  # asked for: the most gathered, noise or not
    assert SELL.from_scipy(S, backend=backend).mode == "direct"


def test_sample_positions_are_distinct_and_cover_the_range():
    for nnz, count in ((10, 10), (1000, 64), (2**20 + 7, 4096), (16 * 6000, 6000)):
        positions = sell_module.sample_positions(nnz, count, np)
        assert np.unique(positions).size == count and positions.min() >= 0 and positions.max() < nnz
        assert np.histogram(positions, bins=8, range=(0, nnz))[0].min() >= count // 8 - 2


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("dtype", [np.float64, np.complex64])
def test_hot_columns_are_encoded_and_round_trip(dtype, index_dtype, rng, backend):
    S = hot_matrix(rng).astype(dtype)
    A = SELL.from_scipy(S, backend=backend, index_dtype=index_dtype, split=2)
    assert A.hot == 4 and A.hot_cols.dtype == np.dtype(index_dtype)
    stored = to_numpy(A.indices)
    assert np.count_nonzero(stored < -1) == 4 * S.shape[0]  # every row gathers the four
    assert stored.min() == -2 - 3 and np.all(stored < S.shape[1])
    assert_same_matrix(A, S)
    check_products(A, S, rng, backend)
    B = A.astype(np.complex128)
    np.testing.assert_array_equal(to_numpy(B.hot_cols), to_numpy(A.hot_cols))
    check_products(B, S.astype(np.complex128), rng, backend)


# --------------------------------------------------------------------------- edge cases


def edge_matrices(rng) -> dict[str, sp.csr_array]:
    return {
        "empty rows": random_matrix(rng, 300, 250, 0.03, empty_rows=120),
        "all rows equal": equal_rows_matrix(rng, 333, 100, 7),
        "one very long row": long_row_matrix(rng, m=40, n=5000, long=5000),
        "tall": random_matrix(rng, 517, 40, 0.1),
        "wide": random_matrix(rng, 37, 600, 0.1),
        "no nonzeros": sp.csr_array((70, 5)),
        "0x0": sp.csr_array((0, 0)),
        "complex hubs": hub_matrix(rng).astype(np.complex128) * (1 - 2j),
    }


EDGES = ["empty rows", "all rows equal", "one very long row", "tall", "wide", "no nonzeros", "0x0", "complex hubs"]
PARAMS = [{}, {"split": 1, "hot": 3}, {"C": 8, "sigma": 1, "split": 4, "hot": 1}, {"C": 64, "split": 2}]


@pytest.mark.parametrize("params", PARAMS, ids=lambda p: "-".join(f"{k}={v}" for k, v in p.items()) or "default")
@pytest.mark.parametrize("case", EDGES)
def test_edge_cases(case, params, rng, backend):
    S = edge_matrices(rng)[case]
    A = SELL.from_scipy(S, backend=backend, **params)
    assert_same_matrix(A, S)
    check_products(A, S, rng, backend)


def test_layout_parameters_survive_backends_and_rebuilds(rng, backend):
    S = hot_matrix(rng, m=400)
    A = SELL.from_scipy(S, backend="cpu", C=16, split=3, hot=4)
    B = A.asbackend(backend)
    assert B._layout_params() == A._layout_params() == {"C": 16, "sigma": A.sigma, "split": 3, "hot": 4}
    for name, array in A._arrays().items():
        np.testing.assert_array_equal(to_numpy(getattr(B, name)), array, err_msg=name)
    assert A.nbytes == sum(a.nbytes for a in A._arrays().values())


def test_parameter_errors():
    S = sp.csr_array(np.eye(4))
    with pytest.raises(ValueError, match="split must be at least 0"):
        SELL.from_scipy(S, split=-1, backend="cpu")
    with pytest.raises(ValueError, match="hot must be at least 0"):
        SELL.from_scipy(S, hot=-2, backend="cpu")
    with pytest.raises(TypeError, match="hot must be an integer"):
        SELL.from_scipy(S, hot=1.5, backend="cpu")
    with pytest.raises(TypeError, match="split must be an integer"):
        SELL.from_scipy(S, split="auto", backend="cpu")


# --------------------------------------------------------------------------- GPU: kernels vs references


GPU_CASES = {
    "rmat": lambda rng: datasets.rmat(12, 16, seed=4),
    "hubs": lambda rng: hub_matrix(rng, m=3000, n=4000, hubs=(0, 1, 2, 1500, 2999), hub_length=3500),
    "hot": lambda rng: hot_matrix(rng, m=2500, n=3000),
    "one very long row": lambda rng: long_row_matrix(rng),
}


@pytest.mark.gpu
@pytest.mark.parametrize("params", [{}, {"split": 3, "hot": 5}, {"split": 0, "hot": 0},
                                    {"C": 16, "sigma": 100, "split": 17}], ids=["default", "split3-hot5", "whole", "C16"])
@pytest.mark.parametrize("case", list(GPU_CASES))
def test_gpu_long_rows(case, params, rng):
    _gpu_vs_reference(GPU_CASES[case](rng), "sell", params, rng)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_gpu_types_with_parts_and_staged_columns(dtype, index_dtype, rng):
    _gpu_vs_reference(hub_matrix(rng, m=2000, n=2500, hubs=(0, 7, 1999), hub_length=2400), "sell",
                 {"split": 5, "hot": 9}, rng, dtype, index_dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("C", sell_module.SELL_CHUNKS)
def test_gpu_every_slice_height_with_parts(C, rng):
    _gpu_vs_reference(hub_matrix(rng, m=1000, n=1200, hubs=(1, 600), hub_length=1100), "sell",
                 {"C": C, "sigma": 4 * C, "split": 6, "hot": 4}, rng)


@pytest.mark.gpu
def test_gpu_rows_of_many_parts(rng):
    """Rows of 63 to 1000 parts, one slice per row (C = 1, no sort, split = 1, so a row's length
    is its part count), against the reference and SciPy, bitwise the same run to run, tickets left at
    zero."""
    import cupy

    lengths = {3: 63, 10: 64, 20: 65, 30: 128, 40: 129, 50: 130, 60: 1000}
    S = sp.lil_array(random_matrix(rng, 300, 1200, 0.002))
    for row, length in lengths.items():
        S[row, :] = 0
        S[row, rng.choice(1200, size=length, replace=False)] = rng.standard_normal(length)
    S = sp.csr_array(S)
    params = {"C": 1, "sigma": 1, "split": 1, "hot": 0}
    _gpu_vs_reference(S, "sell", params, rng)
    A = SELL.from_scipy(S, backend="gpu", **params)
    x = cupy.asarray(rng.standard_normal(1200))
    first = A @ x
    for _ in range(3):
        y = poisoned(300, np.float64, cupy)
        A.spmv(x, y)
        np.testing.assert_array_equal(y.get(), first.get())
    assert int(A._cache[("launch", False)].scratch[1].max()) == 0


@pytest.mark.gpu
def test_gpu_tickets_are_left_at_zero_and_products_repeat(rng):
    import cupy

    S = hub_matrix(rng, m=2000, n=3000, hubs=(0, 1, 2, 3), hub_length=2900)
    A = SELL.from_scipy(S, backend="gpu", split=4)
    x = cupy.asarray(rng.standard_normal(3000))
    first = A @ x
    tickets = A._cache[("launch", False)].scratch[1]
    assert int(tickets.max()) == 0
    for _ in range(5):
        y = poisoned(2000, np.float64, cupy)
        A.spmv(x, y)
        np.testing.assert_array_equal(y.get(), first.get())
    assert int(tickets.max()) == 0
    np.testing.assert_allclose(first.get(), S @ x.get(), rtol=1e-12, atol=1e-12)


MODE_CASES = {
    "poisson2d": lambda rng: datasets.generate("poisson2d", "small"),
    "stencil27": lambda rng: datasets.generate("stencil27", "small"),
    "lower_triangular": lambda rng: datasets.generate("lower_triangular", "small"),
    "empty rows, awkward size": lambda rng: random_matrix(rng, 1003, 777, 0.01, empty_rows=300),
    "one very long row": lambda rng: long_row_matrix(rng),
}


@pytest.mark.gpu
@pytest.mark.parametrize("force_units", [False, True], ids=["direct", "units"])
@pytest.mark.parametrize("case", list(MODE_CASES))
def test_gpu_both_modes_on_layouts_without_parts(case, force_units, rng, monkeypatch):
    """A layout without parts or hot columns runs SELL_DIRECT; forced through the unit loop (the
    persistent wave) it must give the same product: each against the reference and scipy, outputs
    poisoned, bitwise reproducible (_gpu_vs_reference)."""
    monkeypatch.setattr(sell_module, "SELL_FORCE_UNITS", force_units)
    params = {"split": 0, "hot": 0} if case == "one very long row" else {}
    S = MODE_CASES[case](rng)
    assert SELL.from_scipy(S, backend="cpu", **params).mode == "direct"
    _gpu_vs_reference(S, "sell", params, rng)
    _gpu_vs_reference(S, "sell", {**params, "C": 8, "sigma": 64}, rng, np.complex64, np.int64)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_gpu_modes_agree_bitwise(dtype, rng, monkeypatch):
    """Both modes sum a row's slots in the same order (padded_row_sum), so on one layout their
    products are bitwise equal; a layout with parts or hot columns runs the unit loop."""
    import cupy

    S = random_matrix(rng, 2000, 1500, 0.01, dtype=dtype, empty_rows=100)
    A = SELL.from_scipy(S, backend="gpu", split=0, hot=0)
    assert A.mode == "direct"
    x = random_vector(rng, 1500, A.dtype, cupy)
    direct = poisoned(2000, A.dtype, cupy)
    A.spmv(x, direct)
    monkeypatch.setattr(sell_module, "SELL_FORCE_UNITS", True)
    units = poisoned(2000, A.dtype, cupy)
    A.spmv(x, units)
    np.testing.assert_array_equal(units.get(), direct.get())
    assert_close(direct, S, x.get(), A.dtype)
    hubs = hub_matrix(rng).astype(dtype) * (dtype(1 - 2j) if np.dtype(dtype).kind == "c" else 1)
    assert SELL.from_scipy(hubs, backend="cpu", split=4).mode == "units"
    _gpu_vs_reference(hubs, "sell", {"split": 4}, rng, dtype)


@pytest.mark.gpu
def test_gpu_stage_hot_against_its_reference(rng):
    import cupy

    from sparsegpu.reference.regular import sell_stage_hot

    kernel = sell_module.SELL_KERNELS.function("sell_stage_hot<{V}, {I}>", np.float64, np.int32)
    for n_hot in (1, 255, 256, 257, 5000):
        x = rng.standard_normal(7000)
        hot_cols = np.sort(rng.choice(7000, n_hot, replace=False)).astype(np.int32)
        out = poisoned(n_hot + 3, np.float64, cupy)  # the 3 past n_hot stay poisoned
        kernel((-(-n_hot // sell_module.SELL_BLOCK),), (sell_module.SELL_BLOCK,),
               (cupy.asarray(x), cupy.asarray(hot_cols), np.int64(n_hot), out))
        want = np.full(n_hot + 3, np.nan)
        sell_stage_hot(x, hot_cols, n_hot, want)
        np.testing.assert_array_equal(out.get(), want)
        np.testing.assert_array_equal(want[:n_hot], x[hot_cols])


@pytest.mark.gpu
def test_gpu_hot_columns_staged_first_or_by_each_block_agree_bitwise(rng, monkeypatch):
    """Hot columns staged from sell_stage_hot's contiguous copy or gathered by each block from x:
    the same values in shared memory, so the same bits; and the reference's product."""
    import cupy

    S = hot_matrix(rng)
    A = SELL.from_scipy(S, backend="gpu", hot=4)
    assert A.hot == 4
    x = cupy.asarray(rng.standard_normal(S.shape[1]))
    products = []
    for stage_first in (1, 10**9):
        monkeypatch.setattr(sell_module, "HOT_STAGE_FIRST", stage_first)
        A._cache.clear()
        assert (A._launch_plan(False).stage is not None) == (stage_first == 1)
        y = poisoned(S.shape[0], np.float64, cupy)
        A.spmv(x, y)
        products.append(y.get())
    np.testing.assert_array_equal(products[0], products[1])
    monkeypatch.setattr(sell_module, "HOT_STAGE_FIRST", 1)
    _gpu_vs_reference(S, "sell", {"hot": 4}, rng)


@pytest.mark.gpu
def test_gpu_hot_columns_past_the_default_shared_memory(rng):
    """9000 float64 staged values (72 KiB): the kernel opts in to more dynamic shared memory."""
    S = sp.csr_array(sp.random_array((300, 9000), density=0.5, rng=rng))
    A = SELL.from_scipy(S, backend="gpu", hot=9000)
    assert A.hot == 9000  # every column
    _gpu_vs_reference(S, "sell", {"hot": 9000}, rng)


@pytest.mark.gpu
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_gpu_part_counts_and_hot_selection_write_every_entry(index_dtype, rng):
    """sell_part_counts and sell_select_hot fill outputs poisoned with -7 exactly as their regular_reference."""
    import cupy

    from sparsegpu.formats.sell import SELL_BLOCK, SELL_KERNELS

    def launch(expression, threads, *arguments):
        SELL_KERNELS.function(expression, np.float64, index_dtype)((-(-threads // SELL_BLOCK),), (SELL_BLOCK,),
                                                                 arguments)

    C, n_slices = 32, 1000
    slice_ptr = np.concatenate([[0], np.cumsum(rng.integers(0, 400, n_slices) * C)]).astype(np.int64)
    for split in (1, 7, 130, 10**6):
        got = cupy.full(n_slices + 1, -7, dtype=index_dtype)
        launch("sell_part_counts<{I}>", n_slices + 1, cupy.asarray(slice_ptr), np.int64(n_slices), np.int64(C),
               np.int64(split), got)
        expected = np.full(n_slices + 1, -7, dtype=index_dtype)
        regular_reference.sell_part_counts(slice_ptr, n_slices, C, split, expected)
        np.testing.assert_array_equal(got.get(), expected, err_msg=f"split={split}")
    n = 5000
    counts = rng.integers(0, 40, n).astype(np.int64)
    for threshold, n_hot in ((30, 10), (30, 10**6), (41, 5)):
        first = np.concatenate([[0], np.cumsum(counts >= threshold)[:-1]]).astype(index_dtype)
        outputs = [np.full(max(min(n_hot, n), 1), -7, dtype=index_dtype), np.full(n, -7, dtype=index_dtype)]
        got = [cupy.asarray(a) for a in outputs]
        launch("sell_select_hot<{I}>", n, cupy.asarray(counts), cupy.asarray(first), np.int64(n), np.int64(threshold),
               np.int64(n_hot), *got)
        regular_reference.sell_select_hot(counts, first, n, threshold, n_hot, *outputs)
        for a, b in zip(got, outputs):
            np.testing.assert_array_equal(a.get(), b, err_msg=f"threshold={threshold}, n_hot={n_hot}")

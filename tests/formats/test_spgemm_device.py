"""The GPU path's host code (sparsegpu/formats/_spgemm_device.py) run without a GPU on NumPy
emulations of the kernels: plans, bins, row blocks, wide rows in shared or global scratch,
reads and launches skipped, memory errors and the shared-memory layout."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import sparsegpu
from sparsegpu import semiring as sr
from sparsegpu.formats import _spgemm_device as _spgemm
from sparsegpu.formats._spgemm import spgemm
from sparsegpu.reference import spgemm as ref
from tests.formats.spgemm_cases import (
    DTYPE_IDS,
    DTYPES,
    NEVER_TURNS,
    EmulatedKernels,
    assert_same_pattern_and_values,
    dense_rows_operands,
    every_bin_operands,
    few_column_operands,
    random_csr,
    rows_of,
    scipy_product,
    small_rows_operands,
    structure_product,
)

# --------------------------------------------------------------------------- the device host code on emulated kernels


@pytest.mark.parametrize("semiring", [None, sr.plus_times, sr.min_plus, sr.plus_pair], ids=lambda s: getattr(s, "name", "scipy"))
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_device_host_code_on_emulated_kernels(rng, semiring, index_dtype, monkeypatch):
    monkeypatch.setattr(_spgemm, "POISON", True)
    S, T = every_bin_operands(rng)
    S.data[::3] = 0.0  # stored zeros: their products sum to zero, dropped without a semiring
    M = random_csr(rng, S.shape[0], T.shape[1], 0.5)
    a = tuple(x.astype(t) for x, t in zip((S.indptr, S.indices, S.data), (index_dtype, index_dtype, np.float64)))
    b = tuple(x.astype(t) for x, t in zip((T.indptr, T.indices, T.data), (index_dtype, index_dtype, np.float64)))
    pattern = (M.indptr.astype(index_dtype), M.indices.astype(index_dtype))
    A, B = sparsegpu.from_scipy(S, backend="cpu"), sparsegpu.from_scipy(T, backend="cpu")
    for mask, complement, max_bytes in ((None, False, 1 << 40), (pattern, False, 1 << 40), (pattern, True, 20_000),
                                        (None, False, 30_000)):
        kernels = EmulatedKernels(semiring)
        indptr, indices, data = _spgemm.device_spgemm(a, b, (S.shape[0], T.shape[1]), semiring, mask, complement,
                                                       max_bytes, xp=np, kernels=kernels)
        expected = spgemm(A, B, semiring=semiring, mask=None if mask is None else M, complement=complement)
        # A mask of half the columns keeps every bound within the largest hash table.
        assert any("spgemm_wide" in k for k in kernels.launches) == (mask is None or complement)
        assert {k.split(",")[3].strip() for k in kernels.launches if k.startswith("spgemm_rows")} >= {"32", "128"}
        assert np.array_equal(indptr, expected.indptr)
        assert np.array_equal(indices, expected.indices)
        np.testing.assert_allclose(data, expected.data, rtol=1e-13, atol=1e-13)
        if semiring is None or semiring == sr.plus_times:
            assert bool(np.all(data != 0)) == (semiring is None)


@pytest.mark.parametrize("dtype,index_dtype", DTYPES, ids=DTYPE_IDS)
def test_device_host_code_every_dtype(rng, dtype, index_dtype, monkeypatch):
    monkeypatch.setattr(_spgemm, "POISON", True)
    S, T = every_bin_operands(rng, dtype)
    if np.dtype(dtype).kind == "c":
        S.data = S.data + 1j * rng.uniform(-1, 1, S.nnz)
    a = (S.indptr.astype(index_dtype), S.indices.astype(index_dtype), S.data.astype(dtype))
    b = (T.indptr.astype(index_dtype), T.indices.astype(index_dtype), T.data.astype(dtype))
    indptr, indices, data = _spgemm.device_spgemm(a, b, (S.shape[0], T.shape[1]), None, None, False, 50_000,
                                                   xp=np, kernels=EmulatedKernels(None))
    C = sparsegpu.CSR((data, indices, indptr), (S.shape[0], T.shape[1]), backend="cpu")
    assert data.dtype == dtype and indices.dtype == index_dtype
    assert_same_pattern_and_values(C, scipy_product(S, T), dtype)


def test_device_host_code_few_reads_and_blocks_in_place(rng, monkeypatch):
    # One block without wide rows: two stats reads and the word of zeros; no wide launch. Many
    # blocks: the rows written in place into one output, bitwise the one-block result.
    monkeypatch.setattr(_spgemm, "POISON", True)
    reads = []
    monkeypatch.setattr(_spgemm, "to_host", lambda x: reads.append(x.size) or np.array(x, copy=True))
    S, T = random_csr(rng, 90, 70, 0.08), random_csr(rng, 70, 80, 0.08)
    S.data[::4] = 0.0
    a, b = (S.indptr, S.indices, S.data), (T.indptr, T.indices, T.data)
    kernels = EmulatedKernels(None, rng)
    whole = _spgemm.device_spgemm(a, b, (90, 80), None, None, False, 1 << 40, xp=np, kernels=kernels)
    assert reads == [_spgemm.STATS, _spgemm.STATS, 1]
    assert not any(k.startswith("spgemm_wide") for k in kernels.launches)
    assert any(k.startswith("spgemm_drop_zeros") for k in kernels.launches)
    expected = scipy_product(S, T)
    assert np.array_equal(whole[0], expected.indptr) and np.array_equal(whole[1], expected.indices)
    for max_bytes in (3000, 600):  # a few rows, then one row per block
        kernels = EmulatedKernels(None, rng)
        blocked = _spgemm.device_spgemm(a, b, (90, 80), None, None, False, max_bytes, xp=np, kernels=kernels)
        assert sum(k.startswith("spgemm_count_bins") for k in kernels.launches) > 4  # two per block
        for got, want in zip(blocked, whole):
            assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("case", ["no-zeros", "zeros", "moved", "semiring", "emptied-by-mask"])
def test_device_host_code_skips_what_it_does_not_need(rng, case, monkeypatch):
    # Rows that keep their planned bin reuse the plan's lists (one listing launch); a row that
    # moves lists them again. Without entries equal to zero (the numeric kernels' word of zeros,
    # one read) there is no scan of the kept counts and no compaction; with some, both, and no
    # further read. A semiring reads nothing after the numeric bins. Bitwise the reference.
    monkeypatch.setattr(_spgemm, "POISON", True)
    reads, scans = [], []
    monkeypatch.setattr(_spgemm, "to_host", lambda x: reads.append(x.size) or np.array(x, copy=True))
    scan = _spgemm.primitives.exclusive_scan
    monkeypatch.setattr(_spgemm.primitives, "exclusive_scan", lambda x: scans.append(x.size) or scan(x))
    S, T = small_rows_operands(rng, few=case == "moved", a_lengths=4 if case == "zeros" else 7)
    if case == "zeros":
        S.data[::5] *= -1.0
        T = sp.csr_array(sp.vstack([T, T]))  # a row of A pairs +v and -v: every product cancels
        S = sp.csr_array(sp.hstack([S, -S]))
    mask, complement = None, False
    if case == "emptied-by-mask":  # complement of the row's whole product pattern: no entry left
        pattern = structure_product(S, T)
        keep = np.zeros(S.shape[0], bool)
        keep[::7] = True
        M = sp.csr_array(sp.diags_array(keep.astype(np.float64)) @ pattern)
        M.eliminate_zeros()
        M.sort_indices()  # the pattern's rows sorted, as spgemm passes masks
        mask, complement = (M.indptr, M.indices), True
    semiring = sr.plus_times if case == "semiring" else None
    m, n = S.shape[0], T.shape[1]
    a, b = (S.indptr, S.indices, S.data), (T.indptr, T.indices, T.data)
    kernels = EmulatedKernels(semiring, rng)
    got = _spgemm.device_spgemm(a, b, (m, n), semiring, mask, complement, 1 << 40, xp=np, kernels=kernels)
    expected = ref.csr_spgemm(a, b, np.add, np.multiply, 0.0, n_cols=n, mask=mask, complement=complement,
                              drop_zero_values=semiring is None)
    for g, e in zip(got, expected):
        assert g.astype(e.dtype).tobytes() == e.tobytes()
    lists = sum(k.startswith("spgemm_list_rows") for k in kernels.launches)
    dropped = any(k.startswith("spgemm_drop_zeros") for k in kernels.launches)
    assert lists == (2 if case == "moved" else 1)
    assert reads == [_spgemm.STATS, _spgemm.STATS] + ([] if semiring else [1])
    assert len(scans) == (2 if case == "zeros" else 1) and dropped == (case == "zeros")
    numeric = {k.split(",")[3].strip() for k in kernels.launches if k.startswith("spgemm_rows") and "true" in k}
    assert numeric == {"32"}
    if case == "moved":
        symbolic = {k.split(",")[3].strip() for k in kernels.launches if k.startswith("spgemm_rows") and "false" in k}
        assert symbolic == {"32", "128"}
    if case == "zeros":
        assert got[1].size < structure_product(S, T).nnz
    if case == "emptied-by-mask":
        assert np.count_nonzero(np.diff(got[0]) == 0) >= m // 7


@pytest.mark.parametrize("semiring", [sr.plus_times, sr.min_plus], ids=lambda s: s.name)
def test_few_column_rows_on_emulated_kernels_every_rule(rng, semiring, monkeypatch):
    # Rows of many products per entry in every block bin and wide, through the GPU path's host
    # code, for each side of the fold's rule: the same bits as the reference.
    monkeypatch.setattr(_spgemm, "POISON", True)
    S, T = few_column_operands(rng, 3000, a_lengths=[4, 8, 20, 40, 60, 150])
    a, b = (S.indptr, S.indices, S.data), (T.indptr, T.indices, T.data)
    expected = ref.csr_spgemm(a, b, semiring.add.ufunc, semiring.mul.apply, semiring.identity(np.float64),
                              n_cols=T.shape[1])
    for turns in (-1, 1, NEVER_TURNS):
        monkeypatch.setattr(_spgemm, "FOLD_TURNS", turns)
        kernels = EmulatedKernels(semiring, rng)
        got = _spgemm.device_spgemm(a, b, S.shape[:1] + T.shape[1:], semiring, None, False, 1 << 40, xp=np,
                                    kernels=kernels)
        assert kernels.fold_turns and set(kernels.fold_turns) == {turns}
        numeric = {k.split(",")[3].strip() for k in kernels.launches if k.startswith("spgemm_rows") and "true" in k}
        assert numeric >= {"128", "256"} and "spgemm_wide<{V}, {I}, {S}, true>" in kernels.launches
        for g, e in zip(got, expected):
            assert g.astype(e.dtype).tobytes() == e.tobytes()


# --------------------------------------------------------------------------- wide rows and scratch


@pytest.mark.parametrize("semiring", [None, sr.plus_times, sr.min_plus, sr.plus_pair], ids=lambda s: getattr(s, "name", "scipy"))
def test_device_wide_rows_in_global_scratch(rng, semiring, monkeypatch):
    # Bitmaps past the shared limit go to global scratch with a capped grid (blocks take rows in
    # turn); each wide row's cost counts its slice, so a small budget splits the wide rows into
    # row blocks. Bitwise the reference (or, without a semiring, its product with zeros dropped).
    monkeypatch.setattr(_spgemm, "POISON", True)
    monkeypatch.setattr(_spgemm, "WIDE_SHARED_BYTES", 0)
    monkeypatch.setattr(_spgemm, "WIDE_GRID", 2)
    S, T = dense_rows_operands(rng, 40, 7)
    S.data[::5] = 0.0
    M = random_csr(rng, S.shape[0], T.shape[1], 0.6)
    a, b = (S.indptr, S.indices, S.data), (T.indptr, T.indices, T.data)
    parts = semiring or sr.plus_times
    add, mul, identity = parts.add.ufunc, parts.mul.apply, parts.identity(np.float64)
    slice_bytes = _spgemm.wide_bitmap_bytes(T.shape[1])
    for mask, complement, max_bytes in ((None, False, 1 << 40), ((M.indptr, M.indices), True, 1 << 40),
                                        (None, False, 3 * slice_bytes)):
        kernels = EmulatedKernels(semiring, rng)
        got = _spgemm.device_spgemm(a, b, (S.shape[0], T.shape[1]), semiring, mask, complement, max_bytes, xp=np,
                                    kernels=kernels)
        expected = ref.csr_spgemm(a, b, add, mul, identity, n_cols=T.shape[1], mask=mask, complement=complement,
                                  drop_zero_values=semiring is None)
        for g, e in zip(got, expected):
            assert g.astype(e.dtype).tobytes() == e.tobytes()
        assert kernels.wide_grids and all(not in_shared for _, in_shared in kernels.wide_grids)
        if max_bytes < 1 << 40:  # at most 3 wide rows per block: 2 blocks, then the rest in turn
            assert max(grid for grid, _ in kernels.wide_grids) <= 2
            assert sum(k.startswith("spgemm_wide") and k.endswith("false>") for k in kernels.launches) >= 3
        else:
            assert (2, False) in kernels.wide_grids


def test_device_wide_bound_few_columns_fills_in_a_hash_table(rng):
    # A row with more than 2048 products, all in 50 of 3000 columns: the wide kernel counts it,
    # then the numeric phase (rows binned by their count) fills it in a hash table.
    T = rows_of(rng, [10] * 300, 50)
    T.resize((300, 3000))
    S = sp.csr_array(sp.vstack([rows_of(rng, [250], 300), rows_of(rng, [3] * 20, 300)]))
    a, b = (S.indptr, S.indices, S.data), (T.indptr, T.indices, T.data)
    kernels = EmulatedKernels(None, rng)
    got = _spgemm.device_spgemm(a, b, (S.shape[0], 3000), sr.plus_times, None, False, 1 << 40, xp=np,
                                kernels=kernels)
    assert any(k.startswith("spgemm_wide") and k.endswith("false>") for k in kernels.launches)
    assert not any(k.startswith("spgemm_wide") and k.endswith("true>") for k in kernels.launches)
    expected = ref.csr_spgemm(a, b, np.add, np.multiply, 0.0, n_cols=3000)
    for g, e in zip(got, expected):
        assert g.astype(e.dtype).tobytes() == e.tobytes()


def test_wide_scratch_and_walk_sizes():
    assert _spgemm.wide_scratch_bytes(32 * (_spgemm.WIDE_SHARED_BYTES // 8)) == 0
    assert _spgemm.wide_scratch_bytes(32 * (_spgemm.WIDE_SHARED_BYTES // 8) + 1) == _spgemm.WIDE_SHARED_BYTES + 8
    for value_size in (4, 8, 16):
        assert _spgemm.wide_walk_bytes(value_size) + _spgemm.WIDE_SHARED_BYTES <= 227 * 1024


# --------------------------------------------------------------------------- memory and layout


def test_device_product_too_large_raises_memory_error(rng, monkeypatch):
    S, T = every_bin_operands(rng)
    a, b = (S.indptr, S.indices, S.data), (T.indptr, T.indices, T.data)
    monkeypatch.setattr(_spgemm._validate, "available_bytes", lambda backend: 1000)
    kernels = EmulatedKernels(None)
    with pytest.raises(MemoryError, match=r"product has [\d,]+ entries"):
        _spgemm.device_spgemm(a, b, (S.shape[0], T.shape[1]), None, None, False, 1 << 40, xp=np, kernels=kernels)
    assert not any(k.endswith("true>") for k in kernels.launches)  # no numeric phase ran


def test_shared_layout_fits_every_bin():
    for value_size in (4, 8, 16):
        for index_size in (4, 8):
            for _, threads, table in _spgemm.HASH_BINS:
                groups = _spgemm.WARP_GROUPS if threads == 32 else 1
                assert groups * _spgemm.group_shared_bytes(value_size, index_size, threads, table) <= 227 * 1024

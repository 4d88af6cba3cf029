"""sparsegpu.convert: pointer expansion and compression, CSR <-> CSC, COO <-> CSR, row-length
statistics, against SciPy and NumPy on every backend (GPU cases marked ``gpu``)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from sparsegpu import convert
from tests.conftest import to_numpy, xp_for

INDEX_DTYPES = [np.int32, np.int64]
VALUE_DTYPES = [np.float32, np.float64, np.complex128, np.int64]


def skewed_csr(rng, m, n, index_dtype=np.int32):
    """A random CSR matrix with empty rows, short rows and a few long ones."""
    lengths = rng.integers(0, 6, size=m)
    lengths[rng.random(m) < 0.3] = 0
    if m:
        lengths[rng.integers(0, m, size=min(3, m))] = min(n, 3000)
    rows = np.repeat(np.arange(m), lengths)
    cols = np.concatenate([rng.choice(n, size=k, replace=False) for k in lengths]) if m else np.empty(0, int)
    S = sp.csr_array((rng.standard_normal(rows.size), (rows, cols)), shape=(m, n))
    S.sum_duplicates()
    S.indptr, S.indices = S.indptr.astype(index_dtype), S.indices.astype(index_dtype)
    return S


def on(backend, *arrays):
    xp = xp_for(backend)
    return [xp.asarray(a) for a in arrays]


def gpu_param(backend):
    return pytest.param(backend, marks=pytest.mark.gpu) if backend == "gpu" else backend


ALL_BACKENDS = [gpu_param(b) for b in ("cpu", "gpu")]


@pytest.mark.parametrize("backend", ALL_BACKENDS)
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
@pytest.mark.parametrize("m", [0, 1, 33, 5000])
def test_expand_and_compress_round_trip(rng, backend, index_dtype, m):
    S = skewed_csr(rng, m, 4000, index_dtype)
    (indptr,) = on(backend, S.indptr)
    xp = xp_for(backend)
    rows = convert.expand_pointers(indptr, xp)
    want = np.repeat(np.arange(m), np.diff(S.indptr))
    assert rows.dtype == index_dtype
    np.testing.assert_array_equal(to_numpy(rows), want)
    back = convert.compress(rows, m, index_dtype, xp)
    assert back.dtype == index_dtype
    np.testing.assert_array_equal(to_numpy(back), S.indptr)


@pytest.mark.parametrize("backend", ALL_BACKENDS)
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
def test_swap_major_is_the_transpose(rng, backend, index_dtype):
    S = skewed_csr(rng, 700, 900, index_dtype)
    indptr, indices, data = on(backend, S.indptr, S.indices, S.data)
    p, i, d = convert.swap_major(indptr, indices, data, 900, xp_for(backend))
    T = sp.csr_array(S.T)
    T.sort_indices()
    np.testing.assert_array_equal(to_numpy(p), T.indptr)
    np.testing.assert_array_equal(to_numpy(i), T.indices)
    np.testing.assert_array_equal(to_numpy(d), T.data)


@pytest.mark.parametrize("backend", ALL_BACKENDS)
@pytest.mark.parametrize("value_dtype", VALUE_DTYPES)
@pytest.mark.parametrize("order", ["sorted", "shuffled"])
def test_coo_to_csr_matches_scipy(rng, backend, value_dtype, order):
    m, n, nnz = 300, 200, 4000
    rows = rng.integers(0, m, size=nnz)
    cols = rng.integers(0, n, size=nnz)  # many duplicates
    data = rng.standard_normal(nnz)
    if np.dtype(value_dtype).kind == "c":
        data = data + 1j * rng.standard_normal(nnz)
    data = (data * 10).astype(value_dtype)
    if order == "sorted":
        key = np.unique(rows * n + cols)  # strictly sorted: the no-sort path
        rows, cols, data = key // n, key % n, data[: key.size]
    rd, cd, dd = on(backend, rows, cols, data)
    indptr, indices, values = convert.coo_to_csr(rd, cd, dd, (m, n))
    S = sp.csr_array((data, (rows, cols)), shape=(m, n))
    S.sum_duplicates()
    np.testing.assert_array_equal(to_numpy(indptr), S.indptr)
    np.testing.assert_array_equal(to_numpy(indices), S.indices)
    tol = 1e-5 if np.dtype(value_dtype) in (np.float32,) else 1e-12
    np.testing.assert_allclose(to_numpy(values), S.data, rtol=tol, atol=tol)
    assert values.dtype == value_dtype and indptr.dtype == np.int32
    again = convert.coo_to_csr(rd, cd, dd, (m, n))[2]
    assert to_numpy(again).tobytes() == to_numpy(values).tobytes(), "duplicates not summed reproducibly"


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_coo_to_csr_edge_cases(backend):
    empty = np.empty(0, dtype=np.int64)
    indptr, indices, data = convert.coo_to_csr(*on(backend, empty, empty, np.empty(0)), (3, 4))
    assert to_numpy(indptr).tolist() == [0, 0, 0, 0] and indices.size == 0 and data.size == 0
    same = np.zeros(1000, dtype=np.int32)  # one entry, repeated: all-equal keys
    indptr, indices, data = convert.coo_to_csr(*on(backend, same, same, np.ones(1000)), (2, 2), index_dtype=np.int64)
    assert to_numpy(indptr).tolist() == [0, 1, 1] and to_numpy(indices).tolist() == [0]
    assert to_numpy(data).tolist() == [1000.0] and indptr.dtype == np.int64


def test_coo_to_csr_bad_input_raises():
    r = np.array([0, 1])
    with pytest.raises(ValueError, match="out of range"):
        convert.coo_to_csr(r, np.array([0, 5]), np.ones(2), (2, 5))
    with pytest.raises(ValueError, match="negative"):
        convert.coo_to_csr(np.array([0, -1]), r, np.ones(2), (2, 2))
    with pytest.raises(ValueError, match="length"):
        convert.coo_to_csr(r, np.array([0]), np.ones(2), (2, 2))
    with pytest.raises(ValueError, match="data has shape"):
        convert.coo_to_csr(r, r, np.ones(3), (2, 2))
    with pytest.raises(TypeError, match="integers"):
        convert.coo_to_csr(r.astype(float), r, np.ones(2), (2, 2))
    with pytest.raises(TypeError, match="dtype"):
        convert.coo_to_csr(r, r, np.ones(2, dtype=np.float16), (2, 2))


@pytest.mark.parametrize("backend", ALL_BACKENDS)
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
def test_csr_to_coo_and_back(rng, backend, index_dtype):
    S = skewed_csr(rng, 1000, 5000, index_dtype)
    indptr, indices, data = on(backend, S.indptr, S.indices, S.data)
    rows, cols, values = convert.csr_to_coo(indptr, indices, data)
    C = S.tocoo()
    np.testing.assert_array_equal(to_numpy(rows), C.row)
    np.testing.assert_array_equal(to_numpy(cols), C.col)
    back = convert.coo_to_csr(rows, cols, values, S.shape, index_dtype=index_dtype)
    for got, want in zip(back, (S.indptr, S.indices, S.data)):
        np.testing.assert_array_equal(to_numpy(got), want)


def test_csr_to_coo_bad_input_raises():
    with pytest.raises(ValueError, match="stored entries"):
        convert.csr_to_coo(np.array([0, 3]), np.array([0, 1]), np.ones(2))
    with pytest.raises(ValueError, match="1-D"):
        convert.csr_to_coo(np.zeros((2, 2), dtype=int), np.array([0]), np.ones(1))


@pytest.mark.parametrize("backend", ALL_BACKENDS)
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
@pytest.mark.parametrize("m", [0, 1, 31, 2000])
def test_row_length_stats_match_numpy(rng, backend, index_dtype, m):
    S = skewed_csr(rng, m, 4000, index_dtype)
    (indptr,) = on(backend, S.indptr)
    lengths = np.diff(S.indptr)
    np.testing.assert_array_equal(to_numpy(convert.row_lengths(indptr)), lengths)
    stats = convert.row_length_stats(indptr)
    assert stats.rows == m and stats.nnz == S.nnz
    assert all(type(v) in (int, float) for v in (stats.rows, stats.nnz, stats.mean, stats.std, stats.min, stats.max, stats.empty_rows))
    if m == 0:
        assert stats.mean == 0.0 and stats.max == 0
        return
    assert stats.min == lengths.min() and stats.max == lengths.max()
    assert stats.empty_rows == int((lengths == 0).sum())
    assert stats.mean == pytest.approx(lengths.mean()) and stats.std == pytest.approx(lengths.std())
    for q, value in stats.quantiles.items():
        assert value == pytest.approx(float(np.quantile(lengths, q)))


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_row_length_stats_of_very_long_rows(backend):
    """Row lengths past the histogram limit: quantiles by sorting instead."""
    indptr = np.array([0, 3, 3, convert.HISTOGRAM_QUANTILE_LIMIT + 10], dtype=np.int64)
    stats = convert.row_length_stats(*on(backend, indptr))
    lengths = np.diff(indptr)
    assert stats.max == lengths.max() and stats.empty_rows == 1
    assert stats.quantiles[0.5] == pytest.approx(float(np.quantile(lengths, 0.5)))

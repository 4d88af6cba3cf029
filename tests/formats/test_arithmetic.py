"""SciPy's sparse arithmetic on sparsegpu matrices, against scipy.sparse's *_array classes.

Covers ``+``, ``-``, ``*``, ``/``, ``-A``, ``abs``, ``multiply``, ``transpose``, ``conj``,
``diagonal``, ``sum``, ``max``, ``min``, row indexing and ``eliminate_zeros`` on every format
and backend, the edge shapes, and the array code the GPU backend runs (exercised here on NumPy).
GPU tests (marked ``gpu``) also check that results stay on the device and are bitwise
reproducible.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import scipy.sparse as sp

import sparsegpu
from sparsegpu import datasets
from sparsegpu.formats import _elementwise as ew
from tests.conftest import REAL_MATRICES, requires_matrices, to_numpy

FORMATS = ["csr", "csc", "coo", "ell", "hyb", "jds", "sell"]
DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
SHAPES = [(0, 0), (0, 5), (5, 0), (1, 7), (7, 1), (6, 9), (9, 6), (40, 40)]
TOLERANCE = {np.float32: 1e-5, np.float64: 1e-12, np.complex64: 1e-5, np.complex128: 1e-12}


@functools.cache
def real(name: str) -> sp.csr_array:
    return datasets.load_matrix(name)


def random_sparse(rng, shape, dtype=np.float64, density=0.3, empty_rows=True) -> sp.csr_array:
    """A random csr_array with values in [-0.5, 0.5) and some rows emptied."""
    m = shape[0]
    S = sp.random_array(shape, density=density, format="csr", rng=rng, dtype=np.float64)
    S.data -= 0.5
    if np.dtype(dtype).kind == "c":
        S = S + 1j * sp.random_array(shape, density=density, format="csr", rng=rng)
    S = sp.csr_array(S.astype(dtype))
    if empty_rows and m > 2:
        S = sp.csr_array(sp.diags_array((rng.random(m) > 0.3).astype(np.float64)) @ S).astype(dtype)
    S.sort_indices()
    return S


def make(S, fmt="csr", backend="cpu", index_dtype=None):
    params = {"max_fill": None} if fmt == "ell" else {}  # any padding: the tests' rows are uneven
    return sparsegpu.from_scipy(S, format=fmt, backend=backend, index_dtype=index_dtype, **params)


def dense(x) -> np.ndarray:
    """A dense NumPy copy of a sparsegpu matrix, scipy matrix, or array."""
    if isinstance(x, sparsegpu.SparseMatrix):
        return x.to_scipy().toarray()
    if sp.issparse(x):
        return x.toarray()
    return to_numpy(x)


def assert_same_pattern_and_values(got, want, dtype=np.float64, exact=False):
    """got (sparsegpu) and want (scipy) hold the same entries at the same places."""
    G = sp.csr_array(got.to_scipy())
    W = sp.csr_array(want)
    G.sort_indices()
    W.sum_duplicates()
    assert G.shape == W.shape
    assert np.array_equal(G.indptr, W.indptr) and np.array_equal(G.indices, W.indices), "pattern differs"
    if exact:
        assert np.array_equal(G.data, W.data.astype(G.data.dtype))
    else:
        np.testing.assert_allclose(G.data, W.data, rtol=TOLERANCE[np.dtype(dtype).type], atol=0)


def shares_memory(a, b) -> bool:
    return any(np.shares_memory(x, y) for x in a._arrays().values() for y in b._arrays().values())


# --------------------------------------------------------------------------- sparse with sparse


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_add_subtract_multiply_match_scipy(rng, fmt, shape, index_dtype):
    S, T = random_sparse(rng, shape), random_sparse(rng, shape)
    A, B = make(S, fmt, index_dtype=index_dtype), make(T, fmt, index_dtype=index_dtype)
    for got, want in ((A + B, S + T), (A - B, S - T), (A * B, S * T), (A.multiply(B), S.multiply(T))):
        assert got.format == ("csc" if fmt == "csc" else "csr") and got.index_dtype == index_dtype
        assert_same_pattern_and_values(got, want, exact=True)
        assert not shares_memory(got, A) and not shares_memory(got, B)


@pytest.mark.parametrize("dtypes", [(np.float32, np.float64), (np.float32, np.complex64), (np.float64, np.complex64),
                                    (np.complex128, np.float32)])
def test_mixed_dtypes_promote_as_numpy(rng, dtypes):
    S, T = random_sparse(rng, (8, 6), dtypes[0]), random_sparse(rng, (8, 6), dtypes[1])
    got = make(S) + make(T, "csc")
    assert got.dtype == np.result_type(*dtypes) == (S + T).dtype
    assert_same_pattern_and_values(got, S + T, got.dtype)


def test_mixed_index_dtypes_give_the_wider(rng):
    S = random_sparse(rng, (10, 10))
    got = make(S, index_dtype=np.int32) + make(S, index_dtype=np.int64)
    assert got.index_dtype == np.int64
    assert make(S, index_dtype=np.int32).multiply(make(S, index_dtype=np.int32)).index_dtype == np.int32


def test_cancellation_and_explicit_zeros_are_dropped(rng):
    S = random_sparse(rng, (12, 9))
    A = make(S)
    assert (A - A).nnz == 0 and (A + (-A)).nnz == 0
    Z = sparsegpu.CSR((np.array([0.0, 2.0]), np.array([1, 0]), np.array([0, 1, 2])), (2, 2), backend="cpu")
    W = sp.csr_array((np.array([0.0, 2.0]), np.array([1, 0]), np.array([0, 1, 2])), shape=(2, 2))
    zero = sp.csr_array((2, 2))
    assert (Z + make(zero)).nnz == (W + zero).nnz == 1
    # A row with a cancelling entry and one that survives: exactly SciPy's pattern.
    P = sp.csr_array(np.array([[1.0, 2.0, 0.0], [0.0, 3.0, 4.0]]))
    Q = sp.csr_array(np.array([[-1.0, 0.0, 5.0], [0.0, -3.0, 0.0]]))
    assert_same_pattern_and_values(make(P) + make(Q), P + Q, exact=True)
    assert (make(P) + make(Q)).nnz == 3


def test_unsorted_duplicate_entries_sum_first(rng):
    indptr, indices = np.array([0, 3, 4]), np.array([2, 0, 2, 1])
    data = rng.standard_normal(4)
    A = sparsegpu.CSR((data, indices, indptr), (2, 3), backend="cpu")
    S = sp.csr_array((data, indices, indptr), shape=(2, 3))
    B = make(random_sparse(rng, (2, 3)))
    assert_same_pattern_and_values(A + B, S + B.to_scipy())
    np.testing.assert_allclose(dense(abs(A)), abs(S).toarray())
    np.testing.assert_allclose(to_numpy(A.max(axis=1)), S.max(axis=1).toarray())
    np.testing.assert_allclose(to_numpy(A.diagonal(2)), S.diagonal(2))
    np.testing.assert_allclose(A.toarray(), S.toarray())


def test_scipy_operands_on_either_side(rng):
    S, T = random_sparse(rng, (7, 5)), random_sparse(rng, (7, 5))
    A = make(S)
    for got, want in ((A + T, S + T), (T + A, T + S), (A - T, S - T), (T - A, T - S), (T * A, T * S)):
        assert isinstance(got, sparsegpu.SparseMatrix)
        assert_same_pattern_and_values(got, want, exact=True)


def test_shape_mismatch_names_both_shapes(rng):
    A, B = make(random_sparse(rng, (4, 5))), make(random_sparse(rng, (5, 4)))
    for op in (lambda: A + B, lambda: A - B, lambda: A.multiply(B), lambda: A + np.ones((5, 4))):
        with pytest.raises(ValueError, match=r"\(4, 5\).*\(5, 4\)"):
            op()


# --------------------------------------------------------------------------- the GPU's array code, on NumPy


@pytest.mark.parametrize("op", ["add", "subtract", "multiply"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(0, 0), (1, 9), (9, 1), (30, 20), (20, 30)])
def test_merge_matches_scipy_bitwise(rng, op, dtype, shape):
    S, T = random_sparse(rng, shape, dtype), random_sparse(rng, shape, dtype, density=0.5)
    T[T.nonzero()[0][:3], T.nonzero()[1][:3]] = 0  # explicit zeros
    if shape[0] > 1 and S.nnz:  # exact cancellations
        T = sp.csr_array(T + sp.csr_array((-S.data[:4], S.indices[:4], np.minimum(S.indptr, 4)), shape=shape))
    arrays = [(M.indptr, M.indices, M.data) for M in (S, T)]
    want = {"add": S + T, "subtract": S - T, "multiply": S.multiply(T)}[op]
    want.sum_duplicates()
    for merge in (ew.merge, ew.merge_by_sort):
        indptr, indices, data = merge(*arrays, op, shape, np.dtype(dtype), np.dtype(np.int32), np)
        assert np.array_equal(indptr, want.indptr) and np.array_equal(indices, want.indices)
        assert data.dtype == dtype
        if op == "multiply" and np.dtype(dtype).kind == "c":  # SciPy's compiled complex product rounds its own way
            np.testing.assert_allclose(data, want.data, rtol=4 * np.finfo(dtype).eps, atol=0)
        else:
            assert np.array_equal(data, want.data)


def test_entry_order_sorts_pairs_whose_key_would_overflow(rng):
    majors = rng.integers(0, 2**40, 200).astype(np.int64)
    majors[:50] = majors[50:100]  # repeated majors: ties broken by the minor index, then stably
    minors = rng.integers(0, 3, 200).astype(np.int64)
    order, keys = ew.entry_order(majors, minors, 2**40, np)
    assert keys.shape == (2, 200)
    want = np.lexsort((np.arange(200), minors, majors))
    assert np.array_equal(order, want)
    first = np.flatnonzero(ew._starts(keys, np))
    pairs = set(zip(majors.tolist(), minors.tolist()))
    assert first.size == len(pairs)


def test_merge_keeps_inf_times_missing_as_scipy():
    S = sp.csr_array(np.array([[np.inf, 1.0]]))
    T = sp.csr_array(np.array([[0.0, 2.0]]))
    T.eliminate_zeros()
    want = S.multiply(T)
    with np.errstate(invalid="ignore"):  # inf * 0, as SciPy computes it
        got = ew.merge((S.indptr, S.indices, S.data), (T.indptr, T.indices, T.data), "multiply", (1, 2),
                       np.dtype(np.float64), np.dtype(np.int32), np)
    assert np.array_equal(got[1], want.indices) and np.array_equal(got[2], want.data, equal_nan=True)


def test_canonical_and_dense_arrays_on_numpy(rng):
    indptr = np.array([0, 4, 4, 7])
    indices = np.array([3, 1, 3, 0, 2, 2, 0])
    data = rng.standard_normal(7)
    S = sp.csr_array((data, indices, indptr), shape=(3, 4))
    p, i, d = ew.canonical(indptr, indices, data, 4, np)
    W = S.copy()
    W.sum_duplicates()
    assert np.array_equal(p, W.indptr) and np.array_equal(i, W.indices)
    np.testing.assert_allclose(d, W.data, rtol=1e-15)
    assert ew.is_canonical(p, i, np) and not ew.is_canonical(indptr, indices, np)
    np.testing.assert_array_equal(ew.to_dense(p, i, d, (3, 4), np.dtype(np.float64), np), W.toarray())


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo"])
@pytest.mark.parametrize("dtype", [np.float32, np.complex128])
def test_gpu_branches_on_numpy_arrays(rng, monkeypatch, fmt, dtype):
    """The GPU backend's branches (merge instead of SciPy, scatter instead of SciPy's toarray,
    segmented sums) run over NumPy arrays: matrices labelled "gpu" whose array module is NumPy."""
    monkeypatch.setattr(sparsegpu.SparseMatrix, "_xp", property(lambda self: np))
    S, T = random_sparse(rng, (30, 20), dtype), random_sparse(rng, (30, 20), dtype, density=0.5)
    T = sp.csr_array(T - sp.csr_array((S.data[:9], S.indices[:9], np.minimum(S.indptr, 9)), shape=S.shape))
    A, B = make(S, fmt), make(T, fmt)
    for M in (A, B):
        M._backend = "gpu"
    real = np.dtype(dtype).kind == "f"
    for got, want, exact in ((A + B, S + T, True), (A - B, S - T, True), (A * B, S.multiply(T), real)):
        assert got.backend == "gpu"
        assert_same_pattern_and_values(got, want, dtype, exact=exact)
    np.testing.assert_array_equal(A.toarray(), S.toarray())
    tol = TOLERANCE[np.dtype(dtype).type]
    for axis in (0, 1):
        np.testing.assert_allclose(A.sum(axis=axis), S.sum(axis=axis), rtol=tol, atol=tol)
    for key in (slice(3, 9), slice(None, None, 4)):
        np.testing.assert_array_equal(dense(A[key]), S[key].toarray())


# --------------------------------------------------------------------------- scalars


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_scalar_products_and_division_match_scipy(rng, fmt, dtype):
    S = random_sparse(rng, (9, 7), dtype)
    S.data[0] = 0  # an explicit zero, kept by scalar products as SciPy keeps it
    A = make(S, fmt)
    for got, want in ((2 * A, 2 * S), (A * 2.5, S * 2.5), (A * np.float64(3), S * np.float64(3)),
                      (np.float32(3) * A, np.float32(3) * S), (np.array(2.0) * A, S * np.array(2.0)),
                      (A * 1j, S * 1j), (A / 4, S / 4), (A / np.float32(3), S / np.float32(3)), (-A, -S),
                      (abs(A), abs(S)), (A.conj(), S.conj()), (A.multiply(np.array(2.0)), S.multiply(np.array(2.0)))):
        assert got.dtype == want.dtype, (got.dtype, want.dtype)
        assert got.format == fmt and got.nnz == want.nnz
        np.testing.assert_array_equal(dense(got), want.toarray())
        assert not shares_memory(got, A)


def test_scalar_addition_rules(rng):
    S = random_sparse(rng, (5, 5))
    A = make(S)
    for got in (A + 0, 0 + A, A - 0):
        np.testing.assert_array_equal(dense(got), S.toarray())
        assert not shares_memory(got, A)
    np.testing.assert_array_equal(dense(0 - A), -S.toarray())
    for op in (lambda: A + 1, lambda: 1 + A, lambda: A - 2.0, lambda: 3 - A):
        with pytest.raises(NotImplementedError, match="nonzero scalar"):
            op()
    with pytest.raises(ZeroDivisionError):
        A / 0


def test_scalar_of_unsupported_dtype_is_refused(rng):
    A = make(random_sparse(rng, (3, 3)))
    with pytest.raises(TypeError, match="float32, float64"):
        A * np.longdouble(2)


# --------------------------------------------------------------------------- dense operands


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo", "sell"])
@pytest.mark.parametrize("other_shape", [(6, 4), (4,), (1, 4), (6, 1)])
def test_add_subtract_dense_give_dense(rng, fmt, other_shape):
    S = random_sparse(rng, (6, 4))
    D = rng.standard_normal(other_shape)
    A = make(S, fmt)
    for got, want in ((A + D, S + D), (D + A, D + S), (A - D, S - D), (D - A, D - S)):
        assert isinstance(got, np.ndarray) and got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo", "ell"])
@pytest.mark.parametrize("shapes", [((6, 4), (6, 4)), ((6, 4), (4,)), ((6, 4), (1, 4)), ((6, 4), (6, 1)),
                                    ((1, 4), (5, 4)), ((6, 1), (6, 3)), ((1, 4), (5, 1)), ((1, 1), (3, 2))])
def test_multiply_dense_broadcasts_as_scipy(rng, fmt, shapes):
    S = random_sparse(rng, shapes[0], density=0.6)
    D = rng.standard_normal(shapes[1]).astype(np.float32)
    got, want = make(S, fmt).multiply(D), S.multiply(D)
    if sp.issparse(want):
        assert got.format == "coo" and got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_array_equal(dense(got), want.toarray())
    else:
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(dense(make(S, fmt) / D.astype(np.float64)), dense(S / D.astype(np.float64)))


def test_multiply_by_sparse_row_or_column(rng):
    S = random_sparse(rng, (7, 5), density=0.6)
    row, col = random_sparse(rng, (1, 5), density=0.6), random_sparse(rng, (7, 1), density=0.6)
    row.data[0] = 0  # an explicit zero: its products are dropped, as SciPy's
    for fmt in ("csr", "csc", "coo"):
        A = make(S, fmt)
        assert_same_pattern_and_values(A.multiply(make(row)), S.multiply(row), exact=True)
        assert_same_pattern_and_values(A.multiply(col), S.multiply(col), exact=True)
    with pytest.raises(ValueError, match="inconsistent shapes"):
        make(S).multiply(make(random_sparse(rng, (2, 5))))


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo"])
@pytest.mark.parametrize("other_shape", [(1, 5), (7, 1)])
@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # inf * 0, on purpose
def test_multiply_by_sparse_vector_keeps_inf_times_implicit_zero(rng, fmt, other_shape):
    """SciPy multiplies by the diagonal matrix of the vector's dense values, so an inf of the
    matrix facing an implicit zero of the vector gives NaN; only zero results drop."""
    S = random_sparse(rng, (7, 5), density=0.6)
    entry = rng.integers(0, S.nnz)
    S.data[entry] = rng.choice([np.inf, -np.inf])
    row, col = np.repeat(np.arange(7), np.diff(S.indptr))[entry], S.indices[entry]
    values = rng.standard_normal(other_shape)
    values.flat[col if other_shape[0] == 1 else row] = 0  # an implicit zero facing the inf
    vector = sp.csr_array(values)
    want = S.multiply(vector)
    got = make(S, fmt).multiply(vector)
    assert np.isnan(want.toarray()).any()
    np.testing.assert_array_equal(dense(got), want.toarray())
    assert got.nnz == want.nnz


@pytest.mark.parametrize("other", ["transpose", "text", "none", "object"])
def test_multiply_by_an_operand_of_another_kind_raises(rng, other):
    """The method raises (the operators return NotImplemented, so Python tries the other side)."""
    A = make(random_sparse(rng, (4, 4)))
    operand = {"transpose": A.T, "text": "x", "none": None, "object": object()}[other]
    with pytest.raises(TypeError, match="other must be"):
        A.multiply(operand)
    with pytest.raises(TypeError):
        A * operand


def test_incompatible_dense_is_refused(rng):
    A = make(random_sparse(rng, (4, 5)))
    with pytest.raises(ValueError, match=r"\(4, 5\).*\(3,\)"):
        A.multiply(np.ones(3))
    with pytest.raises(ValueError, match="at most 2 dimensions"):
        A + np.ones((2, 4, 5))
    assert A.__add__("text") is NotImplemented


# --------------------------------------------------------------------------- structure


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("shape", SHAPES)
def test_transpose_and_conj(rng, fmt, shape):
    S = random_sparse(rng, shape, np.complex128)
    A = make(S, fmt)
    At = A.transpose()
    assert At.format == {"csr": "csc", "csc": "csr", "coo": "coo"}.get(fmt, "csr")
    assert At.shape == shape[::-1] and not shares_memory(At, A)
    np.testing.assert_array_equal(dense(At), S.T.toarray())
    np.testing.assert_array_equal(dense(A.conj()), S.conj().toarray())
    assert isinstance(A.T, sparsegpu.TransposedOperator)  # .T stays the lazy operator
    if fmt == "coo" and At.nnz:
        assert np.all(np.diff(At.row) >= 0)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_diagonal_and_sums_match_scipy(rng, fmt, dtype, shape):
    S = random_sparse(rng, shape, dtype)
    A = make(S, fmt)
    for k in (0, 1, -2, shape[1], -shape[0] - 1):
        got = A.diagonal(k)
        assert got.dtype == S.dtype
        np.testing.assert_array_equal(got, S.diagonal(k))
    tol = TOLERANCE[np.dtype(dtype).type]
    total = A.sum()
    assert np.ndim(total) == 0 and np.asarray(total).dtype == S.sum().dtype
    np.testing.assert_allclose(total, S.sum(), rtol=tol, atol=tol)
    for axis in (0, 1, -1, -2):
        got = A.sum(axis=axis)
        assert got.shape == S.sum(axis=axis).shape and got.dtype == dtype
        np.testing.assert_allclose(got, S.sum(axis=axis), rtol=tol, atol=tol)
    np.testing.assert_allclose(A.sum(dtype=np.complex128), S.sum(dtype=np.complex128), rtol=tol, atol=tol)


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo", "hyb"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 7), (7, 1), (6, 9), (9, 6), (3, 3)])
def test_max_min_count_implicit_zeros(rng, fmt, dtype, shape):
    S = random_sparse(rng, shape, dtype, density=0.5)
    if shape == (3, 3):  # a full row of negatives, a full column of positives
        S = sp.csr_array(np.array([[-1.0, -2.0, -3.0], [0.0, 4.0, 0.0], [0.0, 5.0, 0.0]]).astype(dtype))
    A = make(S, fmt)
    for name in ("max", "min"):
        assert getattr(A, name)() == getattr(S, name)()
        assert getattr(A, name)(explicit=True) == getattr(S, name)(explicit=True)
        for axis in (0, 1, -1):
            want = getattr(S, name)(axis=axis)
            np.testing.assert_array_equal(getattr(A, name)(axis=axis), want.toarray())
            want = getattr(S, name)(axis=axis, explicit=True)
            np.testing.assert_array_equal(getattr(A, name)(axis=axis, explicit=True), want.toarray())


def test_max_min_edge_cases(rng):
    S = sp.csr_array(np.array([[np.nan, 1.0], [0.0, 2.0]]))
    A = make(S)
    assert np.isnan(A.max()) and np.isnan(A.min())
    np.testing.assert_array_equal(A.max(axis=1), S.max(axis=1).toarray())
    empty = make(sp.csr_array((3, 4)))
    assert empty.max() == 0 and empty.min(axis=0).tolist() == [0.0] * 4
    for shape, axis in (((0, 3), None), ((0, 3), 0), ((3, 0), 1)):
        with pytest.raises(ValueError, match="zero-size"):
            make(sp.csr_array(shape)).max(axis=axis)
    assert make(sp.csr_array((0, 3))).max(axis=1).shape == (0,)
    with pytest.raises(ValueError, match="axis"):
        A.sum(axis=2)
    with pytest.raises(TypeError, match="axis"):
        A.max(axis=0.5)


# --------------------------------------------------------------------------- rows


@pytest.mark.parametrize("fmt", FORMATS)
def test_row_indexing_matches_scipy(rng, fmt):
    S = random_sparse(rng, (11, 6))
    A = make(S, fmt)
    mask = rng.random(11) > 0.5
    keys = [slice(2, 7), slice(None), slice(5, 2), slice(-4, None), slice(None, None, 3), slice(9, 1, -2),
            [0, -1, 3, 3], np.array([], dtype=np.int64), np.array([-11, 10]), mask, (slice(1, 3), slice(None)),
            ([4, 2], slice(None))]
    for key in keys:
        got, want = A[key], S[key]
        assert got.format == (fmt if fmt in ("csr", "csc", "coo") else "csr")
        assert got.shape == want.shape
        np.testing.assert_array_equal(dense(got), want.toarray())
        assert not shares_memory(got, A)


def test_row_indexing_errors(rng):
    A = make(random_sparse(rng, (5, 4)))
    with pytest.raises(TypeError, match=r"A\[2:2\+1\]"):
        A[2]
    with pytest.raises(IndexError, match="out of range"):
        A[[0, 5]]
    with pytest.raises(IndexError, match="out of range"):
        A[[-6]]
    with pytest.raises(IndexError, match="length 5"):
        A[np.array([True, False])]
    with pytest.raises(TypeError, match="row indexing"):
        A[1:3, 0]
    with pytest.raises(TypeError, match="integers or booleans"):
        A[np.array([0.5])]


@pytest.mark.parametrize("fmt", FORMATS)
def test_eliminate_zeros_in_place(rng, fmt):
    S = random_sparse(rng, (10, 8), density=0.5)
    S.data[::3] = 0
    A = make(S, fmt)
    x = rng.standard_normal(8)
    before = A @ x  # builds cached plans, dropped by eliminate_zeros
    assert A.eliminate_zeros() is None
    W = S.copy()
    W.eliminate_zeros()
    assert A.nnz == W.nnz and A.format == fmt
    np.testing.assert_array_equal(dense(A), W.toarray())
    np.testing.assert_allclose(A @ x, before, rtol=1e-12)


# --------------------------------------------------------------------------- real matrices


@requires_matrices
@pytest.mark.parametrize("name", REAL_MATRICES)
def test_real_matrices(name):
    S = real(name)
    T = sp.csr_array(S.T if S.shape[0] == S.shape[1] else S[::-1])  # a second pattern of the same shape
    A = make(S, "csr")
    B = make(T, "csc")
    assert_same_pattern_and_values(A + B, S + T, exact=True)
    assert_same_pattern_and_values(A - B, S - T, exact=True)
    assert_same_pattern_and_values(A.multiply(B), S.multiply(T), exact=True)
    assert (A - A).nnz == 0
    np.testing.assert_array_equal(A.diagonal(), S.diagonal())
    scale = abs(S).sum(axis=1) + np.finfo(np.float64).tiny
    assert np.all(np.abs(A.sum(axis=1) - S.sum(axis=1)) <= 1e-12 * scale)
    assert A.max() == S.max() and A.min() == S.min()
    rows = np.arange(S.shape[0])[::-7]
    assert_same_pattern_and_values(A[rows], S[rows], exact=True)
    assert_same_pattern_and_values(A.transpose().asformat("csr"), S.T, exact=True)


# --------------------------------------------------------------------------- GPU


def gpu_pair(rng, shape=(300, 200), dtype=np.float64, fmt="csr", index_dtype=None):
    S, T = random_sparse(rng, shape, dtype, density=0.05), random_sparse(rng, shape, dtype, density=0.05)
    T = sp.csr_array(T - sp.csr_array((S.data[:50], S.indices[:50], np.minimum(S.indptr, 50)), shape=shape))
    return S, T, make(S, fmt, "gpu", index_dtype), make(T, fmt, "gpu", index_dtype)


def assert_on_gpu(M) -> None:
    import cupy

    assert M.backend == "gpu"
    assert all(isinstance(a, cupy.ndarray) for a in M._arrays().values())


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", ["csr", "csc", "coo", "sell"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_gpu_sparse_operations_match_scipy_bitwise(rng, fmt, dtype, index_dtype):
    S, T, A, B = gpu_pair(rng, dtype=dtype, fmt=fmt, index_dtype=index_dtype)
    cases = [(lambda: A + B, S + T), (lambda: A - B, S - T), (lambda: A * B, S.multiply(T)),
             (lambda: 3 * A, 3 * S), (lambda: A / 3, S / 3), (lambda: -A, -S), (lambda: abs(A), abs(S)),
             (lambda: A.transpose(), S.T), (lambda: A.conj(), S.conj()), (lambda: A[7:90:3], S[7:90:3]),
             (lambda: A[[-1, 4, 4]], S[[-1, 4, 4]])]
    for compute, want in cases:
        first, second = compute(), compute()
        assert_on_gpu(first)
        # Real arithmetic is exactly SciPy's (IEEE operations on the same pairs); complex products
        # and moduli may round differently in CuPy than in SciPy's compiled code.
        assert_same_pattern_and_values(first.asformat("csr"), want, dtype, exact=np.dtype(dtype).kind == "f")
        assert all(a.get().tobytes() == b.get().tobytes()
                   for a, b in zip(first._arrays().values(), second._arrays().values())), "not reproducible"


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", ["csr", "csc", "coo", "ell"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_gpu_reductions_match_scipy_and_reproduce(rng, fmt, dtype):
    import cupy

    S = random_sparse(rng, (500, 300), dtype, density=0.05)
    A = make(S, fmt, "gpu")
    tol = TOLERANCE[np.dtype(dtype).type]
    for compute, want in ((lambda: A.sum(), S.sum()), (lambda: A.sum(axis=0), S.sum(axis=0)),
                          (lambda: A.sum(axis=1), S.sum(axis=1)), (lambda: A.diagonal(3), S.diagonal(3)),
                          (lambda: A.max(), S.max()), (lambda: A.min(axis=0), S.min(axis=0).toarray()),
                          (lambda: A.max(axis=1), S.max(axis=1).toarray()), (lambda: A.toarray(), S.toarray())):
        first, second = compute(), compute()
        assert isinstance(first, cupy.ndarray)
        assert first.get().tobytes() == second.get().tobytes()
        np.testing.assert_allclose(first.get(), want, rtol=tol, atol=tol)


@pytest.mark.gpu
def test_gpu_dense_operands_and_libraries(rng):
    import cupy

    S = random_sparse(rng, (40, 30))
    A = make(S, "csr", "gpu")
    D = rng.standard_normal((40, 30))
    out = A + cupy.asarray(D)
    assert isinstance(out, cupy.ndarray) and np.array_equal(out.get(), S + D)
    out = A - D  # NumPy in, NumPy out
    assert isinstance(out, np.ndarray) and np.array_equal(out, S - D)
    product = A.multiply(cupy.asarray(D[0]))
    assert_on_gpu(product)
    assert product.format == "coo" and np.array_equal(dense(product), S.multiply(D[0]).toarray())
    with pytest.raises(TypeError, match="cpu and gpu|gpu and cpu|different backends"):
        A + make(S, "csr", "cpu")
    with pytest.raises(TypeError, match="CPU backend"):
        make(S, "csr", "cpu") + cupy.asarray(D)
    mask = rng.random(40) > 0.5
    np.testing.assert_array_equal(dense(A[cupy.asarray(mask)]), S[mask].toarray())
    row = random_sparse(rng, (1, 30), density=0.5)
    product = A.multiply(make(row, "csr", "gpu"))
    assert_on_gpu(product)
    assert_same_pattern_and_values(product, S.multiply(row), exact=True)
    out = A.multiply(D[:1, :1] * np.ones((40, 30)))
    assert_on_gpu(out)
    assert np.array_equal(dense(out), S.multiply(D[:1, :1] * np.ones((40, 30))).toarray())
    S.data[::4] = 0
    A = make(S, "sell", "gpu")
    A.eliminate_zeros()
    W = S.copy()
    W.eliminate_zeros()
    assert_on_gpu(A)
    assert A.nnz == W.nnz and np.array_equal(dense(A), W.toarray())


@pytest.mark.gpu
def test_gpu_merge_matches_numpy_reference(rng):
    import cupy

    S, T = random_sparse(rng, (1000, 800), density=0.01), random_sparse(rng, (1000, 800), density=0.01)
    for op in ("add", "subtract", "multiply"):
        for merge in (ew.merge, ew.merge_by_sort):
            host = merge((S.indptr, S.indices, S.data), (T.indptr, T.indices, T.data), op, S.shape,
                         np.dtype(np.float64), np.dtype(np.int32), np)
            device = merge(*[tuple(cupy.asarray(a) for a in (M.indptr, M.indices, M.data)) for M in (S, T)], op,
                           S.shape, np.dtype(np.float64), np.dtype(np.int32), cupy)
            assert all(np.array_equal(h, d.get()) for h, d in zip(host, device))


@pytest.mark.gpu
@requires_matrices
@pytest.mark.parametrize("name", REAL_MATRICES)
def test_gpu_real_matrices(name):
    S = real(name)
    T = sp.csr_array(S.T if S.shape[0] == S.shape[1] else S[::-1])
    A, B = make(S, "csr", "gpu"), make(T, "csr", "gpu")
    first, second = A + B, A + B
    assert_same_pattern_and_values(first, S + T, exact=True)
    assert all(a.get().tobytes() == b.get().tobytes() for a, b in zip(first._arrays().values(), second._arrays().values()))
    assert_same_pattern_and_values(A.multiply(B), S.multiply(T), exact=True)
    assert (A - A).nnz == 0
    assert A.max().item() == S.max()  # complex matrices compare lexicographically
    np.testing.assert_array_equal(A.diagonal().get(), S.diagonal())


def test_multiply_by_a_one_dimensional_sparse_array_names_other(rng):
    A = sparsegpu.from_scipy(sp.random_array((4, 3), density=0.5, rng=rng, format="csr"), backend="cpu")
    with pytest.raises(ValueError, match="other must be a 2-D sparse matrix"):
        A.multiply(sp.coo_array(rng.random(3)))

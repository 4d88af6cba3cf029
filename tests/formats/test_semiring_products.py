"""Semiring products on every format: ``A.spmv(x, semiring=..., mask=...)`` and ``A.spmspv(v, ...)``
against a dense NumPy oracle and the references (CPU), the CUDA kernels against both (gpu)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import sparsegpu
from sparsegpu import semiring as sr
from sparsegpu.formats.vector import SparseVector
from sparsegpu.reference import semiring as ref
from tests.conftest import poisoned, to_numpy, xp_for
from tests.test_semiring import dense_oracle, random_csr

PREDEFINED = list(sr.PREDEFINED.values())
IDS = [s.name for s in PREDEFINED]
FORMATS = [("csr", {}), ("csc", {}), ("coo", {}), ("ell", {"max_fill": None}), ("hyb", {}), ("jds", {}),
           ("sell", {}), ("sell", {"C": 4, "sigma": 1, "split": 0, "hot": 0}), ("sell", {"C": 8, "split": 2, "hot": 2})]
FORMAT_IDS = [f"{f}-{'-'.join(f'{k}={v}' for k, v in p.items()) or 'default'}" for f, p in FORMATS]
DTYPES = [(np.float64, np.int32), (np.float32, np.int64)]
HOP = sr.BinaryOp("hop", lambda a, b: b + 1, "b + V(1)")


def check_equal(out, expected, semiring):
    out = to_numpy(out)
    if semiring.add == sr.PLUS_MONOID:
        tol = 1e-5 if out.dtype == np.float32 else 1e-12
        np.testing.assert_allclose(out, expected, rtol=tol, atol=tol)
    else:
        assert np.array_equal(out, expected, equal_nan=True)


def matrix(rng, backend, fmt, params, m=45, n=38, density=0.15, dtype=np.float64, index_dtype=np.int32):
    S = random_csr(rng, m, n, density, dtype)
    return S, sparsegpu.from_scipy(S, format=fmt, backend=backend, index_dtype=index_dtype, **params)


# --------------------------------------------------------------------------- spmv


@pytest.mark.parametrize("fmt,params", FORMATS, ids=FORMAT_IDS)
@pytest.mark.parametrize("semiring", PREDEFINED, ids=IDS)
@pytest.mark.parametrize("dtype,index_dtype", DTYPES, ids=["f64-i32", "f32-i64"])
def test_spmv_matches_dense_oracle(rng, fmt, params, semiring, dtype, index_dtype):
    S, A = matrix(rng, "cpu", fmt, params, dtype=dtype, index_dtype=index_dtype)
    x = rng.uniform(-1.0, 2.0, S.shape[1]).astype(dtype)
    out = A.spmv(x, semiring=semiring)
    assert out.dtype == dtype
    check_equal(out, dense_oracle(S, x, semiring), semiring)
    reference = np.full(S.shape[0], np.nan, dtype)
    ref.csr_semiring_spmv(S.indptr, S.indices, S.data, x, reference, semiring.add.ufunc, semiring.mul.apply,
                          semiring.identity(dtype))
    check_equal(out, reference, semiring)


@pytest.mark.parametrize("fmt,params", FORMATS, ids=FORMAT_IDS)
@pytest.mark.parametrize("semiring", [sr.min_plus, sr.any_pair, sr.plus_pair], ids=["min_plus", "any_pair", "plus_pair"])
def test_mask_complement_and_kept_rows(rng, backend, fmt, params, semiring):
    xp = xp_for(backend)
    S, A = matrix(rng, backend, fmt, params)
    m, n = S.shape
    x = rng.uniform(0.0, 1.0, n)
    mask = rng.random(m) < 0.5
    expected = dense_oracle(S, x, semiring)
    for complement in (False, True):
        allowed = mask != complement
        kept = np.full(m, -123.5)
        y = xp.asarray(kept.copy())
        out = A.spmv(xp.asarray(x), y, semiring=semiring, mask=xp.asarray(mask), complement=complement)
        assert out is y
        check_equal(to_numpy(out)[allowed], expected[allowed], semiring)
        assert np.all(to_numpy(out)[~allowed] == -123.5)
        fresh = A.spmv(x, semiring=semiring, mask=mask.astype(np.int8), complement=complement)
        assert isinstance(fresh, np.ndarray)
        check_equal(fresh[allowed], expected[allowed], semiring)
        assert np.all(fresh[~allowed] == semiring.identity(np.float64))


def test_empty_rows_give_the_identity(backend):
    S = sp.csr_array((np.array([2.0, 3.0]), np.array([0, 1]), np.array([0, 0, 2, 2, 2])), shape=(4, 3))
    A = sparsegpu.from_scipy(S, backend=backend)
    xp = xp_for(backend)
    x = xp.asarray([1.0, 5.0, 7.0])
    for semiring in PREDEFINED:
        out = to_numpy(A.spmv(x, semiring=semiring))
        ident = semiring.identity(np.float64)
        assert out[0] == ident and out[2] == ident and out[3] == ident, semiring
    assert to_numpy(A.spmv(x, semiring="min_plus"))[1] == 3.0
    assert to_numpy(A.spmv(x, semiring="max_times"))[1] == 15.0
    assert to_numpy(A.spmv(x, semiring="plus_pair"))[1] == 2.0


def test_plus_times_without_mask_is_the_ordinary_product(rng, backend):
    xp = xp_for(backend)
    S, A = matrix(rng, backend, "csr", {})
    x = xp.asarray(rng.standard_normal(S.shape[1]))
    plain = to_numpy(A @ x)
    for semiring in (None, "plus_times", sr.plus_times):
        assert np.array_equal(to_numpy(A.spmv(x, semiring=semiring)), plain)
    y = xp.asarray(rng.standard_normal(S.shape[0]))
    expected = to_numpy(A.spmv(x, y.copy(), alpha=2.0, beta=-1.0))
    assert np.array_equal(to_numpy(A.spmv(x, y.copy(), alpha=2.0, beta=-1.0, semiring="plus_times")), expected)


def test_masked_plus_times_scales_allowed_rows(rng, backend):
    xp = xp_for(backend)
    S, A = matrix(rng, backend, "csr", {})
    m, n = S.shape
    x = rng.standard_normal(n)
    y0 = rng.standard_normal(m)
    mask = rng.random(m) < 0.5
    out = to_numpy(A.spmv(xp.asarray(x), xp.asarray(y0.copy()), alpha=2.0, beta=0.5, mask=xp.asarray(mask)))
    expected = np.where(mask, 2.0 * (S @ x) + 0.5 * y0, y0)
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-12)
    out = to_numpy(A.spmv(x, alpha=3.0, mask=mask, complement=True))
    np.testing.assert_allclose(out, np.where(~mask, 3.0 * (S @ x), 0.0), rtol=1e-12, atol=1e-12)


def test_min_max_propagate_nan_through_products(backend):
    S = sp.csr_array(np.array([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0]]))
    A = sparsegpu.from_scipy(S, backend=backend)
    x = xp_for(backend).asarray([np.nan, 2.0, 3.0])
    for name in ("min_plus", "max_plus", "min_times", "plus_min"):
        out = to_numpy(A.spmv(x, semiring=name))
        assert np.isnan(out[0]) and out[1] == {"min_plus": 3.0, "max_plus": 4.0, "min_times": 2.0,
                                               "plus_min": 2.0}[name], name


def test_user_made_op(rng, backend):
    S, A = matrix(rng, backend, "csr", {})
    x = rng.uniform(0, 5, S.shape[1])
    hops = sr.Semiring(sr.MIN, HOP)
    out = to_numpy(A.spmv(xp_for(backend).asarray(x), semiring=hops))
    check_equal(out, dense_oracle(S, x, hops), hops)
    rows_with_entries = np.diff(S.indptr) > 0
    assert np.array_equal(out[rows_with_entries], np.array([x[S.indices[S.indptr[i]:S.indptr[i + 1]]].min() + 1
                                                            for i in np.flatnonzero(rows_with_entries)]))


def test_explicit_zeros_are_stored_entries(backend):
    S = sp.csr_array((np.array([0.0, 4.0]), np.array([0, 1]), np.array([0, 1, 2])), shape=(2, 2))
    A = sparsegpu.from_scipy(S, backend=backend)
    out = to_numpy(A.spmv(xp_for(backend).asarray([5.0, 1.0]), semiring="min_plus"))
    assert out.tolist() == [5.0, 5.0]
    assert to_numpy(A.spmv(xp_for(backend).asarray([5.0, 1.0]), semiring="any_pair")).tolist() == [1.0, 1.0]


# --------------------------------------------------------------------------- bad input


def test_bad_arguments_are_refused_before_any_kernel():
    A = sparsegpu.from_scipy(sp.eye(3, format="csr"), backend="cpu")
    x = np.ones(3)
    with pytest.raises(ValueError, match="unknown semiring"):
        A.spmv(x, semiring="min_min")
    with pytest.raises(TypeError, match="semiring must be"):
        A.spmv(x, semiring=np.minimum)
    with pytest.raises(ValueError, match="alpha and beta apply to plus_times only"):
        A.spmv(x, alpha=2.0, semiring="min_plus")
    with pytest.raises(ValueError, match="alpha and beta"):
        A.spmv(x, np.zeros(3), beta=1.0, semiring="any_pair")
    with pytest.raises(TypeError, match="alpha"):
        A.spmv(x, alpha="2", semiring="min_plus")
    with pytest.raises(ValueError, match="mask must be 1-D of length 3"):
        A.spmv(x, semiring="min_plus", mask=np.ones(4))
    with pytest.raises(TypeError, match="mask must be an array of booleans or numbers"):
        A.spmv(x, semiring="min_plus", mask=np.array(["a", "b", "c"]))
    with pytest.raises(TypeError, match="complement must be True or False"):
        A.spmv(x, semiring="min_plus", mask=np.ones(3), complement=1)
    with pytest.raises(ValueError, match="complement=True needs a mask"):
        A.spmv(x, semiring="min_plus", complement=True)
    with pytest.raises(ValueError, match="x has length"):
        A.spmv(np.ones(4), semiring="min_plus")
    with pytest.raises(TypeError, match="y has dtype"):
        A.spmv(x, np.zeros(3, np.float32), semiring="min_plus")
    with pytest.raises(ValueError, match="beta is nonzero"):
        A.spmv(x, beta=1.0, mask=np.ones(3))
    C = sparsegpu.from_scipy(sp.eye(3, format="csr", dtype=np.complex128), backend="cpu")
    with pytest.raises(TypeError, match="complex matrix"):
        C.spmv(np.ones(3, complex), semiring="min_plus")
    with pytest.raises(TypeError, match="complex matrix"):
        C.spmspv(SparseVector(3, np.array([0]), np.array([1.0 + 0j])), semiring="any_pair")
    v = SparseVector(3, np.array([1]), np.array([1.0]))
    with pytest.raises(TypeError, match="SparseVector"):
        A.spmspv(np.ones(3))
    with pytest.raises(ValueError, match="v has length 4"):
        A.spmspv(SparseVector(4, np.array([1]), np.array([1.0])))
    with pytest.raises(ValueError, match="direction"):
        A.spmspv(v, direction="sideways")
    with pytest.raises(ValueError, match="mask must be 1-D"):
        A.spmspv(v, mask=np.ones(2))
    with pytest.raises(TypeError, match="cannot be cast safely"):
        sparsegpu.from_scipy(sp.eye(3, format="csr", dtype=np.float32), backend="cpu").spmspv(v)


def test_masked_complex_plus_times(rng, backend):
    S = sp.random(20, 20, density=0.2, random_state=rng, format="csr") * (1 + 2j)
    A = sparsegpu.from_scipy(S, backend=backend)
    x = rng.standard_normal(20) + 1j * rng.standard_normal(20)
    mask = rng.random(20) < 0.5
    out = to_numpy(A.spmv(xp_for(backend).asarray(x), mask=xp_for(backend).asarray(mask)))
    np.testing.assert_allclose(out, np.where(mask, S @ x, 0), rtol=1e-12, atol=1e-12)


def test_sparse_vector_checks_and_round_trip(rng):
    dense = np.where(rng.random(30) < 0.3, rng.standard_normal(30), 0.0)
    v = SparseVector.from_dense(dense)
    assert np.array_equal(v.to_dense(), dense) and v.nnz == np.count_nonzero(dense)
    with pytest.raises(ValueError, match="strictly increasing"):
        SparseVector(5, np.array([3, 1]), np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match="strictly increasing"):
        SparseVector(5, np.array([1, 1]), np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match=r"in \[0, 5\)"):
        SparseVector(5, np.array([5]), np.array([1.0]))
    with pytest.raises(ValueError, match="one length"):
        SparseVector(5, np.array([1]), np.array([1.0, 2.0]))
    with pytest.raises(TypeError, match="integers"):
        SparseVector(5, np.array([1.0]), np.array([1.0]))
    with pytest.raises(ValueError, match="n must be at least 0"):
        SparseVector(-1, np.array([], int), np.array([]))


# --------------------------------------------------------------------------- spmspv


def frontier(rng, n, share, xp=np, dtype=np.float64):
    dense = np.where(rng.random(n) < share, rng.uniform(0.5, 2.0, n), 0.0).astype(dtype)
    v = SparseVector.from_dense(dense)
    return SparseVector(n, xp.asarray(v.indices), xp.asarray(v.values)), dense


def spmspv_oracle(S, dense, semiring, allowed=None):
    """(indices, values) of the rows some stored entry of the frontier reaches (and allowed)."""
    present = dense != 0
    coo = S.tocoo()
    on = present[coo.col]
    rows = np.unique(coo.row[on])
    if allowed is not None:
        rows = rows[allowed[rows]]
    sub = sp.csr_array((coo.data[on], (coo.row[on], coo.col[on])), shape=S.shape)
    sub.sort_indices()
    return rows, dense_oracle(sub, dense, semiring)[rows]


@pytest.mark.parametrize("semiring", PREDEFINED + [sr.Semiring(sr.MIN, HOP)], ids=IDS + ["min_hop"])
@pytest.mark.parametrize("fmt", ["csr", "csc", "coo", "sell"])
def test_spmspv_push_pull_and_dense_agree(rng, backend, semiring, fmt):
    xp = xp_for(backend)
    S, A = matrix(rng, backend, fmt, {}, m=60, n=50, density=0.08)
    for share in (0.0, 0.05, 0.5, 1.0):
        v, dense = frontier(rng, 50, share, xp)
        rows, values = spmspv_oracle(S, dense, semiring)
        for direction in ("push", "pull", "auto"):
            out = A.spmspv(v, semiring=semiring, direction=direction)
            assert isinstance(out, SparseVector) and out.n == 60 and out.backend == backend
            assert np.array_equal(to_numpy(out.indices), rows), direction
            check_equal(out.values, values, semiring)
        again = A.spmspv(v, semiring=semiring, direction="push")
        assert np.array_equal(to_numpy(again.values), to_numpy(A.spmspv(v, semiring=semiring,
                                                                         direction="push").values))


@pytest.mark.parametrize("semiring", [sr.any_pair, sr.min_plus, sr.plus_times], ids=["any_pair", "min_plus", "plus_times"])
def test_spmspv_mask(rng, backend, semiring):
    xp = xp_for(backend)
    S, A = matrix(rng, backend, "csr", {}, m=70, n=70, density=0.06)
    v, dense = frontier(rng, 70, 0.2, xp)
    visited = rng.random(70) < 0.4
    for complement in (False, True):
        rows, values = spmspv_oracle(S, dense, semiring, allowed=visited != complement)
        for direction in ("push", "pull"):
            out = A.spmspv(v, semiring=semiring, mask=xp.asarray(visited), complement=complement, direction=direction)
            assert np.array_equal(to_numpy(out.indices), rows)
            check_equal(out.values, values, semiring)


def test_auto_direction_follows_beamer(rng, monkeypatch):
    from sparsegpu.formats import _semiring

    S, A = matrix(rng, "cpu", "csr", {}, m=200, n=200, density=0.05)
    chosen = []
    monkeypatch.setattr(_semiring, "_push", lambda *a: chosen.append("push") or (np.zeros(0, np.int32), np.zeros(0)))
    monkeypatch.setattr(_semiring, "_pull", lambda *a: chosen.append("pull") or (np.zeros(0, np.int32), np.zeros(0)))
    column_lengths = np.diff(S.tocsc().indptr)
    light = int(np.flatnonzero(column_lengths > 0)[0])
    A.spmspv(SparseVector(200, np.array([light]), np.array([1.0])))
    A.spmspv(SparseVector(200, np.arange(200), np.ones(200)))
    everything_masked = np.zeros(200, bool)
    A.spmspv(SparseVector(200, np.array([light]), np.array([1.0])), mask=everything_masked)
    assert chosen == ["push", "pull", "pull"]  # a mask that allows nothing leaves a pull nothing to scan
    assert _semiring.beamer_direction(14, 196) == "push" and _semiring.beamer_direction(15, 196) == "pull"


def test_spmspv_numpy_frontier_on_any_backend(rng, backend):
    S, A = matrix(rng, backend, "csr", {}, m=30, n=30, density=0.1)
    v, dense = frontier(rng, 30, 0.3)
    out = A.spmspv(v, semiring="min_plus")
    assert out.backend == "cpu"
    rows, values = spmspv_oracle(S, dense, sr.min_plus)
    assert np.array_equal(out.indices, rows) and np.array_equal(out.values, values)


def test_spmspv_bfs_levels_match_scipy(rng, backend):
    xp = xp_for(backend)
    G = sparsegpu.datasets.kronecker(8, 8, seed=int(rng.integers(1 << 30)))
    G = sp.csr_array(G)
    n = G.shape[0]
    A = sparsegpu.from_scipy(G.T.tocsr(), backend=backend)  # out[i] gathers from in-neighbours
    levels = np.full(n, -1)
    levels[0] = 0
    v = SparseVector(n, xp.asarray(np.array([0], np.int32)), xp.asarray(np.array([1.0])))
    visited = np.zeros(n, bool)
    visited[0] = True
    for level in range(1, n):
        v = A.spmspv(v, semiring="any_pair", mask=xp.asarray(visited), complement=True)
        if v.nnz == 0:
            break
        reached = to_numpy(v.indices)
        levels[reached] = level
        visited[reached] = True
    expected = sp.csgraph.breadth_first_order(G, 0, return_predecessors=False)
    dist = sp.csgraph.shortest_path(G, unweighted=True, indices=0)
    assert set(np.flatnonzero(levels >= 0)) == set(expected.tolist())
    assert np.array_equal(levels[levels >= 0], dist[levels >= 0].astype(int))


# --------------------------------------------------------------------------- GPU kernels


def _gpu_cases():
    cases = [(s, np.float64, np.int32) for s in PREDEFINED]
    cases += [(sr.min_plus, np.float32, np.int64), (sr.any_pair, np.float32, np.int32), (sr.plus_min, np.float64, np.int64)]
    return cases


@pytest.mark.gpu
@pytest.mark.parametrize("semiring,dtype,index_dtype", _gpu_cases(),
                         ids=[f"{s.name}-{np.dtype(d).name}-{np.dtype(i).name}" for s, d, i in _gpu_cases()])
@pytest.mark.parametrize("fmt,params", [("csr", {}), ("ell", {"max_fill": None}), ("sell", {"C": 32, "split": 0, "hot": 0})],
                         ids=["csr", "ell", "sell-direct"])
def test_gpu_kernels_match_reference_and_are_deterministic(rng, semiring, dtype, index_dtype, fmt, params):
    import cupy

    S = random_csr(rng, 3000, 2500, 0.004, dtype)
    # One long row (split into chunks by the CSR kernels) and one empty row.
    S = sp.lil_array(S)
    S[7, :] = rng.uniform(0.5, 1.5, 2500).astype(dtype)
    S[11, :] = 0
    S = sp.csr_array(S)
    S.eliminate_zeros()
    S.sort_indices()
    A = sparsegpu.from_scipy(S, format=fmt, backend="gpu", index_dtype=index_dtype, **params)
    x = rng.uniform(-1.0, 2.0, 2500).astype(dtype)
    mask = rng.random(3000) < 0.7
    y = poisoned(3000, dtype, cupy)
    out = A.spmv(cupy.asarray(x), y, semiring=semiring, mask=cupy.asarray(mask))
    reference = np.full(3000, np.nan, dtype)
    ref.csr_semiring_spmv(S.indptr, S.indices, S.data, x, reference, semiring.add.ufunc, semiring.mul.apply,
                          semiring.identity(dtype), mask.astype(np.uint8))
    got = out.get()
    assert np.all(np.isnan(got[~mask]))  # kept
    check_equal(got[mask], reference[mask], semiring)
    check_equal(got[mask], dense_oracle(S, x, semiring)[mask], semiring)
    again = A.spmv(cupy.asarray(x), poisoned(3000, dtype, cupy), semiring=semiring, mask=cupy.asarray(mask))
    assert np.array_equal(again.get(), got, equal_nan=True)  # bitwise reproducible


@pytest.mark.gpu
@pytest.mark.parametrize("semiring", [sr.any_pair, sr.min_plus, sr.plus_times, sr.max_times],
                         ids=["any_pair", "min_plus", "plus_times", "max_times"])
def test_gpu_spmspv_long_rows_and_determinism(rng, semiring):
    import cupy

    S = random_csr(rng, 5000, 5000, 0.002)
    S = sp.lil_array(S)
    S[3, :] = 1.0  # a hub row: chunks with hit flags in the pull
    S[:, 5] = 2.0  # a hub column: a long run in the push
    S = sp.csr_array(S)
    S.sort_indices()
    A = sparsegpu.from_scipy(S, backend="gpu")
    for share in (0.001, 0.02, 0.6):
        v, dense = frontier(rng, 5000, share, cupy)
        if share == 0.02:
            dense[5] = 1.5
            v = SparseVector.from_dense(cupy.asarray(dense))
        rows, values = spmspv_oracle(S, dense, semiring)
        results = [A.spmspv(v, semiring=semiring, direction=d) for d in ("push", "pull", "push", "pull")]
        for out in results:
            assert np.array_equal(out.indices.get(), rows)
            check_equal(out.values, values, semiring)
        assert np.array_equal(results[0].values.get(), results[2].values.get())
        assert np.array_equal(results[1].values.get(), results[3].values.get())


@pytest.mark.gpu
def test_gpu_user_op_compiles_and_runs(rng):
    import cupy

    S = random_csr(rng, 500, 400, 0.02)
    A = sparsegpu.from_scipy(S, backend="gpu")
    x = rng.uniform(0, 3, 400)
    hops = sr.Semiring(sr.MIN, HOP)
    out = A.spmv(cupy.asarray(x), semiring=hops)
    check_equal(out, dense_oracle(S, x, hops), hops)


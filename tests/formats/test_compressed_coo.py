"""COO, CSR and CSC: construction, conversion and SpMV against SciPy, on every backend.

On the GPU backend each product is also compared with the CPU reference over the same
arrays, and repeated to check bitwise reproducibility.
"""

from __future__ import annotations


import numpy as np
import pytest
import scipy.sparse as sp

import sparsegpu
from tests.conftest import REAL_MATRICES, poisoned, requires_matrices, to_numpy, xp_for
from tests.formats.helpers import TOLERANCE, random_values, real

FORMATS = ["coo", "csr", "csc"]


def random_vector(rng, n, dtype):
    return random_values(rng, n, dtype)


def assert_close(got, want, S, x, dtype, what=""):
    """|got - want| within tol * (|S| |x|) elementwise: the scale of the sum's terms."""
    got, want = to_numpy(got), np.asarray(want)
    scale = abs(S) @ np.abs(x.astype(np.complex128 if np.dtype(dtype).kind == "c" else np.float64))
    bound = TOLERANCE[np.dtype(dtype).type] * (scale + np.abs(want)) + np.finfo(np.float64).tiny
    err = np.abs(got - want)
    worst = int(np.argmax(err - bound)) if err.size else 0
    assert np.all(err <= bound), f"{what}: entry {worst}: got {got[worst]}, want {want[worst]}"


def check_products(A, S, rng, dtype):
    """A @ x, A.T @ z and alpha/beta forms against SciPy, the format's reference against SciPy,
    and on the GPU the kernel against the reference."""
    m, n = S.shape
    xp = xp_for(A.backend)
    Sd = S.astype(np.result_type(S.dtype, dtype))
    x = random_vector(rng, n, dtype)
    z = random_vector(rng, m, dtype)
    assert_close(A @ xp.asarray(x), Sd @ x, Sd, x, dtype, "A @ x")
    assert_close(A.T @ xp.asarray(z), Sd.T @ z, Sd.T, z, dtype, "A.T @ x")
    y0 = random_vector(rng, m, dtype)
    y = xp.asarray(y0.copy())
    out = A.spmv(xp.asarray(x), y, alpha=2, beta=-0.5)
    assert out is y
    assert_close(y, 2 * (Sd @ x) - 0.5 * y0, Sd, x, dtype, "alpha/beta")
    y = poisoned(m, dtype, xp)
    A.spmv(xp.asarray(x), y, alpha=1.5, beta=0)  # beta == 0: the NaNs in y are never read
    assert_close(y, 1.5 * (Sd @ x), Sd, x, dtype, "beta=0 over NaN")
    # The format's NumPy reference over its own layout: against SciPy on both backends, and the
    # oracle of the GPU kernel.
    assert_close(A.reference_spmv(x), Sd @ x, Sd, x, dtype, "reference vs scipy")
    assert_close(A.reference_spmv(z, transpose=True), Sd.T @ z, Sd.T, z, dtype, "reference vs scipy (T)")
    if A.backend == "gpu":
        assert_close(A @ xp.asarray(x), A.reference_spmv(x), Sd, x, dtype, "kernel vs reference")
        assert_close(A.T @ xp.asarray(z), A.reference_spmv(z, transpose=True), Sd.T, z, dtype, "kernel vs reference (T)")
        first = to_numpy(A @ xp.asarray(x))
        for _ in range(3):
            assert np.array_equal(to_numpy(A @ xp.asarray(x)), first, equal_nan=True), "not reproducible"


# --------------------------------------------------------------------------- real matrices


@requires_matrices
@pytest.mark.parametrize("name", REAL_MATRICES)
@pytest.mark.parametrize("fmt", FORMATS)
def test_real_matrices(name, fmt, backend, rng):
    S = real(name)
    A = sparsegpu.from_scipy(S, format=fmt, backend=backend)
    assert A.shape == S.shape and A.nnz == S.nnz and A.format == fmt
    dtype = np.complex128 if S.dtype.kind == "c" else np.float64
    assert A.dtype == dtype
    assert (A.to_scipy() != S).nnz == 0
    check_products(A, S, rng, dtype)


@requires_matrices
@pytest.mark.parametrize("name", ["bcsstk16", "as-caida", "arrow", "mhd1280b", "lp_ship04l"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_real_matrices_single_precision(name, fmt, backend, rng):
    S = real(name)
    dtype = np.complex64 if S.dtype.kind == "c" else np.float32
    A = sparsegpu.from_scipy(S, format=fmt, backend=backend, dtype=dtype)
    assert A.dtype == dtype
    check_products(A, S, rng, dtype)


# --------------------------------------------------------------------------- edge cases


def random_sparse(rng, m, n, density, dtype=np.float64):
    S = sp.random_array((m, n), density=density, rng=rng, format="csr")
    S.data = random_vector(rng, S.nnz, dtype)
    return S


EDGE_CASES = {
    "0x0": lambda rng: sp.csr_array((0, 0)),
    "no nonzeros": lambda rng: sp.csr_array((7, 5)),
    "one row": lambda rng: random_sparse(rng, 1, 300, 0.3),
    "one column": lambda rng: random_sparse(rng, 300, 1, 0.3),
    "wide": lambda rng: random_sparse(rng, 40, 3000, 0.01),
    "tall": lambda rng: random_sparse(rng, 3000, 40, 0.02),
    "empty rows and columns": lambda rng: sp.csr_array(
        random_sparse(rng, 500, 400, 0.01).multiply(rng.random((500, 1)) < 0.5)
    ),
    "rows of every length": lambda rng: sp.csr_array(
        sp.random_array((2100, 2100), density=0.02, rng=rng).multiply(
            (np.arange(2100)[:, None] % 97) < (np.arange(2100)[None, :] % 211)
        )
    ),
}


@pytest.mark.parametrize("case", list(EDGE_CASES))
@pytest.mark.parametrize("fmt", FORMATS)
def test_edge_cases(case, fmt, backend, rng):
    S = EDGE_CASES[case](rng)
    A = sparsegpu.from_scipy(S, format=fmt, backend=backend)
    assert A.shape == S.shape and A.nnz == S.nnz
    check_products(A, S, rng, np.float64)
    assert (A.to_scipy() != S).nnz == 0


@pytest.mark.parametrize("fmt", FORMATS)
def test_one_row_of_a_million(fmt, backend, rng):
    n = 1_000_000
    S = sp.csr_array((random_vector(rng, n, np.float64), rng.permutation(n)[:n], [0, n]), shape=(1, n))
    S = sp.vstack([S, random_sparse(rng, 300, n, 1e-4)]).tocsr()  # plus ordinary rows
    A = sparsegpu.from_scipy(S, format=fmt, backend=backend)
    check_products(A, S, rng, np.float64)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_dtypes_and_int64_indices(fmt, dtype, backend, rng):
    S = random_sparse(rng, 700, 500, 0.02, dtype)
    A = sparsegpu.from_scipy(S, format=fmt, backend=backend, index_dtype=np.int64)
    assert A.index_dtype == np.int64 and A.dtype == dtype
    check_products(A, S, rng, dtype)


@pytest.mark.parametrize("fmt", FORMATS)
def test_nan_and_inf_propagate(fmt, backend):
    S = sp.csr_array(np.array([[1.0, np.nan, 0], [0, 2.0, 0], [np.inf, 0, 1.0]]))
    A = sparsegpu.from_scipy(S, format=fmt, backend=backend)
    y = to_numpy(A @ xp_for(backend).asarray([1.0, 1.0, 1.0]))
    assert np.isnan(y[0]) and y[1] == 2.0 and y[2] == np.inf


# --------------------------------------------------------------------------- structure and API


@pytest.mark.parametrize("fmt", FORMATS)
def test_duplicates_summed_explicit_zeros_kept(fmt, backend):
    S = sp.coo_array(([1.0, 2.0, 0.0, 4.0], ([0, 0, 1, 2], [1, 1, 0, 2])), shape=(3, 3))
    A = sparsegpu.from_scipy(S, format=fmt, backend=backend)
    assert A.nnz == 3  # (0,1) summed; the explicit zero at (1,0) is a stored entry
    dense = A.to_scipy().toarray()
    assert dense[0, 1] == 3.0 and dense[2, 2] == 4.0
    assert S.nnz == 4, "the caller's matrix must not change"


@pytest.mark.parametrize("source", FORMATS)
@pytest.mark.parametrize("target", FORMATS)
def test_asformat_round_trip(source, target, backend, rng):
    S = random_sparse(rng, 120, 90, 0.05)
    B = sparsegpu.from_scipy(S, format=source, backend=backend).asformat(target)
    assert B.format == target and B.backend == backend
    assert (B.to_scipy() != S).nnz == 0
    check_products(B, S, rng, np.float64)


def test_properties(backend, rng):
    S = random_sparse(rng, 60, 40, 0.1)
    A = sparsegpu.CSR.from_scipy(S, backend=backend)
    assert A.ndim == 2 and A.T.shape == (40, 60) and A.T.T is A
    assert A.nbytes == S.data.nbytes + S.indices.astype(np.int32).nbytes + S.indptr.astype(np.int32).nbytes
    B = A.astype(np.float32)
    assert B.dtype == np.float32 and A.dtype == np.float64
    assert "CSR 60x40" in repr(A) and "transpose" in repr(A.T)
    assert (A.T.to_scipy() != S.T).nnz == 0


def test_from_scipy_accepts_every_scipy_format(backend, rng):
    S = random_sparse(rng, 50, 30, 0.1)
    for kind in ("csr", "csc", "coo", "lil", "dok", "bsr", "dia"):
        for cls in (sp.csr_matrix, sp.csr_array):
            A = sparsegpu.from_scipy(cls(S).asformat(kind), backend=backend)
            assert (A.to_scipy() != S).nnz == 0, kind


def test_integer_and_pattern_values_become_float64(backend):
    S = sp.csr_array(np.array([[1, 0], [2, 3]], dtype=np.int64))
    A = sparsegpu.from_scipy(S, backend=backend)
    assert A.dtype == np.float64


def test_raw_array_constructors(backend, rng):
    S = random_sparse(rng, 40, 30, 0.1)
    xp = xp_for(backend)
    A = sparsegpu.CSR((xp.asarray(S.data), xp.asarray(S.indices), xp.asarray(S.indptr)), shape=S.shape, backend=backend)
    C = sparsegpu.CSC.from_scipy(S, backend=backend)
    B = sparsegpu.COO((xp.asarray(np.r_[S.tocoo().data, 1.0]),
                       (xp.asarray(np.r_[S.tocoo().row, 3]), xp.asarray(np.r_[S.tocoo().col, 4]))),
                      shape=S.shape, backend=backend)
    ref = S.toarray()
    ref[3, 4] += 1.0
    assert np.array_equal(B.to_scipy().toarray(), ref)
    assert np.array_equal(A.to_scipy().toarray(), S.toarray()) and np.array_equal(C.to_scipy().toarray(), S.toarray())
    row, col = B.to_scipy().coords
    assert np.all(np.diff(row.astype(np.int64) * 30 + col) > 0), "COO must be sorted by (row, col) without duplicates"


def test_coo_duplicates_summed_deterministically(backend, rng):
    n = 5000
    rows = rng.integers(0, 50, n)
    cols = rng.integers(0, 3, n)
    vals = rng.standard_normal(n)
    xp = xp_for(backend)
    A = sparsegpu.COO((xp.asarray(vals), (xp.asarray(rows), xp.asarray(cols))), shape=(50, 3), backend=backend)
    want = sp.coo_array((vals, (rows, cols)), shape=(50, 3)).toarray()
    np.testing.assert_allclose(A.to_scipy().toarray(), want, rtol=1e-12, atol=1e-12)
    again = sparsegpu.COO((xp.asarray(vals), (xp.asarray(rows), xp.asarray(cols))), shape=(50, 3), backend=backend)
    assert np.array_equal(to_numpy(A.data), to_numpy(again.data))


def test_threads_per_row_override(backend, rng):
    S = random_sparse(rng, 400, 400, 0.05)
    A = sparsegpu.CSR.from_scipy(S, backend=backend)
    for tpr in (1, 2, 4, 8, 16, 32):
        A.threads_per_row = tpr
        check_products(A, S, rng, np.float64)
    with pytest.raises(ValueError, match="threads_per_row"):
        A.threads_per_row = 3


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", FORMATS)
def test_gpu_atomic_option_is_correct(fmt, rng):
    S = random_sparse(rng, 3000, 2000, 0.01)
    A = sparsegpu.from_scipy(S, format=fmt, backend="gpu")
    with sparsegpu.options(deterministic=False):
        check_products_nondeterministic(A, S, rng)


def check_products_nondeterministic(A, S, rng):
    import cupy

    x = random_vector(rng, S.shape[1], np.float64)
    z = random_vector(rng, S.shape[0], np.float64)
    assert_close(A @ cupy.asarray(x), S @ x, S, x, np.float64, "atomic A @ x")
    assert_close(A.T @ cupy.asarray(z), S.T @ z, S.T, z, np.float64, "atomic A.T @ x")


@pytest.mark.gpu
def test_gpu_array_kinds_in_and_out(rng):
    import cupy

    S = random_sparse(rng, 50, 40, 0.1)
    A = sparsegpu.from_scipy(S, backend="gpu")
    x = random_vector(rng, 40, np.float64)
    assert isinstance(A @ x, np.ndarray)
    assert isinstance(A @ cupy.asarray(x), cupy.ndarray)
    y = np.full(50, np.nan)
    assert A.spmv(x, y) is y
    assert_close(y, S @ x, S, x, np.float64)
    with pytest.raises(TypeError, match="same library"):
        A.spmv(cupy.asarray(x), np.empty(50))


# --------------------------------------------------------------------------- bad input


def test_bad_vectors(backend, rng):
    A = sparsegpu.from_scipy(random_sparse(rng, 6, 4, 0.5), backend=backend)
    xp = xp_for(backend)
    with pytest.raises(ValueError, match="length 5"):
        A @ xp.ones(5)
    with pytest.raises(ValueError, match="1-D"):  # spmv takes vectors; A @ X takes blocks too
        A.spmv(xp.ones((4, 1)))
    with pytest.raises(ValueError, match="2-D"):
        A @ xp.ones((4, 1, 1))
    with pytest.raises(TypeError, match="cannot be cast safely"):
        A @ xp.ones(4, dtype=np.complex128)
    with pytest.raises(TypeError, match="cannot be cast safely"):
        A.astype(np.float32) @ xp.ones(4)
    with pytest.raises(TypeError, match="must be float64"):
        A.spmv(xp.ones(4), xp.ones(6, dtype=np.float32))
    with pytest.raises(ValueError, match="length 6"):
        A.spmv(xp.ones(4), xp.ones(5))
    with pytest.raises(ValueError, match="no y"):
        A.spmv(xp.ones(4), beta=1.0)
    with pytest.raises(TypeError, match="complex"):
        A.spmv(xp.ones(4), alpha=1j)
    assert A @ xp.ones(4, dtype=np.int32) is not None  # int32 -> float64 is safe


def test_bad_compressed_arrays(backend):
    good = (np.array([1.0, 2.0, 3.0]), np.array([0, 2, 1]), np.array([0, 2, 2, 3]))
    sparsegpu.CSR(good, shape=(3, 3), backend=backend)
    cases = {
        "indptr has length 3": (good[0], good[1], np.array([0, 2, 3])),
        "not monotone": (good[0], good[1], np.array([0, 2, 1, 3])),
        "out of range": (good[0], np.array([0, 3, 1]), good[2]),
        "negative": (good[0], np.array([0, -1, 1]), good[2]),
        r"indptr\[-1\] is 2": (good[0], good[1], np.array([0, 1, 2, 2])),
        "data has 2 entries": (good[0][:2], good[1], good[2]),
    }
    for message, arrays in cases.items():
        with pytest.raises(ValueError, match=message):
            sparsegpu.CSR(arrays, shape=(3, 3), backend=backend)
    with pytest.raises(ValueError, match="out of range for 3 rows"):
        sparsegpu.CSC(good, shape=(3, 3), backend=backend) if False else sparsegpu.CSC(
            (good[0], np.array([0, 3, 1]), good[2]), shape=(3, 3), backend=backend)
    with pytest.raises(ValueError, match="row holds index 5"):
        sparsegpu.COO((np.ones(2), (np.array([0, 5]), np.array([0, 1]))), shape=(3, 3), backend=backend)
    with pytest.raises(TypeError, match="integers"):
        sparsegpu.CSR((good[0], good[1].astype(float), good[2]), shape=(3, 3), backend=backend)


def test_bad_matrices_and_formats():
    with pytest.raises(TypeError, match="scipy.sparse"):
        sparsegpu.from_scipy(np.eye(3))
    with pytest.raises(ValueError, match="unknown format"):
        sparsegpu.from_scipy(sp.eye(3), format="nope")
    with pytest.raises(TypeError, match="unsupported value dtype"):
        sparsegpu.from_scipy(sp.eye(3).astype(np.longdouble))
    with pytest.raises(ValueError, match="int32 cannot hold"):
        sparsegpu.from_scipy(sp.csr_array((2, 2**31)), index_dtype=np.int32)


def test_from_scipy_never_changes_the_callers_matrix(backend):
    indices = np.array([2, 0, 2], dtype=np.int64)
    S = sp.csr_array((np.array([1.0, 2.0, 3.0]), indices, np.array([0, 3, 3], dtype=np.int64)), shape=(2, 3))
    A = sparsegpu.from_scipy(S, backend=backend)
    assert S.data.tolist() == [1.0, 2.0, 3.0] and S.indices.tolist() == [2, 0, 2]
    assert A.to_scipy().toarray().tolist() == [[2.0, 0.0, 4.0], [0.0, 0.0, 0.0]]


# --------------------------------------------------------------------------- spmv_dot: product + dot epilogue

DOT_FORMATS = {"csr": {}, "csc": {}, "coo": {}, "ell": {"max_fill": None}, "sell": {}, "hyb": {}, "jds": {}}
DOT_MATRICES = ["bcsstk16", "as-caida", "arrow", "mhd1280b", "lp_ship04l", "add32"]


def check_spmv_dot(A, S, rng, dtype):
    """spmv_dot against spmv + a NumPy dot: y bitwise the plain product's, the dot exactly
    NumPy's on the CPU (the reference is spmv then np.dot) and within float64 rounding on the GPU,
    where it is also bitwise reproducible run to run."""
    m, n = S.shape
    xp = xp_for(A.backend)
    x = random_vector(rng, n, dtype)
    y0 = random_vector(rng, m, dtype)
    for alpha, beta in ((1, 0), (2, -0.5)):
        plain = A.spmv(xp.asarray(x), xp.asarray(y0.copy()), alpha=alpha, beta=beta)
        for weights in ([None] if m == n else []) + [random_vector(rng, m, dtype)]:
            w = x if weights is None else weights

            def run():
                y = xp.asarray(y0.copy()) if beta else poisoned(m, dtype, xp)
                dot = poisoned(1, np.float64, xp)
                out = A.spmv_dot(xp.asarray(x), y, dot, w=None if weights is None else xp.asarray(weights),
                                 alpha=alpha, beta=beta)
                assert out is y
                return to_numpy(y), float(to_numpy(dot)[0])

            y, dot = run()
            assert np.array_equal(y, to_numpy(plain)), "y differs from the plain product"
            w64, y64 = w.astype(np.float64), y.astype(np.float64)
            expected = float(np.dot(w64, y64))
            if A.backend == "cpu":
                assert dot == expected
            else:
                scale = float(np.abs(w64) @ np.abs(y64))
                assert abs(dot - expected) <= 1e-13 * max(m, 1) ** 0.5 * scale + 1e-300, (dot, expected)
                for _ in range(3):
                    again_y, again_dot = run()
                    assert np.array_equal(again_y, y) and again_dot == dot, "not reproducible"


@requires_matrices
@pytest.mark.parametrize("name", [n for n in DOT_MATRICES if n in REAL_MATRICES])
@pytest.mark.parametrize("fmt", list(DOT_FORMATS))
def test_spmv_dot_real_matrices(name, fmt, backend, rng):
    S = real(name)
    if np.iscomplexobj(S.data):  # spmv_dot is for real matrices (the solvers' dtypes)
        S = sp.csr_array(S.real)
    try:  # ELL: matrices it pads to at most 50x their entries (arrow's dense row: not)
        A = sparsegpu.from_scipy(S, format=fmt, backend=backend, **({"max_fill": 50.0} if fmt == "ell" else {}))
    except ValueError as exc:
        pytest.skip(str(exc)[:80])
    check_spmv_dot(A, S, rng, np.float64)


@pytest.mark.parametrize("case", list(EDGE_CASES))
@pytest.mark.parametrize("fmt", list(DOT_FORMATS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_spmv_dot_random_and_edge_cases(case, fmt, dtype, backend, rng):
    S = EDGE_CASES[case](rng)
    A = sparsegpu.from_scipy(S, format=fmt, backend=backend, dtype=dtype, **DOT_FORMATS[fmt])
    check_spmv_dot(A, S, rng, dtype)


@pytest.mark.parametrize("fmt", ["csr", "ell"])
def test_spmv_dot_poisson_and_a_split_row(fmt, backend, rng):
    """The fused epilogues on the solvers' matrix (2-D Poisson, ~1/256 blocks' worth of rows
    and more), and CSR with a row long enough to be split (the fallback path)."""
    k = 70
    T = sp.diags_array([-1.0, 2.0, -1.0], offsets=[-1, 0, 1], shape=(k, k))
    S = sp.csr_array(sp.kron(sp.eye_array(k), T) + sp.kron(T, sp.eye_array(k)))
    check_spmv_dot(sparsegpu.from_scipy(S, format=fmt, backend=backend), S, rng, np.float64)
    if fmt == "csr":
        long_row = sp.random_array((1, S.shape[1]), density=0.9, rng=rng, format="csr")
        S2 = sp.csr_array(sp.vstack([S[:-1], long_row]))
        A2 = sparsegpu.from_scipy(S2, format=fmt, backend=backend)
        check_spmv_dot(A2, S2, rng, np.float64)


def test_spmv_dot_bad_input(backend):
    xp = xp_for(backend)
    A = sparsegpu.from_scipy(sp.random_array((6, 6), density=0.5, rng=1, format="csr"), backend=backend)
    x, y, dot = xp.ones(6), xp.empty(6), xp.empty(1)
    with pytest.raises(TypeError, match="float64 array of shape"):
        A.spmv_dot(x, y, xp.empty(1, np.float32))
    with pytest.raises(TypeError, match="float64 array of shape"):
        A.spmv_dot(x, y, xp.empty(2))
    with pytest.raises(ValueError, match="length"):
        A.spmv_dot(xp.ones(5), y, dot)
    with pytest.raises(TypeError, match="real matrix"):
        A.astype(np.complex128).spmv_dot(x.astype(np.complex128), y.astype(np.complex128), dot)
    rect = sparsegpu.from_scipy(sp.random_array((6, 4), density=0.5, rng=1, format="csr"), backend=backend)
    with pytest.raises(ValueError, match="square"):
        rect.spmv_dot(xp.ones(4), y, dot)
    rect.spmv_dot(xp.ones(4), y, dot, w=xp.ones(6))  # with w it is fine
    with pytest.raises(ValueError, match="w must not overlap y"):
        rect.spmv_dot(xp.ones(4), y, dot, w=y)
    if backend == "gpu":
        with pytest.raises(TypeError, match="moves nothing"):
            A.spmv_dot(np.ones(6), np.empty(6), np.empty(1))


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", ["csr", "ell", "coo"])
def test_gpu_spmv_dot_is_capturable(fmt, rng):
    """After a first call, spmv_dot neither allocates nor reads the device from the host: it
    replays from a CUDA graph with the same results."""
    import cupy

    S = random_sparse(rng, 3000, 3000, 0.002) + sp.eye_array(3000)
    A = sparsegpu.from_scipy(S, format=fmt, backend="gpu", **DOT_FORMATS[fmt])
    x = cupy.asarray(random_vector(rng, 3000, np.float64))
    y, dot = cupy.empty(3000), cupy.empty(1)
    A.spmv_dot(x, y, dot)  # first call: plans and scratch
    want_y, want_dot = y.get(), dot.get()
    y.fill(np.nan)
    dot.fill(np.nan)
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        stream.begin_capture()
        A.spmv_dot(x, y, dot)
        graph = stream.end_capture()
        graph.launch()
    stream.synchronize()
    assert np.array_equal(y.get(), want_y) and np.array_equal(dot.get(), want_dot)

"""eye, diags, kron, vstack and hstack against scipy.sparse, on every backend."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from sparsegpu import _validate
from sparsegpu.formats._construct import diags, eye, hstack, kron, vstack
from tests.conftest import BACKENDS, to_numpy
from tests.formats.test_arithmetic import dense, make, random_sparse

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]


def assert_canonical(M) -> None:
    """Sorted indices without duplicates, as every constructor here promises."""
    S = sp.csr_array(M.to_scipy())
    assert _validate.is_canonical(S.indptr, S.indices)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", [(0, 0), (0, 3), (3, 0), (1, 1), (4, 4), (3, 6), (6, 3)])
@pytest.mark.parametrize("k", [0, 1, -2, 3, -6, 5, -7])
def test_eye_matches_scipy(backend, shape, k):
    m, n = shape
    if k > n or k < -m:  # SciPy refuses a diagonal beyond the edge
        with pytest.raises(ValueError, match="outside"):
            eye(m, n, k=k, backend=backend)
        with pytest.raises(ValueError):
            sp.eye_array(m, n, k=k)
        return
    for dtype in DTYPES:
        got = eye(m, n, k=k, dtype=dtype, backend=backend)
        want = sp.eye_array(m, n, k=k, dtype=dtype)
        assert got.format == "csr" and got.dtype == dtype and got.backend == backend
        np.testing.assert_array_equal(dense(got), want.toarray())
        assert_canonical(got)
    assert eye(3, format="coo", backend=backend).format == "coo"
    assert eye(3, backend=backend).shape == (3, 3)


def test_eye_argument_errors():
    with pytest.raises(TypeError, match="m must be an integer"):
        eye(2.5, backend="cpu")
    with pytest.raises(ValueError, match="n must be at least 0"):
        eye(2, -1, backend="cpu")
    with pytest.raises(TypeError, match="dtype"):
        eye(2, dtype=np.int32, backend="cpu")
    with pytest.raises(ValueError, match="unknown format"):
        eye(2, format="dia", backend="cpu")


@pytest.mark.parametrize("backend", BACKENDS)
def test_diags_matches_scipy(rng, backend):
    cases = [
        (([1.0, 2.0, 3.0],), {}),
        (([[1.0, 2.0, 3.0], [4.0, 5.0]], [0, -1]), {}),
        (([[1.0, 2.0, 8.0, 9.0], [3.0], [4.0, 5.0, 6.0, 7.0]], [1, -3, 0]), {"shape": (4, 5)}),
        (([2.0, -1.0, 3.5], [0, 1, -1]), {"shape": (5, 5)}),  # scalars broadcast along their diagonal
        (([rng.standard_normal(6), rng.standard_normal(5)], [0, 1]), {"shape": (6, 3)}),  # cut to fit
        (([[1.0, 0.0, 2.0]], [0]), {}),  # a stored zero: dropped, as SciPy's CSR drops it
        (([np.array([1, 2, 3], dtype=np.int64)], [2]), {"dtype": None}),
        (([np.array([1 + 2j, 3j])], [0]), {"dtype": np.complex64}),
    ]
    for args, kwargs in cases:
        got = diags(*args, backend=backend, **kwargs)
        want = sp.csr_array(sp.diags_array(*args[:1], offsets=args[1] if len(args) > 1 else 0, **kwargs))
        want.eliminate_zeros()
        assert got.backend == backend and got.format == "csr" and got.nnz == want.nnz
        assert got.dtype == _validate.value_dtype(want.dtype)
        np.testing.assert_array_equal(dense(got), want.toarray())
        assert_canonical(got)
    assert diags([1.0, 2.0], format="csc", backend=backend).format == "csc"


def test_diags_errors():
    with pytest.raises(ValueError, match="different number"):
        diags([[1.0], [2.0]], [0], backend="cpu")
    with pytest.raises(ValueError, match="unique"):
        diags([[1.0, 2.0], [3.0, 4.0]], [0, 0], backend="cpu")
    with pytest.raises(ValueError, match="outside"):
        diags([[1.0]], [5], shape=(2, 2), backend="cpu")
    with pytest.raises(ValueError, match="holds 3"):
        diags([[1.0, 2.0]], [0], shape=(3, 3), backend="cpu")
    with pytest.raises(TypeError, match="offsets must be an integer"):
        diags([[1.0, 2.0]], [0.5], backend="cpu")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shapes", [((3, 4), (2, 5)), ((1, 1), (4, 3)), ((0, 3), (2, 2)), ((5, 1), (1, 5)),
                                    ((4, 6), (3, 3))])
def test_kron_matches_scipy(rng, backend, shapes):
    S = random_sparse(rng, shapes[0], density=0.5)
    T = random_sparse(rng, shapes[1], np.complex64, density=0.5)
    T.data[:1] = 0  # stored zeros multiply into stored zeros, as SciPy
    for fmt_a, fmt_b in (("csr", "csr"), ("csc", "coo"), ("sell", "csr")):
        got = kron(make(S, fmt_a, backend), make(T, fmt_b, backend))
        want = sp.kron(S, T)
        assert got.backend == backend and got.dtype == np.result_type(S.dtype, T.dtype)
        assert got.nnz == S.nnz * T.nnz  # SciPy's BSR would count whole blocks
        assert got.format == ("csr" if want.format == "bsr" else want.format)
        np.testing.assert_allclose(dense(got), want.toarray(), rtol=1e-6)
        assert_canonical(got)
    got = kron(S.toarray(), T, format="csc", backend=backend)
    assert got.format == "csc"
    np.testing.assert_allclose(dense(got), sp.kron(S, T).toarray(), rtol=1e-6)


def test_kron_int64_indices(rng):
    S = random_sparse(rng, (6, 5))
    got = kron(make(S, index_dtype=np.int64), make(S))
    assert got.index_dtype == np.int64
    np.testing.assert_array_equal(dense(got), sp.kron(S, S).toarray())


@pytest.mark.parametrize("backend", BACKENDS)
def test_vstack_hstack_match_scipy(rng, backend):
    S, T, U = (random_sparse(rng, shape, dtype) for shape, dtype in
               (((4, 6), np.float32), ((3, 6), np.float64), ((0, 6), np.float32)))
    for formats, want_format in ((("csr", "csr", "csr"), "csr"), (("csc", "csc", "csc"), "csc"),
                                 (("csr", "coo", "ell"), "coo")):
        blocks = [make(M, f, backend) for M, f in zip((S, T, U), formats)]
        got = vstack(blocks)
        want = sp.vstack([S, T, U])
        assert got.format == want_format and got.dtype == want.dtype == np.float64
        np.testing.assert_array_equal(dense(got), want.toarray())
        Sh, Th = sp.csr_array(S.T), sp.csr_array(T.T)
        blocks = [make(M, f, backend) for M, f in zip((Sh, Th, sp.csr_array(U.T)), formats)]
        got = hstack(blocks)
        want = sp.hstack([Sh, Th, sp.csr_array(U.T)])
        assert got.format == want_format and got.shape == want.shape
        np.testing.assert_array_equal(dense(got), want.toarray())
        assert_canonical(got)
    got = vstack([S, T.toarray()], format="csc", dtype=np.complex128, backend=backend)
    assert got.format == "csc" and got.dtype == np.complex128 and got.backend == backend
    np.testing.assert_array_equal(dense(got), sp.vstack([S, T]).toarray())


def test_stack_keeps_explicit_zeros_and_index_dtypes(rng):
    Z = sp.csr_array((np.array([0.0, 1.0]), np.array([0, 1]), np.array([0, 1, 2])), shape=(2, 2))
    got = hstack([make(Z, index_dtype=np.int64), make(Z)])
    assert got.nnz == sp.hstack([Z, Z]).nnz == 4 and got.index_dtype == np.int64
    assert vstack([make(Z), make(Z)]).nnz == 4


def test_stack_errors(rng):
    A, B = make(random_sparse(rng, (3, 4))), make(random_sparse(rng, (4, 3)))
    with pytest.raises(ValueError, match=r"blocks\[1\] has 3 columns but blocks\[0\] has 4"):
        vstack([A, B])
    with pytest.raises(ValueError, match=r"blocks\[1\] has 4 rows but blocks\[0\] has 3"):
        hstack([A, B])
    with pytest.raises(ValueError, match="non-empty list"):
        vstack([])
    with pytest.raises(TypeError, match="blocks\\[1\\]"):
        hstack([A, "x"])
    with pytest.raises(TypeError, match="2-D numeric"):
        vstack([A, np.ones(4)])


@pytest.mark.gpu
def test_gpu_constructors_stay_on_device_and_reproduce(rng):
    import cupy

    S, T = random_sparse(rng, (200, 150), density=0.05), random_sparse(rng, (30, 20), density=0.2)
    A, B = make(S, "csr", "gpu"), make(T, "csr", "gpu")
    cases = [(lambda: kron(A, B), sp.kron(S, T)), (lambda: vstack([A, A]), sp.vstack([S, S])),
             (lambda: hstack([A, A]), sp.hstack([S, S])), (lambda: eye(50, 70, k=3), sp.eye_array(50, 70, k=3)),
             (lambda: diags([cupy.arange(1.0, 51.0)], [1]), sp.diags_array([np.arange(1.0, 51.0)], offsets=[1]))]
    for compute, want in cases:
        first, second = compute(), compute()
        assert first.backend == "gpu"
        assert all(isinstance(a, cupy.ndarray) for a in first._arrays().values())
        assert all(a.get().tobytes() == b.get().tobytes() for a, b in zip(first._arrays().values(),
                                                                           second._arrays().values()))
        np.testing.assert_array_equal(to_numpy(first.toarray()), want.toarray())
    with pytest.raises(TypeError, match="different backends"):
        vstack([A, make(S, "csr", "cpu")])

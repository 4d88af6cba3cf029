"""Problems, preconditioners and step states shared by the tests of sparsegpu.linalg."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as sla

import sparsegpu
from sparsegpu.linalg import (
    bicgstab,
    block_jacobi,
    cg,
    gmres,
    jacobi,
    minres,
    solve,
)
from sparsegpu.reference import krylov as reference
from tests.conftest import to_numpy


def poisson2d(k: int) -> sp.csr_array:
    """The 5-point Laplacian on a k x k grid (SPD)."""
    T = sp.diags_array([-1.0, 2.0, -1.0], offsets=[-1, 0, 1], shape=(k, k))
    I = sp.eye_array(k)
    return sp.csr_array(sp.kron(I, T) + sp.kron(T, I))


def convection_diffusion(k: int, wind: float = 20.0) -> sp.csr_array:
    """-laplace(u) + wind * (u_x + u_y) on a k x k grid, first-order upwind (nonsymmetric)."""
    h = 1.0 / (k + 1)
    T = sp.diags_array([-1.0, 2.0, -1.0], offsets=[-1, 0, 1], shape=(k, k)) / h**2
    D = sp.diags_array([-1.0, 1.0], offsets=[-1, 0], shape=(k, k)) * (wind / h)
    I = sp.eye_array(k)
    return sp.csr_array(sp.kron(I, T + D) + sp.kron(T + D, I))


def indefinite(k: int) -> sp.csr_array:
    """Poisson shifted so that some eigenvalues are negative (symmetric indefinite)."""
    return sp.csr_array(poisson2d(k) - 0.7 * sp.eye_array(k * k))


def counting(solver, A, b, **kw):
    """(x, info, callbacks): the number of callbacks is the number of iterations."""
    calls = [0]

    def callback(*_):
        calls[0] += 1

    if solver in (gmres, sla.gmres):
        kw.setdefault("callback_type", "pr_norm")
    x, info = solver(A, b, callback=callback, **kw)
    return x, info, calls[0]


def scipy_preconditioner(kind, S):
    if kind is None:
        return None
    if kind == "jacobi":
        return sp.diags_array(1.0 / S.diagonal())
    if kind == "block2":
        return sla.aslinearoperator(block_jacobi(S.astype(np.float64), 2).asbackend("cpu"))
    raise ValueError(kind)


def our_preconditioner(kind, S):
    if kind is None:
        return None
    if kind == "jacobi":
        return jacobi(S)
    if kind == "block2":
        return block_jacobi(S, 2)
    raise ValueError(kind)


CASES = [
    ("cg", "poisson", None),
    ("cg", "poisson", "jacobi"),
    ("cg", "poisson", "block2"),
    ("bicgstab", "convdiff", None),
    ("bicgstab", "convdiff", "jacobi"),
    ("bicgstab", "convdiff", "block2"),
    ("gmres", "convdiff", None),
    ("gmres", "convdiff", "jacobi"),
    ("minres", "indefinite", None),
    ("minres", "poisson", "jacobi"),
]


PROBLEMS = {"poisson": lambda: poisson2d(24), "convdiff": lambda: convection_diffusion(20),
            "indefinite": lambda: indefinite(20)}


SOLVERS = {"cg": cg, "bicgstab": bicgstab, "gmres": gmres, "minres": minres}


def _workspace(atol=0.0, maxiter=100, count=0, history=0):
    sc = np.zeros(reference.SLOTS)
    sc[reference.ATOL] = atol
    sc[reference.RHOTOL] = np.finfo(np.float64).eps ** 2
    st = np.zeros(reference.WORDS, np.int64)
    st[reference.MAXITER], st[reference.COUNT], st[reference.HISTCAP] = maxiter, count, max(history, 1)
    return sc, st


MINRES_PRECONDITIONERS = [None, "jacobi", "block2"]


def _minres_state(n, rng):
    """Vectors and scalars of a MINRES iteration in flight (random, beta and oldb > 0)."""
    sc, st = _workspace(maxiter=50, count=3, history=8)
    values = rng.standard_normal(reference.SLOTS)
    for slot in range(reference.MR_BETA1, reference.SLOTS):
        sc[slot] = values[slot]
    for slot in (reference.MR_BETA1, reference.MR_BETA, reference.MR_OLDB, reference.MR_TNORM2, reference.MR_GMIN, reference.MR_EPS):
        sc[slot] = abs(sc[slot]) + 0.5
    sc[reference.MR_EPS] = np.finfo(np.float64).eps
    sc[reference.MR_RTOL], sc[reference.MR_ATOL] = 1e-12, 0.0
    return [rng.standard_normal(n) for _ in range(6)], (rng.random(n) + 0.5), sc, st


GMRES_PRECONDITIONERS = [None, "jacobi", "block2"]


def _gmres_run(A, b, M=None, **kw):
    """(x on the host, info, inner iterations, presid history) of one GMRES solve."""
    result = solve(A, b, method="gmres", M=M, history=True, **kw)
    return to_numpy(result.x), result.info, result.iterations, result.history


def _gmres_state(restart, col, rng):
    """Scalars of a GMRES inner iteration in flight: random Hessenberg (diagonal away from 0),
    rotations, S; the workspace's words for column col."""
    sc = np.zeros(reference.SLOTS + reference.gmres_slots(restart))
    st = np.zeros(reference.WORDS, np.int64)
    st[reference.MAXITER], st[reference.HISTCAP], st[reference.COUNT] = 50, 8, 3
    st[reference.GM_RESTART], st[reference.GM_COLS] = restart, col
    sc[reference.ATOL] = 1e-3
    sc[reference.GM_PTOL], sc[reference.GM_FACTOR], sc[reference.GM_EPS] = 1e-6, 0.5, np.finfo(np.float64).eps
    sc[reference.GM_H0], sc[reference.GM_RECIPROCAL], sc[reference.GM_PRESID] = 3.0, 0.7, 1e-2
    h, givens, S = reference.gmres_arrays(sc, st)
    h[...] = rng.standard_normal(h.shape)
    h[np.arange(restart), np.arange(restart)] += 4.0
    angles = rng.uniform(0.0, 2 * np.pi, restart)
    givens[:, 0], givens[:, 1] = np.cos(angles), np.sin(angles)
    S[...] = rng.standard_normal(restart + 1)
    return sc, st


def _gmres_step_arguments(op, flag, basis, vecs, col):
    """The vectors of one GMRES step by role (works for NumPy and CuPy arrays alike); vecs are
    x or r, b, a product (A v or A x), and one more."""
    if op == reference.GM_NORM0:
        return (basis[0],)
    if op == reference.GM_SCALE:
        return (basis[col + 1],)
    if op == reference.GM_ARNOLDI_FIRST:
        return basis[col + 1], basis[0], vecs[2]
    if op == reference.GM_ARNOLDI:
        return basis[col + 1], basis[flag], basis[flag + 1]
    if op == reference.GM_ARNOLDI_LAST:
        return basis[col + 1], basis[col]
    if op == reference.GM_SOLVE:
        return ()
    if op == reference.GM_UPDATE_X:
        return vecs[0], basis
    if flag == reference.FLAG_START:  # GM_RESIDUAL forming v[0] = r itself
        return basis[0], vecs[1], vecs[2]
    return vecs[0], vecs[1], vecs[2], basis[0]


GMRES_STEPS = [
    (reference.GM_NORM0, 0, reference.RUNNING),
    (reference.GM_SCALE, 0, reference.RUNNING),
    (reference.GM_ARNOLDI_FIRST, 0, reference.RUNNING),
    (reference.GM_ARNOLDI_FIRST, reference.FLAG_DINV, reference.RUNNING),
    (reference.GM_ARNOLDI, 1, reference.RUNNING),
    (reference.GM_ARNOLDI_LAST, 0, reference.RUNNING),
    (reference.GM_SOLVE, 0, reference.GM_INNER_DONE),
    (reference.GM_UPDATE_X, 0, reference.GM_INNER_DONE),
    (reference.GM_RESIDUAL, 0, reference.GM_INNER_DONE),
    (reference.GM_RESIDUAL, reference.FLAG_START, reference.GM_INNER_DONE),
    (reference.GM_RESIDUAL, reference.FLAG_START | reference.FLAG_DINV, reference.GM_INNER_DONE),
]


def _gmres_case(op, flag, status, n, dtype, rng):
    restart, col = 4, 2
    sc, st = _gmres_state(restart, col, rng)
    st[reference.STATUS] = status
    if op in reference.CYCLE_END_OPS:
        st[reference.GM_COLS] = col + 1  # the cycle ended after column col
    basis = rng.standard_normal((restart + 1, n)).astype(dtype)
    vecs = [rng.standard_normal(n).astype(dtype) for _ in range(4)]
    dinv = (rng.random(n) + 0.5).astype(dtype)
    return col, sc, st, basis, vecs, dinv


def _random_case(op, n, dtype, rng, cp):
    vecs = [rng.standard_normal(n).astype(dtype) for _ in range(6)]
    dinv = (rng.random(n) + 0.5).astype(dtype)
    sc, st = _workspace(atol=1e-3, maxiter=50, count=3, history=8)
    sc[[reference.RHO, reference.ALPHA, reference.BETA, reference.OMEGA, reference.PQ]] = rng.standard_normal(5)
    st[reference.PENDING] = 1  # CG_P's x update runs (CG_UPDATE sets it, other ops ignore it)
    return vecs, dinv, sc, st


def _gpu_runs(method, A, b, M, **kw):
    """(x, info, iterations) of one GPU solve, x on the host."""
    result = solve(A, b, method=method, M=M, **kw)
    return to_numpy(result.x), result.info, result.iterations


def want_iterations(method, A, b, M):
    return solve(A, b, method=method, M=M, rtol=1e-9, check_every=1).iterations


def assert_step_matches_reference(ws, device_vectors, host_vectors, sc, st, host_hist, dtype, float32_scalar_rtol,
                             exact_sc=None):
    """After one fused step on the GPU (``ws``) and its reference (the host arrays): the same vectors,
    scalar slots, status words and history, and the reduction ticket back at zero. With
    ``exact_sc`` (the reference's slots from the same float32 inputs in float64), a float32 slot may
    also be as far from it as a few times the reference's own error there: a slot computed through
    cancellation is as ill-conditioned for the kernel as for its reference."""
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for got, want in zip(device_vectors, host_vectors, strict=True):
        np.testing.assert_allclose(to_numpy(got), want, rtol=tol, atol=tol)
    scalar_rtol = 1e-9 if dtype == np.float64 else float32_scalar_rtol
    kernel_sc = to_numpy(ws.sc)
    if exact_sc is not None and dtype == np.float32:
        kernel_error, reference_error = np.abs(kernel_sc - exact_sc), np.abs(sc - exact_sc)
        assert (kernel_error <= 4 * reference_error + scalar_rtol * np.abs(exact_sc) + 1e-300).all(), (
            np.flatnonzero(kernel_error > 4 * reference_error + scalar_rtol * np.abs(exact_sc)))
    else:
        np.testing.assert_allclose(kernel_sc, sc, rtol=scalar_rtol, atol=1e-300)
    np.testing.assert_array_equal(to_numpy(ws.st), st)
    np.testing.assert_allclose(to_numpy(ws.history), host_hist, rtol=scalar_rtol)
    assert int(ws.counter[0]) == 0


def assert_nonfinite_and_one_step_cases(solver, method):
    """On the GPU: NaN in A gives info NONFINITE with a finite x; A = 3 I converges in one step."""
    import cupy as cp

    nan_matrix = sparsegpu.from_scipy(sp.csr_array(np.array([[2.0, np.nan], [np.nan, 2.0]])), backend="gpu")
    x, info = solver(nan_matrix, cp.asarray([1.0, 1.0]))
    assert info == reference.NONFINITE and bool(cp.isfinite(x).all())
    A = sparsegpu.from_scipy(sp.csr_array(3.0 * sp.eye_array(5)), backend="gpu")
    result = solve(A, cp.arange(1.0, 6.0), method=method)
    assert result.info == 0 and result.iterations == 1
    np.testing.assert_allclose(to_numpy(result.x), np.arange(1.0, 6.0) / 3.0, rtol=1e-15)

"""The solver loops: check intervals, iteration limits, MINRES and GMRES specifics, GPU batches."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as sla

import sparsegpu
from sparsegpu.linalg import (
    cg,
    gmres,
    jacobi,
    minres,
    solve,
)
from sparsegpu.reference import krylov as reference
from tests.conftest import to_numpy
from tests.linalg.helpers import (
    GMRES_PRECONDITIONERS,
    MINRES_PRECONDITIONERS,
    SOLVERS,
    _gmres_run,
    _gpu_runs,
    assert_nonfinite_and_one_step_cases,
    convection_diffusion,
    counting,
    indefinite,
    our_preconditioner,
    poisson2d,
    scipy_preconditioner,
    want_iterations,
)


@pytest.mark.parametrize("method", ["cg", "bicgstab"])
def test_check_interval_never_changes_the_result(method, rng):
    S = convection_diffusion(15) if method == "bicgstab" else poisson2d(15)
    b = rng.standard_normal(S.shape[0])
    x1, info1 = SOLVERS[method](S, b, rtol=1e-7, check_every=1)
    for every in (4, 13, 64):
        x, info = SOLVERS[method](S, b, rtol=1e-7, check_every=every)
        assert info == info1
        assert np.array_equal(x, x1)  # the iterate of the first converged step, bitwise


@pytest.mark.parametrize("maxiter", [1, 7, 30])
def test_iteration_limit_freezes_on_the_device(maxiter, rng):
    """Status LIMIT at maxiter: the host may run past it (whole batches) without changing x."""
    S = poisson2d(12)
    b = rng.standard_normal(S.shape[0])
    x_ref, info_ref = sla.cg(S, b, rtol=1e-14, maxiter=maxiter)
    for every in (1, 4, 64):
        x, info = cg(S, b, rtol=1e-14, maxiter=maxiter, check_every=every)
        assert info == info_ref == maxiter
        np.testing.assert_allclose(x, x_ref, rtol=1e-10, atol=1e-12)
        assert solve(S, b, rtol=1e-14, maxiter=maxiter, check_every=every).iterations == maxiter


@pytest.mark.parametrize("precond", MINRES_PRECONDITIONERS)
def test_minres_check_interval_never_changes_the_result(precond, rng):
    """Batches of k iterations (frozen after istop) give bitwise the x, info and iteration
    count of checking every iteration, also when maxiter ends the solve."""
    S = indefinite(14)
    b = rng.standard_normal(S.shape[0])
    M = our_preconditioner(precond, poisson2d(14)) if precond else None  # SPD preconditioners
    with pytest.raises(ValueError, match="maxiter must be at least 1"):
        solve(S, b, method="minres", maxiter=0, M=M)
    for maxiter in (None, 13, 1):
        want = solve(S, b, method="minres", rtol=1e-9, maxiter=maxiter, M=M, check_every=1)
        for every in (3, 5, 64):
            got = solve(S, b, method="minres", rtol=1e-9, maxiter=maxiter, M=M, check_every=every)
            assert (got.info, got.iterations) == (want.info, want.iterations), (maxiter, every)
            assert np.array_equal(got.x, want.x), (maxiter, every)
        if maxiter is not None:
            assert want.iterations == maxiter and want.info == maxiter
            x_ref, info_ref = sla.minres(S, b, rtol=1e-9, maxiter=maxiter,
                                         M=scipy_preconditioner(precond, poisson2d(14)))
            assert info_ref == maxiter
            np.testing.assert_allclose(want.x, x_ref, rtol=1e-9, atol=1e-12 * max(1.0, np.abs(x_ref).max()))


@pytest.mark.parametrize("options", [{"shift": 0.3}, {"x0": "random"}, {"shift": -0.5, "x0": "random"},
                                     {"M": "block2"}])
def test_minres_shift_x0_and_general_preconditioner_match_scipy(options, rng):
    S = poisson2d(15)
    b = rng.standard_normal(S.shape[0])
    ours, theirs = dict(options), dict(options)
    if options.get("x0") == "random":
        ours["x0"] = theirs["x0"] = rng.standard_normal(S.shape[0])
    if "M" in options:
        ours["M"], theirs["M"] = our_preconditioner("block2", S), scipy_preconditioner("block2", S)
    x_ref, info_ref, its_ref = counting(sla.minres, S, b, rtol=1e-9, **theirs)
    x, info, its = counting(minres, S, b, rtol=1e-9, **ours)
    assert info == info_ref == 0 and abs(its - its_ref) <= 1
    np.testing.assert_allclose(x, x_ref, rtol=1e-7, atol=1e-9 * np.abs(x_ref).max())


def test_minres_istop_cases_match_scipy():
    # A multiple of the identity: beta2 = 0, istop -1, one iteration, x exact (info 0).
    A = sp.csr_array(3.0 * sp.eye_array(5))
    b = np.arange(1.0, 6.0)
    x_ref, info_ref, its_ref = counting(sla.minres, A, b)
    x, info, its = counting(minres, A, b)
    assert info == info_ref == 0 and its == its_ref == 1
    np.testing.assert_allclose(x, x_ref, rtol=1e-15)
    # maxiter = 0: SciPy returns x0 with info 0, reporting success without iterating; refused here.
    S = poisson2d(4)
    assert sla.minres(S, np.ones(16), maxiter=0)[1] == 0
    with pytest.raises(ValueError, match="maxiter must be at least 1"):
        minres(S, np.ones(16), maxiter=0)
    # An indefinite preconditioner: r2.M r2 < 0 at the first iteration; SciPy raises.
    d = np.ones(16)
    d[15] = -1e3
    b = np.ones(16)
    b[15] = 0.0
    for solver in (sla.minres, minres):
        with pytest.raises(ValueError, match="non-symmetric matrix"):
            solver(S, b, M=sp.diags_array(d))
    # The same through the fused Jacobi path (a negative diagonal entry).
    T = sp.csr_array(poisson2d(6) - sp.diags_array(np.where(np.arange(36) == 7, 10.0, 0.0)))
    with pytest.raises(ValueError, match="non-symmetric matrix"):
        minres(T, np.ones(36), M=jacobi(T))


def test_minres_history_is_the_phibar_estimate(rng):
    S = indefinite(12)
    b = rng.standard_normal(S.shape[0])
    result = solve(S, b, method="minres", rtol=1e-8, history=True, check_every=4)
    assert result.info == 0 and len(result.history) == result.iterations
    assert all(later <= earlier * (1 + 1e-12) for earlier, later in zip(result.history, result.history[1:]))
    assert result.history[-1] <= result.history[0] < np.linalg.norm(b)


@pytest.mark.parametrize("precond", GMRES_PRECONDITIONERS)
def test_gmres_check_interval_never_changes_the_result(precond, rng):
    """Batches of k inner iterations (frozen once a cycle's inner loop stopped, or the solve
    ended) give bitwise the x, info, iteration count and history of checking every one."""
    S = convection_diffusion(12)
    b = rng.standard_normal(S.shape[0])
    M = our_preconditioner(precond, S)
    for kw in ({"restart": 7}, {"restart": 7, "maxiter": 3}, {"restart": 50}, {"restart": 1, "maxiter": 5}):
        want = _gmres_run(S, b, M, rtol=1e-9, check_every=1, **kw)
        assert len(want[3]) == want[2] > 0
        for every in (2, 3, 5, 16):
            got = _gmres_run(S, b, M, rtol=1e-9, check_every=every, **kw)
            assert got[1:3] == want[1:3] and got[3] == want[3], (kw, every)
            assert np.array_equal(got[0], want[0]), (kw, every)
            x, info = gmres(S, b, rtol=1e-9, M=M, check_every=every, **kw)
            assert info == want[1] and np.array_equal(x, want[0])


@pytest.mark.parametrize("precond", GMRES_PRECONDITIONERS)
def test_gmres_restart_cycles_limits_and_history_match_scipy(precond, rng):
    """Many short cycles, cycle limits: SciPy's info, inner iteration count and presid per
    inner iteration (its 'pr_norm' callback, times norm(b))."""
    S = convection_diffusion(15)
    b = rng.standard_normal(S.shape[0])
    bnorm = np.linalg.norm(b)
    for kw in ({"restart": 5, "rtol": 1e-8}, {"restart": 4, "maxiter": 6, "rtol": 1e-12},
               {"restart": 10, "maxiter": 2, "rtol": 1e-12}):
        presid_ref = []
        x_ref, info_ref = sla.gmres(S, b, M=scipy_preconditioner(precond, S), callback=presid_ref.append,
                                    callback_type="pr_norm", **kw)
        x, info, iterations, history = _gmres_run(S, b, our_preconditioner(precond, S), **kw)
        assert info == info_ref, kw
        if info_ref > 0:
            assert iterations == len(presid_ref), kw
        assert abs(iterations - len(presid_ref)) <= 1 and len(history) == iterations
        np.testing.assert_allclose(np.array(history[:12]) / bnorm, presid_ref[:12], rtol=1e-7)
        np.testing.assert_allclose(x, x_ref, rtol=1e-6, atol=1e-6 * np.abs(x_ref).max())


def test_gmres_exact_solution_breakdown_matches_scipy(rng):
    """The Krylov space closes early (h1 <= eps h0): a multiple of the identity after one step,
    three distinct eigenvalues after three. With rtol = 0 the outer test fails on rounding, and
    SciPy then bails out with info = maxiter at a breakdown, or goes on at the rounding level;
    one cycle (maxiter = 1) keeps the comparison out of that noise: the first cycle's
    arithmetic is SciPy's. The info, iteration count and x match SciPy's, and x is finite."""
    n = 9
    for A in (sp.csr_array(sp.eye_array(n)), sp.csr_array(3.0 * sp.eye_array(n)),
              sp.csr_array(sp.diags_array(np.repeat([1.0, 2.0, 5.0], 3)))):
        b = rng.standard_normal(n)
        for rtol, maxiter in ((0.0, 1), (1e-5, 4), (1e-10, 4)):
            presid_ref = []
            x_ref, info_ref = sla.gmres(A, b, rtol=rtol, atol=0.0, maxiter=maxiter, callback=presid_ref.append,
                                        callback_type="pr_norm")
            for every in (1, 3):
                x, info, iterations, history = _gmres_run(A, b, rtol=rtol, maxiter=maxiter, check_every=every)
                assert iterations == len(history)
                if rtol == 0 and info != info_ref:
                    # rtol = atol = 0 asks for a residual of exactly zero: whether rounding gives
                    # one differs between implementations (SciPy 1.18 reports 1 where ours
                    # reached an exact zero). Ours claims convergence only at an exact zero.
                    assert info == 0 and history[-1] == 0
                else:
                    assert info == info_ref
                if iterations != len(presid_ref):
                    # With rtol = 0 where each side stops is rounding: SciPy from 1.18 goes on past
                    # the breakdown with residuals at the rounding level, and on the GPU a fused
                    # multiply-add can leave a residual of 1e-17 where the CPU reaches an exact
                    # zero, so ours may take a step more or fewer. Both end at the rounding level.
                    assert rtol == 0
                    assert max(presid_ref[min(iterations, len(presid_ref)) - 1:]) <= 1e-12  # relative
                    assert history[-1] <= 1e-12
                assert np.isfinite(x).all()
                np.testing.assert_allclose(x, x_ref, rtol=1e-12, atol=1e-14)
    x, info, iterations, _ = _gmres_run(sp.csr_array(sp.eye_array(n)), np.arange(1.0, n + 1))
    assert (info, iterations) == (0, 1)
    np.testing.assert_allclose(x, np.arange(1.0, n + 1), rtol=1e-15)


def test_gmres_callbacks_match_scipy_at_any_check_interval(rng):
    """'legacy' (maxiter counts inner iterations) and 'pr_norm' are called per inner iteration
    with presid / norm(b), 'x' per cycle with x; check_every changes none of it."""
    S = convection_diffusion(12)
    b = rng.standard_normal(S.shape[0])
    for callback_type in ("legacy", "pr_norm", "x"):
        kw = {"rtol": 1e-9, "restart": 8, "maxiter": 13, "callback_type": callback_type}
        ref = []
        x_ref, info_ref = sla.gmres(S, b, callback=lambda a: ref.append(np.copy(a)), **kw)
        for every in (1, 5):
            got = []
            x, info = gmres(S, b, callback=lambda a: got.append(np.copy(a)), check_every=every, **kw)
            assert info == info_ref and len(got) == len(ref), (callback_type, every)
            np.testing.assert_allclose(np.array(got), np.array(ref), rtol=1e-6, atol=1e-12)
            np.testing.assert_allclose(x, x_ref, rtol=1e-6, atol=1e-10)


def test_gmres_nonfinite_and_singular_preconditioner_return_negative_info():
    nan_matrix = sp.csr_array(np.array([[2.0, np.nan], [np.nan, 2.0]]))
    result = solve(nan_matrix, np.array([1.0, 1.0]), method="gmres", history=True)
    assert result.info == reference.NONFINITE and result.iterations == 0 and result.history == []
    assert np.isfinite(result.x).all()
    # M r = 0 with r != 0: SciPy would divide by zero; here a breakdown before any iteration.
    x, info = gmres(poisson2d(3), np.ones(9), M=sla.aslinearoperator(sp.csr_array((9, 9))))
    assert info == reference.DENOMINATOR_BREAKDOWN and not x.any()


def test_gmres_and_minres_take_check_every():
    S = poisson2d(6)
    b = np.linspace(1.0, 2.0, 36)
    for solver in (gmres, minres):
        with pytest.raises(ValueError, match="check_every"):
            solver(S, b, check_every=0)
        x1, info1 = solver(S, b, rtol=1e-9, check_every=1)
        x, info = solver(S, b, rtol=1e-9, check_every=7)
        assert info == info1 == 0 and np.array_equal(x, x1)


@pytest.mark.gpu
@pytest.mark.parametrize("method", ["cg", "bicgstab"])
def test_gpu_check_interval_and_determinism(method, rng):
    S = convection_diffusion(40) if method == "bicgstab" else poisson2d(40)
    b = rng.standard_normal(S.shape[0])
    A = sparsegpu.from_scipy(S, backend="gpu")
    M = jacobi(A)
    x1, info1 = SOLVERS[method](A, b, rtol=1e-9, M=M, check_every=1)
    for every in (1, 16, 64):
        x, info = SOLVERS[method](A, b, rtol=1e-9, M=M, check_every=every)
        assert info == info1 and np.array_equal(x, x1)
    result = solve(A, b, method=method, rtol=1e-9, history=True)
    ref = solve(sparsegpu.from_scipy(S, backend="cpu"), b, method=method, rtol=1e-9, history=True)
    assert abs(result.iterations - ref.iterations) <= 1
    np.testing.assert_allclose(result.history[:10], ref.history[:10], rtol=1e-8)


@pytest.mark.gpu
@pytest.mark.parametrize("method", ["cg", "bicgstab"])
@pytest.mark.parametrize("precond", [None, "jacobi", "block2"])
@pytest.mark.parametrize("fmt", ["ell", "csr", "coo"])
def test_gpu_batches_graphs_and_pipelining_never_change_the_result(method, precond, fmt, rng):
    """Graph replays rounded up to whole graphs, pipelined status reads and every check
    interval give bitwise the x, info and iteration count of checking every iteration eagerly
    (iterations past convergence or maxiter are frozen no-ops)."""
    import cupy as cp

    from sparsegpu.linalg import _fused

    S = convection_diffusion(30) if method == "bicgstab" else poisson2d(30)
    b = cp.asarray(rng.standard_normal(S.shape[0]))
    A = sparsegpu.from_scipy(S, format=fmt, backend="gpu", **({"max_fill": None} if fmt == "ell" else {}))
    M = our_preconditioner(precond, S)
    for maxiter in (None, 13, 1):
        saved = _fused.USE_CUDA_GRAPHS
        _fused.USE_CUDA_GRAPHS = False
        try:
            want = _gpu_runs(method, A, b, M, rtol=1e-9, maxiter=maxiter, check_every=1)
        finally:
            _fused.USE_CUDA_GRAPHS = saved
        for every in (2, 5, 16, 64):
            got = _gpu_runs(method, A, b, M, rtol=1e-9, maxiter=maxiter, check_every=every)
            assert got[1:] == want[1:], (maxiter, every)
            assert np.array_equal(got[0], want[0]), (maxiter, every)
            x, info = SOLVERS[method](A, b, rtol=1e-9, maxiter=maxiter, M=M, check_every=every)
            assert info == want[1] and np.array_equal(to_numpy(x), want[0])
    calls = []
    x, info = SOLVERS[method](A, b, rtol=1e-9, M=M, callback=lambda xk: calls.append(1))
    iterations = want_iterations(method, A, b, M)
    # BiCGSTAB converging at its half step returns before that iteration's callback, as SciPy does.
    assert info == 0 and len(calls) in ((iterations - 1, iterations) if method == "bicgstab" else (iterations,))


@pytest.mark.gpu
def test_gpu_cg_fused_product_matches_reference(rng):
    """CG on the GPU (three launches per iteration, p.Ap from the ELL or CSR epilogue) against
    the CPU reference: same iteration count, iterates to rounding, residual history to rounding."""
    S = poisson2d(60)
    b = rng.standard_normal(S.shape[0])
    ref = solve(sparsegpu.from_scipy(S, backend="cpu"), b, rtol=1e-10, history=True)
    for fmt in ("ell", "csr"):
        A = sparsegpu.from_scipy(S, format=fmt, backend="gpu")
        got = solve(A, b, rtol=1e-10, history=True)
        assert got.info == ref.info == 0 and abs(got.iterations - ref.iterations) <= 1
        np.testing.assert_allclose(got.history[:20], ref.history[:20], rtol=1e-9)
        np.testing.assert_allclose(got.x, ref.x, rtol=1e-7, atol=1e-9 * np.abs(ref.x).max())
        again = solve(A, b, rtol=1e-10, history=True)
        assert np.array_equal(again.x, got.x) and again.history == got.history  # reproducible


@pytest.mark.gpu
@pytest.mark.parametrize("precond", MINRES_PRECONDITIONERS)
@pytest.mark.parametrize("problem", ["poisson", "indefinite"])
@pytest.mark.parametrize("fmt", ["csr", "ell"])
def test_gpu_minres_matches_reference_and_scipy(precond, problem, fmt, rng):
    """MINRES on the GPU against the CPU reference (the same steps) and SciPy."""
    S = poisson2d(30) if problem == "poisson" else indefinite(30)
    b = rng.standard_normal(S.shape[0])
    P = poisson2d(30)  # SPD preconditioners for both problems
    M = our_preconditioner(precond, P)
    kw = {"rtol": 1e-8}
    ref = solve(sparsegpu.from_scipy(S, backend="cpu"), b, method="minres", M=M, history=True, **kw)
    got = solve(sparsegpu.from_scipy(S, format=fmt, backend="gpu"), b, method="minres", M=M, history=True, **kw)
    x_ref, info_ref, its_ref = counting(sla.minres, S, b, M=scipy_preconditioner(precond, P), **kw)
    assert got.info == ref.info == info_ref == 0
    # The summation order of dots and SpMV moves the stop on the indefinite system (as on the CPU).
    slack = 0 if problem == "poisson" else max(4, its_ref // 25)
    assert abs(got.iterations - ref.iterations) <= slack
    assert abs(got.iterations - its_ref) <= (1 if problem == "poisson" else max(4, its_ref // 25))
    np.testing.assert_allclose(got.history[:10], ref.history[:10], rtol=1e-8)
    np.testing.assert_allclose(got.x, ref.x, rtol=1e-5, atol=1e-5 * np.abs(ref.x).max())
    np.testing.assert_allclose(got.x, x_ref, rtol=1e-5, atol=1e-5 * np.abs(x_ref).max())
    again = solve(sparsegpu.from_scipy(S, format=fmt, backend="gpu"), b, method="minres", M=M, history=True, **kw)
    assert np.array_equal(again.x, got.x) and again.history == got.history  # reproducible


@pytest.mark.gpu
@pytest.mark.parametrize("precond", MINRES_PRECONDITIONERS)
def test_gpu_minres_batches_graphs_and_pipelining_never_change_the_result(precond, rng):
    import cupy as cp

    from sparsegpu.linalg import _fused

    S = indefinite(30)
    b = cp.asarray(rng.standard_normal(S.shape[0]))
    A = sparsegpu.from_scipy(S, backend="gpu")
    M = our_preconditioner(precond, poisson2d(30))
    for maxiter in (None, 13, 1):
        saved = _fused.USE_CUDA_GRAPHS
        _fused.USE_CUDA_GRAPHS = False
        try:
            want = _gpu_runs("minres", A, b, M, rtol=1e-9, maxiter=maxiter, check_every=1)
        finally:
            _fused.USE_CUDA_GRAPHS = saved
        if maxiter is not None:
            assert want[1:] == (maxiter, maxiter)
        for every in (2, 3, 5, 16):
            got = _gpu_runs("minres", A, b, M, rtol=1e-9, maxiter=maxiter, check_every=every)
            assert got[1:] == want[1:], (maxiter, every)
            assert np.array_equal(got[0], want[0]), (maxiter, every)
    calls = []
    x, info = minres(A, b, rtol=1e-9, M=M, callback=lambda xk: calls.append(isinstance(xk, cp.ndarray)))
    want = _gpu_runs("minres", A, b, M, rtol=1e-9, check_every=1)
    assert info == 0 and len(calls) == want[2] and all(calls)
    assert np.array_equal(to_numpy(x), want[0])


@pytest.mark.gpu
def test_gpu_minres_breakdowns_and_istop():
    import cupy as cp

    assert_nonfinite_and_one_step_cases(minres, "minres")
    S = poisson2d(4)
    d = np.ones(16)
    d[15] = -1e3
    b = np.ones(16)
    b[15] = 0.0
    for every in (1, 5):
        with pytest.raises(ValueError, match="non-symmetric matrix"):
            solve(sparsegpu.from_scipy(S, backend="gpu"), cp.asarray(b), method="minres",
                  M=sp.diags_array(d), check_every=every)
    S32 = indefinite(40).astype(np.float32)
    b32 = np.random.default_rng(0).standard_normal(1600).astype(np.float32)
    x, info = minres(sparsegpu.from_scipy(S32, backend="gpu"), cp.asarray(b32), rtol=1e-4, maxiter=3000)
    assert info == 0 and x.dtype == cp.float32


@pytest.mark.gpu
@pytest.mark.parametrize("precond", GMRES_PRECONDITIONERS)
@pytest.mark.parametrize("restart", [10, 30])
@pytest.mark.parametrize("fmt", ["csr", "ell"])
def test_gpu_gmres_matches_reference_and_scipy(precond, restart, fmt, rng):
    """GMRES on the GPU against the CPU reference (the same steps) and SciPy: iteration counts,
    presid history, x; and bitwise reproducible run to run."""
    S = convection_diffusion(30)
    b = rng.standard_normal(S.shape[0])
    M = our_preconditioner(precond, S)
    kw = {"rtol": 1e-8, "restart": restart}
    ref = solve(sparsegpu.from_scipy(S, backend="cpu"), b, method="gmres", M=M, history=True, **kw)
    A = sparsegpu.from_scipy(S, format=fmt, backend="gpu", **({"max_fill": None} if fmt == "ell" else {}))
    got = solve(A, b, method="gmres", M=M, history=True, **kw)
    x_ref, info_ref, its_ref = counting(sla.gmres, S, b, M=scipy_preconditioner(precond, S), **kw)
    assert got.info == ref.info == info_ref == 0
    assert abs(got.iterations - ref.iterations) <= 1 and abs(got.iterations - its_ref) <= 1
    assert len(got.history) == got.iterations
    np.testing.assert_allclose(got.history[:10], ref.history[:10], rtol=1e-8)
    np.testing.assert_allclose(to_numpy(got.x), ref.x, rtol=1e-5, atol=1e-5 * np.abs(ref.x).max())
    np.testing.assert_allclose(to_numpy(got.x), x_ref, rtol=1e-5, atol=1e-5 * np.abs(x_ref).max())
    assert np.linalg.norm(b - S @ to_numpy(got.x)) <= 1.5e-8 * np.linalg.norm(b)
    again = solve(A, b, method="gmres", M=M, history=True, **kw)
    assert np.array_equal(to_numpy(again.x), to_numpy(got.x)) and again.history == got.history


@pytest.mark.gpu
@pytest.mark.parametrize("precond", GMRES_PRECONDITIONERS)
def test_gpu_gmres_check_interval_never_changes_the_result(precond, rng):
    """Every check interval, with the batches and cycle ends replayed as CUDA graphs, gives
    bitwise the x, info, iteration count and history of eager launches checked every inner
    iteration; so do the per-iteration callbacks."""
    import cupy as cp

    from sparsegpu.linalg import _fused

    S = convection_diffusion(30)
    b = cp.asarray(rng.standard_normal(S.shape[0]))
    A = sparsegpu.from_scipy(S, backend="gpu")
    M = our_preconditioner(precond, S)
    for kw in ({"restart": 10}, {"restart": 7, "maxiter": 3}, {"restart": 1, "maxiter": 5}, {"restart": 40}):
        saved = _fused.USE_CUDA_GRAPHS
        _fused.USE_CUDA_GRAPHS = False
        try:
            want = _gmres_run(A, b, M, rtol=1e-9, check_every=1, **kw)  # eager, read every iteration
        finally:
            _fused.USE_CUDA_GRAPHS = saved
        assert len(want[3]) == want[2] > 0
        for every in (1, 2, 3, 5, 16):
            got = _gmres_run(A, b, M, rtol=1e-9, check_every=every, **kw)
            assert got[1:3] == want[1:3] and got[3] == want[3], (kw, every)
            assert np.array_equal(got[0], want[0]), (kw, every)
    presids = []
    x, info = gmres(A, b, rtol=1e-9, M=M, restart=10, callback=presids.append, callback_type="pr_norm")
    want = _gmres_run(A, b, M, rtol=1e-9, restart=10, check_every=16)
    assert info == want[1] == 0 and len(presids) == want[2]
    assert np.array_equal(to_numpy(x), want[0])
    np.testing.assert_allclose(presids, np.array(want[3]) / float(cp.linalg.norm(b)), rtol=1e-14)


@pytest.mark.gpu
def test_gpu_gmres_breakdowns_and_float32(rng):
    import cupy as cp

    assert_nonfinite_and_one_step_cases(gmres, "gmres")
    S = convection_diffusion(40).astype(np.float32)
    b = rng.standard_normal(S.shape[0]).astype(np.float32)
    for M in (None, jacobi(S)):
        x, info = gmres(sparsegpu.from_scipy(S, backend="gpu"), cp.asarray(b), rtol=1e-4, restart=30, M=M)
        assert info == 0 and x.dtype == cp.float32
        assert np.linalg.norm(b - S.astype(np.float64) @ x.get().astype(np.float64)) <= 2e-4 * np.linalg.norm(b)

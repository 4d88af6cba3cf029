"""CG, BiCGSTAB, GMRES and MINRES with SciPy's signatures, semantics and stopping tests.

CG, BiCGSTAB and MINRES run on the fused steps of kernels/krylov.cu (twins on the CPU backend):
their scalars live on the device and the host reads the status word once every ``check_every``
iterations. Iterations launched after convergence, breakdown or the iteration limit change
nothing (every step is frozen by the device status), so the result is the iterate of the first
converged step, exactly as if the test ran on the host every iteration.

A CG iteration is three launches: the operator's product with p.Ap in its epilogue
(``spmv_dot``), CG_UPDATE (alpha, x and r, r.r) and CG_P. On the GPU (without a callback or a
history) the status reads are pipelined: the next batch is queued before the host waits for
the previous batch's status, so the GPU never idles on a check; the price is at most two
batches of frozen iterations after convergence.

A MINRES iteration is the operator's product and three launches: MR_LANCZOS (the Lanczos
vector and alfa), MR_RESIDUAL (the r1, r2 shift and beta; with a general preconditioner its
apply and MR_RZ follow) and MR_UPDATE (w, x, the next v and norm(x)). The epilogues of the
reductions run SciPy's whole scalar recurrence (Lanczos coefficients, Givens rotation, phi and
phibar, the Anorm, ynorm and Acond estimates) and every stopping test of SciPy's minres; the
setup reads beta1 from the device once.

GMRES still follows SciPy line by line over the operator interface and array operations of the
backend; its scalar work (the Arnoldi coefficients, Givens rotations, residual estimate and
the least-squares solve) runs on the host, which costs a synchronisation per dot product on
the GPU.

A ``callback`` costs one synchronisation per iteration on the GPU (and a download of x when b
is a NumPy array).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
from scipy.linalg import get_lapack_funcs

from sparsegpu.linalg._fused import (
    BatchLauncher,
    FusedWorkspace,
    history_ring_length,
    solver_stream,
    vector_dot,
)
from sparsegpu.linalg._system import System, check_maxiter, initial_residual, prepare
from sparsegpu.reference import krylov as codes

#: Iterations between two host reads of the device status on the GPU (1 on the CPU backend).
CHECK_EVERY = 16


@dataclass
class Outcome:
    """What a solver found, on the solver's backend."""

    x: Any
    info: int
    iterations: int
    history: list[float] = field(default_factory=list)


def _check_every(system: System, check_every: int | None) -> int:
    if check_every is None:
        return CHECK_EVERY if system.backend == "gpu" else 1
    if int(check_every) < 1:
        raise ValueError(f"check_every must be a positive integer, got {check_every}")
    return int(check_every)


def _calls_back(status: int) -> bool:
    """Whether SciPy calls the callback after an iteration that ended with this status: not
    after BiCGSTAB's half-step convergence (it returns first)."""
    return status != codes.CONVERGED_HALF


def _drive(system: System, ws: FusedWorkspace, iteration: Callable[[], None], x: Any,
           callback: Callable | None, check_every: int, history: bool,
           calls_back: Callable[[int], bool] = _calls_back) -> Outcome:
    """Run fused iterations in batches, reading the status once per batch (every iteration
    when there is a callback)."""
    maxiter = system.maxiter
    recorded: list[float] = []
    with solver_stream(system.backend):
        status, count = ws.read()
        ws.drain_history(recorded, count)
        every = 1 if callback is not None else check_every
        launcher = BatchLauncher(ws, iteration, every)
        if system.backend == "gpu" and callback is None and not history:
            status, count = _pipelined(ws, launcher, status, count, maxiter, every)
        else:
            launched = 0
            while status == codes.RUNNING and launched < maxiter:
                launched += launcher.run(min(every, maxiter - launched))
                status, count = ws.read()
                if history:
                    ws.drain_history(recorded, count)
                if callback is not None and count == launched and calls_back(status):
                    callback(system.output(x))
    if status in (codes.CONVERGED, codes.CONVERGED_HALF):
        info = 0
    elif status < 0:
        info = status
    else:  # LIMIT (or RUNNING when maxiter is 0)
        info = maxiter
    return Outcome(x, info, count, recorded if history else [])


def _pipelined(ws: FusedWorkspace, launcher: BatchLauncher, status: int, count: int, maxiter: int,
               every: int) -> tuple[int, int]:
    """Batches with the status read one batch behind: batch k is queued, then the host waits
    for the status after batch k - 1. The last snapshot taken covers every launched iteration
    (later ones are frozen), so it is the final (status, count)."""
    snapshots = ws.snapshots()
    launched, taken = 0, 0
    pending = None
    while status == codes.RUNNING and launched < maxiter:
        launched += launcher.run(min(every, maxiter - launched))
        current = snapshots[taken % 2].take()
        taken += 1
        if pending is not None:
            status, count = pending.wait()
        pending = current
    return pending.wait() if pending is not None else (status, count)


def _fused_setup(name: str, A: Any, b: Any, x0: Any, rtol: Any, atol: Any, maxiter: Any, M: Any,
                 check_every: int | None, history: bool,
                 maxiter_per_unknown: int = 10) -> tuple[System, int, Any]:
    system = prepare(name, A, b, x0, rtol, atol, M, fuse_jacobi=True)
    system.maxiter = check_maxiter(name, maxiter, maxiter_per_unknown * system.n)
    every = _check_every(system, check_every)
    ws = FusedWorkspace(system.backend, system.n, system.dtype, system.atol, system.maxiter,
                        history_ring=history_ring_length(every) if history else 0)
    return system, every, ws


def cg_outcome(A: Any, b: Any, x0: Any = None, *, rtol: float = 1e-5, atol: float = 0.0,
               maxiter: int | None = None, M: Any = None, callback: Callable | None = None,
               check_every: int | None = None, history: bool = False) -> tuple[System, Outcome]:
    """CG, returning the full :class:`Outcome` (see :func:`cg`)."""
    system, every, ws = _fused_setup("cg", A, b, x0, rtol, atol, maxiter, M, check_every, history)
    if system.bnorm == 0:
        return system, Outcome(system.b.copy(), 0, 0, [0.0] if history else [])
    x, r, dinv, general = system.x, initial_residual(system), system.dinv, system.M
    p, q = ws.zeros(), ws.empty()
    z = ws.empty() if general is not None else r
    if dinv is not None:
        mode = codes.FLAG_DINV
    else:
        mode = codes.FLAG_LATE_RHO if general is not None else 0
    p_flag = codes.FLAG_DINV if dinv is not None else 0

    def rho_from_general_preconditioner() -> None:
        general.apply(r, z)
        ws.step(codes.CG_RHO, r, z)

    def precondition_and_p() -> None:
        if general is not None:
            rho_from_general_preconditioner()
        ws.step(codes.CG_P, p, z, x, dinv=dinv, flag=p_flag)  # x += alpha p (pending), p = z + beta p

    ws.step(codes.CG_UPDATE, r, q, dinv=dinv, flag=mode | codes.FLAG_START)
    precondition_and_p()

    def iteration() -> None:
        system.A.apply_dot(p, q, ws.pq)  # q = A p and p.q into sc[PQ], for CG_UPDATE's alpha
        ws.step(codes.CG_UPDATE, r, q, dinv=dinv, flag=mode)
        precondition_and_p()

    return system, _drive(system, ws, iteration, x, callback, every, history)


def bicgstab_outcome(A: Any, b: Any, x0: Any = None, *, rtol: float = 1e-5, atol: float = 0.0,
                     maxiter: int | None = None, M: Any = None, callback: Callable | None = None,
                     check_every: int | None = None, history: bool = False) -> tuple[System, Outcome]:
    """BiCGSTAB, returning the full :class:`Outcome` (see :func:`bicgstab`)."""
    system, every, ws = _fused_setup("bicgstab", A, b, x0, rtol, atol, maxiter, M, check_every, history)
    if system.bnorm == 0:
        return system, Outcome(system.b.copy(), 0, 0, [0.0] if history else [])
    x, r, dinv, general = system.x, initial_residual(system), system.dinv, system.M
    rtilde, p, v, t = r.copy(), ws.zeros(), ws.zeros(), ws.empty()
    preconditioned = dinv is not None or general is not None
    phat = ws.zeros() if preconditioned else p
    shat = ws.empty() if preconditioned else r
    flag = codes.FLAG_DINV if dinv is not None else 0
    ws.step(codes.BI_START, r, rtilde)

    def iteration() -> None:
        ws.step(codes.BI_P, p, r, v, phat, dinv=dinv, flag=flag)
        if general is not None:
            general.apply(p, phat)
        system.A.apply(phat, v)
        ws.step(codes.BI_ALPHA, rtilde, v)
        ws.step(codes.BI_S, r, v, shat, dinv=dinv, flag=flag)
        if general is not None:
            general.apply(r, shat)
        system.A.apply(shat, t)
        ws.step(codes.BI_OMEGA, t, r)
        ws.step(codes.BI_XR, x, r, phat, shat, t, rtilde)

    return system, _drive(system, ws, iteration, x, callback, every, history)


def gmres_outcome(A: Any, b: Any, x0: Any = None, *, rtol: float = 1e-5, atol: float = 0.0,
                  restart: int | None = None, maxiter: int | None = None, M: Any = None,
                  callback: Callable | None = None, callback_type: str | None = None,
                  history: bool = False) -> tuple[System, Outcome]:
    """GMRES, returning the full :class:`Outcome` (see :func:`gmres`). A port of SciPy 1.17's
    ``gmres`` (left preconditioning, modified Gram-Schmidt, Givens rotations, gh-8400's inner
    tolerance control); ``history`` holds the preconditioned residual estimate of every inner
    iteration."""
    if callback_type is None:
        callback_type = "legacy"
    if callback_type not in ("x", "pr_norm", "legacy"):
        raise ValueError(f"Unknown callback_type: {callback_type!r}")
    if callback is None:
        callback_type = None
    if restart is not None and int(restart) < 1:
        raise ValueError(f"gmres: restart must be a positive integer, got {restart}")
    system = prepare("gmres", A, b, x0, rtol, atol, M, fuse_jacobi=False)
    n, xp, bnrm2, atol_ = system.n, system.xp, system.bnorm, system.atol
    maxiter = system.maxiter = check_maxiter("gmres", maxiter, 10 * n)
    if bnrm2 == 0:
        return system, Outcome(system.b.copy(), 0, 0, [])
    x, dtype = system.x, system.dtype
    eps = float(np.finfo(dtype).eps)
    restart = min(20 if restart is None else int(restart), n)
    work = xp.empty(n, dtype)
    Mb_nrm2 = system.norm(system.precondition(system.b, work))
    ptol_max_factor = 1.0
    ptol = Mb_nrm2 * min(ptol_max_factor, atol_ / bnrm2)
    presid = 0.0
    lartg = get_lapack_funcs("lartg", dtype=np.float64)  # the Hessenberg work is float64
    v = xp.empty((restart + 1, n), dtype)
    h = np.zeros((restart, restart + 1), np.float64)
    givens = np.zeros((restart, 2), np.float64)
    av, w = xp.empty(n, dtype), xp.empty(n, dtype)
    recorded: list[float] = []
    inner_iter = 0
    rnorm = math.inf
    r = initial_residual(system)
    if system.norm(r) < atol_:
        return system, Outcome(x, 0, 0, recorded)
    for _cycle in range(maxiter):
        system.precondition(r, v[0])
        tmp = system.norm(v[0])
        if not math.isfinite(tmp):
            return system, Outcome(x, codes.NONFINITE, inner_iter, recorded)
        v[0] *= dtype.type(1 / tmp)
        S = np.zeros(restart + 1, np.float64)
        S[0] = tmp
        breakdown = False
        for col in range(restart):
            system.A.apply(v[col], av)
            system.precondition(av, w)
            h0 = system.norm(w)
            for k in range(col + 1):
                coefficient = float(xp.dot(v[k], w))
                h[col, k] = coefficient
                w -= dtype.type(coefficient) * v[k]
            h1 = system.norm(w)
            if not (math.isfinite(h0) and math.isfinite(h1)):
                return system, Outcome(x, codes.NONFINITE, inner_iter, recorded)
            h[col, col + 1] = h1
            v[col + 1] = w
            if h1 <= eps * h0:  # exact solution indicator
                h[col, col + 1] = 0
                breakdown = True
            else:
                v[col + 1] *= dtype.type(1 / h1)
            for k in range(col):
                c, s = givens[k, 0], givens[k, 1]
                n0, n1 = h[col, [k, k + 1]]
                h[col, [k, k + 1]] = [c * n0 + s * n1, -s * n0 + c * n1]
            c, s, mag = lartg(h[col, col], h[col, col + 1])
            givens[col, :] = [c, s]
            h[col, [col, col + 1]] = mag, 0
            tmp = -s * S[col]
            S[[col, col + 1]] = [c * S[col], tmp]
            presid = abs(tmp)
            inner_iter += 1
            if history:
                recorded.append(presid)
            if callback_type in ("legacy", "pr_norm"):
                callback(presid / bnrm2)
            if callback_type == "legacy" and inner_iter == maxiter:
                break
            if presid <= ptol or breakdown:
                break
        if h[col, col] == 0:
            S[col] = 0
        y = np.zeros(col + 1, np.float64)
        y[:] = S[: col + 1]
        for k in range(col, 0, -1):
            if y[k] != 0:
                y[k] /= h[k, k]
                y[:k] -= y[k] * h[k, :k]
        if y[0] != 0:
            y[0] /= h[0, 0]
        x += xp.asarray(y.astype(dtype)) @ v[: col + 1]
        r = system.b - _apply(system, x)
        rnorm = system.norm(r)
        if not math.isfinite(rnorm):
            return system, Outcome(x, codes.NONFINITE, inner_iter, recorded)
        if callback_type == "legacy" and inner_iter == maxiter:
            return system, Outcome(x, 0 if rnorm <= atol_ else maxiter, inner_iter, recorded)
        if callback_type == "x":
            callback(system.output(x))
        if rnorm <= atol_:
            break
        elif breakdown:
            break
        elif presid <= ptol:
            ptol_max_factor = max(eps, 0.25 * ptol_max_factor)
        else:
            ptol_max_factor = min(1.0, 1.5 * ptol_max_factor)
        ptol = presid * min(ptol_max_factor, atol_ / rnorm)
    info = 0 if rnorm <= atol_ else maxiter
    return system, Outcome(x, info, inner_iter, recorded)


def _apply(system: System, x: Any) -> Any:
    out = system.xp.empty_like(x)
    system.A.apply(x, out)
    return out


def minres_outcome(A: Any, b: Any, x0: Any = None, *, rtol: float = 1e-5, atol: float = 0.0,
                   shift: float = 0.0, maxiter: int | None = None, M: Any = None,
                   callback: Callable | None = None, check: bool = False,
                   check_every: int | None = None, history: bool = False) -> tuple[System, Outcome]:
    """MINRES, returning the full :class:`Outcome` (see :func:`minres`): SciPy 1.17's
    ``minres`` on the fused steps of kernels/krylov.cu. ``history`` holds its residual
    estimate ``phibar`` per iteration.

    The setup (beta1 = sqrt(r1 . M r1), its checks, the optional symmetry ``check``) reads
    the device once; the iterations then run without the host: per iteration the operator's
    product and three fused steps (four with a general preconditioner, which adds its apply),
    whose epilogues run SciPy's scalar recurrence and stopping tests (istop) on the device.
    Status LIMIT is istop 6 (info = maxiter), CONVERGED any other istop (info 0), as SciPy
    maps them; r2.M r2 < 0 raises SciPy's ``ValueError('non-symmetric matrix')`` when the
    host reads the status, a NaN or infinity gives info -1 (x is the last finite iterate).
    """
    system, every, ws = _fused_setup("minres", A, b, x0, rtol, atol, maxiter, M, check_every, history,
                                     maxiter_per_unknown=5)
    shift = _real_scalar("minres", "shift", shift)
    n, xp, dtype, x = system.n, system.xp, system.dtype, system.x
    dinv, general = system.dinv, system.M
    eps = float(np.finfo(dtype).eps)
    r1, r2 = ws.zeros(), initial_residual(system)  # SciPy's r2 = r1 (r1 unused before itn 2)
    z = ws.empty() if general is not None else r2  # SciPy's y = psolve(r2) (r2 with dinv: fused)
    y = system.precondition(r2, ws.empty()) if general is None and dinv is not None else z
    if general is not None:
        general.apply(r2, z)
    beta1_slot = ws.sc[codes.MR_BETA1 : codes.MR_BETA1 + 1]
    vector_dot(r2, y, beta1_slot, {})
    beta1 = float(beta1_slot[0])  # the setup's one read of the device
    if beta1 < 0:
        raise ValueError("indefinite preconditioner")
    elif beta1 == 0:
        return system, Outcome(x, 0, 0, [])
    if not math.isfinite(beta1):
        return system, Outcome(x, codes.NONFINITE, 0, [])
    if system.bnorm == 0:
        return system, Outcome(system.b.copy(), 0, 0, [])
    beta1 = math.sqrt(beta1)
    if check:
        _minres_symmetry_check(system, r2, y, eps)
    ws.set_slots({
        codes.MR_BETA1: beta1, codes.MR_BETA: beta1, codes.MR_OLDB: 0.0, codes.MR_DBAR: 0.0,
        codes.MR_EPSLN: 0.0, codes.MR_PHIBAR: beta1, codes.MR_RHS1: beta1, codes.MR_RHS2: 0.0,
        codes.MR_TNORM2: 0.0, codes.MR_GMAX: 0.0, codes.MR_GMIN: float(np.finfo(dtype).max),
        codes.MR_CS: -1.0, codes.MR_SN: 0.0, codes.MR_SHIFT: shift, codes.MR_RTOL: float(rtol),
        codes.MR_EPS: eps, codes.MR_ATOL: float(atol),
    })
    v, q, w1, w2 = ws.empty(), ws.empty(), ws.zeros(), ws.zeros()
    fused = codes.FLAG_DINV if dinv is not None else 0
    residual_flag = codes.FLAG_LATE_RHO if general is not None else fused
    ws.step(codes.MR_UPDATE, x, v, w1, w2, z, dinv=dinv, flag=fused | codes.FLAG_START)  # v = y / beta1

    def iteration() -> None:
        system.A.apply(v, q)
        ws.step(codes.MR_LANCZOS, q, v, r1)  # y = A v - shift v - (beta/oldb) r1; alfa = v.y
        ws.step(codes.MR_RESIDUAL, r1, r2, q, dinv=dinv, flag=residual_flag)  # r1 = r2; r2 = ...; beta
        if general is not None:
            general.apply(r2, z)
            ws.step(codes.MR_RZ, r2, z)  # beta = sqrt(r2.z), then the rotation
        ws.step(codes.MR_UPDATE, x, v, w1, w2, z, dinv=dinv, flag=fused)  # w, x, the next v; tests

    outcome = _drive(system, ws, iteration, x, callback, every, history,
                     calls_back=lambda status: status >= 0)
    if outcome.info == codes.NOT_SYMMETRIC:
        raise ValueError("non-symmetric matrix")
    # The device records phibar = beta1 before the first iteration and NaN for an iteration
    # that broke down; the history holds one estimate per completed iteration.
    outcome.history = outcome.history[1 : outcome.iterations + (1 if outcome.info >= 0 else 0)]
    return system, outcome


def _real_scalar(name: str, label: str, value: Any) -> float:
    if isinstance(value, (bool, str)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name}: {label} must be a real number, got {value!r}")
    if not math.isfinite(float(value)):
        raise ValueError(f"{name}: {label} must be finite, got {value!r}")
    return float(value)


def _minres_symmetry_check(system: System, r1: Any, y: Any, eps: float) -> None:
    """SciPy's ``check=True`` tests of A and M (setup, on the host: a few reads)."""
    xp, n, dtype = system.xp, system.n, system.dtype
    w_ = _apply(system, y)
    r2_ = _apply(system, w_)
    s_, t_ = float(xp.dot(w_, w_)), float(xp.dot(y, r2_))
    if abs(s_ - t_) > (s_ + eps) * eps ** (1.0 / 3.0):
        raise ValueError("non-symmetric matrix")
    r2_ = system.precondition(y, xp.empty(n, dtype))
    s_, t_ = float(xp.dot(y, y)), float(xp.dot(r1, r2_))
    if abs(s_ - t_) > (s_ + eps) * eps ** (1.0 / 3.0):
        raise ValueError("non-symmetric preconditioner")

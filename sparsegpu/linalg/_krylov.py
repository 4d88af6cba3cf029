"""CG, BiCGSTAB, GMRES and MINRES with SciPy's signatures, semantics and stopping tests.

CG and BiCGSTAB run on the fused steps of kernels/krylov.cu (twins on the CPU backend): their
scalars live on the device and the host reads the status word once every ``check_every``
iterations. Iterations launched after convergence, breakdown or the iteration limit change
nothing (every step is frozen by the device status), so the result is the iterate of the first
converged step, exactly as if the test ran on the host every iteration.

A CG iteration is three launches: the operator's product with p.Ap in its epilogue
(``spmv_dot``), CG_UPDATE (alpha, x and r, r.r) and CG_P. On the GPU (without a callback or a
history) the status reads are pipelined: the next batch is queued before the host waits for
the previous batch's status, so the GPU never idles on a check; the price is at most two
batches of frozen iterations after convergence.

GMRES and MINRES follow SciPy line by line over the operator interface and array operations
of the backend; their small scalar recurrences (Givens rotations, Lanczos coefficients) run on
the host, which costs a synchronisation per dot product on the GPU.

A ``callback`` costs one synchronisation per iteration on the GPU (and a download of x when b
is a NumPy array).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
from scipy.linalg import get_lapack_funcs

from sparsegpu.linalg._fused import BatchLauncher, FusedWorkspace, history_ring_length, solver_stream
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


def _drive(system: System, ws: FusedWorkspace, iteration: Callable[[], None], x: Any,
           callback: Callable | None, check_every: int, history: bool) -> Outcome:
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
                if callback is not None and count == launched and status != codes.CONVERGED_HALF:
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
                 check_every: int | None, history: bool) -> tuple[System, int, Any]:
    system = prepare(name, A, b, x0, rtol, atol, M, fuse_jacobi=True)
    system.maxiter = check_maxiter(name, maxiter, 10 * system.n)
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
                   history: bool = False) -> tuple[System, Outcome]:
    """MINRES, returning the full :class:`Outcome` (see :func:`minres`). A port of SciPy
    1.17's ``minres``; ``history`` holds its residual estimate ``phibar`` per iteration."""
    system = prepare("minres", A, b, x0, rtol, atol, M, fuse_jacobi=False)
    rtol = float(rtol)
    n, xp, dtype = system.n, system.xp, system.dtype
    maxiter = system.maxiter = check_maxiter("minres", maxiter, 5 * n)
    x = system.x
    eps = float(np.finfo(dtype).eps)
    istop, itn = 0, 0
    Anorm = Acond = rnorm = ynorm = 0.0
    recorded: list[float] = []
    r1 = initial_residual(system)
    y = system.precondition(r1, xp.empty(n, dtype))
    beta1 = float(xp.dot(r1, y))
    if beta1 < 0:
        raise ValueError("indefinite preconditioner")
    elif beta1 == 0:
        return system, Outcome(x, 0, 0, recorded)
    if not math.isfinite(beta1):
        return system, Outcome(x, codes.NONFINITE, 0, recorded)
    if system.bnorm == 0:
        return system, Outcome(system.b.copy(), 0, 0, recorded)
    beta1 = math.sqrt(beta1)
    if check:
        w_ = _apply(system, y)
        r2_ = _apply(system, w_)
        s_, t_ = float(xp.dot(w_, w_)), float(xp.dot(y, r2_))
        if abs(s_ - t_) > (s_ + eps) * eps ** (1.0 / 3.0):
            raise ValueError("non-symmetric matrix")
        r2_ = system.precondition(y, xp.empty(n, dtype))
        s_, t_ = float(xp.dot(y, y)), float(xp.dot(r1, r2_))
        if abs(s_ - t_) > (s_ + eps) * eps ** (1.0 / 3.0):
            raise ValueError("non-symmetric preconditioner")
    oldb, beta, dbar, epsln = 0.0, beta1, 0.0, 0.0
    phibar, rhs1, rhs2, tnorm2 = beta1, beta1, 0.0, 0.0
    gmax, gmin = 0.0, float(np.finfo(dtype).max)
    cs, sn = -1.0, 0.0
    w, w2 = xp.zeros(n, dtype), xp.zeros(n, dtype)
    r2 = r1
    v = xp.empty(n, dtype)
    V = dtype.type
    while itn < maxiter:
        itn += 1
        xp.multiply(y, V(1.0 / beta), out=v)
        y = _apply(system, v)
        if shift != 0:
            y -= V(shift) * v
        if itn >= 2:
            y -= V(beta / oldb) * r1
        alfa = float(xp.dot(v, y))
        y -= V(alfa / beta) * r2
        r1 = r2
        r2 = y
        y = system.precondition(r2, xp.empty(n, dtype))
        oldb = beta
        beta = float(xp.dot(r2, y))
        if not (math.isfinite(alfa) and math.isfinite(beta)):
            return system, Outcome(x, codes.NONFINITE, itn, recorded)
        if beta < 0:
            raise ValueError("non-symmetric matrix")
        beta = math.sqrt(beta)
        tnorm2 += alfa**2 + oldb**2 + beta**2
        if itn == 1 and beta / beta1 <= 10 * eps:
            istop = -1
        oldeps = epsln
        delta = cs * dbar + sn * alfa
        gbar = sn * dbar - cs * alfa
        epsln = sn * beta
        dbar = -cs * beta
        root = math.hypot(gbar, dbar)
        gamma = max(math.hypot(gbar, beta), eps)
        cs = gbar / gamma
        sn = beta / gamma
        phi = cs * phibar
        phibar = sn * phibar
        denom = 1.0 / gamma
        w1, w2 = w2, w
        w = (v - V(oldeps) * w1 - V(delta) * w2) * V(denom)
        x += V(phi) * w
        gmax, gmin = max(gmax, gamma), min(gmin, gamma)
        z = rhs1 / gamma
        rhs1 = rhs2 - delta * z
        rhs2 = -epsln * z
        Anorm = math.sqrt(tnorm2)
        ynorm = system.norm(x)
        epsx = Anorm * ynorm * eps
        rnorm = phibar
        if history:
            recorded.append(rnorm)
        test1 = math.inf if ynorm == 0 or Anorm == 0 else rnorm / (Anorm * ynorm)
        test2 = math.inf if Anorm == 0 else root / Anorm
        Acond = gmax / gmin
        if istop == 0:
            t1, t2 = 1 + test1, 1 + test2
            if t2 <= 1:
                istop = 2
            if t1 <= 1:
                istop = 1
            if itn >= maxiter:
                istop = 6
            if Acond >= 0.1 / eps:
                istop = 4
            if epsx >= beta1:
                istop = 3
            if test2 <= rtol:
                istop = 2
            if test1 <= rtol:
                istop = 1
            if rnorm <= float(atol):  # an extension: SciPy's minres has no atol (default 0: no effect)
                istop = 1
        if callback is not None:
            callback(system.output(x))
        if istop != 0:
            break
    return system, Outcome(x, maxiter if istop == 6 else 0, itn, recorded)

"""CG, BiCGSTAB, GMRES and MINRES with SciPy's signatures, semantics and stopping tests.

All four run on the fused steps of kernels/krylov.cu (NumPy vector operations on the CPU
backend, :mod:`sparsegpu.linalg._host`): their scalars live on the device and the host reads
the status word once every ``check_every`` iterations. Iterations launched after convergence,
breakdown or the iteration limit change
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

GMRES (SciPy's arithmetic, so iteration counts match) keeps its Hessenberg matrix, Givens rotations, rhs
and residual estimate in device slots: an inner iteration is the operator's product and col + 3
fused steps (one modified Gram-Schmidt reduction per basis vector, the rotations and the inner
tests in the last one's epilogue, the scaling of the new basis vector); the end of a cycle (the
triangular solve on one block, x += V^T y, r = b - A x with the outer tests and the ptol
update, the next v[0]) runs on the device too. The host reads the status every
``check_every`` inner iterations of a cycle and after the cycle's end (once per cycle when
``check_every >= restart``). Batches start at the same columns in every cycle, so on the GPU
each batch, and the end of a cycle, is captured once as a CUDA graph (in the second cycle; the
first runs eagerly) and replayed.

A ``callback`` costs one synchronisation per iteration on the GPU (and a download of x when b
is a NumPy array).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from sparsegpu.linalg._fused import (
    BatchLauncher,
    FusedWorkspace,
    GraphCache,
    history_ring_length,
    solver_stream,
    vector_dot,
)
from sparsegpu._validate import ensure_fits
from sparsegpu.linalg._system import (
    System,
    check_bool_option,
    check_callback,
    check_maxiter,
    check_positive_int,
    initial_residual,
    prepare,
)
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


def _check_options(name: str, check_every: Any, callback: Any, history: Any) -> int | None:
    """The options every solver takes, checked before anything is converted or allocated:
    ``check_every`` (None or an int >= 1, returned), ``callback`` and ``history``."""
    check_callback(name, callback)
    check_bool_option(name, "history", history)
    return None if check_every is None else check_positive_int(name, "check_every", check_every)


def _check_every(system: System, check_every: int | None) -> int:
    """The batch length: ``check_every`` (checked), or the backend's default."""
    if check_every is None:
        return CHECK_EVERY if system.backend == "gpu" else 1
    return check_every


def _ring_length(system: System, every: int, history: bool) -> int:
    """Residual norms kept on the device for one batch (0 without a history), checked to fit:
    a huge ``check_every`` would size it."""
    if not history:
        return 0
    ring = history_ring_length(every)
    ensure_fits(8 * ring, f"{system.name}: a residual history of {ring:,} entries (check_every={every})",
                system.backend)
    return ring


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
                 callback: Any, maxiter_per_unknown: int = 10) -> tuple[System, int, Any]:
    """Check every argument, then prepare the system and its workspace."""
    check_every = _check_options(name, check_every, callback, history)
    if maxiter is not None:
        check_maxiter(name, maxiter, 0)
    system = prepare(name, A, b, x0, rtol, atol, M, fuse_jacobi=True)
    system.maxiter = check_maxiter(name, maxiter, maxiter_per_unknown * system.n)
    every = _check_every(system, check_every)
    ws = FusedWorkspace(system.backend, system.n, system.dtype, system.atol, system.maxiter,
                        history_ring=_ring_length(system, every, history))
    return system, every, ws


def cg_outcome(A: Any, b: Any, x0: Any = None, *, rtol: float = 1e-5, atol: float = 0.0,
               maxiter: int | None = None, M: Any = None, callback: Callable | None = None,
               check_every: int | None = None, history: bool = False) -> tuple[System, Outcome]:
    """CG, returning the full :class:`Outcome` (see :func:`cg`)."""
    system, every, ws = _fused_setup("cg", A, b, x0, rtol, atol, maxiter, M, check_every, history, callback)
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
        ws.step(codes.CG_RHO, r=r, z=z)

    def precondition_and_p() -> None:
        if general is not None:
            rho_from_general_preconditioner()
        ws.step(codes.CG_P, p=p, z=z, x=x, dinv=dinv, flag=p_flag)  # x += alpha p (pending), p = z + beta p

    ws.step(codes.CG_UPDATE, r=r, q=q, dinv=dinv, flag=mode | codes.FLAG_START)
    precondition_and_p()

    def iteration() -> None:
        system.A.apply_dot(p, q, ws.pq)  # q = A p and p.q into sc[PQ], for CG_UPDATE's alpha
        ws.step(codes.CG_UPDATE, r=r, q=q, dinv=dinv, flag=mode)
        precondition_and_p()

    return system, _drive(system, ws, iteration, x, callback, every, history)


def bicgstab_outcome(A: Any, b: Any, x0: Any = None, *, rtol: float = 1e-5, atol: float = 0.0,
                     maxiter: int | None = None, M: Any = None, callback: Callable | None = None,
                     check_every: int | None = None, history: bool = False) -> tuple[System, Outcome]:
    """BiCGSTAB, returning the full :class:`Outcome` (see :func:`bicgstab`)."""
    system, every, ws = _fused_setup("bicgstab", A, b, x0, rtol, atol, maxiter, M, check_every, history,
                                     callback)
    if system.bnorm == 0:
        return system, Outcome(system.b.copy(), 0, 0, [0.0] if history else [])
    x, r, dinv, general = system.x, initial_residual(system), system.dinv, system.M
    rtilde, p, v, t = r.copy(), ws.zeros(), ws.zeros(), ws.empty()
    preconditioned = dinv is not None or general is not None
    phat = ws.zeros() if preconditioned else p
    shat = ws.empty() if preconditioned else r
    flag = codes.FLAG_DINV if dinv is not None else 0
    ws.step(codes.BI_START, r=r, rtilde=rtilde)

    def iteration() -> None:
        ws.step(codes.BI_P, p=p, r=r, v=v, phat=phat, dinv=dinv, flag=flag)
        if general is not None:
            general.apply(p, phat)
        system.A.apply(phat, v)
        ws.step(codes.BI_ALPHA, rtilde=rtilde, v=v)
        ws.step(codes.BI_S, r=r, v=v, shat=shat, dinv=dinv, flag=flag)  # s in r
        if general is not None:
            general.apply(r, shat)
        system.A.apply(shat, t)
        ws.step(codes.BI_OMEGA, t=t, s=r)
        ws.step(codes.BI_XR, x=x, r=r, phat=phat, shat=shat, t=t, rtilde=rtilde)

    return system, _drive(system, ws, iteration, x, callback, every, history)


def gmres_outcome(A: Any, b: Any, x0: Any = None, *, rtol: float = 1e-5, atol: float = 0.0,
                  restart: int | None = None, maxiter: int | None = None, M: Any = None,
                  callback: Callable | None = None, callback_type: str | None = None,
                  check_every: int | None = None, history: bool = False) -> tuple[System, Outcome]:
    """GMRES, returning the full :class:`Outcome` (see :func:`gmres`): SciPy 1.17's ``gmres``
    (left preconditioning, modified Gram-Schmidt, Givens rotations, gh-8400's inner tolerance
    control) on the fused steps of kernels/krylov.cu; ``history`` holds the preconditioned
    residual estimate presid of every inner iteration.

    The setup reads the device a few times (norm(M b), norm(r0), writing the slots). Inner
    iteration col is the operator's product (and M's apply; a Jacobi M is fused into
    GM_ARNOLDI_FIRST), then col + 3 fused steps: GM_ARNOLDI_FIRST (h0, h[col, 0]), GM_ARNOLDI
    for k < col, GM_ARNOLDI_LAST (h1, whose epilogue applies the Givens rotations, updates S and
    presid and runs the inner tests) and GM_SCALE (v[col + 1] = w / h1). The end of a cycle is
    GM_SOLVE (the triangular solve, one block), GM_UPDATE_X, the product A x and GM_RESIDUAL
    (r, the outer tests, ptol; without M or with Jacobi it also forms the next v[0]), then
    GM_SCALE. The host reads the status after every ``check_every`` inner iterations of a cycle
    and after the cycle's end (once per cycle when ``check_every >= restart``); inner steps
    launched after the cycle's inner loop stopped, and everything after the solve ended, are
    frozen on the device, so x does not depend on ``check_every``. On the GPU each batch (keyed
    by its first column) and the end of a cycle run as CUDA graphs from their second run on
    (:class:`~sparsegpu.linalg._fused.GraphCache`). A callback of type ``'legacy'`` or
    ``'pr_norm'`` reads the status and presid after every inner iteration, ``'x'`` after every
    cycle. A non-finite value gives info -1 and x the last finite iterate (x changes only at a
    cycle's end, after the triangular solve checked y); a zero M r gives info -11.
    """
    if callback_type is None:
        callback_type = "legacy"
    if not isinstance(callback_type, str) or callback_type not in ("x", "pr_norm", "legacy"):
        raise ValueError(f"gmres: callback_type must be 'x', 'pr_norm' or 'legacy', got {callback_type!r}")
    if callback is None:
        callback_type = None
    if restart is not None:
        restart = check_positive_int("gmres", "restart", restart)
    check_every = _check_options("gmres", check_every, callback, history)
    if maxiter is not None:
        check_maxiter("gmres", maxiter, 0)
    system = prepare("gmres", A, b, x0, rtol, atol, M, fuse_jacobi=True)
    n, xp, bnrm2, atol_ = system.n, system.xp, system.bnorm, system.atol
    maxiter = system.maxiter = check_maxiter("gmres", maxiter, 10 * n)
    every = _check_every(system, check_every)
    if bnrm2 == 0:
        return system, Outcome(system.b.copy(), 0, 0, [])
    x, dtype, dinv, general = system.x, system.dtype, system.dinv, system.M
    restart = min(20 if restart is None else restart, n)
    ensure_fits((restart + 1) * n * dtype.itemsize + 8 * codes.gmres_slots(restart),
                f"gmres: a Krylov basis of {restart + 1} x {n:,} vectors (restart={restart})", system.backend)
    basis = xp.empty((restart + 1, n), dtype)  # SciPy's v; w lives in row col + 1
    v = list(basis)  # its rows, made once (views: the kernels get their pointers)
    Mb_nrm2 = system.norm(system.precondition(system.b, basis[0]))
    ptol = Mb_nrm2 * min(1.0, atol_ / bnrm2)
    r = initial_residual(system)
    if system.norm(r) < atol_:
        return system, Outcome(x, 0, 0, [])
    ws = FusedWorkspace(system.backend, n, dtype, atol_, maxiter,
                        history_ring=_ring_length(system, every, history), gmres_restart=restart)
    ws.set_slots({codes.GM_PTOL: ptol, codes.GM_FACTOR: 1.0, codes.GM_EPS: float(np.finfo(dtype).eps)})
    ws.set_words({codes.GM_LEGACY: int(callback_type == "legacy")})
    av = ws.empty() if general is not None or dinv is not None else None
    ax = ws.empty()
    first_flag = codes.FLAG_DINV if dinv is not None else 0

    def inner(col: int) -> None:
        w = v[col + 1]
        if av is None:
            system.A.apply(v[col], w)
        else:
            system.A.apply(v[col], av)
            if general is not None:
                general.apply(av, w)
        ws.step(codes.GM_ARNOLDI_FIRST, w=w, v0=v[0], av=av, dinv=dinv, flag=first_flag)  # h0, h[col, 0]
        for k in range(col):
            ws.step(codes.GM_ARNOLDI, w=w, vk=v[k], vnext=v[k + 1], flag=k)  # w -= h[col, k] v[k]; h[col, k + 1]
        ws.step(codes.GM_ARNOLDI_LAST, w=w, vcol=v[col])  # h1, rotations, presid, inner tests
        ws.step(codes.GM_SCALE, v=w)  # v[col + 1] = w / h1

    def end_of_cycle() -> None:
        ws.step(codes.GM_SOLVE)
        ws.step(codes.GM_UPDATE_X, x=x, basis=basis)
        system.A.apply(x, ax)
        if general is not None:
            ws.step(codes.GM_RESIDUAL, r=r, b=system.b, ax=ax)
            general.apply(r, v[0])
            ws.step(codes.GM_NORM0, v0=v[0])
        elif dinv is not None:
            ws.step(codes.GM_RESIDUAL, r=r, b=system.b, ax=ax, v0=v[0], dinv=dinv,
                    flag=codes.FLAG_DINV | codes.FLAG_START)  # r, and v[0] = dinv r
        else:
            ws.step(codes.GM_RESIDUAL, r=v[0], b=system.b, ax=ax, flag=codes.FLAG_START)  # v[0] = r
        ws.step(codes.GM_SCALE, v=v[0])

    def inner_batch(start: int, stop: int) -> None:
        for column in range(start, stop):
            inner(column)

    recorded: list[float] = []
    per_iteration = callback_type in ("legacy", "pr_norm")
    batch = 1 if per_iteration else every
    graphs = GraphCache(ws)  # batches start at the same columns every cycle: one graph each
    status, count = codes.RUNNING, 0

    def check() -> None:
        """The host's read of the device status (and, as asked, history and callback)."""
        nonlocal status, count
        done_before = count
        status, count = ws.read()
        if history:
            ws.drain_history(recorded, count)
        if per_iteration and count > done_before:
            callback(ws.slot(codes.GM_PRESID) / bnrm2)

    with solver_stream(system.backend):
        system.precondition(r, v[0])
        ws.step(codes.GM_NORM0, v0=v[0])
        ws.step(codes.GM_SCALE, v=v[0])
        ws.drain_history(recorded, 0)  # the ring's entry 0 (nothing: presid starts at 1)
        for _cycle in range(maxiter):
            # Inner batches, a read after each one that does not reach the restart length: the
            # cycle end follows the last batch without a read (it is frozen unless the inner
            # loop stopped), and a read after the cycle end sees the outer tests.
            col = 0
            while True:
                stop = min(col + batch, restart)
                graphs.run(col, functools.partial(inner_batch, col, stop))
                col = stop
                if col == restart:
                    break
                check()
                if status != codes.RUNNING:
                    break
            if status not in (codes.RUNNING, codes.GM_INNER_DONE):
                break  # a final status, set inside the inner loop
            graphs.run("end of cycle", end_of_cycle)
            check()
            if callback_type == "x" and status != codes.NONFINITE:
                callback(system.output(x))
            if status != codes.RUNNING:
                break
    if status == codes.CONVERGED:
        info = 0
    elif status < 0:
        info = status
    else:  # LIMIT
        info = maxiter
    return system, Outcome(x, info, count, recorded[1 : count + 1] if history else [])


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
    shift = _real_scalar("minres", "shift", shift)
    check = check_bool_option("minres", "check", check)
    system, every, ws = _fused_setup("minres", A, b, x0, rtol, atol, maxiter, M, check_every, history,
                                     callback, maxiter_per_unknown=5)
    dtype, x = system.dtype, system.x
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
    ws.step(codes.MR_UPDATE, x=x, v=v, w1=w1, w2=w2, z=z, dinv=dinv, flag=fused | codes.FLAG_START)  # v = y / beta1

    def iteration() -> None:
        system.A.apply(v, q)
        ws.step(codes.MR_LANCZOS, q=q, v=v, r1=r1)  # y = A v - shift v - (beta/oldb) r1; alfa = v.y
        ws.step(codes.MR_RESIDUAL, r1=r1, r2=r2, y=q, dinv=dinv, flag=residual_flag)  # r1 = r2; r2 = ...; beta
        if general is not None:
            general.apply(r2, z)
            ws.step(codes.MR_RZ, r2=r2, z=z)  # beta = sqrt(r2.z), then the rotation
        ws.step(codes.MR_UPDATE, x=x, v=v, w1=w1, w2=w2, z=z, dinv=dinv, flag=fused)  # w, x, the next v; tests

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

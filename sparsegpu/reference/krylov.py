"""Twin of kernels/krylov.cu: the fused steps of CG, BiCGSTAB and MINRES in NumPy.

``krylov_step(op, n, a, b, c, d, e, f, dinv, flag, sc, st, history)`` takes the kernel's
arguments (vectors by role, the float64 scalar slots ``sc``, the int64 status words ``st``, the
optional residual ``history``) and updates them in place exactly as the kernel does; only the
order of summation in the dot products differs (NumPy's, in float64), so results agree to
rounding.

Op ``DOT`` is the generic dot product (``sc`` is then the one-element output and ``st`` is not
read); CG_UPDATE computes alpha = rho / p.q from ``sc[PQ]``, which the operator's ``spmv_dot``
wrote (:meth:`sparsegpu.formats._base.SparseMatrix.spmv_dot`), updates r and sets
``st[PENDING]``; CG_P then adds alpha p to x (also after that iteration converged) before
updating p, and clears it.

MINRES: after the operator's ``q = A v``, MR_LANCZOS (``q -= shift v + (beta/oldb) r1``,
alfa = v.q), MR_RESIDUAL (``r1 = r2``, ``r2 = q - (alfa/beta) r2``, beta from r2.(dinv r2), or
from MR_RZ after a general preconditioner) whose epilogue runs SciPy's scalar recurrence
(:func:`_minres_rotate`), and MR_UPDATE (w, x += phi w, the next v, x.x) whose epilogue runs
SciPy's stopping tests (:func:`_minres_tests`).
"""

from __future__ import annotations

import math

import numpy as np

# Slots, words, status codes, op codes and flags: the same numbers as kernels/krylov.cu.
ATOL, RHO, ALPHA, BETA, OMEGA, RNORM, RHOTOL, PQ = 0, 1, 2, 3, 4, 5, 6, 7
(MR_BETA1, MR_BETA, MR_OLDB, MR_ALFA, MR_DBAR, MR_EPSLN, MR_OLDEPS, MR_DELTA, MR_PHI, MR_PHIBAR,
 MR_DENOM, MR_CS, MR_SN, MR_ROOT, MR_TNORM2, MR_ANORM, MR_GMAX, MR_GMIN, MR_RHS1, MR_RHS2,
 MR_SHIFT, MR_RTOL, MR_EPS, MR_ATOL, MR_YNORM, MR_ACOND) = range(8, 34)
SLOTS = 34
STATUS, COUNT, MAXITER, HISTCAP, PENDING, MR_ISTOP, WORDS = 0, 1, 2, 3, 4, 5, 6
RUNNING, CONVERGED, HALF_PENDING, CONVERGED_HALF, LIMIT = 0, 1, 2, 3, 4
NONFINITE, RHO_BREAKDOWN, DENOMINATOR_BREAKDOWN, NOT_SYMMETRIC = -1, -10, -11, -12
DOT, CG_UPDATE, CG_RHO, CG_P = 0, 1, 2, 3
BI_START, BI_P, BI_ALPHA, BI_S, BI_OMEGA, BI_XR = 4, 5, 6, 7, 8, 9
MR_LANCZOS, MR_RESIDUAL, MR_RZ, MR_UPDATE = 10, 11, 12, 13
OPS = 14
FLAG_DINV, FLAG_START, FLAG_LATE_RHO = 1, 2, 4
REDUCING_OPS = frozenset({DOT, CG_UPDATE, CG_RHO, BI_START, BI_ALPHA, BI_S, BI_OMEGA, BI_XR,
                          MR_LANCZOS, MR_RESIDUAL, MR_RZ, MR_UPDATE})


def _dot(u: np.ndarray, v: np.ndarray) -> float:
    """u.v accumulated in float64, like the kernel's partial sums."""
    return float(np.dot(u.astype(np.float64, copy=False), v.astype(np.float64, copy=False)))


def _record(history, st, at: int, rnorm: float) -> None:
    if history is not None:
        history[at % int(st[HISTCAP])] = rnorm


def _top_converged(rr: float, sc, st, history) -> bool:
    rnorm = math.sqrt(rr) if rr >= 0 else math.nan
    sc[RNORM] = rnorm
    _record(history, st, int(st[COUNT]), rnorm)
    if not math.isfinite(rr):
        st[STATUS] = NONFINITE
        return True
    if st[COUNT] >= st[MAXITER]:
        st[STATUS] = LIMIT  # info = maxiter; freezes later steps like any other status
        return True
    if rnorm < sc[ATOL]:
        st[STATUS] = CONVERGED
        return True
    return False


def _bicgstab_top(rr: float, rho_new: float, sc, st, history) -> None:
    if _top_converged(rr, sc, st, history):
        return
    if not math.isfinite(rho_new):
        st[STATUS] = NONFINITE
        return
    if abs(rho_new) < sc[RHOTOL]:
        st[STATUS] = RHO_BREAKDOWN
        return
    if st[COUNT] > 0:
        if abs(sc[OMEGA]) < sc[RHOTOL]:
            st[STATUS] = DENOMINATOR_BREAKDOWN
            return
        sc[BETA] = (rho_new / sc[RHO]) * (sc[ALPHA] / sc[OMEGA])
    else:
        sc[BETA] = 0.0
        sc[OMEGA] = 0.0
    sc[RHO] = rho_new


def _minres_rotate(beta2: float, sc, st, history) -> None:
    """SciPy's minres from ``oldb = beta`` to ``rhs2 = -epsln * z``, then Anorm (kernel:
    minres_rotate)."""
    st[COUNT] += 1
    alfa, oldb = float(sc[MR_ALFA]), float(sc[MR_BETA])
    if not (math.isfinite(alfa) and math.isfinite(beta2)):
        st[STATUS] = NONFINITE
        _record(history, st, int(st[COUNT]), math.nan)
        return
    if beta2 < 0:
        st[STATUS] = NOT_SYMMETRIC
        _record(history, st, int(st[COUNT]), math.nan)
        return
    beta, eps = math.sqrt(beta2), float(sc[MR_EPS])
    sc[MR_OLDB] = oldb
    sc[MR_BETA] = beta
    sc[MR_TNORM2] += alfa * alfa + oldb * oldb + beta * beta
    if st[COUNT] == 1 and beta / sc[MR_BETA1] <= 10 * eps:
        st[MR_ISTOP] = -1  # terminate later
    cs, sn, dbar, phibar = float(sc[MR_CS]), float(sc[MR_SN]), float(sc[MR_DBAR]), float(sc[MR_PHIBAR])
    sc[MR_OLDEPS] = sc[MR_EPSLN]
    delta = cs * dbar + sn * alfa
    gbar = sn * dbar - cs * alfa
    epsln = sn * beta
    dbar_next = -cs * beta
    sc[MR_ROOT] = math.sqrt(gbar * gbar + dbar_next * dbar_next)  # numpy.linalg.norm([gbar, dbar])
    gamma = max(math.sqrt(gbar * gbar + beta * beta), eps)
    cs_next, sn_next = gbar / gamma, beta / gamma
    sc[MR_PHI] = cs_next * phibar
    sc[MR_PHIBAR] = sn_next * phibar
    sc[MR_DENOM] = 1.0 / gamma
    sc[MR_DELTA], sc[MR_EPSLN], sc[MR_DBAR] = delta, epsln, dbar_next
    sc[MR_CS], sc[MR_SN] = cs_next, sn_next
    sc[MR_GMAX] = max(sc[MR_GMAX], gamma)
    sc[MR_GMIN] = min(sc[MR_GMIN], gamma)
    z = sc[MR_RHS1] / gamma
    sc[MR_RHS1] = sc[MR_RHS2] - delta * z
    sc[MR_RHS2] = -epsln * z
    sc[MR_ANORM] = math.sqrt(sc[MR_TNORM2])
    sc[RNORM] = sc[MR_PHIBAR]
    _record(history, st, int(st[COUNT]), float(sc[MR_PHIBAR]))


def _minres_tests(xx: float, sc, st) -> None:
    """SciPy's minres norm estimates and stopping tests in its order, then the status (kernel:
    minres_tests)."""
    anorm, eps, rnorm = float(sc[MR_ANORM]), float(sc[MR_EPS]), float(sc[MR_PHIBAR])
    ynorm = math.sqrt(xx) if xx >= 0 else math.nan
    epsx = anorm * ynorm * eps
    test1 = math.inf if ynorm == 0 or anorm == 0 else rnorm / (anorm * ynorm)
    test2 = math.inf if anorm == 0 else sc[MR_ROOT] / anorm
    acond = sc[MR_GMAX] / sc[MR_GMIN]
    sc[MR_YNORM], sc[MR_ACOND] = ynorm, acond
    istop = int(st[MR_ISTOP])
    if istop == 0:
        if 1 + test2 <= 1:
            istop = 2
        if 1 + test1 <= 1:
            istop = 1
        if st[COUNT] >= st[MAXITER]:
            istop = 6
        if acond >= 0.1 / eps:
            istop = 4
        if epsx >= sc[MR_BETA1]:
            istop = 3
        if test2 <= sc[MR_RTOL]:
            istop = 2
        if test1 <= sc[MR_RTOL]:
            istop = 1
        if rnorm <= sc[MR_ATOL]:  # the atol extension (0 by default: SciPy's tests)
            istop = 1
        st[MR_ISTOP] = istop
    if istop != 0:
        st[STATUS] = LIMIT if istop == 6 else CONVERGED


def _safe_quotient(num: float, den: float, sc, slot: int, st) -> None:
    if not (math.isfinite(num) and math.isfinite(den)):
        st[STATUS] = NONFINITE
    elif den == 0.0:
        st[STATUS] = DENOMINATOR_BREAKDOWN
    else:
        sc[slot] = num / den


def _epilogue(op: int, s0: float, s1: float, flag: int, sc, st, history) -> None:
    if op == DOT:
        sc[0] = s0  # sc is the caller's output scalar
    elif op == BI_ALPHA:
        _safe_quotient(sc[RHO], s0, sc, ALPHA, st)
    elif op == CG_UPDATE:
        if not flag & FLAG_START:
            sc[ALPHA] = sc[RHO] / sc[PQ]
            st[COUNT] += 1
            st[PENDING] = 1
        if _top_converged(s0, sc, st, history) or flag & FLAG_LATE_RHO:
            return
        rz = s1 if flag & FLAG_DINV else s0
        if not math.isfinite(rz):
            st[STATUS] = NONFINITE
            return
        sc[BETA] = 0.0 if flag & FLAG_START else rz / sc[RHO]
        sc[RHO] = rz
    elif op == CG_RHO:
        if not math.isfinite(s0):
            st[STATUS] = NONFINITE
            return
        sc[BETA] = s0 / sc[RHO] if st[COUNT] > 0 else 0.0
        sc[RHO] = s0
    elif op == BI_START:
        _bicgstab_top(s0, s1, sc, st, history)
    elif op == BI_S:
        if not math.isfinite(s0):
            st[STATUS] = NONFINITE
            return
        snorm = math.sqrt(s0)
        if snorm < sc[ATOL]:
            sc[RNORM] = snorm
            _record(history, st, int(st[COUNT]) + 1, snorm)
            st[STATUS] = HALF_PENDING
    elif op == BI_OMEGA:
        _safe_quotient(s0, s1, sc, OMEGA, st)
    elif op == BI_XR:
        st[COUNT] += 1
        if st[STATUS] == HALF_PENDING:
            st[STATUS] = CONVERGED_HALF
            return
        _bicgstab_top(s0, s1, sc, st, history)
    elif op == MR_LANCZOS:
        sc[MR_ALFA] = s0
    elif op == MR_RESIDUAL:
        if not flag & FLAG_LATE_RHO:
            _minres_rotate(s1 if flag & FLAG_DINV else s0, sc, st, history)
    elif op == MR_RZ:
        _minres_rotate(s0, sc, st, history)
    elif op == MR_UPDATE:
        if flag & FLAG_START:
            _record(history, st, 0, float(sc[MR_PHIBAR]))  # phibar = beta1 before the first iteration
            return
        _minres_tests(s0, sc, st)


def krylov_step(op, n, a, b, c, d, e, f, dinv, flag, sc, st, history=None) -> None:
    """Twin of ``krylov_step<V, OP>``: one fused step, in place (see kernels/krylov.cu)."""
    status = RUNNING if op == DOT else int(st[STATUS])
    half = op == BI_XR and status == HALF_PENDING
    pending = op == CG_P and bool(st[PENDING])
    if status != RUNNING and not half and not pending:
        return
    vtype = a.dtype.type
    s0 = s1 = 0.0
    if op in (DOT, CG_RHO, BI_ALPHA):
        s0 = _dot(a, b)
    elif op == CG_UPDATE:  # a = r, b = q
        if not flag & FLAG_START:
            rho, pq = float(sc[RHO]), float(sc[PQ])
            if not (math.isfinite(rho) and math.isfinite(pq)):
                st[STATUS] = NONFINITE
                return
            if pq == 0.0:
                st[STATUS] = DENOMINATOR_BREAKDOWN
                return
            a -= vtype(rho / pq) * b
        s0 = _dot(a, a)
        if flag & FLAG_DINV:
            s1 = _dot(a, dinv * a)
    elif op == CG_P:  # a = p, b = z (or r with dinv), c = x
        if pending:
            c += vtype(sc[ALPHA]) * a
            st[PENDING] = 0
        if status == RUNNING:
            z = dinv * b if flag & FLAG_DINV else b
            a[...] = z + vtype(sc[BETA]) * a
    elif op == BI_START:
        s0, s1 = _dot(a, a), _dot(b, a)
    elif op == BI_P:
        a[...] = b + vtype(sc[BETA]) * (a - vtype(sc[OMEGA]) * c)
        if flag & FLAG_DINV:
            d[...] = dinv * a
    elif op == BI_S:
        a -= vtype(sc[ALPHA]) * b
        if flag & FLAG_DINV:
            c[...] = dinv * a
        s0 = _dot(a, a)
    elif op == BI_OMEGA:
        s0, s1 = _dot(a, b), _dot(a, a)
    elif op == BI_XR:
        if half:
            a += vtype(sc[ALPHA]) * c
        else:
            omega = vtype(sc[OMEGA])
            a += vtype(sc[ALPHA]) * c + omega * d
            b -= omega * e
            s0, s1 = _dot(b, b), _dot(f, b)
    elif op == MR_LANCZOS:  # a = q (A v in, y out), b = v, c = r1
        a -= vtype(sc[MR_SHIFT]) * b
        if st[COUNT] > 0:
            a -= vtype(sc[MR_BETA] / sc[MR_OLDB]) * c
        s0 = _dot(b, a)
    elif op == MR_RESIDUAL:  # a = r1, b = r2, c = y
        a[...] = b
        b[...] = c - vtype(sc[MR_ALFA] / sc[MR_BETA]) * b
        s0 = _dot(b, b)
        if flag & FLAG_DINV:
            s1 = _dot(b, dinv * b)
    elif op == MR_RZ:
        s0 = _dot(a, b)
    elif op == MR_UPDATE:  # a = x, b = v, c = w1, d = w2 (in: w2, w), e = z (or r2 with dinv)
        if not flag & FLAG_START:
            w = (b - vtype(sc[MR_OLDEPS]) * c - vtype(sc[MR_DELTA]) * d) * vtype(sc[MR_DENOM])
            c[...] = d
            d[...] = w
            a += vtype(sc[MR_PHI]) * w
            s0 = _dot(a, a)
        z = dinv * e if flag & FLAG_DINV else e
        b[...] = vtype(1.0 / sc[MR_BETA]) * z  # the next iteration's v
    else:
        raise ValueError(f"unknown krylov op {op}")
    if op in REDUCING_OPS:
        _epilogue(op, s0, s1, flag, sc, st, history)

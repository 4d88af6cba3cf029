"""Twin of kernels/krylov.cu: the fused steps of CG and BiCGSTAB in NumPy.

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
"""

from __future__ import annotations

import math

import numpy as np

# Slots, words, status codes, op codes and flags: the same numbers as kernels/krylov.cu.
ATOL, RHO, ALPHA, BETA, OMEGA, RNORM, RHOTOL, PQ, SLOTS = 0, 1, 2, 3, 4, 5, 6, 7, 8
STATUS, COUNT, MAXITER, HISTCAP, PENDING, WORDS = 0, 1, 2, 3, 4, 5
RUNNING, CONVERGED, HALF_PENDING, CONVERGED_HALF, LIMIT = 0, 1, 2, 3, 4
NONFINITE, RHO_BREAKDOWN, DENOMINATOR_BREAKDOWN = -1, -10, -11
DOT, CG_UPDATE, CG_RHO, CG_P = 0, 1, 2, 3
BI_START, BI_P, BI_ALPHA, BI_S, BI_OMEGA, BI_XR = 4, 5, 6, 7, 8, 9
FLAG_DINV, FLAG_START, FLAG_LATE_RHO = 1, 2, 4
REDUCING_OPS = frozenset({DOT, CG_UPDATE, CG_RHO, BI_START, BI_ALPHA, BI_S, BI_OMEGA, BI_XR})


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
    else:
        raise ValueError(f"unknown krylov op {op}")
    if op in REDUCING_OPS:
        _epilogue(op, s0, s1, flag, sc, st, history)

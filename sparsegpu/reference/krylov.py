"""Reference of kernels/krylov.cu: the fused steps of CG, BiCGSTAB, MINRES and GMRES in NumPy,
the tests' oracle for the kernels' arithmetic.

``krylov_step(op, n, a, b, c, d, e, f, dinv, flag, sc, st, history)`` takes the kernel's
arguments (six vectors in the kernel's order, whose roles per op :data:`ROLES` names and
:func:`vector_arguments` fills in; the float64 scalar slots ``sc``, the int64 status words
``st``, the optional residual ``history``) and updates them in place exactly as the kernel does;
only the order of summation in the dot products (NumPy's, in float64) and the kernel's fused
multiply-adds differ, so results agree to rounding.

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

GMRES keeps its Hessenberg matrix, Givens rotations and rhs S in ``sc`` after the fixed slots
(:func:`gmres_slots`, :func:`gmres_arrays`). Per inner iteration col (``st[GM_COLS]``), after
the host's ``w = M A v[col]`` in basis row col + 1: GM_ARNOLDI_FIRST (h0 = ||w||,
h[col, 0] = v[0].w), GM_ARNOLDI for k < col (``w -= h[col, k] v[k]``, h[col, k + 1] =
v[k + 1].w; flag = k), GM_ARNOLDI_LAST (``w -= h[col, col] v[col]``, h1 = ||w||; the rotations
and inner tests: :func:`_gmres_column`), GM_SCALE (``v[col + 1] = w / h1``). Status
GM_INNER_DONE ends the cycle: GM_SOLVE (triangular solve for y), GM_UPDATE_X (``x += V^T y``),
GM_RESIDUAL (``r = b - A x``, outer tests, ptol: :func:`_gmres_cycle_end`), GM_NORM0 / GM_SCALE
(the next v[0]).
"""

from __future__ import annotations

import math

import numpy as np

# Slots, words, status codes, op codes and flags: the same numbers as kernels/krylov.cu.
ATOL, RHO, ALPHA, BETA, OMEGA, RNORM, RHOTOL, PQ = 0, 1, 2, 3, 4, 5, 6, 7
(MR_BETA1, MR_BETA, MR_OLDB, MR_ALFA, MR_DBAR, MR_EPSLN, MR_OLDEPS, MR_DELTA, MR_PHI, MR_PHIBAR,
 MR_DENOM, MR_CS, MR_SN, MR_ROOT, MR_TNORM2, MR_ANORM, MR_GMAX, MR_GMIN, MR_RHS1, MR_RHS2,
 MR_SHIFT, MR_RTOL, MR_EPS, MR_ATOL, MR_YNORM, MR_ACOND) = range(8, 34)
GM_PTOL, GM_FACTOR, GM_PRESID, GM_H0, GM_RECIPROCAL, GM_EPS = range(34, 40)
SLOTS = 40
STATUS, COUNT, MAXITER, HISTCAP, PENDING, MR_ISTOP = 0, 1, 2, 3, 4, 5
GM_RESTART, GM_COLS, GM_CYCLES, GM_BREAKDOWN, GM_LEGACY = 6, 7, 8, 9, 10
WORDS = 11
RUNNING, CONVERGED, HALF_PENDING, CONVERGED_HALF, LIMIT, GM_INNER_DONE = 0, 1, 2, 3, 4, 5
NONFINITE, RHO_BREAKDOWN, DENOMINATOR_BREAKDOWN, NOT_SYMMETRIC = -1, -10, -11, -12
DOT, CG_UPDATE, CG_RHO, CG_P = 0, 1, 2, 3
BI_START, BI_P, BI_ALPHA, BI_S, BI_OMEGA, BI_XR = 4, 5, 6, 7, 8, 9
MR_LANCZOS, MR_RESIDUAL, MR_RZ, MR_UPDATE = 10, 11, 12, 13
GM_NORM0, GM_SCALE, GM_ARNOLDI_FIRST, GM_ARNOLDI, GM_ARNOLDI_LAST = 14, 15, 16, 17, 18
GM_SOLVE, GM_UPDATE_X, GM_RESIDUAL = 19, 20, 21
OPS = 22
FLAG_DINV, FLAG_START, FLAG_LATE_RHO = 1, 2, 4
REDUCING_OPS = frozenset({DOT, CG_UPDATE, CG_RHO, BI_START, BI_ALPHA, BI_S, BI_OMEGA, BI_XR,
                          MR_LANCZOS, MR_RESIDUAL, MR_RZ, MR_UPDATE, GM_NORM0, GM_ARNOLDI_FIRST,
                          GM_ARNOLDI, GM_ARNOLDI_LAST, GM_RESIDUAL})
#: GMRES's steps that run only at the end of a cycle (status GM_INNER_DONE).
CYCLE_END_OPS = frozenset({GM_SOLVE, GM_UPDATE_X, GM_RESIDUAL})
#: The vectors each op takes, by role, in the kernel's argument order (a, b, c, d, e, f); dinv
#: (the Jacobi inverse diagonal) is passed apart. Without a preconditioner the solvers pass one
#: vector in two roles (z is r).
ROLES: dict[int, tuple[str, ...]] = {
    DOT: ("w", "y"),
    CG_UPDATE: ("r", "q"),
    CG_RHO: ("r", "z"),
    CG_P: ("p", "z", "x"),
    BI_START: ("r", "rtilde"),
    BI_P: ("p", "r", "v", "phat"),
    BI_ALPHA: ("rtilde", "v"),
    BI_S: ("r", "v", "shat"),
    BI_OMEGA: ("t", "s"),
    BI_XR: ("x", "r", "phat", "shat", "t", "rtilde"),
    MR_LANCZOS: ("q", "v", "r1"),
    MR_RESIDUAL: ("r1", "r2", "y"),
    MR_RZ: ("r2", "z"),
    MR_UPDATE: ("x", "v", "w1", "w2", "z"),
    GM_NORM0: ("v0",),
    GM_SCALE: ("v",),
    GM_ARNOLDI_FIRST: ("w", "v0", "av"),
    GM_ARNOLDI: ("w", "vk", "vnext"),
    GM_ARNOLDI_LAST: ("w", "vcol"),
    GM_SOLVE: (),
    GM_UPDATE_X: ("x", "basis"),
    GM_RESIDUAL: ("r", "b", "ax", "v0"),
}
VECTOR_ARGUMENTS = 6


def vector_arguments(op: int, **vectors):
    """The six vector arguments of ``krylov_step(op, ...)`` in the kernel's order, from vectors
    named by role (:data:`ROLES`); roles not given are None.

    >>> vector_arguments(CG_P, x="x", p="p", z="z")
    ('p', 'z', 'x', None, None, None)
    """
    roles = ROLES[op]
    unknown = set(vectors) - set(roles)
    if unknown:
        raise TypeError(f"op {op} takes the vectors {roles}, not {sorted(unknown)}")
    named = tuple(vectors.get(role) for role in roles)
    return named + (None,) * (VECTOR_ARGUMENTS - len(named))


# LAPACK's safmin and safmax for float64 (dlartg's scaling thresholds).
_SAFMIN = 2.0 ** -1022
_SAFMAX = 1.0 / _SAFMIN
_RTMIN, _RTMAX = math.sqrt(_SAFMIN), math.sqrt(_SAFMAX / 2)


def gmres_slots(restart: int) -> int:
    """Extra float64 slots GMRES needs after the fixed ones: h, the rotations, S."""
    return restart * (restart + 1) + 2 * restart + restart + 1


def gmres_arrays(sc, st):
    """Views of GMRES's arrays in ``sc``: h (restart x (restart + 1), SciPy's h[col, row]),
    givens (restart x 2: c, s) and S (restart + 1; the triangular solve leaves y in front)."""
    restart = int(st[GM_RESTART])
    start = SLOTS
    h = sc[start : start + restart * (restart + 1)].reshape(restart, restart + 1)
    start += restart * (restart + 1)
    givens = sc[start : start + 2 * restart].reshape(restart, 2)
    start += 2 * restart
    return h, givens, sc[start : start + restart + 1]


def lartg(f: float, g: float) -> tuple[float, float, float]:
    """LAPACK's dlartg (3.10 and later, what SciPy's ``lartg`` calls): (c, s, r) with
    c f + s g = r, -s f + c g = 0 (kernel: lartg)."""
    f1, g1 = abs(f), abs(g)
    if g == 0:
        return 1.0, 0.0, f
    if f == 0:
        return 0.0, math.copysign(1.0, g), g1
    if _RTMIN < f1 < _RTMAX and _RTMIN < g1 < _RTMAX:
        d = math.sqrt(f * f + g * g)
        r = math.copysign(d, f)
        return f1 / d, g / r, r
    u = min(_SAFMAX, max(_SAFMIN, f1, g1))
    fs, gs = f / u, g / u
    d = math.sqrt(fs * fs + gs * gs)
    r = math.copysign(d, f)
    return abs(fs) / d, gs / r, r * u


def cg_step_length(sc: np.ndarray, st: np.ndarray) -> float | None:
    """CG's step ``rho / p.q`` from the scalar slots, or None after setting the status word to
    the breakdown that stops it (a non-finite rho or p.q; p.q == 0)."""
    rho, pq = float(sc[RHO]), float(sc[PQ])
    if not (math.isfinite(rho) and math.isfinite(pq)):
        st[STATUS] = NONFINITE
        return None
    if pq == 0.0:
        st[STATUS] = DENOMINATOR_BREAKDOWN
        return None
    return rho / pq


def dot(u: np.ndarray, v: np.ndarray) -> float:
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


def _gmres_cycle_start(vv: float, sc, st) -> None:
    """A cycle's start from vv = v[0].v[0] (kernel: gmres_cycle_start)."""
    if not math.isfinite(vv):
        st[STATUS] = NONFINITE
        return
    norm = math.sqrt(vv)
    if norm == 0:
        st[STATUS] = DENOMINATOR_BREAKDOWN  # M r = 0: SciPy would divide by zero
        return
    _, _, S = gmres_arrays(sc, st)
    S[:] = 0.0
    S[0] = norm
    sc[GM_RECIPROCAL] = 1.0 / norm
    st[GM_COLS] = 0
    st[GM_BREAKDOWN] = 0


def _gmres_column(h1: float, sc, st, history) -> None:
    """SciPy's inner iteration after h1 = ||w||: exact-solution test, rotations, S, presid,
    inner tests (kernel: gmres_column)."""
    h, givens, S = gmres_arrays(sc, st)
    col, restart = int(st[GM_COLS]), int(st[GM_RESTART])
    h0 = float(sc[GM_H0])
    if not (math.isfinite(h0) and math.isfinite(h1)):
        st[STATUS] = NONFINITE
        return
    breakdown = h1 <= sc[GM_EPS] * h0  # exact solution indicator
    h[col, col + 1] = 0.0 if breakdown else h1
    if breakdown:
        st[GM_BREAKDOWN] = 1
    else:
        sc[GM_RECIPROCAL] = 1.0 / h1
    for k in range(col):
        c, s = float(givens[k, 0]), float(givens[k, 1])
        n0, n1 = float(h[col, k]), float(h[col, k + 1])
        h[col, k] = c * n0 + s * n1
        h[col, k + 1] = -s * n0 + c * n1
    c, s, mag = lartg(float(h[col, col]), float(h[col, col + 1]))
    givens[col] = c, s
    h[col, col], h[col, col + 1] = mag, 0.0
    tmp = -s * float(S[col])
    S[col], S[col + 1] = c * float(S[col]), tmp
    presid = abs(tmp)
    sc[GM_PRESID] = presid
    st[COUNT] += 1
    st[GM_COLS] = col + 1
    _record(history, st, int(st[COUNT]), presid)
    if ((st[GM_LEGACY] and st[COUNT] == st[MAXITER]) or presid <= sc[GM_PTOL] or breakdown
            or col + 1 == restart):
        st[STATUS] = GM_INNER_DONE


def _gmres_solve(sc, st) -> None:
    """SciPy's back substitution for y, in place of S; a non-finite y is a breakdown
    (kernel: gmres_solve)."""
    h, _, y = gmres_arrays(sc, st)
    col = int(st[GM_COLS]) - 1
    if h[col, col] == 0:
        y[col] = 0.0
    for k in range(col, 0, -1):
        if y[k] != 0:
            y[k] /= h[k, k]
            y[:k] -= y[k] * h[k, :k]
    if y[0] != 0:
        y[0] /= h[0, 0]
    if not np.isfinite(y[: col + 1]).all():
        st[STATUS] = NONFINITE


def _gmres_cycle_end(rr: float, sc, st) -> None:
    """SciPy's outer tests and gh-8400's ptol update (kernel: gmres_cycle_end)."""
    rnorm = math.sqrt(rr) if rr >= 0 else math.nan
    atol = float(sc[ATOL])
    sc[RNORM] = rnorm
    if not math.isfinite(rr):
        st[STATUS] = NONFINITE
        return
    st[GM_CYCLES] += 1
    if st[GM_LEGACY] and st[COUNT] == st[MAXITER]:
        st[STATUS] = CONVERGED if rnorm <= atol else LIMIT
        return
    if rnorm <= atol:
        st[STATUS] = CONVERGED
        return
    if st[GM_BREAKDOWN]:
        st[STATUS] = LIMIT  # SciPy: info = maxiter
        return
    presid, factor = float(sc[GM_PRESID]), float(sc[GM_FACTOR])
    factor = max(float(sc[GM_EPS]), 0.25 * factor) if presid <= sc[GM_PTOL] else min(1.0, 1.5 * factor)
    sc[GM_FACTOR] = factor
    sc[GM_PTOL] = presid * min(factor, atol / rnorm)
    st[STATUS] = LIMIT if st[GM_CYCLES] >= st[MAXITER] else RUNNING


def _safe_quotient(num: float, den: float, sc, slot: int, st) -> None:
    if not (math.isfinite(num) and math.isfinite(den)):
        st[STATUS] = NONFINITE
    elif den == 0.0:
        st[STATUS] = DENOMINATOR_BREAKDOWN
    else:
        sc[slot] = num / den


def epilogue(op: int, s0: float, s1: float, flag: int, sc, st, history) -> None:
    """The scalar epilogue of a reducing step (kernels/krylov.cu ``epilogue<OP>``), given its
    reduced sums s0 and s1: recurrences, stopping and breakdown tests, status words."""
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
    elif op == GM_NORM0:
        _gmres_cycle_start(s0, sc, st)
    elif op == GM_ARNOLDI_FIRST:
        h, _, _ = gmres_arrays(sc, st)
        sc[GM_H0] = math.sqrt(s0) if s0 >= 0 else math.nan
        h[int(st[GM_COLS]), 0] = s1
    elif op == GM_ARNOLDI:
        h, _, _ = gmres_arrays(sc, st)
        h[int(st[GM_COLS]), flag + 1] = s0
    elif op == GM_ARNOLDI_LAST:
        _gmres_column(math.sqrt(s0) if s0 >= 0 else math.nan, sc, st, history)
    elif op == GM_RESIDUAL:
        _gmres_cycle_end(s0, sc, st)
        if flag & FLAG_START and st[STATUS] == RUNNING:
            _gmres_cycle_start(s1 if flag & FLAG_DINV else s0, sc, st)


def krylov_step(op, n, a, b, c, d, e, f, dinv, flag, sc, st, history=None) -> None:
    """Reference of ``krylov_step<V, OP>``: one fused step, in place (see kernels/krylov.cu)."""
    status = RUNNING if op == DOT else int(st[STATUS])
    half = op == BI_XR and status == HALF_PENDING
    pending = op == CG_P and bool(st[PENDING])
    if op in CYCLE_END_OPS:
        if status != GM_INNER_DONE:
            return
    elif status != RUNNING and not half and not pending:
        return
    vtype = a.dtype.type if a is not None else np.float64  # GM_SOLVE has no vectors
    s0 = s1 = 0.0
    if op in (DOT, CG_RHO, BI_ALPHA):
        s0 = dot(a, b)
    elif op == CG_UPDATE:  # a = r, b = q
        if not flag & FLAG_START:
            step = cg_step_length(sc, st)
            if step is None:
                return
            a -= vtype(step) * b
        s0 = dot(a, a)
        if flag & FLAG_DINV:
            s1 = dot(a, dinv * a)
    elif op == CG_P:  # a = p, b = z (or r with dinv), c = x
        if pending:
            c += vtype(sc[ALPHA]) * a
            st[PENDING] = 0
        if status == RUNNING:
            z = dinv * b if flag & FLAG_DINV else b
            a[...] = z + vtype(sc[BETA]) * a
    elif op == BI_START:
        s0, s1 = dot(a, a), dot(b, a)
    elif op == BI_P:
        a[...] = b + vtype(sc[BETA]) * (a - vtype(sc[OMEGA]) * c)
        if flag & FLAG_DINV:
            d[...] = dinv * a
    elif op == BI_S:
        a -= vtype(sc[ALPHA]) * b
        if flag & FLAG_DINV:
            c[...] = dinv * a
        s0 = dot(a, a)
    elif op == BI_OMEGA:
        s0, s1 = dot(a, b), dot(a, a)
    elif op == BI_XR:
        if half:
            a += vtype(sc[ALPHA]) * c
        else:
            omega = vtype(sc[OMEGA])
            a += vtype(sc[ALPHA]) * c + omega * d
            b -= omega * e
            s0, s1 = dot(b, b), dot(f, b)
    elif op == MR_LANCZOS:  # a = q (A v in, y out), b = v, c = r1
        a -= vtype(sc[MR_SHIFT]) * b
        if st[COUNT] > 0:
            a -= vtype(sc[MR_BETA] / sc[MR_OLDB]) * c
        s0 = dot(b, a)
    elif op == MR_RESIDUAL:  # a = r1, b = r2, c = y
        a[...] = b
        b[...] = c - vtype(sc[MR_ALFA] / sc[MR_BETA]) * b
        s0 = dot(b, b)
        if flag & FLAG_DINV:
            s1 = dot(b, dinv * b)
    elif op == MR_RZ:
        s0 = dot(a, b)
    elif op == MR_UPDATE:  # a = x, b = v, c = w1, d = w2 (in: w2, w), e = z (or r2 with dinv)
        if not flag & FLAG_START:
            w = (b - vtype(sc[MR_OLDEPS]) * c - vtype(sc[MR_DELTA]) * d) * vtype(sc[MR_DENOM])
            c[...] = d
            d[...] = w
            a += vtype(sc[MR_PHI]) * w
            s0 = dot(a, a)
        z = dinv * e if flag & FLAG_DINV else e
        b[...] = vtype(1.0 / sc[MR_BETA]) * z  # the next iteration's v
    elif op == GM_NORM0:  # a = v[0]
        s0 = dot(a, a)
    elif op == GM_SCALE:  # a = v[col + 1] (or v[0])
        a *= vtype(sc[GM_RECIPROCAL])
    elif op == GM_ARNOLDI_FIRST:  # a = w, b = v[0], c = A v (with dinv)
        if flag & FLAG_DINV:
            np.multiply(dinv, c, out=a)
        s0, s1 = dot(a, a), dot(b, a)
    elif op == GM_ARNOLDI:  # a = w, b = v[k], c = v[k + 1]; flag = k
        h, _, _ = gmres_arrays(sc, st)
        a -= vtype(h[int(st[GM_COLS]), flag]) * b
        s0 = dot(c, a)
    elif op == GM_ARNOLDI_LAST:  # a = w, b = v[col]
        h, _, _ = gmres_arrays(sc, st)
        col = int(st[GM_COLS])
        a -= vtype(h[col, col]) * b
        s0 = dot(a, a)
    elif op == GM_SOLVE:
        _gmres_solve(sc, st)
    elif op == GM_UPDATE_X:  # a = x, b = the basis (restart + 1, n)
        _, _, y = gmres_arrays(sc, st)
        total = np.zeros(n, np.float64)
        for k in range(int(st[GM_COLS])):
            total += y[k] * b[k].astype(np.float64)
        a[...] = (a.astype(np.float64) + total).astype(vtype)
    elif op == GM_RESIDUAL:  # a = r, b = b, c = A x, d = v[0] (with dinv)
        np.subtract(b, c, out=a)
        s0 = dot(a, a)
        if flag & FLAG_DINV:
            np.multiply(dinv, a, out=d)
            s1 = dot(d, d)
    else:
        raise ValueError(f"unknown krylov op {op}")
    if op in REDUCING_OPS:
        epilogue(op, s0, s1, flag, sc, st, history)

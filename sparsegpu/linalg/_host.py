"""The fused Krylov steps on the CPU backend: plain in-place NumPy vector operations.

CG's two steps per iteration, the hot ones, run here with one preallocated scratch vector
(no temporaries, as SciPy's ``cg`` updates in place); the rest run the reference steps of
:mod:`sparsegpu.reference.krylov`, which cost no more than SciPy's own loops. Both share the
reference's scalar epilogue, so statuses, iteration counts and history are the reference's.
The vector arithmetic is the reference's too, operation for operation (``z + beta p`` is
``beta p + z``: addition commutes), so results are bitwise the reference's.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sparsegpu.reference import krylov as reference
from sparsegpu.reference.krylov import (
    ALPHA,
    BETA,
    CG_P,
    CG_UPDATE,
    FLAG_DINV,
    FLAG_START,
    PENDING,
    RUNNING,
    STATUS,
    cg_step_length,
)


def _cg_update(r: Any, q: Any, dinv: Any, flag: int, sc: Any, st: Any, history: Any, scratch: Any) -> None:
    """r -= (rho / p.q) q; then r.r (and r.dinv.r) into the epilogue (reference: CG_UPDATE)."""
    if st[STATUS] != RUNNING:
        return
    vtype = r.dtype.type
    if not flag & FLAG_START:
        step = cg_step_length(sc, st)
        if step is None:
            return
        np.multiply(q, vtype(step), out=scratch)
        np.subtract(r, scratch, out=r)
    s0 = reference.dot(r, r)
    s1 = 0.0
    if flag & FLAG_DINV:
        np.multiply(dinv, r, out=scratch)
        s1 = reference.dot(r, scratch)
    reference.epilogue(CG_UPDATE, s0, s1, flag, sc, st, history)


def _cg_p(p: Any, z: Any, x: Any, dinv: Any, flag: int, sc: Any, st: Any, scratch: Any) -> None:
    """x += alpha p while an update is pending; p = z + beta p while running (reference: CG_P)."""
    running, pending = st[STATUS] == RUNNING, bool(st[PENDING])
    vtype = p.dtype.type
    if pending:
        np.multiply(p, vtype(sc[ALPHA]), out=scratch)
        np.add(x, scratch, out=x)
        st[PENDING] = 0
    if running:
        if flag & FLAG_DINV:
            z = np.multiply(dinv, z, out=scratch)
        np.multiply(p, vtype(sc[BETA]), out=p)
        np.add(p, z, out=p)


def host_step(op: int, n: int, vectors: tuple, dinv: Any, flag: int, sc: Any, st: Any, history: Any,
              scratch: Any) -> None:
    """One fused step on NumPy arrays: ``vectors`` in the kernel's order, ``scratch`` a vector
    of n values of the working dtype that the step may overwrite."""
    if op == CG_UPDATE:
        _cg_update(vectors[0], vectors[1], dinv, flag, sc, st, history, scratch)
    elif op == CG_P:
        _cg_p(vectors[0], vectors[1], vectors[2], dinv, flag, sc, st, scratch)
    else:
        reference.krylov_step(op, n, *vectors, dinv, flag, sc, st, history)

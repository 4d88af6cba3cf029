"""Krylov solvers over a :class:`DistributedCSR`, with SciPy's signatures.

Each iteration runs one distributed product and the vector updates rank-locally (CG's fused
on the GPU, see ``_updates.py``); the dot
products reduce in rank order (:meth:`DistributedVector.dot`). CG's two dots of the residual
(its norm for the stopping test, and r . z) share one reduction and one read back, so a CG
iteration waits on the host twice, where SciPy's reads three dots. Every rank takes the same
decisions (the same iteration count, the same stop) and a run repeats bit for bit. The
distributed dots round differently from the one-process solver's, so iteration counts may
differ from it by one or so on well-conditioned systems.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from sparsegpu import _validate
from sparsegpu.linalg import block_jacobi as local_block_jacobi
from sparsegpu.distributed._comm import raise_collectively
from sparsegpu.distributed._updates import update_direction, update_iterate
from sparsegpu.distributed.matrix import DistributedCSR
from sparsegpu.distributed.vector import DistributedVector, dots

__all__ = ["bicgstab", "block_jacobi", "cg", "gmres"]


def _as_vector(name: str, v: Any, A: DistributedCSR) -> DistributedVector:
    """``v`` split by A's rows: a DistributedVector as it is, a global array split here."""
    if isinstance(v, DistributedVector):
        if not v.partition.same_as(A.row_partition):
            raise ValueError(f"{name} is split by a different partition than the matrix's rows")
        return v
    return DistributedVector.from_global(v, A.row_partition, backend=A.backend)


def _preconditioner(M: Any, A: DistributedCSR) -> Callable[[DistributedVector], DistributedVector]:
    """``z = M r`` as a function: None (identity), "jacobi" (the inverse diagonal), or a callable."""
    if M is None:
        return lambda r: r
    if isinstance(M, str) and M == "jacobi":
        diagonal = A.diagonal()
        if np.any(diagonal.local == 0):
            raise ValueError("M='jacobi' needs a nonzero diagonal; a rank holds a zero diagonal entry")
        inverse = 1.0 / diagonal
        return lambda r: inverse * r
    if callable(M):
        return M
    raise TypeError(f"M must be None, 'jacobi' or a callable taking a DistributedVector, got {type(M).__name__}")


def _start(name: str, A: Any, b: Any, x0: Any, rtol: Any, atol: Any, maxiter: Any, M: Any) -> tuple | None:
    """The checked arguments and the starting state (x, r, stopping limit, maxiter, the
    preconditioner), or None when ``b`` is zero (x = 0 solves it)."""
    if not isinstance(A, DistributedCSR):
        raise TypeError(f"A must be a DistributedCSR, got {type(A).__name__}")
    if A.shape[0] != A.shape[1]:
        raise ValueError(f"{name} needs a square matrix, got shape {A.shape}")
    rtol = _validate.check_real_finite("rtol", rtol, minimum=0.0)
    atol = _validate.check_real_finite("atol", atol, minimum=0.0)
    maxiter = 10 * A.shape[0] if maxiter is None else _validate.check_int("maxiter", maxiter, minimum=1)
    b = _as_vector("b", b, A)
    precondition = _preconditioner(M, A)
    b_norm = b.norm()
    if b_norm == 0:
        return None
    dtype = np.result_type(A.dtype, b.dtype)
    if x0 is None:
        x, r = b.zeros_like().astype(dtype), b.astype(dtype)
    else:
        x = _as_vector("x0", x0, A).astype(dtype)
        r = b - A @ x
    return x, r, max(rtol * b_norm, atol), maxiter, precondition


def _residual_dots(r: DistributedVector, z: DistributedVector) -> tuple[Any, Any]:
    """(r . r, r . z) with one reduction between ranks (one when z is r): the two reads back
    of an iteration's start made one."""
    if z is r:
        rr = r.dot(r)
        return rr, rr
    rr, rho = dots([(r, r), (r, z)])
    return rr, rho


def _product(A: DistributedCSR, p: DistributedVector, q: DistributedVector | None) -> DistributedVector:
    """``A @ p``, into ``q`` (the last iteration's product) when it can take it: no allocation."""
    if q is None or p.dtype != A.dtype:
        return A @ p
    return A.matvec(p, out=q)


def cg(A: DistributedCSR, b: Any, x0: Any = None, *, rtol: float = 1e-5, atol: float = 0.0,
       maxiter: int | None = None, M: Any = None, callback: Callable | None = None) -> tuple[DistributedVector, int]:
    """Conjugate gradients for a symmetric (Hermitian) positive definite distributed matrix, as
    ``scipy.sparse.linalg.cg`` (collective).

    Parameters
    ----------
    A : DistributedCSR
        Square, symmetric positive definite.
    b : DistributedVector or ndarray
        Split by ``A``'s rows, or a global array present on every rank.
    x0 : DistributedVector or ndarray, optional
        Starting guess (default zeros).
    rtol, atol : float, optional
        Stop once ``||r|| <= max(rtol * ||b||, atol)`` (default 1e-5 and 0).
    maxiter : int, optional
        Iterations at most (default ``10 * n``).
    M : None, "jacobi" or callable, optional
        The preconditioner: the inverse of A's diagonal, or a function from a residual
        DistributedVector to the preconditioned one.
    callback : callable, optional
        ``callback(x)`` after each iteration, with the current DistributedVector iterate.

    Returns
    -------
    x : DistributedVector
        The solution, split by ``A``'s rows (``x.gather()`` collects it, original order).
    info : int
        0 when converged, else the number of iterations run.

    Raises
    ------
    TypeError
        ``A`` not a DistributedCSR; a bad ``M``.
    ValueError
        ``A`` not square; ``b`` or ``x0`` of the wrong length or partition; bad tolerances.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from sparsegpu.distributed import DistributedCSR, world
    >>> from sparsegpu.distributed.solvers import cg
    >>> S = sp.diags([-1.0, 2.5, -1.0], [-1, 0, 1], shape=(60, 60), format="csr")
    >>> A = DistributedCSR.from_scipy(S, world(), backend="cpu")
    >>> x, info = cg(A, np.ones(60), rtol=1e-10)
    >>> info, bool(np.linalg.norm(S @ x.allgather() - 1) < 1e-9)
    (0, True)
    """
    start = _start("cg", A, b, x0, rtol, atol, maxiter, M)
    if start is None:
        return _as_vector("b", b, A).copy(), 0
    x, r, limit, maxiter, precondition = start
    p = q = rho_previous = None
    for _ in range(maxiter):
        z = precondition(r)
        rr, rho = _residual_dots(r, z)
        if np.float64(np.sqrt(np.real(rr))) <= limit:  # r.norm(), from the same dot
            return x, 0
        if p is None:
            p = z.copy()
        else:
            update_direction(p, z, rho / rho_previous)
        q = _product(A, p, q)
        alpha = rho / p.dot(q)
        update_iterate(x, r, p, q, alpha)
        rho_previous = rho
        if callback is not None:
            callback(x)
    return x, 0 if r.norm() <= limit else maxiter


def bicgstab(A: DistributedCSR, b: Any, x0: Any = None, *, rtol: float = 1e-5, atol: float = 0.0,
             maxiter: int | None = None, M: Any = None,
             callback: Callable | None = None) -> tuple[DistributedVector, int]:
    """BiCGSTAB for a general square distributed matrix, as ``scipy.sparse.linalg.bicgstab``
    (collective; right preconditioning, SciPy's iteration and stopping test).

    Parameters
    ----------
    A : DistributedCSR
        Square.
    b, x0, rtol, atol, maxiter, M, callback
        As for :func:`cg`.

    Returns
    -------
    x : DistributedVector
        The solution, split by ``A``'s rows.
    info : int
        0 when converged; the iterations run when ``maxiter`` ran out; -10 on a breakdown
        (``rho`` or ``omega`` exactly 0), as SciPy.

    Raises
    ------
    TypeError, ValueError
        As for :func:`cg`.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from sparsegpu.distributed import DistributedCSR, world
    >>> from sparsegpu.distributed.solvers import bicgstab
    >>> S = sp.diags([-1.0, 3.0, -0.5], [-1, 0, 1], shape=(60, 60), format="csr")
    >>> x, info = bicgstab(DistributedCSR.from_scipy(S, world(), backend="cpu"), np.ones(60), rtol=1e-10)
    >>> info, bool(np.linalg.norm(S @ x.allgather() - 1) < 1e-9)
    (0, True)
    """
    start = _start("bicgstab", A, b, x0, rtol, atol, maxiter, M)
    if start is None:
        return _as_vector("b", b, A).copy(), 0
    x, r, limit, maxiter, precondition = start
    shadow = r.copy()
    p = v = None
    rho_previous = alpha = omega = None
    for iteration in range(maxiter):
        if r.norm() <= limit:
            return x, 0
        rho = shadow.dot(r)
        if rho == 0:
            return x, -10
        if p is None:
            p = r.copy()
        else:
            if omega == 0:
                return x, -10
            p.axpy(-omega, v)
            p.scale((rho / rho_previous) * (alpha / omega))
            p += r
        p_hat = precondition(p)
        v = A @ p_hat
        alpha = rho / shadow.dot(v)
        s = r.copy().axpy(-alpha, v)
        if s.norm() <= limit:
            x.axpy(alpha, p_hat)
            return x, 0
        s_hat = precondition(s)
        t = A @ s_hat
        omega = t.dot(s) / t.dot(t)
        x.axpy(alpha, p_hat)
        x.axpy(omega, s_hat)
        r = s.axpy(-omega, t)
        rho_previous = rho
        if callback is not None:
            callback(x)
    return x, 0 if r.norm() <= limit else maxiter


def block_jacobi(A: DistributedCSR, block_size: int) -> Callable[[DistributedVector], DistributedVector]:
    """The block-Jacobi preconditioner of ``A`` with blocks inside each rank: each rank's
    diagonal block (its rows and own columns) cut into blocks of ``block_size`` rows, inverted
    once (:func:`sparsegpu.linalg.block_jacobi`); ``M(r)`` applies them with no communication.

    Parameters
    ----------
    A : DistributedCSR
        Square, with nonsingular diagonal blocks.
    block_size : int
        Rows per block, at least 1 (a rank's last block may be smaller).

    Returns
    -------
    callable
        ``M(r) -> DistributedVector``, for the solvers' ``M``.

    Raises
    ------
    TypeError, ValueError
        As :func:`sparsegpu.linalg.block_jacobi`, on every rank when any rank's blocks fail.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from sparsegpu.distributed import DistributedCSR, world
    >>> S = sp.diags([-1.0, 4.0, -1.0], [-1, 0, 1], shape=(40, 40), format="csr")
    >>> A = DistributedCSR.from_scipy(S, world(), backend="cpu")
    >>> x, info = cg(A, np.ones(40), rtol=1e-10, M=block_jacobi(A, 4))
    >>> info, bool(np.linalg.norm(S @ x.allgather() - 1) < 1e-9)
    (0, True)
    """
    if not isinstance(A, DistributedCSR):
        raise TypeError(f"A must be a DistributedCSR, got {type(A).__name__}")
    operator, error = None, None
    try:
        if A.row_partition.local_size:
            operator = local_block_jacobi(A.local_block, block_size)
    except (TypeError, ValueError) as caught:
        error = caught
    raise_collectively(A.comm, error)
    partition = A.row_partition
    return lambda r: DistributedVector(r.local.copy() if operator is None else operator @ r.local, partition)


def gmres(A: DistributedCSR, b: Any, x0: Any = None, *, rtol: float = 1e-5, atol: float = 0.0,
          restart: int | None = None, maxiter: int | None = None, M: Any = None,
          callback: Callable | None = None) -> tuple[DistributedVector, int]:
    """Restarted GMRES with left preconditioning, as ``scipy.sparse.linalg.gmres`` (collective).

    Each cycle builds an Arnoldi basis of ``restart`` vectors by modified Gram-Schmidt (dots in
    rank order) and solves the small least-squares problem on every rank alike; the cycle ends
    early when the preconditioned residual estimate meets the tolerance scaled to it, and the
    solve ends when the true residual ``||b - A x||`` meets ``max(rtol * ||b||, atol)``.

    Parameters
    ----------
    A, b, x0, rtol, atol, M
        As for :func:`cg`.
    restart : int, optional
        Basis vectors per cycle, at least 1 (default ``min(20, n)``).
    maxiter : int, optional
        Cycles at most, at least 1 (default ``10 * n``).
    callback : callable, optional
        ``callback(x)`` after each cycle.

    Returns
    -------
    x : DistributedVector
        The solution, split by ``A``'s rows.
    info : int
        0 when converged, else the cycles run.

    Raises
    ------
    TypeError, ValueError
        As for :func:`cg`; ``restart`` < 1.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from sparsegpu.distributed import DistributedCSR, world
    >>> S = sp.diags([-1.3, 2.5, -0.7], [-1, 0, 1], shape=(40, 40), format="csr")
    >>> x, info = gmres(DistributedCSR.from_scipy(S, world(), backend="cpu"), np.ones(40), rtol=1e-10)
    >>> info, bool(np.linalg.norm(S @ x.allgather() - 1) < 1e-9 * np.sqrt(40))
    (0, True)
    """
    n = A.shape[0] if isinstance(A, DistributedCSR) else 0
    restart = min(20, max(n, 1)) if restart is None else _validate.check_int("restart", restart, minimum=1)
    maxiter = 10 * max(n, 1) if maxiter is None else _validate.check_int("maxiter", maxiter, minimum=1)
    start = _start("gmres", A, b, x0, rtol, atol, maxiter, M)
    if start is None:
        return _as_vector("b", b, A).copy(), 0
    x, r, limit, _, precondition = start
    b = _as_vector("b", b, A)
    for cycle in range(maxiter):
        r_norm = r.norm()
        if r_norm <= limit:
            return x, 0
        z = precondition(r)
        beta = z.norm()
        if beta == 0:
            return x, 0
        basis = [z.copy().scale(1.0 / beta)]
        steps = _arnoldi(A, precondition, basis, beta, restart, limit * beta / r_norm)
        x.axpy(1.0, _combination(basis, steps))
        r = b - A @ x
        if callback is not None:
            callback(x)
    return x, 0 if r.norm() <= limit else maxiter


def _arnoldi(A: DistributedCSR, precondition: Callable, basis: list[DistributedVector], beta: float, restart: int,
             tolerance: float) -> np.ndarray:
    """Extend ``basis`` (its first vector given) by Arnoldi steps of ``M A`` until ``restart``
    vectors or the residual estimate meets ``tolerance``; return the least-squares coefficients
    of the basis vectors (the same on every rank: every number comes from rank-ordered dots)."""
    dtype = np.result_type(basis[0].dtype, np.float64)
    H = np.zeros((restart + 1, restart), dtype=dtype)
    for k in range(restart):
        w = precondition(A @ basis[k])
        for j in range(k + 1):  # modified Gram-Schmidt
            H[j, k] = basis[j].dot(w)
            w.axpy(-H[j, k], basis[j])
        H[k + 1, k] = w.norm()
        e1 = np.zeros(k + 2, dtype=dtype)
        e1[0] = beta
        y, *_ = np.linalg.lstsq(H[:k + 2, :k + 1], e1, rcond=None)
        estimate = float(np.linalg.norm(H[:k + 2, :k + 1] @ y - e1))
        if H[k + 1, k] == 0 or estimate <= tolerance or k + 1 == restart:
            return y
        basis.append(w.scale(1.0 / H[k + 1, k]))
    return np.zeros(0)


def _combination(basis: list[DistributedVector], coefficients: np.ndarray) -> DistributedVector:
    """sum_k coefficients[k] * basis[k], added in k order."""
    total = basis[0].zeros_like().astype(np.result_type(basis[0].dtype, coefficients.dtype))
    for vector, c in zip(basis, coefficients):
        total.axpy(c, vector)
    return total

"""The public solvers (SciPy's signatures) and :func:`solve` with its result object."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from sparsegpu.linalg import _krylov

_SHARED_PARAMETERS = """A : SparseMatrix, scipy or cupyx sparse matrix, array or LinearOperator
        A square real (float32 or float64) operator: a sparsegpu matrix, a scipy or cupyx sparse
        matrix (converted once), a dense array, a ``LinearOperator`` or any object with
        ``shape`` and ``matvec``. A GPU matrix solves on the GPU, whatever ``b`` is.
    b : numpy.ndarray or cupy.ndarray
        The right-hand side, of length n (or shape (n, 1)), finite; x comes back as the same
        kind of array. Never written.
    x0 : array, optional
        The initial guess (copied, never written); zeros by default.
    rtol, atol : float, optional
        Real, finite, non-negative tolerances: the solve stops once
        ``norm(b - A x) < max(rtol * norm(b), atol)`` by the recurrence."""

_SHARED_OPTIONS = """M : operator, optional
        A preconditioner approximating A^-1, of A's shape: a matrix, a ``LinearOperator``, or
        :func:`~sparsegpu.linalg.jacobi` (fused into the vector steps) or
        :func:`~sparsegpu.linalg.block_jacobi`.
    callback : callable, optional
        Called with the current x after every iteration (on the GPU: one synchronisation and,
        for a NumPy b, a download of x per iteration).
    check_every : int, optional
        Iterations between two reads of the solver's status, at least 1 (default 16 on the GPU,
        1 on the CPU). It changes speed, never the result: iterations launched after the solve
        ended are frozen no-ops (on the GPU the reads trail the launches by one batch)."""

_SHARED_RETURNS = """Returns
    -------
    x : numpy.ndarray or cupy.ndarray
        The solution, the kind of array b is.
    info : int
        0 converged; > 0 the iteration limit was reached (info = maxiter); < 0 a breakdown:
        -1 a NaN or infinity appeared, -10 rho breakdown, -11 a zero denominator (p.Ap, r~.v,
        omega, or M r = 0 in GMRES). x is then the last finite iterate, never silently NaN.

    Raises
    ------
    TypeError
        A, M, b or x0 is not an operator or array, a dtype is complex, or an integer option
        is not an integer.
    ValueError
        A is not square, b, x0 or M has the wrong shape, b or x0 holds NaN or infinity, a
        tolerance is negative or not finite, maxiter, check_every or restart is below 1, or a
        workspace sized from them would not fit in memory."""


def _fill(function: Callable) -> Callable:
    """Put the shared numpydoc sections into ``function``'s docstring."""
    function.__doc__ = (function.__doc__ or "").replace("{parameters}", _SHARED_PARAMETERS).replace(
        "{options}", _SHARED_OPTIONS).replace("{returns}", _SHARED_RETURNS)
    return function


def _public(outcome: tuple[Any, _krylov.Outcome]) -> tuple[Any, int]:
    system, result = outcome
    return system.output(result.x), int(result.info)


def cg(A: Any, b: Any, x0: Any = None, *, rtol: float = 1e-5, atol: float = 0.0,
       maxiter: int | None = None, M: Any = None, callback: Callable | None = None,
       check_every: int | None = None) -> tuple[Any, int]:
    """Conjugate gradients for symmetric positive definite ``A``, as ``scipy.sparse.linalg.cg``.

    Parameters
    ----------
    {parameters}
    maxiter : int, optional
        Iterations at most, at least 1 (default ``10 * n``).
    {options}

    {returns}

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from sparsegpu.linalg import cg
    >>> A = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(50, 50), format="csr")
    >>> x, info = cg(A, np.ones(50), rtol=1e-8)
    >>> info, bool(np.linalg.norm(A @ x - 1) < 1e-8 * np.sqrt(50))
    (0, True)
    """
    return _public(_krylov.cg_outcome(A, b, x0, rtol=rtol, atol=atol, maxiter=maxiter, M=M,
                                      callback=callback, check_every=check_every))


def bicgstab(A: Any, b: Any, x0: Any = None, *, rtol: float = 1e-5, atol: float = 0.0,
             maxiter: int | None = None, M: Any = None, callback: Callable | None = None,
             check_every: int | None = None) -> tuple[Any, int]:
    """BiConjugate Gradient STABilized for general square ``A``, as
    ``scipy.sparse.linalg.bicgstab``.

    Parameters
    ----------
    {parameters}
    maxiter : int, optional
        Iterations at most, at least 1 (default ``10 * n``).
    {options}

    {returns}

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from sparsegpu.linalg import bicgstab
    >>> A = sp.diags([-1.3, 2.5, -0.7], [-1, 0, 1], shape=(40, 40), format="csr")
    >>> x, info = bicgstab(A, np.ones(40), rtol=1e-8)
    >>> info, bool(np.linalg.norm(A @ x - 1) < 1e-8 * np.sqrt(40))
    (0, True)
    """
    return _public(_krylov.bicgstab_outcome(A, b, x0, rtol=rtol, atol=atol, maxiter=maxiter, M=M,
                                            callback=callback, check_every=check_every))


def gmres(A: Any, b: Any, x0: Any = None, *, rtol: float = 1e-5, atol: float = 0.0,
          restart: int | None = None, maxiter: int | None = None, M: Any = None,
          callback: Callable | None = None, callback_type: str | None = None,
          check_every: int | None = None) -> tuple[Any, int]:
    """Restarted GMRES with left preconditioning, as ``scipy.sparse.linalg.gmres``.

    Parameters
    ----------
    {parameters}
    restart : int, optional
        Inner iterations per cycle, at least 1 (default ``min(20, n)``); the Krylov basis holds
        ``restart + 1`` vectors of n and must fit in memory.
    maxiter : int, optional
        Restart cycles at most, at least 1 (default ``10 * n``); with ``callback_type='legacy'``
        and a callback, inner iterations.
    {options}
        For GMRES, ``check_every`` counts inner iterations within a cycle; the status is also
        read after every cycle's end.
    callback_type : {'legacy', 'pr_norm', 'x'}, optional
        What the callback receives: ``'x'`` x after every cycle; ``'pr_norm'`` the relative
        preconditioned residual after every inner iteration; ``'legacy'`` (default) as
        ``'pr_norm'``. The per-iteration kinds cost one synchronisation per inner iteration.

    {returns}

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from sparsegpu.linalg import gmres
    >>> A = sp.diags([-1.3, 2.5, -0.7], [-1, 0, 1], shape=(40, 40), format="csr")
    >>> x, info = gmres(A, np.ones(40), rtol=1e-8, restart=40)
    >>> info, bool(np.linalg.norm(A @ x - 1) < 1e-8 * np.sqrt(40))
    (0, True)
    """
    return _public(_krylov.gmres_outcome(A, b, x0, rtol=rtol, atol=atol, restart=restart,
                                         maxiter=maxiter, M=M, callback=callback,
                                         callback_type=callback_type, check_every=check_every))


def minres(A: Any, b: Any, x0: Any = None, *, rtol: float = 1e-5, atol: float = 0.0,
           shift: float = 0.0, maxiter: int | None = None, M: Any = None,
           callback: Callable | None = None, check: bool = False,
           check_every: int | None = None) -> tuple[Any, int]:
    """MINRES for symmetric (possibly indefinite) ``A``, solving ``(A - shift I) x = b`` with
    the stopping tests of ``scipy.sparse.linalg.minres``.

    Parameters
    ----------
    {parameters}
        ``atol`` > 0 adds a test on the residual estimate (SciPy's minres has no atol).
    shift : float, optional
        A real, finite shift of A.
    maxiter : int, optional
        Iterations at most, at least 1 (default ``5 * n``).
    {options}
        For MINRES, M must be symmetric positive definite.
    check : bool, optional
        Test the symmetry of A and M first (a ValueError when either is not symmetric).

    {returns}

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from sparsegpu.linalg import minres
    >>> A = sp.diags(np.linspace(-2.0, 3.0, 30), format="csr") + sp.eye(30, k=1) + sp.eye(30, k=-1)
    >>> x, info = minres(A, np.ones(30), rtol=1e-10)
    >>> info, bool(np.linalg.norm(A @ x - 1) < 1e-6)
    (0, True)
    """
    return _public(_krylov.minres_outcome(A, b, x0, rtol=rtol, atol=atol, shift=shift,
                                          maxiter=maxiter, M=M, callback=callback, check=check,
                                          check_every=check_every))


for _function in (cg, bicgstab, gmres, minres):
    _fill(_function)


@dataclass
class SolveResult:
    """What :func:`solve` found.

    Parameters
    ----------
    x : numpy.ndarray or cupy.ndarray
        The solution, the kind of array b was.
    info : int
        As the solvers' (0 converged, > 0 the iteration limit, < 0 a breakdown).
    iterations : int
        Iterations done (GMRES: inner iterations).
    residual_norm : float
        The true ``norm(b - A x)``, computed once at the end.
    method : str
        The method that ran.
    history : list of float
        With ``history=True``, the residual norm the method tracks, one per iteration (CG,
        BiCGSTAB: ``norm(r)`` from iteration 0; GMRES: the preconditioned residual estimate per
        inner iteration; MINRES: its ``phibar`` estimate); else empty.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from sparsegpu.linalg import solve
    >>> result = solve(sp.eye(4, format="csr") * 2.0, np.ones(4))
    >>> result.converged, result.x.tolist()
    (True, [0.5, 0.5, 0.5, 0.5])
    """

    x: Any
    info: int
    iterations: int
    residual_norm: float
    method: str
    history: list[float] = field(default_factory=list)

    @property
    def converged(self) -> bool:
        """Whether the solve converged (``info == 0``)."""
        return self.info == 0


_METHODS = {
    "cg": _krylov.cg_outcome,
    "bicgstab": _krylov.bicgstab_outcome,
    "gmres": _krylov.gmres_outcome,
    "minres": _krylov.minres_outcome,
}


def solve(A: Any, b: Any, method: str = "cg", *, history: bool = False, **options: Any) -> SolveResult:
    """Solve ``A x = b`` with ``method`` and report iterations, residual and history.

    Parameters
    ----------
    A, b
        As for :func:`cg`.
    method : {'cg', 'bicgstab', 'gmres', 'minres'}, optional
        The solver (default ``'cg'``).
    history : bool, optional
        Record the residual norm the method tracks, one per iteration.
    **options
        That solver's keywords (``x0``, ``rtol``, ``atol``, ``maxiter``, ``M``, ``callback``,
        ``check_every``, ...).

    Returns
    -------
    SolveResult
        x, info, iterations, the true residual norm and the history.

    Raises
    ------
    ValueError
        An unknown method, or anything the solver raises (see :func:`cg`).
    TypeError
        ``history`` is not a bool, an unknown keyword, or anything the solver raises.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from sparsegpu.linalg import solve
    >>> A = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(50, 50), format="csr")
    >>> result = solve(A, np.ones(50), method="cg", rtol=1e-8, history=True)
    >>> result.info, result.iterations == len(result.history) - 1, result.residual_norm < 1e-6
    (0, True, True)
    """
    if not isinstance(history, (bool, np.bool_)):
        raise TypeError(f"history must be True or False, got {type(history).__name__} {history!r}")
    key = method.lower() if isinstance(method, str) else method
    if key not in _METHODS:
        raise ValueError(f"unknown method {method!r}; known: {', '.join(_METHODS)}")
    system, outcome = _METHODS[key](A, b, history=history, **options)
    residual = system.b - _krylov._apply(system, outcome.x)
    return SolveResult(
        x=system.output(outcome.x),
        info=int(outcome.info),
        iterations=int(outcome.iterations),
        residual_norm=system.norm(residual),
        method=key,
        history=list(outcome.history),
    )

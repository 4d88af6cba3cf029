"""The public solvers (SciPy's signatures) and :func:`solve` with its result object."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from sparsegpu.linalg import _krylov

_SHARED_DOC = """
    ``A``: a sparsegpu matrix, a scipy or cupyx sparse matrix (converted once), a dense array, a
    ``LinearOperator`` or any object with ``shape`` and ``matvec``. ``b``: a NumPy or CuPy
    vector; x comes back as the same kind. A GPU matrix with a NumPy ``b`` solves on the GPU.
    ``M``: a preconditioner approximating A^-1 (a matrix, a ``LinearOperator``,
    :func:`~sparsegpu.linalg.jacobi` or :func:`~sparsegpu.linalg.block_jacobi`).
    ``callback(xk)`` is called after every iteration; on the GPU it costs one synchronisation
    (and, for a NumPy b, a download of x) per iteration.

    Returns ``(x, info)``: info 0 converged (``norm(b - A x) < max(rtol * norm(b), atol)`` by
    the recurrence), > 0 the iteration limit was reached (info = maxiter), < 0 a breakdown:
    -1 a NaN or infinity appeared, -10 rho breakdown, -11 a zero denominator (p.Ap, r~.v, or
    omega). x is then the last finite iterate, never silently NaN.
"""


def _public(outcome: tuple[Any, _krylov.Outcome]) -> tuple[Any, int]:
    system, result = outcome
    return system.output(result.x), int(result.info)


def cg(A: Any, b: Any, x0: Any = None, *, rtol: float = 1e-5, atol: float = 0.0,
       maxiter: int | None = None, M: Any = None, callback: Callable | None = None,
       check_every: int | None = None) -> tuple[Any, int]:
    """Conjugate gradients for symmetric (Hermitian) positive definite ``A``, as
    ``scipy.sparse.linalg.cg`` (default ``maxiter = 10 * n``).
    {shared}
    ``check_every``: iterations between two reads of the device status (default 16 on the
    GPU, 1 on the CPU); it changes speed, never the result. On the GPU the reads trail the
    launches by one batch (the GPU never waits for the host), so up to two batches run after
    convergence as frozen no-ops; the answer is still the iterate of the converged step.

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
    ``scipy.sparse.linalg.bicgstab`` (default ``maxiter = 10 * n``).
    {shared}
    ``check_every``: as for :func:`cg`.

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
    """Restarted GMRES, as ``scipy.sparse.linalg.gmres``: ``restart`` (default
    ``min(20, n)``) inner iterations per cycle, left preconditioning, ``maxiter`` counts
    restart cycles (default ``10 * n``), ``callback_type`` ``'x'`` (x after every cycle),
    ``'pr_norm'`` (relative preconditioned residual after every inner iteration) or
    ``'legacy'`` (the default: as ``'pr_norm'``, and ``maxiter`` counts inner iterations).
    The ``'legacy'`` and ``'pr_norm'`` callbacks cost one synchronisation per inner iteration,
    ``'x'`` one per cycle.
    {shared}
    ``check_every``: inner iterations between two reads of the device status within a cycle
    (default 16 on the GPU, 1 on the CPU); the host also reads it after every cycle's end. It
    changes speed, never the result (inner steps launched after the inner loop stopped are
    frozen on the device).
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
    """MINRES for symmetric (possibly indefinite) ``A``, solving ``(A - shift I) x = b`` as
    ``scipy.sparse.linalg.minres`` does (default ``maxiter = 5 * n``, SciPy's stopping tests
    on ``rtol``; ``M`` must be symmetric positive definite). ``atol`` > 0 adds a test on the
    residual estimate (SciPy's minres has no atol). ``check=True`` tests the symmetry of A and M.
    {shared}
    ``check_every``: as for :func:`cg`.
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
    _function.__doc__ = _function.__doc__.replace("{shared}", _SHARED_DOC)  # type: ignore[union-attr]


@dataclass
class SolveResult:
    """What :func:`solve` found.

    ``x``: the solution (the kind of array b was). ``info``: as the solvers'. ``iterations``:
    iterations done (GMRES: inner iterations). ``residual_norm``: the true ``norm(b - A x)``,
    computed once at the end. ``history``: with ``history=True``, the residual norm the method
    tracks, one per iteration (CG, BiCGSTAB: ``norm(r)`` from iteration 0; GMRES: the
    preconditioned residual estimate per inner iteration; MINRES: its ``phibar`` estimate).
    """

    x: Any
    info: int
    iterations: int
    residual_norm: float
    method: str
    history: list[float] = field(default_factory=list)

    @property
    def converged(self) -> bool:
        return self.info == 0


_METHODS = {
    "cg": _krylov.cg_outcome,
    "bicgstab": _krylov.bicgstab_outcome,
    "gmres": _krylov.gmres_outcome,
    "minres": _krylov.minres_outcome,
}


def solve(A: Any, b: Any, method: str = "cg", *, history: bool = False, **options: Any) -> SolveResult:
    """Solve ``A x = b`` with ``method`` (``"cg"``, ``"bicgstab"``, ``"gmres"`` or
    ``"minres"``); ``options`` are that solver's keywords (``x0``, ``rtol``, ``atol``,
    ``maxiter``, ``M``, ``callback``, ...).

    >>> import numpy as np, scipy.sparse as sp
    >>> from sparsegpu.linalg import solve
    >>> A = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(50, 50), format="csr")
    >>> result = solve(A, np.ones(50), method="cg", rtol=1e-8, history=True)
    >>> result.info, result.iterations == len(result.history) - 1, result.residual_norm < 1e-6
    (0, True, True)
    """
    key = str(method).lower()
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

"""Iterative solvers with SciPy's signatures, fast on the GPU, and their preconditioners.

``cg``, ``bicgstab``, ``gmres`` and ``minres`` take what ``scipy.sparse.linalg`` takes and
return ``(x, info)``; :func:`solve` returns a :class:`SolveResult` with the iteration count,
the final residual norm and, on request, the residual history. The solvers use only the
operator interface of a matrix (``shape``, ``dtype``, ``spmv``), so any sparsegpu format,
scipy or cupyx sparse matrix, or ``LinearOperator`` works.

>>> import numpy as np, scipy.sparse as sp
>>> from sparsegpu.linalg import cg, jacobi
>>> A = sp.diags([-1.0, 4.0, -1.0], [-1, 0, 1], shape=(100, 100), format="csr")
>>> x, info = cg(A, np.ones(100), M=jacobi(A))
>>> info
0
"""

from sparsegpu.linalg._solve import SolveResult, bicgstab, cg, gmres, minres, solve
from sparsegpu.linalg.preconditioners import BlockJacobi, Jacobi, block_jacobi, jacobi

__all__ = [
    "BlockJacobi",
    "Jacobi",
    "SolveResult",
    "bicgstab",
    "block_jacobi",
    "cg",
    "gmres",
    "jacobi",
    "minres",
    "solve",
]

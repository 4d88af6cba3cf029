"""Preconditioners built once from a matrix: Jacobi (inverse diagonal) and block Jacobi
(inverses of the diagonal blocks, applied as one batched small dense product).

Building reads the matrix on the host once (``to_scipy``); that is setup, not the hot path.
Both are operators (``shape``, ``dtype``, ``spmv``, ``@``, ``matvec``) and can be passed as
``M`` to any solver; CG and BiCGSTAB fuse a Jacobi preconditioner into their vector kernels.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from sparsegpu import _validate
from sparsegpu._backend import Backend, backend, backend_of, is_device_array
from sparsegpu.formats._base import SparseMatrix, TransposedOperator, to_backend

_SHOWN_ROWS = 10


def _host_matrix(A: Any) -> tuple[sp.csr_array, Backend]:
    """A on the host as scipy CSR, and the backend the preconditioner should live on."""
    if isinstance(A, (SparseMatrix, TransposedOperator)):
        base = A.T if isinstance(A, TransposedOperator) else A
        return sp.csr_array(A.to_scipy()), base.backend
    if sp.issparse(A):
        return sp.csr_array(A), backend()
    if type(A).__module__.startswith("cupyx.scipy.sparse") and hasattr(A, "get"):
        return sp.csr_array(A.get()), "gpu"
    if isinstance(A, np.ndarray) or is_device_array(A):
        return sp.csr_array(to_backend(A, "cpu")), backend_of(A)
    raise TypeError(
        f"a preconditioner is built from a sparsegpu, scipy or cupyx matrix or a dense array, "
        f"not {type(A).__module__}.{type(A).__name__}"
    )


def _square(S: sp.csr_array) -> int:
    m, n = S.shape
    if m != n:
        raise ValueError(f"a preconditioner needs a square matrix, got shape {(m, n)}")
    return m


def _rows_text(rows: np.ndarray) -> str:
    shown = ", ".join(str(int(r)) for r in rows[:_SHOWN_ROWS])
    return shown + (f", ... ({rows.size} in all)" if rows.size > _SHOWN_ROWS else "")


class _Preconditioner:
    """What Jacobi and BlockJacobi share: the operator interface over ``_apply``."""

    shape: tuple[int, int]
    dtype: np.dtype
    backend: Backend

    def _apply(self, x: Any, out: Any) -> Any:
        raise NotImplementedError

    def asbackend(self, where: str) -> Any:
        raise NotImplementedError

    def astype(self, dtype: Any) -> Any:
        raise NotImplementedError

    def spmv(self, x: Any, y: Any = None, alpha: Any = 1, beta: Any = 0) -> Any:
        """``alpha * M @ x + beta * y`` (``y`` written in place when given)."""
        n = self.shape[0]
        x = _validate.check_vector(x, n, self.dtype)
        work = self.asbackend(backend_of(x))
        result = work._apply(x, _empty_like(x))
        if alpha != 1:
            result *= self.dtype.type(alpha)
        if y is None:
            if beta != 0:
                raise ValueError("beta is nonzero but no y was given to scale and add")
            return result
        _validate.check_out(y, n, self.dtype, x)
        if beta == 0:
            y[...] = result
        else:
            y[...] = result + self.dtype.type(beta) * y
        return y

    def __matmul__(self, x: Any) -> Any:
        return self.spmv(x)

    def matvec(self, x: Any) -> Any:
        return self.spmv(x)


def _empty_like(x: Any) -> Any:
    if is_device_array(x):
        import cupy

        return cupy.empty_like(x)
    return np.empty_like(x)


def _zeros_like(x: Any, length: int) -> Any:
    if is_device_array(x):
        import cupy

        return cupy.zeros(length, x.dtype)
    return np.zeros(length, x.dtype)


class Jacobi(_Preconditioner):
    """``M = diag(A)^-1``: ``M @ x`` multiplies by the stored inverse diagonal.

    >>> import numpy as np, scipy.sparse as sp
    >>> from sparsegpu.linalg import jacobi
    >>> M = jacobi(sp.diags([2.0, 4.0, 8.0]))
    >>> M @ np.ones(3)
    array([0.5  , 0.25 , 0.125])
    """

    def __init__(self, inverse_diagonal: Any, where: Backend) -> None:
        self.inverse_diagonal = inverse_diagonal
        n = int(inverse_diagonal.shape[0])
        self.shape = (n, n)
        self.dtype = np.dtype(inverse_diagonal.dtype)
        self.backend = where

    def _apply(self, x: Any, out: Any) -> Any:
        out[...] = self.inverse_diagonal * x
        return out

    def asbackend(self, where: str) -> Jacobi:
        return self if where == self.backend else Jacobi(to_backend(self.inverse_diagonal, where), where)  # type: ignore[arg-type]

    def astype(self, dtype: Any) -> Jacobi:
        dt = np.dtype(dtype)
        return self if dt == self.dtype else Jacobi(self.inverse_diagonal.astype(dt), self.backend)

    def __repr__(self) -> str:
        return f"<Jacobi preconditioner {self.shape[0]}x{self.shape[1]}, {self.dtype}, on {self.backend}>"


def jacobi(A: Any) -> Jacobi:
    """The Jacobi preconditioner of ``A``: the inverse of its diagonal.

    Raises ``ValueError`` naming the rows whose diagonal entry is zero (or missing).

    >>> import numpy as np, scipy.sparse as sp
    >>> from sparsegpu.linalg import jacobi
    >>> jacobi(sp.diags([1.0, 0.0, 3.0]))
    Traceback (most recent call last):
    ...
    ValueError: Jacobi preconditioner: the diagonal is zero in 1 row(s): 1
    """
    S, where = _host_matrix(A)
    _square(S)
    dtype = _validate.value_dtype(S.dtype)
    diagonal = np.asarray(S.diagonal())
    zero_rows = np.flatnonzero(diagonal == 0)
    if zero_rows.size:
        raise ValueError(
            f"Jacobi preconditioner: the diagonal is zero in {zero_rows.size} row(s): {_rows_text(zero_rows)}"
        )
    inverse = (1.0 / diagonal.astype(np.float64)).astype(dtype)
    return Jacobi(to_backend(inverse, where), where)


class BlockJacobi(_Preconditioner):
    """``M = blockdiag(A_11, A_22, ...)^-1`` with square diagonal blocks of ``block_size``
    rows (the last one may be smaller; it is padded with the identity). ``M @ x`` is one
    batched product of the stored inverses with the blocks of ``x``.

    >>> import numpy as np, scipy.sparse as sp
    >>> from sparsegpu.linalg import block_jacobi
    >>> A = sp.csr_array(np.array([[4.0, 1, 0], [1, 3, 0], [0, 0, 2]]))
    >>> M = block_jacobi(A, 2)
    >>> bool(np.allclose(M @ (A @ np.array([1.0, 2.0, 3.0])), [1, 2, 3]))
    True
    """

    def __init__(self, inverses: Any, n: int, where: Backend) -> None:
        self.inverses = inverses
        self.block_size = int(inverses.shape[1])
        self.shape = (n, n)
        self.dtype = np.dtype(inverses.dtype)
        self.backend = where

    def _apply(self, x: Any, out: Any) -> Any:
        n, bs = self.shape[0], self.block_size
        blocks = self.inverses.shape[0]
        if blocks * bs == n:
            stacked = x.reshape(blocks, bs, 1)
        else:  # the last block is padded (its inverse is the identity there)
            padded = _zeros_like(x, blocks * bs)
            padded[:n] = x
            stacked = padded.reshape(blocks, bs, 1)
        product = (self.inverses @ stacked).reshape(-1)
        out[...] = product[:n]
        return out

    def asbackend(self, where: str) -> BlockJacobi:
        return self if where == self.backend else BlockJacobi(to_backend(self.inverses, where), self.shape[0], where)  # type: ignore[arg-type]

    def astype(self, dtype: Any) -> BlockJacobi:
        dt = np.dtype(dtype)
        return self if dt == self.dtype else BlockJacobi(self.inverses.astype(dt), self.shape[0], self.backend)

    def __repr__(self) -> str:
        return (f"<BlockJacobi preconditioner {self.shape[0]}x{self.shape[1]}, blocks of "
                f"{self.block_size}, {self.dtype}, on {self.backend}>")


def block_jacobi(A: Any, block_size: int) -> BlockJacobi:
    """The block Jacobi preconditioner of ``A`` with diagonal blocks of ``block_size`` rows.

    The inverses are computed once, in float64 on the host. Raises ``ValueError`` naming the
    rows of any singular diagonal block.
    """
    block_size = int(block_size)
    if block_size < 1:
        raise ValueError(f"block_size must be a positive integer, got {block_size}")
    S, where = _host_matrix(A)
    n = _square(S)
    dtype = _validate.value_dtype(S.dtype)
    n_blocks = -(-n // block_size)
    coo = S.tocoo()
    rows, cols = coo.row.astype(np.int64), coo.col.astype(np.int64)
    inside = rows // block_size == cols // block_size
    dense = np.zeros((n_blocks, block_size, block_size), np.float64)
    np.add.at(dense, (rows[inside] // block_size, rows[inside] % block_size, cols[inside] % block_size),
              coo.data[inside].astype(np.float64))
    padding = np.arange(n, n_blocks * block_size)
    dense[padding // block_size, padding % block_size, padding % block_size] = 1.0
    singular = _singular_blocks(dense)
    if singular.size:
        first = singular[0] * block_size
        raise ValueError(
            f"block Jacobi preconditioner: {singular.size} diagonal block(s) are singular; the "
            f"first covers rows {first}..{min(first + block_size, n) - 1} (blocks: {_rows_text(singular)})"
        )
    inverses = np.linalg.inv(dense).astype(dtype)
    return BlockJacobi(to_backend(inverses, where), n, where)


def _singular_blocks(dense: np.ndarray) -> np.ndarray:
    """Indices of the blocks that are singular to working precision."""
    singular_values = np.linalg.svd(dense, compute_uv=False)
    largest = singular_values[:, 0]
    smallest = singular_values[:, -1]
    tolerance = largest * dense.shape[1] * np.finfo(np.float64).eps
    return np.flatnonzero((smallest <= tolerance) | ~np.isfinite(smallest))

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
        alpha = _validate.check_scalar("alpha", alpha, self.dtype)
        beta = _validate.check_scalar("beta", beta, self.dtype)
        if y is not None:
            _validate.check_out(y, n, self.dtype, x)  # writeable, same library, no overlap with x
        elif beta != 0:
            raise ValueError("beta is nonzero but no y was given to scale and add")
        work = self.asbackend(backend_of(x))
        result = work._apply(x, _empty_like(x))
        if alpha != 1:
            result *= alpha
        if y is None:
            return result
        if beta == 0:
            y[...] = result
        else:
            y[...] = result + beta * y
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
    """The Jacobi preconditioner ``M = diag(A)^-1``, built by :func:`jacobi`.

    ``M @ x`` multiplies ``x`` by the stored inverse diagonal. CG, BiCGSTAB, MINRES and
    GMRES fuse it into their vector steps (no separate pass).

    Parameters
    ----------
    inverse_diagonal : numpy.ndarray or cupy.ndarray
        The inverse of A's diagonal (float32 or float64), all finite.
    where : {"cpu", "gpu"}
        The backend ``inverse_diagonal`` lives on.

    Attributes
    ----------
    shape : tuple of int
        ``(n, n)``.
    dtype : numpy.dtype
        The dtype of the inverse diagonal.
    backend : {"cpu", "gpu"}
        Where it lives.

    Examples
    --------
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
        """This preconditioner on ``where`` (itself when it is there already)."""
        return self if where == self.backend else Jacobi(to_backend(self.inverse_diagonal, where), where)  # type: ignore[arg-type]

    def astype(self, dtype: Any) -> Jacobi:
        """This preconditioner with its values in ``dtype`` (itself when they are already)."""
        dt = np.dtype(dtype)
        return self if dt == self.dtype else Jacobi(self.inverse_diagonal.astype(dt), self.backend)

    def __repr__(self) -> str:
        return f"<Jacobi preconditioner {self.shape[0]}x{self.shape[1]}, {self.dtype}, on {self.backend}>"


def jacobi(A: Any) -> Jacobi:
    """The Jacobi preconditioner of ``A``: the inverse of its diagonal.

    Parameters
    ----------
    A : SparseMatrix, scipy or cupyx sparse matrix, or 2-D array
        A square matrix whose diagonal entries are nonzero and finite. The preconditioner
        lives on A's backend (scipy input: the active backend).

    Returns
    -------
    Jacobi
        ``M`` with ``M @ x = x / diag(A)``, in A's value type (integers become float64).

    Raises
    ------
    TypeError
        A is not a matrix.
    ValueError
        A is not square, or its diagonal is zero (or missing), NaN or infinite in some rows,
        or its inverse overflows: the message names those rows.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from sparsegpu.linalg import jacobi
    >>> (jacobi(sp.diags([2.0, 4.0])) @ np.ones(2)).tolist()
    [0.5, 0.25]
    >>> jacobi(sp.diags([1.0, 0.0, 3.0]))
    Traceback (most recent call last):
    ...
    ValueError: Jacobi preconditioner: the diagonal is zero in 1 row(s): 1
    >>> jacobi(sp.diags([1.0, np.nan]))
    Traceback (most recent call last):
    ...
    ValueError: Jacobi preconditioner: the diagonal is NaN or infinite in 1 row(s): 1
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
    bad_rows = np.flatnonzero(~np.isfinite(diagonal))
    if bad_rows.size:
        raise ValueError(
            f"Jacobi preconditioner: the diagonal is NaN or infinite in {bad_rows.size} row(s): "
            f"{_rows_text(bad_rows)}"
        )
    with np.errstate(over="ignore"):
        inverse = (1.0 / diagonal.astype(np.float64)).astype(dtype)
    overflow_rows = np.flatnonzero(~np.isfinite(inverse))
    if overflow_rows.size:
        raise ValueError(
            f"Jacobi preconditioner: 1 / diagonal overflows {dtype} in {overflow_rows.size} row(s): "
            f"{_rows_text(overflow_rows)}"
        )
    return Jacobi(to_backend(inverse, where), where)


class BlockJacobi(_Preconditioner):
    """The block Jacobi preconditioner ``M = blockdiag(A_11, A_22, ...)^-1``, built by
    :func:`block_jacobi`.

    The diagonal blocks are square, of ``block_size`` rows (the last one may be smaller; it is
    padded with the identity). ``M @ x`` is one batched product of the stored inverses with the
    blocks of ``x``.

    Parameters
    ----------
    inverses : numpy.ndarray or cupy.ndarray
        The inverse blocks, shape ``(blocks, block_size, block_size)``.
    n : int
        The number of rows of A.
    where : {"cpu", "gpu"}
        The backend ``inverses`` live on.

    Examples
    --------
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
        """This preconditioner on ``where`` (itself when it is there already)."""
        return self if where == self.backend else BlockJacobi(to_backend(self.inverses, where), self.shape[0], where)  # type: ignore[arg-type]

    def astype(self, dtype: Any) -> BlockJacobi:
        """This preconditioner with its values in ``dtype`` (itself when they are already)."""
        dt = np.dtype(dtype)
        return self if dt == self.dtype else BlockJacobi(self.inverses.astype(dt), self.shape[0], self.backend)

    def __repr__(self) -> str:
        return (f"<BlockJacobi preconditioner {self.shape[0]}x{self.shape[1]}, blocks of "
                f"{self.block_size}, {self.dtype}, on {self.backend}>")


def block_jacobi(A: Any, block_size: int) -> BlockJacobi:
    """The block Jacobi preconditioner of ``A`` with diagonal blocks of ``block_size`` rows.

    The inverses are computed once, in float64 on the host, and stored in A's value type on
    A's backend.

    Parameters
    ----------
    A : SparseMatrix, scipy or cupyx sparse matrix, or 2-D array
        A square matrix with finite, nonsingular diagonal blocks.
    block_size : int
        Rows per diagonal block, at least 1 (the last block may be smaller).

    Returns
    -------
    BlockJacobi
        ``M`` with ``M @ x`` solving each diagonal block.

    Raises
    ------
    TypeError
        ``block_size`` is not an integer, or A is not a matrix.
    ValueError
        ``block_size`` < 1, A is not square, the blocks would not fit in host memory, or some
        diagonal block holds NaN or infinity or is singular: the message names its rows.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from sparsegpu.linalg import block_jacobi
    >>> A = sp.csr_array(np.array([[2.0, 1, 0], [1, 2, 0], [0, 0, 4]]))
    >>> (block_jacobi(A, 2) @ np.array([3.0, 3.0, 4.0])).round(12).tolist()
    [1.0, 1.0, 1.0]
    >>> block_jacobi(A, 2.5)
    Traceback (most recent call last):
    ...
    TypeError: block_size must be an integer, got float 2.5
    """
    block_size = _validate.check_int("block_size", block_size, minimum=1)
    S, where = _host_matrix(A)
    n = _square(S)
    block_size = min(block_size, max(n, 1))  # a block larger than A is A itself
    dtype = _validate.value_dtype(S.dtype)
    n_blocks = -(-n // block_size)
    _validate.ensure_fits(3 * 8 * n_blocks * block_size * block_size,
                          f"block Jacobi blocks ({n_blocks:,} of {block_size} x {block_size})", "cpu")
    coo = S.tocoo()
    rows, cols = coo.row.astype(np.int64), coo.col.astype(np.int64)
    inside = rows // block_size == cols // block_size
    dense = np.zeros((n_blocks, block_size, block_size), np.float64)
    np.add.at(dense, (rows[inside] // block_size, rows[inside] % block_size, cols[inside] % block_size),
              coo.data[inside].astype(np.float64))
    padding = np.arange(n, n_blocks * block_size)
    dense[padding // block_size, padding % block_size, padding % block_size] = 1.0
    _refuse_blocks(np.flatnonzero(~np.isfinite(dense).all(axis=(1, 2))), "hold NaN or infinity", block_size, n)
    _refuse_blocks(_singular_blocks(dense), "are singular", block_size, n)
    inverses = np.linalg.inv(dense).astype(dtype)
    return BlockJacobi(to_backend(inverses, where), n, where)


def _refuse_blocks(blocks: np.ndarray, what: str, block_size: int, n: int) -> None:
    """ValueError naming the rows of the first of ``blocks`` (diagonal block indices), if any."""
    if blocks.size:
        first = blocks[0] * block_size
        raise ValueError(
            f"block Jacobi preconditioner: {blocks.size} diagonal block(s) {what}; the first "
            f"covers rows {first}..{min(first + block_size, n) - 1} (blocks: {_rows_text(blocks)})"
        )


def _singular_blocks(dense: np.ndarray) -> np.ndarray:
    """Indices of the blocks that are singular to working precision (all entries finite)."""
    singular_values = np.linalg.svd(dense, compute_uv=False)
    largest = singular_values[:, 0]
    smallest = singular_values[:, -1]
    tolerance = largest * dense.shape[1] * np.finfo(np.float64).eps
    return np.flatnonzero((smallest <= tolerance) | ~np.isfinite(smallest))

"""Building sparse matrices as ``scipy.sparse`` does: :func:`eye`, :func:`diags`, :func:`kron`,
:func:`vstack` and :func:`hstack`, on either backend.

Signatures follow SciPy's (``scipy.sparse.eye``, ``diags``, ``kron``, ``vstack``, ``hstack``),
with a ``backend`` keyword for where the result lives (default: the operands' backend, else
:func:`sparsegpu.backend`). Operands may be sparsegpu matrices, scipy sparse matrices or dense
2-D arrays. The arrays are built with array operations on the result's backend (no host round
trip for GPU operands), with sorted indices. Where SciPy would return a format sparsegpu does
not have (DIA for ``eye`` and ``diags``, BSR for ``kron``), the default is CSR.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from sparsegpu import _validate, convert
from sparsegpu._backend import (
    Backend,
    array_module,
    backend_of,
    is_device_array,
    resolve_backend,
    to_backend,
)
from sparsegpu.formats import _elementwise as ew
from sparsegpu.formats._base import SparseMatrix, format_key
from sparsegpu.formats.csr import CSR


def _finish(csr: CSR, format: Any, default: str) -> SparseMatrix:
    """``csr`` in the requested format (``default`` when None)."""
    key = default if format is None else format_key(format)
    return csr if key == "csr" else csr.asformat(key)


def _target_backend(operands: Sequence[Any], backend: str | None) -> Backend:
    """``backend`` when given; else the one backend the sparsegpu and CuPy operands share, or
    the active backend when there are none. Operands on two backends raise TypeError."""
    if backend is not None:
        return resolve_backend(backend)
    found = {op.backend if isinstance(op, SparseMatrix) else backend_of(op)
             for op in operands if isinstance(op, SparseMatrix) or is_device_array(op)}
    if len(found) > 1:
        raise TypeError("the operands live on different backends (cpu and gpu); pass backend= or move them "
                        "with .asbackend()")
    return found.pop() if found else resolve_backend(None)


def _as_matrix(name: str, operand: Any, target: Backend) -> SparseMatrix:
    """A sparsegpu matrix on ``target`` from a sparsegpu, scipy sparse or dense 2-D operand."""
    if isinstance(operand, SparseMatrix):
        return operand.asbackend(target)
    if sp.issparse(operand):
        return CSR.from_scipy(operand, backend=target)
    if is_device_array(operand) or isinstance(operand, (np.ndarray, list, tuple)):
        dense = operand if is_device_array(operand) else np.asarray(operand)
        if dense.ndim != 2 or dense.dtype.kind not in "biufc":
            raise TypeError(f"{name} must be a sparse matrix or a 2-D numeric array, got shape "
                            f"{tuple(dense.shape)} and dtype {dense.dtype}")
        dense = to_backend(dense, target)
        xp = array_module(target)
        rows, cols = xp.nonzero(dense)
        dtype = _validate.value_dtype(dense.dtype)
        index_dtype = _validate.index_dtype(dense.shape, rows.size)
        indptr = convert.compress(rows, dense.shape[0], index_dtype, xp)
        return CSR._make(dense[rows, cols].astype(dtype), cols.astype(index_dtype), indptr, dense.shape, target)
    raise TypeError(f"{name} must be a sparsegpu matrix, a scipy sparse matrix or a 2-D array, got "
                    f"{type(operand).__name__}")


def eye(m: int, n: int | None = None, k: int = 0, dtype: Any = float, format: str | None = None, *,
        backend: str | None = None) -> SparseMatrix:
    """The m x n matrix with ones on the k-th diagonal, as ``scipy.sparse.eye``.

    Parameters
    ----------
    m : int
        Rows.
    n : int, optional
        Columns (default ``m``).
    k : int, optional
        The diagonal: 0 the main one, positive above, negative below.
    dtype : dtype, optional
        float32, float64 (default), complex64 or complex128.
    format : str, optional
        A sparsegpu format (default CSR).
    backend : {"cpu", "gpu"}, optional
        Default: :func:`sparsegpu.backend`.

    Returns
    -------
    SparseMatrix

    Raises
    ------
    TypeError
        Non-integer sizes or ``k``; an unsupported dtype or format.
    ValueError
        Negative sizes; ``k`` beyond the matrix's edge (``k > n`` or ``k < -m``); an unknown
        format or backend.

    Examples
    --------
    >>> from sparsegpu.formats._construct import eye
    >>> eye(2, 3, k=1, backend="cpu").to_scipy().toarray().tolist()
    [[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    """
    m = _validate.check_int("m", m, minimum=0)
    n = m if n is None else _validate.check_int("n", n, minimum=0)
    k = _validate.check_int("k", k)
    dtype = _validate.requested_value_dtype(dtype)
    target = resolve_backend(backend)
    xp = array_module(target)
    length = min(m + min(k, 0), n - max(k, 0))
    if length < 0:
        raise ValueError(f"diagonal k={k} lies outside a {m}x{n} matrix (as SciPy, |k| may reach the edge only)")
    index_dtype = _validate.index_dtype((m, n), length)
    _validate.ensure_fits((m + 1 + length) * 8 + length * dtype.itemsize, f"a {m}x{n} identity", target)
    first = max(0, -k)
    indptr = xp.clip(xp.arange(m + 1, dtype=np.int64) - first, 0, length).astype(index_dtype)
    indices = xp.arange(first + k, first + k + length, dtype=index_dtype)
    return _finish(CSR._make(xp.ones(length, dtype=dtype), indices, indptr, (m, n), target), format, "csr")


def _diagonal_list(diagonals: Any, offsets: Any) -> tuple[list[Any], list[int]]:
    """SciPy's reading of ``diagonals`` and ``offsets``: one diagonal per offset (a bare
    scalar is one diagonal of that value, where SciPy fails on its missing length)."""
    if np.isscalar(diagonals) or getattr(diagonals, "ndim", None) == 0:  # (np.ndim fails on ragged lists)
        diagonals = [diagonals]
    single = np.ndim(offsets) == 0 if not is_device_array(offsets) else offsets.ndim == 0
    if single:
        if len(diagonals) and np.ndim(diagonals[0]) != 0 and not np.isscalar(diagonals[0]):
            raise ValueError("different number of diagonals and offsets: one offset for several diagonals")
        diagonals = [diagonals]
        offsets = [offsets]
    offsets = [_validate.check_int("offsets", int(o) if is_device_array(o) else o) for o in
               (offsets.tolist() if hasattr(offsets, "tolist") else offsets)]
    if len(diagonals) != len(offsets):
        raise ValueError(f"different number of diagonals ({len(diagonals)}) and offsets ({len(offsets)})")
    if len(set(offsets)) != len(offsets):
        raise ValueError(f"offsets must be unique, got {offsets}")
    return list(diagonals), offsets


def diags(diagonals: Any, offsets: Any = 0, shape: tuple[int, int] | None = None, format: str | None = None,
          dtype: Any = None, *, backend: str | None = None) -> SparseMatrix:
    """A matrix from its diagonals, as ``scipy.sparse.diags``.

    Parameters
    ----------
    diagonals : sequence of array_like, or array_like
        One 1-D array (or scalar, broadcast along its diagonal) per offset; a diagonal longer
        than its place is cut, as SciPy. NumPy or CuPy values.
    offsets : int or sequence of int, optional
        The diagonals' places: 0 the main one, positive above, negative below; unique.
    shape : (int, int), optional
        Default: square, just large enough for the first diagonal.
    format : str, optional
        A sparsegpu format (default CSR; SciPy's DIA is not one). Stored zeros are dropped, as
        SciPy's conversion to CSR drops them.
    dtype : dtype, optional
        Default: the diagonals' (integers and booleans become float64).
    backend : {"cpu", "gpu"}, optional
        Default: the GPU for CuPy diagonals, else :func:`sparsegpu.backend`.

    Returns
    -------
    SparseMatrix

    Raises
    ------
    ValueError
        Diagonals and offsets that do not pair up; repeated offsets; an offset outside the
        shape; a diagonal shorter than its place (and not of length 1).
    TypeError
        Non-integer offsets; an unsupported dtype.

    Examples
    --------
    >>> from sparsegpu.formats._construct import diags
    >>> diags([[1.0, 2.0, 3.0], [4.0, 5.0]], [0, -1], backend="cpu").to_scipy().toarray().tolist()
    [[1.0, 0.0, 0.0], [4.0, 2.0, 0.0], [0.0, 5.0, 3.0]]
    """
    diagonals, offsets = _diagonal_list(diagonals, offsets)
    target = _target_backend(diagonals, backend)
    xp = array_module(target)
    values = [xp.atleast_1d(to_backend(d, target)) for d in diagonals]
    if shape is None:
        size = (values[0].size if values else 0) + abs(offsets[0] if offsets else 0)
        shape = (size, size)
    m, n = _validate.shape2d(shape)
    _validate.ensure_fits((m + 1) * 8 + sum(min(m, n) for _ in offsets) * 24, f"a {m}x{n} diagonal matrix", target)
    stored = (_validate.value_dtype(np.result_type(*[v.dtype for v in values])) if values else np.dtype(np.float64)) \
        if dtype is None else _validate.requested_value_dtype(dtype)
    rows, cols, data = [], [], []
    for j, (diagonal, offset) in enumerate(zip(values, offsets)):
        length = min(m + min(offset, 0), n - max(offset, 0))
        if length < 0:
            raise ValueError(f"offset {offset} (index {j}) is outside a {m}x{n} matrix")
        if diagonal.ndim != 1 or (diagonal.size < length and diagonal.size != 1):
            raise ValueError(f"diagonal {j} has {diagonal.size} values but offset {offset} of a {m}x{n} matrix "
                             f"holds {length}")
        first = max(0, -offset)
        row = xp.arange(first, first + length, dtype=np.int64)
        rows.append(row)
        cols.append(row + offset)
        data.append(xp.broadcast_to(diagonal, (length,)) if diagonal.size == 1 else diagonal[:length])
    return _finish(_csr_from_entries(rows, cols, [d.astype(stored) for d in data], (m, n), target), format, "csr")


def _csr_from_entries(rows: list[Any], cols: list[Any], data: list[Any], shape: tuple[int, int],
                      target: Backend) -> CSR:
    """The CSR of distinct entries given in pieces, zeros dropped, sorted by (row, column)."""
    xp = array_module(target)
    dtype = data[0].dtype if data else np.dtype(np.float64)
    row = xp.concatenate([xp.zeros(0, np.int64)] + rows)
    col = xp.concatenate([xp.zeros(0, np.int64)] + cols)
    values = xp.concatenate([xp.zeros(0, dtype)] + data)
    keep = xp.flatnonzero(values != 0)
    row, col, values = row[keep], col[keep], values[keep]
    order, _ = ew.entry_order(row, col, shape[1], xp)
    index_dtype = _validate.index_dtype(shape, int(values.size))
    indptr = convert.compress(row[order], shape[0], index_dtype, xp)
    return CSR._make(values[order], col[order].astype(index_dtype), indptr, shape, target)


def kron(A: Any, B: Any, format: str | None = None, *, backend: str | None = None) -> SparseMatrix:
    """The Kronecker product of A and B, as ``scipy.sparse.kron``.

    Parameters
    ----------
    A, B : SparseMatrix, scipy sparse matrix or 2-D array
        Operands; both sparsegpu matrices must live on one backend.
    format : str, optional
        A sparsegpu format. Default: CSR where SciPy gives BSR (both operands hold entries
        and B is at least half full), COO where SciPy gives COO.
    backend : {"cpu", "gpu"}, optional
        Default: the operands'.

    Returns
    -------
    SparseMatrix
        Shape ``(A.shape[0] * B.shape[0], A.shape[1] * B.shape[1])``; every product of a
        stored entry of A and one of B is stored (zeros included, as SciPy); sorted indices.

    Raises
    ------
    TypeError
        Operands of another kind, or on different backends.
    ValueError
        The result cannot fit in memory.

    Examples
    --------
    >>> import numpy as np
    >>> from sparsegpu.formats._construct import kron
    >>> kron(np.eye(2), np.array([[1.0, 2.0]]), backend="cpu").to_scipy().toarray().tolist()
    [[1.0, 2.0, 0.0, 0.0], [0.0, 0.0, 1.0, 2.0]]
    """
    target = _target_backend([A, B], backend)
    A, B = _as_matrix("A", A, target), _as_matrix("B", B, target)
    (ma, na), (mb, nb) = A.shape, B.shape
    shape = (ma * mb, na * nb)
    nnz = A.nnz * B.nnz
    dtype = np.result_type(A.dtype, B.dtype)
    _validate.ensure_fits(nnz * (dtype.itemsize + 8) + shape[0] * 8, f"a {shape} Kronecker product", target)
    index_dtype = ew.result_index_dtype(shape, nnz, A.index_dtype, B.index_dtype)
    arrays = ew.kron_arrays(A._canonical_lines(0), B._canonical_lines(0), B.shape, index_dtype, A._xp)
    indptr, indices, data = arrays
    default = "csr" if A.nnz and B.nnz and 2 * B.nnz >= mb * nb else "coo"
    return _finish(CSR._make(data, indices, indptr, shape, target), format, default)


def _blocks(blocks: Any, backend: str | None, dtype: Any) -> tuple[list[SparseMatrix], Backend, np.dtype]:
    if not isinstance(blocks, (list, tuple)) or not blocks:
        raise ValueError(f"blocks must be a non-empty list of matrices, got {type(blocks).__name__}")
    target = _target_backend(blocks, backend)
    matrices = [_as_matrix(f"blocks[{i}]", b, target) for i, b in enumerate(blocks)]
    result = np.result_type(*[b.dtype for b in matrices]) if dtype is None else _validate.requested_value_dtype(dtype)
    return matrices, target, result


def _stack_default(matrices: list[SparseMatrix]) -> str:
    """SciPy's result format: CSR when every block is CSR, CSC when every one is CSC, else COO."""
    kinds = {b.format for b in matrices}
    return kinds.pop() if len(kinds) == 1 and kinds <= {"csr", "csc"} else "coo"


def vstack(blocks: Any, format: str | None = None, dtype: Any = None, *, backend: str | None = None) -> SparseMatrix:
    """Matrices one above the other, as ``scipy.sparse.vstack``.

    Parameters
    ----------
    blocks : sequence
        SparseMatrix, scipy sparse matrices or 2-D arrays with the same number of columns.
    format : str, optional
        Default as SciPy: CSR when every block is CSR, CSC when every one is CSC, else COO.
    dtype : dtype, optional
        Default: the blocks' promoted dtype.
    backend : {"cpu", "gpu"}, optional
        Default: the blocks'.

    Returns
    -------
    SparseMatrix
        Stored entries (explicit zeros included) kept as they are.

    Raises
    ------
    ValueError
        No blocks, or blocks of different widths.
    TypeError
        Blocks of another kind or on different backends; an unsupported dtype.

    Examples
    --------
    >>> import numpy as np
    >>> from sparsegpu.formats._construct import vstack
    >>> vstack([np.eye(2), np.ones((1, 2))], backend="cpu").to_scipy().toarray().tolist()
    [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]
    """
    matrices, target, result = _blocks(blocks, backend, dtype)
    width = matrices[0].shape[1]
    for i, b in enumerate(matrices):
        if b.shape[1] != width:
            raise ValueError(f"blocks[{i}] has {b.shape[1]} columns but blocks[0] has {width}")
    shape = (sum(b.shape[0] for b in matrices), width)
    index_dtype = ew.result_index_dtype(shape, sum(b.nnz for b in matrices), *[b.index_dtype for b in matrices])
    arrays = ew.vstack_arrays([b._lines(0) for b in matrices], result, index_dtype, array_module(target))
    indptr, indices, data = arrays
    return _finish(CSR._make(data, indices, indptr, shape, target), format, _stack_default(matrices))


def hstack(blocks: Any, format: str | None = None, dtype: Any = None, *, backend: str | None = None) -> SparseMatrix:
    """Matrices side by side, as ``scipy.sparse.hstack``.

    Parameters
    ----------
    blocks : sequence
        SparseMatrix, scipy sparse matrices or 2-D arrays with the same number of rows.
    format, dtype, backend : optional
        As for :func:`vstack`.

    Returns
    -------
    SparseMatrix
        Stored entries (explicit zeros included) kept; each row's blocks in order.

    Raises
    ------
    ValueError
        No blocks, or blocks of different heights.
    TypeError
        Blocks of another kind or on different backends; an unsupported dtype.

    Examples
    --------
    >>> import numpy as np
    >>> from sparsegpu.formats._construct import hstack
    >>> hstack([np.eye(2), np.ones((2, 1))], backend="cpu").to_scipy().toarray().tolist()
    [[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]]
    """
    matrices, target, result = _blocks(blocks, backend, dtype)
    height = matrices[0].shape[0]
    for i, b in enumerate(matrices):
        if b.shape[0] != height:
            raise ValueError(f"blocks[{i}] has {b.shape[0]} rows but blocks[0] has {height}")
    shape = (height, sum(b.shape[1] for b in matrices))
    index_dtype = ew.result_index_dtype(shape, sum(b.nnz for b in matrices), *[b.index_dtype for b in matrices])
    arrays = ew.hstack_arrays([b._lines(0) for b in matrices], [b.shape[1] for b in matrices], height, result,
                              index_dtype, array_module(target))
    indptr, indices, data = arrays
    return _finish(CSR._make(data, indices, indptr, shape, target), format, _stack_default(matrices))

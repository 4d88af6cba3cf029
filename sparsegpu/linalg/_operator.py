"""Turning what a user passes as ``A`` or ``M`` into an operator the solvers can apply.

An :class:`Operator` has a shape, a working dtype, the backend its vectors live on, and
``apply(x, out)`` writing ``A @ x`` into a preallocated ``out``, and ``apply_dot(x, out, dot)``
that also writes ``x . (A x)`` (CG's p.Ap) into a device scalar. It talks to sparsegpu matrices
only through their public interface (``shape``, ``dtype``, ``spmv``, ``spmv_dot``), never their
arrays.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from sparsegpu._backend import Backend, backend, backend_of, is_device_array, to_backend
from sparsegpu.advisor import from_scipy
from sparsegpu.formats import SparseMatrix, TransposedOperator
from sparsegpu.primitives.dot import vector_dot

SOLVER_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _is_cupyx_sparse(A: Any) -> bool:
    return type(A).__module__.startswith("cupyx.scipy.sparse") and hasattr(A, "get") and hasattr(A, "nnz")


def _convert_sparse(S: Any, target: Backend) -> SparseMatrix:
    """A scipy sparse matrix as a sparsegpu matrix on ``target``, in the format the advisor picks
    (:func:`sparsegpu.from_scipy` with ``format="auto"``: CSR on the CPU). Setup cost, paid once."""
    return from_scipy(S, format="auto", backend=target)


def working_dtype(*dtypes: Any) -> np.dtype:
    """The dtype a solve runs in: the common type of A and b (integers become float64).

    Only real systems are supported (float32, float64)."""
    dt = np.result_type(*[np.dtype(d) for d in dtypes if d is not None])
    if dt.kind in "biu":
        dt = np.dtype(np.float64)
    if dt == np.float16:
        dt = np.dtype(np.float32)
    if dt not in SOLVER_DTYPES:
        raise TypeError(
            f"the solvers handle real float32/float64 systems; got dtype {dt} "
            "(complex systems are not supported yet)"
        )
    return dt


class Operator:
    """``x -> A @ x`` on one backend, writing into a preallocated output.

    ``apply_dot`` is the product with ``x . (A x)`` in its epilogue when given (a sparsegpu
    matrix's ``spmv_dot``), else the product followed by a deterministic dot pass."""

    def __init__(self, shape: tuple[int, int], dtype: np.dtype, where: Backend, apply: Any,
                 apply_dot: Any = None) -> None:
        self.shape = shape
        self.dtype = dtype
        self.backend = where
        self._apply = apply
        self._apply_dot = apply_dot
        self._scratch: dict[str, Any] = {}  # the fallback dot's reduction scratch

    def apply(self, x: Any, out: Any) -> Any:
        """``out[:] = A @ x``; x and out are arrays of this operator's backend and dtype."""
        return self._apply(x, out)

    def apply_dot(self, x: Any, out: Any, dot: Any) -> Any:
        """``out[:] = A @ x`` and ``dot[0] = x . out`` (float64, deterministic, nothing read
        back to the host); ``dot`` is a float64 array of shape (1,) on this backend."""
        if self._apply_dot is not None:
            return self._apply_dot(x, out, dot)
        self._apply(x, out)
        vector_dot(x, out, dot, self._scratch)
        return out


def operator_backend(A: Any, b: Any) -> Backend:
    """Where a solve with this A and b runs: a GPU matrix or GPU b means the GPU; a scipy
    sparse matrix goes to the active backend; a scipy LinearOperator (host functions) stays
    on the CPU; anything else follows b."""
    if backend_of(b) == "gpu":
        return "gpu"
    if isinstance(A, SparseMatrix):
        return A.backend
    if isinstance(A, TransposedOperator):
        return A.T.backend
    if sp.issparse(A):
        return backend()
    if _is_cupyx_sparse(A) or is_device_array(A) or type(A).__module__.startswith("cupyx"):
        return "gpu"
    return "cpu"


def _sparse_operator(A: SparseMatrix | TransposedOperator, dtype: np.dtype, where: Backend) -> Operator:
    base = A.T if isinstance(A, TransposedOperator) else A
    if base.backend != where:
        base = base.asbackend(where)
    if base.dtype != dtype:
        base = base.astype(dtype)
    target = base.T if isinstance(A, TransposedOperator) else base

    def apply(x: Any, out: Any) -> Any:
        return target.spmv(x, out)

    def apply_dot(x: Any, out: Any, dot: Any) -> Any:
        return target.spmv_dot(x, out, dot)

    fused = apply_dot if isinstance(target, SparseMatrix) else None
    return Operator(tuple(A.shape), dtype, where, apply, fused)


def _dense_operator(A: Any, dtype: np.dtype, where: Backend) -> Operator:
    D = to_backend(A, where).astype(dtype, copy=False)

    def apply(x: Any, out: Any) -> Any:
        D.dot(x, out=out)
        return out

    return Operator(tuple(D.shape), dtype, where, apply)


def _generic_operator(A: Any, dtype: np.dtype, where: Backend) -> Operator:
    """Anything with ``shape`` and ``matvec`` (scipy or cupyx LinearOperator, user classes);
    results are moved to ``where`` and cast to ``dtype``."""
    matvec = getattr(A, "matvec", None)
    if matvec is None:
        matvec = A.__matmul__
    host_only = type(A).__module__.startswith("scipy")

    def apply(x: Any, out: Any) -> Any:
        argument = to_backend(x, "cpu") if host_only else x
        result = matvec(argument)
        out[...] = to_backend(result, where).reshape(out.shape).astype(dtype, copy=False)
        return out

    return Operator(tuple(int(s) for s in A.shape), dtype, where, apply)


def as_operator(A: Any, dtype: np.dtype, where: Backend, name: str = "A") -> Operator:
    """``A`` (sparsegpu matrix, scipy or cupyx sparse, dense array, LinearOperator, or any
    object with ``shape`` and ``matvec``/``spmv``) as an :class:`Operator` on ``where``."""
    if isinstance(A, (SparseMatrix, TransposedOperator)):
        return _sparse_operator(A, dtype, where)
    if sp.issparse(A):
        return _sparse_operator(_convert_sparse(A, where), dtype, where)
    if _is_cupyx_sparse(A):
        return _sparse_operator(_convert_sparse(A.get(), where), dtype, where)
    if isinstance(A, np.ndarray) or is_device_array(A):
        if A.ndim != 2:
            raise ValueError(f"{name} must be 2-D, got shape {tuple(A.shape)}")
        return _dense_operator(A, dtype, where)
    if hasattr(A, "shape") and hasattr(A, "spmv") and hasattr(A, "dtype"):
        def apply(x: Any, out: Any) -> Any:
            return A.spmv(x, out)

        return Operator(tuple(int(s) for s in A.shape), dtype, where, apply)
    if hasattr(A, "shape") and (hasattr(A, "matvec") or hasattr(A, "__matmul__")):
        return _generic_operator(A, dtype, where)
    raise TypeError(
        f"{name} must be a sparsegpu matrix, a scipy or cupyx sparse matrix, a dense array, a "
        f"LinearOperator, or an object with shape and matvec; got {type(A).__module__}.{type(A).__name__}"
    )


def operator_dtype(A: Any) -> Any:
    """A's dtype when it declares one (a LinearOperator may not)."""
    dt = getattr(A, "dtype", None)
    return None if dt is None else np.dtype(dt)

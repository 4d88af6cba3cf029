"""Checking and preparing a system ``A x = b`` once, before any solver iteration.

Everything a solver needs is decided here: the backend (where A lives, or where b lives), the
working dtype, A and M as operators, b and x0 on that backend, the absolute tolerance, and how
to hand x back (NumPy for a NumPy b, CuPy for a CuPy b).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from sparsegpu import _validate
from sparsegpu._backend import Backend, array_module, backend_of, is_device_array, to_backend
from sparsegpu.formats import SparseMatrix, TransposedOperator
from sparsegpu.linalg._operator import Operator, as_operator, operator_backend, operator_dtype, working_dtype
from sparsegpu.linalg.preconditioners import BlockJacobi, Jacobi


@dataclass
class System:
    """A checked system on one backend."""

    A: Operator
    M: Operator | None  # a general preconditioner (None: none, or the fused Jacobi)
    dinv: Any  # the Jacobi inverse diagonal, fused into CG / BiCGSTAB; else None
    b: Any
    x: Any  # the initial guess (a fresh array the solver updates in place)
    x0_given: bool
    bnorm: float
    atol: float
    maxiter: int
    backend: Backend
    dtype: np.dtype
    return_device: bool  # hand x back as CuPy
    name: str = "solve"  # the solver, for error messages

    @property
    def n(self) -> int:
        return self.A.shape[0]

    @property
    def xp(self) -> Any:
        return array_module(self.backend)

    def output(self, x: Any) -> Any:
        """x as the caller's kind of array (a copy: the solver keeps its buffer)."""
        if self.return_device:
            return x.copy()
        return to_backend(x, "cpu").copy() if self.backend == "cpu" else x.get()

    def norm(self, v: Any) -> float:
        return float(self.xp.linalg.norm(v))

    def precondition(self, v: Any, out: Any) -> Any:
        """out = M v for any kind of preconditioner (identity when there is none)."""
        if self.dinv is not None:
            self.xp.multiply(self.dinv, v, out=out)
        elif self.M is not None:
            self.M.apply(v, out)
        else:
            out[...] = v
        return out


def _named(name: str, check: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``check(*args, **kwargs)`` with the solver's name in front of its error message."""
    try:
        return check(*args, **kwargs)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"{name}: {exc}") from None


def check_tolerances(name: str, rtol: Any, atol: Any) -> tuple[float, float]:
    """(rtol, atol) as floats: real, finite and non-negative. Anything else raises ValueError,
    as SciPy's solvers do."""
    checked = []
    for label, value in (("rtol", rtol), ("atol", atol)):
        try:
            number = _validate.check_number(label, value)
        except (TypeError, ValueError):
            number = None
        if number is None or np.iscomplexobj(number) or not math.isfinite(float(number)) or float(number) < 0:
            raise ValueError(f"{name}: {label} must be a real, finite, non-negative number, got {value!r}")
        checked.append(float(number))
    return checked[0], checked[1]


def check_maxiter(name: str, maxiter: Any, default: int) -> int:
    """``maxiter`` as an int >= 1, or ``default`` when None."""
    if maxiter is None:
        return default
    return _named(name, _validate.check_int, "maxiter", maxiter, minimum=1)


def check_positive_int(name: str, label: str, value: Any) -> int:
    """An integer knob (``restart``, ``check_every``) as an int >= 1."""
    return _named(name, _validate.check_int, label, value, minimum=1)


def check_bool_option(name: str, label: str, value: Any) -> bool:
    return _named(name, _validate.check_bool, label, value)


def check_callback(name: str, callback: Any) -> None:
    if callback is not None and not callable(callback):
        raise TypeError(f"{name}: callback must be callable or None, got {type(callback).__name__}")


def _vector(name: str, v: Any, n: int, label: str) -> Any:
    if not hasattr(v, "shape") or not hasattr(v, "dtype"):
        try:
            v = np.asarray(v)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"{name}: {label} must be a NumPy or CuPy vector ({exc})") from None
    if v.dtype.kind not in "biuf":
        raise TypeError(f"{name}: {label} has dtype {v.dtype}; the solvers handle real float32 or "
                        "float64 systems (complex systems are not supported)")
    if not (v.shape == (n,) or v.shape == (n, 1)):
        raise ValueError(f"{name}: {label} has shape {tuple(v.shape)}, but A is {n}x{n}; expected ({n},)")
    v = v.reshape(n)
    xp = array_module(backend_of(v))
    if v.dtype.kind == "f" and not bool(xp.isfinite(v).all()):
        bad = int(xp.flatnonzero(~xp.isfinite(v))[0])
        raise ValueError(f"{name}: {label} holds NaN or infinity (first at index {bad})")
    return v


def _check_operator_like(name: str, label: str, M: Any) -> tuple[int, ...]:
    """M's shape, when M is something the solvers can apply: a matrix, an array, a
    LinearOperator or an object with ``shape`` and ``matvec`` (or ``spmv``)."""
    applicable = (isinstance(M, (SparseMatrix, TransposedOperator, Jacobi, BlockJacobi, np.ndarray))
                  or sp.issparse(M) or is_device_array(M)
                  or (hasattr(M, "shape") and any(hasattr(M, m) for m in ("matvec", "spmv", "__matmul__"))))
    if isinstance(M, (str, bytes)) or not applicable:
        raise TypeError(
            f"{name}: {label} must be a sparsegpu matrix, a scipy or cupyx sparse matrix, a dense "
            f"array, a LinearOperator or an object with shape and matvec; got "
            f"{type(M).__module__}.{type(M).__name__}"
        )
    try:
        shape = tuple(int(s) for s in M.shape)
    except (TypeError, ValueError):
        raise TypeError(f"{name}: {label}.shape must be a pair of integers, got {M.shape!r}") from None
    if len(shape) != 2:
        raise ValueError(f"{name}: {label} must be 2-D, got shape {shape}")
    return shape


def _preconditioner(name: str, M: Any, n: int, dtype: np.dtype, where: Backend,
                    fuse_jacobi: bool) -> tuple[Operator | None, Any]:
    """M as a general operator, or (with ``fuse_jacobi``) a Jacobi M as its inverse diagonal."""
    if M is None:
        return None, None
    if isinstance(M, Jacobi) and fuse_jacobi:
        return None, M.asbackend(where).astype(dtype).inverse_diagonal
    if isinstance(M, (Jacobi, BlockJacobi)):
        prepared = M.asbackend(where).astype(dtype)
        return Operator((n, n), dtype, where, prepared._apply), None
    return as_operator(M, dtype, where, name="M"), None


def _check_square(name: str, A: Any, M: Any) -> int:
    """n, once A is an n x n operator of a real dtype and M is None or an n x n operator."""
    shape = _check_operator_like(name, "A", A)
    if shape[0] != shape[1]:
        raise ValueError(f"{name}: A must be square, got shape {shape}")
    n = shape[0]
    a_dtype = operator_dtype(A)
    if a_dtype is not None and a_dtype.kind not in "biuf":
        raise TypeError(f"{name}: A has dtype {a_dtype}; the solvers handle real float32 or float64 "
                        "systems (complex systems are not supported)")
    if M is not None:
        m_shape = _check_operator_like(name, "M", M)
        if m_shape != (n, n):
            raise ValueError(f"{name}: the preconditioner M has shape {m_shape}, but A is {n}x{n}")
    return n


def prepare(name: str, A: Any, b: Any, x0: Any, rtol: Any, atol: Any, M: Any,
            fuse_jacobi: bool) -> System:
    """Check the arguments and build the :class:`System` (maxiter is set by the caller).

    Every check runs before A or M is converted and before any vector is allocated."""
    rtol, atol = check_tolerances(name, rtol, atol)
    n = _check_square(name, A, M)
    b = _vector(name, b, n, "b")
    if x0 is not None and not isinstance(x0, str):
        x0 = _vector(name, x0, n, "x0")
    elif isinstance(x0, str) and x0 != "Mb":
        raise ValueError(f"{name}: x0 must be an array, None or 'Mb', got {x0!r}")
    where = operator_backend(A, b)
    dtype = _named(name, working_dtype, operator_dtype(A), b.dtype)
    op = as_operator(A, dtype, where)
    general, dinv = _preconditioner(name, M, n, dtype, where, fuse_jacobi)
    xp = array_module(where)
    b_work = xp.asarray(to_backend(b, where), dtype=dtype)  # read only: never written
    system = System(op, general, dinv, b_work, None, False, 0.0, 0.0, 0, where, dtype,
                    return_device=is_device_array(b), name=name)
    if isinstance(x0, str):
        system.x = system.precondition(b_work, xp.empty(n, dtype))
        system.x0_given = True
    elif x0 is None:
        system.x = xp.zeros(n, dtype)
    else:  # a copy: the caller's x0 is never written
        system.x = xp.array(to_backend(x0, where), dtype=dtype, copy=True)
        system.x0_given = True
    system.bnorm = system.norm(b_work)
    system.atol = max(atol, rtol * system.bnorm)
    return system


def initial_residual(system: System) -> Any:
    """r = b - A x0 (b itself, copied, when no x0 was given)."""
    r = system.b.copy()
    if system.x0_given:
        ax = system.xp.empty_like(r)
        system.A.apply(system.x, ax)
        r -= ax
    return r

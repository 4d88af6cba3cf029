"""Checking and preparing a system ``A x = b`` once, before any solver iteration.

Everything a solver needs is decided here: the backend (where A lives, or where b lives), the
working dtype, A and M as operators, b and x0 on that backend, the absolute tolerance, and how
to hand x back (NumPy for a NumPy b, CuPy for a CuPy b).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np

from sparsegpu._backend import Backend, array_module, backend_of, is_device_array
from sparsegpu.formats._base import to_backend
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


def check_tolerances(name: str, rtol: Any, atol: Any) -> tuple[float, float]:
    for label, value in (("rtol", rtol), ("atol", atol)):
        if value is None or isinstance(value, str) or not isinstance(value, numbers.Real):
            raise ValueError(f"{name}: {label} must be a real, non-negative number, got {value!r}")
        if not math.isfinite(float(value)) or float(value) < 0:
            raise ValueError(f"{name}: {label} must be a real, non-negative number, got {value!r}")
    return float(rtol), float(atol)


def check_maxiter(name: str, maxiter: Any, default: int) -> int:
    if maxiter is None:
        return default
    if isinstance(maxiter, bool) or not isinstance(maxiter, numbers.Integral):
        raise TypeError(f"{name}: maxiter must be an integer or None, got {maxiter!r}")
    if maxiter < 0:
        raise ValueError(f"{name}: maxiter must be non-negative, got {maxiter}")
    return int(maxiter)


def _vector(name: str, v: Any, n: int, label: str) -> Any:
    if not hasattr(v, "shape") or not hasattr(v, "dtype"):
        v = np.asarray(v)
    if not (v.shape == (n,) or v.shape == (n, 1)):
        raise ValueError(f"{name}: {label} has shape {tuple(v.shape)}, but A is {n}x{n}; expected ({n},)")
    v = v.reshape(n)
    finite = v.dtype.kind not in "fc" or bool(array_module(backend_of(v)).isfinite(v).all())
    if not finite:
        bad = int(array_module(backend_of(v)).flatnonzero(~array_module(backend_of(v)).isfinite(v))[0])
        raise ValueError(f"{name}: {label} holds NaN or infinity (first at index {bad})")
    return v


def _preconditioner(M: Any, n: int, dtype: np.dtype, where: Backend, fuse_jacobi: bool) -> tuple[Operator | None, Any]:
    if M is None:
        return None, None
    if tuple(M.shape) != (n, n):
        raise ValueError(f"the preconditioner M has shape {tuple(M.shape)}, but A is {n}x{n}")
    if isinstance(M, Jacobi) and fuse_jacobi:
        return None, M.asbackend(where).astype(dtype).inverse_diagonal
    if isinstance(M, (Jacobi, BlockJacobi)):
        prepared = M.asbackend(where).astype(dtype)
        return Operator((n, n), dtype, where, prepared._apply), None
    return as_operator(M, dtype, where, name="M"), None


def prepare(name: str, A: Any, b: Any, x0: Any, rtol: Any, atol: Any, M: Any,
            fuse_jacobi: bool) -> System:
    """Check the arguments and build the :class:`System` (maxiter is set by the caller)."""
    rtol, atol = check_tolerances(name, rtol, atol)
    if not hasattr(A, "shape"):
        raise TypeError(f"{name}: A must be a matrix or an operator with a shape, got {type(A).__name__}")
    shape = tuple(int(s) for s in A.shape)
    if len(shape) != 2 or shape[0] != shape[1]:
        raise ValueError(f"{name}: A must be square, got shape {shape}")
    n = shape[0]
    b = _vector(name, b, n, "b")
    where = operator_backend(A, b)
    dtype = working_dtype(operator_dtype(A), b.dtype)
    op = as_operator(A, dtype, where)
    general, dinv = _preconditioner(M, n, dtype, where, fuse_jacobi)
    xp = array_module(where)
    b_work = xp.asarray(to_backend(b, where), dtype=dtype)
    system = System(op, general, dinv, b_work, None, False, 0.0, 0.0, 0, where, dtype,
                    return_device=is_device_array(b))
    if isinstance(x0, str):
        if x0 != "Mb":
            raise ValueError(f"{name}: x0 must be an array, None or 'Mb', got {x0!r}")
        system.x = system.precondition(b_work, xp.empty(n, dtype))
        system.x0_given = True
    elif x0 is None:
        system.x = xp.zeros(n, dtype)
    else:
        x0 = _vector(name, x0, n, "x0")
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

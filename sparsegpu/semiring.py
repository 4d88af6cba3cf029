"""Semirings: the (add, multiply) pairs a sparse product runs over (the GraphBLAS idea).

A product over a semiring computes ``out[i] = add-reduce over stored j of mul(A[i, j], x[j])``:
``plus_times`` is the ordinary product, ``min_plus`` one relaxation step of shortest paths,
``any_pair`` one step of reachability (BFS). Each object carries what both backends need: a
NumPy spelling for the CPU backend and the reference, and a C++ spelling for the GPU kernels
(kernels/semiring.cuh), which take the semiring as a template parameter.

Min and max follow NumPy's ``minimum`` / ``maximum``: a NaN operand gives NaN (it propagates).
The ``any`` monoid is a deterministic logical or: 1 where any term is nonzero, else 0.

>>> import numpy as np
>>> from sparsegpu.semiring import min_plus
>>> min_plus
Semiring(min, plus)
>>> float(min_plus.add.identity(np.float64)), min_plus.mul.apply(np.array([1.0]), np.array([2.0])).tolist()
(inf, [3.0])
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from typing import Any

import numpy as np

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _logical_or(a: Any, b: Any) -> Any:
    """1 where ``a`` or ``b`` is nonzero (NaN counts as nonzero), else 0, in ``a``'s dtype."""
    xp = _array_module(a)
    return xp.logical_or(a != 0, b != 0).astype(xp.asarray(a).dtype)


def _array_module(a: Any) -> Any:
    module = type(a).__module__
    if module.startswith("cupy"):
        import cupy

        return cupy
    return np


class Monoid:
    """An associative, commutative reduction with an identity: a semiring's "add".

    Parameters
    ----------
    name : str
        A C++-safe identifier (letters, digits, underscores).
    ufunc : numpy.ufunc
        The reduction on the CPU backend (``ufunc.reduceat`` runs over CSR segments).
    identity : callable
        ``identity(dtype) -> scalar`` of that dtype: the value of an empty reduction.
    cpp : str
        The C++ functor (kernels/semiring.cuh), e.g. ``"sg::MonoidMin"``.

    Examples
    --------
    >>> import numpy as np
    >>> from sparsegpu.semiring import MIN
    >>> MIN, float(MIN.identity(np.float32)), MIN.reduce(np.array([3.0, 1.0, 2.0]))
    (Monoid('min'), inf, 1.0)
    """

    def __init__(self, name: str, ufunc: Any, identity: Callable[[np.dtype], Any], cpp: str) -> None:
        if not isinstance(name, str) or not _NAME.match(name):
            raise ValueError(f"name must be an identifier (letters, digits, underscores), got {name!r}")
        self.name, self.ufunc, self._identity, self.cpp = name, ufunc, identity, cpp

    def identity(self, dtype: Any) -> Any:
        """The identity as a scalar of ``dtype``."""
        dtype = np.dtype(dtype)
        return dtype.type(self._identity(dtype))

    def reduce(self, values: np.ndarray) -> Any:
        """The reduction of a 1-D NumPy array in index order (the identity when empty)."""
        out = self.identity(values.dtype)
        for v in values:
            out = self.ufunc(out, v)
        return float(out) if values.dtype.kind == "f" else out

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Monoid) and (self.name, self.cpp) == (other.name, other.cpp)

    def __hash__(self) -> int:
        return hash(("monoid", self.name, self.cpp))

    def __repr__(self) -> str:
        return f"Monoid({self.name!r})"


def _extreme(dtype: np.dtype, high: bool) -> Any:
    if dtype.kind == "f":
        return np.inf if high else -np.inf
    info = np.iinfo(dtype)
    return info.max if high else info.min


PLUS_MONOID = Monoid("plus", np.add, lambda dtype: 0, "sg::MonoidPlus")
MIN = Monoid("min", np.minimum, lambda dtype: _extreme(dtype, True), "sg::MonoidMin")
MAX = Monoid("max", np.maximum, lambda dtype: _extreme(dtype, False), "sg::MonoidMax")


class _LogicalOr:
    """``np.logical_or`` in the operands' dtype, with the ``reduceat`` the CPU backend uses."""

    __name__ = "logical_or"

    def __call__(self, a: Any, b: Any) -> Any:
        return _logical_or(a, b)

    def reduceat(self, values: np.ndarray, starts: np.ndarray) -> np.ndarray:
        return np.logical_or.reduceat(values != 0, starts).astype(values.dtype)


ANY = Monoid("any", _LogicalOr(), lambda dtype: 0, "sg::MonoidAny")


class BinaryOp:
    """A semiring's "multiply": ``mul(a, b)`` with ``a`` the matrix entry and ``b`` x's entry.

    Parameters
    ----------
    name : str
        An identifier (letters, digits, underscores).
    apply : callable
        ``apply(a, b)`` on NumPy arrays (broadcasting), returning an array of ``a``'s dtype.
    cpp : str
        A C++ expression over ``a`` and ``b`` (of the value type ``V``), e.g. ``"a * b"``.

    Examples
    --------
    >>> import numpy as np
    >>> from sparsegpu.semiring import BinaryOp, Semiring, MIN
    >>> hop = BinaryOp("hop", lambda a, b: b + 1, "b + V(1)")
    >>> Semiring(MIN, hop)
    Semiring(min, hop)
    >>> hop.apply(np.array([5.0]), np.array([2.0])).tolist()
    [3.0]
    """

    def __init__(self, name: str, apply: Callable[[Any, Any], Any], cpp: str, *, builtin: str | None = None) -> None:
        if not isinstance(name, str) or not _NAME.match(name):
            raise ValueError(f"name must be an identifier (letters, digits, underscores), got {name!r}")
        if not callable(apply):
            raise TypeError(f"apply must be callable, got {type(apply).__name__}")
        if not isinstance(cpp, str) or not cpp.strip() or any(c in cpp for c in ";{}#"):
            raise ValueError(f"cpp must be one C++ expression over a and b (no ';', braces or '#'), got {cpp!r}")
        self.name, self._apply, self.expression = name, apply, cpp
        digest = hashlib.sha1(cpp.encode()).hexdigest()[:10]
        self.cpp = builtin or f"UserOp_{name}_{digest}"
        self.builtin = builtin is not None

    def apply(self, a: Any, b: Any) -> Any:
        """``mul(a, b)`` elementwise, in ``a``'s dtype."""
        dtype = np.asarray(a).dtype if not hasattr(a, "dtype") else a.dtype
        out = self._apply(a, b)
        xp = _array_module(a)
        return xp.broadcast_to(xp.asarray(out, dtype=dtype), xp.broadcast(a, b).shape)

    def source(self) -> str:
        """The C++ functor for a user-made op (empty for built-in ones): prepended to the kernel
        source that instantiates it."""
        if self.builtin:
            return ""
        return (f"struct {self.cpp} {{ template <class V> static __device__ __forceinline__ V apply(V a, V b) "
                f"{{ return V({self.expression}); }} }};\n")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BinaryOp) and (self.name, self.cpp) == (other.name, other.cpp)

    def __hash__(self) -> int:
        return hash(("op", self.name, self.cpp))

    def __repr__(self) -> str:
        return f"BinaryOp({self.name!r}, {self.expression!r})"


def _minimum(a: Any, b: Any) -> Any:
    return _array_module(a).minimum(a, b)


def _maximum(a: Any, b: Any) -> Any:
    return _array_module(a).maximum(a, b)


TIMES = BinaryOp("times", lambda a, b: a * b, "a * b", builtin="sg::OpTimes")
PLUS = BinaryOp("plus", lambda a, b: a + b, "a + b", builtin="sg::OpPlus")
FIRST = BinaryOp("first", lambda a, b: a, "a", builtin="sg::OpFirst")
SECOND = BinaryOp("second", lambda a, b: b, "b", builtin="sg::OpSecond")
PAIR = BinaryOp("pair", lambda a, b: 1, "V(1)", builtin="sg::OpPair")
MIN_OP = BinaryOp("min", _minimum, "a < b || a != a ? a : b", builtin="sg::OpMin")
MAX_OP = BinaryOp("max", _maximum, "a > b || a != a ? a : b", builtin="sg::OpMax")


class Semiring:
    """A monoid (add) and a binary operator (multiply): what a product reduces with.

    Parameters
    ----------
    monoid : Monoid
        The "add": reduces a row's terms; its identity is an empty row's value.
    op : BinaryOp
        The "multiply": ``op(A[i, j], x[j])``.

    Raises
    ------
    TypeError
        ``monoid`` is not a :class:`Monoid` or ``op`` not a :class:`BinaryOp`.

    Examples
    --------
    >>> from sparsegpu.semiring import Semiring, MIN, PLUS, min_plus
    >>> Semiring(MIN, PLUS) == min_plus, min_plus.name, min_plus.cpp
    (True, 'min_plus', 'sg::Semiring<{V}, sg::MonoidMin, sg::OpPlus>')
    """

    def __init__(self, monoid: Monoid, op: BinaryOp) -> None:
        if not isinstance(monoid, Monoid):
            raise TypeError(f"monoid must be a sparsegpu.semiring.Monoid, got {type(monoid).__name__}")
        if not isinstance(op, BinaryOp):
            raise TypeError(f"op must be a sparsegpu.semiring.BinaryOp, got {type(op).__name__}")
        self.add, self.mul = monoid, op

    @property
    def name(self) -> str:
        """``"<monoid>_<op>"``, e.g. ``"min_plus"``."""
        return f"{self.add.name}_{self.mul.name}"

    @property
    def cpp(self) -> str:
        """The kernels' template argument, with ``{V}`` for the value type."""
        return f"sg::Semiring<{{V}}, {self.add.cpp}, {self.mul.cpp}>"

    @property
    def is_plus_times(self) -> bool:
        """Whether this is the ordinary (arithmetic) product."""
        return self == plus_times

    def identity(self, dtype: Any) -> Any:
        """The monoid's identity in ``dtype``."""
        return self.add.identity(dtype)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Semiring) and (self.add, self.mul) == (other.add, other.mul)

    def __hash__(self) -> int:
        return hash((self.add, self.mul))

    def __repr__(self) -> str:
        return f"Semiring({self.add.name}, {self.mul.name})"


plus_times = Semiring(PLUS_MONOID, TIMES)
min_plus = Semiring(MIN, PLUS)
max_times = Semiring(MAX, TIMES)
any_pair = Semiring(ANY, PAIR)
min_second = Semiring(MIN, SECOND)
plus_pair = Semiring(PLUS_MONOID, PAIR)
max_plus = Semiring(MAX, PLUS)
min_times = Semiring(MIN, TIMES)
plus_min = Semiring(PLUS_MONOID, MIN_OP)

#: The predefined semirings by name (their GPU kernels are registered for CI's compile step).
PREDEFINED: dict[str, Semiring] = {s.name: s for s in (plus_times, min_plus, max_times, any_pair, min_second,
                                                       plus_pair, max_plus, min_times, plus_min)}


def as_semiring(semiring: Any) -> Semiring:
    """``semiring`` as a :class:`Semiring`: None gives ``plus_times``; a string names a
    predefined one.

    Raises
    ------
    TypeError
        Neither None, a string nor a Semiring.
    ValueError
        An unknown name.

    Examples
    --------
    >>> from sparsegpu.semiring import as_semiring
    >>> as_semiring("min_plus"), as_semiring(None)
    (Semiring(min, plus), Semiring(plus, times))
    """
    if semiring is None:
        return plus_times
    if isinstance(semiring, Semiring):
        return semiring
    if isinstance(semiring, str):
        if semiring not in PREDEFINED:
            raise ValueError(f"unknown semiring {semiring!r}; predefined: {', '.join(PREDEFINED)}")
        return PREDEFINED[semiring]
    raise TypeError(f"semiring must be None, a name or a sparsegpu.semiring.Semiring, got {type(semiring).__name__}")

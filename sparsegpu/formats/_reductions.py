"""Reductions of a sparse matrix as SciPy computes them: sums, extremes with the implicit
zeros counted, and diagonals, on the matrix's backend.

Sums and real extremes run on :mod:`sparsegpu.primitives` (fixed summation order, no atomics:
bitwise reproducible); complex values reduce part by part (sums) or by a lexicographic sort
(extremes, NumPy's order for complex numbers).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

from sparsegpu import _validate, convert, primitives
from sparsegpu.formats._elementwise import segment_sums, stable_argsort

EXTREMES = ("max", "min")


def total(data: Any) -> Any:
    """The sum of all values: a NumPy scalar, or a 0-d CuPy array for CuPy input."""
    if data.dtype.kind != "c":
        return primitives.reduce(data, "sum")
    real = primitives.reduce(data.real.copy(), "sum")
    imag = primitives.reduce(data.imag.copy(), "sum")
    if isinstance(data, np.ndarray):
        return data.dtype.type(complex(real, imag))
    import cupy

    out = cupy.empty((), data.dtype)
    out.real = real
    out.imag = imag
    return out


def line_sums(indptr: Any, data: Any) -> Any:
    """Sum of each major line (duplicates included), in stored order."""
    return segment_sums(data, indptr)


def _lex_greater(a: Any, b: Any) -> Any:
    """a > b in NumPy's order for complex numbers (real part first, then imaginary)."""
    return (a.real > b.real) | ((a.real == b.real) & (a.imag > b.imag))


def _pick(a: Any, b: Any, op: str, xp: ModuleType) -> Any:
    """NumPy's maximum / minimum of two arrays (NaN propagates; complex: lexicographic)."""
    if a.dtype.kind != "c":
        return (xp.maximum if op == "max" else xp.minimum)(a, b)
    first_wins = _lex_greater(a, b) if op == "max" else _lex_greater(b, a)
    return xp.where(first_wins | xp.isnan(a), a, b)


def _complex_line_extremes(indptr: Any, data: Any, op: str, xp: ModuleType) -> Any:
    """Per-line max or min of complex values in NumPy's order: a lexicographic sort within lines."""
    majors = convert.expand_pointers(indptr, xp).astype(np.int64)
    order = stable_argsort(data.imag, xp)
    order = order[stable_argsort(data.real[order], xp)]
    order = order[stable_argsort(majors[order], xp)]
    lengths = (indptr[1:] - indptr[:-1]).astype(np.int64)
    pick = indptr[1:].astype(np.int64) - 1 if op == "max" else indptr[:-1].astype(np.int64)
    out = xp.zeros(lengths.size, dtype=data.dtype)
    present = xp.flatnonzero(lengths > 0)
    out[present] = data[order[pick[present]]]
    return out


def line_extremes(indptr: Any, data: Any, n_minor: int, op: str, explicit: bool, xp: ModuleType) -> Any:
    """SciPy's ``max``/``min`` along each major line of canonical arrays: over the stored
    values, and 0 too where the line has fewer than ``n_minor`` entries (unless ``explicit``);
    a line without entries gives 0."""
    lengths = (indptr[1:] - indptr[:-1]).astype(np.int64)
    if data.dtype.kind == "c":
        values = _complex_line_extremes(indptr, data, op, xp)
    else:
        values = primitives.segmented_reduce(data, indptr, op)
    zero = xp.zeros_like(values)
    values = xp.where(lengths > 0, values, zero)
    if not explicit:
        not_full = lengths < n_minor
        values = xp.where(not_full, _pick(values, zero, op, xp), values)
    return values


def extreme(data: Any, size: int, op: str, explicit: bool, xp: ModuleType) -> Any:
    """SciPy's ``max``/``min`` over the whole matrix of canonical values ``data`` (``size``
    = rows * columns): 0 also counts when some entry is implicit (unless ``explicit``)."""
    if data.size == 0:
        return xp.zeros((), dtype=data.dtype)[()] if xp is np else xp.zeros((), dtype=data.dtype)
    offsets = xp.asarray([0, data.size], dtype=np.int64)
    value = line_extremes(offsets, data, size, op, explicit or data.size == size, xp)
    return value[0] if xp is np else value.reshape(())


def check_axis(axis: Any) -> int | None:
    """``axis`` as None, 0 or 1 (SciPy also takes -2 and -1)."""
    if axis is None:
        return None
    axis = _validate.check_int("axis", axis)
    if axis not in (-2, -1, 0, 1):
        raise ValueError(f"axis must be None, 0, 1, -2 or -1 for a 2-D matrix, got {axis}")
    return axis % 2


def check_nonempty(shape: tuple[int, int], axis: int | None, op: str) -> None:
    """SciPy's ValueError for a max or min over an empty axis (the reduction has no identity)."""
    empty = 0 in shape if axis is None else shape[axis] == 0
    if empty:
        raise ValueError(f"{op}() of a {shape[0]}x{shape[1]} matrix along axis={axis}: zero-size array to a "
                         "reduction without identity")

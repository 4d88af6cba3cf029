"""NumPy twins of kernels/scan.cu, kernels/reduce.cu and kernels/histogram.cu.

Same arguments as the GPU paths in :mod:`sparsegpu.primitives` (already validated there), same
results up to floating-point association: integer results are identical, float sums agree to
rounding. Sums keep the input dtype and wrap on integer overflow, as NumPy does with
``dtype=x.dtype``.
"""

from __future__ import annotations

import numpy as np

UFUNCS = {"sum": np.add, "min": np.minimum, "max": np.maximum}


def identity(op: str, dtype: np.dtype) -> np.generic:
    """The operator's identity in ``dtype``: 0 for sum, the largest value (inf) for min, the
    smallest (-inf) for max. Empty reductions and empty segments give it."""
    dtype = np.dtype(dtype)
    if op == "sum":
        return dtype.type(0)
    if dtype.kind == "f":
        return dtype.type(np.inf if op == "min" else -np.inf)
    info = np.iinfo(dtype)
    return dtype.type(info.max if op == "min" else info.min)


def inclusive_scan(x: np.ndarray, op: str = "sum") -> np.ndarray:
    """``y[i] = x[0] op ... op x[i]``, in x's dtype (twin of ``scan_*<..., INCLUSIVE=true>``)."""
    return UFUNCS[op].accumulate(x, dtype=x.dtype) if x.size else x.copy()


def exclusive_scan(x: np.ndarray, op: str = "sum") -> np.ndarray:
    """``y[0] = identity``, ``y[i] = x[0] op ... op x[i-1]``."""
    y = np.empty_like(x)
    if x.size:
        y[0] = identity(op, x.dtype)
        y[1:] = inclusive_scan(x[:-1], op)
    return y


def segmented_scan(x: np.ndarray, heads: np.ndarray, inclusive: bool = True, op: str = "sum") -> np.ndarray:
    """Scan restarted wherever ``heads`` is true (element 0 always starts a segment).

    Vectorised as a Hillis-Steele scan over (value, head) pairs: log2(n) NumPy passes.
    """
    ufunc = UFUNCS[op]
    n = x.size
    values, flags = x.copy(), heads.astype(bool, copy=True)
    if n:
        flags[0] = True
    step = 1
    while step < n:
        joined = np.where(flags[step:], values[step:], ufunc(values[:-step], values[step:], dtype=x.dtype))
        flags[step:] = flags[step:] | flags[:-step]
        values[step:] = joined
        step *= 2
    if inclusive:
        return values
    out = np.empty_like(x)
    if n:
        out[1:] = values[:-1]
        starts = heads.astype(bool, copy=True)
        starts[0] = True
        out[starts] = identity(op, x.dtype)
    return out


def reduce(x: np.ndarray, op: str = "sum") -> np.generic:
    """The fold of x (the identity when x is empty), a NumPy scalar of x's dtype."""
    if x.size == 0:
        return identity(op, x.dtype)
    return UFUNCS[op].reduce(x, dtype=x.dtype)


def segmented_reduce(x: np.ndarray, offsets: np.ndarray, op: str = "sum") -> np.ndarray:
    """``out[i]`` = fold of ``x[offsets[i]:offsets[i+1]]``; empty segments give the identity."""
    n_segments = offsets.size - 1
    out = np.full(max(n_segments, 0), identity(op, x.dtype), dtype=x.dtype)
    if n_segments <= 0:
        return out
    starts = offsets[:-1].astype(np.intp)
    nonempty = offsets[1:] > offsets[:-1]
    if nonempty.any():
        # reduceat over the non-empty starts only: each segment then runs to the next start, and
        # the last one to offsets[-1] (the slice), exactly the segments asked for.
        out[nonempty] = UFUNCS[op].reduceat(x[: int(offsets[-1])], starts[nonempty], dtype=x.dtype)
    return out


def histogram(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """``counts[b]`` = values v with ``edges[b] <= v < edges[b+1]`` (the last bin also takes
    ``v == edges[-1]``), compared as float64; values outside the edges or NaN are dropped.
    np.histogram's definition, returned as int64."""
    bins = edges.size - 1
    first = edges[0]
    if values.dtype.kind == "i" and float(first).is_integer() and np.array_equal(edges, first + np.arange(bins + 1)):
        # Unit-width integer bins: bincount (no sort). The last bin also takes the last edge.
        shifted = values.astype(np.int64) - np.int64(first)
        keep = (shifted >= 0) & (shifted <= bins)
        counts = np.bincount(np.minimum(shifted[keep], bins - 1), minlength=bins)
        return counts.astype(np.int64, copy=False)
    return np.histogram(values.astype(np.float64), bins=edges)[0].astype(np.int64, copy=False)

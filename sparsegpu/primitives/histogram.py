"""Histograms (kernels/histogram.cu): exact integer counts, per-lane shared-memory columns."""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from sparsegpu._backend import is_device_array
from sparsegpu._kernels import (
    KernelFile,
    blocks_for,
    device_properties,
)
from sparsegpu._validate import ensure_fits
from sparsegpu.primitives._common import (
    DTYPES,
    HIST_BLOCK,
    HIST_BLOCKS_PER_SM,
    HIST_MAX_PER_BLOCK,
    HIST_SHARED_BYTES,
    HIST_VECS,
    _array,
)
from sparsegpu.primitives.reduce import reduce
from sparsegpu.reference import primitives as reference

UNIFORM_EDGES, ARRAY_EDGES, INTEGER_EDGES = 0, 1, 2  # kernels/histogram.cu
GLOBAL_COUNTS, WARP_REPLICAS, LANE_COLUMNS = 0, 1, 2  # kernels/histogram.cu
HISTOGRAM_KERNELS = KernelFile(
    "histogram.cu",
    [f"histogram_counts<{{V}}, {e}, {c}>" for e in (UNIFORM_EDGES, ARRAY_EDGES, INTEGER_EDGES)
     for c in (GLOBAL_COUNTS, WARP_REPLICAS, LANE_COLUMNS)],
    DTYPES,
    (np.int32,),
)
_EXACT_DOUBLES = 2**53


def _bin_count(bins: Any) -> int:
    if isinstance(bins, (bool, np.bool_)):
        raise TypeError("bins must be an int or an array of bin edges, not a bool")
    try:
        count = operator.index(bins)
    except TypeError:
        raise TypeError(f"bins must be an int or an array of bin edges, got {type(bins).__name__}") from None
    if count <= 0:
        raise ValueError(f"bins must be positive, got {count}")
    return count


def _outer_edges(values: Any, range: Any) -> tuple[float, float]:
    """np.histogram's outer edges: ``range``, or the data's min and max; equal ends widen by 0.5."""
    if range is None:
        if values.size == 0:
            lo, hi = 0.0, 1.0
        else:
            lo, hi = float(reduce(values, "min")), float(reduce(values, "max"))
            if not (np.isfinite(lo) and np.isfinite(hi)):
                raise ValueError(f"autodetected range of [{lo}, {hi}] is not finite; pass range=(lo, hi)")
    else:
        try:
            lo, hi = (float(v) for v in range)
        except (TypeError, ValueError):
            raise ValueError(f"range must be a pair (lo, hi), got {range!r}") from None
        if not (np.isfinite(lo) and np.isfinite(hi)):
            raise ValueError(f"range must be finite, got ({lo}, {hi})")
        if lo > hi:
            raise ValueError(f"range must have lo <= hi, got ({lo}, {hi})")
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    return lo, hi


def histogram(values: Any, bins: Any, range: tuple[float, float] | None = None) -> Any:
    """Counts of ``values`` per bin: ``np.histogram(values, bins, range)[0]``.

    Parameters
    ----------
    values : array_like
        1-D NumPy or CuPy array of int32, int64, float32 or float64, compared as float64.
        Values outside the edges, and NaN, are dropped (not clipped), as np.histogram does.
    bins : int or array_like
        A positive int, for that many equal-width bins over ``range``, or an array of bin
        edges (non-decreasing, at least two). Bin b holds ``edges[b] <= v < edges[b+1]``; the
        last bin also holds ``v == edges[-1]``.
    range : (float, float), optional
        Outer edges for an integer ``bins`` (default: the values' min and max, widened by 0.5
        each way when equal, as in np.histogram). Must be None with bin edges.

    Returns
    -------
    ndarray of int64
        The counts, on ``values``' backend.

    Raises
    ------
    ValueError
        ``values`` not 1-D; ``bins`` not positive; edges not 1-D, fewer than two, decreasing or
        NaN; ``range`` given with edges, not a finite pair with lo <= hi, or (by default)
        values that are not finite; counts that cannot fit in memory.
    TypeError
        ``values`` of an unsupported dtype; ``bins`` neither an int nor an array (a bool or a
        float is refused).

    Notes
    -----
    On the GPU, per-block histograms in shared memory are merged once into the global counts
    (integer atomics: exact). Up to 384 bins, each lane counts in its own column of the block's
    table, so neither random nor all-equal keys collide in a bank; more bins share one table
    per warp; bins that do not fit in shared memory count in global memory.

    Examples
    --------
    >>> import numpy as np
    >>> histogram(np.array([0, 1, 1, 3, 9], dtype=np.int32), 4, range=(0, 4)).tolist()
    [1, 2, 0, 1]
    """
    values = _array("values", values)
    if isinstance(bins, (list, tuple)) or getattr(bins, "ndim", 0) >= 1:
        if range is not None:
            raise ValueError("range applies to an integer number of bins; with bin edges, leave it None")
        edges = np.asarray(bins.get() if is_device_array(bins) else bins, dtype=np.float64)
        if edges.ndim != 1 or edges.size < 2:
            raise ValueError(f"bin edges must be 1-D with at least two entries, got shape {edges.shape}")
        if np.isnan(edges).any() or bool((edges[1:] < edges[:-1]).any()):
            raise ValueError("bin edges must be non-decreasing (and not NaN)")
        if not is_device_array(values):
            return reference.histogram(values, edges)
        return _histogram_gpu(values, edges.size - 1, edges, None)
    count = _bin_count(bins)
    on_device = is_device_array(values)
    # The counts (and on the host the edges): 8 bytes a bin each.
    ensure_fits((8 if on_device else 16) * (count + 1), f"a histogram of {count} bins", "gpu" if on_device else "cpu")
    lo, hi = _outer_edges(values, range)
    if not on_device:
        return reference.histogram(values, np.linspace(lo, hi, count + 1))
    return _histogram_gpu(values, count, None, (lo, hi))


def _histogram_gpu(values: Any, bins: int, edges: np.ndarray | None, uniform: tuple[float, float] | None) -> Any:
    """Counts into ``bins`` equal-width bins over ``uniform`` = (lo, hi) (the kernel computes
    np.linspace's edges itself), or into the bins between ``edges``."""
    import cupy


    n = values.size
    counts = cupy.zeros(bins, dtype=np.uint64)
    if n == 0:
        return counts.view(np.int64)
    lo_int = hi_int = width_int = 0
    if uniform is not None:
        lo, hi = uniform
        step, norm, edge_array = (hi - lo) / bins, bins / (hi - lo), values  # edge_array unused
        edge_bytes = 0
        mode = UNIFORM_EDGES
        if values.dtype.kind == "i" and lo.is_integer() and hi.is_integer() and max(abs(lo), abs(hi)) < _EXACT_DOUBLES:
            lo_int, hi_int = int(lo), int(hi)
            if (hi_int - lo_int) % bins == 0:
                # Integer edges lo + b * width: exact in doubles, so integer arithmetic finds
                # the same bins as the comparisons would.
                mode, width_int = INTEGER_EDGES, (hi_int - lo_int) // bins
    else:
        lo, hi, step, norm = float(edges[0]), float(edges[-1]), 0.0, 0.0
        edge_array = cupy.asarray(edges)
        edge_bytes = edges.nbytes
        mode = ARRAY_EDGES
    # Shared-memory tables (kernels/histogram.cu): a column per lane when 32 of them fit (no bank
    # conflicts, equal keys included), else up to one table per warp, else global counts.
    per_table = 4 * bins
    if edge_bytes + 32 * per_table <= HIST_SHARED_BYTES:
        counts_mode, tables = LANE_COLUMNS, 32
    elif edge_bytes + per_table <= HIST_SHARED_BYTES:
        counts_mode, tables = WARP_REPLICAS, min(HIST_BLOCK // 32, (HIST_SHARED_BYTES - edge_bytes) // per_table)
    else:
        counts_mode, tables = GLOBAL_COUNTS, 0
    vectors = -(-n // (16 // values.dtype.itemsize))
    blocks = min(blocks_for(vectors, HIST_BLOCK * HIST_VECS), HIST_BLOCKS_PER_SM * device_properties()["multiprocessors"])
    blocks = max(blocks, -(-n // HIST_MAX_PER_BLOCK))
    kernel = HISTOGRAM_KERNELS.function(f"histogram_counts<{{V}}, {mode}, {counts_mode}>", values.dtype)
    kernel(
        (blocks,), (HIST_BLOCK,),
        (values, np.int64(n), edge_array, np.int64(bins), np.float64(lo), np.float64(hi), np.float64(step),
         np.float64(norm), np.int64(lo_int), np.int64(hi_int), np.int64(width_int), np.int32(max(tables, 1)), counts),
        shared_mem=(edge_bytes + tables * per_table) if counts_mode != GLOBAL_COUNTS else 0,
    )
    return counts.view(np.int64)


"""Reductions and segmented reductions (kernels/reduce.cu): a fixed order, no atomics."""

from __future__ import annotations

from typing import Any

import numpy as np

from sparsegpu._backend import is_device_array
from sparsegpu._kernels import (
    KernelFile,
    blocks_for,
    device_properties,
)
from sparsegpu.primitives._common import (
    _OP_TYPES,
    DTYPES,
    LONG_BLOCK,
    LONG_CHUNK,
    OPS,
    REDUCE_BLOCK,
    REDUCE_BLOCKS_PER_SM,
    REDUCE_VECS,
    SEGMENT_BLOCK,
    THREADS_PER_SEGMENT,
    _array,
    _offsets,
    _op,
)
from sparsegpu.primitives.pointers import expand_pointers
from sparsegpu.primitives.scan import inclusive_scan
from sparsegpu.reference import primitives as reference

REDUCE_KERNELS = {
    op: KernelFile("reduce.cu", [f"reduce_partials<{{V}}, {_OP_TYPES[op]}, {REDUCE_VECS}>",
                                 f"reduce_final<{{V}}, {_OP_TYPES[op]}>"], DTYPES, (np.int32,))
    for op in OPS
}
SEGMENTED_REDUCE_KERNELS = {
    op: KernelFile(
        "reduce.cu",
        [f"segmented_reduce_segments<{{V}}, {{I}}, {_OP_TYPES[op]}, {t}>" for t in THREADS_PER_SEGMENT]
        + [f"segmented_reduce_chunks<{{V}}, {{I}}, {_OP_TYPES[op]}>", f"segmented_reduce_finish<{{V}}, {{I}}, {_OP_TYPES[op]}>"],
        DTYPES,
        (np.int32, np.int64),
    )
    for op in OPS
}


def reduce(x: Any, op: str = "sum") -> Any:
    """The fold of ``x`` with ``op``, in ``x``'s dtype.

    Parameters
    ----------
    x : array_like
        1-D NumPy or CuPy array of int32, int64, float32 or float64.
    op : {"sum", "min", "max"}, optional
        The operator (default "sum"). Min and max propagate NaN as NumPy does.

    Returns
    -------
    numpy scalar or cupy.ndarray
        A NumPy scalar for NumPy input; a 0-d CuPy array for CuPy input (no host
        synchronisation). An empty ``x`` gives the identity (0; the dtype's largest value or
        inf for min; its smallest or -inf for max), where NumPy would raise for min and max.
        Integer sums wrap. On the GPU the fold runs in a fixed order (two launches, no
        atomics): bitwise reproducible run to run.

    Raises
    ------
    ValueError
        ``x`` is not 1-D; ``op`` is not one of "sum", "min", "max".
    TypeError
        ``x`` has an unsupported dtype.

    Examples
    --------
    >>> import numpy as np
    >>> int(reduce(np.array([4, -2, 7], dtype=np.int32), "min"))
    -2
    """
    x = _array("x", x)
    op = _op(op)
    if not is_device_array(x):
        return reference.reduce(x, op)
    import cupy


    n, dtype = x.size, x.dtype
    out = cupy.empty((), dtype)
    if n == 0:
        out.fill(reference.identity(op, dtype))
        return out
    kernels, o = REDUCE_KERNELS[op], _OP_TYPES[op]
    vectors = -(-n // (16 // dtype.itemsize))
    blocks = min(blocks_for(vectors, REDUCE_BLOCK * REDUCE_VECS), REDUCE_BLOCKS_PER_SM * device_properties()["multiprocessors"])
    partials_kernel = kernels.function(f"reduce_partials<{{V}}, {o}, {REDUCE_VECS}>", dtype)
    if blocks == 1:
        partials_kernel((1,), (REDUCE_BLOCK,), (x, np.int64(n), out))
        return out
    partials = cupy.empty(blocks, dtype)
    partials_kernel((blocks,), (REDUCE_BLOCK,), (x, np.int64(n), partials))
    kernels.function(f"reduce_final<{{V}}, {o}>", dtype)((1,), (REDUCE_BLOCK,), (partials, np.int64(blocks), out))
    return out


def _threads_per_segment(mean_length: float) -> int:
    """Lanes per segment (a power of two, 1 to 32): the smallest at least a quarter of the mean
    segment length, so each lane folds about four entries."""
    target = max(mean_length / 4.0, 1.0)
    return next((t for t in THREADS_PER_SEGMENT if t >= target), THREADS_PER_SEGMENT[-1])


def segmented_reduce(x: Any, offsets: Any, op: str = "sum") -> Any:
    """``out[i]`` = the fold of ``x[offsets[i]:offsets[i+1]]`` with ``op``, in ``x``'s dtype.

    Parameters
    ----------
    x : array_like
        1-D NumPy or CuPy array of int32, int64, float32 or float64.
    offsets : array_like
        Non-decreasing integers within [0, len(x)] (they need not start at 0 or end at
        len(x)), at least one: ``len(offsets) - 1`` segments. Moved to ``x``'s backend if
        needed.
    op : {"sum", "min", "max"}, optional
        The operator (default "sum").

    Returns
    -------
    ndarray
        One value per segment, on ``x``'s backend. An empty segment gives the operator's
        identity: 0 for sum, the dtype's largest value (inf for floats) for min, its smallest
        (-inf) for max. On the GPU: bitwise reproducible run to run (fixed order, no atomics).

    Raises
    ------
    ValueError
        ``x`` or ``offsets`` not 1-D; ``offsets`` empty, decreasing or outside [0, len(x)];
        an unknown ``op``.
    TypeError
        ``x`` of an unsupported dtype; ``offsets`` not integers.

    Examples
    --------
    >>> import numpy as np
    >>> segmented_reduce(np.array([1, 2, 3, 4], dtype=np.int64), np.array([0, 1, 1, 4])).tolist()
    [1, 0, 9]
    """
    x = _array("x", x)
    op = _op(op)
    offsets = _offsets(offsets, x.size, x, partition=False)
    if not is_device_array(x):
        return reference.segmented_reduce(x, offsets, op)
    return _segmented_reduce_gpu(x, offsets, op)


def _segmented_reduce_gpu(x: Any, offsets: Any, op: str) -> Any:
    import cupy


    n_segments = offsets.size - 1
    out = cupy.empty(n_segments, x.dtype)
    if n_segments == 0:
        return out
    kernels, o = SEGMENTED_REDUCE_KERNELS[op], _OP_TYPES[op]
    index_dtype = offsets.dtype
    span = int(offsets[-1]) - int(offsets[0])
    tps = _threads_per_segment(span / n_segments)
    long_segment = 64 * tps
    kernels.function(f"segmented_reduce_segments<{{V}}, {{I}}, {o}, {tps}>", x.dtype, index_dtype)(
        (blocks_for(n_segments * tps, SEGMENT_BLOCK),), (SEGMENT_BLOCK,),
        (x, offsets, np.int64(n_segments), out, np.int64(long_segment)),
    )
    lengths = offsets[1:] - offsets[:-1]
    long_segments = cupy.flatnonzero(lengths > long_segment).astype(index_dtype)
    n_long = int(long_segments.size)
    if n_long == 0:
        return out
    # Long segments: chunks of LONG_CHUNK entries, one block each, then one warp per segment
    # folds its chunks' partials in order.
    chunk_first = cupy.zeros(n_long + 1, dtype=index_dtype)
    chunk_first[1:] = inclusive_scan((lengths[long_segments] + (LONG_CHUNK - 1)) // LONG_CHUNK)
    n_chunks = int(chunk_first[-1])
    chunk_slot = expand_pointers(chunk_first, cupy)
    partials = cupy.empty(n_chunks, x.dtype)
    kernels.function(f"segmented_reduce_chunks<{{V}}, {{I}}, {o}>", x.dtype, index_dtype)(
        (n_chunks,), (LONG_BLOCK,), (x, offsets, long_segments, chunk_first, chunk_slot, partials))
    kernels.function(f"segmented_reduce_finish<{{V}}, {{I}}, {o}>", x.dtype, index_dtype)(
        (blocks_for(n_long * 32, SEGMENT_BLOCK),), (SEGMENT_BLOCK,), (long_segments, chunk_first, partials, out, np.int64(n_long)))
    return out


# --------------------------------------------------------------------------- histogram

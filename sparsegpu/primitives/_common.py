"""What every primitive shares: supported dtypes and operators, the kernels' tuning constants, and
the argument checks."""

from __future__ import annotations

from typing import Any

import numpy as np

from sparsegpu._backend import is_device_array

DTYPES = tuple(np.dtype(t) for t in (np.int32, np.int64, np.float32, np.float64))
OPS = ("sum", "min", "max")
_OP_TYPES = {"sum": "sg::Sum<{V}>", "min": "sg::Min<{V}>", "max": "sg::Max<{V}>"}
_BOOL = {True: "true", False: "false"}

# kernels/scan.cu's tuning constants that shape results and buffers (tests check they agree).
SCAN_BLOCK = 256  # SCAN_BLOCK
SCAN_THREAD_BYTES = 256  # SCAN_THREAD_BYTES: bytes of values per thread, plain scans
SCAN_SEGMENTED_THREAD_BYTES = 32  # SCAN_SEGMENTED_THREAD_BYTES
LOOKBACK_WARPS = 2  # LOOKBACK_WARPS: the look-back span is 32 * LOOKBACK_WARPS tiles
SCAN_CHUNKS_PER_SM = 3  # reduce-then-scan: blocks per SM (all resident), each scanning a range of tiles
REDUCE_BLOCK = 256  # kernels/reduce.cu REDUCE_BLOCK
REDUCE_VECS = 4  # 16-byte vectors in flight per thread
REDUCE_BLOCKS_PER_SM = 4  # resident at up to 64 registers per thread: no second wave
SEGMENT_BLOCK = 256  # kernels/reduce.cu SEGMENT_BLOCK
LONG_BLOCK = 256  # kernels/reduce.cu LONG_BLOCK
LONG_CHUNK = LONG_BLOCK * 16  # kernels/reduce.cu LONG_CHUNK (LONG_BLOCK * LONG_ITEMS)
THREADS_PER_SEGMENT = (1, 2, 4, 8, 16, 32)
HIST_BLOCK = 256  # kernels/histogram.cu HIST_BLOCK
HIST_VECS = 8  # kernels/histogram.cu HIST_VECS
HIST_BLOCKS_PER_SM = 4  # resident at 64 registers per thread, even with 48 KiB of shared memory each
HIST_SHARED_BYTES = 48 * 1024  # shared memory a block may use without opting in
HIST_MAX_PER_BLOCK = 2**31  # a block's 32-bit shared counters never overflow
# (segmented, vectorised) variants the scan kernels are built for: vector loads only when plain.
_SCAN_LAYOUTS = ((False, True), (False, False), (True, False))

# --------------------------------------------------------------------------- checks


def _array(name: str, x: Any) -> Any:
    """x as a 1-D NumPy or CuPy array of a supported dtype (lists become NumPy arrays)."""
    if not hasattr(x, "dtype") or not hasattr(x, "ndim"):
        x = np.asarray(x)
    if x.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {tuple(x.shape)}")
    if x.dtype not in DTYPES:
        raise TypeError(f"{name} has dtype {x.dtype}; supported: {', '.join(str(d) for d in DTYPES)}")
    return _contiguous(x)


def _contiguous(a: Any) -> Any:
    """The kernels index arrays densely: a strided device view is copied first."""
    if is_device_array(a) and not a.flags.c_contiguous:
        import cupy

        return cupy.ascontiguousarray(a)
    return a


def _xp(x: Any) -> Any:
    if is_device_array(x):
        import cupy

        return cupy
    return np


def _op(op: str) -> str:
    if op not in OPS:
        raise ValueError(f"op must be one of {OPS}, got {op!r}")
    return op


def _same_backend(name: str, a: Any, like: Any) -> Any:
    """``a`` as an array on ``like``'s backend (uploaded or downloaded when needed)."""
    if not hasattr(a, "dtype") or not hasattr(a, "ndim"):
        a = np.asarray(a)
    if is_device_array(like) and not is_device_array(a):
        import cupy

        return cupy.asarray(a)
    if not is_device_array(like) and is_device_array(a):
        return a.get()
    return a


def _offsets(offsets: Any, n: int, like: Any, partition: bool) -> Any:
    """Checked segment offsets: 1-D integers, at least one entry, non-decreasing, within
    [0, n]; with ``partition``, from 0 to n exactly. int32/int64 kept, other integers -> int64."""
    offsets = _same_backend("offsets", offsets, like)
    if offsets.ndim != 1:
        raise ValueError(f"offsets must be 1-D, got shape {tuple(offsets.shape)}")
    if offsets.dtype.kind not in "iu":
        raise TypeError(f"offsets must hold integers, got dtype {offsets.dtype}")
    if offsets.size == 0:
        raise ValueError("offsets must have at least one entry (segment i is offsets[i]:offsets[i+1])")
    if offsets.dtype not in (np.dtype(np.int32), np.dtype(np.int64)):
        if offsets.dtype == np.uint64 and offsets.size and int(offsets.max()) > np.iinfo(np.int64).max:
            raise ValueError("offsets hold values beyond int64")
        offsets = offsets.astype(np.int64)
    offsets = _contiguous(offsets)
    first, last = int(offsets[0]), int(offsets[-1])
    if offsets.size > 1 and bool((offsets[1:] < offsets[:-1]).any()):
        bad = int((offsets[1:] < offsets[:-1]).argmax())
        raise ValueError(f"offsets must be non-decreasing: offsets[{bad + 1}] = {int(offsets[bad + 1])} < offsets[{bad}] = {int(offsets[bad])}")
    if first < 0 or last > n:
        raise ValueError(f"offsets must lie in [0, {n}] (the length of x), got offsets[0] = {first}, offsets[-1] = {last}")
    if partition and (first != 0 or last != n):
        raise ValueError(f"segmented_scan needs offsets from 0 to len(x) = {n}, got {first} to {last}")
    return offsets


# --------------------------------------------------------------------------- scans

"""NumPy references of kernels/scan.cu, kernels/reduce.cu and kernels/histogram.cu.

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
    """``y[i] = x[0] op ... op x[i]``, in x's dtype (reference of ``scan_*<..., INCLUSIVE=true>``)."""
    return UFUNCS[op].accumulate(x, dtype=x.dtype) if x.size else x.copy()


def exclusive_scan(x: np.ndarray, op: str = "sum") -> np.ndarray:
    """``y[0] = identity``, ``y[i] = x[0] op ... op x[i-1]``."""
    y = np.empty_like(x)
    if x.size:
        y[0] = identity(op, x.dtype)
        y[1:] = inclusive_scan(x[:-1], op)
    return y


def ordered_lookback_scan(x: np.ndarray, inclusive: bool = True, *, block: int, thread_bytes: int,
                          span: int) -> np.ndarray:
    """Sum-scan with the exact association of kernels/scan.cu's single pass (``scan_single_pass``,
    plain, ORDERED) with tiles of ``block`` threads x ``thread_bytes`` and a look-back span of
    ``span`` tiles (32 x its polling warps): bitwise that kernel's float32 / float64 results, on
    any machine. No defaults, so a caller cannot silently assume the kernel's knobs:
    :func:`sparsegpu.primitives.ordered_scan_reference` passes the library's (SCAN_BLOCK,
    SCAN_THREAD_BYTES, 32 * LOOKBACK_WARPS).

    Tiles of ``block`` threads x ``thread_bytes`` of items; per thread a left fold of its items;
    per warp a Hillis-Steele scan of the thread totals (shuffle-up distances 1, 2, ..., 16);
    per block the same over the warp totals, whose last entry is the tile total a_t. Tile
    prefixes (see :func:`ordered_tile_prefixes`): E_t = fold of [P_{t-span}, a_{t-span+1}, ...,
    a_{t-1}] by a fixed tree, P_t = E_t + a_t, P_0 = a_0. Then each thread adds its items one by
    one to E_t + its in-tile prefix (tile 0: to its in-tile prefix). Items past the end are 0.

    >>> ordered_lookback_scan(np.array([1.0, 2.0, 3.0]), block=256, thread_bytes=128, span=256).tolist()
    [1.0, 3.0, 6.0]
    """
    if span <= 0 or span % 32:
        raise ValueError(f"span must be a positive multiple of 32 (32 x the polling warps), got {span}")
    if block <= 0 or block % 32 or thread_bytes <= 0 or thread_bytes % 16:
        raise ValueError(f"block must be whole warps and thread_bytes whole 16-byte vectors, got {block} and {thread_bytes}")
    dtype, n = x.dtype, x.size
    if n == 0:
        return x.copy()
    items = thread_bytes // dtype.itemsize
    warps = block // 32
    tile = block * items
    n_tiles = -(-n // tile)
    padded = np.zeros(n_tiles * tile, dtype=dtype)
    padded[:n] = x
    values = padded.reshape(n_tiles, warps, 32, items)
    fold = values[..., 0].copy()
    for k in range(1, items):
        fold = fold + values[..., k]

    def hillis_steele(a: np.ndarray, lanes: int) -> np.ndarray:
        d = 1
        while d < lanes:
            shifted = a.copy()
            shifted[..., d:] = a[..., :-d] + a[..., d:]
            a, d = shifted, 2 * d
        return a

    in_warp = hillis_steele(fold, 32)
    warp_scan = hillis_steele(in_warp[..., 31], warps)  # (tiles, warps), inclusive
    before_in_warp = np.zeros_like(in_warp)
    before_in_warp[..., 1:] = in_warp[..., :-1]
    thread_prefix = before_in_warp.copy()  # warp 0: 0 at lane 0, else the lane before's sum
    thread_prefix[:, 1:, 0] = warp_scan[:, :-1]
    thread_prefix[:, 1:, 1:] = warp_scan[:, :-1, None] + before_in_warp[:, 1:, 1:]
    tile_prefix = ordered_tile_prefixes(warp_scan[:, -1], span)
    start = thread_prefix.copy()
    start[1:] = tile_prefix[1:, None, None] + thread_prefix[1:]
    running = np.add.accumulate(np.concatenate([start[..., None], values], axis=-1), axis=-1, dtype=dtype)
    out = running[..., 1:] if inclusive else running[..., :-1]
    return np.ascontiguousarray(out).reshape(-1)[:n]


def ordered_tile_prefixes(totals: np.ndarray, span: int) -> np.ndarray:
    """The exclusive tile prefixes E_t of kernels/scan.cu's ordered look-back, from the tile
    totals a_t (E_0 = 0; the kernel's tile 0 uses none).

    E_t folds the span entries u = [P_{t-span}, a_{t-span+1}, ..., a_{t-1}] (0 before tile 0),
    with P_s = E_s + a_s and P_0 = a_0: a balanced pairwise tree over each 32 consecutive
    entries (u_0 + u_1, u_2 + u_3, ..., then pairs of those: one warp's shuffle tree), then
    those span / 32 results left to right. A tile waits only for P_{t-span}, so the GPU's
    prefixes advance span tiles per look-back, and the sum is fixed whatever the timing.

    >>> ordered_tile_prefixes(np.array([1.0, 2.0, 3.0, 4.0]), span=32).tolist()
    [0.0, 1.0, 3.0, 6.0]
    """
    dtype, n_tiles = totals.dtype, totals.size
    exclusive = np.zeros(n_tiles, dtype=dtype)
    inclusive = np.zeros(n_tiles, dtype=dtype)
    if n_tiles == 0:
        return exclusive
    inclusive[0] = totals[0]
    shifted = np.concatenate([np.zeros(span, dtype=dtype), totals])  # shifted[s + span] = a_s
    for first in range(1, n_tiles, span):  # these tiles need only P of earlier rounds
        tiles = np.arange(first, min(first + span, n_tiles))
        u = np.empty((tiles.size, span), dtype=dtype)
        far = tiles - span
        u[:, 0] = np.where(far >= 0, inclusive[np.maximum(far, 0)], dtype.type(0))
        u[:, 1:] = shifted[tiles[:, None] + np.arange(1, span)]
        windows = u.reshape(tiles.size, span // 32, 32)
        while windows.shape[-1] > 1:
            windows = windows[..., 0::2] + windows[..., 1::2]
        e = windows[:, 0, 0].copy()
        for w in range(1, span // 32):
            e = e + windows[:, w, 0]
        exclusive[tiles] = e
        inclusive[tiles] = e + totals[tiles]
    return exclusive


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

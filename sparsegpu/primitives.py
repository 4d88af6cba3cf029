"""Data-parallel primitives: scans, segmented scans, reductions, segmented reductions, histograms.

NumPy in gives NumPy out (the twins in :mod:`sparsegpu.reference.primitives`); CuPy in gives CuPy
out (kernels/scan.cu, kernels/reduce.cu, kernels/histogram.cu). Supported dtypes: int32, int64,
float32, float64; results keep the input dtype, so integer sums wrap on overflow exactly as
NumPy does with ``dtype=x.dtype`` (an int32 scan of large values wraps: pass int64 to avoid it).

Operators are objects, not kernel copies: ``op="sum" | "min" | "max"`` picks ``sg::Sum``,
``sg::Min`` or ``sg::Max``, a template parameter of one kernel family per primitive. Min and max
propagate NaN as NumPy does.

Reproducibility on the GPU: reductions fold in a fixed order (two launches, no atomics) and are
bitwise identical run to run on a given device. Integer scans use a single-pass decoupled
look-back scan (exact). Float scans are bitwise reproducible by default: a single pass whose
look-back adds the tile totals in a fixed association (an "ordered look-back": tile t's prefix
is the prefix of tile t - span (span = 32 * :data:`LOOKBACK_WARPS` tiles) plus a fixed tree of
the tile totals between, the same sum whatever the timing; :func:`ordered_scan_twin` computes
the same bits on the host);
:data:`DETERMINISTIC_FLOAT_SCAN` =
``"reduce-then-scan"`` selects the older reproducible path (three launches, x read twice).
With ``sparsegpu.options(deterministic=False)`` float scans take the plain look-back, whose
association of predecessors depends on timing, so the last bits can change run to run.
Histograms count with integer atomics and are exact.

>>> import numpy as np
>>> from sparsegpu import primitives as P
>>> P.inclusive_scan(np.array([1, 2, 3, 4], dtype=np.int32)).tolist()
[1, 3, 6, 10]
>>> P.segmented_reduce(np.arange(6.0), np.array([0, 2, 2, 6]), op="max").tolist()
[1.0, -inf, 5.0]
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from sparsegpu._backend import deterministic, is_device_array
from sparsegpu._kernels import KernelFile, allow_dynamic_shared, blocks_for
from sparsegpu.reference import primitives as twin

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
#: How float scans stay bitwise reproducible (the default, deterministic mode):
#: "ordered-lookback" (one pass; each tile's prefix is the prefix of the tile 32 * LOOKBACK_WARPS
#: back plus a fixed tree of the tile totals between, which gives the same bits whatever the
#: timing; see kernels/scan.cu) or "reduce-then-scan" (three launches, x read twice).
DETERMINISTIC_FLOAT_SCAN = "ordered-lookback"
#: Integer scans are exact in any association, so they take the look-back that is faster: False
#: the plain one (the nearest inclusive prefix, or whole spans of aggregates), True the ordered
#: one (each tile waits for one inclusive prefix, 32 * LOOKBACK_WARPS tiles back). The ordered
#: one: int32 at 2^28, 64 KiB tiles, two polling warps, 87% of copy against 84% (H200, fifth
#: session, asv_benchmarks/measured/h200_2026-11-21_s5_scan_sweep.txt).
ORDERED_LOOKBACK_FOR_INTEGERS = True
# (segmented, vectorised) variants the scan kernels are built for: vector loads only when plain.
_SCAN_LAYOUTS = ((False, True), (False, False), (True, False))


def _scan_expressions(op: str) -> list[str]:
    o = _OP_TYPES[op]
    exprs = [f"scan_chunk_totals<{{V}}, {o}, {_BOOL[s]}, {_BOOL[v]}>" for s, v in _SCAN_LAYOUTS]
    exprs += [f"scan_totals<{{V}}, {o}, {_BOOL[s]}>" for s in (False, True)]
    exprs += [f"scan_chunks<{{V}}, {o}, {_BOOL[i]}, {_BOOL[s]}, {_BOOL[v]}>" for i in (True, False) for s, v in _SCAN_LAYOUTS]
    exprs += [f"scan_single_pass<{{V}}, {o}, {_BOOL[i]}, {_BOOL[s]}, {_BOOL[v]}, {_BOOL[ordered]}>"
              for i in (True, False) for s, v in _SCAN_LAYOUTS for ordered in (True, False)]
    return exprs


# One KernelFile per operator, so a module holds only the operator it is used with.
SCAN_KERNELS = {op: KernelFile("scan.cu", _scan_expressions(op), DTYPES, (np.int32,)) for op in OPS}
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


def inclusive_scan(x: Any, *, op: str = "sum") -> Any:
    """``y[i] = x[0] op x[1] op ... op x[i]`` (a cumulative sum by default), in x's dtype.

    Integer sums wrap on overflow (like ``np.cumsum(x, dtype=x.dtype)``; pass int64 to avoid it).

    On the GPU, every scan is one pass with decoupled look-back (reads x once, writes y once).
    Integer scans are exact. Float scans are bitwise reproducible by default: the look-back
    adds the tile totals in a fixed association, so each tile's prefix is the same sum
    whatever the timing. With ``sparsegpu.options(deterministic=False)`` the look-back joins
    its predecessors as they come: the association, and so the last bits, can differ run to
    run. ``DETERMINISTIC_FLOAT_SCAN = "reduce-then-scan"`` makes the default float path the
    older three-launch scan (x read twice), reproducible as well.

    >>> import numpy as np
    >>> inclusive_scan(np.array([3.0, 1.0, 2.0]), op="max").tolist()
    [3.0, 3.0, 3.0]
    """
    x = _array("x", x)
    op = _op(op)
    if not is_device_array(x):
        return twin.inclusive_scan(x, op)
    return _scan_gpu(x, None, op, inclusive=True)


def exclusive_scan(x: Any, *, op: str = "sum") -> Any:
    """``y[0]`` = the operator's identity, ``y[i] = x[0] op ... op x[i-1]``, in x's dtype.

    >>> import numpy as np
    >>> exclusive_scan(np.array([1, 2, 3], dtype=np.int64)).tolist()
    [0, 1, 3]
    """
    x = _array("x", x)
    op = _op(op)
    if not is_device_array(x):
        return twin.exclusive_scan(x, op)
    return _scan_gpu(x, None, op, inclusive=False)


def segmented_scan(x: Any, offsets: Any = None, *, flags: Any = None, inclusive: bool = True, op: str = "sum") -> Any:
    """A scan restarted at every segment's start.

    Segments are given either by ``offsets`` (segment i is ``x[offsets[i]:offsets[i+1]]``;
    offsets run from 0 to ``len(x)``, empty segments allowed) or by head ``flags`` (length
    ``len(x)``, nonzero where a segment starts; element 0 always starts one). Exclusive scans
    give the identity at each segment's first element.

    >>> import numpy as np
    >>> segmented_scan(np.array([1, 2, 3, 4, 5]), np.array([0, 2, 2, 5])).tolist()
    [1, 3, 3, 7, 12]
    >>> segmented_scan(np.ones(4), flags=np.array([0, 0, 1, 0]), inclusive=False).tolist()
    [0.0, 1.0, 0.0, 1.0]
    """
    x = _array("x", x)
    op = _op(op)
    if (offsets is None) == (flags is None):
        raise ValueError("give exactly one of offsets or flags")
    n = x.size
    xp = _xp(x)
    if offsets is not None:
        offsets = _offsets(offsets, n, x, partition=True)
        heads = xp.zeros(n + 1, dtype=np.uint8)
        heads[offsets] = 1  # offsets[-1] == n lands in the spare slot
        heads = heads[:n]
    else:
        flags = _same_backend("flags", flags, x)
        if flags.ndim != 1 or flags.size != n:
            raise ValueError(f"flags must be 1-D of length {n} like x, got shape {tuple(flags.shape)}")
        if flags.dtype.kind not in "biu":
            raise TypeError(f"flags must be boolean or integer, got dtype {flags.dtype}")
        heads = (flags != 0).view(np.uint8)
    if not is_device_array(x):
        return twin.segmented_scan(x, heads, inclusive, op)
    return _scan_gpu(x, heads, op, inclusive=inclusive)


def ordered_scan_twin(x: np.ndarray, inclusive: bool = True) -> np.ndarray:
    """On the host, the bits of the GPU's default float sum-scan (the single pass with the
    ordered look-back): :func:`sparsegpu.reference.primitives.ordered_lookback_scan` told
    kernels/scan.cu's tile (SCAN_BLOCK threads of SCAN_THREAD_BYTES) and span
    (32 * LOOKBACK_WARPS tiles). Integers give the exact scan.

    >>> import numpy as np
    >>> ordered_scan_twin(np.array([0.5, 0.25, 2.0]), inclusive=False).tolist()
    [0.0, 0.5, 0.75]
    """
    return twin.ordered_lookback_scan(x, inclusive, block=SCAN_BLOCK, thread_bytes=SCAN_THREAD_BYTES,
                                      span=32 * LOOKBACK_WARPS)


def _items_per_thread(dtype: np.dtype, segmented: bool) -> int:
    """kernels/scan.cu scan_items: SCAN_THREAD_BYTES of values per thread
    (SCAN_SEGMENTED_THREAD_BYTES for segmented pairs)."""
    return (SCAN_SEGMENTED_THREAD_BYTES if segmented else SCAN_THREAD_BYTES) // np.dtype(dtype).itemsize


def _scan_shared_bytes(segmented: bool, thread_bytes: int = SCAN_THREAD_BYTES) -> int:
    """Dynamic shared memory of a scan kernel's block (kernels/scan.cu SCAN_SHARED_TILE): the
    plain tile, SCAN_BLOCK threads of ``thread_bytes``; segmented tiles stay in registers."""
    return 0 if segmented else SCAN_BLOCK * thread_bytes


class _LookbackState:
    """The single-pass scan's look-back state on one device and stream (kernels/scan.cu):
    a control word (epoch, ticket) and two descriptors per tile (aggregate, inclusive prefix). Zeroed once when allocated; each
    launch leaves it ready for the next (new epoch, ticket 0), so no memset per call."""

    def __init__(self, words: int) -> None:
        import cupy

        self.words = cupy.zeros(words, dtype=np.uint64)
        self.launches = 0


_LOOKBACK_STATES: dict[tuple[int, int], _LookbackState] = {}
#: Launches after which a state buffer is replaced by a fresh zeroed one: the kernels tag
#: descriptors with 30 bits of the launch's epoch, so a stale descriptor can never look current.
LOOKBACK_LAUNCHES_PER_STATE = 2**29


def _lookback_state(n_tiles: int, descriptor_words: int) -> Any:
    """The current stream's look-back state, with room for ``n_tiles`` tiles' two descriptors
    of ``descriptor_words`` words each (one state per device and stream: launches on one
    stream run in order, so they can share it)."""
    import cupy

    key = (cupy.cuda.runtime.getDevice(), cupy.cuda.get_current_stream().ptr)
    words = 1 + n_tiles * 2 * descriptor_words
    state = _LOOKBACK_STATES.get(key)
    if state is None or state.words.size < words or state.launches >= LOOKBACK_LAUNCHES_PER_STATE:
        # Grown by powers of two so a run of growing inputs allocates a few times only.
        state = _LookbackState(1 << max(words - 1, 1).bit_length())
        _LOOKBACK_STATES[key] = state
    state.launches += 1
    return state.words


def _scan_gpu(x: Any, heads: Any, op: str, inclusive: bool) -> Any:
    import cupy

    from sparsegpu._kernels import device_properties

    n, dtype = x.size, x.dtype
    y = cupy.empty(n, dtype)
    if n == 0:
        return y
    segmented = heads is not None
    tile = SCAN_BLOCK * _items_per_thread(dtype, segmented)
    n_tiles = -(-n // tile)
    vectorised = not segmented and x.data.ptr % 16 == 0 and y.data.ptr % 16 == 0
    layout = f"{_BOOL[segmented]}, {_BOOL[vectorised]}"
    kernels, o = SCAN_KERNELS[op], _OP_TYPES[op]
    heads_arg = heads if segmented else x  # unused by plain scans
    # The kernels' per-tile value is V, or Flagged<V> {V, int} (twice V's size) when segmented.
    state = 2 if segmented else 1
    shared = _scan_shared_bytes(segmented)
    # Integer scans are exact in any association; one tile never looks back.
    if dtype.kind == "i":
        unordered = n_tiles == 1 or not ORDERED_LOOKBACK_FOR_INTEGERS
    else:
        unordered = n_tiles == 1 or not deterministic()
    if DETERMINISTIC_FLOAT_SCAN not in ("reduce-then-scan", "ordered-lookback"):
        raise ValueError(f"DETERMINISTIC_FLOAT_SCAN must be 'reduce-then-scan' or 'ordered-lookback', "
                         f"not {DETERMINISTIC_FLOAT_SCAN!r}")
    if unordered or dtype.kind == "i" or DETERMINISTIC_FLOAT_SCAN == "ordered-lookback":
        # Descriptor words: 32 bits of the tile's value per 64-bit word (kernels/scan.cu).
        words = _lookback_state(n_tiles, state * dtype.itemsize // 4)
        kernel = kernels.function(
            f"scan_single_pass<{{V}}, {o}, {_BOOL[inclusive]}, {layout}, {_BOOL[not unordered]}>", dtype)
        allow_dynamic_shared(kernel, shared)((n_tiles,), (SCAN_BLOCK,), (x, heads_arg, y, np.int64(n), words),
                                      shared_mem=shared)
        return y
    chunks = min(n_tiles, SCAN_CHUNKS_PER_SM * device_properties()["multiprocessors"])
    per_chunk = -(-n_tiles // chunks)
    chunks = -(-n_tiles // per_chunk)
    totals = cupy.empty(chunks * state, dtype)
    allow_dynamic_shared(kernels.function(f"scan_chunk_totals<{{V}}, {o}, {layout}>", dtype), shared)(
        (chunks,), (SCAN_BLOCK,), (x, heads_arg, np.int64(n), np.int64(per_chunk), totals), shared_mem=shared)
    kernels.function(f"scan_totals<{{V}}, {o}, {_BOOL[segmented]}>", dtype)(
        (1,), (SCAN_BLOCK,), (totals, np.int64(chunks)))
    allow_dynamic_shared(kernels.function(f"scan_chunks<{{V}}, {o}, {_BOOL[inclusive]}, {layout}>", dtype), shared)(
        (chunks,), (SCAN_BLOCK,), (x, heads_arg, y, np.int64(n), np.int64(per_chunk), totals), shared_mem=shared)
    return y


# --------------------------------------------------------------------------- reductions


def reduce(x: Any, op: str = "sum") -> Any:
    """The fold of x with ``op`` ("sum", "min" or "max"), in x's dtype.

    Returns a NumPy scalar for NumPy input and a 0-d CuPy array for CuPy input (no host
    synchronisation). An empty x gives the identity (0, the dtype's largest value or inf for
    min, its smallest or -inf for max), where NumPy would raise for min and max. Integer sums
    wrap. On the GPU: bitwise reproducible run to run.

    >>> import numpy as np
    >>> int(reduce(np.array([4, -2, 7], dtype=np.int32), "min"))
    -2
    """
    x = _array("x", x)
    op = _op(op)
    if not is_device_array(x):
        return twin.reduce(x, op)
    import cupy

    from sparsegpu._kernels import device_properties

    n, dtype = x.size, x.dtype
    out = cupy.empty((), dtype)
    if n == 0:
        out.fill(twin.identity(op, dtype))
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
    """``out[i]`` = fold of ``x[offsets[i]:offsets[i+1]]`` with ``op``, in x's dtype.

    ``offsets`` is non-decreasing within [0, len(x)] (it need not start at 0 or end at len(x));
    there are ``len(offsets) - 1`` segments. An empty segment gives the operator's identity:
    0 for sum, the dtype's largest value (inf for floats) for min, its smallest (-inf) for max.
    On the GPU: bitwise reproducible run to run (fixed order, no atomics).

    >>> import numpy as np
    >>> segmented_reduce(np.array([1, 2, 3, 4], dtype=np.int64), np.array([0, 1, 1, 4])).tolist()
    [1, 0, 9]
    """
    x = _array("x", x)
    op = _op(op)
    offsets = _offsets(offsets, x.size, x, partition=False)
    if not is_device_array(x):
        return twin.segmented_reduce(x, offsets, op)
    return _segmented_reduce_gpu(x, offsets, op)


def _segmented_reduce_gpu(x: Any, offsets: Any, op: str) -> Any:
    import cupy

    from sparsegpu.convert import expand_pointers

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
    """Counts of ``values`` per bin, as int64 (NumPy for NumPy input, CuPy for CuPy input).

    ``bins``: a positive int, for that many equal-width bins over ``range`` (default: the
    values' min and max, as in np.histogram), or an array of bin edges (non-decreasing, at
    least two; ``range`` must then be None). Bin b holds ``edges[b] <= v < edges[b+1]``; the
    last bin also holds ``v == edges[-1]``. Values are compared as float64. Values outside the
    edges, and NaN, are dropped (not clipped), as np.histogram does. Only the counts are
    returned (``np.histogram(values, bins, range)[0]``).

    On the GPU, per-block histograms in shared memory merged once into the global counts
    (integer atomics: exact). Up to 384 bins, each lane counts in its own column of the block's
    table, so neither random nor all-equal keys collide in a bank; more bins share one table
    per warp; bins that do not fit in shared memory count in global memory.

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
            return twin.histogram(values, edges)
        return _histogram_gpu(values, edges.size - 1, edges, None)
    count = _bin_count(bins)
    lo, hi = _outer_edges(values, range)
    if not is_device_array(values):
        return twin.histogram(values, np.linspace(lo, hi, count + 1))
    return _histogram_gpu(values, count, None, (lo, hi))


def _histogram_gpu(values: Any, bins: int, edges: np.ndarray | None, uniform: tuple[float, float] | None) -> Any:
    """Counts into ``bins`` equal-width bins over ``uniform`` = (lo, hi) (the kernel computes
    np.linspace's edges itself), or into the bins between ``edges``."""
    import cupy

    from sparsegpu._kernels import device_properties

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


__all__ = [
    "exclusive_scan",
    "histogram",
    "inclusive_scan",
    "ordered_scan_twin",
    "reduce",
    "segmented_reduce",
    "segmented_scan",
]

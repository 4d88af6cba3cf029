"""Scans and segmented scans (kernels/scan.cu): one pass of decoupled look-back over 64 KiB tiles."""

from __future__ import annotations

from typing import Any

import numpy as np

from sparsegpu._backend import deterministic, is_device_array
from sparsegpu._kernels import (
    KernelFile,
    allow_dynamic_shared,
    device_properties,
)
from sparsegpu.primitives._common import (
    _BOOL,
    _OP_TYPES,
    _SCAN_LAYOUTS,
    DTYPES,
    LOOKBACK_WARPS,
    OPS,
    SCAN_BLOCK,
    SCAN_CHUNKS_PER_SM,
    SCAN_SEGMENTED_THREAD_BYTES,
    SCAN_THREAD_BYTES,
    _array,
    _offsets,
    _op,
    _same_backend,
    _xp,
)
from sparsegpu.reference import primitives as reference

#: How float scans stay bitwise reproducible (the default, deterministic mode):
#: "ordered-lookback" (one pass; each tile's prefix is the prefix of the tile 32 * LOOKBACK_WARPS
#: back plus a fixed tree of the tile totals between, which gives the same bits whatever the
#: timing; see kernels/scan.cu) or "reduce-then-scan" (three launches, x read twice).
DETERMINISTIC_FLOAT_SCAN = "ordered-lookback"
#: Integer scans are exact in any association, so they take the look-back that is faster: False
#: the plain one (the nearest inclusive prefix, or whole spans of aggregates), True the ordered
#: one (each tile waits for one inclusive prefix, 32 * LOOKBACK_WARPS tiles back). The ordered
#: one is faster (measured on an H200, see docs/performance.md).
ORDERED_LOOKBACK_FOR_INTEGERS = True


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


def inclusive_scan(x: Any, *, op: str = "sum") -> Any:
    """The inclusive scan ``y[i] = x[0] op x[1] op ... op x[i]`` (a cumulative sum by default).

    Parameters
    ----------
    x : array_like
        1-D NumPy or CuPy array (a list becomes NumPy) of int32, int64, float32 or float64.
    op : {"sum", "min", "max"}, optional
        The operator (default "sum"). Min and max propagate NaN as NumPy does.

    Returns
    -------
    ndarray
        ``y``, same length and dtype as ``x``, on ``x``'s backend (NumPy in, NumPy out; CuPy in,
        CuPy out). Integer sums wrap on overflow like ``np.cumsum(x, dtype=x.dtype)``: pass
        int64 to avoid it.

    Raises
    ------
    ValueError
        ``x`` is not 1-D; ``op`` is not one of "sum", "min", "max".
    TypeError
        ``x`` has an unsupported dtype.

    Notes
    -----
    On the GPU every scan is one pass with decoupled look-back (x read once, y written once).
    Integer scans are exact. Float scans are bitwise reproducible by default: the look-back adds
    the tile totals in a fixed association, so each tile's prefix is the same sum whatever the
    timing. With ``sparsegpu.options(deterministic=False)`` the look-back joins its predecessors
    as they come, so the last bits can differ run to run. ``DETERMINISTIC_FLOAT_SCAN =
    "reduce-then-scan"`` selects the three-launch scan (x read twice), reproducible as well.

    Examples
    --------
    >>> import numpy as np
    >>> inclusive_scan(np.array([3.0, 1.0, 2.0]), op="max").tolist()
    [3.0, 3.0, 3.0]
    """
    x = _array("x", x)
    op = _op(op)
    if not is_device_array(x):
        return reference.inclusive_scan(x, op)
    return _scan_gpu(x, None, op, inclusive=True)


def exclusive_scan(x: Any, *, op: str = "sum") -> Any:
    """The exclusive scan: ``y[0]`` is the operator's identity, ``y[i] = x[0] op ... op x[i-1]``.

    The identity is 0 for sum, the dtype's largest value (inf for floats) for min and its
    smallest (-inf) for max. The GPU path and its reproducibility are those of
    :func:`inclusive_scan`.

    Parameters
    ----------
    x : array_like
        1-D NumPy or CuPy array (a list becomes NumPy) of int32, int64, float32 or float64.
    op : {"sum", "min", "max"}, optional
        The operator (default "sum"). Min and max propagate NaN as NumPy does.

    Returns
    -------
    ndarray
        ``y``, same length and dtype as ``x``, on ``x``'s backend.

    Raises
    ------
    ValueError
        ``x`` is not 1-D; ``op`` is not one of "sum", "min", "max".
    TypeError
        ``x`` has an unsupported dtype.

    Examples
    --------
    >>> import numpy as np
    >>> exclusive_scan(np.array([1, 2, 3], dtype=np.int64)).tolist()
    [0, 1, 3]
    """
    x = _array("x", x)
    op = _op(op)
    if not is_device_array(x):
        return reference.exclusive_scan(x, op)
    return _scan_gpu(x, None, op, inclusive=False)


def segmented_scan(x: Any, offsets: Any = None, *, flags: Any = None, inclusive: bool = True, op: str = "sum") -> Any:
    """A scan restarted at every segment's start.

    Parameters
    ----------
    x : array_like
        1-D NumPy or CuPy array of int32, int64, float32 or float64.
    offsets : array_like, optional
        Segment i is ``x[offsets[i]:offsets[i+1]]``: non-decreasing integers from 0 to
        ``len(x)``, empty segments allowed. Give either ``offsets`` or ``flags``.
    flags : array_like, optional
        Boolean or integer, length ``len(x)``, nonzero where a segment starts (element 0
        always starts one).
    inclusive : bool, optional
        Inclusive (default) or exclusive scan; an exclusive scan gives the operator's identity
        at each segment's first element.
    op : {"sum", "min", "max"}, optional
        The operator (default "sum").

    Returns
    -------
    ndarray
        Same length and dtype as ``x``, on ``x``'s backend.

    Raises
    ------
    ValueError
        Both or neither of ``offsets`` and ``flags``; offsets not 1-D, decreasing, or not from
        0 to ``len(x)``; ``flags`` of another length; ``x`` not 1-D; an unknown ``op``.
    TypeError
        ``x`` of an unsupported dtype; non-integer ``offsets``; ``flags`` neither boolean nor
        integer.

    Examples
    --------
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
        return reference.segmented_scan(x, heads, inclusive, op)
    return _scan_gpu(x, heads, op, inclusive=inclusive)


def ordered_scan_reference(x: np.ndarray, inclusive: bool = True) -> np.ndarray:
    """The bits of the GPU's default float sum-scan, computed on the host.

    :func:`sparsegpu.reference.primitives.ordered_lookback_scan` told kernels/scan.cu's tile
    (SCAN_BLOCK threads of SCAN_THREAD_BYTES) and look-back span (32 * LOOKBACK_WARPS tiles):
    the same association of the tile totals as the single pass with the ordered look-back.

    Parameters
    ----------
    x : numpy.ndarray
        1-D values; integers give the exact scan.
    inclusive : bool, optional
        Inclusive (default) or exclusive sum-scan.

    Returns
    -------
    numpy.ndarray
        The scan, in ``x``'s dtype.

    Examples
    --------
    >>> import numpy as np
    >>> ordered_scan_reference(np.array([0.5, 0.25, 2.0]), inclusive=False).tolist()
    [0.0, 0.5, 0.75]
    """
    return reference.ordered_lookback_scan(x, inclusive, block=SCAN_BLOCK, thread_bytes=SCAN_THREAD_BYTES,
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

"""Breadth-first search on the GPU (kernels/graph_bfs.cu; NumPy reference: reference.graph_bfs).

One persistent kernel runs the whole traversal, direction-optimising (Beamer's push / pull with
his alpha / beta rule, decided on the device), with a grid barrier between levels and block 0
alone running the levels whose frontier is small: the host launches once and never waits per
level. See kernels/graph_bfs.cu for the scheme and the deterministic predecessor rule.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from sparsegpu._kernels import INDEX_DTYPES, KernelFile, device_properties

BFS_BLOCK = 512  # kernels/graph_bfs.cu BFS_BLOCK
BFS_HUGE_DEGREE = 8 * BFS_BLOCK  # kernels/graph_bfs.cu BFS_HUGE_DEGREE
BFS_CONTROL_WORDS = 32  # kernels/graph_bfs.cu BFS_CONTROL_WORDS
#: Blocks per multiprocessor at most: more blocks make each grid barrier slower.
BFS_BLOCKS_PER_SM = 2
#: Frontiers of at most this many vertices (and kernels/graph_bfs.cu BFS_SMALL_EDGES out-edges)
#: are run by one block, level after level, without grid barriers; at most
#: kernels/graph_bfs.cu BFS_SMALL_FRONTIER (its shared-memory queue); 0 turns this off.
#: One block's worth: on a 1M-vertex road-like graph two blocks' worth (1024) doubled the time
#: of grid levels only, 512 matched it, and on luxembourg_osm (926 levels) 512 took 0.7 of the
#: grid-only time (measured on an H200, see docs/performance.md).
SMALL_FRONTIER = BFS_BLOCK
NO_PREDECESSOR = -9999

# Index-only kernels: the value type is a placeholder (int32), the index type is I.
BFS_KERNELS = KernelFile("graph_bfs.cu", ["bfs_persistent<{I}>"], (np.int32,), INDEX_DTYPES)


def bfs(indptr: Any, indices: Any, source: int, *, in_indptr: Any = None, in_indices: Any = None,
        predecessors: bool = True) -> tuple[Any, Any]:
    """Levels (int32, -1 unreached) and predecessors (index dtype, -9999 none) from ``source``."""
    import cupy

    sources = cupy.asarray(np.array([source], dtype=indptr.dtype)) if indptr.size > 1 else None
    return multi_source_bfs(indptr, indices, sources, in_indptr=in_indptr, in_indices=in_indices,
                            predecessors=predecessors)


def multi_source_bfs(indptr: Any, indices: Any, sources: Any, *, in_indptr: Any = None, in_indices: Any = None,
                     predecessors: bool = True) -> tuple[Any, Any]:
    """:func:`bfs` from every vertex of ``sources`` (distinct, CuPy, index dtype) at level 0."""
    import cupy

    n = indptr.size - 1
    index = indptr.dtype
    if n <= 0:
        return cupy.empty(0, dtype=np.int32), (cupy.empty(0, dtype=index) if predecessors else None)
    if in_indptr is None:
        in_indptr, in_indices = indptr, indices
    sources = sources.astype(index, copy=False)
    levels = cupy.full(n, -1, dtype=np.int32)
    preds = cupy.full(n, np.iinfo(index).max, dtype=index) if predecessors else None
    if sources.size == 0:
        return levels, (cupy.full(n, NO_PREDECESSOR, dtype=index) if predecessors else None)
    queues = cupy.empty((2, n), dtype=index)
    huge = cupy.empty((2, int(indices.size) // BFS_HUGE_DEGREE + 1), dtype=index)
    control = cupy.zeros(BFS_CONTROL_WORDS, dtype=np.int64)
    kernel = BFS_KERNELS.function("bfs_persistent<{I}>", np.int32, index)
    grid = min(_resident_blocks(kernel), max(1, -(-n // BFS_BLOCK)))
    args = (indptr, indices, in_indptr, in_indices, np.int64(n), np.int64(in_indices.size), sources,
            np.int64(sources.size), levels, preds if predecessors else np.uint64(0), queues[0], queues[1],
            huge[0], huge[1], control, np.int64(min(SMALL_FRONTIER, 2 * BFS_BLOCK)))
    _launch_cooperative(kernel, grid, args)
    return levels, preds


def _resident_blocks(kernel: Any) -> int:
    """How many blocks of the BFS kernel are resident at once on this device (at most
    BFS_BLOCKS_PER_SM per multiprocessor): the grid barrier needs every block resident."""
    function = getattr(kernel, "kernel", kernel)  # the driver-level function under a RawKernel
    return _resident_blocks_cached(function.ptr, device_properties()["multiprocessors"], BFS_BLOCKS_PER_SM)


@functools.cache
def _resident_blocks_cached(function_pointer: int, multiprocessors: int, most_per_sm: int) -> int:
    try:
        from cupy.cuda import driver

        per_sm = int(driver.occupancyMaxActiveBlocksPerMultiprocessor(function_pointer, BFS_BLOCK, 0))
    except (ImportError, AttributeError, RuntimeError):  # an older CuPy: one block per multiprocessor always fits
        per_sm = 1
    return multiprocessors * max(1, min(most_per_sm, per_sm))


def _launch_cooperative(kernel: Any, grid: int, args: tuple) -> None:
    """A cooperative launch: the driver refuses it, rather than deadlocking the grid barrier,
    when the blocks cannot all be resident."""
    function = getattr(kernel, "kernel", kernel)  # the driver-level function under a RawKernel
    try:
        function((grid,), (BFS_BLOCK,), args, 0, None, True)  # shared memory, stream, cooperative
    except TypeError:  # a CuPy without cooperative launches: the grid already fits at once
        kernel((grid,), (BFS_BLOCK,), args)


def bfs_order(levels: Any) -> Any:
    """The reached vertices sorted by (level, vertex), index dtype int32."""
    import cupy

    n = levels.size
    if n == 0:
        return cupy.empty(0, dtype=np.int32)
    # Unique keys level * n + vertex (unreached last): the sorted order is the stable counting
    # order by level, whatever the sort.
    vertex = cupy.arange(n, dtype=np.int64)
    level = cupy.where(levels >= 0, levels.astype(np.int64), np.int64(n))
    keys = cupy.sort(level * n + vertex)
    reached = int(cupy.count_nonzero(levels >= 0))
    return (keys[:reached] % n).astype(np.int32)

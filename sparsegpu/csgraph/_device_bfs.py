"""Breadth-first search on the GPU (kernels/graph_bfs.cu; NumPy reference: reference.graph_bfs).

The whole traversal runs on the device, direction-optimising (Beamer's push / pull with his
alpha / beta rule, decided on the device); the host never waits per level. While the frontier is
small, levels run in one block: when the visited bitmap fits one block's shared memory, a
single-block kernel of its own launch alternates with a persistent grid kernel (the host queues
pairs of launches and reads a "finished" word every few pairs); otherwise the persistent kernel
alone runs, block 0 taking the small levels while the others wait. See kernels/graph_bfs.cu for
the scheme and the deterministic predecessor rule.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from sparsegpu._kernels import (
    INDEX_DTYPES,
    KernelFile,
    allow_dynamic_shared,
    device_properties,
)

BFS_BLOCK = 512  # kernels/graph_bfs.cu BFS_BLOCK
BFS_HUGE_DEGREE = 8 * BFS_BLOCK  # kernels/graph_bfs.cu BFS_HUGE_DEGREE
BFS_CONTROL_WORDS = 32  # kernels/graph_bfs.cu BFS_CONTROL_WORDS
#: Blocks per multiprocessor at most: more blocks make each grid barrier slower.
BFS_BLOCKS_PER_SM = 2
#: Without the single-block kernel (SINGLE_BLOCK off, or a bitmap too large for its shared memory):
#: frontiers of at most this many vertices (and kernels/graph_bfs.cu BFS_SMALL_EDGES out-edges)
#: are run by block 0 of the persistent kernel, level after level, without grid barriers; at most
#: kernels/graph_bfs.cu BFS_SMALL_FRONTIER (its shared-memory queue); 0 turns this off.
#: One block's worth: on a 1M-vertex road-like graph two blocks' worth (1024) doubled the time
#: of grid levels only, 512 matched it, and on luxembourg_osm (926 levels) 512 took 0.7 of the
#: grid-only time (measured on an H200, see docs/performance.md).
SMALL_FRONTIER = BFS_BLOCK
#: Alternate the single-block kernel (kernels/graph_bfs.cu bfs_single_block) with the persistent
#: one whenever the visited bitmap fits its shared memory; False keeps the persistent kernel alone.
SINGLE_BLOCK = True
BFS_SINGLE_BLOCK = 1024  # kernels/graph_bfs.cu BFS_SINGLE_BLOCK
#: Frontiers of at most this many vertices (and kernels/graph_bfs.cu BFS_SINGLE_EDGES out-edges)
#: run in the single-block kernel; at most BFS_SINGLE_BLOCK (its shared-memory queue).
SINGLE_BLOCK_FRONTIER = BFS_SINGLE_BLOCK
#: Pairs [single-block, persistent] queued before the host first reads the finished word; each
#: later batch doubles the pairs queued so far (a road graph finishes in the first single-block
#: launch, a Kronecker graph in about two pairs; every pair advances at least one level).
FIRST_PAIRS = 2
NO_PREDECESSOR = -9999
# Control words (kernels/graph_bfs.cu): the state the two kernels hand each other.
BFS_UNEXPLORED_WORD = 15
BFS_FINISHED_WORD = 23

# Index-only kernels: the value type is a placeholder (int32), the index type is I.
BFS_KERNELS = KernelFile("graph_bfs.cu", ["bfs_persistent<{I}>", "bfs_single_block<{I}>"], (np.int32,),
                         INDEX_DTYPES)


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
    control_host = np.zeros(BFS_CONTROL_WORDS, dtype=np.int64)
    control_host[BFS_UNEXPLORED_WORD] = in_indices.size
    control = cupy.asarray(control_host)
    graph = (indptr, indices, in_indptr, in_indices, np.int64(n), sources, np.int64(sources.size), levels)
    state = (queues[0], queues[1], huge[0], huge[1], control)
    single = BFS_KERNELS.function("bfs_single_block<{I}>", np.int32, index)
    bitmap_bytes = 4 * _bitmap_words(n)
    if SINGLE_BLOCK and SINGLE_BLOCK_FRONTIER > 0 and _bitmap_fits(single, bitmap_bytes):
        bits = cupy.empty(_bitmap_words(n), dtype=np.uint32)
        # Predecessor offers of single-block levels, (level << 32 | parent) minimised: all ones is none.
        keys = cupy.full(n, np.uint64(np.iinfo(np.uint64).max), dtype=np.uint64) if predecessors else np.uint64(0)
        limit = np.int64(min(SINGLE_BLOCK_FRONTIER, BFS_SINGLE_BLOCK))
        single_args = (*graph, *state, bits, keys, limit)
        persistent_args = (*graph, preds if predecessors else np.uint64(0), *state, np.int64(0), bits, limit, keys,
                           np.int32(0))
        _alternate(single, single_args, bitmap_bytes, persistent_args, control, n)
    else:
        persistent_args = (*graph, preds if predecessors else np.uint64(0), *state,
                           np.int64(min(SMALL_FRONTIER, 2 * BFS_BLOCK)), np.uint64(0), np.int64(0), np.uint64(0),
                           np.int32(1))
        _launch_persistent(persistent_args, index, n)
    return levels, preds


def _bitmap_words(n: int) -> int:
    return (n + 31) // 32


def _bitmap_fits(single: Any, bitmap_bytes: int) -> bool:
    """Whether the visited bitmap fits the single-block kernel's dynamic shared memory."""
    return bitmap_bytes + single.shared_size_bytes <= device_properties()["max_shared_per_block_optin"]


def _alternate(single: Any, single_args: tuple, bitmap_bytes: int, persistent_args: tuple, control: Any,
               n: int) -> None:
    """Queue pairs [single-block, persistent] until the kernels set the finished word, read after
    FIRST_PAIRS pairs and then each time the pairs queued have doubled."""
    allow_dynamic_shared(single, bitmap_bytes, "the single-block BFS kernel's visited bitmap")
    queued, batch = 0, max(1, FIRST_PAIRS)
    while True:
        for _ in range(batch):
            single((1,), (BFS_SINGLE_BLOCK,), single_args, shared_mem=bitmap_bytes)
            _launch_persistent(persistent_args, single_args[0].dtype, n)
        queued += batch
        if int(control[BFS_FINISHED_WORD].get()):
            return
        if queued > n + 1:  # every pair advances a level and there are at most n: a kernel is wrong
            raise RuntimeError("breadth-first search: the kernels did not finish after one level per vertex")
        batch = queued


def _launch_persistent(args: tuple, index: Any, n: int) -> None:
    kernel = BFS_KERNELS.function("bfs_persistent<{I}>", np.int32, index)
    grid = min(_resident_blocks(kernel), max(1, -(-n // BFS_BLOCK)))
    _launch_cooperative(kernel, grid, args)


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

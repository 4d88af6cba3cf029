"""Single-source shortest paths on the GPU (kernels/graph_paths.cu; NumPy reference:
reference.graph_paths).

Delta-stepping is the near-far variant (a near queue below a threshold T, a far pile above it);
Bellman-Ford is the same loop with T = inf, each round relaxing only the vertices improved in the
last. The rounds run on the device: each launch reads its sizes from device state words, the last
block of a round's launches does its bookkeeping, and the host launches rounds in batches
(ROUNDS_FIRST_BATCH, doubling up to ROUNDS_MAX_BATCH), reading one word between batches, so a
road graph's thousands of short rounds do not each wait for the host; rounds of at most
SMALL_ITEMS queued vertices run inside one looping block, with no launch between them.
Predecessors come from a breadth-first search over the tight edges, run by the same loop.
A negative cycle shows as a frontier still busy after n rounds: with one, Bellman-Ford runs n
rounds before it raises.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
from scipy.sparse.csgraph import NegativeCycleError

from sparsegpu._kernels import KernelFile, PackedLaunch, blocks_for, device_properties
from sparsegpu.reference import graph_paths as reference

# State words: the constants at the top of kernels/graph_paths.cu.
PARITY, NEAR_COUNT, FAR_PARITY, FAR_COUNT, CHUNK_COUNT = 0, 1, 3, 4, 6
THRESHOLD, PREVIOUS, FAR_MIN, SPLIT, DONE, ROUND, EPOCH = 7, 8, 9, 10, 11, 12, 13
ROUND_LIMIT, OVERRUN, DELTA, LIMIT, SMALL_LIMIT = 16, 17, 18, 19, 20
STATE_WORDS = 24
RELAX, TREE = 0, 1
CHUNK_STEPS = 16  # kernels/graph_paths.cu: a chunk task is GROUP * CHUNK_STEPS edges
KEY_INF = np.uint64(0xFFF0000000000000)  # key(+inf)
KEY_ZERO = np.uint64(0x8000000000000000)  # key(+0.0)
NO_PREDECESSOR = reference.NO_PREDECESSOR

#: Lanes per queued vertex by mean out-degree: (largest mean degree, lanes), first match.
GROUP_BY_MEAN_DEGREE = ((6.0, 4), (48.0, 8), (np.inf, 32))
#: Rounds launched before the host first reads the done word; the batch then doubles up to
#: ROUNDS_MAX_BATCH (a finished loop's further launches return at once).
ROUNDS_FIRST_BATCH = 4
ROUNDS_MAX_BATCH = 128
#: Rounds whose near queue (or far pile to split) holds at most SMALL_ITEMS vertices run in one
#: block of SMALL_BLOCK threads that loops over them with no launch in between (0: never).
SMALL_ITEMS = 2048
SMALL_BLOCK = 1024  # kernels/graph_paths.cu
BLOCK = 256
#: Blocks per multiprocessor of the many-block launches, by lanes per vertex (at most as many as
#: fit at once: a second wave would leave its share of a grid-stride loop for last): low-degree
#: graphs have small queues, where idle blocks cost more than they help.
BLOCKS_PER_SM = {4: 2, 8: 8, 32: 8}
REGISTERS_PER_SM = 65536
THREADS_PER_SM = 2048

_GROUPS = tuple(group for _, group in GROUP_BY_MEAN_DEGREE)
_EXPRESSIONS = ([f"paths_{kernel}<{{I}}, {op}, {g}>" for kernel in ("small", "expand", "chunks")
                 for op in (RELAX, TREE) for g in _GROUPS]
                + ["paths_split<{I}>", "paths_keys_to_distances<{I}>", "paths_finish_tree<{I}>"])
PATHS_KERNELS = KernelFile("graph_paths.cu", _EXPRESSIONS, (np.float64,))
_POINTERS = [ctypes.c_uint64] * 15


def _resident_blocks(kernel: Any, block: int) -> int:
    """How many blocks of ``block`` threads of ``kernel`` fit on a multiprocessor at once, by its
    registers (allocated per warp in steps of 8 a thread)."""
    registers = -(-max(int(getattr(kernel, "num_regs", 32)), 1) // 8) * 8
    return max(1, min(THREADS_PER_SM // block, REGISTERS_PER_SM // (registers * block)))


def _group(n: int, m: int) -> int:
    mean_degree = m / max(n, 1)
    return next(group for most, group in GROUP_BY_MEAN_DEGREE if mean_degree <= most)


class _Loop:
    """The buffers and packed launches of one shortest-path run over one CSR."""

    def __init__(self, indptr: Any, indices: Any, weights: Any, *, far: bool) -> None:
        import cupy

        self.cupy = cupy
        self.n, self.m = len(indptr) - 1, len(indices)
        self.dtype = indices.dtype
        self.indptr = indptr if indptr.dtype == self.dtype else indptr.astype(self.dtype)
        self.indices, self.weights = indices, weights
        self.group = _group(self.n, self.m)
        n, dtype = max(self.n, 1), self.dtype
        self.dist = cupy.empty(n, dtype=np.uint64)
        self.mark = cupy.empty(n, dtype=np.int32)
        self.near = [cupy.empty(n, dtype=dtype), cupy.empty(n, dtype=dtype)]
        far_size = n if far else 1
        self.far = [cupy.empty(far_size, dtype=dtype), cupy.empty(far_size, dtype=dtype)]
        self.far_mark = cupy.empty(far_size, dtype=np.int32)
        chunks = self.m // (self.group * CHUNK_STEPS) + 1
        self.chunk_vertex = cupy.empty(chunks, dtype=dtype)
        self.chunk_start = cupy.empty(chunks, dtype=dtype)
        self.state = cupy.zeros(STATE_WORDS, dtype=np.uint64)
        self.multiprocessors = device_properties()["multiprocessors"]

    def pointers(self, parent: Any = None, source_of: Any = None) -> list[int]:
        arrays = [self.indptr, self.indices, self.weights, self.dist, self.mark, *self.near, *self.far,
                  self.far_mark, self.chunk_vertex, self.chunk_start]
        return [a.data.ptr for a in arrays] + [0 if a is None else a.data.ptr for a in (parent, source_of)] + [
            self.state.data.ptr]

    def function(self, expression: str) -> Any:
        return PATHS_KERNELS.function(expression, np.float64, self.dtype)

    def start(self, sources: Any, *, threshold: float, delta: float, limit: float, round_limit: int) -> None:
        """Queue ``sources`` (unique) as round 0 and reset the state words."""
        state = np.zeros(STATE_WORDS, dtype=np.uint64)
        state[NEAR_COUNT] = len(sources)
        state[[THRESHOLD, DELTA, LIMIT]] = np.array([threshold, delta, limit]).view(np.uint64)
        state[FAR_MIN] = KEY_INF
        state[ROUND_LIMIT] = round_limit
        state[SMALL_LIMIT] = SMALL_ITEMS
        self.state.set(state)
        self.near[0][: len(sources)] = sources

    def run(self, op: int, parent: Any = None, source_of: Any = None, *, split: bool = False) -> None:
        """Launch rounds (with the far pile's split if ``split``) until the device says done (or
        overran its round limit)."""
        g = self.group
        names = [f"paths_small<{{I}}, {op}, {g}>", f"paths_expand<{{I}}, {op}, {g}>", f"paths_chunks<{{I}}, {op}, {g}>"]
        names += ["paths_split<{I}>"] if split else []
        launches = []
        for name in names:
            kernel = self.function(name)
            block = SMALL_BLOCK if "small" in name else BLOCK
            blocks = 1 if "small" in name else self.multiprocessors * min(
                BLOCKS_PER_SM[g], _resident_blocks(kernel, BLOCK))
            launches.append((PackedLaunch(kernel, _POINTERS), block, blocks))
        for launch, _, _ in launches:
            launch.set(0, *self.pointers(parent, source_of))
        stream = self.cupy.cuda.get_current_stream().ptr
        batch = ROUNDS_FIRST_BATCH
        while True:
            for _ in range(batch):
                for launch, block, blocks in launches:
                    launch(blocks, block, stream)
            if int(self.state[DONE].get()):
                return
            batch = min(2 * batch, ROUNDS_MAX_BATCH)

    def distances(self) -> Any:
        """The distance keys turned into float64, in place; the float64 view."""
        n = self.n
        self.function("paths_keys_to_distances<{I}>")((blocks_for(n, BLOCK),), (BLOCK,), (self.dist, self.dtype.type(n)))
        return self.dist[:n].view(np.float64)

    def tree(self, sources: Any, nearest_source: bool) -> tuple[Any, Any]:
        """Predecessors and (if asked) nearest sources: breadth-first search over tight edges."""
        cupy, n = self.cupy, self.n
        parent = cupy.full(n, np.iinfo(self.dtype).max, dtype=self.dtype)
        source_of = cupy.empty(n, dtype=self.dtype) if nearest_source else None
        self.mark.fill(-1)
        self.mark[sources] = 0
        if source_of is not None:
            source_of[sources] = sources
        self.start(sources, threshold=np.inf, delta=np.inf, limit=np.inf, round_limit=2**62)
        self.run(TREE, parent, source_of)
        self.function("paths_finish_tree<{I}>")(
            (blocks_for(n, BLOCK),), (BLOCK,),
            (parent, source_of if source_of is not None else np.uint64(0), self.mark, self.dtype.type(n)))
        return parent, source_of


def _prepared(indptr: Any, indices: Any, weights: Any, sources: Any, *, far: bool) -> tuple[_Loop, Any]:
    import cupy

    loop = _Loop(indptr, indices, weights, far=far)
    sources = cupy.unique(cupy.asarray(sources).astype(loop.dtype))
    loop.dist.fill(KEY_INF)
    loop.dist[sources] = KEY_ZERO
    loop.mark.fill(-1)
    loop.mark[sources] = 0
    loop.far_mark.fill(-1)
    return loop, sources


def _empty(indices: Any, with_tree: bool, with_sources: bool) -> tuple[Any, Any, Any]:
    import cupy

    return (cupy.empty(0, dtype=np.float64), cupy.empty(0, dtype=indices.dtype) if with_tree else None,
            cupy.empty(0, dtype=indices.dtype) if with_sources else None)


def delta_stepping(indptr: Any, indices: Any, weights: Any, sources: Any, *, limit: float = np.inf,
                   predecessors: bool = True, nearest_source: bool = False) -> tuple[Any, Any, Any]:
    """Shortest paths from the set ``sources`` over non-negative weights: near-far delta-stepping.

    Parameters
    ----------
    indptr, indices, weights : cupy.ndarray
        Canonical CSR (sorted, no duplicates; int32 or int64 indices; float64 weights >= 0).
    sources : array_like
        1-D vertex numbers; several sources give each vertex its distance to the nearest
        (SciPy's ``min_only=True``).
    limit : float, optional
        Vertices farther than ``limit`` stay at inf (SciPy's ``limit``).
    predecessors, nearest_source : bool, optional
        Whether to return the shortest-path tree and each vertex's source.

    Returns
    -------
    dist : cupy.ndarray
        float64, inf where unreached; the exact minima, SciPy's bits.
    preds : cupy.ndarray or None
        Index dtype, -9999 for sources and unreached: each vertex's smallest-index tight
        in-neighbour on the previous hop level of a breadth-first search over the tight edges
        (an acyclic tree even with zero-weight cycles; deterministic).
    source_of : cupy.ndarray or None
        The source at the root of each vertex's tree branch, -9999 where unreached.

    Notes
    -----
    The bucket width is :func:`sparsegpu.reference.graph_paths.choose_delta` (DELTA_WARPS *
    mean weight / mean out-degree); it changes the speed, never the result.
    """
    if len(indptr) <= 1:
        return _empty(indices, predecessors, nearest_source)
    loop, unique_sources = _prepared(indptr, indices, weights, sources, far=True)
    delta = reference.choose_delta(loop.n, loop.m, float(weights.sum()) if loop.m else 0.0)
    loop.start(unique_sources, threshold=delta, delta=delta, limit=float(limit), round_limit=2**62)
    loop.run(RELAX, split=True)
    parent = source_of = None
    if predecessors or nearest_source:
        parent, source_of = loop.tree(unique_sources, nearest_source)  # (reads the keys)
    return loop.distances(), parent if predecessors else None, source_of


def bellman_ford(indptr: Any, indices: Any, weights: Any, source: int, *,
                 predecessors: bool = True) -> tuple[Any, Any]:
    """Shortest paths from ``source``, negative weights allowed: frontier Bellman-Ford.

    Parameters
    ----------
    indptr, indices, weights : cupy.ndarray
        Canonical CSR (sorted, no duplicates; int32 or int64 indices; float64 weights).
    source : int
        The start vertex.
    predecessors : bool, optional
        Whether to return the shortest-path tree (as :func:`delta_stepping`'s).

    Returns
    -------
    dist : cupy.ndarray
        float64, inf where unreached.
    preds : cupy.ndarray or None
        Index dtype, -9999 for the source and unreached.

    Raises
    ------
    scipy.sparse.csgraph.NegativeCycleError
        A negative cycle is reachable from ``source``: vertices still improve after n rounds.
    """
    if len(indptr) <= 1:
        return _empty(indices, predecessors, False)[:2]
    loop, sources = _prepared(indptr, indices, weights, np.array([source]), far=False)
    loop.start(sources, threshold=np.inf, delta=np.inf, limit=np.inf, round_limit=loop.n)
    loop.run(RELAX)
    if int(loop.state[OVERRUN].get()):
        parity = int(loop.state[PARITY].get())
        busy = loop.near[parity][: int(loop.state[NEAR_COUNT + parity].get())]
        raise NegativeCycleError(f"Negative cycle detected on node {int(busy.min())}")
    parent = loop.tree(sources, False)[0] if predecessors else None  # (reads the keys)
    return loop.distances(), parent

"""NumPy reference of the breadth-first search kernels (kernels/graph_bfs.cu).

Level-synchronous and vectorised, over the same CSR arrays: each level gathers the out-edges
of the frontier, keeps those reaching unvisited vertices and gives every vertex reached the
smallest frontier vertex adjacent to it as predecessor (the rule the kernel keeps whichever
direction a level runs in). The in-edge arrays are accepted for the same signature; a push
needs only out-edges.

>>> import numpy as np
>>> indptr, indices = np.array([0, 2, 3, 4, 4]), np.array([1, 2, 3, 3])
>>> levels, preds = bfs(indptr, indices, np.array([0]))
>>> levels.tolist(), preds.tolist()
([0, 1, 1, 2], [-9999, 0, 0, 1])
>>> bfs_order(levels).tolist()
[0, 1, 2, 3]
"""

from __future__ import annotations

import numpy as np

NO_PREDECESSOR = -9999


def frontier_edges(indptr: np.ndarray, indices: np.ndarray, frontier: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(source, target) of every out-edge of the ``frontier`` vertices, in CSR order."""
    starts = indptr[frontier].astype(np.int64)
    counts = indptr[frontier + 1].astype(np.int64) - starts
    total = int(counts.sum())
    if total == 0:
        return frontier[:0], indices[:0]
    firsts = np.cumsum(counts) - counts
    positions = np.arange(total, dtype=np.int64) - np.repeat(firsts - starts, counts)
    return np.repeat(frontier, counts), indices[positions]


def bfs(indptr: np.ndarray, indices: np.ndarray, sources: np.ndarray, *, in_indptr: np.ndarray | None = None,
        in_indices: np.ndarray | None = None, predecessors: bool = True) -> tuple[np.ndarray, np.ndarray | None]:
    """Levels (int32, -1 unreached, 0 at the ``sources``, distinct) and predecessors (index
    dtype, -9999 for sources and unreached vertices, else the smallest in-neighbour one level up)."""
    del in_indptr, in_indices  # a push reads out-edges only
    n = indptr.size - 1
    levels = np.full(max(n, 0), -1, dtype=np.int32)
    preds = np.full(max(n, 0), NO_PREDECESSOR, dtype=indices.dtype) if predecessors else None
    frontier = np.unique(np.asarray(sources, dtype=indices.dtype))
    levels[frontier] = 0
    level = 0
    while frontier.size:
        parents, targets = frontier_edges(indptr, indices, frontier)
        fresh = levels[targets] == -1
        parents, targets = parents[fresh], targets[fresh]
        order = np.lexsort((parents, targets))  # by target, then parent: the first is the smallest
        parents, targets = parents[order], targets[order]
        first = np.ones(targets.size, dtype=bool)
        first[1:] = targets[1:] != targets[:-1]
        frontier = targets[first]
        level += 1
        levels[frontier] = level
        if preds is not None:
            preds[frontier] = parents[first]
    return levels, preds


def bfs_order(levels: np.ndarray) -> np.ndarray:
    """The reached vertices sorted by (level, vertex), int32 (a stable sort by level)."""
    reached = np.flatnonzero(levels >= 0)
    return reached[np.argsort(levels[reached], kind="stable")].astype(np.int32)



def parents_one_level_up(in_indptr: np.ndarray, in_indices: np.ndarray, levels: np.ndarray,
                         vertices: np.ndarray) -> np.ndarray:
    """The first in-neighbour (in-edges sorted: the smallest) one level up of each of ``vertices``
    (reached, level > 0), -9999 where there is none: the rule behind the kernel's predecessors of
    single-block levels (the smallest (level, parent) key any in-neighbour offers; in-neighbours
    are at most one level up).

    >>> import numpy as np
    >>> in_indptr, in_indices = np.array([0, 0, 1, 2, 4]), np.array([0, 0, 1, 2])
    >>> parents_one_level_up(in_indptr, in_indices, np.array([0, 1, 1, 2]), np.array([3, 1])).tolist()
    [1, 0]
    """
    vertices = np.asarray(vertices, dtype=np.int64)
    counts = in_indptr[vertices + 1].astype(np.int64) - in_indptr[vertices].astype(np.int64)
    _, neighbours = frontier_edges(in_indptr, in_indices, vertices)
    owner = np.repeat(np.arange(vertices.size), counts)
    up = levels[neighbours] == levels[vertices][owner] - 1
    owners, first = np.unique(owner[up], return_index=True)  # first in CSR order: the smallest
    parents = np.full(vertices.size, NO_PREDECESSOR, dtype=in_indices.dtype)
    parents[owners] = neighbours[up][first]
    return parents

"""NumPy reference of the shortest-path kernels (kernels/graph_paths.cu), over the same CSR
arrays and with the same algorithm shape: near-far delta-stepping rounds (Bellman-Ford is the
same loop with an infinite threshold), then a breadth-first search over the tight edges for the
predecessors.

Each round relaxes the out-edges of the whole near queue at once (``np.minimum.at``), so every
update is a minimum and the distances are the greatest fixed point of
``d[v] = min(d[v], d[u] + w)`` under float rounding: the same bits as the kernels' and as
SciPy's Dijkstra.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.sparse.csgraph import NegativeCycleError

NO_PREDECESSOR = -9999
#: Delta-stepping's bucket width is DELTA_WARPS * mean weight / mean out-degree (the form of
#: Davidson et al.'s rule, who take the warp width, 32). Wider buckets are faster on the GPU for
#: power-law and road graphs alike: their rounds are fewer, and a round costs more than the
#: relaxations it repeats; 128 was the best of 32, 128, 512 and inf (measured on an H200, see
#: docs/performance.md).
DELTA_WARPS = 128.0


def choose_delta(n: int, m: int, weight_sum: float) -> float:
    """The bucket width for ``n`` vertices and ``m`` edges weighing ``weight_sum`` together:
    ``DELTA_WARPS * (weight_sum / m) / (m / n)``; 1.0 for a graph without edges. Only the
    speed depends on it, never the distances.

    >>> choose_delta(4, 8, 4.0) == DELTA_WARPS * 0.5 / 2
    True
    """
    if m == 0 or not np.isfinite(weight_sum) or weight_sum <= 0:
        return 1.0
    return float(DELTA_WARPS * (weight_sum / m) / (m / max(n, 1)))


def _out_edges(indptr: np.ndarray, frontier: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(tail, edge position) of every out-edge of the ``frontier`` vertices."""
    starts = indptr[frontier].astype(np.int64)
    counts = indptr[frontier + 1].astype(np.int64) - starts
    total = int(counts.sum())
    tails = np.repeat(frontier, counts)
    offsets = np.cumsum(counts) - counts
    edges = np.arange(total, dtype=np.int64) - np.repeat(offsets - starts, counts)
    return tails, edges


def _relax(indptr: np.ndarray, indices: np.ndarray, weights: np.ndarray, dist: np.ndarray,
           frontier: np.ndarray, limit: float) -> np.ndarray:
    """Relax the out-edges of ``frontier`` (distances read before the round); the vertices
    improved, sorted."""
    tails, edges = _out_edges(indptr, frontier)
    heads = indices[edges]
    candidate = dist[tails] + weights[edges]
    better = (candidate <= limit) & (candidate < dist[heads])
    heads = heads[better]
    np.minimum.at(dist, heads, candidate[better])
    return np.unique(heads)


def _above(x: float, step: float) -> float:
    """``x + step``, or the next double above ``x`` when ``step`` is below its precision."""
    y = x + step
    return y if y > x else float(np.nextafter(x, np.inf))


def near_far_distances(indptr: np.ndarray, indices: np.ndarray, weights: np.ndarray, sources: np.ndarray,
                       *, delta: float, limit: float = np.inf, round_limit: int | None = None) -> np.ndarray:
    """Distances from the set ``sources`` by near-far rounds of width ``delta`` (``np.inf``:
    frontier Bellman-Ford). NegativeCycleError when the near queue is still busy after
    ``round_limit`` rounds.

    >>> import numpy as np
    >>> near_far_distances(np.array([0, 1, 2, 2]), np.array([1, 2]), np.array([0.5, 0.25]),
    ...                    np.array([0]), delta=0.5).tolist()
    [0.0, 0.5, 0.75]
    """
    n = len(indptr) - 1
    dist = np.full(n, np.inf)
    near = np.unique(np.asarray(sources, dtype=np.int64))
    dist[near] = 0.0
    threshold, far, far_min, rounds = delta, np.empty(0, np.int64), np.inf, 0
    while True:
        while near.size:
            improved = _relax(indptr, indices, weights, dist, near, limit)
            rounds += 1
            low = dist[improved] < threshold
            near, pushed = improved[low], improved[~low]
            far = np.union1d(far, pushed)
            if pushed.size:
                far_min = min(far_min, float(dist[pushed].min()))
            if near.size and round_limit is not None and rounds >= round_limit:
                raise NegativeCycleError(f"Negative cycle detected on node {int(near.min())}")
        if far.size == 0:
            return dist
        previous, threshold = threshold, _above(max(threshold, far_min), delta)
        d = dist[far]
        near = far[(d >= previous) & (d < threshold)]
        far = far[d >= threshold]
        far_min = float(dist[far].min()) if far.size else np.inf


def shortest_path_tree(indptr: np.ndarray, indices: np.ndarray, weights: np.ndarray, dist: np.ndarray,
                       sources: np.ndarray, nearest_source: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
    """Predecessors (index dtype, -9999 for sources and unreached) by a breadth-first search from
    ``sources`` over the tight edges (``dist[u] + w == dist[v]`` as computed): each vertex takes
    its smallest-index tight in-neighbour on the previous hop level, so the tree is acyclic even
    with zero-weight cycles. With ``nearest_source``, also the source each vertex hangs from
    (-9999 unreached).

    >>> import numpy as np
    >>> indptr, indices = np.array([0, 2, 3, 4]), np.array([1, 2, 2, 1])
    >>> weights = np.array([1.0, 1.0, 1.0, 1.0])
    >>> shortest_path_tree(indptr, indices, weights, np.array([0.0, 1.0, 1.0]), np.array([0]))[0].tolist()
    [-9999, 0, 0]
    """
    n = len(indptr) - 1
    dtype = indices.dtype
    level = np.full(n, -1, dtype=np.int64)
    parent = np.full(n, NO_PREDECESSOR, dtype=dtype)
    frontier = np.unique(np.asarray(sources, dtype=np.int64))
    level[frontier] = 0
    source_of = None
    if nearest_source:
        source_of = np.full(n, NO_PREDECESSOR, dtype=dtype)
        source_of[frontier] = frontier
    best = np.full(n, n, dtype=np.int64)
    hop = 0
    while frontier.size:
        tails, edges = _out_edges(indptr, frontier)
        heads = indices[edges].astype(np.int64)
        target = dist[heads]
        tight = np.isfinite(target) & (dist[tails] + weights[edges] == target) & (level[heads] == -1)
        heads, tails = heads[tight], tails[tight]
        np.minimum.at(best, heads, tails)
        frontier = np.unique(heads)
        hop += 1
        level[frontier] = hop
        parent[frontier] = best[frontier]
        if source_of is not None:
            source_of[frontier] = source_of[best[frontier]]
    return parent, source_of


def delta_stepping(indptr: Any, indices: Any, weights: Any, sources: Any, *, limit: float = np.inf,
                   predecessors: bool = True, nearest_source: bool = False) -> tuple[Any, Any, Any]:
    """(dist, predecessors or None, nearest source or None) from the set ``sources`` over
    non-negative weights: the device function's contract, on NumPy arrays.

    >>> import numpy as np
    >>> d, p, s = delta_stepping(np.array([0, 1, 2, 2]), np.array([1, 2]), np.array([2.0, 3.0]),
    ...                          np.array([0]), nearest_source=True)
    >>> d.tolist(), p.tolist(), s.tolist()
    ([0.0, 2.0, 5.0], [-9999, 0, 1], [0, 0, 0])
    """
    indptr, indices, weights = np.asarray(indptr), np.asarray(indices), np.asarray(weights, dtype=np.float64)
    n, m = len(indptr) - 1, len(indices)
    delta = choose_delta(n, m, float(weights.sum()))
    dist = near_far_distances(indptr, indices, weights, sources, delta=delta, limit=limit)
    if not (predecessors or nearest_source):
        return dist, None, None
    parent, source_of = shortest_path_tree(indptr, indices, weights, dist, sources, nearest_source)
    return dist, parent if predecessors else None, source_of


def bellman_ford(indptr: Any, indices: Any, weights: Any, source: int, *,
                 predecessors: bool = True) -> tuple[Any, Any]:
    """(dist, predecessors or None) from ``source``, negative weights allowed: frontier
    Bellman-Ford (only vertices improved in the last round relax). NegativeCycleError (SciPy's)
    when a negative cycle is reachable: the frontier is still busy after n rounds.

    >>> import numpy as np
    >>> bellman_ford(np.array([0, 1, 2, 2]), np.array([1, 2]), np.array([2.0, -3.0]), 0)[0].tolist()
    [0.0, 2.0, -1.0]
    """
    indptr, indices, weights = np.asarray(indptr), np.asarray(indices), np.asarray(weights, dtype=np.float64)
    n = len(indptr) - 1
    sources = np.array([source], dtype=np.int64)
    dist = near_far_distances(indptr, indices, weights, sources, delta=np.inf, round_limit=n)
    if not predecessors:
        return dist, None
    return dist, shortest_path_tree(indptr, indices, weights, dist, sources)[0]

"""The checks behind :mod:`sparsegpu.bench.graphs`: each says why a result disagrees with
SciPy's (a message) or returns None when it agrees.

>>> import numpy as np
>>> tree_levels(np.array([-9999, 0, 1, -9999]), 0).tolist()
[0, 1, 2, -1]
>>> partition_error(np.array([5, 5, 7]), np.array([0, 0, 1])) is None
True
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

#: Distances agree within this relative difference; spanning-forest weights within WEIGHT_RTOL.
PATH_RTOL = 1e-12
WEIGHT_RTOL = 1e-9
NO_PREDECESSOR = -9999


def edge_list(S: sp.csr_array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows, cols, weights) of every stored entry of the CSR ``S``."""
    rows = np.repeat(np.arange(S.shape[0], dtype=S.indices.dtype), np.diff(S.indptr))
    return rows, S.indices, S.data


def tree_levels(preds: np.ndarray, source: int) -> np.ndarray | None:
    """Depth of every vertex in the predecessor tree rooted at ``source`` (-1 for vertices
    without a predecessor other than the source), by pointer doubling; None when ``preds``
    holds an out-of-range value, a cycle, or a chain that does not end at the source."""
    n = preds.size
    parent = preds.astype(np.int64)
    if np.any((parent != NO_PREDECESSOR) & ((parent < 0) | (parent >= n))) or not 0 <= source < n:
        return None
    linked = parent >= 0
    if linked[source]:
        return None
    ancestor = np.where(linked, parent, np.arange(n))
    depth = linked.astype(np.int64)
    for _ in range(n.bit_length() + 1):
        jumped = ancestor[ancestor]
        if np.array_equal(jumped, ancestor):
            break
        depth, ancestor = depth + depth[ancestor], jumped
    else:
        return None
    rooted = ancestor == source
    if np.any(linked & ~rooted):
        return None
    return np.where(rooted, depth, -1)


def bfs_levels_error(S: sp.csr_array, levels: np.ndarray, source: int) -> str | None:
    """Why ``levels`` are not BFS levels from ``source``, given that every vertex at level
    k > 0 has an in-neighbour at level k - 1: the Graph500 edge test (an edge from a reached
    vertex ends at a reached vertex at most one level further)."""
    if levels[source] != 0:
        return f"the source is at level {levels[source]}"
    rows, cols, _ = edge_list(S)
    tail, head = levels[rows], levels[cols]
    bad = np.flatnonzero((tail >= 0) & ((head < 0) | (head > tail + 1)))
    return f"edge {rows[bad[0]]} -> {cols[bad[0]]} joins levels {tail[bad[0]]} and {head[bad[0]]}" if bad.size else None


def levels_error(levels: np.ndarray, expected: np.ndarray) -> str | None:
    """Why ``levels`` differ from ``expected`` (the first vertex where they do)."""
    if levels.shape != expected.shape:
        return f"levels have shape {levels.shape}, expected {expected.shape}"
    differ = np.flatnonzero(levels != expected)
    return f"vertex {differ[0]}: level {levels[differ[0]]}, SciPy's {expected[differ[0]]}" if differ.size else None


def bfs_tree_error(S: sp.csr_array, order: np.ndarray, preds: np.ndarray, expected: np.ndarray,
                   source: int) -> str | None:
    """Why ``(order, preds)`` is not a BFS from ``source`` with levels ``expected``."""
    reached = np.flatnonzero(expected >= 0)
    if preds.shape != expected.shape:
        return f"predecessors have shape {preds.shape}, expected {expected.shape}"
    if order.ndim != 1 or not np.array_equal(np.sort(order), reached):
        return f"the order lists {order.size} vertices, not the {reached.size} reached ones"
    if order[0] != source or np.any(np.diff(expected[order]) < 0):
        return "the order does not start at the source and go level by level"
    depth = tree_levels(preds, source)
    if depth is None:
        return "the predecessors do not form a tree rooted at the source"
    wrong = levels_error(depth, expected)
    if wrong:
        return f"predecessor tree: {wrong}"
    child = reached[reached != source]
    missing = np.flatnonzero(np.asarray(S[preds[child], child]).ravel() == 0)
    return f"predecessor of {child[missing[0]]} is not an in-neighbour" if missing.size else None


def partition_error(labels: np.ndarray, expected: np.ndarray) -> str | None:
    """Why ``labels`` do not split the vertices as ``expected`` does (numbering aside)."""
    if labels.shape != expected.shape:
        return f"labels have shape {labels.shape}, expected {expected.shape}"
    ours = np.unique(labels, return_inverse=True)[1].ravel().astype(np.int64)
    count, theirs = int(ours.max(initial=-1)) + 1, int(expected.max(initial=-1)) + 1
    pairs = np.unique(ours * max(theirs, 1) + expected).size
    return None if count == theirs == pairs else f"{count} components, SciPy {theirs}, {pairs} overlaps"


def bandwidth(S: sp.csr_array, perm: np.ndarray) -> int:
    """Largest ``|position(i) - position(j)|`` over the edges of ``S`` with the vertices in
    the order ``perm``."""
    position = np.empty(perm.size, dtype=np.int64)
    position[perm] = np.arange(perm.size)
    rows, cols, _ = edge_list(S)
    return int(np.abs(position[rows] - position[cols]).max(initial=0))


def distances_error(dist: np.ndarray, want: np.ndarray) -> str | None:
    """Why ``dist`` differs from ``want`` by more than :data:`PATH_RTOL` relative (inf and 0
    must match exactly)."""
    if dist.shape != want.shape:
        return f"distances have shape {dist.shape}, expected {want.shape}"
    with np.errstate(invalid="ignore"):  # inf - inf where both are unreached
        agree = np.where(np.isfinite(want), np.abs(dist - want) <= PATH_RTOL * np.abs(want), dist == want)
    bad = np.flatnonzero(~agree)
    return f"vertex {bad[0]}: distance {float(dist[bad[0]])!r}, SciPy {float(want[bad[0]])!r}" if bad.size else None


def forest_error(T: sp.sparray, edges: int, weight: float) -> str | None:
    """Why the spanning forest ``T`` lacks ``edges`` edges of total ``weight``."""
    total = float(T.sum())
    if T.nnz != edges or not abs(total - weight) <= WEIGHT_RTOL * abs(weight):
        return f"{T.nnz} edges weighing {total!r}, SciPy {edges} weighing {float(weight)!r}"
    return None


def ordering_error(S: sp.csr_array, perm: np.ndarray, widest: int) -> str | None:
    """Why ``perm`` is not a permutation of S's vertices with bandwidth at most ``widest``."""
    if perm.shape != (S.shape[0],) or not np.array_equal(np.sort(perm), np.arange(perm.size)):
        return "not a permutation of the vertices"
    width = bandwidth(S, perm)
    return f"bandwidth {width} > SciPy's {widest}" if width > widest else None

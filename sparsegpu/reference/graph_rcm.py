"""NumPy reference of the reverse Cuthill-McKee ordering (kernels/graph_rcm.cu).

Cuthill-McKee level by level (the parallel formulation of Azad et al., IPDPS 2017): a BFS from
one start vertex per component gives the levels; the vertices of level L are then ordered by
(position of their first-placed neighbour on level L - 1, degree, index), which is exactly the
order the sequential algorithm (SciPy's) gives: it appends each vertex's unvisited neighbours,
sorted by degree, in the order the vertices were placed. All components run at once: the start
vertices get positions 0, 1, ... in component order, so every later level sorts by component
first.

Two orderings are made per component and the one with the smaller bandwidth is kept (SciPy's
on ties), so the bandwidth never exceeds SciPy's:
  - from SciPy's start: the component's vertex first in ``np.argsort(degree)`` (degree counting
    a diagonal entry twice, SciPy's rule), which reproduces SciPy's permutation exactly;
  - from a pseudo-peripheral vertex (George & Liu): from the start, repeatedly take the
    smallest-degree vertex of the last BFS level (smallest index on ties) while that makes the
    component's eccentricity grow.
Components keep SciPy's order (by their start vertex's rank); the order is reversed at the end.

>>> import numpy as np, scipy.sparse as sp
>>> path = sp.diags_array([np.ones(4), np.ones(4)], offsets=[-1, 1], format="csr")
>>> reverse_cuthill_mckee(path.indptr, path.indices).tolist()
[4, 3, 2, 1, 0]
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from sparsegpu.reference.graph_bfs import bfs, bfs_order, frontier_edges

#: George-Liu steps tried per component for the second start vertex.
PERIPHERAL_ROUNDS = 3


def node_degrees(indptr: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """SciPy's degree: entries per row, plus one when the row holds its diagonal (index dtype)."""
    n = indptr.size - 1
    rows = np.repeat(np.arange(n, dtype=indices.dtype), np.diff(indptr))
    degree = np.diff(indptr).astype(indices.dtype)
    degree[rows[indices == rows]] += 1
    return degree


def degree_ranks(degree: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(``np.argsort(degree)``, each vertex's place in it): SciPy's start-vertex order, from the
    same NumPy call on the same dtype, so ties fall the same way."""
    inds = np.argsort(degree)
    rank = np.empty(degree.size, dtype=np.int64)
    rank[inds] = np.arange(degree.size)
    return inds, rank


def component_labels(indptr: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """Each vertex's component, named by its smallest vertex (int64)."""
    n = indptr.size - 1
    graph = sp.csr_array((np.ones(indices.size, dtype=np.int8), indices, indptr), shape=(n, n))
    _, numbered = connected_components(graph, directed=False)
    smallest = np.full(n, n, dtype=np.int64)
    np.minimum.at(smallest, numbered, np.arange(n))
    return smallest[numbered]


def scipy_starts(labels: np.ndarray, inds: np.ndarray, rank: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(start vertex of each component in SciPy's order, the components' labels in that order)."""
    n = labels.size
    first = np.full(n, n, dtype=np.int64)
    np.minimum.at(first, labels, rank)
    roots = np.flatnonzero(labels == np.arange(n))
    by_rank = np.argsort(first[roots])
    return inds[first[roots][by_rank]].astype(np.int64), roots[by_rank]


def cuthill_mckee_keys(indptr: np.ndarray, indices: np.ndarray, degree: np.ndarray,
                       starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(key, levels): sorting the vertices by key gives Cuthill-McKee from ``starts`` (one per
    component, in component order), each component's vertices in one run."""
    n = indptr.size - 1
    levels, _ = bfs(indptr, indices, starts, predecessors=False)
    order = bfs_order(levels).astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(np.bincount(levels[levels >= 0]))])
    key = np.empty(n, dtype=np.int64)
    key[starts] = np.arange(starts.size)
    for level in range(1, offsets.size - 1):
        members = order[offsets[level]:offsets[level + 1]]
        parent = first_parent_keys(indptr, indices, levels, key, members, level)
        placed = np.lexsort((members, degree[members], parent))
        key[members[placed]] = offsets[level] + np.arange(members.size)
    return key, levels


def first_parent_keys(indptr: np.ndarray, indices: np.ndarray, levels: np.ndarray, key: np.ndarray,
                      members: np.ndarray, level: int) -> np.ndarray:
    """For each vertex of ``members`` (all on ``level``), the smallest key among its neighbours
    on ``level - 1``."""
    counts = (indptr[members + 1] - indptr[members]).astype(np.int64)
    _, neighbours = frontier_edges(indptr, indices, members)
    owner = np.repeat(np.arange(members.size), counts)
    above = levels[neighbours] == level - 1
    parent = np.full(members.size, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(parent, owner[above], key[neighbours[above]])
    return parent


def pseudo_peripheral_starts(indptr: np.ndarray, indices: np.ndarray, degree: np.ndarray, labels: np.ndarray,
                             starts: np.ndarray, roots: np.ndarray) -> np.ndarray:
    """George-Liu: per component, move the start to the smallest-degree vertex (then smallest
    index) of its last BFS level while the eccentricity grows."""
    n = labels.size
    starts = starts.copy()
    levels, _ = bfs(indptr, indices, starts, predecessors=False)
    ecc = np.zeros(n, dtype=np.int64)
    np.maximum.at(ecc, labels, levels)
    for _ in range(PERIPHERAL_ROUNDS):
        last = np.flatnonzero(levels == ecc[labels])
        best = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(best, labels[last], degree[last].astype(np.int64) * n + last)
        candidates = best[roots] % n
        new_levels, _ = bfs(indptr, indices, candidates, predecessors=False)
        new_ecc = np.zeros(n, dtype=np.int64)
        np.maximum.at(new_ecc, labels, new_levels)
        better = new_ecc[roots] > ecc[roots]
        if not better.any():
            break
        starts[better] = candidates[better]
        moved = np.zeros(n, dtype=bool)
        moved[roots[better]] = True
        levels = np.where(moved[labels], new_levels, levels)
        ecc = np.where(moved, new_ecc, ecc)
    return starts


def component_bandwidths(indptr: np.ndarray, indices: np.ndarray, labels: np.ndarray, key: np.ndarray) -> np.ndarray:
    """Per component (indexed by label), the largest |position(i) - position(j)| over its edges,
    positions taken in the order of ``key``."""
    n = labels.size
    position = np.empty(n, dtype=np.int64)
    position[np.argsort(key)] = np.arange(n)
    rows = np.repeat(np.arange(n), np.diff(indptr))
    width = np.zeros(n, dtype=np.int64)
    np.maximum.at(width, labels[rows], np.abs(position[rows] - position[indices]))
    return width


def reverse_cuthill_mckee(indptr: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """The RCM permutation (int32) of a structurally symmetric graph: position i holds the
    vertex placed i-th."""
    n = indptr.size - 1
    if n <= 0:
        return np.empty(0, dtype=np.int32)
    degree = node_degrees(indptr, indices)
    inds, rank = degree_ranks(degree)
    labels = component_labels(indptr, indices)
    starts, roots = scipy_starts(labels, inds, rank)
    component_position = np.empty(n, dtype=np.int64)
    component_position[roots] = np.arange(roots.size)
    base = component_position[labels] * n
    key_scipy, _ = cuthill_mckee_keys(indptr, indices, degree, starts)
    key_scipy += base
    peripheral = pseudo_peripheral_starts(indptr, indices, degree, labels, starts, roots)
    key = key_scipy
    if (peripheral != starts).any():
        key_peripheral, _ = cuthill_mckee_keys(indptr, indices, degree, peripheral)
        key_peripheral += base
        narrower = (component_bandwidths(indptr, indices, labels, key_peripheral)
                    < component_bandwidths(indptr, indices, labels, key_scipy))
        key = np.where(narrower[labels], key_peripheral, key_scipy)
    return np.argsort(key)[::-1].astype(np.int32)


def bandwidth(indptr: np.ndarray, indices: np.ndarray, perm: np.ndarray) -> int:
    """The bandwidth max |p(i) - p(j)| over the edges of the graph reordered by ``perm``."""
    n = indptr.size - 1
    if indices.size == 0:
        return 0
    position = np.empty(n, dtype=np.int64)
    position[perm] = np.arange(n)
    rows = np.repeat(np.arange(n), np.diff(indptr))
    return int(np.abs(position[rows] - position[indices]).max())

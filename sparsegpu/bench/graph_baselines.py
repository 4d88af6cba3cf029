"""The baselines :mod:`sparsegpu.bench.graphs` compares ``sparsegpu.csgraph`` with: what a CuPy
user writes by hand, and SuiteSparse:GraphBLAS through python-graphblas on all CPU cores.

CuPy (written over an array module ``xp`` and its sparse module, so the same code runs on NumPy
and SciPy, which is how it is tested without a GPU):

- :func:`array_bfs_levels`: level-synchronous BFS, one sparse matrix-vector product with the
  transposed adjacency per level and a visited mask; the host reads one flag per level.
- :func:`array_weak_components`: min-label propagation over both ends of every edge (a gather
  of the labels and a scatter-min; one end when the graph is symmetric), with one pointer jump
  per sweep.
- :func:`array_bellman_ford`: Bellman-Ford, every edge relaxed per sweep (gather, add,
  scatter-min on the distances' bits) until no distance falls.

GraphBLAS (``python-graphblas``; an optional dependency):

- :func:`graphblas_bfs_levels`: ``any_pair`` vector-matrix products masked by the complement
  of the visited set.
- :func:`graphblas_bellman_ford`: ``min_plus`` Bellman-Ford relaxing from the vertices whose
  distance fell in the previous sweep.
- :func:`graphblas_weak_components`: FastSV, hooking on ``min_second`` products over A and its
  transpose (A alone when symmetric).

BFS baselines return levels (int32, -1 unreached) and no predecessors; component baselines
return labels (the smallest vertex of each component), not renumbered; path baselines return
float64 distances (inf unreached).

>>> import numpy as np, scipy.sparse as sp
>>> A = sp.csr_array(np.array([[0, 1, 0], [1, 0, 0], [0, 0, 0]], dtype=np.float32))
>>> array_bfs_levels(A.T.tocsr(), 0, np).tolist()
[0, 1, -1]
"""

from __future__ import annotations

import os
import warnings
from types import ModuleType
from typing import Any

import numpy as np


def scatter_min(xp: ModuleType, target: Any, index: Any, values: Any) -> None:
    """``target[index[k]] = min(target[index[k]], values[k])`` for every k, repeats included:
    ``cupyx.scatter_min`` for CuPy arrays, ``numpy.minimum.at`` otherwise. Integer types only:
    CuPy 14.2's float64 scatter-min returns minima rounded to float32."""
    if xp is np:
        np.minimum.at(target, index, values)
        return
    import cupyx

    with warnings.catch_warnings():  # CuPy 14 deprecates it for cupy.minimum.at
        warnings.simplefilter("ignore", DeprecationWarning)
        cupyx.scatter_min(target, index, values)


def array_bfs_levels(AT: Any, source: int, xp: ModuleType) -> Any:
    """BFS levels from ``source`` following out-edges, given the transposed adjacency ``AT``
    (a float sparse matrix of ``xp``'s sparse module: ``AT @ frontier`` counts each vertex's
    in-neighbours on the frontier)."""
    n = AT.shape[0]
    levels = xp.full(n, -1, dtype=xp.int32)
    levels[source] = 0
    frontier = xp.zeros(n, dtype=AT.dtype)
    frontier[source] = 1
    depth = 0
    while True:
        reached = (AT @ frontier > 0) & (levels < 0)
        depth += 1
        if not bool(reached.any()):
            return levels
        levels[reached] = depth
        frontier = reached.astype(AT.dtype)


def array_weak_components(rows: Any, cols: Any, n: int, xp: ModuleType, symmetric: bool = False) -> Any:
    """Weak-component labels (each vertex gets the smallest vertex of its component) from the
    edge list ``(rows[k], cols[k])``, read as undirected (``symmetric``: every edge is listed
    both ways, so one direction is enough)."""
    labels = xp.arange(n, dtype=rows.dtype)
    while True:
        before = labels.copy()
        scatter_min(xp, labels, rows, labels[cols])
        if not symmetric:
            scatter_min(xp, labels, cols, labels[rows])
        labels = labels[labels]
        if not bool((labels != before).any()):
            return labels


def array_bellman_ford(rows: Any, cols: Any, weights: Any, n: int, source: int, xp: ModuleType) -> Any:
    """Shortest-path distances from ``source`` over the edges ``rows[k] -> cols[k]`` of
    non-negative ``weights``. The scatter-min runs on the distances' bit patterns as uint64,
    which non-negative doubles (inf included) order as their values: exact, and an integer
    atomic on the GPU."""
    dist = xp.full(n, xp.inf, dtype=xp.float64)
    dist[source] = 0.0
    while True:
        relaxed = dist.copy()
        scatter_min(xp, relaxed.view(xp.uint64), cols, (dist[rows] + weights).view(xp.uint64))
        if not bool((relaxed < dist).any()):
            return dist
        dist = relaxed


# --------------------------------------------------------------------------- GraphBLAS


def graphblas() -> ModuleType:
    """python-graphblas with SuiteSparse:GraphBLAS on every CPU core. Raises ImportError when
    it is not installed."""
    import graphblas as gb

    gb.ss.config["nthreads"] = os.cpu_count() or 1
    return gb


def graphblas_matrix(S: Any) -> Any:
    """A GraphBLAS matrix with the entries of the scipy matrix ``S``."""
    return graphblas().io.from_scipy_sparse(S)


def _dense(vector: Any, fill: Any, dtype: Any) -> np.ndarray:
    out = np.full(vector.size, fill, dtype=dtype)
    index, values = vector.to_coo()
    out[index] = values
    return out


def graphblas_bfs_levels(A: Any, source: int) -> np.ndarray:
    """BFS levels from ``source`` following out-edges of the GraphBLAS matrix ``A``."""
    gb = graphblas()
    n = A.nrows
    levels = gb.Vector(gb.dtypes.INT32, n)
    frontier = gb.Vector(gb.dtypes.BOOL, n)
    frontier[source] = True
    depth = 0
    while frontier.nvals:
        levels(frontier.S) << depth
        depth += 1
        frontier(~levels.S, replace=True) << gb.semiring.any_pair(frontier @ A)
    return _dense(levels, -1, np.int32)


def graphblas_bellman_ford(A: Any, source: int) -> np.ndarray:
    """Shortest-path distances from ``source`` over the GraphBLAS matrix ``A`` (non-negative
    weights): each sweep relaxes the out-edges of the vertices whose distance fell."""
    gb = graphblas()
    dist = gb.Vector(gb.dtypes.FP64, A.nrows)
    dist[source] = 0.0
    fell = dist.dup()
    while fell.nvals:
        reach = gb.semiring.min_plus(fell @ A).new()
        shorter = gb.binary.lt(reach & dist).new()
        fell = reach.dup(mask=~dist.S)  # first reached
        fell(shorter.V) << reach  # reached again, shorter
        dist(gb.binary.min) << fell
    return _dense(dist, np.inf, np.float64)


def graphblas_weak_components(A: Any, symmetric: bool = False) -> np.ndarray:
    """Weak-component labels (smallest vertex of each component) of the GraphBLAS matrix
    ``A``, its edges read as undirected, by FastSV (Zhang, Azad and Hu, 2020): each sweep
    takes every vertex's smallest neighbouring grandparent (``min_second`` over A and its
    transpose), hooks the vertex's parent to it (stochastic hooking, a build that keeps the
    minimum of repeated indices), the vertex itself (aggressive hooking) and its grandparent
    (shortcutting), until no grandparent changes. ``symmetric``: A equals its transpose, whose
    product is then skipped."""
    gb = graphblas()
    n = A.nrows
    parent = gb.Vector.from_coo(np.arange(n), np.arange(n, dtype=np.int64), size=n)
    grandparent = parent.dup()
    while True:
        smallest = gb.semiring.min_second(A @ grandparent).new()
        if not symmetric:
            smallest(gb.binary.min) << gb.semiring.min_second(A.T @ grandparent)
        index, values = smallest.to_coo()
        parent(gb.binary.min) << gb.Vector.from_coo(parent.to_dense()[index], values, size=n, dup_op=gb.binary.min)
        parent(gb.binary.min) << smallest
        parent(gb.binary.min) << grandparent
        jumped = parent[parent.to_dense()].new()
        if jumped.isequal(grandparent):
            return jumped.to_dense()
        grandparent = jumped

"""Core numbers (k-core decomposition), as :func:`networkx.core_number`.

The algorithm is peeling, written once over the array module of the graph's backend (NumPy on
the CPU, CuPy on the GPU): at level k, every vertex whose remaining degree is at most k gets core
number k and leaves the graph, and its edges are taken off its neighbours' degrees; when no vertex
of degree <= k is left, k jumps to the smallest remaining degree. Each round removes a whole
batch of vertices at once, gathers their neighbour lists from the CSR pointers and decrements the
neighbours' degrees with an integer ``bincount``: integer sums, so the result is exact and the
same on every run and on both backends. The work is one pass over the edges plus one pass over
the vertices per round.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sparsegpu import _validate, convert
from sparsegpu.csgraph._graph import Graph, as_graph

__all__ = ["core_number"]


def core_number(A: Any, *, directed: bool = False, backend: str | None = None) -> Any:
    """The core number of every vertex: the largest k such that the vertex belongs to a k-core
    (a maximal subgraph whose vertices all have degree >= k).

    Parameters
    ----------
    A : scipy sparse matrix or array, 2-D array_like, or sparsegpu matrix
        The N x N adjacency: a stored entry ``A[u, v]`` is an edge u -> v (an explicit 0 too;
        dense input: 0, inf and NaN are "no edge"). Weights are ignored.
    directed : bool, optional, keyword-only
        False (default) reads ``A`` as a ``networkx.Graph``: the edges read both ways, each
        neighbour counted once. True reads it as a ``networkx.DiGraph``, whose degree is the
        in-degree plus the out-degree (a pair of opposite edges counts twice), as NetworkX's.
    backend : {"cpu", "gpu"}, optional, keyword-only
        Where scipy / NumPy input runs (default :func:`sparsegpu.backend`); a sparsegpu matrix
        runs where it lives.

    Returns
    -------
    ndarray of int64, length N
        Vertex i's core number (0 for an isolated vertex); NumPy, or CuPy for a GPU sparsegpu
        matrix. The values are NetworkX's ``core_number(G)[i]``.

    Raises
    ------
    TypeError
        ``A`` not a graph or complex; ``directed`` not a bool.
    ValueError
        ``A`` not square or 2-D; ``A`` has self loops (NetworkX refuses them too, with
        ``NetworkXNotImplemented``; remove the diagonal first).

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from sparsegpu.csgraph.cores import core_number
    >>> edges = [(0, 1), (0, 2), (1, 2), (2, 3)]   # a triangle with a tail
    >>> rows, cols = np.array(edges).T
    >>> A = sp.csr_array((np.ones(4), (rows, cols)), shape=(5, 5))
    >>> core_number(A, backend="cpu").tolist()
    [2, 2, 2, 1, 0]
    """
    graph = as_graph(A, backend, name="A")
    directed = _validate.check_bool("directed", directed)
    _check_no_self_loops(graph)
    parts = [graph, graph.transpose()] if directed else [graph.undirected()]
    return graph.output(peel(parts, graph.n, graph.xp))


def _check_no_self_loops(graph: Graph) -> None:
    rows = convert.expand_pointers(graph.indptr, graph.xp)
    loops = graph.xp.flatnonzero(rows == graph.indices)
    if loops.size:
        first = [int(v) for v in rows[loops[:5]]]
        raise ValueError(f"A has {int(loops.size)} self loop(s) (at vertices {first}"
                         f"{', ...' if loops.size > 5 else ''}); core numbers are defined for graphs "
                         f"without self loops, as in NetworkX: remove A's diagonal first")


def peel(parts: list[Graph], n: int, xp: Any) -> Any:
    """Core numbers of the multigraph whose edges are those of every graph in ``parts`` (a vertex's
    degree and neighbour list are the sums over the parts), by batched peeling."""
    degree = xp.zeros(n, dtype=np.int64)
    for part in parts:
        degree += xp.diff(part.indptr).astype(np.int64)
    core = xp.zeros(n, dtype=np.int64)
    remaining = xp.ones(n, dtype=bool)
    level = 0
    while True:
        alive = xp.flatnonzero(remaining)
        if alive.size == 0:
            return core
        level = max(level, int(degree[alive].min()))
        while alive.size:
            batch = alive[degree[alive] <= level]
            if batch.size == 0:
                break
            core[batch] = level
            remaining[batch] = False
            for part in parts:
                neighbours = _neighbours(part.indptr, part.indices, batch, xp)
                degree -= xp.bincount(neighbours, minlength=n).astype(np.int64)
            alive = alive[remaining[alive]]


def _neighbours(indptr: Any, indices: Any, vertices: Any, xp: Any) -> Any:
    """The concatenated neighbour lists of ``vertices``: a segmented gather through the CSR
    pointers, each position's list found by a binary search over the lists' ends (array
    operations that NumPy and CuPy both have)."""
    starts = indptr[vertices].astype(np.int64)
    lengths = indptr[vertices + 1].astype(np.int64) - starts
    ends = xp.cumsum(lengths)
    total = int(ends[-1]) if ends.size else 0
    if total == 0:
        return xp.zeros(0, dtype=np.int64)
    position = xp.arange(total, dtype=np.int64)
    owner = xp.searchsorted(ends, position, side="right")
    return indices[starts[owner] + position - (ends[owner] - lengths[owner])].astype(np.int64)

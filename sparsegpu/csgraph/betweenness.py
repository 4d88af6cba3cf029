"""Betweenness centrality, as :func:`networkx.betweenness_centrality`.

Brandes' algorithm over a batch of sources at once. Vertex-by-source arrays (``n x batch``)
hold each source's BFS level, path counts ``sigma`` and dependencies ``delta``:

- forward, level by level: the path counts of the next level are ``A^T @ frontier`` (a sparse
  times dense product whose columns are the sources, the frontier being ``sigma`` masked to the
  current level); the vertices it reaches for the first time form the next level;
- backward, from the deepest level up: ``delta[u] = sigma[u] * sum over children v of
  (1 + delta[v]) / sigma[v]``, the sum being ``A @ coeff`` with ``coeff`` masked to the level
  below.

The code is written once over the backend's array module: SciPy's sparse products on the CPU,
sparsegpu's CSR times a block of vectors on the GPU. Path counts are integers held exactly in
float64 (up to 2^53), so their sums do not depend on order; the dependencies are float sums,
reproducible because every product sums each row in a fixed order (SciPy's sequential loop; the
GPU kernel's fixed split of a row) and each batch's sum over its sources is added to the result
in the order of the batches, whose size depends on ``n`` only.

Weighted betweenness (``weight`` given) runs on the host: SciPy's Dijkstra gives every source's
distances, the edges with ``dist[u] + w == dist[v]`` (NetworkX's exact test) form the
shortest-path DAG, and path counts and dependencies are propagated over that DAG for a batch of
sources at once until they stop changing (once per DAG depth), with deterministic sequential
sums.
"""

from __future__ import annotations

import math
import random
from typing import Any

import numpy as np
import scipy.sparse as sp
import scipy.sparse.csgraph as scipy_csgraph

from sparsegpu import _validate, convert
from sparsegpu.csgraph._graph import Graph, as_graph
from sparsegpu.formats import CSR

__all__ = ["betweenness_centrality"]

#: Memory, in bytes, the vertex-by-source arrays of one batch may take (about 6 float64-sized
#: arrays of n x batch): the batch size depends on n alone, so results are reproducible.
_BATCH_BYTES = {"cpu": 1 << 27, "gpu": 1 << 31}
#: Most sources in one batch.
_MAX_BATCH = 512


def betweenness_centrality(A: Any, k: int | None = None, normalized: bool = True, weight: Any = None,
                           endpoints: bool = False, seed: Any = None, *, directed: bool = True,
                           backend: str | None = None) -> Any:
    """Shortest-path betweenness centrality of every vertex, NetworkX's definition and scaling.

    Parameters
    ----------
    A : scipy sparse matrix or array, 2-D array_like, or sparsegpu matrix
        The N x N adjacency: a stored entry ``A[u, v]`` is an edge u -> v of weight ``A[u, v]``
        (an explicit 0 too; dense input: 0, inf and NaN are "no edge"). Self loops lie on no
        shortest path and change nothing.
    k : int, optional
        Use ``k`` sampled sources (``1 <= k <= N``) and scale up, as NetworkX; None (default)
        or ``k == N`` uses every vertex (exact).
    normalized : bool, optional
        Divide by the number of (s, t) pairs, NetworkX's rule for directed / undirected graphs,
        endpoints and sampling (default True).
    weight : None, True or str, optional
        None (default): every edge has length 1 (batched BFS, on either backend). True or any
        string: ``A``'s values are the edge lengths (NetworkX's ``weight`` names an edge
        attribute; a matrix has one); they must be positive and finite, and this runs on the
        host whatever the backend.
    seed : int, random.Random or None, optional
        For ``k``: the sources are ``random.Random(seed).sample(range(N), k)``, NetworkX's own
        choice, so the same integer seed picks the same sources (and gives NetworkX's result).
        None uses Python's global ``random`` generator, as NetworkX does.
    endpoints : bool, optional
        Count the path's end vertices too (default False).
    directed : bool, optional, keyword-only
        True (default) reads ``A`` as a ``networkx.DiGraph``; False as a ``networkx.Graph``
        (each edge both ways; with ``weight``, the smaller of two opposite weights).
    backend : {"cpu", "gpu"}, optional, keyword-only
        Where scipy / NumPy input runs (default :func:`sparsegpu.backend`); a sparsegpu matrix
        runs where it lives.

    Returns
    -------
    ndarray of float64, length N
        Vertex i's betweenness, NetworkX's ``betweenness_centrality(G, ...)[i]`` up to rounding
        (the sums run in another order); NumPy, or CuPy for a GPU sparsegpu matrix. With ``k``
        and ``endpoints=False``, a sampled source gets NaN when ``k == 1``, as in NetworkX.

    Raises
    ------
    TypeError
        ``A`` not a graph or complex; ``k`` not an integer; a flag not a bool; ``seed`` not
        an int, ``random.Random`` or None; ``weight`` of another type.
    ValueError
        ``A`` not square or 2-D; ``k`` outside [1, N]; a weight that is not positive and
        finite (with ``weight``).

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from sparsegpu.csgraph.betweenness import betweenness_centrality
    >>> path = sp.csr_array(np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]]))
    >>> betweenness_centrality(path, directed=False, backend="cpu").tolist()
    [0.0, 1.0, 0.0]
    >>> betweenness_centrality(path, normalized=False, endpoints=True, directed=False, backend="cpu").tolist()
    [2.0, 3.0, 2.0]
    >>> betweenness_centrality(path, k=2, seed=42, endpoints=True, directed=False, backend="cpu").tolist()
    [0.75, 1.0, 0.75]
    """
    normalized = _validate.check_bool("normalized", normalized)
    endpoints = _validate.check_bool("endpoints", endpoints)
    directed = _validate.check_bool("directed", directed)
    weighted = _check_weight(weight)
    generator = _check_seed(seed)
    graph = as_graph(A, backend, name="A")
    n = graph.n
    k = _check_k(k, n)
    oriented = graph.oriented(directed)
    if weighted:
        _check_lengths(oriented)
    sources = np.arange(n, dtype=np.int64) if k is None else np.array(generator.sample(range(n), k), dtype=np.int64)
    if weighted:
        raw = graph.xp.asarray(_weighted_betweenness(oriented.to_scipy(), sources, endpoints))
    else:
        raw = _unweighted_betweenness(oriented, sources, endpoints)
    scale = _rescale(n, normalized=normalized, directed=directed, endpoints=endpoints,
                     sampled=None if k is None else sources)
    return graph.output(raw * graph.xp.asarray(scale))


# --------------------------------------------------------------------------- arguments


def _check_weight(weight: Any) -> bool:
    if weight is None or weight is False:
        return False
    if weight is True or isinstance(weight, str):
        return True
    raise TypeError(f"weight must be None, True or a string (the matrix's values are the lengths), "
                    f"got {type(weight).__name__} {weight!r}")


def _check_k(k: Any, n: int) -> int | None:
    if k is None:
        return None
    k = _validate.check_int("k", k)
    if k == n:
        return None
    if not 1 <= k <= n:
        raise ValueError(f"k must be between 1 and the number of vertices {n}, got {k}")
    return k


def _check_seed(seed: Any) -> random.Random:
    if seed is None:
        return random._inst  # NetworkX's choice for None: the module's shared generator
    if isinstance(seed, random.Random):
        return seed
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be an int, a random.Random or None, got {type(seed).__name__} {seed!r}")
    return random.Random(int(seed))


def _check_lengths(graph: Graph) -> None:
    if graph.nnz and not bool(((graph.weights > 0) & graph.xp.isfinite(graph.weights)).all()):
        raise ValueError("A holds weights that are not positive and finite; weighted betweenness needs "
                         "positive finite edge lengths (NetworkX's rule: zero lengths make infinitely many "
                         "shortest paths)")


def _rescale(n: int, *, normalized: bool, directed: bool, endpoints: bool,
             sampled: np.ndarray | None) -> float | np.ndarray:
    """NetworkX's ``_rescale``: a scalar, or a per-vertex array when sampled sources are scaled
    apart from the others (``k`` with ``endpoints=False``)."""
    pairs = n if endpoints else n - 1
    if pairs < 2:
        return 1.0
    k = pairs if sampled is None else sampled.size
    correction = 1 if directed else 2
    if sampled is None or endpoints:
        return 1 / (k * (pairs - 1)) if normalized else pairs / (k * correction)
    if normalized:
        source_scale = 1 / ((k - 1) * (pairs - 1)) if k > 1 else math.nan
        other_scale = 1 / (k * (pairs - 1))
    else:
        source_scale = pairs / ((k - 1) * correction) if k > 1 else math.nan
        other_scale = pairs / (k * correction)
    scale = np.full(n, other_scale)
    scale[sampled] = source_scale
    return scale


def _batch_size(n: int, backend: str, count: int) -> int:
    return max(1, min(count, _MAX_BATCH, _BATCH_BYTES[backend] // (48 * max(n, 1))))


# --------------------------------------------------------------------------- unweighted


def _structure(graph: Graph) -> Any:
    """The graph's pattern as a matrix of ones: a SciPy CSR on the CPU, a sparsegpu CSR on the
    GPU (whose products with a block of vectors sum each entry in a fixed order: the same bits
    on every run). Built once per graph and kept with it, with the product's launch plan."""
    if "betweenness_structure" not in graph._cache:
        ones = graph.xp.ones(graph.nnz, dtype=np.float64)
        if graph.backend == "gpu":
            S = CSR((ones, graph.indices, graph.indptr), (graph.n, graph.n), backend="gpu", check=False)
        else:
            S = sp.csr_array((ones, graph.indices, graph.indptr), shape=(graph.n, graph.n))
        graph._cache["betweenness_structure"] = S
    return graph._cache["betweenness_structure"]


def _unweighted_betweenness(graph: Graph, sources: np.ndarray, endpoints: bool) -> Any:
    xp, n = graph.xp, graph.n
    out_edges = _structure(graph)
    in_edges = out_edges if graph.known_structurally_symmetric() else _structure(graph.transpose())
    result = xp.zeros(n, dtype=np.float64)
    size = _batch_size(n, graph.backend, sources.size)
    for start in range(0, sources.size, size):
        batch = xp.asarray(sources[start:start + size])
        result += _batch_dependencies(out_edges, in_edges, batch, n, xp, endpoints)
    return result


def _batch_dependencies(A: Any, AT: Any, sources: Any, n: int, xp: Any, endpoints: bool) -> Any:
    """The sum over ``sources`` of each vertex's dependency (Brandes' delta, the source itself
    excluded; plus NetworkX's endpoint terms with ``endpoints``), from one batched BFS over the
    out-edge pattern ``A`` and the in-edge pattern ``AT`` (both CSR: only non-transposed
    products)."""
    columns = xp.arange(sources.size)
    level = xp.full((n, sources.size), -1, dtype=np.int32)
    level[sources, columns] = 0
    sigma = xp.zeros((n, sources.size), dtype=np.float64)
    sigma[sources, columns] = 1.0
    frontier, depth = sigma, 0
    while True:
        reach = AT @ frontier  # paths into each vertex from the current level
        new = (reach > 0) & (level < 0)
        if not bool(new.any()):
            break
        depth += 1
        frontier = xp.where(new, reach, 0.0)
        sigma += frontier
        level[new] = depth
    reciprocal = 1.0 / xp.where(sigma > 0, sigma, 1.0)
    delta = xp.zeros_like(sigma)
    for d in range(depth - 1, -1, -1):
        coeff = xp.where(level == d + 1, (1.0 + delta) * reciprocal, 0.0)
        delta = xp.where(level == d, sigma * (A @ coeff), delta)
    delta[sources, columns] = 0.0
    if endpoints:
        delta += level > 0  # each reached target counts itself
        reached = (level >= 0).sum(axis=0) - 1
        delta[sources, columns] += reached
    return delta.sum(axis=1)


# --------------------------------------------------------------------------- weighted (host)


def _weighted_betweenness(S: sp.csr_array, sources: np.ndarray, endpoints: bool) -> np.ndarray:
    n = S.shape[0]
    result = np.zeros(n, dtype=np.float64)
    if n == 0 or sources.size == 0:
        return result
    tails = convert.expand_pointers(S.indptr, np).astype(np.int64)
    heads = S.indices.astype(np.int64)
    size = max(1, min(sources.size, _MAX_BATCH, _BATCH_BYTES["cpu"] // (24 * max(S.nnz, n, 1))))
    for start in range(0, sources.size, size):
        batch = sources[start:start + size]
        dist = scipy_csgraph.dijkstra(S, directed=True, indices=batch).T  # n x batch
        result += _dag_dependencies(dist, tails, heads, S.data, batch, endpoints)
    return result


def _dag_dependencies(dist: np.ndarray, tails: np.ndarray, heads: np.ndarray, lengths: np.ndarray,
                      sources: np.ndarray, endpoints: bool) -> np.ndarray:
    """The batch's summed dependencies over each source's shortest-path DAG (edges whose length
    closes the distance exactly, NetworkX's test), by propagation to a fixed point."""
    n, width = dist.shape
    columns = np.arange(width)
    on_dag = (dist[tails] + lengths[:, None] == dist[heads]) & np.isfinite(dist[tails])
    start = np.zeros((n, width))
    start[sources, columns] = 1.0
    sigma = start
    while True:  # path counts: sigma[v] = [v is the source] + sum of sigma over DAG parents
        updated = start + _sum_into(heads, np.where(on_dag, sigma[tails], 0.0), n)
        if np.array_equal(updated, sigma):
            break
        sigma = updated
    reciprocal = 1.0 / np.where(sigma > 0, sigma, 1.0)
    delta = np.zeros_like(sigma)
    while True:  # dependencies: delta[u] = sigma[u] * sum over DAG children of (1 + delta) / sigma
        share = np.where(on_dag, ((1.0 + delta) * reciprocal)[heads], 0.0)
        updated = sigma * _sum_into(tails, share, n)
        if np.array_equal(updated, delta):
            break
        delta = updated
    delta[sources, columns] = 0.0
    if endpoints:
        reached = np.isfinite(dist)
        delta += reached
        delta[sources, columns] += reached.sum(axis=0) - 2  # the source was counted once above
    return delta.sum(axis=1)


def _sum_into(targets: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """``out[targets[e], b] += values[e, b]`` in edge order (a sequential, reproducible bincount)."""
    width = values.shape[1]
    keys = (targets[:, None] * width + np.arange(width)).ravel()
    return np.bincount(keys, weights=values.ravel(), minlength=n * width).reshape(n, width)

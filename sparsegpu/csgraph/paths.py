"""Shortest paths, as :mod:`scipy.sparse.csgraph` names them: :func:`shortest_path`,
:func:`dijkstra`, :func:`bellman_ford`.

On the GPU: Dijkstra's problem is solved by delta-stepping (``_device_paths.delta_stepping``),
unweighted distances by the device BFS (levels as float distances), Bellman-Ford by
``_device_paths.bellman_ford``; several sources run one after another and stack into SciPy's
2-D output. Floyd-Warshall and Johnson run on the host through SciPy. The CPU backend calls
SciPy, except that ``bellman_ford(directed=False)`` runs SciPy's directed Bellman-Ford on the
explicitly symmetrised graph (see :func:`bellman_ford`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse.csgraph as scipy_csgraph
from scipy.sparse.csgraph import NegativeCycleError

from sparsegpu import _validate
from sparsegpu.csgraph import _device_paths
from sparsegpu.csgraph._graph import (
    NO_PREDECESSOR,
    Graph,
    as_graph,
    check_choice,
    check_limit,
    check_output_size,
    check_sources,
)
from sparsegpu.csgraph.traversal import device_bfs

__all__ = ["NegativeCycleError", "bellman_ford", "dijkstra", "shortest_path"]

METHODS = ("auto", "FW", "D", "BF", "J")


def _flags(**flags: Any) -> list[bool]:
    return [_validate.check_bool(name, value) for name, value in flags.items()]


def _reshape(graph: Graph, dist: Any, preds: Any, shape: tuple[int, ...], return_predecessors: bool) -> Any:
    dist = graph.output(dist.reshape(shape + (graph.n,)))
    if not return_predecessors:
        return dist
    return dist, graph.output(preds.reshape(shape + (graph.n,)))


def _no_negative(graph: Graph, function: str) -> None:
    if graph.has_negative_weight():
        raise ValueError(f"{function}: csgraph has negative weights, which Dijkstra's algorithm cannot take; "
                         f"use bellman_ford or shortest_path(method='J')")


# --------------------------------------------------------------------------- device loops


def _device_unweighted(graph: Graph, sources: np.ndarray, directed: bool, limit: float, preds: bool) -> tuple[Any, Any]:
    """Hop counts from each source by the device BFS, stacked (rows: sources)."""
    xp = graph.xp
    dist = xp.empty((sources.size, graph.n), dtype=np.float64)
    pred = xp.empty((sources.size, graph.n), dtype=np.int32) if preds else None
    for row, source in enumerate(sources.tolist()):
        levels, parents = device_bfs(graph, source, directed, preds)
        hops = xp.where(levels >= 0, levels.astype(np.float64), np.inf)
        beyond = hops > limit
        dist[row] = xp.where(beyond, np.inf, hops)
        if preds:
            pred[row] = xp.where(beyond, NO_PREDECESSOR, parents)
    return dist, pred


def _unit_weights(graph: Graph) -> Graph:
    """The same graph with every weight 1 (cached)."""
    if "unit" not in graph._cache:
        graph._cache["unit"] = graph._derived(graph.indptr, graph.indices, graph.xp.ones(graph.nnz, dtype=np.float64))
    return graph._cache["unit"]


def _device_dijkstra(graph: Graph, sources: np.ndarray, limit: float, preds: bool) -> tuple[Any, Any]:
    xp = graph.xp
    dist = xp.empty((sources.size, graph.n), dtype=np.float64)
    pred = xp.empty((sources.size, graph.n), dtype=np.int32) if preds else None
    for row, source in enumerate(sources.tolist()):
        d, p, _ = _device_paths.delta_stepping(graph.indptr, graph.indices, graph.weights,
                                               xp.asarray([source], dtype=graph.indices.dtype),
                                               limit=limit, predecessors=preds)
        dist[row] = d
        if preds:
            pred[row] = p
    return dist, pred


def _device_bellman_ford(graph: Graph, sources: np.ndarray, preds: bool) -> tuple[Any, Any]:
    xp = graph.xp
    dist = xp.empty((sources.size, graph.n), dtype=np.float64)
    pred = xp.empty((sources.size, graph.n), dtype=np.int32) if preds else None
    for row, source in enumerate(sources.tolist()):
        d, p = _device_paths.bellman_ford(graph.indptr, graph.indices, graph.weights, source, predecessors=preds)
        dist[row] = d
        if preds:
            pred[row] = p
    return dist, pred


# --------------------------------------------------------------------------- public


def dijkstra(csgraph: Any, directed: bool = True, indices: Any = None, return_predecessors: bool = False,
             unweighted: bool = False, limit: float = np.inf, min_only: bool = False, *,
             backend: str | None = None) -> Any:
    """Shortest paths from ``indices`` with non-negative weights (Dijkstra's problem).

    Parameters
    ----------
    csgraph : scipy sparse matrix or array, 2-D array_like, or sparsegpu matrix
        The N x N weights. Sparse input: every stored entry is an edge (an explicit 0 is an
        edge of weight 0); dense input: 0, inf and NaN mean "no edge".
    directed : bool, optional
        False reads every edge both ways, with the smaller weight of the two (default True).
    indices : int or array_like of int, optional
        Sources (negative ones count from the end); default every vertex.
    return_predecessors : bool, optional
        Also return predecessors (default False).
    unweighted : bool, optional
        Count edges instead of adding weights (default False).
    limit : float, optional
        Distances above ``limit`` are reported as inf, their vertices unreached (default inf).
    min_only : bool, optional
        One distance per vertex: to the nearest of ``indices`` (default False).
    backend : {"cpu", "gpu"}, optional
        Where scipy / NumPy input runs (default :func:`sparsegpu.backend`); a sparsegpu matrix
        runs where it lives.

    Returns
    -------
    dist_matrix : ndarray of float64
        Shape ``indices.shape + (N,)`` (``(N,)`` with ``min_only``); inf where unreachable.
    predecessors : ndarray of int32
        Same shape; -9999 for sources and unreached vertices. Only with
        ``return_predecessors``. Any shortest-path tree is valid: the GPU's may differ from
        SciPy's where paths tie.
    sources : ndarray of int32, shape (N,)
        With ``min_only`` and ``return_predecessors``: the source each distance comes from
        (-9999 unreached).

    Arrays are NumPy, or CuPy for a GPU sparsegpu matrix.

    Raises
    ------
    TypeError
        ``csgraph`` not a graph or complex; ``indices`` not integers; a flag not a bool;
        ``limit`` not a number.
    ValueError
        ``csgraph`` not square or 2-D, corrupted sparse arrays, NaN weights, negative weights
        (SciPy only warns and may give wrong distances: use :func:`bellman_ford`), ``indices``
        out of range, ``limit`` negative or NaN, a result too large for memory.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from sparsegpu.csgraph import dijkstra
    >>> G = sp.csr_array(np.array([[0, 1, 2, 0], [0, 0, 0, 1], [2, 0, 0, 3], [0, 0, 0, 0]]))
    >>> dist, preds = dijkstra(G, indices=0, return_predecessors=True, backend="cpu")
    >>> dist.tolist(), preds.tolist()
    ([0.0, 1.0, 2.0, 2.0], [-9999, 0, 0, 1])
    >>> dist, preds, sources = dijkstra(G, indices=[1, 2], min_only=True, return_predecessors=True,
    ...                                 backend="cpu")
    >>> dist.tolist(), sources.tolist()
    ([2.0, 0.0, 0.0, 1.0], [2, 1, 2, 1])
    """
    graph = as_graph(csgraph, backend)
    directed, return_predecessors, unweighted, min_only = _flags(
        directed=directed, return_predecessors=return_predecessors, unweighted=unweighted, min_only=min_only)
    limit = check_limit(limit)
    sources, shape = check_sources(indices, graph.n)
    return _dijkstra(graph, directed, sources, shape, return_predecessors, unweighted, limit, min_only)


def _dijkstra(graph: Graph, directed: bool, sources: np.ndarray, shape: tuple[int, ...], return_predecessors: bool,
              unweighted: bool, limit: float = np.inf, min_only: bool = False) -> Any:
    if not unweighted:
        graph.check_weights("dijkstra")
        _no_negative(graph, "dijkstra")
    check_output_size(1 if min_only else sources.size, graph.n, graph.backend, "the distance matrix")
    if graph.backend == "cpu":
        result = scipy_csgraph.dijkstra(graph.to_scipy(), directed, sources, return_predecessors, unweighted,
                                        limit, min_only)
        if min_only:
            return tuple(graph.output(a) for a in result) if return_predecessors else graph.output(result)
        dist, preds = result if return_predecessors else (result, None)
        return _reshape(graph, dist, preds, shape, return_predecessors)
    oriented = graph.oriented(directed)
    if min_only:
        return _device_min_only(oriented, sources, unweighted, limit, return_predecessors)
    if unweighted:
        dist, preds = _device_unweighted(graph, sources, directed, limit, return_predecessors)
    else:
        dist, preds = _device_dijkstra(oriented, sources, limit, return_predecessors)
    return _reshape(graph, dist, preds, shape, return_predecessors)


def _device_min_only(graph: Graph, sources: np.ndarray, unweighted: bool, limit: float, preds: bool) -> Any:
    """One multi-source delta-stepping run (unit weights when ``unweighted``)."""
    weighted = _unit_weights(graph) if unweighted else graph
    xp = graph.xp
    dist, pred, source_of = _device_paths.delta_stepping(
        weighted.indptr, weighted.indices, weighted.weights, xp.asarray(sources, dtype=graph.indices.dtype),
        limit=limit, predecessors=preds, nearest_source=preds)
    if not preds:
        return graph.output(dist)
    return graph.output(dist), graph.output(pred.astype(np.int32)), graph.output(source_of.astype(np.int32))


def bellman_ford(csgraph: Any, directed: bool = True, indices: Any = None, return_predecessors: bool = False,
                 unweighted: bool = False, *, backend: str | None = None) -> Any:
    """Shortest paths from ``indices``, negative weights allowed (Bellman-Ford).

    ``directed=False`` symmetrises the graph explicitly (each edge both ways, the smaller
    weight where both are stored) and solves the directed problem on it, on both backends.
    SciPy's own undirected Bellman-Ford can report a negative cycle in a graph of positive
    weights: its undirected cycle test checks ``|d(v) - d(u)| > w + 1e-15`` on every edge, an
    absolute tolerance below one rounding of ``d(u) + w`` once distances exceed about 10, so
    rounding alone fails it (the path 0 - 1 - 2 with weights 1000.1 and 0.7 is enough; so is
    bcspwr10 with random positive weights). SciPy's directed test compares ``d(u) + w`` with
    the ``d(v)`` it stored from that same sum, and is exact.

    Parameters
    ----------
    csgraph : scipy sparse matrix or array, 2-D array_like, or sparsegpu matrix
        The N x N weights (edge rules as in :func:`dijkstra`).
    directed : bool, optional
        False reads every edge both ways (default True). An undirected negative edge is a
        negative cycle.
    indices : int or array_like of int, optional
        Sources (negative ones count from the end); default every vertex.
    return_predecessors : bool, optional
        Also return predecessors (default False).
    unweighted : bool, optional
        Count edges instead of adding weights (default False).
    backend : {"cpu", "gpu"}, optional
        Where scipy / NumPy input runs (default :func:`sparsegpu.backend`).

    Returns
    -------
    dist_matrix : ndarray of float64
        Shape ``indices.shape + (N,)``; inf where unreachable.
    predecessors : ndarray of int32
        Same shape, -9999 none; only with ``return_predecessors``.

    Raises
    ------
    NegativeCycleError
        A negative cycle is reachable from a source (SciPy's class and message).
    TypeError
        As :func:`dijkstra`.
    ValueError
        As :func:`dijkstra`, negative weights excepted.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from sparsegpu.csgraph import bellman_ford
    >>> G = sp.csr_array(np.array([[0, 4.0, 1.0], [0, 0, 0], [0, -2.0, 0]]))
    >>> bellman_ford(G, indices=0, backend="cpu").tolist()
    [0.0, -1.0, 1.0]
    """
    graph = as_graph(csgraph, backend)
    directed, return_predecessors, unweighted = _flags(
        directed=directed, return_predecessors=return_predecessors, unweighted=unweighted)
    sources, shape = check_sources(indices, graph.n)
    return _bellman_ford(graph, directed, sources, shape, return_predecessors, unweighted)


def _bellman_ford(graph: Graph, directed: bool, sources: np.ndarray, shape: tuple[int, ...],
                  return_predecessors: bool, unweighted: bool) -> Any:
    if not unweighted:
        graph.check_weights("bellman_ford")
    check_output_size(sources.size, graph.n, graph.backend, "the distance matrix")
    oriented = graph.oriented(directed)
    if graph.backend == "cpu":
        # SciPy's directed test on the symmetrised graph: its undirected one is wrong (docstring).
        result = scipy_csgraph.bellman_ford(oriented.to_scipy(), True, sources, return_predecessors, unweighted)
        dist, preds = result if return_predecessors else (result, None)
    elif unweighted:
        dist, preds = _device_unweighted(graph, sources, directed, np.inf, return_predecessors)
    else:
        dist, preds = _device_bellman_ford(oriented, sources, return_predecessors)
    return _reshape(graph, dist, preds, shape, return_predecessors)


def shortest_path(csgraph: Any, method: str = "auto", directed: bool = True, return_predecessors: bool = False,
                  unweighted: bool = False, overwrite: bool = False, indices: Any = None, *,
                  backend: str | None = None) -> Any:
    """Shortest paths from ``indices`` (default every vertex) by the chosen method.

    Parameters
    ----------
    csgraph : scipy sparse matrix or array, 2-D array_like, or sparsegpu matrix
        The N x N weights (edge rules as in :func:`dijkstra`).
    method : {"auto", "D", "BF", "FW", "J"}, optional
        "D" Dijkstra (:func:`dijkstra`), "BF" Bellman-Ford (:func:`bellman_ford`), "FW"
        Floyd-Warshall and "J" Johnson (both on the host through SciPy, whatever the backend),
        "auto" (default): on the CPU SciPy's choice; on the GPU the device BFS for
        ``unweighted``, Bellman-Ford for negative weights, else Dijkstra.
    directed : bool, optional
        False reads every edge both ways, with the smaller weight (default True).
    return_predecessors : bool, optional
        Also return predecessors (default False).
    unweighted : bool, optional
        Count edges instead of adding weights (default False).
    overwrite : bool, optional
        Accepted for SciPy's signature; the input is never modified.
    indices : int or array_like of int, optional
        Sources; default every vertex.
    backend : {"cpu", "gpu"}, optional
        Where scipy / NumPy input runs (default :func:`sparsegpu.backend`).

    Returns
    -------
    dist_matrix : ndarray of float64
        Shape ``indices.shape + (N,)`` (``(N, N)`` without ``indices``).
    predecessors : ndarray of int32
        Same shape, -9999 none; only with ``return_predecessors``.

    Raises
    ------
    NegativeCycleError
        "BF" or "J" (or "auto" with negative weights) find a negative cycle.
    TypeError
        As :func:`dijkstra`; ``method`` not a string.
    ValueError
        As :func:`dijkstra`; an unknown ``method``; "D" with negative weights; "FW" with
        ``indices``.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from sparsegpu.csgraph import shortest_path
    >>> G = sp.csr_array(np.array([[0, 1, 2, 0], [0, 0, 0, 1], [2, 0, 0, 3], [0, 0, 0, 0]]))
    >>> shortest_path(G, directed=False, indices=[0, 3], backend="cpu").tolist()
    [[0.0, 1.0, 2.0, 2.0], [2.0, 1.0, 3.0, 0.0]]
    """
    method = check_choice("method", method, METHODS)
    graph = as_graph(csgraph, backend)
    directed, return_predecessors, unweighted, _ = _flags(
        directed=directed, return_predecessors=return_predecessors, unweighted=unweighted, overwrite=overwrite)
    sources, shape = check_sources(indices, graph.n)
    if method == "FW" and indices is not None:
        raise ValueError("method='FW' computes every pair: indices must be None (as in SciPy)")
    on_gpu_auto = method == "auto" and graph.backend == "gpu"
    if method == "D" or (on_gpu_auto and (unweighted or not graph.has_negative_weight())):
        return _dijkstra(graph, directed, sources, shape, return_predecessors, unweighted)
    if method == "BF" or on_gpu_auto:
        return _bellman_ford(graph, directed, sources, shape, return_predecessors, unweighted)
    if not unweighted:
        graph.check_weights("shortest_path")
    check_output_size(sources.size, graph.n, "cpu", "the distance matrix")
    result = scipy_csgraph.shortest_path(graph.to_scipy(), method, directed, return_predecessors, unweighted,
                                         False, None if indices is None else sources)
    dist, preds = result if return_predecessors else (result, None)
    return _reshape(graph, dist, preds, shape, return_predecessors)

"""Components, breadth-first search and single-source path lengths with NetworkX's signatures.

Each function takes a :class:`~sparsegpu.nx.graph.SparseGraph` (NetworkX converts the user's
graph and passes it in) and returns what NetworkX returns: generators of node sets, dicts keyed
by node. Vertices come back in index order within a BFS level where NetworkX's order is the
order it discovered them: the sets, layers and distances are NetworkX's, the order inside a
level may differ, and ``bfs_edges`` picks one valid parent per vertex (SciPy's first
discoverer on the CPU backend, any on the GPU).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from typing import Any

import numpy as np

from sparsegpu._backend import to_host
from sparsegpu.csgraph import breadth_first_order, dijkstra
from sparsegpu.csgraph import connected_components as csgraph_components
from sparsegpu.nx.graph import SparseGraph


def _networkx() -> Any:
    import networkx

    return networkx


def _not_for_directed(G: SparseGraph) -> None:
    if G.is_directed():
        raise _networkx().NetworkXNotImplemented("not implemented for directed type")


def _not_for_undirected(G: SparseGraph) -> None:
    if not G.is_directed():
        raise _networkx().NetworkXNotImplemented("not implemented for undirected type")


def _groups(G: SparseGraph, labels: Any) -> list[set]:
    labels = to_host(labels)
    order = np.argsort(labels, kind="stable")
    bounds = np.flatnonzero(np.diff(labels[order])) + 1
    return [set(G.labels(part)) for part in np.split(order, bounds)] if labels.size else []


def connected_components(G: SparseGraph) -> Iterator[set]:
    """Sets of nodes, one per component, in the order of each component's first node in ``G``.

    Parameters
    ----------
    G : SparseGraph
        An undirected graph.

    Returns
    -------
    generator of set
        The components, as :func:`networkx.connected_components` yields them.

    Raises
    ------
    NetworkXNotImplemented
        ``G`` is directed.

    Examples
    --------
    >>> import networkx as nx
    >>> from sparsegpu.nx import backend_interface as sg, from_networkx
    >>> list(sg.connected_components(from_networkx(nx.Graph([(1, 2), ("a", "a")]), backend="cpu")))
    [{1, 2}, {'a'}]
    """
    _not_for_directed(G)
    _, labels = csgraph_components(G.matrix(), directed=False)
    yield from _groups(G, labels)


def number_connected_components(G: SparseGraph) -> int:
    """The number of connected components of an undirected graph.

    Parameters
    ----------
    G : SparseGraph
        An undirected graph.

    Returns
    -------
    int

    Raises
    ------
    NetworkXNotImplemented
        ``G`` is directed.

    Examples
    --------
    >>> import networkx as nx
    >>> from sparsegpu.nx import backend_interface as sg, from_networkx
    >>> sg.number_connected_components(from_networkx(nx.Graph([(1, 2), (3, 4)]), backend="cpu"))
    2
    """
    _not_for_directed(G)
    return int(csgraph_components(G.matrix(), directed=False, return_labels=False))


def is_connected(G: SparseGraph) -> bool:
    """Whether an undirected graph is connected.

    Parameters
    ----------
    G : SparseGraph
        An undirected graph.

    Returns
    -------
    bool

    Raises
    ------
    NetworkXNotImplemented
        ``G`` is directed.
    NetworkXPointlessConcept
        ``G`` has no node (as NetworkX).

    Examples
    --------
    >>> import networkx as nx
    >>> from sparsegpu.nx import backend_interface as sg, from_networkx
    >>> sg.is_connected(from_networkx(nx.path_graph(3), backend="cpu"))
    True
    """
    _not_for_directed(G)
    if len(G) == 0:
        raise _networkx().NetworkXPointlessConcept("Connectivity is undefined for the null graph.")
    return number_connected_components(G) == 1


def strongly_connected_components(G: SparseGraph) -> Iterator[set]:
    """Sets of nodes, one per strongly connected component, by first node in ``G``.

    Parameters
    ----------
    G : SparseGraph
        A directed graph.

    Returns
    -------
    generator of set

    Raises
    ------
    NetworkXNotImplemented
        ``G`` is undirected.

    Examples
    --------
    >>> import networkx as nx
    >>> from sparsegpu.nx import backend_interface as sg, from_networkx
    >>> list(sg.strongly_connected_components(from_networkx(nx.DiGraph([(0, 1), (1, 0), (1, 2)]), backend="cpu")))
    [{0, 1}, {2}]
    """
    _not_for_undirected(G)
    _, labels = csgraph_components(G.matrix(), directed=True, connection="strong")
    yield from _groups(G, labels)


def _source(G: SparseGraph, node: Hashable, error: str = "NodeNotFound") -> int:
    vertex = G.vertex(node)
    if vertex is None:
        raise getattr(_networkx(), error)(f"Source {node} is not in G")
    return vertex


def _distances(G: SparseGraph, sources: Any, weight: str | None = None, limit: float = np.inf,
               transpose: bool = False) -> np.ndarray:
    """Shortest distances from ``sources`` (the nearest of them) to every vertex, inf unreached."""
    A = G.matrix(weight, transpose=transpose)
    dist = dijkstra(A, directed=True, indices=sources, unweighted=weight is None, limit=limit,
                    min_only=True)
    return to_host(dist)


def _by_distance(dist: np.ndarray, cutoff: float = np.inf) -> np.ndarray:
    """Reached vertices (distance <= cutoff) ordered by distance, then index."""
    reached = np.flatnonzero(np.isfinite(dist) & (dist <= cutoff))
    return reached[np.argsort(dist[reached], kind="stable")]


def bfs_edges(G: SparseGraph, source: Hashable, reverse: bool = False, depth_limit: int | None = None,
              sort_neighbors: Any = None) -> Iterator[tuple]:
    """Tree edges ``(parent, child)`` of a breadth-first search from ``source``, level by level.

    Parameters
    ----------
    G : SparseGraph
    source : node
        Where the search starts.
    reverse : bool, optional
        Follow a directed graph's edges backwards (default False).
    depth_limit : int, optional
        The deepest level to reach (default: no limit).
    sort_neighbors : None
        Not supported (``can_run`` refuses it).

    Returns
    -------
    generator of tuple
        One edge per reached node but ``source``, levels in order.

    Raises
    ------
    NetworkXError
        ``source`` is not in ``G``.

    Examples
    --------
    >>> import networkx as nx
    >>> from sparsegpu.nx import backend_interface as sg, from_networkx
    >>> list(sg.bfs_edges(from_networkx(nx.path_graph(4), backend="cpu"), 1))
    [(1, 0), (1, 2), (2, 3)]
    """
    start = _source(G, source, "NetworkXError")
    transpose = bool(reverse) and G.is_directed()
    order, preds = breadth_first_order(G.matrix(transpose=transpose), start, directed=True)
    order, preds = to_host(order), to_host(preds)
    if depth_limit is not None:
        dist = _distances(G, start, limit=depth_limit, transpose=transpose)
        order = order[dist[order] <= depth_limit]
    children = order[1:]
    yield from zip(G.labels(preds[children]), G.labels(children))


def bfs_layers(G: SparseGraph, sources: Any) -> Iterator[list]:
    """Lists of nodes at distance 0, 1, 2, ... from ``sources``.

    Parameters
    ----------
    G : SparseGraph
    sources : node or iterable of nodes
        Where the search starts.

    Returns
    -------
    generator of list
        The layers, each in node order of ``G``.

    Raises
    ------
    NetworkXError
        A source is not in ``G``.

    Examples
    --------
    >>> import networkx as nx
    >>> from sparsegpu.nx import backend_interface as sg, from_networkx
    >>> list(sg.bfs_layers(from_networkx(nx.path_graph(4), backend="cpu"), [0, 3]))
    [[0, 3], [1, 2]]
    """
    if sources in G:
        sources = [sources]
    vertices = []
    for node in sources:
        vertex = G.vertex(node)
        if vertex is None:
            raise _networkx().NetworkXError(f"The node {node} is not in the graph.")
        vertices.append(vertex)
    if not vertices:
        return
    dist = _distances(G, np.unique(vertices))
    reached = _by_distance(dist)
    levels = dist[reached].astype(np.int64)
    bounds = np.flatnonzero(np.diff(levels)) + 1
    for part in np.split(reached, bounds):
        yield G.labels(part)


def descendants_at_distance(G: SparseGraph, source: Hashable, distance: int) -> set:
    """The nodes at exactly ``distance`` hops from ``source``.

    Parameters
    ----------
    G : SparseGraph
    source : node
    distance : int

    Returns
    -------
    set

    Raises
    ------
    NetworkXError
        ``source`` is not in ``G``.

    Examples
    --------
    >>> import networkx as nx
    >>> from sparsegpu.nx import backend_interface as sg, from_networkx
    >>> sg.descendants_at_distance(from_networkx(nx.path_graph(4), backend="cpu"), 0, 2)
    {2}
    """
    start = _source(G, source, "NetworkXError")
    if distance < 0:
        return set()
    dist = _distances(G, start, limit=distance)
    return set(G.labels(np.flatnonzero(dist == distance)))


def single_source_shortest_path_length(G: SparseGraph, source: Hashable, cutoff: int | None = None) -> dict:
    """Hop counts from ``source`` to every node within ``cutoff`` hops.

    Parameters
    ----------
    G : SparseGraph
    source : node
    cutoff : int, optional
        The most hops (default: no limit).

    Returns
    -------
    dict
        Node to int, for every reached node.

    Raises
    ------
    NodeNotFound
        ``source`` is not in ``G``.

    Examples
    --------
    >>> import networkx as nx
    >>> from sparsegpu.nx import backend_interface as sg, from_networkx
    >>> sg.single_source_shortest_path_length(from_networkx(nx.path_graph(4), backend="cpu"), 0, cutoff=2)
    {0: 0, 1: 1, 2: 2}
    """
    start = _source(G, source)
    limit = np.inf if cutoff is None else cutoff
    dist = _distances(G, start, limit=limit)
    reached = _by_distance(dist, limit)
    return dict(zip(G.labels(reached), dist[reached].astype(np.int64).tolist()))


def single_source_dijkstra_path_length(G: SparseGraph, source: Hashable, cutoff: float | None = None,
                                       weight: str | None = "weight") -> dict:
    """Weighted distances from ``source`` (missing weights count 1).

    Parameters
    ----------
    G : SparseGraph
        Converted with ``weight``'s attribute.
    source : node
    cutoff : float, optional
        The longest distance kept (default: no limit).
    weight : str or None, optional
        The edge attribute (default "weight"); None counts hops.

    Returns
    -------
    dict
        Node to distance: ints where every weight is an int, floats otherwise.

    Raises
    ------
    NodeNotFound
        ``source`` is not in ``G``.
    ValueError
        A negative weight.

    Examples
    --------
    >>> import networkx as nx
    >>> from sparsegpu.nx import backend_interface as sg, from_networkx
    >>> S = from_networkx(nx.Graph([(0, 1, {"w": 2}), (1, 2, {"w": 3})]), edge_attrs={"w": 1}, backend="cpu")
    >>> sg.single_source_dijkstra_path_length(S, 0, weight="w")
    {0: 0, 1: 2, 2: 5}
    """
    start = _source(G, source)
    limit = np.inf if cutoff is None else cutoff
    dist = _distances(G, start, weight=weight, limit=limit)
    if weight is not None and bool((G.weights[weight] < 0).any()):
        raise ValueError("Contradictory paths found: negative weights?")
    reached = _by_distance(dist, limit)
    values = dist[reached]
    as_int = weight is None or weight in G.integral
    lengths = values.astype(np.int64).tolist() if as_int else values.tolist()
    result = dict(zip(G.labels(reached), lengths))
    result[source] = 0
    return result


def shortest_path_length(G: SparseGraph, source: Hashable = None, target: Hashable = None, weight: str | None = None,
                         method: str = "dijkstra") -> dict:
    """Lengths from one ``source`` to every reached node, as :func:`networkx.shortest_path_length`.

    Parameters
    ----------
    G : SparseGraph
        Converted with ``weight``'s attribute.
    source : node
        The one source (all pairs are left to NetworkX by ``can_run``).
    target : None
        Not supported here (``can_run`` refuses it).
    weight : str or None, optional
        The edge attribute, or None for hops (default).
    method : {"dijkstra"}, optional
        NetworkX's default; "bellman-ford" is left to NetworkX.

    Returns
    -------
    dict
        Node to length: ints for hops or integer weights, floats otherwise.

    Raises
    ------
    NodeNotFound
        ``source`` is not in ``G``.
    NotImplementedError
        No ``source``, a ``target``, or another ``method``.

    Examples
    --------
    >>> import networkx as nx
    >>> from sparsegpu.nx import backend_interface as sg, from_networkx
    >>> sg.shortest_path_length(from_networkx(nx.path_graph(3), backend="cpu"), 0)
    {0: 0, 1: 1, 2: 2}
    """
    if source is None or target is not None or method not in ("dijkstra", "bfs"):
        raise NotImplementedError("sparsegpu takes shortest_path_length from one source to every node")
    if weight is None:
        return single_source_shortest_path_length(G, source)
    return single_source_dijkstra_path_length(G, source, weight=weight)


def bfs_tree(G: SparseGraph, source: Hashable, reverse: bool = False, depth_limit: int | None = None,
             sort_neighbors: Any = None) -> Any:
    """The breadth-first tree from ``source`` as a ``networkx.DiGraph``, edges of :func:`bfs_edges`.

    Parameters
    ----------
    G : SparseGraph
    source : node
        Where the search starts.
    reverse : bool, optional
        Follow a directed graph's edges backwards (default False).
    depth_limit : int, optional
        The deepest level to reach (default: no limit).
    sort_neighbors : None
        Not supported (``can_run`` refuses it).

    Returns
    -------
    networkx.DiGraph
        ``source`` and every reached node, an edge from each node's parent.

    Raises
    ------
    NetworkXError
        ``source`` is not in ``G``.

    Examples
    --------
    >>> import networkx as nx
    >>> from sparsegpu.nx import backend_interface as sg, from_networkx
    >>> list(sg.bfs_tree(from_networkx(nx.path_graph(3), backend="cpu"), 1).edges())
    [(1, 0), (1, 2)]
    """
    edges = list(bfs_edges(G, source, reverse, depth_limit))
    T = _networkx().DiGraph()
    T.add_node(source)
    T.add_edges_from(edges)
    return T

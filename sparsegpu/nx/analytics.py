"""Centralities, triangles, cores, communities and similarity with NetworkX's signatures.

Each function takes a :class:`~sparsegpu.nx.graph.SparseGraph` and returns NetworkX's type
(dicts keyed by node with Python numbers, a list of node sets, a generator of triples).
Dict arguments keyed by node (``personalization``, ``nstart``, ``dangling``) become arrays
indexed by vertex, 0 for a node the dict omits, as NetworkX reads them.
"""

from __future__ import annotations

import random
from collections.abc import Hashable, Iterator
from typing import Any

import numpy as np

from sparsegpu._backend import to_host
from sparsegpu.csgraph import (
    PowerIterationFailedConvergence,
    jaccard,
)
from sparsegpu.csgraph import (
    betweenness_centrality as csgraph_betweenness,
)
from sparsegpu.csgraph import (
    core_number as csgraph_core_number,
)
from sparsegpu.csgraph import (
    eigenvector_centrality as csgraph_eigenvector,
)
from sparsegpu.csgraph import (
    katz_centrality as csgraph_katz,
)
from sparsegpu.csgraph import (
    louvain_communities as csgraph_louvain,
)
from sparsegpu.csgraph import (
    pagerank as csgraph_pagerank,
)
from sparsegpu.csgraph import (
    triangles as csgraph_triangles,
)
from sparsegpu.nx.graph import SparseGraph


def _networkx() -> Any:
    import networkx

    return networkx


def _by_node(G: SparseGraph, values: Any) -> dict:
    return dict(zip(G.nodes, to_host(values).tolist()))


def _array(G: SparseGraph, values: dict | None) -> np.ndarray | None:
    if values is None:
        return None
    array = np.zeros(len(G))
    for node, value in values.items():
        vertex = G.vertex(node)
        if vertex is not None:
            array[vertex] = value
    return array


def pagerank(G: SparseGraph, alpha: float = 0.85, personalization: dict | None = None, max_iter: int = 100,
             tol: float = 1.0e-6, nstart: dict | None = None, weight: str | None = "weight",
             dangling: dict | None = None) -> dict:
    """PageRank of every node, as :func:`networkx.pagerank` (an undirected edge counts both ways).

    Parameters
    ----------
    G : SparseGraph
        Converted with ``weight``'s attribute.
    alpha, max_iter, tol : optional
        As NetworkX's.
    personalization, nstart, dangling : dict, optional
        Node to value; a node the dict omits gets 0.
    weight : str or None, optional
        The edge attribute (default "weight"); None weighs every edge 1.

    Returns
    -------
    dict
        Node to float.

    Raises
    ------
    PowerIterationFailedConvergence
        No convergence within ``max_iter`` iterations (NetworkX's exception).
    ZeroDivisionError
        ``personalization`` is all 0, as NetworkX.

    Examples
    --------
    >>> import networkx as nx
    >>> from sparsegpu.nx import backend_interface as sg, from_networkx
    >>> ranks = sg.pagerank(from_networkx(nx.DiGraph([(0, 1), (1, 2), (2, 0)]), backend="cpu"), weight=None)
    >>> [round(r, 4) for r in ranks.values()]
    [0.3333, 0.3333, 0.3333]
    """
    nx = _networkx()
    if len(G) == 0:
        return {}
    if max_iter < 1:
        raise nx.PowerIterationFailedConvergence(max_iter)
    personal = _array(G, personalization)
    if personal is not None and personal.sum() == 0:
        raise ZeroDivisionError("personalization is all 0")  # NetworkX's exception
    try:
        ranks = csgraph_pagerank(G.matrix(weight), alpha, personal, max_iter, tol,
                                 _array(G, nstart), weight is not None, _array(G, dangling), directed=True)
    except PowerIterationFailedConvergence as error:
        raise nx.PowerIterationFailedConvergence(max_iter) from error
    return _by_node(G, ranks)


def _random_state(seed: Any) -> Any:
    """NetworkX's ``py_random_state`` turns a seed into a ``random.Random`` before dispatch."""
    if seed is None or isinstance(seed, random.Random):
        return seed
    return random.Random(seed)


def betweenness_centrality(G: SparseGraph, k: int | None = None, normalized: bool = True,
                           weight: str | None = None, endpoints: bool = False, seed: Any = None) -> dict:
    """Shortest-path betweenness of every node, as :func:`networkx.betweenness_centrality`.

    Parameters
    ----------
    G : SparseGraph
    k, normalized, endpoints : optional
        As NetworkX's.
    weight : str or None, optional
        The edge attribute of the lengths, or None for hops (default).
    seed : int, random.Random or None, optional
        For ``k``: NetworkX's choice of sources for the same seed.

    Returns
    -------
    dict
        Node to float.

    Raises
    ------
    ValueError
        ``k`` negative or larger than the number of nodes.
    ZeroDivisionError
        ``k`` is 0, as NetworkX.

    Examples
    --------
    >>> import networkx as nx
    >>> from sparsegpu.nx import backend_interface as sg, from_networkx
    >>> sg.betweenness_centrality(from_networkx(nx.path_graph(3), backend="cpu"))
    {0: 0.0, 1: 1.0, 2: 0.0}
    """
    if k is not None and not 1 <= k <= len(G):
        if k == 0:  # NetworkX scales by n / k
            raise ZeroDivisionError("k is 0")
        raise ValueError("Sample larger than population or is negative")  # random.sample's, as NetworkX
    values = csgraph_betweenness(G.matrix(weight), k, normalized, None if weight is None else True, endpoints,
                                 _random_state(seed), directed=G.is_directed())
    return _by_node(G, values)


def triangles(G: SparseGraph, nodes: Any = None) -> int | dict:
    """Triangles through each node of an undirected graph, or through one node.

    Parameters
    ----------
    G : SparseGraph
        An undirected graph.
    nodes : node or iterable of nodes, optional
        One node (an int comes back) or nodes to count at (default all).

    Returns
    -------
    dict or int
        Node to int, or the count at the one node.

    Raises
    ------
    NetworkXNotImplemented
        ``G`` is directed.

    Examples
    --------
    >>> import networkx as nx
    >>> from sparsegpu.nx import backend_interface as sg, from_networkx
    >>> S = from_networkx(nx.complete_graph(4), backend="cpu")
    >>> sg.triangles(S), sg.triangles(S, 0)
    ({0: 3, 1: 3, 2: 3, 3: 3}, 3)
    """
    if G.is_directed():
        raise _networkx().NetworkXNotImplemented("not implemented for directed type")
    if nodes is not None and nodes in G:
        return int(csgraph_triangles(G.matrix(), G.vertex(nodes)))
    counts = to_host(csgraph_triangles(G.matrix()))
    if nodes is None:
        return dict(zip(G.nodes, counts.tolist()))
    picked = [G.vertex(node) for node in nodes]
    return {G.nodes[v]: int(counts[v]) for v in picked if v is not None}


def core_number(G: SparseGraph) -> dict:
    """The core number of every node, as :func:`networkx.core_number`.

    Parameters
    ----------
    G : SparseGraph
        Directed (degree = in + out) or undirected, without self loops.

    Returns
    -------
    dict
        Node to int.

    Raises
    ------
    NetworkXNotImplemented
        ``G`` has self loops, as NetworkX.

    Examples
    --------
    >>> import networkx as nx
    >>> from sparsegpu.nx import backend_interface as sg, from_networkx
    >>> sg.core_number(from_networkx(nx.Graph([(0, 1), (1, 2), (0, 2), (2, 3)]), backend="cpu"))
    {0: 2, 1: 2, 2: 2, 3: 1}
    """
    rows = np.repeat(np.arange(len(G)), np.diff(G.indptr))
    if bool((rows == G.indices).any()):
        raise _networkx().NetworkXNotImplemented(
            "Input graph has self loops which is not permitted; "
            "Consider using G.remove_edges_from(nx.selfloop_edges(G)).")
    return _by_node(G, csgraph_core_number(G.matrix(), directed=G.is_directed()))


def _integer_seed(seed: Any) -> int | None:
    if isinstance(seed, random.Random):
        return seed.getrandbits(31)
    return seed


def louvain_communities(G: SparseGraph, weight: str | None = "weight", resolution: float = 1,
                        threshold: float = 1e-07, max_level: int | None = None, seed: Any = None) -> list[set]:
    """Louvain communities as node sets (parallel moves: NetworkX's modularity, not its sets).

    Parameters
    ----------
    G : SparseGraph
    weight : str or None, optional
        The edge attribute (default "weight"); None weighs every edge 1.
    resolution, threshold, max_level : optional
        As NetworkX's.
    seed : int, random.Random or None, optional
        The same seed gives the same communities.

    Returns
    -------
    list of set
        A partition of the nodes, ordered by each community's first node.

    Raises
    ------
    ValueError
        Negative or non-finite weights; out-of-range parameters.

    Examples
    --------
    >>> import networkx as nx
    >>> from sparsegpu.nx import backend_interface as sg, from_networkx
    >>> G = nx.barbell_graph(4, 0)
    >>> sg.louvain_communities(from_networkx(G, backend="cpu"), weight=None, seed=1)
    [{0, 1, 2, 3}, {4, 5, 6, 7}]
    """
    communities = csgraph_louvain(G.matrix(weight), weight is not None, resolution, threshold, max_level,
                                  _integer_seed(seed), directed=G.is_directed())
    return [set(G.labels(np.fromiter(part, np.int64, count=len(part)))) for part in communities]


def jaccard_coefficient(G: SparseGraph, ebunch: Any = None) -> Iterator[tuple[Hashable, Hashable, float]]:
    """``(u, v, |N(u) & N(v)| / |N(u) | N(v)|)`` for each pair of ``ebunch``, in order.

    Parameters
    ----------
    G : SparseGraph
        An undirected graph.
    ebunch : iterable of node pairs
        The pairs (None, every non-edge, is left to NetworkX by ``can_run``).

    Returns
    -------
    generator of tuple

    Raises
    ------
    NetworkXNotImplemented
        ``G`` is directed.
    NodeNotFound
        A node of ``ebunch`` is not in ``G``.

    Examples
    --------
    >>> import networkx as nx
    >>> from sparsegpu.nx import backend_interface as sg, from_networkx
    >>> list(sg.jaccard_coefficient(from_networkx(nx.path_graph(3), backend="cpu"), [(0, 2)]))
    [(0, 2, 1.0)]
    """
    nx = _networkx()
    if G.is_directed():
        raise nx.NetworkXNotImplemented("not implemented for directed type")
    if ebunch is None:
        raise NotImplementedError("jaccard_coefficient with ebunch=None (every non-edge) runs in NetworkX")
    pairs = list(ebunch)
    vertices = []
    for u, v in pairs:
        for node in (u, v):
            if node not in G:
                raise nx.NodeNotFound(f"Node {node} not in G.")
        vertices.append((G.vertex(u), G.vertex(v)))
    if not pairs:
        return iter(())
    values = to_host(jaccard(G.matrix(), np.array(vertices, dtype=np.int64))).tolist()
    return ((u, v, p) for (u, v), p in zip(pairs, values))


def _beta(G: SparseGraph, beta: Any) -> Any:
    if not isinstance(beta, dict):
        try:
            return float(beta)
        except (TypeError, ValueError) as error:
            raise _networkx().NetworkXError("beta must be a number") from error
    if any(node not in beta for node in G.nodes):
        raise _networkx().NetworkXError("beta dictionary must have a value for every node")
    return _array(G, beta)


def katz_centrality(G: SparseGraph, alpha: float = 0.1, beta: Any = 1.0, max_iter: int = 1000, tol: float = 1.0e-6,
                    nstart: dict | None = None, normalized: bool = True, weight: str | None = None) -> dict:
    """Katz centrality of every node, as :func:`networkx.katz_centrality`.

    Parameters
    ----------
    G : SparseGraph
        Converted with ``weight``'s attribute.
    alpha, max_iter, tol, normalized : optional
        As NetworkX's.
    beta : float or dict, optional
        One value, or a value for every node (default 1).
    nstart : dict, optional
        Node to starting value; a node the dict omits starts at 0.
    weight : str or None, optional
        The edge attribute, or None for weight 1 (default).

    Returns
    -------
    dict
        Node to float.

    Raises
    ------
    NetworkXError
        ``beta`` not a number, or a dict without a value for some node.
    PowerIterationFailedConvergence
        No convergence within ``max_iter`` iterations (NetworkX's exception).

    Examples
    --------
    >>> import networkx as nx
    >>> from sparsegpu.nx import backend_interface as sg, from_networkx
    >>> katz = sg.katz_centrality(from_networkx(nx.path_graph(3), backend="cpu"))
    >>> [round(v, 4) for v in katz.values()]
    [0.5599, 0.6108, 0.5599]
    """
    if len(G) == 0:
        return {}
    if max_iter < 1:
        raise _networkx().PowerIterationFailedConvergence(max_iter)
    b = _beta(G, beta)
    try:
        values = csgraph_katz(G.matrix(weight), alpha, b, max_iter, tol, _array(G, nstart), normalized,
                              weight is not None, directed=True)
    except PowerIterationFailedConvergence as error:
        raise _networkx().PowerIterationFailedConvergence(max_iter) from error
    return _by_node(G, values)


def eigenvector_centrality(G: SparseGraph, max_iter: int = 100, tol: float = 1.0e-6, nstart: dict | None = None,
                           weight: str | None = None) -> dict:
    """Eigenvector centrality of every node, as :func:`networkx.eigenvector_centrality`.

    Parameters
    ----------
    G : SparseGraph
        Converted with ``weight``'s attribute.
    max_iter, tol : optional
        As NetworkX's.
    nstart : dict, optional
        Node to starting value; a node the dict omits starts at 0.
    weight : str or None, optional
        The edge attribute, or None for weight 1 (default).

    Returns
    -------
    dict
        Node to float (a directed graph's in-edges count, as NetworkX).

    Raises
    ------
    NetworkXPointlessConcept
        ``G`` has no node.
    NetworkXError
        ``nstart`` is all 0.
    PowerIterationFailedConvergence
        No convergence within ``max_iter`` iterations (NetworkX's exception).

    Examples
    --------
    >>> import networkx as nx
    >>> from sparsegpu.nx import backend_interface as sg, from_networkx
    >>> centrality = sg.eigenvector_centrality(from_networkx(nx.path_graph(3), backend="cpu"))
    >>> [round(v, 4) for v in centrality.values()]
    [0.5, 0.7071, 0.5]
    """
    nx = _networkx()
    if len(G) == 0:
        raise nx.NetworkXPointlessConcept("cannot compute centrality for the null graph")
    if max_iter < 1:
        raise nx.PowerIterationFailedConvergence(max_iter)
    start = _array(G, nstart)
    if start is not None and not start.any():
        raise nx.NetworkXError("initial vector cannot have all zero values")
    try:
        values = csgraph_eigenvector(G.matrix(weight), max_iter, tol, start, weight is not None, directed=True)
    except PowerIterationFailedConvergence as error:
        raise nx.PowerIterationFailedConvergence(max_iter) from error
    return _by_node(G, values)

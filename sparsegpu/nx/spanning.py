"""``minimum_spanning_tree`` for the NetworkX backend: the forest from
:func:`sparsegpu.csgraph.minimum_spanning_tree`, returned as NetworkX returns it (a graph of
G's class with G's graph and node attributes and each tree edge's data)."""

from __future__ import annotations

from typing import Any

import numpy as np

from sparsegpu._backend import to_host
from sparsegpu.csgraph import minimum_spanning_tree as csgraph_minimum_spanning_tree
from sparsegpu.nx.graph import SparseGraph, to_networkx


def minimum_spanning_tree(G: SparseGraph, weight: str = "weight", algorithm: str = "kruskal",
                          ignore_nan: bool = False) -> Any:
    """A minimum spanning forest of an undirected graph, as :func:`networkx.minimum_spanning_tree`.

    Parameters
    ----------
    G : SparseGraph
        An undirected graph.
    weight : str, optional
        The edge attribute holding the weights (missing values are 1).
    algorithm : {"kruskal", "prim", "boruvka"}, optional
        Accepted for NetworkX's signature: every choice gives a minimum spanning forest
        (Borůvka's on the GPU, SciPy's on the CPU). Where several forests are minimal, the
        one chosen may differ from NetworkX's.
    ignore_nan : bool, optional
        Leave out edges whose weight is NaN instead of raising.

    Returns
    -------
    networkx.Graph
        Every node of G with its attributes, G's graph attributes, and the forest's edges with
        their data.

    Raises
    ------
    ValueError
        A NaN weight without ``ignore_nan``; an unknown ``algorithm``.

    Examples
    --------
    >>> import networkx as nx
    >>> from sparsegpu.nx import backend_interface as sg, from_networkx
    >>> G = nx.cycle_graph(4)
    >>> G.add_edge(0, 3, weight=2)
    >>> sorted(sg.minimum_spanning_tree(from_networkx(G, {"weight": 1}, backend="cpu")).edges(data=True))
    [(0, 1, {}), (1, 2, {}), (2, 3, {})]
    """
    if algorithm not in ("kruskal", "prim", "boruvka"):
        raise ValueError(f"{algorithm} is not a valid choice for an algorithm.")
    name = weight if weight in G.weights else None
    nan = np.isnan(G.weights[name]) if name is not None else np.zeros(0, dtype=bool)
    if nan.any():
        if not ignore_nan:
            u, v = _endpoints(G, int(np.flatnonzero(nan)[0]))
            raise ValueError(f"NaN found as an edge weight. Edge {(u, v)}")
        S = G.scipy(name).copy()
        S.data[nan] = np.inf  # never chosen, then dropped below
        forest = csgraph_minimum_spanning_tree(S, backend=G.backend)
    else:  # the graph's cached matrix: no upload on a later call
        forest = csgraph_minimum_spanning_tree(G.matrix(name))
    forest = (forest.to_scipy() if hasattr(forest, "to_scipy") else forest).tocoo()
    keep = np.isfinite(forest.data)
    rows, cols = to_host(forest.row[keep]).tolist(), to_host(forest.col[keep]).tolist()
    return _networkx_forest(G, list(zip(rows, cols)))


def _endpoints(G: SparseGraph, position: int) -> tuple[Any, Any]:
    row = int(np.searchsorted(G.indptr, position, side="right")) - 1
    return G.nodes[row], G.nodes[int(G.indices[position])]


def _networkx_forest(G: SparseGraph, edges: list[tuple[int, int]]) -> Any:
    """The forest as NetworkX builds it: from the original graph's data where it is known."""
    source = G.source() if G.source is not None else None
    if source is None:
        source = to_networkx(G)
    T = source.__class__()
    T.graph.update(source.graph)
    T.add_nodes_from(source.nodes.items())
    nodes = G.nodes
    T.add_edges_from((nodes[u], nodes[v], source[nodes[u]][nodes[v]]) for u, v in edges)
    return T

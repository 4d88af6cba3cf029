"""The graph the NetworkX backend works on: a CSR adjacency plus the node labels.

A :class:`SparseGraph` is built once from a NetworkX graph (:func:`from_networkx`); NetworkX
keeps it in ``G.__networkx_cache__`` and hands it to every later call on the same graph, so the
Python loop over the adjacency runs once per graph and edge attribute set. Node labels may be
any hashable; vertex i is ``nodes[i]``, the i-th node of ``G`` in NetworkX's iteration order,
which keeps NetworkX's "first node of each component" orderings. An undirected graph stores
each edge both ways (a self loop once), as NetworkX's adjacency does.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
import weakref
from itertools import chain
from operator import methodcaller
from typing import Any

import numpy as np
import scipy.sparse as sp

from sparsegpu._backend import backend as default_backend
from sparsegpu._backend import to_host
from sparsegpu.csgraph._graph import as_graph
from sparsegpu.formats import CSR

BACKEND_NAME = "sparsegpu"


class SparseGraph:
    """A NetworkX graph as a CSR adjacency over vertices ``0..N-1`` and its node labels.

    Parameters
    ----------
    nodes : list
        The node labels; vertex i is ``nodes[i]``.
    indptr, indices : ndarray of int64
        The CSR structure (columns sorted within each row, no duplicates).
    weights : dict of str to ndarray of float64
        Edge values per attribute name, aligned with ``indices``.
    directed : bool
        A ``networkx.DiGraph`` (True) or ``networkx.Graph`` (False).
    integral : set of str, optional
        Attributes whose values were all Python / NumPy integers (paths then sum to ints).
    graph_attrs : dict, optional
        ``G.graph``, kept for the way back to NetworkX.
    backend : {"cpu", "gpu"}, optional
        Where the matrices are placed (default :func:`sparsegpu.backend`).

    Examples
    --------
    >>> import numpy as np
    >>> from sparsegpu.nx.graph import SparseGraph
    >>> G = SparseGraph(["a", "b"], np.array([0, 1, 1]), np.array([1]), {}, directed=True, backend="cpu")
    >>> G.number_of_nodes(), G.number_of_edges(), G.index["b"]
    (2, 1, 1)
    """

    __networkx_backend__ = BACKEND_NAME

    def __init__(self, nodes: list, indptr: np.ndarray, indices: np.ndarray, weights: dict[str, np.ndarray], *,
                 directed: bool, integral: set[str] | None = None, graph_attrs: dict | None = None,
                 backend: str | None = None) -> None:
        self.nodes = nodes
        self.index = {node: i for i, node in enumerate(nodes)}
        self.indptr, self.indices = indptr, indices
        self.weights = weights
        self.directed = directed
        self.integral = set() if integral is None else integral
        self.graph = {} if graph_attrs is None else graph_attrs
        self.backend = default_backend() if backend is None else backend
        self.__networkx_cache__: dict = {}
        self._matrices: dict[tuple[str | None, bool], Any] = {}
        #: A weak reference to the NetworkX graph converted (None when built otherwise), for
        #: results NetworkX returns with the graph's own attributes (minimum_spanning_tree).
        self.source: Any = None

    def __len__(self) -> int:
        return len(self.nodes)

    def __contains__(self, node: Any) -> bool:
        try:
            return node in self.index
        except TypeError:
            return False

    def __iter__(self) -> Iterator:
        return iter(self.nodes)

    def is_directed(self) -> bool:
        return self.directed

    def is_multigraph(self) -> bool:
        return False

    def number_of_nodes(self) -> int:
        return len(self.nodes)

    def number_of_edges(self) -> int:
        """Edges as NetworkX counts them (an undirected edge once, a self loop once)."""
        stored = int(self.indices.size)
        if self.directed:
            return stored
        rows = np.repeat(np.arange(len(self.nodes)), np.diff(self.indptr))
        loops = int(np.count_nonzero(rows == self.indices))
        return (stored - loops) // 2 + loops

    def scipy(self, weight: str | None = None) -> sp.csr_array:
        """The adjacency as a SciPy CSR: ``weight``'s values, or 1 on every edge for None."""
        n = len(self.nodes)
        if weight is None:
            data = np.ones(self.indices.size)
        elif weight in self.weights:
            data = self.weights[weight]
        else:
            raise ValueError(f"weight {weight!r} was not converted with this graph")
        return sp.csr_array((data, self.indices, self.indptr), shape=(n, n))

    def matrix(self, weight: str | None = None, *, transpose: bool = False) -> Any:
        """The adjacency (or its transpose) as a sparsegpu CSR on the graph's backend, cached."""
        key = (weight, transpose)
        if key not in self._matrices:
            S = self.scipy(weight)
            M = CSR.from_scipy(S.T.tocsr() if transpose and self.directed else S, backend=self.backend)
            if not self.directed:  # both directions of an edge share its attributes
                as_graph(M).assume_symmetric()
            self._matrices[key] = M
        return self._matrices[key]

    def labels(self, vertices: Any) -> list:
        """The node labels of an array of vertices (host or device)."""
        nodes = self.nodes
        return [nodes[i] for i in to_host(vertices).tolist()]

    def vertex(self, node: Hashable) -> int | None:
        """The vertex of ``node``, or None when it is not in the graph."""
        try:
            return self.index.get(node)
        except TypeError:
            return None


def _attribute_names(adj: dict, preserve: bool, edge_attrs: dict | None) -> dict[str, Any]:
    """Attribute name -> default for missing values: the asked ones, or every numeric one seen."""
    if edge_attrs:
        return {name: (1 if default is None else default) for name, default in edge_attrs.items()}
    if not preserve:
        return {}
    seen: set[str] = set()
    for data in _edge_data(adj):
        seen.update(k for k, v in data.items() if isinstance(v, (int, float, np.number)))
    return {name: 1 for name in sorted(seen, key=str)}


# The adjacency is read with iterators that run in C (chain, map, fromiter): a Python-level loop
# per edge costs about ten times as much, and the conversion is most of a first call's time.


def _edge_data(adj: dict) -> Iterator[dict]:
    """Every edge's attribute dict, in adjacency order."""
    return chain.from_iterable(map(dict.values, adj.values()))


def _neighbour_indices(adj: dict, nodes: list, nnz: int) -> np.ndarray:
    """Every edge's head as a vertex index, in adjacency order."""
    heads = chain.from_iterable(adj.values())
    if all(type(node) is int for node in nodes) and nodes == list(range(len(nodes))):
        return np.fromiter(heads, np.int64, count=nnz)  # labels 0..n-1 in order are the indices
    index = {node: i for i, node in enumerate(nodes)}
    return np.fromiter(map(index.__getitem__, heads), np.int64, count=nnz)


def _attribute_values(adj: dict, name: str, default: Any, nnz: int, bare: bool) -> tuple[np.ndarray, bool]:
    """(``name``'s value on every edge as float64, whether all were integers) in adjacency order;
    ``bare``: no edge has any attribute."""
    if bare:  # every value is the default
        return np.full(nnz, default, dtype=np.float64), _is_integer(default)
    values = map(methodcaller("get", name, default), _edge_data(adj))
    try:
        real = np.fromiter(values, np.float64, count=nnz)
    except (TypeError, ValueError) as error:
        raise TypeError(f"edge attribute {name!r} must hold real numbers") from error
    first = next(map(methodcaller("get", name, default), _edge_data(adj)), 0.0)
    if not _is_integer(first):  # a float anywhere makes path lengths floats: one look suffices
        return real, False
    kinds = set(map(type, map(methodcaller("get", name, default), _edge_data(adj))))
    return real, all(issubclass(kind, (int, np.integer)) and kind is not bool for kind in kinds)


def _is_integer(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _row_sort_order(indptr: np.ndarray, indices: np.ndarray) -> np.ndarray | None:
    """The permutation sorting columns within each row, or None when they already are."""
    rising = np.diff(indices) > 0
    starts = indptr[1:-1]
    rising[starts[(starts > 0) & (starts < indices.size)] - 1] = True  # a row's first entry may be smaller
    if rising.all():
        return None
    rows = np.repeat(np.arange(indptr.size - 1, dtype=np.int64), np.diff(indptr))
    return np.lexsort((indices, rows))


def from_networkx(G: Any, edge_attrs: dict | None = None, preserve_edge_attrs: bool = False,
                  preserve_graph_attrs: bool = False, backend: str | None = None) -> SparseGraph:
    """Build a :class:`SparseGraph` from a ``networkx.Graph`` or ``networkx.DiGraph``.

    Parameters
    ----------
    G : networkx.Graph or networkx.DiGraph
        Not a multigraph.
    edge_attrs : dict of str to number, optional
        Edge attributes to keep and the value of an edge that lacks one (None means 1).
    preserve_edge_attrs : bool, optional
        Without ``edge_attrs``: keep every numeric edge attribute (missing values 1).
    preserve_graph_attrs : bool, optional
        Keep ``G.graph``.
    backend : {"cpu", "gpu"}, optional
        Where the matrices go (default :func:`sparsegpu.backend`).

    Returns
    -------
    SparseGraph

    Raises
    ------
    NotImplementedError
        ``G`` is a multigraph (NetworkX then runs the function itself).
    TypeError
        ``G`` is not a NetworkX graph, or an attribute value is not a real number.

    Examples
    --------
    >>> import networkx as nx
    >>> from sparsegpu.nx.graph import from_networkx
    >>> G = from_networkx(nx.Graph([("a", "b", {"w": 3})]), {"w": 1}, backend="cpu")
    >>> G.nodes, G.scipy("w").toarray().tolist()
    (['a', 'b'], [[0.0, 3.0], [3.0, 0.0]])
    """
    if not hasattr(G, "_adj") or not hasattr(G, "is_directed"):
        raise TypeError(f"G must be a networkx graph, got {type(G).__name__}")
    if G.is_multigraph():
        raise NotImplementedError("the sparsegpu backend does not take multigraphs")
    adj = G._adj
    nodes = list(adj)
    n = len(nodes)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, adj.values()), np.int64, count=n), out=indptr[1:])
    nnz = int(indptr[-1])
    indices = _neighbour_indices(adj, nodes, nnz)
    order = _row_sort_order(indptr, indices)
    weights, integral = {}, set()
    names = _attribute_names(adj, preserve_edge_attrs, edge_attrs)
    bare = bool(names) and not any(_edge_data(adj))  # one pass, whatever the number of attributes
    for name, default in names.items():
        values, integers = _attribute_values(adj, name, default, nnz, bare)
        weights[name] = values if order is None else values[order]
        if integers:
            integral.add(name)
    graph_attrs = dict(G.graph) if preserve_graph_attrs else None
    graph = SparseGraph(nodes, indptr, indices if order is None else indices[order], weights,
                        directed=G.is_directed(), integral=integral, graph_attrs=graph_attrs, backend=backend)
    graph.source = weakref.ref(G)
    return graph


def to_networkx(graph: SparseGraph) -> Any:
    """The NetworkX graph of a :class:`SparseGraph`, with the edge attributes it kept.

    Examples
    --------
    >>> import networkx as nx
    >>> from sparsegpu.nx.graph import from_networkx, to_networkx
    >>> H = to_networkx(from_networkx(nx.path_graph(3), backend="cpu"))
    >>> sorted(H.edges())
    [(0, 1), (1, 2)]
    """
    import networkx as nx

    H = nx.DiGraph() if graph.directed else nx.Graph()
    H.graph.update(graph.graph)
    H.add_nodes_from(graph.nodes)
    rows = np.repeat(np.arange(len(graph.nodes)), np.diff(graph.indptr))
    names = list(graph.weights)
    for position, (u, v) in enumerate(zip(rows.tolist(), graph.indices.tolist())):
        attrs = {}
        for name in names:
            value = graph.weights[name][position]
            attrs[name] = int(value) if name in graph.integral else float(value)
        H.add_edge(graph.nodes[u], graph.nodes[v], **attrs)
    return H

"""The object NetworkX loads through the ``networkx.backends`` entry point, and the backend's info.

NetworkX (3.2 and later) calls ``convert_from_nx`` on the user's graph, caches the result in
``G.__networkx_cache__`` (so a second call on an unchanged graph reuses it), asks ``can_run``
and ``should_run``, and calls the function of the same name on this object. A ``False`` or a
string (the reason) from ``can_run`` makes NetworkX run its own code instead.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Hashable
from typing import Any

from _sparsegpu_nx_info import FUNCTION_NAMES, get_info  # noqa: F401  (re-exported)
from sparsegpu._backend import backend as default_backend
from sparsegpu.nx import analytics, spanning, traversal
from sparsegpu.nx.graph import SparseGraph, from_networkx, to_networkx

FUNCTIONS: dict[str, Callable[..., Any]] = {
    name: getattr(module, name)
    for module, names in (
        (analytics, ("pagerank", "katz_centrality", "eigenvector_centrality", "betweenness_centrality",
                     "triangles", "core_number", "louvain_communities", "jaccard_coefficient")),
        (traversal, ("connected_components", "number_connected_components", "is_connected",
                     "strongly_connected_components", "bfs_edges", "bfs_tree", "bfs_layers",
                     "descendants_at_distance", "single_source_shortest_path_length",
                     "single_source_dijkstra_path_length", "shortest_path_length")),
        (spanning, ("minimum_spanning_tree",)),
    )
    for name in names
}

# Below this many edges the conversion and launch overheads exceed NetworkX's own run time.
MIN_EDGES = 1000
# On the CPU backend csgraph calls SciPy; only these beat NetworkX there, conversion included
# (NetworkX's own pagerank rebuilds a SciPy matrix on every call; linear-time searches cost
# about what converting does).
CPU_FASTER = {"pagerank", "katz_centrality", "eigenvector_centrality", "betweenness_centrality", "triangles",
              "louvain_communities", "core_number", "minimum_spanning_tree"}
DIRECTED_ONLY = {"strongly_connected_components"}
UNDIRECTED_ONLY = {"connected_components", "number_connected_components", "is_connected", "triangles",
                   "jaccard_coefficient", "minimum_spanning_tree"}


def _bound(name: str, args: tuple, kwargs: dict) -> dict[str, Any]:
    """The call's arguments by parameter name, defaults filled, as NetworkX's signature binds them."""
    signature = inspect.signature(FUNCTIONS[name])
    bound = signature.bind_partial(*args, **{k: v for k, v in kwargs.items() if k in signature.parameters})
    bound.apply_defaults()
    return dict(bound.arguments)


def _graph_refusal(name: str, G: Any) -> str | None:
    if getattr(G, "is_multigraph", lambda: False)():
        return "multigraphs are not supported"
    directed = G.is_directed()
    if name in DIRECTED_ONLY and not directed:
        return "NetworkX's own function raises for undirected graphs"
    if name in UNDIRECTED_ONLY and directed:
        return "NetworkX's own function raises for directed graphs"
    return None


def _argument_refusal(name: str, arguments: dict[str, Any]) -> str | None:
    if callable(arguments.get("weight")):
        return "weight given as a function"
    if name in ("bfs_edges", "bfs_tree") and arguments.get("sort_neighbors") is not None:
        return "sort_neighbors is not supported"
    if name == "jaccard_coefficient" and arguments.get("ebunch") is None:
        return "ebunch=None asks for every non-edge (N^2 pairs); NetworkX's generator is as fast"
    if name == "triangles" and arguments.get("nodes") is not None:
        nodes = arguments["nodes"]
        if not isinstance(nodes, Hashable) and not hasattr(nodes, "__iter__"):
            return "nodes is neither a node nor an iterable"
    if name == "shortest_path_length" and (arguments.get("source") is None or arguments.get("target") is not None
                                           or arguments.get("method") not in ("dijkstra", "bfs")):
        return "only one source, no target and method 'dijkstra'"
    for key in ("personalization", "nstart", "dangling"):
        if arguments.get(key) is not None and not isinstance(arguments[key], dict):
            return f"{key} is not a dict"
    return None


class BackendInterface:
    """NetworkX's view of sparsegpu: conversions, dispatch decisions and the dispatched functions.

    Examples
    --------
    >>> import networkx as nx
    >>> from sparsegpu.nx import backend_interface
    >>> G = backend_interface.convert_from_nx(nx.path_graph(4))
    >>> backend_interface.number_connected_components(G)
    1
    >>> backend_interface.can_run("pagerank", (nx.path_graph(4),), {"weight": len})
    'weight given as a function'
    """

    @staticmethod
    def convert_from_nx(G: Any, edge_attrs: dict | None = None, node_attrs: dict | None = None,
                        preserve_edge_attrs: bool = False, preserve_node_attrs: bool = False,
                        preserve_graph_attrs: bool = False, name: str | None = None,
                        graph_name: str | None = None) -> SparseGraph:
        """A :class:`SparseGraph` of ``G`` on :func:`sparsegpu.backend`, with ``edge_attrs``' weights."""
        if isinstance(G, SparseGraph):
            return G
        return from_networkx(G, edge_attrs, preserve_edge_attrs is True, bool(preserve_graph_attrs))

    @staticmethod
    def convert_to_nx(result: Any, *, name: str | None = None) -> Any:
        """A :class:`SparseGraph` back as a NetworkX graph; any other result as it is."""
        return to_networkx(result) if isinstance(result, SparseGraph) else result

    @staticmethod
    def can_run(name: str, args: tuple, kwargs: dict) -> bool | str:
        """True, or the reason this backend cannot run ``name`` with these arguments."""
        if name not in FUNCTIONS:
            return f"{name} is not implemented by sparsegpu"
        try:
            arguments = _bound(name, args, kwargs)
        except TypeError as error:
            return f"arguments not understood: {error}"
        G = arguments.get("G")
        if G is None or not hasattr(G, "is_directed"):
            return "no graph argument"
        return _graph_refusal(name, G) or _argument_refusal(name, arguments) or True

    @staticmethod
    def should_run(name: str, args: tuple, kwargs: dict) -> bool | str:
        """True where sparsegpu is expected to beat NetworkX, else the reason it is not."""
        G = args[0] if args else kwargs.get("G")
        if G is None or not hasattr(G, "number_of_edges"):
            return "no graph argument"
        if isinstance(G, SparseGraph):
            return True  # already converted: running here avoids converting back
        edges = G.number_of_edges()
        if edges < MIN_EDGES:
            return f"the graph has {edges} edges, fewer than {MIN_EDGES}: NetworkX is faster"
        if default_backend() == "cpu" and name not in CPU_FASTER:
            return f"on the CPU backend SciPy's {name} is not faster than NetworkX's"
        return True


for _name, _function in FUNCTIONS.items():
    setattr(BackendInterface, _name, staticmethod(_function))

backend_interface = BackendInterface()

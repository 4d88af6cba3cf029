"""Graph algorithms: sparsegpu.csgraph (input on the GPU, and from a scipy matrix with the
upload) against SciPy's csgraph, a hand-written CuPy baseline and python-graphblas, on Graph500
Kronecker scale 21 and the luxembourg_osm road graph (both built once, then loaded from the
disk cache)."""

from __future__ import annotations

from typing import Any

from sparsegpu.bench import graphs as bench

from ._common import require_gpu

GRAPHS = ["kron:21", "luxembourg_osm"]
REPEAT = 10


def checked_call(graph_name: str, function: str, impl: str) -> tuple[bench.Graph, Any, str, float]:
    """(graph, call, clock, first call seconds) of ``impl``'s ``function``, checked against
    SciPy: skips (NotImplementedError) where it does not run, fails where it is wrong."""
    require_gpu()
    try:
        graph = bench.build_graph(graph_name, cache=True)
    except FileNotFoundError as exc:
        raise NotImplementedError(str(exc)) from None
    try:
        call, clock = bench.open_call(graph, function, impl, "gpu")
    except bench.Skip as skip:
        raise NotImplementedError(f"{impl} {function}: {skip.status}: {skip}") from None
    outcome = bench.run_case(graph, function, impl, "gpu", bench.reference(graph, function), repeat=1, timed=False)
    if outcome["status"] == "not available":
        raise NotImplementedError(outcome["message"])
    if outcome["status"] != "ok":
        raise AssertionError(f"{impl} {function} {outcome['status'].upper()}: {outcome['message']}")
    return graph, call, clock, outcome["first_call_s"]


class GraphAlgorithms:
    """Milliseconds per whole call, ending synchronised (median; at most about 3 s of calls)."""

    params = [GRAPHS, list(bench.FUNCTIONS), list(bench.IMPLS)]
    param_names = ["graph", "function", "implementation"]
    unit = "ms"
    timeout = 900

    def setup(self, graph: str, function: str, impl: str) -> None:
        self.graph, self.call, self.clock, self.first = checked_call(graph, function, impl)

    def track_ms(self, graph: str, function: str, impl: str) -> float:
        return bench.time_call(self.call, self.clock, REPEAT, self.first).seconds * 1e3


class BFSRate:
    """BFS by Graph500 counting: edges of the traversed component (undirected edges once) per
    second, in billions."""

    params = [GRAPHS, ["sparsegpu", "from scipy", "scipy", "cupy", "graphblas"]]
    param_names = ["graph", "implementation"]
    unit = "GTEPS"
    timeout = 900

    def setup(self, graph: str, impl: str) -> None:
        self.graph, self.call, self.clock, self.first = checked_call(graph, "bfs", impl)
        self.edges = bench.traversed_edges(self.graph, bench.reference(self.graph, "bfs")["levels"])

    def track_gteps(self, graph: str, impl: str) -> float:
        return self.edges / bench.time_call(self.call, self.clock, REPEAT, self.first).seconds / 1e9

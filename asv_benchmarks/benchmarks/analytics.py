"""Graph analytics: sparsegpu.csgraph's PageRank, triangles, betweenness, k-core, Louvain and
Jaccard against NetworkX, python-graphblas, SciPy and a hand-written CuPy PageRank
(``sparsegpu.bench.analytics``), PageRank's steady iteration over its product, and the NetworkX
backend's first and later calls against NetworkX's own."""

from __future__ import annotations

from typing import Any

from sparsegpu.bench import analytics as bench
from sparsegpu.bench.graphs import build_graph

from ._common import require_gpu

GRAPHS = ["kron:21", "ego-Twitter"]
REPEAT = 10


def _graph(name: str) -> Any:
    require_gpu()
    try:
        return build_graph(name, cache=True)
    except FileNotFoundError as exc:
        raise NotImplementedError(str(exc)) from None


class GraphAnalytics:
    """Milliseconds per whole call on a GPU CSR, ending synchronised (median), checked first."""

    params = [GRAPHS, list(bench.FUNCTIONS), list(bench.IMPLS)]
    param_names = ["graph", "function", "implementation"]
    unit = "ms"
    timeout = 1800

    def setup(self, graph: str, function: str, impl: str) -> None:
        self.graph = _graph(graph)
        expected = bench.reference(self.graph, function)
        self.outcome = bench.run_case(self.graph, function, impl, "gpu", expected, REPEAT, bench.SECONDS_PER_CASE)
        if self.outcome["status"] in ("n/a", "skipped", "not available"):
            raise NotImplementedError(self.outcome.get("message", ""))
        if self.outcome["status"] != "ok":
            raise AssertionError(f"{impl} {function} {self.outcome['status'].upper()}: {self.outcome.get('message')}")

    def track_ms(self, graph: str, function: str, impl: str) -> float:
        return self.outcome["seconds"] * 1e3


class PageRankIteration:
    """PageRank's steady iteration over sparsegpu's product with the same transition matrix
    (target: at most 1.15)."""

    params = [["kron:21"]]
    param_names = ["graph"]
    timeout = 900

    def setup(self, graph: str) -> None:
        self.graph = _graph(graph)

    def track_iteration_over_spmv(self, graph: str) -> float:
        return (bench.steady_iteration_seconds(self.graph, "gpu", REPEAT)
                / bench.spmv_seconds(self.graph, "gpu", REPEAT))


class NetworkXBackend:
    """``nx.<function>(G, backend="sparsegpu")``: NetworkX's own time over the backend's first
    call on the graph (conversion and upload included) and over a later call."""

    params = [[f"{function} {graph}" for function, graph in bench.BACKEND_CASES]]
    param_names = ["case"]
    timeout = 1800

    def setup(self, case: str) -> None:
        require_gpu()
        try:
            import networkx  # noqa: F401
        except ImportError:
            raise NotImplementedError("NetworkX is not installed") from None
        function, graph = case.split(" ")
        self.row = bench.bench_networkx_backend([(function, graph)])[0]

    def track_first_call_speedup(self, case: str) -> float:
        return self.row["speedup_first"]

    def track_later_call_speedup(self, case: str) -> float:
        return self.row["networkx_s"] / self.row["later_call_s"]

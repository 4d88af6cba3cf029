"""Graph analytics side by side: ``sparsegpu.csgraph``'s PageRank, triangles, betweenness,
k-core, Louvain and Jaccard against NetworkX, SuiteSparse:GraphBLAS (python-graphblas, all CPU
cores), SciPy and a hand-written CuPy PageRank (``python -m sparsegpu.bench --analytics``).

Functions (:data:`FUNCTIONS`) and what each implementation runs:

- ``pagerank``: ``pagerank(A)`` (alpha 0.85, tol 1e-6, NetworkX's stopping test). Baselines run
  the same iteration: SciPy and CuPy (``cupyx`` SpMV plus array operations, as a CuPy user
  writes it) and GraphBLAS; NetworkX's own ``pagerank`` on graphs of at most
  ``networkx_edges`` edges. The row also gives the iterations, sparsegpu's steady iteration
  (the marginal cost of :data:`STEADY_ITERATIONS` more iterations in one call, so the setup
  the first iteration pays is left out: NetworkX's test ``N * tol`` stops a graph of over 2M
  vertices after one iteration) and the time of sparsegpu's product with the same transition
  matrix (the format the advisor picks).
- ``triangles``: ``triangle_count(A)`` against GraphBLAS's masked ``plus_pair`` product on the
  lower triangle and NetworkX.
- ``betweenness``: ``betweenness_centrality(A, k=64, seed=0)`` against NetworkX's. NetworkX on
  a graph over ``networkx_edges`` edges runs :data:`NETWORKX_SOURCES` sources and its time is
  scaled to 64 (marked ``estimated``; the cost per source is the same).
- ``core_number``: against NetworkX's.
- ``louvain``: ``louvain_communities(A, seed=0)`` against NetworkX's; the row gives both
  modularities.
- ``jaccard``: the coefficient of every edge against a SciPy computation (``A @ A`` on the
  edges over the union sizes).

Every result is checked (PageRank within 1e-6 in L1 of SciPy's iteration; counts, cores and
Jaccard exactly; betweenness within 1e-9 relative of NetworkX's where NetworkX runs the same
sources) and a wrong one is reported WRONG, never timed. Graphs are read as undirected
unweighted graphs (their pattern), as NetworkX's ``Graph`` of the same edges.

>>> out = bench_analytics(["kron:6"], "cpu", functions=["triangles"], impls=["sparsegpu", "scipy"], repeat=1)
>>> out["results"][0]["outcomes"]["sparsegpu"]["status"]
'ok'
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from sparsegpu import csgraph as sg
from sparsegpu._backend import to_host
from sparsegpu.advisor import from_scipy
from sparsegpu.bench import graph_baselines as baselines
from sparsegpu.bench.graphs import Graph, Skip, build_graph, resolve_names
from sparsegpu.bench.graphs import time_call as time_whole_call
from sparsegpu.bench.timing import measure, synchronize
from sparsegpu.csgraph._graph import as_graph
from sparsegpu.csgraph.centrality import _transition_matrix as transition_matrix
from sparsegpu.nx import from_networkx

FUNCTIONS = ("pagerank", "triangles", "betweenness", "core_number", "louvain", "jaccard")
IMPLS = ("sparsegpu", "scipy", "cupy", "graphblas", "networkx")
SIZES = {"small": ("kron:12", "email-Enron"), "medium": ("kron:18", "ego-Twitter", "email-Enron", "cit-HepPh"),
         "large": ("kron:21", "kron:18", "ego-Twitter", "email-Enron", "cit-HepPh")}
ALPHA, TOL = 0.85, 1e-6
BETWEENNESS_K = 64
STEADY_ITERATIONS = 40
NETWORKX_SOURCES = 4
NETWORKX_EDGES = 400_000
#: NetworkX's betweenness (sampled sources) is not run past this many edges.
NETWORKX_BETWEENNESS_EDGES = 2_000_000
#: SciPy's ``A @ A`` (triangles, Jaccard) is not run past this many wedges (paths u - v - w).
SCIPY_WEDGES = 300_000_000
SECONDS_PER_CASE = 3.0


def resolve_functions(items: Sequence[str]) -> list[str]:
    """Function names (comma-separated parts allowed) in :data:`FUNCTIONS` order; unknown ones
    raise ValueError.

    >>> resolve_functions(["louvain,pagerank"])
    ['pagerank', 'louvain']
    """
    return resolve_names(items, FUNCTIONS)


# --------------------------------------------------------------------------- graphs and baselines


def pattern(graph: Graph) -> sp.csr_array:
    """The undirected simple graph of ``graph``: its symmetrised pattern, no self loops, values 1."""
    def make() -> sp.csr_array:
        S = graph.S.copy()
        S.data[:] = 1.0
        S = ((S + S.T) > 0).astype(np.float64)
        S.setdiag(0)
        S.eliminate_zeros()
        S = sp.csr_array(S)
        S.sort_indices()
        return S
    return graph.once("pattern", make)


def pagerank_iteration(P: Any, xp: Any, dangling: Any, n: int) -> Callable[[Any], Any]:
    """One NetworkX PageRank step with ``P = A^T D^-1`` (``xp``'s sparse matrix)."""
    def step(x: Any) -> Any:
        return ALPHA * (P @ x + x[dangling].sum() / n) + (1 - ALPHA) / n
    return step


def array_pagerank(S: sp.csr_array, xp: Any, sparse: Any) -> tuple[Any, int]:
    """(ranks, iterations) by NetworkX's iteration over ``xp`` arrays: what a SciPy or CuPy user
    writes."""
    n = S.shape[0]
    out_degree = np.diff(S.indptr).astype(np.float64)
    inverse = np.divide(1.0, out_degree, out=np.zeros(n), where=out_degree > 0)
    T = sp.csr_array(S.T.multiply(inverse[None, :]))
    P = sparse.csr_matrix((xp.asarray(T.data), xp.asarray(T.indices), xp.asarray(T.indptr)), shape=T.shape)
    step = pagerank_iteration(P, xp, xp.asarray(np.flatnonzero(out_degree == 0)), n)
    x = xp.full(n, 1.0 / n)
    for iteration in range(1, 101):
        new = step(x)
        if float(xp.abs(new - x).sum()) < n * TOL:
            return new, iteration
        x = new
    raise RuntimeError("PageRank did not converge in 100 iterations")


def graphblas_pagerank(S: sp.csr_array) -> np.ndarray:
    """NetworkX's iteration with GraphBLAS products (``plus_times``) on all CPU cores."""
    gb = baselines.graphblas()
    n = S.shape[0]
    out_degree = np.diff(S.indptr).astype(np.float64)
    inverse = np.divide(1.0, out_degree, out=np.zeros(n), where=out_degree > 0)
    P = gb.io.from_scipy_sparse(sp.csr_array(S.T.multiply(inverse[None, :])))
    dangling = np.flatnonzero(out_degree == 0)
    x = gb.Vector.from_dense(np.full(n, 1.0 / n))
    for _ in range(100):
        dense = x.to_dense(fill_value=0.0)
        new = gb.Vector.from_dense(np.zeros(n))
        new << P.mxv(x, gb.semiring.plus_times)
        values = ALPHA * (new.to_dense(fill_value=0.0) + dense[dangling].sum() / n) + (1 - ALPHA) / n
        if np.abs(values - dense).sum() < n * TOL:
            return values
        x = gb.Vector.from_dense(values)
    raise RuntimeError("PageRank did not converge in 100 iterations")


def graphblas_triangles(S: sp.csr_array) -> int:
    """Triangles as the sum of ``L .* (L plus_pair L^T)``, L the strict lower triangle."""
    gb = baselines.graphblas()
    L = gb.io.from_scipy_sparse(sp.csr_array(sp.tril(S, k=-1)))
    C = L.mxm(L.T, gb.semiring.plus_pair).new(mask=L.S)
    return int(C.reduce_scalar(gb.monoid.plus).new().value or 0)


def scipy_jaccard(S: sp.csr_array) -> np.ndarray:
    """The Jaccard coefficient of every edge (u, v), u < v, ordered by u then v (as
    ``jaccard(A)`` gives them), from ``A @ A`` on the edges."""
    n = S.shape[0]
    common = sp.csr_array((S @ S).multiply(S))
    common.sum_duplicates()
    coo = common.tocoo()
    degree = np.diff(S.indptr).astype(np.int64)
    rows = np.repeat(np.arange(n, dtype=np.int64), degree)
    edge_keys = rows * n + S.indices
    counts = np.zeros(S.nnz)
    counts[np.searchsorted(edge_keys, coo.row.astype(np.int64) * n + coo.col)] = coo.data
    union = degree[rows] + degree[S.indices] - counts
    upper = rows < S.indices
    return np.divide(counts[upper], union[upper], out=np.zeros(int(upper.sum())), where=union[upper] > 0)


def networkx_graph(graph: Graph) -> Any:
    import networkx as nx

    return graph.once("networkx", lambda: nx.from_scipy_sparse_array(pattern(graph), edge_attribute=None))


# --------------------------------------------------------------------------- calls


def open_call(graph: Graph, function: str, impl: str, backend: str) -> tuple[Callable[[], Any], str]:
    """(``call()``, the backend whose clock times it); :class:`Skip` when ``impl`` has none."""
    S = pattern(graph)
    if impl == "sparsegpu":
        A = graph.once(("analytics csr", backend), lambda: from_scipy(S, "csr", backend=backend))
        return {"pagerank": lambda: sg.pagerank(A),
                "triangles": lambda: sg.triangle_count(A),
                "betweenness": lambda: sg.betweenness_centrality(A, k=BETWEENNESS_K, seed=0),
                "core_number": lambda: sg.core_number(A),
                "louvain": lambda: sg.louvain_communities(A, seed=0),
                "jaccard": lambda: sg.jaccard(A)}[function], backend
    if impl == "networkx":
        return _networkx_call(graph, function), "cpu"
    if impl == "scipy" and function in ("triangles", "jaccard") and wedges(S) > SCIPY_WEDGES:
        raise Skip("n/a", f"SciPy's A @ A is not run past {SCIPY_WEDGES:,} wedges")
    if impl == "scipy" and function in ("pagerank", "triangles", "jaccard"):
        return {"pagerank": lambda: array_pagerank(S, np, sp)[0],
                "triangles": lambda: int((S @ S).multiply(S).sum()) // 6,
                "jaccard": lambda: scipy_jaccard(S)}[function], "cpu"
    if impl == "cupy" and function == "pagerank":
        if backend != "gpu":
            raise Skip("skipped", "the CuPy baseline runs on the GPU backend only")
        import cupy
        import cupyx.scipy.sparse as csp

        return lambda: array_pagerank(S, cupy, csp)[0], "gpu"
    if impl == "graphblas" and function in ("pagerank", "triangles"):
        try:
            baselines.graphblas()
        except ImportError:
            raise Skip("skipped", "python-graphblas is not installed") from None
        return {"pagerank": lambda: graphblas_pagerank(S), "triangles": lambda: graphblas_triangles(S)}[function], "cpu"
    raise Skip("n/a", f"no {impl} baseline for {function}")


def _networkx_call(graph: Graph, function: str) -> Callable[[], Any]:
    try:
        import networkx as nx
    except ImportError:
        raise Skip("skipped", "networkx is not installed") from None
    edges = pattern(graph).nnz // 2
    large = edges > NETWORKX_EDGES
    if large and function != "betweenness" or edges > NETWORKX_BETWEENNESS_EDGES:
        raise Skip("n/a", f"NetworkX is not run over {NETWORKX_EDGES:,} edges "
                          f"({NETWORKX_BETWEENNESS_EDGES:,} for betweenness)")
    G = networkx_graph(graph)
    return {"pagerank": lambda: _by_vertex(nx.pagerank(G, alpha=ALPHA, tol=TOL), G),
            "triangles": lambda: sum(nx.triangles(G).values()) // 3,
            "betweenness": lambda: _by_vertex(nx.betweenness_centrality(
                G, k=NETWORKX_SOURCES if large else BETWEENNESS_K, seed=0), G),
            "core_number": lambda: _by_vertex(nx.core_number(G), G),
            "louvain": lambda: nx.community.louvain_communities(G, seed=0),
            "jaccard": lambda: _jaccard_triples(nx.jaccard_coefficient(G, _upper_edges(G)))}[function]


def _upper_edges(G: Any) -> list[tuple[int, int]]:
    return sorted((min(u, v), max(u, v)) for u, v in G.edges() if u != v)


def _jaccard_triples(triples: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rows, cols, values = zip(*triples) if triples else ((), (), ())
    return np.asarray(rows), np.asarray(cols), np.asarray(values, dtype=np.float64)


def _by_vertex(values: dict, G: Any) -> np.ndarray:
    out = np.zeros(G.number_of_nodes())
    out[list(values)] = list(values.values())
    return out


# --------------------------------------------------------------------------- checks


def check(graph: Graph, function: str, impl: str, result: Any, expected: dict[str, Any]) -> str | None:
    """Why ``result`` is wrong, or None."""
    if isinstance(result, tuple):
        host = tuple(map(to_host, result))
    else:
        host = to_host(result) if not isinstance(result, (int, list)) else result
    if function == "pagerank":
        error = float(np.abs(np.asarray(host) - expected["pagerank"]).sum())
        return None if error < 1e-6 else f"L1 distance {error:.3g} from SciPy's iteration"
    if function == "triangles":
        return None if int(host) == expected["triangles"] else f"{int(host)} triangles, SciPy {expected['triangles']}"
    if function == "jaccard":
        coefficient = host[-1] if isinstance(host, tuple) else host
        same = np.array_equal(to_host(coefficient), expected["jaccard"])
        return None if same else "coefficients differ from SciPy's"
    if function == "louvain":
        expected.setdefault("modularity", {})[impl] = sg.modularity(pattern(graph), result)
        return None
    expected.setdefault(function, {})[impl] = np.asarray(host, dtype=np.float64)
    return None


def compare_to_networkx(row: dict[str, Any], expected: dict[str, Any], function: str) -> None:
    """Core numbers equal and (same sources) betweenness within 1e-9 relative, else WRONG."""
    values = expected.get(function, {})
    ours, theirs = values.get("sparsegpu"), values.get("networkx")
    nx_outcome = row["outcomes"].get("networkx", {})
    if ours is None or theirs is None or nx_outcome.get("estimated"):
        return
    same = np.array_equal(ours, theirs) if function == "core_number" else np.allclose(ours, theirs, rtol=1e-9,
                                                                                      atol=1e-15)
    if not same:
        row["outcomes"]["sparsegpu"] = {"status": "wrong", "message": f"{function} differs from NetworkX's"}


def wedges(S: sp.csr_array) -> int:
    """Paths u - v - w of the simple graph ``S``: the multiply-adds of ``A @ A``."""
    degree = np.diff(S.indptr).astype(np.int64)
    return int((degree * (degree - 1)).sum() // 2)


def reference(graph: Graph, function: str) -> dict[str, Any]:
    """What the results are checked against: SciPy's computation where it is affordable, else
    GraphBLAS's triangle count and the CPU backend's Jaccard (an intersection of sorted
    neighbour lists, not a product)."""
    S = pattern(graph)
    small = wedges(S) <= SCIPY_WEDGES
    if function == "pagerank":
        ranks, iterations = array_pagerank(S, np, sp)
        return {"pagerank": ranks, "iterations": iterations}
    if function == "triangles":
        return {"triangles": int((S @ S).multiply(S).sum()) // 6 if small else graphblas_or_none(S)}
    if function == "jaccard":
        return {"jaccard": scipy_jaccard(S) if small else sg.jaccard(S, backend="cpu")[2]}
    return {}


def graphblas_or_none(S: sp.csr_array) -> int | None:
    try:
        return graphblas_triangles(S)
    except ImportError:
        return None


# --------------------------------------------------------------------------- runs


def run_case(graph: Graph, function: str, impl: str, backend: str, expected: dict[str, Any], repeat: int,
             seconds_per_case: float) -> dict[str, Any]:
    try:
        call, clock = open_call(graph, function, impl, backend)
        start = time.perf_counter()
        result = call()
        synchronize(clock)
        first = time.perf_counter() - start
    except Skip as skip:
        return {"status": skip.status, "message": str(skip)}
    except Exception as exc:  # reported, the run goes on
        return {"status": "error", "message": f"{type(exc).__name__}: {exc}"}
    if function == "triangles" and expected.get("triangles") is None:
        expected["triangles"] = int(result)
    wrong = check(graph, function, impl, result, expected)
    if wrong:
        return {"status": "wrong", "message": wrong}
    timing = time_whole_call(call, clock, repeat, first, seconds_per_case)
    outcome = {"status": "ok", "seconds": timing.seconds, "first_call_s": first}
    if impl == "networkx" and function == "betweenness" and pattern(graph).nnz // 2 > NETWORKX_EDGES:
        outcome.update(seconds=timing.seconds * BETWEENNESS_K / NETWORKX_SOURCES, estimated=True)
    return outcome


def spmv_seconds(graph: Graph, backend: str, repeat: int) -> float:
    """sparsegpu's product with the PageRank transition matrix (the advisor's format)."""
    A = graph.once(("analytics csr", backend), lambda: from_scipy(pattern(graph), "csr", backend=backend))
    M, _ = transition_matrix(as_graph(A), False)
    x = M._xp.full(M.shape[1], 1.0 / M.shape[1])
    y = M._xp.empty(M.shape[0])
    return measure(lambda i: M.spmv(x, y), backend, repeat=repeat).seconds


def steady_iteration_seconds(graph: Graph, backend: str, repeat: int) -> float:
    """The marginal time of one PageRank iteration: a call of ``1 + STEADY_ITERATIONS``
    iterations less a call of one, over ``STEADY_ITERATIONS`` (a tolerance no step meets runs
    exactly ``max_iter`` iterations)."""
    A = graph.once(("analytics csr", backend), lambda: from_scipy(pattern(graph), "csr", backend=backend))

    def iterations(count: int) -> Callable[[int], None]:
        def call(i: int) -> None:
            try:
                sg.pagerank(A, max_iter=count, tol=1e-300)
            except sg.PowerIterationFailedConvergence:
                pass
        return call

    one, many = (measure(iterations(count), backend, repeat=repeat).seconds for count in (1, 1 + STEADY_ITERATIONS))
    return max(many - one, 0.0) / STEADY_ITERATIONS


def bench_function(graph: Graph, function: str, impls: Sequence[str], backend: str, repeat: int,
                   seconds_per_case: float, step: Callable[[str], None]) -> dict[str, Any]:
    S = pattern(graph)
    row: dict[str, Any] = {"graph": graph.name, "function": function, "vertices": S.shape[0], "edges": S.nnz // 2}
    step(f"{graph.name}: {function} reference")
    try:
        expected = reference(graph, function)
    except Exception as exc:  # reported, the run goes on
        return {**row, "status": "error", "message": f"reference: {type(exc).__name__}: {exc}"}
    row["outcomes"] = {}
    for impl in impls:
        step(f"{graph.name}: {function} {impl}")
        row["outcomes"][impl] = run_case(graph, function, impl, backend, expected, repeat, seconds_per_case)
    if function in ("core_number", "betweenness"):
        compare_to_networkx(row, expected, function)
    ours = row["outcomes"].get("sparsegpu", {})
    if function == "pagerank" and ours.get("status") == "ok":
        row["iterations"] = expected["iterations"]
        ours["per_iteration_s"] = steady_iteration_seconds(graph, backend, repeat)
        ours["spmv_s"] = spmv_seconds(graph, backend, repeat)
    if function == "louvain":
        row["modularity"] = expected.get("modularity", {})
    for outcome in row["outcomes"].values():
        if outcome.get("status") == "ok" and ours.get("status") == "ok":
            outcome["vs_sparsegpu"] = outcome["seconds"] / ours["seconds"]
    return row


def bench_analytics(names: Sequence[str], backend: str, functions: Sequence[str] = FUNCTIONS,
                    impls: Sequence[str] = IMPLS, repeat: int = 10, seed: int = 0,
                    seconds_per_case: float = SECONDS_PER_CASE,
                    on_step: Callable[[str], None] | None = None,
                    on_row: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Every function of every implementation on every graph: ``{"meta": ..., "results": [...]}``.
    ``on_step(text)`` hears what runs next, ``on_row(row)`` each finished row."""
    step, done = on_step or (lambda text: None), on_row or (lambda row: None)
    results: list[dict[str, Any]] = []
    for name in names:
        step(f"{name}: building")
        try:
            graph = build_graph(name, seed)
        except FileNotFoundError as exc:
            results.append({"graph": name, "status": "skipped", "message": str(exc)})
            continue
        for function in functions:
            results.append(bench_function(graph, function, impls, backend, repeat, seconds_per_case, step))
            done(results[-1])
        graph.release()
    return {"meta": {"backend": backend, "networkx_edges": NETWORKX_EDGES, "betweenness_k": BETWEENNESS_K},
            "results": results}


# --------------------------------------------------------------------------- report


def analytics_lines(result: dict[str, Any]) -> list[str]:
    """One line per graph and function: ms per call of each implementation and the ratio of
    its time to sparsegpu's (``est.``: scaled from fewer sources)."""
    return [row_line(r) for r in result["results"]]


def row_line(r: dict[str, Any]) -> str:
    """:func:`analytics_lines`' line of one row."""
    if "outcomes" not in r:
        return f"{r['graph']} {r.get('function', '')}: {r['status']}: {r.get('message', '')}"
    cells = []
    for impl, o in r["outcomes"].items():
        if o["status"] == "ok":
            ratio = f" ({o['vs_sparsegpu']:.3g}x)" if "vs_sparsegpu" in o and impl != "sparsegpu" else ""
            cells.append(f"{impl} {o['seconds'] * 1e3:.4g} ms{' est.' if o.get('estimated') else ''}{ratio}")
        elif o["status"] not in ("n/a",):
            cells.append(f"{impl} {o['status'].upper()}: {o.get('message', '')[:80]}")
    ours = r["outcomes"].get("sparsegpu", {})
    if "per_iteration_s" in ours:
        cells.append(f"{r['iterations']} iterations; steady iteration {ours['per_iteration_s'] * 1e3:.4g} ms, "
                     f"spmv {ours['spmv_s'] * 1e3:.4g} ms ({ours['per_iteration_s'] / ours['spmv_s']:.3g}x)")
    if r.get("modularity"):
        cells.append("modularity " + ", ".join(f"{k} {v:.4f}" for k, v in r["modularity"].items()))
    return f"{r['graph']} ({r['vertices']:,} v, {r['edges']:,} e) {r['function']}: " + "; ".join(cells)


def print_analytics(result: dict[str, Any], file: Any = None) -> None:
    out = sys.stdout if file is None else file
    print("\nGraph analytics: ms per call (median), other implementations' time over sparsegpu's", file=out)
    for line in analytics_lines(result):
        print(line, file=out)


def failures(result: dict[str, Any] | None) -> list[str]:
    return [f"analytics/{r['graph']}/{r['function']}/{impl}" for r in (result or {}).get("results", [])
            for impl, o in r.get("outcomes", {}).items() if o["status"] in ("wrong", "error")]


# --------------------------------------------------------------------------- the NetworkX backend


BACKEND_CASES = (("pagerank", "kron:18"), ("betweenness", "ego-Twitter"))


def networkx_edges_graph(graph: Graph) -> Any:
    """A ``networkx.Graph`` of ``graph``'s undirected edges without attributes, built from an
    edge list, as a user's script builds one."""
    import networkx as nx

    coo = sp.triu(pattern(graph), k=1).tocoo()
    G = nx.Graph()
    G.add_nodes_from(range(coo.shape[0]))
    G.add_edges_from(zip(coo.row.tolist(), coo.col.tolist()))
    return G


def _backend_call(function: str, G: Any, backend: str, sources: int = BETWEENNESS_K) -> Any:
    import networkx as nx

    if function == "pagerank":
        return nx.pagerank(G, alpha=ALPHA, tol=TOL, backend=backend)
    return nx.betweenness_centrality(G, k=sources, seed=0, backend=backend)


def bench_networkx_backend(cases: Sequence[tuple[str, str]] = BACKEND_CASES, seed: int = 0,
                           on_step: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """``nx.<function>(G, backend="sparsegpu")`` against NetworkX's own, per (function, graph):
    NetworkX's time (betweenness over :data:`NETWORKX_SOURCES` sources scaled to 64 on graphs
    over ``NETWORKX_EDGES`` edges), the backend's first call on ``G`` (conversion from NetworkX
    and upload included; the process has run the function once on a small graph, so the GPU's
    context and kernels are ready as in a working session) and its median later call (the
    converted graph cached on ``G``)."""
    step = on_step or (lambda text: None)
    rows = []
    warm_up = networkx_edges_graph(build_graph("kron:8", seed))
    for function in dict.fromkeys(function for function, _ in cases):  # device and kernels ready, as in a session
        _backend_call(function, warm_up, "sparsegpu", sources=4)
    for function, name in cases:
        step(f"{name}: NetworkX graph")
        graph = build_graph(name, seed)
        G = networkx_edges_graph(graph)
        row: dict[str, Any] = {"function": function, "graph": name, "vertices": G.number_of_nodes(),
                               "edges": G.number_of_edges()}
        sources = NETWORKX_SOURCES if function == "betweenness" and row["edges"] > NETWORKX_EDGES else BETWEENNESS_K
        step(f"{name}: {function} networkx")
        start = time.perf_counter()
        theirs = _backend_call(function, G, "networkx", sources)
        row["networkx_s"] = (time.perf_counter() - start) * (BETWEENNESS_K / sources if function == "betweenness"
                                                              else 1)
        row["networkx_estimated"] = sources != BETWEENNESS_K
        step(f"{name}: {function} sparsegpu")
        G.__networkx_cache__.clear()
        start = time.perf_counter()
        ours = _backend_call(function, G, "sparsegpu")
        row["first_call_s"] = time.perf_counter() - start
        later = []
        for _ in range(5):
            start = time.perf_counter()
            _backend_call(function, G, "sparsegpu")
            later.append(time.perf_counter() - start)
        row["later_call_s"] = statistics.median(later)
        start = time.perf_counter()  # the conversion alone (host arrays; the upload comes with a call)
        from_networkx(G)
        row["conversion_s"] = time.perf_counter() - start
        row["speedup_first"] = row["networkx_s"] / row["first_call_s"]
        if function == "pagerank":
            row["l1_error"] = float(sum(abs(ours[v] - theirs[v]) for v in theirs))
        rows.append(row)
        print_networkx_backend([row])
        sys.stdout.flush()
        graph.release()
    return rows


def print_networkx_backend(rows: Sequence[dict[str, Any]], file: Any = None) -> None:
    out = sys.stdout if file is None else file
    print("\nNetworkX backend: nx.<function>(G, backend='sparsegpu') against NetworkX's own", file=out)
    for r in rows:
        estimated = " (est. from fewer sources)" if r["networkx_estimated"] else ""
        error = f", L1 distance {r['l1_error']:.2g}" if "l1_error" in r else ""
        print(f"{r['function']} on {r['graph']} ({r['vertices']:,} v, {r['edges']:,} e): NetworkX "
              f"{r['networkx_s']:.4g} s{estimated}; sparsegpu first call {r['first_call_s']:.4g} s "
              f"({r['speedup_first']:.3g}x; conversion {r['conversion_s']:.3g} s), later calls "
              f"{r['later_call_s']:.4g} s{error}", file=out)

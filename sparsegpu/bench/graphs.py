"""Graph algorithms side by side: ``sparsegpu.csgraph`` against SciPy's csgraph, a hand-written
CuPy baseline and SuiteSparse:GraphBLAS (python-graphblas, all CPU cores), on the same graphs,
each result checked against SciPy before it is timed (``python -m sparsegpu.bench --graphs``).

- ``bfs``: ``breadth_first_order(A, s, directed=True, return_predecessors=True)``;
- ``weak_cc`` and ``strong_cc``: ``connected_components(A, directed=True, connection=...)``;
- ``sssp``: ``dijkstra(A, directed=True, indices=s)``;
- ``mst``: ``minimum_spanning_tree(A)``;
- ``rcm``: ``reverse_cuthill_mckee(A, symmetric_mode=<A is symmetric>)``

(A the adjacency matrix, s the source: a vertex with out-edges in the largest weak component).
bfs, weak_cc and sssp have CuPy and GraphBLAS baselines (:data:`BASELINE_FUNCTIONS`).

Implementations (:data:`IMPLS`): ``sparsegpu`` (the input already a sparsegpu CSR on the
backend), ``from scipy`` (the same call on the scipy matrix: upload included), ``scipy``,
``cupy`` and ``graphblas`` (:mod:`sparsegpu.bench.graph_baselines`; BFS baselines compute levels
only). A function sparsegpu lacks is reported ``not available``; a baseline whose package is
missing ``skipped`` with the reason; a baseline that does not exist for a function ``n/a``.

Checks: BFS levels equal SciPy's and predecessors form a BFS tree of graph edges (the order
lists the reached vertices by level); components give SciPy's partition; distances equal
SciPy's within 1e-12 relative; the spanning forest has SciPy's edge count and total weight
(1e-9 relative); RCM is a permutation with bandwidth at most SciPy's. A wrong result is
reported WRONG and never timed. Times are medians of whole calls, each ending synchronised
(CUDA events on the GPU), with at most about :data:`SECONDS_PER_CASE` spent per case. BFS
rate: GTEPS by Graph500 counting, the edges in the traversed component (undirected edges once)
over the time (a self loop counts once).

Graphs (:func:`resolve_graphs`): Graph500 Kronecker ``kron:SCALE`` (edge factor 16, weights
uniform in (0, 1]), ``road_like:SIDE`` (SIDE^2 junctions, weights = lengths), ``grid_graph:SIDE``
and the real graphs by name, their weights redrawn uniform in (0, 1] (the same both ways).

>>> out = bench_graphs(["kron:6"], "cpu", functions=["weak_cc"], impls=["scipy"], repeat=1)
>>> out["results"][0]["outcomes"]["scipy"]["status"]
'ok'
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph

from sparsegpu import csgraph as sg_csgraph
from sparsegpu import datasets
from sparsegpu._backend import BACKEND_ENV, to_host
from sparsegpu.advisor import from_scipy
from sparsegpu.bench import graph_baselines as baselines
from sparsegpu.bench import graph_checks as checks
from sparsegpu.bench.timing import Timing, measure, synchronize

FUNCTIONS = ("bfs", "weak_cc", "strong_cc", "sssp", "mst", "rcm")
IMPLS = ("sparsegpu", "from scipy", "scipy", "cupy", "graphblas")
#: Functions with a CuPy and a GraphBLAS baseline.
BASELINE_FUNCTIONS = ("bfs", "weak_cc", "sssp")
REAL_GRAPHS = ("luxembourg_osm", "ego-Twitter", "as-caida", "email-Enron", "cit-HepPh", "ct2010")
_MEDIUM = ("kron:18", *REAL_GRAPHS, "road_like:1000", "grid_graph:1000")
SIZES = {"small": ("kron:12", "as-caida", "email-Enron", "road_like:100", "grid_graph:100"),
         "medium": _MEDIUM, "large": ("kron:21", *_MEDIUM)}
FAMILIES: dict[str, Callable[[int, int], sp.csr_array]] = {
    "kron": lambda scale, seed: datasets.kronecker(scale, 16, seed=seed, weighted=True),
    "road_like": lambda side, seed: datasets.road_like(side, seed=seed),
    "grid_graph": lambda side, seed: datasets.grid_graph(side, side, seed=seed),
}
SECONDS_PER_CASE = 3.0


class Skip(Exception):
    """An implementation that does not run here: ``status`` says how, the message why."""

    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Graph:
    """A benchmark graph: weighted canonical CSR, whether its pattern is symmetric, the
    source of BFS and SSSP (a vertex with out-edges in the largest weak component), and
    operands built for the implementations (kept until :meth:`release`)."""

    name: str
    S: sp.csr_array
    symmetric: bool
    source: int
    build_s: float = 0.0
    cache: dict[Any, Any] = field(default_factory=dict)

    def once(self, key: Any, make: Callable[[], Any]) -> Any:
        if key not in self.cache:
            self.cache[key] = make()
        return self.cache[key]

    def edges(self, rows: Any = slice(None)) -> int:
        """Edges leaving ``rows`` (all vertices by default): stored entries, or for a symmetric
        graph undirected edges (each pair once, a self loop once)."""
        stored = int(np.diff(self.S.indptr)[rows].sum())
        if not self.symmetric:
            return stored
        loops = int((self.S.diagonal() != 0)[rows].sum())
        return (stored + loops) // 2

    def summary(self) -> dict[str, Any]:
        return {"vertices": int(self.S.shape[0]), "nnz": int(self.S.nnz), "symmetric": self.symmetric,
                "edges": self.edges(), "source": self.source, "build_s": self.build_s}

    def release(self) -> None:
        self.cache.clear()
        if "cupy" in sys.modules:
            sys.modules["cupy"].get_default_memory_pool().free_all_blocks()


# --------------------------------------------------------------------------- graphs


def resolve_graphs(items: Sequence[str], size: str) -> list[str]:
    """Graph names to run, in order, without repeats: the ``size`` preset when ``items`` is
    empty. Unknown names raise ValueError listing what exists.

    >>> resolve_graphs([], "small")[0], resolve_graphs(["kron:10,as-caida"], "small")
    ('kron:12', ['kron:10', 'as-caida'])
    """
    names = [part for chunk in items for part in chunk.split(",") if part] or list(SIZES[size])
    known = set(REAL_GRAPHS) | set(datasets.real_matrix_names())
    for name in names:
        family, _, arg = name.partition(":")
        if family in FAMILIES and arg.isdigit() and int(arg) > 0:
            continue
        if name not in known:
            raise ValueError(f"unknown graph {name!r}; families: {', '.join(f'{f}:N' for f in FAMILIES)}; "
                             f"real graphs: {', '.join(REAL_GRAPHS)}")
    return list(dict.fromkeys(names))


def resolve_functions(items: Sequence[str]) -> list[str]:
    """Function names (comma-separated parts allowed) in :data:`FUNCTIONS` order; unknown
    ones raise ValueError.

    >>> resolve_functions(["sssp,bfs"])
    ['bfs', 'sssp']
    """
    return resolve_names(items, FUNCTIONS)


def resolve_names(items: Sequence[str], known: Sequence[str]) -> list[str]:
    """The names in ``items`` (comma-separated parts allowed) in the order of ``known``;
    ValueError listing the unknown ones and ``known``."""
    wanted = {part.strip() for item in items for part in item.split(",") if part.strip()}
    unknown = sorted(wanted - set(known))
    if unknown:
        raise ValueError(f"unknown function(s) {', '.join(unknown)}; known: {', '.join(known)}")
    return [f for f in known if f in wanted]


def reweighted(S: Any, seed: int = 0) -> sp.csr_array:
    """``S``'s pattern (canonical CSR) with weights uniform in (0, 1], the same on (i, j) and
    (j, i), never 0 (SciPy's csgraph reads a stored 0 as no edge)."""
    S = sp.csr_array(S, dtype=np.float64)
    S.sum_duplicates()
    coo = S.tocoo()
    n = S.shape[0]
    low, high = np.minimum(coo.row, coo.col).astype(np.int64), np.maximum(coo.row, coo.col).astype(np.int64)
    pairs, which = np.unique(low * n + high, return_inverse=True)
    weights = 1.0 - np.random.default_rng(seed).random(pairs.size)
    out = sp.csr_array((weights[which.ravel()], (coo.row, coo.col)), shape=S.shape)
    out.sum_duplicates()
    return out


def is_symmetric(S: sp.csr_array) -> bool:
    """Whether the pattern of the canonical CSR ``S`` equals its transpose's."""
    T = S.T.tocsr()
    T.sort_indices()
    return bool(np.array_equal(S.indptr, T.indptr) and np.array_equal(S.indices, T.indices))


def pick_source(S: sp.csr_array, seed: int = 0) -> int:
    """A vertex with out-edges in the largest weak component, drawn with ``seed``."""
    _, labels = csgraph.connected_components(S, directed=True, connection="weak")
    largest = np.bincount(labels).argmax() if labels.size else 0
    candidates = np.flatnonzero((labels == largest) & (np.diff(S.indptr) > 0))
    if candidates.size == 0:
        return 0
    return int(np.random.default_rng(seed).choice(candidates))


def build_graph(name: str, seed: int = 0, cache: bool = False) -> Graph:
    """The graph ``name`` (see :func:`resolve_graphs`). ``cache`` keeps it in
    :func:`sparsegpu.datasets.cache_dir` and loads it from there next time."""
    start = time.perf_counter()
    path = datasets.cache_dir() / f"graph-{name.replace(':', '-')}-{seed}.npz"
    if cache and path.is_file():
        with np.load(path) as f:
            S = sp.csr_array((f["data"], f["indices"], f["indptr"]), shape=tuple(f["shape"]))
            return Graph(name, S, bool(f["symmetric"]), int(f["source"]), time.perf_counter() - start)
    family, _, arg = name.partition(":")
    if family in FAMILIES:
        S, symmetric = FAMILIES[family](int(arg), seed), True
    else:
        S = reweighted(datasets.load_matrix(name), seed)
        symmetric = is_symmetric(S)
    graph = Graph(name, S, symmetric, pick_source(S, seed))
    if cache:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(path, data=S.data, indices=S.indices, indptr=S.indptr, shape=np.array(S.shape),
                 symmetric=symmetric, source=graph.source)
    graph.build_s = time.perf_counter() - start
    return graph


# --------------------------------------------------------------------------- calls


def csgraph_call(function: str, graph: Graph) -> tuple[str, tuple[Any, ...], dict[str, Any]]:
    """(SciPy's function name, arguments after the matrix, keyword arguments) of ``function``."""
    return {
        "bfs": ("breadth_first_order", (graph.source,), {"directed": True, "return_predecessors": True}),
        "weak_cc": ("connected_components", (), {"directed": True, "connection": "weak"}),
        "strong_cc": ("connected_components", (), {"directed": True, "connection": "strong"}),
        "sssp": ("dijkstra", (), {"directed": True, "indices": graph.source}),
        "mst": ("minimum_spanning_tree", (), {}),
        "rcm": ("reverse_cuthill_mckee", (), {"symmetric_mode": graph.symmetric}),
    }[function]


def call_text(function: str, graph: Graph) -> str:
    name, args, kwargs = csgraph_call(function, graph)
    return f"{name}({', '.join(['A', *map(repr, args), *(f'{k}={v!r}' for k, v in kwargs.items())])})"


@contextmanager
def placed_on(backend: str) -> Iterator[None]:
    """New sparsegpu matrices go to ``backend`` inside the block (``SPARSEGPU_BACKEND``)."""
    saved = os.environ.get(BACKEND_ENV)
    os.environ[BACKEND_ENV] = backend
    try:
        yield
    finally:
        if saved is None:
            del os.environ[BACKEND_ENV]
        else:
            os.environ[BACKEND_ENV] = saved


def open_call(graph: Graph, function: str, impl: str, backend: str) -> tuple[Callable[[], Any], str]:
    """(``call()`` running ``impl``'s ``function`` on ``graph``, the backend whose clock
    times it). Raises :class:`Skip` when it does not run here."""
    name, args, kwargs = csgraph_call(function, graph)
    S = graph.S
    if impl == "scipy":
        scipy_fn = getattr(csgraph, name)
        return lambda: scipy_fn(S, *args, **kwargs), "cpu"
    if impl in ("sparsegpu", "from scipy"):
        fn = getattr(sg_csgraph, name, None)
        if fn is None:
            raise Skip("not available", f"sparsegpu.csgraph has no {name}")
        if impl == "sparsegpu":
            A = graph.once(("csr", backend), lambda: from_scipy(S, "csr", backend=backend))
            return lambda: fn(A, *args, **kwargs), backend

        def from_host() -> Any:
            with placed_on(backend):
                return fn(S, *args, **kwargs)
        return from_host, backend
    if function not in BASELINE_FUNCTIONS:
        raise Skip("n/a", f"no {impl} baseline for {function}")
    if impl == "cupy":
        return _cupy_call(graph, function, backend), "gpu"
    if impl == "graphblas":
        return _graphblas_call(graph, function), "cpu"
    raise ValueError(f"unknown implementation {impl!r}; known: {', '.join(IMPLS)}")


def _cupy_call(graph: Graph, function: str, backend: str) -> Callable[[], Any]:
    if backend != "gpu":
        raise Skip("skipped", "the CuPy baseline runs on the GPU backend only")
    try:
        import cupy
        import cupyx.scipy.sparse as csp
    except ImportError:
        raise Skip("skipped", "cupy is not installed") from None
    n, source = graph.S.shape[0], graph.source
    if function == "bfs":
        def transposed_pattern() -> Any:
            T = graph.S if graph.symmetric else graph.S.T.tocsr()
            ones = cupy.ones(T.nnz, dtype=cupy.float32)
            return csp.csr_matrix((ones, cupy.asarray(T.indices), cupy.asarray(T.indptr)), shape=T.shape)
        AT = graph.once("cupy AT", transposed_pattern)
        return lambda: baselines.array_bfs_levels(AT, source, cupy)
    rows, cols, weights = graph.once("cupy edges", lambda: tuple(cupy.asarray(a) for a in checks.edge_list(graph.S)))
    if function == "weak_cc":
        return lambda: baselines.array_weak_components(rows, cols, n, cupy, graph.symmetric)
    return lambda: baselines.array_bellman_ford(rows, cols, weights, n, source, cupy)


def _graphblas_call(graph: Graph, function: str) -> Callable[[], Any]:
    try:
        A = graph.once("graphblas", lambda: baselines.graphblas_matrix(graph.S))
    except ImportError:
        raise Skip("skipped", "python-graphblas is not installed") from None
    source = graph.source
    return {"bfs": lambda: baselines.graphblas_bfs_levels(A, source),
            "weak_cc": lambda: baselines.graphblas_weak_components(A, graph.symmetric),
            "sssp": lambda: baselines.graphblas_bellman_ford(A, source)}[function]


# --------------------------------------------------------------------------- checks


def reference(graph: Graph, function: str, result: Any = None) -> dict[str, Any]:
    """What SciPy's result (computed here unless given) says about ``function`` on
    ``graph``, for :func:`check`."""
    if result is None:
        name, args, kwargs = csgraph_call(function, graph)
        result = getattr(csgraph, name)(graph.S, *args, **kwargs)
    if function == "bfs":
        levels = checks.tree_levels(result[1], graph.source)
        if levels is None:
            raise AssertionError("SciPy's BFS predecessors form no tree")
        wrong = checks.bfs_levels_error(graph.S, levels, graph.source)
        if wrong:
            raise AssertionError(f"SciPy's BFS fails the level test: {wrong}")
        return {"levels": levels}
    if function in ("weak_cc", "strong_cc"):
        return {"count": int(result[0]), "labels": result[1]}
    if function == "sssp":
        return {"dist": result}
    if function == "mst":
        return {"edges": int(result.nnz), "weight": float(result.sum())}
    return {"bandwidth": checks.bandwidth(graph.S, result)}


def _as_scipy(result: Any) -> Any:
    return result.to_scipy() if hasattr(result, "to_scipy") else sp.csr_array(result)


def check(graph: Graph, function: str, result: Any, expected: dict[str, Any]) -> str | None:
    """Why ``result`` (the SciPy-shaped result of a csgraph call, or a baseline's levels,
    labels or distances) disagrees with SciPy's; None when it agrees."""
    host = tuple(map(to_host, result)) if isinstance(result, tuple) else result
    if function == "bfs":
        if isinstance(host, tuple):
            return checks.bfs_tree_error(graph.S, host[0], host[1], expected["levels"], graph.source)
        return checks.levels_error(to_host(host), expected["levels"])
    if function in ("weak_cc", "strong_cc"):
        if isinstance(host, tuple) and int(host[0]) != expected["count"]:
            return f"{int(host[0])} components, SciPy {expected['count']}"
        return checks.partition_error(host[1] if isinstance(host, tuple) else to_host(host), expected["labels"])
    if function == "sssp":
        return checks.distances_error(to_host(host), expected["dist"])
    if function == "mst":
        return checks.forest_error(_as_scipy(host), expected["edges"], expected["weight"])
    return checks.ordering_error(graph.S, to_host(host), expected["bandwidth"])


# --------------------------------------------------------------------------- timing and runs


def time_call(call: Callable[[], Any], clock: str, repeat: int, first_s: float,
              seconds_per_case: float = SECONDS_PER_CASE) -> Timing:
    """Median seconds of ``call()`` ending synchronised: :func:`measure` when ``repeat`` calls
    fit in ``seconds_per_case``, else as many single calls as fit (at least one), timed by the
    host clock. The estimate of one call is ``first_s`` on the CPU clock, and on the GPU a
    second call's time (the first one compiled kernels). A host call longer than the budget
    is timed by its first call alone."""
    def synced(i: int = 0) -> float:
        start = time.perf_counter()
        call()
        synchronize(clock)
        return time.perf_counter() - start

    once = first_s if clock == "cpu" else synced()
    if once * (repeat + 5) <= seconds_per_case:
        return measure(synced, clock, repeat=repeat)
    if clock == "cpu" and once >= seconds_per_case:  # no compilation on the host: the first call counts
        return Timing(once, [once], 1)
    samples = [synced() for _ in range(max(1, min(repeat, int(seconds_per_case / max(once, 1e-9)))))]
    return Timing(statistics.median(samples), samples, 1)


def run_case(graph: Graph, function: str, impl: str, backend: str, expected: dict[str, Any], repeat: int,
             seconds_per_case: float = SECONDS_PER_CASE, timed: bool = True,
             first_call: tuple[Any, float] | None = None) -> dict[str, Any]:
    """One implementation of one function on one graph: checked, then (when ``timed``) timed.
    ``first_call``: (result, seconds) of a call already made, which then stands for the first."""
    try:
        call, clock = open_call(graph, function, impl, backend)
        if first_call is None:
            start = time.perf_counter()
            result = call()
            synchronize(clock)
            first = time.perf_counter() - start
        else:
            result, first = first_call
    except Skip as skip:
        return {"status": skip.status, "message": str(skip)}
    except NotImplementedError as exc:  # a csgraph function still without a body
        if impl in ("sparsegpu", "from scipy"):
            return {"status": "not available", "message": f"NotImplementedError: {exc}"}
        return {"status": "error", "message": f"NotImplementedError: {exc}"}
    except Exception as exc:  # reported, the run goes on
        return {"status": "error", "message": f"{type(exc).__name__}: {exc}"}
    try:
        wrong = check(graph, function, result, expected)
    except Exception as exc:  # a result of the wrong kind
        wrong = f"unreadable result ({type(exc).__name__}: {exc})"
    if wrong:
        return {"status": "wrong", "message": wrong}
    if not timed:
        return {"status": "ok", "first_call_s": first}
    timing = time_call(call, clock, repeat, first, seconds_per_case)
    return {"status": "ok", "seconds": timing.seconds, "samples": timing.samples, "calls": timing.calls,
            "first_call_s": first}


def traversed_edges(graph: Graph, levels: np.ndarray) -> int:
    """Graph500's count for a BFS: edges with their source reached (undirected edges once)."""
    return graph.edges(levels >= 0)


def enrich(row: dict[str, Any]) -> None:
    """Add ``vs_scipy``, ``vs_cupy`` (their time over this one) and, for BFS, ``gteps`` to
    every correct outcome of a row."""
    def seconds(impl: str) -> float | None:
        o = row["outcomes"].get(impl, {})
        return o["seconds"] if o.get("status") == "ok" else None

    scipy_s, cupy_s = seconds("scipy"), seconds("cupy")
    for outcome in row["outcomes"].values():
        if outcome["status"] == "ok":
            outcome["vs_scipy"] = scipy_s / outcome["seconds"] if scipy_s else None
            outcome["vs_cupy"] = cupy_s / outcome["seconds"] if cupy_s else None
            if "traversed_edges" in row:
                outcome["gteps"] = row["traversed_edges"] / outcome["seconds"] / 1e9


def bench_function(graph: Graph, function: str, impls: Sequence[str], backend: str, repeat: int,
                   seconds_per_case: float = SECONDS_PER_CASE,
                   step: Callable[[str], None] = lambda text: None) -> dict[str, Any]:
    """One row: ``function`` on ``graph`` by every implementation, against SciPy's result."""
    row: dict[str, Any] = {"graph": graph.name, "function": function, **graph.summary(),
                           "call": call_text(function, graph)}
    step(f"{graph.name}: {function} (scipy reference)")
    try:
        call, _ = open_call(graph, function, "scipy", backend)
        start = time.perf_counter()
        scipy_call = (call(), time.perf_counter() - start)  # SciPy's first timed call, too
        expected = reference(graph, function, scipy_call[0])
    except Exception as exc:  # reported, the run goes on
        return {**row, "status": "error", "message": f"reference: {type(exc).__name__}: {exc}"}
    if function == "bfs":
        row["traversed_edges"] = traversed_edges(graph, expected["levels"])
    row["outcomes"] = {}
    for impl in impls:
        step(f"{graph.name}: {function} {impl}")
        row["outcomes"][impl] = run_case(graph, function, impl, backend, expected, repeat, seconds_per_case,
                                         first_call=scipy_call if impl == "scipy" else None)
    enrich(row)
    return row


def bench_graphs(names: Sequence[str], backend: str, functions: Sequence[str] = FUNCTIONS,
                 impls: Sequence[str] = IMPLS, repeat: int = 10, seed: int = 0,
                 seconds_per_case: float = SECONDS_PER_CASE, cache: bool = False,
                 on_step: Callable[[str], None] | None = None,
                 on_graph: Callable[[], None] | None = None) -> dict[str, Any]:
    """Every function of every implementation on every graph: ``{"meta": ..., "results":
    [row per graph and function]}``. A graph that cannot be built is one row with its
    ``status`` (``skipped`` when a real graph is not found). ``on_step(text)`` hears what runs
    next, ``on_graph()`` when a graph is done."""
    step, done = on_step or (lambda text: None), on_graph or (lambda: None)
    functions = resolve_functions(functions)
    results: list[dict[str, Any]] = []
    for name in names:
        step(f"{name}: building")
        try:
            graph = build_graph(name, seed, cache)
        except FileNotFoundError as exc:
            results.append({"graph": name, "status": "skipped", "message": str(exc)})
        except Exception as exc:  # reported, the run goes on
            results.append({"graph": name, "status": "error", "message": f"{type(exc).__name__}: {exc}"})
        else:
            results += [bench_function(graph, function, impls, backend, repeat, seconds_per_case, step)
                        for function in functions]
            graph.release()
        done()
    return {"meta": meta(backend, seconds_per_case), "results": results}


def meta(backend: str, seconds_per_case: float) -> dict[str, Any]:
    """Versions and thread counts of the baselines (None where a package is missing)."""
    out: dict[str, Any] = {"backend": backend, "seconds_per_case": seconds_per_case, "cpu_count": os.cpu_count(),
                           "cupy": None, "graphblas": None}
    if "cupy" in sys.modules:
        out["cupy"] = sys.modules["cupy"].__version__
    try:
        gb = baselines.graphblas()
        out["graphblas"] = {"python-graphblas": gb.__version__, "threads": gb.ss.config["nthreads"]}
    except ImportError:
        pass
    return out


# --------------------------------------------------------------------------- report


def _cell(outcome: dict[str, Any]) -> str:
    if outcome.get("status") != "ok":
        return {"wrong": "WRONG"}.get(outcome.get("status", "-"), outcome.get("status", "-"))
    return f"{outcome['seconds'] * 1e3:.3g}"


def _ratio(value: float | None) -> str:
    return f"{value:.2f}x" if value else "-"


def graphs_table(result: dict[str, Any]) -> tuple[str, list[str], list[list[str]]]:
    """Milliseconds per call of every implementation, sparsegpu's speed-ups over SciPy and
    the CuPy baseline, and its BFS GTEPS."""
    impls = list(dict.fromkeys(i for r in result["results"] for i in r.get("outcomes", {}))) or list(IMPLS)
    headers = ["graph", "vertices", "edges", "function", *impls, "x scipy", "x cupy", "GTEPS"]
    rows = []
    for r in result["results"]:
        if "outcomes" not in r:
            rows.append([r["graph"], "", "", r.get("function", ""), r["status"], *["" for _ in impls[1:]], "", "", ""])
            continue
        ours = r["outcomes"].get("sparsegpu", {})
        gteps = f"{ours['gteps']:.3g}" if ours.get("gteps") else "-"
        rows.append([r["graph"], f"{r['vertices']:,}", f"{r['edges']:,}", r["function"],
                     *[_cell(r["outcomes"].get(i, {})) for i in impls],
                     _ratio(ours.get("vs_scipy")), _ratio(ours.get("vs_cupy")), gteps])
    title = (f"Graph algorithms on {result['meta']['backend']}: ms per call (median); x scipy, x cupy "
             "(their time over sparsegpu's) and GTEPS (Graph500 counting) of sparsegpu")
    return title, headers, rows


def notes(result: dict[str, Any]) -> list[str]:
    """Why implementations gave no time: one line per graph not built, per WRONG or failed
    result, per missing function and per skipped baseline."""
    lines: dict[str, None] = {}
    missing: dict[str, None] = {}
    for r in result["results"]:
        if "outcomes" not in r:
            lines[f"{' '.join([r['graph'], *([r['function']] if 'function' in r else [])])}: {r['status']}: "
                  f"{r['message']}"] = None
        for impl, o in r.get("outcomes", {}).items():
            if o["status"] in ("wrong", "error"):
                lines[f"{r['graph']} {r['function']} {impl}: {o['status'].upper()}: {o['message']}"] = None
            elif o["status"] == "skipped":
                lines[f"{impl}: skipped: {o['message']}"] = None
            elif o["status"] == "not available":
                missing[r["function"]] = None
    if missing:
        lines[f"not available in sparsegpu.csgraph: {', '.join(missing)}"] = None
    return list(lines)


def print_graphs(result: dict[str, Any], file: Any = None) -> None:
    """The notes, then the table (rich when installed, aligned text otherwise)."""
    out = sys.stdout if file is None else file
    title, headers, rows = graphs_table(result)
    for line in notes(result):
        print(line, file=out)
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        widths = [max(len(str(c)) for c in column) for column in zip(headers, *rows)]
        print(f"\n{title}", file=out)
        for line in [headers, *rows]:
            print("  ".join(str(c).ljust(w) for c, w in zip(line, widths)), file=out)
        return
    console = Console(file=out, width=None if out.isatty() else int(os.environ.get("COLUMNS", 250)))
    console.print(f"\n[bold]{title}[/bold]", highlight=False)
    table = Table()
    for i, header in enumerate(headers):
        table.add_column(header, justify="left" if i in (0, 3) else "right", no_wrap=True)
    for row in rows:
        table.add_row(*row)
    console.print(table)


def failures(result: dict[str, Any] | None) -> list[str]:
    """``graphs/<graph>/<function>/<impl>`` for every WRONG or failed result, and graphs that
    could not be built."""
    bad = []
    for r in (result or {}).get("results", []):
        if r.get("status") == "error":
            bad.append("/".join(["graphs", r["graph"], *([r["function"]] if "function" in r else [])]))
        bad += [f"graphs/{r['graph']}/{r['function']}/{impl}" for impl, o in r.get("outcomes", {}).items()
                if o["status"] in ("wrong", "error")]
    return bad

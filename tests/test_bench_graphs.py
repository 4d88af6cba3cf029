"""The graph benchmarks: the baselines against SciPy (the CuPy one through NumPy and SciPy,
which it is written over), checks that catch wrong answers, and the comparison end to end on
the CPU backend, with stand-ins for sparsegpu.csgraph's functions where the tests need them."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse import csgraph

from sparsegpu import csgraph as sg_csgraph
from sparsegpu import datasets
from sparsegpu.bench import cli, graphs
from sparsegpu.bench import graph_baselines as baselines
from sparsegpu.bench import graph_checks as checks

from .conftest import GPU, requires_matrices

ASV_DIR = Path(__file__).resolve().parent.parent / "asv_benchmarks"
SCIPY_NAMES = ("breadth_first_order", "connected_components", "dijkstra", "minimum_spanning_tree",
               "reverse_cuthill_mckee")
try:
    import graphblas  # noqa: F401

    HAVE_GRAPHBLAS = True
except ImportError:
    HAVE_GRAPHBLAS = False


def random_graph(rng: np.random.Generator, n: int, per_row: float, symmetric: bool, isolated: int = 3) -> sp.csr_array:
    """A random weighted graph (weights in [0.1, 1.1)) whose last ``isolated`` vertices have no
    edges, canonical CSR."""
    m = int(n * per_row)
    rows, cols = rng.integers(0, n - isolated, m), rng.integers(0, n - isolated, m)
    if symmetric:
        rows, cols = np.concatenate([rows, cols]), np.concatenate([cols, rows])
    S = sp.csr_array((np.ones(rows.size), (rows, cols)), shape=(n, n))
    S.sum_duplicates()
    return graphs.reweighted(S, seed=int(rng.integers(1 << 30)))


def bfs_levels(S: sp.csr_array, source: int) -> np.ndarray:
    dist = csgraph.shortest_path(S, method="D", unweighted=True, indices=source)
    return np.where(np.isinf(dist), -1, dist).astype(np.int64)


def scipy_stand_ins(monkeypatch: pytest.MonkeyPatch, calls: list | None = None, **override) -> None:
    """sparsegpu.csgraph's functions as SciPy's on the matrix's host copy (``override``
    replaces some); each call's input type is appended to ``calls``."""
    for name in SCIPY_NAMES:
        scipy_fn = override.get(name, getattr(csgraph, name))

        def stand_in(A, *args, _fn=scipy_fn, **kwargs):
            if calls is not None:
                calls.append(type(A).__module__.split(".")[0])
            return _fn(A.to_scipy() if hasattr(A, "to_scipy") else A, *args, **kwargs)

        monkeypatch.setattr(sg_csgraph, name, stand_in, raising=False)


def run_cli(tmp_path: Path, *names: str) -> tuple[int, dict]:
    code = cli.main(["--backend", "cpu", "--repeat", "2", "--out", str(tmp_path), "--graphs", *names])
    return code, json.loads((tmp_path / "bench.json").read_text())


# --------------------------------------------------------------------------- baselines


@pytest.mark.parametrize("symmetric", [True, False])
def test_array_baselines_match_scipy(rng, symmetric):
    S = random_graph(rng, 500, 1.5, symmetric)
    source = int(rng.integers(0, 497))
    AT = S.T.tocsr().astype(np.float32)
    assert np.array_equal(baselines.array_bfs_levels(AT, source, np), bfs_levels(S, source))
    rows, cols, weights = checks.edge_list(S)
    _, labels = csgraph.connected_components(S, directed=True, connection="weak")
    found = baselines.array_weak_components(rows, cols, S.shape[0], np, symmetric)
    assert checks.partition_error(found, labels) is None
    assert found[-1] == S.shape[0] - 1 and found.min() == 0  # isolated vertex; smallest-vertex labels
    if not symmetric:  # both ends are needed
        one_way = baselines.array_weak_components(rows, cols, S.shape[0], np, symmetric=True)
        assert checks.partition_error(one_way, labels) is not None
    dist = baselines.array_bellman_ford(rows, cols, weights, S.shape[0], source, np)
    assert checks.distances_error(dist, csgraph.dijkstra(S, indices=source)) is None


@pytest.mark.skipif(not HAVE_GRAPHBLAS, reason="python-graphblas is not installed")
@pytest.mark.parametrize("symmetric", [True, False])
def test_graphblas_baselines_match_scipy(rng, symmetric):
    S = random_graph(rng, 500, 1.5, symmetric)
    source = int(rng.integers(0, 497))
    A = baselines.graphblas_matrix(S)
    assert np.array_equal(baselines.graphblas_bfs_levels(A, source), bfs_levels(S, source))
    _, labels = csgraph.connected_components(S, directed=True, connection="weak")
    assert checks.partition_error(baselines.graphblas_weak_components(A, symmetric), labels) is None
    dist = baselines.graphblas_bellman_ford(A, source)
    assert checks.distances_error(dist, csgraph.dijkstra(S, indices=source)) is None


def test_nonnegative_doubles_order_as_their_bits(rng):
    # array_bellman_ford's scatter-min compares distances as uint64.
    values = np.concatenate([rng.exponential(size=1000) ** 3, [0.0, np.inf, 5e-324, 1.7e308]])
    assert np.array_equal(np.argsort(values, kind="stable"), np.argsort(values.view(np.uint64), kind="stable"))


def test_baselines_on_one_vertex_and_a_long_path():
    one = sp.csr_array((1, 1), dtype=np.float64)
    empty = np.zeros(0, dtype=np.int32)
    assert baselines.array_bfs_levels(one.astype(np.float32), 0, np).tolist() == [0]
    assert baselines.array_weak_components(empty, empty, 1, np).tolist() == [0]
    assert baselines.array_bellman_ford(empty, empty, np.zeros(0), 1, 0, np).tolist() == [0.0]
    path = datasets.grid_graph(1, 300, weighted=False)  # 299 levels: many sweeps
    rows, cols, weights = checks.edge_list(path)
    assert baselines.array_bfs_levels(path.astype(np.float32), 0, np).tolist() == list(range(300))
    assert baselines.array_bellman_ford(rows, cols, weights, 300, 299, np).tolist() == list(range(299, -1, -1))
    if HAVE_GRAPHBLAS:
        assert baselines.graphblas_bfs_levels(baselines.graphblas_matrix(one), 0).tolist() == [0]
        assert baselines.graphblas_weak_components(baselines.graphblas_matrix(path)).tolist() == [0] * 300


# --------------------------------------------------------------------------- checks


def test_tree_levels_by_hand():
    no = checks.NO_PREDECESSOR
    assert checks.tree_levels(np.array([no, 0, 1, 1, no]), 0).tolist() == [0, 1, 2, 2, -1]
    assert checks.tree_levels(np.array([no, 2, 1]), 0) is None  # a cycle away from the source
    assert checks.tree_levels(np.array([no, 0, 7]), 0) is None  # out of range
    assert checks.tree_levels(np.array([1, 0]), 0) is None  # the source has a predecessor
    assert checks.tree_levels(np.array([no, no, 1]), 0) is None  # a chain ending elsewhere


def test_bfs_checks_catch_every_kind_of_wrong_tree(rng):
    S = random_graph(rng, 400, 2.0, symmetric=False)
    source = int(np.argmax(np.diff(S.indptr)))
    order, preds = csgraph.breadth_first_order(S, source, directed=True, return_predecessors=True)
    levels = bfs_levels(S, source)
    assert checks.bfs_levels_error(S, levels, source) is None
    assert checks.bfs_tree_error(S, order, preds, levels, source) is None
    deep = levels.copy()
    deep[order[-1]] += 1
    assert "joins levels" in checks.bfs_levels_error(S, deep, source)
    assert checks.bfs_tree_error(S, order[:-1], preds, levels, source)  # a reached vertex missing
    by_level = order.copy()
    by_level[[1, -1]] = by_level[[-1, 1]]
    assert "level by level" in checks.bfs_tree_error(S, by_level, preds, levels, source)
    # A predecessor on the right level but not an in-neighbour.
    child = order[-1]
    strangers = np.flatnonzero((levels == levels[child] - 1) & (S[:, [child]].toarray().ravel() == 0))
    if strangers.size:
        bad = preds.copy()
        bad[child] = strangers[0]
        assert "not an in-neighbour" in checks.bfs_tree_error(S, order, bad, levels, source)
    same_level = preds.copy()
    same_level[child] = order[-2] if levels[order[-2]] == levels[child] else source
    assert checks.bfs_tree_error(S, order, same_level, levels, source)
    cycle = preds.copy()
    cycle[order[1]], cycle[order[2]] = order[2], order[1]
    assert "tree" in checks.bfs_tree_error(S, order, cycle, levels, source)
    assert checks.levels_error(levels[:-1], levels) and checks.levels_error(deep, levels)


def test_other_checks_catch_wrong_answers(rng):
    S = random_graph(rng, 300, 1.2, symmetric=True)
    _, labels = csgraph.connected_components(S)
    assert checks.partition_error(rng.permutation(labels.max() + 1)[labels] * 3 + 7, labels) is None
    merged = labels.copy()
    merged[merged == merged[-1]] = merged[0]
    assert checks.partition_error(merged, labels)
    dist = csgraph.dijkstra(S, indices=int(np.argmax(np.diff(S.indptr))))
    assert checks.distances_error(dist * (1 + 1e-14), dist) is None
    finite = np.flatnonzero(np.isfinite(dist) & (dist > 0))
    for poison in (dist[finite[0]] * (1 + 1e-10), np.inf, np.nan):
        bad = dist.copy()
        bad[finite[0]] = poison
        assert checks.distances_error(bad, dist)
    T = csgraph.minimum_spanning_tree(S)
    assert checks.forest_error(T, T.nnz, float(T.sum())) is None
    heavier = T.copy()
    heavier.data[0] += 1e-6 * T.sum()  # beyond the 1e-9 relative tolerance
    assert checks.forest_error(heavier, T.nnz, float(T.sum()))
    perm = csgraph.reverse_cuthill_mckee(S, symmetric_mode=True)
    width = checks.bandwidth(S, perm)
    assert checks.ordering_error(S, perm, width) is None
    assert checks.ordering_error(S, perm, width - 1)
    assert checks.ordering_error(S, np.zeros_like(perm), width)


def test_reweighted_keeps_the_pattern_with_equal_weights_both_ways(rng):
    S = random_graph(rng, 200, 3.0, symmetric=True)
    W = graphs.reweighted(S, seed=1)
    assert np.array_equal(W.indptr, S.indptr) and np.array_equal(W.indices, S.indices)
    assert (W.data > 0).all() and (W.data <= 1).all()
    assert (W != W.T).nnz == 0
    assert graphs.is_symmetric(W) and not graphs.is_symmetric(random_graph(rng, 200, 3.0, symmetric=False))


def test_gteps_counts_the_edges_of_the_traversed_component():
    # Path 0-1-2 and edge 3-4, symmetric: a BFS from 0 traverses 2 undirected edges.
    rows, cols = np.array([0, 1, 1, 2, 3, 4]), np.array([1, 0, 2, 1, 4, 3])
    S = sp.csr_array((np.ones(6), (rows, cols)), shape=(5, 5))
    graph = graphs.Graph("path", S, True, 0)
    assert graphs.traversed_edges(graph, np.array([0, 1, 2, -1, -1])) == 2
    directed = graphs.Graph("path", sp.csr_array(sp.triu(S)), False, 0)
    assert graphs.traversed_edges(directed, np.array([0, 1, 2, -1, -1])) == 2
    assert graphs.pick_source(S, seed=3) in (0, 1, 2)  # the largest component
    looped = graphs.Graph("loop", S + sp.csr_array(sp.identity(5)), True, 0)  # a self loop counts once
    assert graphs.traversed_edges(looped, np.array([0, 1, 2, -1, -1])) == 5 and looped.summary()["edges"] == 8


# --------------------------------------------------------------------------- the harness


def test_graphs_end_to_end_on_the_cpu(tmp_path, monkeypatch, capsys):
    calls: list[str] = []
    scipy_stand_ins(monkeypatch, calls)
    code, payload = run_cli(tmp_path, "kron:7,road_like:10", "grid_graph:6")
    out = capsys.readouterr().out
    assert code == 0, out
    assert "spmv" not in payload and {r["graph"] for r in payload["graphs"]["results"]} == {
        "kron:7", "road_like:10", "grid_graph:6"}
    rows = payload["graphs"]["results"]
    assert [r["function"] for r in rows[:6]] == list(graphs.FUNCTIONS)
    for r in rows:
        o = r["outcomes"]
        assert o["sparsegpu"]["status"] == o["from scipy"]["status"] == o["scipy"]["status"] == "ok", r
        assert o["sparsegpu"]["seconds"] > 0 and o["sparsegpu"]["vs_scipy"] > 0
        assert o["cupy"]["status"] == ("skipped" if r["function"] in graphs.BASELINE_FUNCTIONS else "n/a")
        want = ("ok" if HAVE_GRAPHBLAS else "skipped") if r["function"] in graphs.BASELINE_FUNCTIONS else "n/a"
        assert o["graphblas"]["status"] == want
        if r["function"] == "bfs":
            assert 0 < r["traversed_edges"] <= r["edges"] and o["sparsegpu"]["gteps"] > 0
    assert {"sparsegpu", "scipy"} <= set(calls)  # a sparsegpu matrix and the scipy one
    table = out.index("Graph algorithms on cpu")
    assert "road_like:10" in out[table:] and "wrote" in out[table:]
    assert "cupy: skipped" in out


def test_a_wrong_answer_is_reported_and_never_timed(tmp_path, monkeypatch, capsys):
    counted = {"dijkstra": 0}

    def off_by_a_little(A, *args, **kwargs):
        counted["dijkstra"] += 1
        return csgraph.dijkstra(A, *args, **kwargs) * (1 + 1e-9)

    def with_a_stranger(A, *args, **kwargs):
        order, preds = csgraph.breadth_first_order(A, *args, **kwargs)
        preds[order[-1]] = order[-1]
        return order, preds

    scipy_stand_ins(monkeypatch, dijkstra=off_by_a_little, breadth_first_order=with_a_stranger)
    result = graphs.bench_graphs(["kron:7"], "cpu", functions=["bfs", "sssp", "weak_cc"],
                                 impls=["sparsegpu", "scipy"], repeat=2)
    by_function = {r["function"]: r["outcomes"] for r in result["results"]}
    for function in ("bfs", "sssp"):
        assert by_function[function]["sparsegpu"]["status"] == "wrong"
        assert "seconds" not in by_function[function]["sparsegpu"]
        assert by_function[function]["scipy"]["status"] == "ok"
    assert counted["dijkstra"] == 1
    assert by_function["weak_cc"]["sparsegpu"]["status"] == "ok"
    assert graphs.failures(result) == ["graphs/kron:7/bfs/sparsegpu", "graphs/kron:7/sssp/sparsegpu"]
    code, _ = run_cli(tmp_path, "grid_graph:5")
    out = capsys.readouterr().out
    assert code == 1 and "WRONG" in out


def test_missing_and_failing_functions(tmp_path, monkeypatch):
    def unfinished(A, *args, **kwargs):
        raise NotImplementedError

    def broken(A, *args, **kwargs):
        raise RuntimeError("boom")

    scipy_stand_ins(monkeypatch, reverse_cuthill_mckee=unfinished, minimum_spanning_tree=broken)
    monkeypatch.delattr(sg_csgraph, "dijkstra", raising=False)
    result = graphs.bench_graphs(["grid_graph:5"], "cpu", functions=["sssp", "rcm", "mst", "bfs"],
                                 impls=["sparsegpu", "scipy"], repeat=2)
    status = {r["function"]: r["outcomes"]["sparsegpu"]["status"] for r in result["results"]}
    assert status == {"sssp": "not available", "rcm": "not available", "mst": "error", "bfs": "ok"}
    assert graphs.failures(result) == ["graphs/grid_graph:5/mst/sparsegpu"]
    assert "not available in sparsegpu.csgraph: sssp, rcm" in graphs.notes(result)


def test_a_failing_reference_is_reported(monkeypatch):
    def out_of_memory(*args, **kwargs):
        raise MemoryError("no room")

    monkeypatch.setattr(graphs, "reference", out_of_memory)
    result = graphs.bench_graphs(["grid_graph:4"], "cpu", functions=["bfs", "mst"], impls=["scipy"], repeat=1)
    assert [r["status"] for r in result["results"]] == ["error", "error"]
    assert graphs.failures(result) == ["graphs/grid_graph:4/bfs", "graphs/grid_graph:4/mst"]
    assert "grid_graph:4 bfs: error: reference: MemoryError: no room" in graphs.notes(result)


def test_a_graph_that_is_not_found_is_skipped(monkeypatch):
    def nowhere(name):
        raise FileNotFoundError(f"no matrix {name!r}")

    monkeypatch.setattr(datasets, "load_matrix", nowhere)
    result = graphs.bench_graphs(["as-caida", "grid_graph:4"], "cpu", functions=["bfs"], impls=["scipy"], repeat=1)
    assert result["results"][0] == {"graph": "as-caida", "status": "skipped", "message": "no matrix 'as-caida'"}
    assert result["results"][1]["outcomes"]["scipy"]["status"] == "ok"
    assert graphs.failures(result) == []


@requires_matrices
def test_a_real_directed_graph():
    result = graphs.bench_graphs(["cit-HepPh"], "cpu", functions=["bfs", "strong_cc", "rcm"], impls=["scipy"],
                                 repeat=1, seconds_per_case=0.1)
    rows = result["results"]
    assert not rows[0]["symmetric"] and rows[0]["edges"] == rows[0]["nnz"]
    assert all(r["outcomes"]["scipy"]["status"] == "ok" for r in rows)
    assert rows[2]["call"] == "reverse_cuthill_mckee(A, symmetric_mode=False)"


def test_time_call_keeps_to_its_budget():
    slow = graphs.time_call(lambda: time.sleep(0.02), "cpu", repeat=20, first_s=0.02, seconds_per_case=0.1)
    assert slow.calls == 1 and 1 <= len(slow.samples) <= 5 and slow.seconds >= 0.02
    once = graphs.time_call(lambda: time.sleep(0.02), "cpu", repeat=20, first_s=1.0, seconds_per_case=0.1)
    assert len(once.samples) == 1
    fast = graphs.time_call(lambda: sum(range(100)), "cpu", repeat=3, first_s=1e-5)
    assert fast.calls > 1 and len(fast.samples) == 3 and fast.seconds < 1e-3


def test_resolve_graphs_and_bad_names(tmp_path):
    assert graphs.resolve_graphs([], "large")[0] == "kron:21"
    assert graphs.resolve_graphs([], "medium") == list(graphs.SIZES["medium"])
    assert graphs.resolve_graphs(["kron:9,road_like:20", "kron:9"], "small") == ["kron:9", "road_like:20"]
    for bad in ("kron", "kron:x", "road_like:0", "nope"):
        with pytest.raises(ValueError, match="unknown graph"):
            graphs.resolve_graphs([bad], "small")
    with pytest.raises(ValueError, match="unknown function"):
        graphs.bench_graphs(["kron:5"], "cpu", functions=["pagerank"])
    assert cli.main(["--backend", "cpu", "--out", str(tmp_path), "--graphs", "nope"]) == 2
    assert cli.main(["--backend", "cpu", "--out", str(tmp_path), "--graphs", "--graph-functions", "bfs,nope"]) == 2
    assert graphs.resolve_functions(["rcm", "bfs,rcm"]) == ["bfs", "rcm"]
    code, payload = run_cli(tmp_path, "grid_graph:4", "--graph-functions", "sssp,bfs")
    assert code == 0 and [r["function"] for r in payload["graphs"]["results"]] == ["bfs", "sssp"]


def test_asv_graphs_suite(monkeypatch):
    monkeypatch.syspath_prepend(str(ASV_DIR))
    import benchmarks.graphs as suite

    assert suite.GraphAlgorithms.params == [suite.GRAPHS, list(graphs.FUNCTIONS), list(graphs.IMPLS)]
    assert suite.GraphAlgorithms.unit == "ms" and suite.BFSRate.unit == "GTEPS"
    if not GPU:
        with pytest.raises(NotImplementedError):
            suite.GraphAlgorithms().setup("luxembourg_osm", "bfs", "scipy")


# --------------------------------------------------------------------------- GPU


@pytest.mark.gpu
def test_graphs_on_the_gpu(tmp_path):
    code = cli.main(["--backend", "gpu", "--repeat", "3", "--out", str(tmp_path), "--graphs", "kron:10,road_like:30"])
    payload = json.loads((tmp_path / "bench.json").read_text())
    assert code == 0
    for r in payload["graphs"]["results"]:
        o = r["outcomes"]
        assert o["sparsegpu"]["status"] in ("ok", "not available") and o["scipy"]["status"] == "ok"
        if r["function"] in graphs.BASELINE_FUNCTIONS:
            assert o["cupy"]["status"] == "ok", o["cupy"]

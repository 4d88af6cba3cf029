"""The NetworkX backend against NetworkX itself: values, return types, dispatch and caching.

Most tests call the backend's functions on a converted graph directly (what NetworkX does after
dispatching). The dispatch tests run NetworkX in a subprocess that sees a temporary
``*.dist-info`` folder declaring the ``networkx.backends`` and ``networkx.backend_info`` entry
points, the way an installed sparsegpu declares them; NetworkX reads entry points once, on import.
"""

from __future__ import annotations

import ast
import inspect
import json
import math
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

nx = pytest.importorskip("networkx")

from sparsegpu.nx import backend_interface, from_networkx

ROOT = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------- graphs


def _weighted(G, rng, name="weight", missing=0.2, integers=False):
    """Random positive weights under ``name``; about ``missing`` of the edges get none."""
    for u, v, data in G.edges(data=True):
        if rng.random() >= missing:
            data[name] = int(rng.integers(1, 10)) if integers else float(rng.uniform(0.5, 5.0))
    return G


def undirected_graphs(rng):
    seed = int(rng.integers(2**31))
    karate = nx.karate_club_graph()  # real; "weight" on every edge, ints
    lesmis = nx.les_miserables_graph()  # real; string labels, "weight" ints
    grid = nx.grid_2d_graph(6, 7)  # tuple labels
    random_graph = _weighted(nx.gnp_random_graph(120, 0.04, seed=seed), rng, "w")
    random_graph.add_nodes_from(["isolated", ("also", 1)])  # isolated nodes, mixed label types
    pieces = nx.relabel_nodes(nx.disjoint_union_all([nx.cycle_graph(5), nx.path_graph(4), nx.complete_graph(6)]),
                              lambda i: f"v{i}")
    return {"karate": karate, "lesmis": lesmis, "grid": grid, "random": random_graph, "pieces": pieces}


def directed_graphs(rng):
    seed = int(rng.integers(2**31))
    random_digraph = _weighted(nx.gnp_random_graph(150, 0.03, seed=seed, directed=True), rng, "w")
    random_digraph.add_node("sink-only")
    web = nx.DiGraph(nx.scale_free_graph(200, seed=seed))  # collapses the multigraph
    web.remove_edges_from(list(nx.selfloop_edges(web)))
    strings = nx.relabel_nodes(random_digraph, lambda v: f"n{v}")
    return {"random": random_digraph, "web": web, "strings": strings}


@pytest.fixture
def graphs(rng):
    return {**undirected_graphs(rng), **{f"di-{k}": G for k, G in directed_graphs(rng).items()}}


def convert(G, weight=None, backend="cpu"):
    return from_networkx(G, None if weight is None else {weight: 1}, backend=backend)


def weight_of(G):
    return "w" if any("w" in d for _, _, d in G.edges(data=True)) else "weight"


def assert_close_dicts(ours, theirs, tol=1e-9):
    assert type(ours) is dict
    assert ours.keys() == theirs.keys()
    for node, value in theirs.items():
        assert math.isclose(ours[node], value, rel_tol=tol, abs_tol=tol), (node, ours[node], value)


# --------------------------------------------------------------------------- components


def test_connected_components_match_networkx(graphs, backend):
    for name, G in graphs.items():
        S = convert(G, backend=backend)
        if G.is_directed():
            with pytest.raises(nx.NetworkXNotImplemented):
                list(backend_interface.connected_components(S))
            continue
        result = backend_interface.connected_components(S)
        assert inspect.isgenerator(result)
        assert list(result) == list(nx.connected_components(G)), name  # same order: by first node
        assert backend_interface.number_connected_components(S) == nx.number_connected_components(G)
        assert backend_interface.is_connected(S) is nx.is_connected(G)
    with pytest.raises(nx.NetworkXPointlessConcept):
        backend_interface.is_connected(convert(nx.Graph()))


def _as_sorted_lists(components):
    return sorted(sorted(str(node) for node in c) for c in components)


def test_strongly_connected_components_match_networkx(graphs, backend):
    for name, G in graphs.items():
        S = convert(G, backend=backend)
        if not G.is_directed():
            with pytest.raises(nx.NetworkXNotImplemented):
                list(backend_interface.strongly_connected_components(S))
            continue
        result = backend_interface.strongly_connected_components(S)
        assert inspect.isgenerator(result)
        ours = [frozenset(c) for c in result]
        assert all(type(c) is frozenset for c in ours)
        assert _as_sorted_lists(ours) == _as_sorted_lists(nx.strongly_connected_components(G)), name


# --------------------------------------------------------------------------- searches


def _check_bfs_tree(G, source, edges, depth_limit=None, reverse=False):
    H = G.reverse(copy=False) if reverse and G.is_directed() else G
    dist = nx.single_source_shortest_path_length(H, source, cutoff=depth_limit)
    children = [v for _, v in edges]
    assert len(children) == len(set(children)) == len(dist) - 1
    assert set(children) == set(dist) - {source}
    for parent, child in edges:
        assert H.has_edge(parent, child) and dist[parent] + 1 == dist[child]
    levels = [dist[v] for v in children]
    assert levels == sorted(levels)  # level by level


def test_bfs_edges_form_a_breadth_first_tree(graphs, rng, backend):
    for G in graphs.values():
        S = convert(G, backend=backend)
        nodes = list(G)
        source = nodes[int(rng.integers(len(nodes)))]
        result = backend_interface.bfs_edges(S, source)
        assert inspect.isgenerator(result)
        edges = list(result)
        assert all(type(e) is tuple for e in edges)
        _check_bfs_tree(G, source, edges)
        _check_bfs_tree(G, source, list(backend_interface.bfs_edges(S, source, depth_limit=2)), depth_limit=2)
        _check_bfs_tree(G, source, list(backend_interface.bfs_edges(S, source, reverse=True)), reverse=True)
        tree = backend_interface.bfs_tree(S, source, depth_limit=3)
        assert type(tree) is nx.DiGraph and source in tree
        _check_bfs_tree(G, source, list(tree.edges()), depth_limit=3)
    with pytest.raises(nx.NetworkXError):
        list(backend_interface.bfs_edges(convert(nx.path_graph(3)), "absent"))


def test_bfs_edges_on_the_karate_club_are_networkx_edges():
    G = nx.karate_club_graph()
    assert list(backend_interface.bfs_edges(convert(G), 0)) == list(nx.bfs_edges(G, 0))


def test_bfs_layers_and_descendants_match_networkx(graphs, rng, backend):
    for name, G in graphs.items():
        S = convert(G, backend=backend)
        nodes = list(G)
        sources = [nodes[i] for i in rng.choice(len(nodes), 3, replace=False).tolist()]
        for chosen in (sources[0], sources):
            result = backend_interface.bfs_layers(S, chosen)
            assert inspect.isgenerator(result)
            ours = list(result)
            assert all(type(layer) is list for layer in ours)
            assert [set(layer) for layer in ours] == [set(layer) for layer in nx.bfs_layers(G, chosen)], name
        for distance in (0, 1, 2, 3, 50):
            ours = backend_interface.descendants_at_distance(S, sources[0], distance)
            assert type(ours) is set
            assert ours == nx.descendants_at_distance(G, sources[0], distance), (name, distance)
    with pytest.raises(nx.NetworkXError):
        list(backend_interface.bfs_layers(convert(nx.path_graph(3)), [0, "absent"]))


def test_shortest_path_lengths_match_networkx(graphs, rng, backend):
    for name, G in graphs.items():
        weight = weight_of(G)
        S = convert(G, weight, backend=backend)
        nodes = list(G)
        source = nodes[int(rng.integers(len(nodes)))]
        for cutoff in (None, 2):
            ours = backend_interface.single_source_shortest_path_length(S, source, cutoff)
            assert ours == nx.single_source_shortest_path_length(G, source, cutoff), name
            assert all(type(v) is int for v in ours.values())
        for cutoff in (None, 4.5):
            ours = backend_interface.single_source_dijkstra_path_length(S, source, cutoff, weight)
            theirs = nx.single_source_dijkstra_path_length(G, source, cutoff, weight)
            assert_close_dicts(ours, theirs)
            # Floats throughout where some weight is a float (NetworkX's sum is an int along
            # paths of integer weights only); ints where every weight is an int.
            expected = int if weight in S.integral else float
            assert all(type(ours[v]) is expected for v in theirs if v != source), name
            assert ours[source] == 0
    with pytest.raises(nx.NodeNotFound):
        backend_interface.single_source_shortest_path_length(convert(nx.path_graph(3)), "absent")


def test_dijkstra_with_integer_and_missing_weights(rng):
    G = _weighted(nx.gnp_random_graph(80, 0.08, seed=int(rng.integers(2**31))), rng, "cost", integers=True)
    ours = backend_interface.single_source_dijkstra_path_length(convert(G, "cost"), 0, weight="cost")
    theirs = nx.single_source_dijkstra_path_length(G, 0, weight="cost")
    assert ours == theirs and all(type(v) is int for v in ours.values())


# --------------------------------------------------------------------------- analytics


def test_pagerank_matches_networkx(graphs, rng, backend):
    for G in graphs.values():
        weight = weight_of(G)
        S = convert(G, weight, backend=backend)
        assert_close_dicts(backend_interface.pagerank(S, weight=weight), nx.pagerank(G, weight=weight), 1e-6)
        assert_close_dicts(backend_interface.pagerank(S, weight=None), nx.pagerank(G, weight=None), 1e-6)
        nodes = list(G)
        chosen = [nodes[i] for i in rng.choice(len(nodes), 5, replace=False).tolist()]
        personal = {node: float(rng.uniform(0.1, 1)) for node in chosen}
        dangling = {node: 1.0 for node in chosen[:2]}
        ours = backend_interface.pagerank(S, personalization=personal, dangling=dangling, weight=weight)
        theirs = nx.pagerank(G, personalization=personal, dangling=dangling, weight=weight)
        assert_close_dicts(ours, theirs, 1e-6)
    assert backend_interface.pagerank(convert(nx.Graph())) == {}
    with pytest.raises(nx.PowerIterationFailedConvergence):
        backend_interface.pagerank(convert(nx.karate_club_graph(), "weight"), max_iter=1)


def test_betweenness_matches_networkx(graphs, rng, backend):
    for G in graphs.values():
        weight = weight_of(G)
        S = convert(G, weight, backend=backend)
        for kwargs in ({}, {"weight": weight}, {"normalized": False, "endpoints": True}):
            assert_close_dicts(backend_interface.betweenness_centrality(S, **kwargs),
                               nx.betweenness_centrality(G, **kwargs))
        seed = int(rng.integers(2**31))
        assert_close_dicts(backend_interface.betweenness_centrality(S, k=7, seed=seed),
                           nx.betweenness_centrality(G, k=7, seed=seed))


def test_triangles_and_core_numbers_match_networkx(graphs, backend):
    for name, G in graphs.items():
        S = convert(G, backend=backend)
        ours = backend_interface.core_number(S)
        assert ours == nx.core_number(G) and all(type(v) is int for v in ours.values()), name
        if G.is_directed():
            with pytest.raises(nx.NetworkXNotImplemented):
                backend_interface.triangles(S)
            continue
        ours = backend_interface.triangles(S)
        assert ours == nx.triangles(G) and all(type(v) is int for v in ours.values()), name
        node = list(G)[3]
        assert backend_interface.triangles(S, node) == nx.triangles(G, node)
        assert type(backend_interface.triangles(S, node)) is int
        some = list(G)[:5] + ["absent"]
        assert backend_interface.triangles(S, some) == nx.triangles(G, some)
    looped = nx.path_graph(4)
    looped.add_edge(2, 2)
    with pytest.raises(nx.NetworkXNotImplemented):
        backend_interface.core_number(convert(looped))


def test_louvain_gives_a_partition_as_good_as_networkx(graphs, rng, backend):
    for name, G in graphs.items():
        weight = weight_of(G)
        S = convert(G, weight, backend=backend)
        # One seed of either side spreads by several percent on small graphs: compare means.
        q_ours, q_theirs = [], []
        for seed in rng.integers(2**31, size=4).tolist():
            ours = backend_interface.louvain_communities(S, weight=weight, seed=seed)
            assert type(ours) is list and all(type(c) is set for c in ours)
            assert sorted(map(str, set().union(*ours))) == sorted(map(str, G)) and sum(map(len, ours)) == len(G)
            theirs = nx.community.louvain_communities(G, weight=weight, seed=seed)
            q_ours.append(nx.community.modularity(G, ours, weight=weight))
            q_theirs.append(nx.community.modularity(G, theirs, weight=weight))
        mean_ours, mean_theirs = sum(q_ours) / 4, sum(q_theirs) / 4
        assert mean_ours >= mean_theirs - 0.03 * abs(mean_theirs) - 1e-9, (name, q_ours, q_theirs)


def test_jaccard_matches_networkx(graphs, rng, backend):
    for name, G in graphs.items():
        if G.is_directed():
            continue
        S = convert(G, backend=backend)
        nodes = list(G)
        pairs = [(nodes[a], nodes[b]) for a, b in rng.integers(len(nodes), size=(40, 2)).tolist()]
        result = backend_interface.jaccard_coefficient(S, iter(pairs))
        assert inspect.isgenerator(result)
        ours, theirs = list(result), list(nx.jaccard_coefficient(G, pairs))
        assert [(u, v) for u, v, _ in ours] == [(u, v) for u, v, _ in theirs]
        assert all(math.isclose(p, q) and type(p) is float for (_, _, p), (_, _, q) in zip(ours, theirs)), name
    with pytest.raises(nx.NodeNotFound):
        backend_interface.jaccard_coefficient(convert(nx.path_graph(3)), [(0, "absent")])


# --------------------------------------------------------------------------- the interface


def test_conversion_keeps_labels_weights_and_direction(rng):
    G = _weighted(nx.gnp_random_graph(40, 0.1, seed=int(rng.integers(2**31)), directed=True), rng, "w")
    G = nx.relabel_nodes(G, lambda v: ("node", v))
    S = backend_interface.convert_from_nx(G, edge_attrs={"w": 7}, preserve_graph_attrs=True)
    assert S.__networkx_backend__ == "sparsegpu" and S.is_directed() and S.nodes == list(G)
    assert S.index == {node: i for i, node in enumerate(G)}
    assert S.number_of_edges() == G.number_of_edges()
    dense = S.scipy("w").toarray()
    for u, v, data in G.edges(data=True):
        assert dense[S.index[u], S.index[v]] == data.get("w", 7)
    back = backend_interface.convert_to_nx(S)
    assert nx.utils.edges_equal(back.edges(data="w"), G.edges(data="w", default=7))
    assert backend_interface.convert_to_nx({"a": 1}) == {"a": 1}
    with pytest.raises(NotImplementedError):
        backend_interface.convert_from_nx(nx.MultiGraph([(0, 1)]))


def test_can_run_and_should_run_answer_with_reasons():
    small, big = nx.path_graph(10), nx.gnm_random_graph(600, 1500, seed=1)
    can, should = backend_interface.can_run, backend_interface.should_run
    assert can("pagerank", (small,), {}) is True
    assert can("pagerank", (small,), {"personalization": {0: 1}}) is True
    assert isinstance(can("pagerank", (small,), {"weight": lambda u, v, d: 1}), str)
    assert isinstance(can("pagerank", (nx.MultiGraph(small),), {}), str)
    assert isinstance(can("strongly_connected_components", (small,), {}), str)
    assert isinstance(can("connected_components", (nx.DiGraph(small),), {}), str)
    assert isinstance(can("jaccard_coefficient", (small,), {}), str)
    assert can("jaccard_coefficient", (small, [(0, 1)]), {}) is True
    assert isinstance(can("bfs_edges", (small, 0), {"sort_neighbors": sorted}), str)
    assert can("minimum_spanning_tree", (small,), {}) is True
    assert isinstance(can("minimum_spanning_tree", (nx.DiGraph(small),), {}), str)
    assert "fewer than" in should("betweenness_centrality", (small,), {})
    assert should("betweenness_centrality", (big,), {}) is True
    cpu_answer = should("connected_components", (big,), {})
    assert cpu_answer is True if backend_interface.convert_from_nx(small).backend == "gpu" else "CPU" in cpu_answer


def test_networkx_is_imported_only_by_the_backend():
    """The backend and the benchmarks (which time NetworkX itself, importing it in the functions
    that need it) may import networkx; the core never does."""
    package = ROOT / "sparsegpu"
    for path in package.rglob("*.py"):
        if path.relative_to(package).parts[0] in ("nx", "bench"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not any(n.split(".")[0] == "networkx" for n in names), path


def _run(script, tmp_path, entry_point=True, extra_env=None):
    """Run ``script`` in a fresh interpreter; with ``entry_point``, NetworkX sees the backend."""
    paths = [str(ROOT)]
    if entry_point:
        info = tmp_path / "sparsegpu_nx_entry_points-0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: sparsegpu-nx-entry-points\nVersion: 0\n")
        (info / "entry_points.txt").write_text("[networkx.backends]\nsparsegpu = sparsegpu.nx:backend_interface\n\n"
                                               "[networkx.backend_info]\nsparsegpu = _sparsegpu_nx_info:get_info\n")
        paths.insert(0, str(tmp_path))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "SPARSEGPU_BACKEND": "cpu", **(extra_env or {})}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], env=env, capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_sparsegpu_imports_without_networkx(tmp_path):
    result = _run("""
        import json, sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] == "networkx":
                    raise ImportError("networkx is blocked")
        sys.meta_path.insert(0, Block())
        import numpy as np, sparsegpu, sparsegpu.nx
        from sparsegpu import csgraph
        ranks = csgraph.pagerank(np.array([[0., 1.], [1., 0.]]), backend="cpu")
        print(json.dumps({"ranks": ranks.tolist(), "networkx": "networkx" in sys.modules}))
    """, tmp_path, entry_point=False)
    assert result == {"ranks": [0.5, 0.5], "networkx": False}


def test_dispatch_through_the_entry_point_converts_once(tmp_path):
    result = _run("""
        import json, inspect, warnings
        import networkx as nx
        import sparsegpu.nx.interface as interface
        warnings.simplefilter("ignore")
        conversions = []
        original = interface.from_networkx
        interface.from_networkx = lambda *a, **k: conversions.append(1) or original(*a, **k)
        G = nx.les_miserables_graph()
        out = {}
        out["pagerank"] = nx.pagerank(G, backend="sparsegpu") == nx.pagerank(G) or max(
            abs(a - b) for a, b in zip(nx.pagerank(G, backend="sparsegpu").values(), nx.pagerank(G).values())) < 1e-9
        nx.pagerank(G, backend="sparsegpu")
        out["after_two_calls"] = len(conversions)
        out["generator"] = inspect.isgenerator(nx.connected_components(G, backend="sparsegpu"))
        G.add_edge("Valjean", "new node", weight=2)
        nx.pagerank(G, backend="sparsegpu")
        out["after_a_change"] = len(conversions)
        nx.config.backend_priority.algos = ["sparsegpu"]
        out["fallback"] = len(list(nx.jaccard_coefficient(nx.path_graph(4))))  # can_run says no
        out["installed"] = "sparsegpu" in nx.utils.backends.backend_info
        print(json.dumps(out))
    """, tmp_path)
    assert result == {"pagerank": True, "after_two_calls": 1, "generator": True, "after_a_change": 2,
                      "fallback": 3, "installed": True}


NETWORKX_SUITE = [f"networkx.algorithms.{m}" for m in (
    "link_analysis.tests.test_pagerank", "components.tests.test_connected", "components.tests.test_strongly_connected",
    "traversal.tests.test_bfs", "shortest_paths.tests.test_unweighted", "shortest_paths.tests.test_weighted",
    "tests.test_cluster", "tests.test_core", "centrality.tests.test_betweenness_centrality",
    "community.tests.test_louvain", "tests.test_link_prediction", "centrality.tests.test_katz_centrality",
    "centrality.tests.test_eigenvector_centrality", "shortest_paths.tests.test_generic", "tree.tests.test_mst")]
#: The failures docs/networkx.md lists and explains (NetworkX's exact Louvain sets, SCC order).
KNOWN_FAILURES = ("test_condensation_mapping_and_members", "test_karate_club_partition", "test_undirected_selfloops",
                  "test_directed_partition", "test_none_weight_param", "test_max_level",
                  "(test_louvain and test_multigraph)")


@pytest.mark.parametrize("where", ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)])
def test_networkx_own_suite_passes_with_this_backend(tmp_path, where):
    pytest.importorskip("networkx.algorithms.tests.test_core")  # NetworkX's tests ship with its wheel
    script = f"""
        import json, subprocess, sys
        args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--pyargs", *{NETWORKX_SUITE!r},
                "-k", {" and ".join(f"not {name}" for name in KNOWN_FAILURES)!r}]
        done = subprocess.run(args, capture_output=True, text=True, check=False)
        print(json.dumps({{"rc": done.returncode, "tail": done.stdout[-3000:]}}))
    """
    env = {"NETWORKX_TEST_BACKEND": "sparsegpu", "NETWORKX_FALLBACK_TO_NX": "True", "SPARSEGPU_BACKEND": where}
    result = _run(script, tmp_path, extra_env=env)
    print(result["tail"].strip().splitlines()[-1])  # the counts, for the GPU check's log
    assert result["rc"] == 0, result["tail"]
    passed = re.search(r"(\d+) passed", result["tail"])
    assert passed and int(passed.group(1)) >= 400 and "xfailed" not in result["tail"], result["tail"]


def test_katz_and_eigenvector_centrality_match_networkx(graphs, rng, backend):
    for G in graphs.values():
        weight = weight_of(G)
        S = convert(G, weight, backend=backend)
        # Katz converges for alpha below 1 / spectral radius, which the largest degree bounds.
        alpha = 0.5 / max(1, max(d for _, d in G.degree()))
        weighted_alpha = 0.5 / max(1, max(d for _, d in G.degree(weight=weight)))
        assert_close_dicts(sg_katz(S, alpha=alpha), nx.katz_centrality(G, alpha=alpha), 1e-6)
        assert_close_dicts(sg_katz(S, alpha=weighted_alpha, weight=weight, normalized=False),
                           nx.katz_centrality(G, alpha=weighted_alpha, weight=weight, normalized=False), 1e-6)
        beta = {node: float(rng.uniform(0.5, 2)) for node in G}
        assert_close_dicts(sg_katz(S, alpha=alpha, beta=beta), nx.katz_centrality(G, alpha=alpha, beta=beta), 1e-6)
        if nx.is_strongly_connected(G) if G.is_directed() else nx.is_connected(G):
            ours = backend_interface.eigenvector_centrality(S, max_iter=2000, weight=weight)
            assert_close_dicts(ours, nx.eigenvector_centrality(G, max_iter=2000, weight=weight), 1e-4)
    with pytest.raises(nx.NetworkXError):
        sg_katz(convert(nx.path_graph(3)), beta={0: 1})
    with pytest.raises(nx.NetworkXPointlessConcept):
        backend_interface.eigenvector_centrality(convert(nx.Graph()))
    with pytest.raises(nx.PowerIterationFailedConvergence):
        backend_interface.eigenvector_centrality(convert(nx.karate_club_graph()), max_iter=1)


def sg_katz(S, **kwargs):
    return backend_interface.katz_centrality(S, **kwargs)


def test_shortest_path_length_from_one_source(graphs, rng):
    for name, G in graphs.items():
        weight = weight_of(G)
        S = convert(G, weight)
        source = list(G)[int(rng.integers(len(G)))]
        assert backend_interface.shortest_path_length(S, source) == nx.shortest_path_length(G, source), name
        assert_close_dicts(backend_interface.shortest_path_length(S, source, weight=weight),
                           nx.shortest_path_length(G, source, weight=weight))
    path = nx.path_graph(4)
    assert isinstance(backend_interface.can_run("shortest_path_length", (path,), {}), str)
    assert isinstance(backend_interface.can_run("shortest_path_length", (path, 0, 3), {}), str)
    assert isinstance(backend_interface.can_run("shortest_path_length", (path, 0), {"method": "bellman-ford"}), str)
    assert backend_interface.can_run("shortest_path_length", (path, 0), {}) is True


def test_backend_info_lists_the_dispatched_functions_without_importing_sparsegpu():
    import _sparsegpu_nx_info
    from sparsegpu.nx.interface import FUNCTIONS

    assert set(_sparsegpu_nx_info.FUNCTION_NAMES) == set(FUNCTIONS)
    code = "import sys, _sparsegpu_nx_info; _sparsegpu_nx_info.get_info(); print('sparsegpu' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2]).stdout
    assert out.strip() == "False"


def test_minimum_spanning_tree_keeps_attributes_and_weight(backend):
    G = nx.random_regular_graph(4, 300, seed=3)
    for k, (u, v) in enumerate(G.edges):
        G[u][v]["weight"] = float((u * 7 + v * 13) % 41) + k * 1e-6  # distinct: one minimum forest
        G[u][v]["label"] = f"{u}-{v}"
    G.add_node("lonely", color="red")
    G.graph["name"] = "g"
    T = backend_interface.minimum_spanning_tree(convert(G, "weight", backend=backend))
    want = nx.minimum_spanning_tree(G)
    assert type(T) is nx.Graph and T.graph == {"name": "g"} and T.nodes["lonely"] == {"color": "red"}
    assert sorted(map(sorted, T.edges())) == sorted(map(sorted, want.edges()))
    assert all(T[u][v] == G[u][v] for u, v in T.edges())
    G[0][next(iter(G[0]))]["weight"] = math.nan
    with pytest.raises(ValueError, match="NaN found"):
        backend_interface.minimum_spanning_tree(convert(G, "weight", backend=backend))
    forest = backend_interface.minimum_spanning_tree(convert(G, "weight", backend=backend), ignore_nan=True)
    assert nx.is_forest(forest) and forest.number_of_edges() == want.number_of_edges()

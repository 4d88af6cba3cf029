"""The operations fuzzer's graph cases: the csgraph functions on awkward graphs (0 and 1
vertices, self loops, explicit zeros, duplicates, isolated vertices, int64 indices), checked
against scipy.sparse.csgraph and NetworkX, and bad graphs and arguments, which must raise
ValueError or TypeError naming the argument. Shared helpers and settings are in
tests/fuzz/operations.py.

Run alone: ``SPARSEGPU_FUZZ_EXAMPLES=300 python3 -m pytest tests/fuzz/graphs.py``.
"""

from __future__ import annotations

from typing import Any

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.csgraph as scg
from hypothesis import given
from hypothesis import strategies as st

from sparsegpu import csgraph
from tests.fuzz.operations import (
    BACKEND,
    SETTINGS,
    assert_close,
    canonical,
    expect_error,
    host,
    log,
    matrices,
    pattern,
)

# --------------------------------------------------------------------------- graphs


@st.composite
def graphs(draw: Any, square: bool = True) -> sp.csr_array:
    """Adjacency matrices: 0 to 7 vertices, self loops, explicit zeros (no edge in a sparse
    graph? SciPy counts stored zeros as edges of weight zero), positive weights."""
    n = draw(st.integers(0, 7))
    S = draw(matrices((n, n if square else n + draw(st.integers(1, 2))), np.float64))
    S.data = np.abs(S.data)
    S.data[~np.isfinite(S.data)] = 1.0
    return S


def symmetric(S: sp.csr_array) -> sp.csr_array:
    U = canonical(S)
    U = canonical(U + U.T)
    U.data[:] = 1.0
    return U


@SETTINGS
@given(st.data())
def test_graph_algorithms_match_scipy(data: Any) -> None:
    S = data.draw(graphs())
    n = S.shape[0]
    C = canonical(S)  # SciPy's reading of duplicates differs; sparsegpu sums them (documented)
    log("graph", S.shape, S.indices.dtype, S.indptr.tolist(), S.indices.tolist(), S.data.tolist())
    directed = data.draw(st.booleans())
    ncomp, labels = csgraph.connected_components(S, directed=directed, backend=BACKEND)
    want_n, want_labels = scg.connected_components(C, directed=directed)
    assert ncomp == want_n, "connected_components: count"
    labels = np.asarray(host(labels))
    assert all(len(set(labels[want_labels == c])) == 1 for c in range(want_n)), "connected_components: partition"
    assert len(set(labels.tolist())) == want_n, "connected_components: labels"
    D = csgraph.shortest_path(S, directed=directed, backend=BACKEND)
    assert_close(D, scg.shortest_path(C, directed=directed), "shortest_path", check_dtype=False)
    assert_close(csgraph.dijkstra(S, directed=directed, backend=BACKEND), scg.dijkstra(C, directed=directed),
                 "dijkstra", check_dtype=False)
    assert_close(csgraph.bellman_ford(S, directed=directed, backend=BACKEND),
                 scg.bellman_ford(C, directed=directed), "bellman_ford", check_dtype=False)
    if n:
        start = data.draw(st.integers(0, n - 1))
        order = np.asarray(host(csgraph.breadth_first_order(S, start, directed=directed, return_predecessors=False,
                                                            backend=BACKEND)))
        want_order = scg.breadth_first_order(C, start, directed=directed, return_predecessors=False)
        assert sorted(order.tolist()) == sorted(want_order.tolist()), "breadth_first_order: vertex set"
        hops = scg.shortest_path(C, directed=directed, unweighted=True, indices=start)
        assert np.all(np.diff(hops[order]) >= 0), "breadth_first_order: not in level order"
        dfs = np.asarray(host(csgraph.depth_first_order(S, start, directed=directed, return_predecessors=False,
                                                        backend=BACKEND)))
        assert sorted(dfs.tolist()) == sorted(want_order.tolist()), "depth_first_order: vertex set"
        expect_error(lambda: csgraph.breadth_first_order(S, n, backend=BACKEND), ("i_start", "start"),
                     "BFS start past the end")
    assert_close(host(csgraph.minimum_spanning_tree(S, backend=BACKEND)).sum(),
                 scg.minimum_spanning_tree(C).sum(), "minimum_spanning_tree weight", check_dtype=False)
    assert_close(host(csgraph.laplacian(S, backend=BACKEND)).toarray(), scg.laplacian(C).toarray(), "laplacian",
                 check_dtype=False)
    perm = np.asarray(host(csgraph.reverse_cuthill_mckee(S.tocsr(), backend=BACKEND)))
    assert sorted(perm.tolist()) == list(range(n)), "reverse_cuthill_mckee: not a permutation"
    # analytics, against NetworkX on the same graph
    U = symmetric(S)
    Gu = nx.from_scipy_sparse_array(U)
    Gu.remove_edges_from(nx.selfloop_edges(Gu))
    U_noloop = nx.to_scipy_sparse_array(Gu, nodelist=range(n), format="csr") if n else U
    tri = np.asarray(host(csgraph.triangles(U_noloop, backend=BACKEND)))
    assert tri.tolist() == [nx.triangles(Gu)[v] for v in range(n)], "triangles"
    assert int(csgraph.triangle_count(U_noloop, backend=BACKEND)) == sum(nx.triangles(Gu).values()) // 3
    cores = np.asarray(host(csgraph.core_number(U_noloop, backend=BACKEND)))
    assert cores.tolist() == [nx.core_number(Gu)[v] for v in range(n)], "core_number"
    if n:
        G = nx.from_scipy_sparse_array(canonical(S), create_using=nx.DiGraph)
        pr = np.asarray(host(csgraph.pagerank(canonical(S), tol=1e-10, max_iter=1000, backend=BACKEND)))
        want_pr = nx.pagerank(G, tol=1e-10, max_iter=1000)
        assert np.allclose(pr, [want_pr[v] for v in range(n)], atol=1e-6), "pagerank vs networkx"


@SETTINGS
@given(st.data())
def test_graph_algorithms_refuse_bad_graphs(data: Any) -> None:
    S = data.draw(graphs(square=False))
    log("bad graph", S.shape)
    checks = {
        "connected_components": lambda G: csgraph.connected_components(G, backend=BACKEND),
        "shortest_path": lambda G: csgraph.shortest_path(G, backend=BACKEND),
        "dijkstra": lambda G: csgraph.dijkstra(G, backend=BACKEND),
        "bellman_ford": lambda G: csgraph.bellman_ford(G, backend=BACKEND),
        "breadth_first_order": lambda G: csgraph.breadth_first_order(G, 0, backend=BACKEND),
        "depth_first_order": lambda G: csgraph.depth_first_order(G, 0, backend=BACKEND),
        "minimum_spanning_tree": lambda G: csgraph.minimum_spanning_tree(G, backend=BACKEND),
        "laplacian": lambda G: csgraph.laplacian(G, backend=BACKEND),
        "reverse_cuthill_mckee": lambda G: csgraph.reverse_cuthill_mckee(G, backend=BACKEND),
        "pagerank": lambda G: csgraph.pagerank(G, backend=BACKEND),
        "katz_centrality": lambda G: csgraph.katz_centrality(G, backend=BACKEND),
        "eigenvector_centrality": lambda G: csgraph.eigenvector_centrality(G, backend=BACKEND),
        "betweenness_centrality": lambda G: csgraph.betweenness_centrality(G, backend=BACKEND),
        "triangles": lambda G: csgraph.triangles(G, backend=BACKEND),
        "triangle_count": lambda G: csgraph.triangle_count(G, backend=BACKEND),
        "jaccard": lambda G: csgraph.jaccard(G, backend=BACKEND),
        "core_number": lambda G: csgraph.core_number(G, backend=BACKEND),
    }
    name = data.draw(st.sampled_from(sorted(checks)))
    words = ("csgraph", "graph", "A", "square")
    expect_error(lambda: checks[name](S), words, f"{name} on a {S.shape} graph")
    n = S.shape[0]
    if n and name in ("shortest_path", "dijkstra", "bellman_ford", "pagerank", "minimum_spanning_tree"):  # weighted
        G = sp.csr_array(S[:, :n])
        if G.nnz:
            G.data[data.draw(st.integers(0, G.nnz - 1))] = np.nan
            expect_error(lambda: checks[name](G), ("NaN", "nan", "csgraph", "weight"), f"{name} with a NaN weight")
    if n and name == "dijkstra":
        G = canonical(S[:, :n])  # duplicates sum: one negative entry among them may not make a negative weight
        if G.nnz:
            G.data[0] = -1.0
            expect_error(lambda: checks[name](G), ("negative", "csgraph", "weight"), "dijkstra, negative weight")


@SETTINGS
@given(st.data())
def test_graph_analytics_match_networkx(data: Any) -> None:
    S = data.draw(graphs())
    n = S.shape[0]
    log("analytics", S.shape, S.indptr.tolist(), S.indices.tolist(), S.data.tolist())
    C = canonical(S)
    ncomp, labels = csgraph.connected_components(S, connection="strong", backend=BACKEND)
    want_n, want_labels = scg.connected_components(C, connection="strong")
    labels = np.asarray(host(labels))
    assert ncomp == want_n and all(len(set(labels[want_labels == c])) == 1 for c in range(want_n)), "strong cc"
    if n:
        start = data.draw(st.integers(0, n - 1))
        order, preds = (np.asarray(host(a)) for a in csgraph.breadth_first_order(S, start, backend=BACKEND))
        edges = pattern(C)
        rank = {int(v): i for i, v in enumerate(order)}
        for v in order[1:]:  # each vertex's parent is reached before it, through a stored edge
            p = int(preds[v])
            assert p in rank and rank[p] < rank[int(v)] and edges[p, v], f"BFS parent {p} of {v}"
        dist, pred = (np.asarray(host(a)) for a in csgraph.dijkstra(S, indices=start, return_predecessors=True,
                                                                    backend=BACKEND))
        for v in range(n):  # every predecessor is on a shortest path
            p = int(pred[v])
            if p >= 0:
                assert np.isclose(dist[p] + C[p, v], dist[v]), f"dijkstra predecessor {p} of {v}"
    signed = C.copy()
    signed.data = signed.data - data.draw(st.sampled_from([0.0, 1.0, 2.5]))  # some weights negative
    try:
        want = scg.bellman_ford(signed, directed=True)
    except scg.NegativeCycleError:
        with pytest.raises(scg.NegativeCycleError):
            csgraph.bellman_ford(signed, directed=True, backend=BACKEND)
    else:
        assert_close(csgraph.bellman_ford(signed, directed=True, backend=BACKEND), want, "bellman_ford, negative",
                     check_dtype=False)
        assert_close(csgraph.shortest_path(signed, method="J", backend=BACKEND), scg.johnson(signed),
                     "johnson, negative", check_dtype=False)
    if signed.nnz and (signed.data < 0).any():
        expect_error(lambda: csgraph.dijkstra(signed, backend=BACKEND), ("negative", "csgraph"), "dijkstra negative")
    U = symmetric(S)
    G = nx.from_scipy_sparse_array(U)
    G.remove_edges_from(nx.selfloop_edges(G))
    plain = nx.to_scipy_sparse_array(G, nodelist=range(n), format="csr") if n else U
    bc = np.asarray(host(csgraph.betweenness_centrality(plain, directed=False, backend=BACKEND)))
    want_bc = nx.betweenness_centrality(G)
    assert np.allclose(bc, [want_bc[v] for v in range(n)], atol=1e-12), "betweenness vs networkx"
    if n:
        u, v, j = (np.asarray(host(a)) for a in csgraph.jaccard(plain, backend=BACKEND))
        want_j = {(a, b): c for a, b, c in nx.jaccard_coefficient(G, list(zip(u.tolist(), v.tolist())))}
        assert np.allclose(j, [want_j[a, b] for a, b in zip(u.tolist(), v.tolist())]), "jaccard vs networkx"
    dense = C.toarray()
    if n:  # [] is a 1-D list
        assert_close(csgraph.laplacian(dense.tolist(), backend=BACKEND), scg.laplacian(dense.copy()),
                     "laplacian(list)")
    expect_error(lambda: csgraph.laplacian(dense != 0, backend=BACKEND), ("csgraph",), "laplacian of bools")
    lap = host(csgraph.laplacian(C, normed=True, backend=BACKEND))
    assert_close(lap.toarray() if sp.issparse(lap) else lap, scg.laplacian(C, normed=True).toarray(),
                 "laplacian(normed)", check_dtype=False)
    if n:  # invalid arguments
        expect_error(lambda: csgraph.breadth_first_order(S, 0.5, backend=BACKEND), ("i_start",), "BFS float start")
        expect_error(lambda: csgraph.shortest_path(S, indices=[n], backend=BACKEND), ("indices",), "indices past end")
        expect_error(lambda: csgraph.pagerank(S, alpha=1.5, backend=BACKEND), ("alpha",), "pagerank alpha")
        expect_error(lambda: csgraph.triangles(plain, nodes=[n], backend=BACKEND), ("nodes",), "triangles nodes")
        expect_error(lambda: csgraph.jaccard(plain, pairs=[(0, n)], backend=BACKEND), ("pairs",), "jaccard pairs")
        expect_error(lambda: csgraph.dijkstra(S, limit=-1, backend=BACKEND), ("limit",), "dijkstra limit")
    expect_error(lambda: csgraph.connected_components(S, connection="x", backend=BACKEND), ("connection",),
                 "connection")
    expect_error(lambda: csgraph.shortest_path(S, directed="no", backend=BACKEND), ("directed",), "directed str")

"""betweenness_centrality: NetworkX's values (exact and sampled with its seeds), reproducible."""

from __future__ import annotations

import random

import numpy as np
import pytest
import scipy.sparse as sp

import sparsegpu
from sparsegpu import datasets
from sparsegpu.csgraph import betweenness as betweenness_module
from sparsegpu.csgraph.betweenness import betweenness_centrality
from tests.conftest import to_numpy
from tests.csgraph.graphs import (
    generated_graphs,
    random_digraph,
    random_weights,
    real_graph,
    real_params,
    with_int64_indices,
)

nx = pytest.importorskip("networkx")

FLAGS = [(normalized, endpoints) for normalized in (True, False) for endpoints in (False, True)]


def networkx_graph(S: sp.sparray, directed: bool, weighted: bool = False):
    """The NetworkX graph on vertices 0..n-1 whose edges are S's stored entries (weights kept)."""
    coo = sp.coo_array(S)
    coo.sum_duplicates()
    G = nx.DiGraph() if directed else nx.Graph()
    G.add_nodes_from(range(S.shape[0]))
    if weighted:
        G.add_weighted_edges_from(zip(coo.row.tolist(), coo.col.tolist(), coo.data.tolist()))
    else:
        G.add_edges_from(zip(coo.row.tolist(), coo.col.tolist()))
    return G


def networkx_betweenness(S: sp.sparray, directed: bool, weighted: bool = False, **kwargs) -> np.ndarray:
    G = networkx_graph(S, directed, weighted)
    values = nx.betweenness_centrality(G, weight="weight" if weighted else None, **kwargs)
    return np.array([values[v] for v in range(S.shape[0])])


def check(S: sp.sparray, directed: bool, weighted: bool = False, rtol: float = 1e-11, **kwargs) -> np.ndarray:
    got = to_numpy(betweenness_centrality(S, directed=directed, weight=True if weighted else None,
                                          backend="cpu", **kwargs))
    expected = networkx_betweenness(S, directed, weighted, **kwargs)
    assert got.dtype == np.float64 and got.shape == (S.shape[0],)
    scale = max(float(np.nanmax(np.abs(expected))) if expected.size else 0.0, 1e-300)
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=rtol * scale, equal_nan=True)
    return got


def symmetric(S: sp.sparray) -> sp.csr_array:
    C = sp.csr_array(S, dtype=np.float64, copy=True)
    C.data[:] = 1.0
    C = (C + C.T).tocsr()
    C.data[:] = 1.0
    return C


def integer_weights(S: sp.csr_array, rng: np.random.Generator, high: int = 4) -> sp.csr_array:
    """S's pattern with integer lengths in [1, high), equal both ways (many ties of path length)."""
    upper = sp.triu(S, k=1, format="csr")
    upper.data = rng.integers(1, high, upper.nnz).astype(np.float64)
    return (upper + upper.T).tocsr()


def test_karate_club_and_les_miserables_equal_networkx():
    for G in (nx.karate_club_graph(), nx.convert_node_labels_to_integers(nx.les_miserables_graph())):
        S = nx.to_scipy_sparse_array(G, nodelist=range(G.number_of_nodes()), weight=None)
        for normalized, endpoints in FLAGS:
            for directed in (False, True):
                check(S, directed, normalized=normalized, endpoints=endpoints)


def test_les_miserables_weighted_equals_networkx():
    G = nx.convert_node_labels_to_integers(nx.les_miserables_graph())
    S = nx.to_scipy_sparse_array(G, nodelist=range(G.number_of_nodes()), weight="weight")
    for normalized, endpoints in FLAGS:
        check(S, directed=False, weighted=True, normalized=normalized, endpoints=endpoints)


@pytest.mark.parametrize("name", real_params(("bio-dmela", "ego-Facebook")))
def test_real_graphs_sampled_equal_networkx(name):
    S = real_graph(name)
    check(S, directed=False, k=50, seed=7, rtol=1e-9)
    check(S, directed=False, k=20, seed=12345, endpoints=True, normalized=False, rtol=1e-9)


@pytest.mark.parametrize("name", real_params(("cit-HepPh",)))
def test_citation_subgraph_directed_equals_networkx(name):
    S = sp.csr_array(real_graph(name)[:2000, :2000])
    check(S, directed=True, rtol=1e-9)
    check(S, directed=True, k=100, seed=3, endpoints=True, normalized=False, rtol=1e-9)


def test_kronecker_scale_10_equals_networkx():
    S = symmetric(generated_graphs()["kron10"])
    check(S, directed=False, rtol=1e-9)


@pytest.mark.parametrize("name", ["grid", "road"])
def test_grids_equal_networkx(name, rng):
    S = symmetric(generated_graphs()[name])
    check(S, directed=False, rtol=1e-9)
    lengths = generated_graphs()[name]  # float lengths: mostly unique paths
    check(lengths, directed=False, weighted=True, k=60, seed=1, endpoints=True, rtol=1e-9)
    check(integer_weights(S, rng), directed=False, weighted=True, k=60, seed=2, rtol=1e-9)  # many ties


def test_random_digraphs_equal_networkx(rng):
    for degree in (0.7, 2.0, 5.0):
        S = random_digraph(rng, n=150, degree=degree)  # self loops, duplicates, explicit zeros, isolated
        for normalized, endpoints in FLAGS:
            for directed in (True, False):
                check(S, directed, normalized=normalized, endpoints=endpoints)


def test_random_weighted_graphs_equal_networkx(rng):
    S = random_digraph(rng, n=120, degree=3.0, self_loops=False, explicit_zeros=False)
    W = integer_weights(symmetric(S), rng)
    for normalized, endpoints in FLAGS:
        check(W, directed=False, weighted=True, normalized=normalized, endpoints=endpoints)
    D = sp.csr_array(S)
    D.data = rng.integers(1, 5, D.nnz).astype(np.float64)  # directed lengths, ties included
    check(D, directed=True, weighted=True)
    check(random_weights(D, rng), directed=True, weighted=True, k=30, seed=2)


@pytest.mark.parametrize("endpoints", [False, True])
@pytest.mark.parametrize("normalized", [False, True])
def test_sampling_matches_networkx_seeds(rng, normalized, endpoints):
    S = symmetric(random_digraph(rng, n=200, degree=2.0))
    for k, seed in ((1, 0), (2, 42), (17, int(rng.integers(1 << 30))), (199, 5)):
        got = check(S, directed=False, k=k, seed=seed, normalized=normalized, endpoints=endpoints)
        sources = random.Random(seed).sample(range(200), k)
        if k == 1 and not endpoints:  # NetworkX's 0/0: the one source has no data
            assert np.isnan(got[sources]).all() and not np.isnan(np.delete(got, sources)).any()


def test_seed_none_and_random_instances_follow_networkx():
    S = symmetric(datasets.kronecker(7, 4, seed=1))
    random.seed(99)
    ours = betweenness_centrality(S, k=20, directed=False, backend="cpu")
    random.seed(99)
    values = nx.betweenness_centrality(networkx_graph(S, False), k=20)
    np.testing.assert_allclose(ours, [values[v] for v in range(S.shape[0])], rtol=1e-12, atol=1e-15)
    mine = betweenness_centrality(S, k=20, seed=random.Random(8), directed=False, backend="cpu")
    assert np.array_equal(mine, betweenness_centrality(S, k=20, seed=8, directed=False, backend="cpu"))
    assert not np.array_equal(mine, betweenness_centrality(S, k=20, seed=9, directed=False, backend="cpu"))


def test_k_equal_to_n_is_exact():
    S = symmetric(datasets.kronecker(7, 4, seed=2))
    n = S.shape[0]
    assert np.array_equal(betweenness_centrality(S, k=n, seed=3, backend="cpu"), betweenness_centrality(S, backend="cpu"))


def test_batches_do_not_change_the_result(monkeypatch):
    S = symmetric(generated_graphs()["kron10"])
    whole = betweenness_centrality(S, directed=False, backend="cpu")
    monkeypatch.setattr(betweenness_module, "_MAX_BATCH", 7)
    np.testing.assert_allclose(betweenness_centrality(S, directed=False, backend="cpu"), whole, rtol=1e-12, atol=1e-15)
    W = integer_weights(S, np.random.default_rng(0))
    weighted = betweenness_centrality(W, k=100, seed=1, weight=True, directed=False, backend="cpu")
    monkeypatch.setattr(betweenness_module, "_MAX_BATCH", 512)
    np.testing.assert_allclose(betweenness_centrality(W, k=100, seed=1, weight=True, directed=False, backend="cpu"),
                               weighted,
                               rtol=1e-12, atol=1e-15)


def test_tiny_graphs_and_isolated_vertices():
    for n in (0, 1, 2, 3):
        for endpoints in (False, True):
            for directed in (False, True):
                S = sp.csr_array((n, n))
                check(S, directed, endpoints=endpoints)
                check(S, directed, endpoints=endpoints, weighted=True)
    check(sp.csr_array(np.array([[2.0]])), directed=True)  # a self loop on one vertex
    path = sp.csr_array(np.array([[0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 0], [0, 0, 0, 0]], dtype=float))
    for normalized, endpoints in FLAGS:
        check(path, directed=True, normalized=normalized, endpoints=endpoints)  # vertex 3 isolated
    assert betweenness_centrality(path, normalized=False, backend="cpu").tolist() == [0.0, 1.0, 0.0, 0.0]


def test_inputs_dense_int64_and_sparsegpu(rng):
    S = symmetric(random_digraph(rng, n=120, degree=3.0))
    expected = betweenness_centrality(S, directed=False, backend="cpu")
    same = [betweenness_centrality(S.toarray(), directed=False, backend="cpu"),
            betweenness_centrality(with_int64_indices(S), directed=False, backend="cpu"),
            betweenness_centrality(sparsegpu.CSR.from_scipy(S, backend="cpu"), directed=False),
            betweenness_centrality(sp.csr_matrix(S), directed=False, backend="cpu")]
    for got in same:
        np.testing.assert_allclose(got, expected, rtol=1e-13, atol=1e-15)


def test_bad_inputs():
    S = symmetric(datasets.kronecker(5, 4, seed=1))
    n = S.shape[0]
    cases = [
        (TypeError, "k must be", {"k": 2.0}),
        (TypeError, "k must be", {"k": True}),
        (ValueError, "k must be", {"k": n + 1}),
        (ValueError, "k must be", {"k": 0}),
        (ValueError, "k must be", {"k": -1}),
        (TypeError, "seed", {"k": 3, "seed": 1.5}),
        (TypeError, "seed", {"k": 3, "seed": True}),
        (TypeError, "weight", {"weight": 3}),
        (TypeError, "normalized", {"normalized": 1}),
        (TypeError, "endpoints", {"endpoints": None}),
        (TypeError, "directed", {"directed": "yes"}),
    ]
    for error, match, kwargs in cases:
        with pytest.raises(error, match=match):
            betweenness_centrality(S, backend="cpu", **kwargs)
    for bad in (0.0, -1.0, np.inf):
        W = S.copy()
        W.data[3] = bad
        with pytest.raises(ValueError, match="positive and finite"):
            betweenness_centrality(W, weight=True, backend="cpu")
        betweenness_centrality(W, backend="cpu")  # unweighted: a stored value is just an edge
    with pytest.raises(ValueError, match="square"):
        betweenness_centrality(sp.csr_array((2, 3)), backend="cpu")
    with pytest.raises(TypeError, match="complex"):
        betweenness_centrality(sp.csr_array(np.array([[0, 1j], [1j, 0]])), backend="cpu")


def test_reruns_are_bit_identical(rng):
    S = random_digraph(rng, n=300, degree=3.0)
    for kwargs in ({}, {"k": 40, "seed": 1, "endpoints": True}, {"weight": True, "directed": False}):
        W = symmetric(S) if kwargs.get("weight") else S
        first = betweenness_centrality(W, backend="cpu", **kwargs)
        assert np.array_equal(first, betweenness_centrality(W, backend="cpu", **kwargs))


@pytest.mark.gpu
@pytest.mark.parametrize("directed", [False, True])
def test_gpu_equals_cpu_and_reruns_bit_identical(directed):
    S = symmetric(datasets.kronecker(11, 8, seed=4))
    S = sp.csr_array(sp.triu(S, format="csr")) if directed else S
    A = sparsegpu.CSR.from_scipy(S, backend="gpu")
    for kwargs in ({}, {"k": 100, "seed": 5, "endpoints": True, "normalized": False}):
        expected = betweenness_centrality(S, directed=directed, backend="cpu", **kwargs)
        got = betweenness_centrality(A, directed=directed, **kwargs)
        assert type(got).__module__.startswith("cupy")
        np.testing.assert_allclose(to_numpy(got), expected, rtol=1e-12, atol=1e-15)
        assert np.array_equal(to_numpy(got), to_numpy(betweenness_centrality(A, directed=directed, **kwargs)))

"""shortest_path, dijkstra, bellman_ford: SciPy's results on the CPU backend (and the right
answer where SciPy's undirected Bellman-Ford is wrong); 1e-12 distances and valid
shortest-path trees on the GPU."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.csgraph as scipy_csgraph

import sparsegpu
from sparsegpu import csgraph
from tests.conftest import to_numpy
from tests.csgraph.graphs import (
    assert_shortest_path_tree,
    available,
    generated_graphs,
    random_digraph,
    random_weights,
    real_graph,
    real_params,
    tiny_graphs,
    with_int64_indices,
)


def assert_same(ours, expected) -> None:
    ours = ours if isinstance(ours, tuple) else (ours,)
    expected = expected if isinstance(expected, tuple) else (expected,)
    assert len(ours) == len(expected)
    for a, b in zip(ours, expected):
        assert a.shape == b.shape and a.dtype == b.dtype
        assert np.array_equal(a, b)


# --------------------------------------------------------------------------- CPU backend


@pytest.mark.parametrize("name", real_params())
def test_dijkstra_equals_scipy_on_real_graphs(rng, name):
    S = real_graph(name, weighted=True, seed=int(rng.integers(1 << 30)))
    sources = rng.integers(0, S.shape[0], 3)
    for directed, unweighted in itertools.product((True, False), (False, True)):
        ours = csgraph.dijkstra(S, directed, sources, True, unweighted, backend="cpu")
        assert_same(ours, scipy_csgraph.dijkstra(S, directed, sources, True, unweighted))


@pytest.mark.parametrize("fmt", ["csr", "coo", "csc"])
def test_dijkstra_argument_combinations_equal_scipy(rng, fmt):
    S = random_digraph(rng, n=150, fmt=fmt)
    sources = rng.integers(0, 150, 4)
    index_forms = [None, int(sources[0]), np.int64(sources[1]), sources.tolist(), sources.reshape(2, 2), -1, []]
    for indices, directed, preds, unweighted, min_only, limit in itertools.product(
            index_forms, (True, False), (True, False), (False, True), (False, True), (np.inf, 0.7)):
        if min_only and (indices is None or np.size(indices) == 0):
            continue
        ours = csgraph.dijkstra(S, directed, indices, preds, unweighted, limit, min_only, backend="cpu")
        expected = scipy_csgraph.dijkstra(sp.csr_array(S), directed, indices, preds, unweighted, limit, min_only)
        assert_same(ours, expected)


@pytest.mark.parametrize("method", ["auto", "D", "BF", "FW", "J"])
def test_shortest_path_methods_equal_scipy(rng, method):
    S = random_digraph(rng, n=90)
    for directed, preds, unweighted, indices in itertools.product(
            (True, False), (True, False), (False, True), (None, [3, 4], 7)):
        if method == "FW" and indices is not None:
            with pytest.raises(ValueError, match="indices"):
                csgraph.shortest_path(S, method, indices=indices, backend="cpu")
            continue
        ours = csgraph.shortest_path(S, method, directed, preds, unweighted, indices=indices, backend="cpu")
        expected = scipy_csgraph.shortest_path(sp.csr_array(S), method, directed, preds, unweighted, indices=indices)
        if method == "BF" and not directed:
            # our undirected Bellman-Ford runs on the symmetrised graph: same distances, any valid tree
            ours, expected = ours[0] if preds else ours, expected[0] if preds else expected
            np.testing.assert_allclose(ours, expected, rtol=1e-12)
            continue
        assert_same(ours, expected)


def test_bellman_ford_with_negative_weights_equals_scipy(rng):
    S = random_digraph(rng, n=120, low=0.1, high=1.0)
    S = sp.csr_array(S)
    # negative edges that form no negative cycle: potentials make them so
    potential = rng.uniform(0, 2, 120)
    coo = S.tocoo()
    rows, cols = coo.row, coo.col
    S = sp.csr_array((coo.data + potential[rows] - potential[cols], (rows, cols)), shape=S.shape)
    assert (S.data < 0).any()
    for indices, preds in itertools.product((None, [0, 9]), (True, False)):
        assert_same(csgraph.bellman_ford(S, True, indices, preds, backend="cpu"),
                    scipy_csgraph.bellman_ford(S, True, indices, preds))
        assert_same(csgraph.shortest_path(S, "J", indices=indices, return_predecessors=preds, backend="cpu"),
                    scipy_csgraph.johnson(S, indices=indices, return_predecessors=preds))


def test_negative_cycles_raise_scipys_error():
    cycle = sp.csr_array(np.array([[0, 1.0, 0], [0, 0, -3.0], [1.0, 0, 0]]))
    assert csgraph.NegativeCycleError is scipy_csgraph.NegativeCycleError
    with pytest.raises(scipy_csgraph.NegativeCycleError, match="Negative cycle"):
        csgraph.bellman_ford(cycle, indices=0, backend="cpu")
    with pytest.raises(scipy_csgraph.NegativeCycleError):
        csgraph.shortest_path(cycle, method="auto", backend="cpu")
    undirected_negative_edge = sp.csr_array(np.array([[0, -1.0], [0, 0]]))
    with pytest.raises(scipy_csgraph.NegativeCycleError):
        csgraph.bellman_ford(undirected_negative_edge, directed=False, indices=0, backend="cpu")
    loop = sp.csr_array(np.array([[-1.0, 1.0], [0, 0]]))
    with pytest.raises(scipy_csgraph.NegativeCycleError):
        csgraph.bellman_ford(loop, indices=0, backend="cpu")


def test_scipy_undirected_bellman_ford_reports_a_false_cycle_ours_is_right():
    """SciPy's undirected Bellman-Ford tests |d(v) - d(u)| > w + 1e-15 on every edge; once
    distances are large, one rounding of d(u) + w breaks it and a graph of positive weights
    "has" a negative cycle. A 3-vertex path shows it, and bcspwr10
    with random positive weights too; SciPy's directed run on the symmetrised graph is right,
    and so is ours."""
    path = sp.csr_array((np.array([1000.1, 0.7]), np.array([1, 2]), np.array([0, 1, 2, 2])), shape=(3, 3))
    with pytest.raises(scipy_csgraph.NegativeCycleError):
        scipy_csgraph.bellman_ford(path, directed=False, indices=0)
    assert scipy_csgraph.bellman_ford(path, directed=True, indices=0).tolist() == [0.0, 1000.1, 1000.1 + 0.7]
    dist, preds = csgraph.bellman_ford(path, directed=False, indices=0, return_predecessors=True, backend="cpu")
    assert dist.tolist() == [0.0, 1000.1, 1000.1 + 0.7] and preds.tolist() == [-9999, 0, 1]
    name = "bcspwr10"
    if name not in available():
        pytest.skip("bcspwr10 not found (set SPARSEGPU_MATRICES)")
    S = real_graph(name)
    S.data = np.random.default_rng(0).uniform(1, 1e6, S.nnz)
    with pytest.raises(scipy_csgraph.NegativeCycleError):
        scipy_csgraph.bellman_ford(S, directed=False, indices=0)
    right = scipy_csgraph.dijkstra(S, directed=False, indices=[0, 17])
    np.testing.assert_allclose(scipy_csgraph.bellman_ford(S.minimum(S.T), directed=True, indices=[0, 17]), right,
                               rtol=1e-12)
    dist, preds = csgraph.bellman_ford(S, directed=False, indices=[0, 17], return_predecessors=True, backend="cpu")
    np.testing.assert_allclose(dist, right, rtol=1e-12)
    assert_shortest_path_tree(S, 17, dist[1], preds[1], directed=False)


def test_bellman_ford_undirected_equals_dijkstra_on_random_graphs(rng):
    for _ in range(5):
        S = random_digraph(rng, n=int(rng.integers(2, 60)), low=1.0, high=1e4)
        dist, preds = csgraph.bellman_ford(S, directed=False, return_predecessors=True, backend="cpu")
        np.testing.assert_allclose(dist, scipy_csgraph.dijkstra(S, directed=False), rtol=1e-12)
        for source in range(min(5, S.shape[0])):
            assert_shortest_path_tree(S, source, dist[source], preds[source], directed=False)


def test_dense_sparsegpu_and_int64_inputs(rng):
    S = random_digraph(rng, n=70, explicit_zeros=False)
    expected = scipy_csgraph.dijkstra(S.toarray(), indices=[1, 2], return_predecessors=True)
    for graph in (S.toarray(), sparsegpu.from_scipy(S, format="ell", backend="cpu"), with_int64_indices(S)):
        assert_same(csgraph.dijkstra(graph, indices=[1, 2], return_predecessors=True, backend="cpu"), expected)


@pytest.mark.parametrize("name", sorted(tiny_graphs()))
def test_tiny_graphs(name):
    S = tiny_graphs()[name]
    for function in ("dijkstra", "bellman_ford", "shortest_path"):
        assert_same(getattr(csgraph, function)(S, backend="cpu"), getattr(scipy_csgraph, function)(S))


# --------------------------------------------------------------------------- GPU


def gpu_graphs(rng):
    cases = {name: real_graph(name, weighted=True, seed=int(rng.integers(1 << 30)))
             for name in available()}
    cases.update(generated_graphs())
    cases["random"] = random_digraph(rng, n=1500)
    cases["random_int64"] = with_int64_indices(random_digraph(rng, n=400))
    return cases


def assert_close(ours, expected) -> None:
    ours = to_numpy(ours)
    assert ours.shape == expected.shape
    finite = np.isfinite(expected)
    assert np.array_equal(finite, np.isfinite(ours))
    np.testing.assert_allclose(ours[finite], expected[finite], rtol=1e-12, atol=0)


@pytest.mark.gpu
def test_gpu_dijkstra_matches_scipy(rng):
    import cupy

    for name, S in gpu_graphs(rng).items():
        A = sparsegpu.from_scipy(S, backend="gpu")
        sources = rng.integers(0, S.shape[0], 2)
        for directed, unweighted in itertools.product((True, False), (False, True)):
            dist, preds = csgraph.dijkstra(A, directed, sources, True, unweighted)
            assert isinstance(dist, cupy.ndarray) and dist.shape == (2, S.shape[0]), name
            expected = scipy_csgraph.dijkstra(S, directed, sources, False, unweighted)
            assert_close(dist, expected)
            weights = S if not unweighted else _unit(S)
            for row, source in enumerate(sources.tolist()):
                try:
                    assert_shortest_path_tree(weights, source, expected[row], preds[row].get(), directed)
                except AssertionError as error:  # name the case: the graphs come from the seed
                    raise AssertionError(f"{name}, directed={directed}, unweighted={unweighted}, "
                                         f"source {source}: {error}") from error
        host = csgraph.dijkstra(S, indices=sources, backend="gpu")
        assert isinstance(host, np.ndarray)
        assert_close(host, scipy_csgraph.dijkstra(S, indices=sources))


def _unit(S):
    U = sp.csr_array(S, copy=True)
    U.data[:] = 1.0
    return U


@pytest.mark.gpu
def test_gpu_dijkstra_limit_min_only_and_shapes(rng):
    S = random_digraph(rng, n=800)
    A = sparsegpu.from_scipy(S, backend="gpu")
    for limit in (np.inf, 0.5):
        assert_close(csgraph.dijkstra(A, indices=3, limit=limit), scipy_csgraph.dijkstra(S, indices=3, limit=limit))
    sources = [4, 9, 200]
    for unweighted in (False, True):
        dist, preds, nearest = csgraph.dijkstra(A, indices=sources, return_predecessors=True, min_only=True,
                                                unweighted=unweighted)
        expected = scipy_csgraph.dijkstra(S, indices=sources, min_only=True, unweighted=unweighted)
        assert_close(dist, expected)
        nearest, preds = nearest.get(), preds.get()
        reached = np.flatnonzero(np.isfinite(expected))
        assert (nearest[np.isinf(expected)] == -9999).all() and (preds[sources] == -9999).all()
        per_source = scipy_csgraph.dijkstra(S, indices=sources, unweighted=unweighted)
        rows = [sources.index(s) for s in nearest[reached].tolist()]
        np.testing.assert_allclose(per_source[rows, reached], expected[reached], rtol=1e-12)
    assert csgraph.dijkstra(A, indices=np.array([[1], [2]])).shape == (2, 1, 800)


@pytest.mark.gpu
def test_gpu_bellman_ford_and_shortest_path_methods(rng):
    S = random_digraph(rng, n=600, low=1.0, high=1e4)
    A = sparsegpu.from_scipy(S, backend="gpu")
    for method, directed in itertools.product(("auto", "D", "BF", "FW", "J"), (True, False)):
        indices = [0, 5]
        expected = scipy_csgraph.dijkstra(S, directed, indices)
        if method == "FW":  # every pair, as SciPy: indices are refused
            with pytest.raises(ValueError, match="indices"):
                csgraph.shortest_path(A, method, directed, indices=indices)
            assert_close(csgraph.shortest_path(A, method, directed)[indices], expected)
            continue
        assert_close(csgraph.shortest_path(A, method, directed, indices=indices), expected)
    name = "bcspwr10"
    if name in available():
        W = real_graph(name)
        W.data = np.random.default_rng(0).uniform(1, 1e6, W.nnz)
        dist = csgraph.bellman_ford(sparsegpu.from_scipy(W, backend="gpu"), directed=False, indices=0)
        assert_close(dist, scipy_csgraph.dijkstra(W, directed=False, indices=0))
    cycle = sparsegpu.from_scipy(sp.csr_array(np.array([[0, 1.0, 0], [0, 0, -3.0], [1.0, 0, 0]])), backend="gpu")
    with pytest.raises(scipy_csgraph.NegativeCycleError):
        csgraph.bellman_ford(cycle, indices=0)


@pytest.mark.gpu
def test_gpu_paths_are_deterministic(rng):
    S = random_digraph(rng, n=2000, degree=5)
    A = sparsegpu.from_scipy(S, backend="gpu")
    first = [a.get() for a in csgraph.dijkstra(A, indices=[0, 1], return_predecessors=True)]
    again = [a.get() for a in csgraph.dijkstra(A, indices=[0, 1], return_predecessors=True)]
    assert all(np.array_equal(a, b) for a, b in zip(first, again))


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(tiny_graphs()))
def test_gpu_tiny_graphs(name):
    S = tiny_graphs()[name]
    A = sparsegpu.from_scipy(S, backend="gpu")
    for function in ("dijkstra", "bellman_ford", "shortest_path"):
        assert_close(getattr(csgraph, function)(A), getattr(scipy_csgraph, function)(S))


def test_random_weights_helper_is_symmetric_for_symmetric_patterns(rng):
    G = generated_graphs()["grid"]
    W = random_weights(G, rng)
    assert (W != W.T).nnz == 0 and W.nnz == G.nnz

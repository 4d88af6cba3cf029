"""The GPU path's glue, run on the CPU: the device functions replaced by SciPy-based stand-ins
that keep the contract of their docstrings (levels and smallest-index parents, components by
smallest vertex, forest edges with row < col, ...), and the backend's array module by NumPy.
What runs is the public functions' GPU branch (orientation, transposes, source loops, stacking,
limits, predecessor casts, tree building), checked against SciPy; the kernels themselves are
tested by their own modules on a GPU."""

from __future__ import annotations

import importlib
import itertools
import sys

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.csgraph as scipy_csgraph

import sparsegpu
from sparsegpu import csgraph
from sparsegpu.csgraph import (
    _device_bfs,
    _device_components,
    _device_mst,
    _device_paths,
    _device_rcm,
    _graph,
)
from sparsegpu.csgraph.components import number_by_smallest_vertex
from tests.conftest import GPU
from tests.csgraph.graphs import (
    assert_bfs_tree,
    assert_numbered_by_smallest_vertex,
    assert_same_partition,
    assert_shortest_path_tree,
    bandwidth,
    random_digraph,
    tiny_graphs,
    with_int64_indices,
)

# the module, which the package's ``laplacian`` function shadows as an attribute
laplacian_module = importlib.import_module("sparsegpu.csgraph.laplacian")


def _csr(indptr, indices, weights=None):
    n = indptr.size - 1
    data = np.ones(indices.size) if weights is None else weights
    return sp.csr_array((data, indices, indptr), shape=(n, n))


def fake_bfs(indptr, indices, source, *, in_indptr=None, in_indices=None, predecessors=True):
    n = indptr.size - 1
    hops = scipy_csgraph.shortest_path(_csr(indptr, indices), unweighted=True, indices=source)
    levels = np.where(np.isfinite(hops), hops, -1).astype(np.int32)
    if not predecessors:
        return levels, None
    reverse = _csr(indptr, indices).T.tocsr() if in_indptr is None else _csr(in_indptr, in_indices)
    preds = np.full(n, -9999, dtype=indptr.dtype)
    for v in np.flatnonzero(levels > 0).tolist():
        sources = reverse.indices[reverse.indptr[v]:reverse.indptr[v + 1]]
        preds[v] = sources[levels[sources] == levels[v] - 1].min()
    return levels, preds


def fake_bfs_order(levels):
    reached = np.flatnonzero(levels >= 0)
    return reached[np.lexsort((reached, levels[reached]))].astype(np.int32)


def fake_delta_stepping(indptr, indices, weights, sources, *, limit=np.inf, predecessors=True, nearest_source=False):
    dist, preds, nearest = scipy_csgraph.dijkstra(_csr(indptr, indices, weights), indices=np.asarray(sources),
                                                  limit=limit, min_only=True, return_predecessors=True)
    return dist, preds.astype(indptr.dtype) if predecessors else None, nearest if nearest_source else None


def fake_bellman_ford(indptr, indices, weights, source, *, predecessors=True):
    dist, preds = scipy_csgraph.bellman_ford(_csr(indptr, indices, weights), indices=source, return_predecessors=True)
    return dist, preds.astype(indptr.dtype) if predecessors else None


def fake_weak(indptr, indices, *, symmetric=False):
    if symmetric:
        assert (_csr(indptr, indices) != _csr(indptr, indices).T).nnz == 0, "symmetric=True on an asymmetric graph"
    count, labels = scipy_csgraph.connected_components(_csr(indptr, indices), connection="weak")
    return count, labels.astype(np.int32)


def fake_strong(indptr, indices, in_indptr, in_indices):
    assert (_csr(in_indptr, in_indices) != _csr(indptr, indices).T).nnz == 0, "in-edges are not the transpose"
    count, labels = scipy_csgraph.connected_components(_csr(indptr, indices), connection="strong")
    return count, number_by_smallest_vertex(labels)


def fake_forest(indptr, indices, weights):
    G = _csr(indptr, indices, weights)
    assert (G != G.T).nnz == 0, "the forest's input must be symmetric"
    tree = scipy_csgraph.minimum_spanning_tree(G).tocoo()
    rows, cols = np.minimum(tree.row, tree.col), np.maximum(tree.row, tree.col)
    return rows, cols, tree.data


def fake_rcm(indptr, indices):
    G = _csr(indptr, indices)
    assert (G != G.T).nnz == 0, "RCM's input must be structurally symmetric"
    return scipy_csgraph.reverse_cuthill_mckee(G, symmetric_mode=True).astype(np.int32)


@pytest.fixture
def fake_device(monkeypatch):
    """backend="gpu" runs the GPU branch with NumPy arrays and the stand-ins above."""
    monkeypatch.setattr(_graph, "array_module", lambda backend: np)
    monkeypatch.setattr(_graph, "to_backend", lambda a, backend: np.asarray(a))
    monkeypatch.setattr(_graph, "resolve_backend", lambda backend: backend or "cpu")
    for module, name, fake in [
        (_device_bfs, "bfs", fake_bfs), (_device_bfs, "bfs_order", fake_bfs_order),
        (_device_paths, "delta_stepping", fake_delta_stepping), (_device_paths, "bellman_ford", fake_bellman_ford),
        (_device_components, "weak_components", fake_weak), (_device_components, "strong_components", fake_strong),
        (_device_mst, "minimum_spanning_forest", fake_forest), (_device_rcm, "reverse_cuthill_mckee", fake_rcm),
    ]:
        monkeypatch.setattr(module, name, fake)


def graphs(rng):
    cases = dict(tiny_graphs())
    cases["random"] = random_digraph(rng, n=150, degree=2.0)
    cases["random_int64"] = with_int64_indices(random_digraph(rng, n=60))
    cases["dense"] = random_digraph(rng, n=40, explicit_zeros=False).toarray()
    return cases


def test_bfs_glue(fake_device, rng):
    for name, S in graphs(rng).items():
        n = S.shape[0]
        for source, directed in itertools.product(range(min(n, 3)), (True, False)):
            order, preds = csgraph.breadth_first_order(S, source, directed, backend="gpu")
            assert order.dtype == np.int32 and preds.dtype == np.int32, name
            assert_bfs_tree(sp.csr_array(S), source, order, preds, directed)
            assert np.array_equal(csgraph.breadth_first_order(S, source, directed, False, backend="gpu"), order)
            tree = csgraph.breadth_first_tree(S, source, directed, backend="gpu")
            assert isinstance(tree, sp.csr_array)
            rows, cols = tree.tocoo().row, tree.tocoo().col
            assert tree.nnz == order.size - 1 and np.array_equal(preds[cols], rows)
            expected = scipy_csgraph.breadth_first_tree(S, source, directed)
            if directed:  # the same edges where the parents agree
                same = preds == scipy_csgraph.breadth_first_order(S, source, directed)[1]
                agree = same[cols]
                r, c = rows[agree], cols[agree]
                assert np.array_equal(tree.toarray()[r, c], sp.csr_array(expected).toarray()[r, c])


def test_paths_glue(fake_device, rng):
    for name, S in graphs(rng).items():
        n = S.shape[0]
        sources = [s for s in (0, n - 1) if n] or None
        for directed, unweighted, preds in itertools.product((True, False), (False, True), (True, False)):
            for function in ("dijkstra", "bellman_ford", "shortest_path"):
                ours = getattr(csgraph, function)(S, directed=directed, indices=sources, return_predecessors=preds,
                                                  unweighted=unweighted, backend="gpu")
                expected = scipy_csgraph.dijkstra(S, directed, sources, False, unweighted)
                dist = ours[0] if preds else ours
                assert dist.shape == expected.shape and dist.dtype == np.float64, (name, function)
                np.testing.assert_allclose(dist, expected, rtol=1e-12)
                if preds and n:
                    assert ours[1].dtype == np.int32
                    weights = sp.csr_array(S, copy=True)
                    if unweighted:
                        weights.data[:] = 1.0
                    for row, source in enumerate(sources or range(n)):
                        assert_shortest_path_tree(weights, source, dist[row], ours[1][row], directed)
        if n > 1:
            for limit, unweighted in itertools.product((np.inf, 0.6, 2.0), (False, True)):
                ours = csgraph.dijkstra(S, indices=[0, 1], limit=limit, unweighted=unweighted, backend="gpu")
                np.testing.assert_allclose(ours, scipy_csgraph.dijkstra(S, indices=[0, 1], limit=limit,
                                                                        unweighted=unweighted), rtol=1e-12)
            dist, preds, nearest = csgraph.dijkstra(S, indices=[0, 1], min_only=True, return_predecessors=True,
                                                    backend="gpu")
            expected = scipy_csgraph.dijkstra(S, indices=[0, 1], min_only=True, return_predecessors=True)
            np.testing.assert_allclose(dist, expected[0], rtol=1e-12)
            assert preds.dtype == nearest.dtype == np.int32
            assert csgraph.dijkstra(S, indices=[[0], [1]], backend="gpu").shape == (2, 1, n)


def test_negative_weights_on_the_gpu_path(fake_device, rng):
    S = sp.csr_array(np.array([[0, 4.0, 1.0], [0, 0, 0], [0, -2.0, 0]]))
    expected = scipy_csgraph.bellman_ford(S)
    np.testing.assert_array_equal(csgraph.shortest_path(S, backend="gpu"), expected)  # auto picks Bellman-Ford
    np.testing.assert_array_equal(csgraph.shortest_path(S, method="J", backend="gpu"), scipy_csgraph.johnson(S))
    with pytest.raises(ValueError, match="negative"):
        csgraph.dijkstra(S, backend="gpu")


def test_components_mst_rcm_glue(fake_device, rng):
    for name, S in graphs(rng).items():
        for directed, connection in itertools.product((True, False), ("weak", "strong")):
            count, labels = csgraph.connected_components(S, directed, connection, backend="gpu")
            expected = scipy_csgraph.connected_components(S, directed, connection)
            assert count == expected[0] and labels.dtype == np.int32, name
            assert_same_partition(labels, expected[1])
            assert_numbered_by_smallest_vertex(labels)
        tree = csgraph.minimum_spanning_tree(S, backend="gpu")
        assert isinstance(tree, sp.csr_array)
        assert np.isclose(tree.sum(), scipy_csgraph.minimum_spanning_tree(S).sum(), rtol=1e-12, atol=0)
        matrix_tree = csgraph.minimum_spanning_tree(sp.csr_matrix(S), backend="gpu")
        assert isinstance(matrix_tree, sp.csr_matrix)
        for symmetric_mode in (False, True):
            graph = S if not symmetric_mode else (abs(sp.csr_array(S)) + abs(sp.csr_array(S).T)).tocsr()
            perm = csgraph.reverse_cuthill_mckee(graph, symmetric_mode, backend="gpu")
            assert np.array_equal(np.sort(perm), np.arange(S.shape[0]))
            if S.shape[0]:
                expected = scipy_csgraph.reverse_cuthill_mckee(sp.csr_array(graph), symmetric_mode)
                assert bandwidth(sp.csr_array(S), perm) <= bandwidth(sp.csr_array(S), expected)


@pytest.mark.skipif(GPU, reason="with a GPU the device Laplacian itself runs (test_gpu_laplacian_equals_scipy)")
@pytest.mark.parametrize("normed, use_out_degree, symmetrized", list(itertools.product((False, True), repeat=3)))
def test_device_laplacian_glue(monkeypatch, rng, normed, use_out_degree, symmetrized):
    """The device Laplacian's array code, run with NumPy in CuPy's place on a CPU matrix."""
    monkeypatch.setitem(sys.modules, "cupy", np)
    for n in (0, 1, 80):
        S = sp.csr_array(random_digraph(rng, n=n)) if n > 1 else sp.csr_array(np.full((n, n), 2.0))
        A = sparsegpu.from_scipy(S, backend="cpu")
        lap, diag = laplacian_module._device_laplacian(A, normed, use_out_degree, symmetrized, np.dtype(np.float64))
        expected, expected_diag = scipy_csgraph.laplacian(S, normed, True, use_out_degree, symmetrized=symmetrized)
        assert isinstance(lap, sparsegpu.CSR) and lap.nnz >= n
        np.testing.assert_allclose(lap.to_scipy().toarray(), expected.toarray(), rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(diag, expected_diag, rtol=1e-12, atol=1e-14)
        x = rng.standard_normal((n, 2))
        block = laplacian_module._shaped(lap, "function")(x)
        np.testing.assert_allclose(block, expected @ x, rtol=1e-11, atol=1e-12)

"""breadth_first_* and depth_first_*: SciPy's results on the CPU backend, valid BFS trees with
SciPy's levels on the GPU."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.csgraph as scipy_csgraph

import sparsegpu
from sparsegpu import csgraph
from tests.conftest import to_numpy
from tests.csgraph.graphs import (
    assert_bfs_tree,
    available,
    bfs_levels,
    generated_graphs,
    random_digraph,
    real_graph,
    real_params,
    tiny_graphs,
    with_int64_indices,
)

ORDERS = ("breadth_first_order", "depth_first_order")
TREES = ("breadth_first_tree", "depth_first_tree")


def assert_same_tree(tree, expected) -> None:
    assert type(tree) is type(expected)
    assert tree.shape == expected.shape
    # SciPy's undirected trees hold inf for an edge stored as 0 both ways: compare as arrays
    assert np.array_equal(sp.csr_array(tree).toarray(), sp.csr_array(expected).toarray(), equal_nan=True)


# --------------------------------------------------------------------------- CPU backend


@pytest.mark.parametrize("name", real_params())
@pytest.mark.parametrize("function", ORDERS)
def test_orders_equal_scipy_on_real_graphs(rng, name, function):
    S = real_graph(name)
    source = int(rng.integers(S.shape[0]))
    for directed in (True, False):
        order, preds = getattr(csgraph, function)(S, source, directed, backend="cpu")
        expected_order, expected_preds = getattr(scipy_csgraph, function)(S, source, directed)
        assert np.array_equal(order, expected_order) and np.array_equal(preds, expected_preds)
        assert order.dtype == expected_order.dtype and preds.dtype == expected_preds.dtype


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo", "lil"])
@pytest.mark.parametrize("function", ORDERS + TREES)
def test_traversals_equal_scipy_on_random_digraphs(rng, fmt, function):
    S = random_digraph(rng, n=300, degree=2.0, fmt=fmt)
    for source in rng.integers(0, 300, 3).tolist():
        for directed in (True, False):
            ours = getattr(csgraph, function)(S, source, directed, backend="cpu")
            # SciPy's undirected traversal of a CSC input visits neighbours in another order;
            # the CPU backend gives SciPy's answer for the CSR form
            expected = getattr(scipy_csgraph, function)(sp.csr_array(S), source, directed)
            if function in TREES:
                assert_same_tree(ours, expected)
            else:
                assert all(np.array_equal(a, b) for a, b in zip(ours, expected))


@pytest.mark.parametrize("function", ORDERS)
def test_orders_without_predecessors(rng, function):
    S = random_digraph(rng, n=100)
    order = getattr(csgraph, function)(S, 3, return_predecessors=False, backend="cpu")
    assert isinstance(order, np.ndarray)
    assert np.array_equal(order, getattr(scipy_csgraph, function)(S, 3, return_predecessors=False))


@pytest.mark.parametrize("function", ORDERS + TREES)
def test_dense_input_and_sparsegpu_cpu_matrices(rng, function):
    S = random_digraph(rng, n=80, explicit_zeros=False)
    dense = S.toarray()
    expected = getattr(scipy_csgraph, function)(dense, 1)
    for graph in (dense, sparsegpu.from_scipy(S, format="sell", backend="cpu"), with_int64_indices(S)):
        ours = getattr(csgraph, function)(graph, 1, backend="cpu")
        if function in TREES:
            assert abs(sp.csr_array(ours) - sp.csr_array(expected)).max() == 0
        else:
            assert all(np.array_equal(a, b) for a, b in zip(ours, expected))


@pytest.mark.parametrize("name", sorted(generated_graphs()))
def test_bfs_on_generated_graphs_is_a_valid_tree(name):
    S = generated_graphs()[name]
    order, preds = csgraph.breadth_first_order(S, 0, backend="cpu")
    assert_bfs_tree(S, 0, order, preds, directed=True)


@pytest.mark.parametrize("name", sorted(tiny_graphs()))
def test_tiny_graphs(name):
    S = tiny_graphs()[name]
    if S.shape[0] == 0:
        with pytest.raises(ValueError, match="i_start"):
            csgraph.breadth_first_order(S, 0, backend="cpu")
        return
    for function in ORDERS:
        order, preds = getattr(csgraph, function)(S, 0, backend="cpu")
        assert order.tolist() == [0] and preds[0] == -9999
    assert csgraph.breadth_first_tree(S, 0, backend="cpu").nnz == 0


# --------------------------------------------------------------------------- GPU


def gpu_inputs(S):
    """The same graph as a GPU CSR, a GPU COO, and scipy input run with backend="gpu"."""
    return [(sparsegpu.from_scipy(S, format="csr", backend="gpu"), None),
            (sparsegpu.from_scipy(S, format="coo", backend="gpu"), None),
            (S, "gpu")]


def gpu_cases(rng):
    cases = {name: real_graph(name) for name in available()}
    cases.update(generated_graphs())
    cases["random"] = random_digraph(rng, n=2000, degree=3.0)
    cases["random_int64"] = with_int64_indices(random_digraph(rng, n=500))
    return cases


@pytest.mark.gpu
def test_gpu_bfs_levels_equal_scipy_and_tree_is_valid(rng):
    import cupy

    for name, S in gpu_cases(rng).items():
        source = int(rng.integers(S.shape[0]))
        for graph, backend in gpu_inputs(S):
            for directed in (True, False):
                order, preds = csgraph.breadth_first_order(graph, source, directed, backend=backend)
                expected_type = cupy.ndarray if backend is None else np.ndarray
                assert isinstance(order, expected_type) and isinstance(preds, expected_type), name
                order, preds = to_numpy(order), to_numpy(preds)
                assert_bfs_tree(S, source, order, preds, directed)
                levels = bfs_levels(S, source, directed)
                # by (level, vertex): the GPU's order, documented
                assert np.array_equal(order, order[np.lexsort((order, levels[order]))]), name
                # the smallest-index parent on the previous level
                # the pattern alone: a sum of weights would drop an explicit zero, an edge
                pattern = sp.csr_array(S, copy=True)
                pattern.data[:] = 1.0
                in_edges = pattern.T.tocsr() if directed else (pattern + pattern.T).tocsr()
                for v in order[1:][:200].tolist():
                    candidates = in_edges.indices[in_edges.indptr[v]:in_edges.indptr[v + 1]]
                    candidates = candidates[levels[candidates] == levels[v] - 1]
                    assert preds[v] == candidates.min(), (name, v)


@pytest.mark.gpu
def test_gpu_bfs_is_deterministic_and_trees_come_back_on_the_device(rng):
    S = random_digraph(rng, n=3000, degree=4.0)
    A = sparsegpu.from_scipy(S, backend="gpu")
    first = [to_numpy(a) for a in csgraph.breadth_first_order(A, 7)]
    again = [to_numpy(a) for a in csgraph.breadth_first_order(A, 7)]
    assert all(np.array_equal(a, b) for a, b in zip(first, again))
    for directed in (True, False):
        tree = csgraph.breadth_first_tree(A, 7, directed)
        assert isinstance(tree, sparsegpu.CSR) and tree.backend == "gpu"
        host_tree = tree.to_scipy()
        order, preds = (to_numpy(a) for a in csgraph.breadth_first_order(A, 7, directed))
        assert host_tree.nnz <= order.size - 1
        rows, cols = host_tree.nonzero()
        assert np.array_equal(preds[cols], rows)
        host = csgraph.breadth_first_tree(S, 7, directed, backend="gpu")
        assert isinstance(host, sp.csr_array) and abs(host - host_tree).max() == 0


@pytest.mark.gpu
def test_gpu_depth_first_runs_on_the_host_and_returns_to_the_device(rng):
    import cupy

    S = random_digraph(rng, n=500)
    A = sparsegpu.from_scipy(S, backend="gpu")
    order, preds = csgraph.depth_first_order(A, 2)
    assert isinstance(order, cupy.ndarray)
    expected = scipy_csgraph.depth_first_order(S, 2)
    assert np.array_equal(order.get(), expected[0]) and np.array_equal(preds.get(), expected[1])
    tree = csgraph.depth_first_tree(A, 2)
    assert isinstance(tree, sparsegpu.CSR) and tree.backend == "gpu"
    assert abs(tree.to_scipy() - scipy_csgraph.depth_first_tree(S, 2)).max() == 0


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(tiny_graphs()))
def test_gpu_tiny_graphs(name):
    S = tiny_graphs()[name]
    A = sparsegpu.from_scipy(S, backend="gpu")
    if S.shape[0] == 0:
        with pytest.raises(ValueError, match="i_start"):
            csgraph.breadth_first_order(A, 0)
        return
    order, preds = csgraph.breadth_first_order(A, 0)
    assert order.get().tolist() == [0] and int(preds[0]) == -9999

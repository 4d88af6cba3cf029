"""minimum_spanning_tree and reverse_cuthill_mckee: SciPy's results on the CPU backend; equal
total weight, and valid permutations of no larger bandwidth, on the GPU."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.csgraph as scipy_csgraph

import sparsegpu
from sparsegpu import csgraph
from tests.csgraph.graphs import (
    assert_permutation,
    available,
    bandwidth,
    generated_graphs,
    random_digraph,
    real_graph,
    real_params,
    tiny_graphs,
    with_int64_indices,
)


def assert_same_sparse(ours, expected) -> None:
    assert type(ours) is type(expected)
    assert ours.shape == expected.shape and ours.nnz == expected.nnz
    assert abs(ours - expected).max() == 0 if expected.nnz else True


@pytest.mark.parametrize("name", real_params())
def test_mst_equals_scipy_on_real_graphs(rng, name):
    S = real_graph(name, weighted=True, seed=int(rng.integers(1 << 30)))
    assert_same_sparse(csgraph.minimum_spanning_tree(S, backend="cpu"), scipy_csgraph.minimum_spanning_tree(S))


@pytest.mark.parametrize("fmt", ["csr", "coo", "csc"])
def test_mst_equals_scipy_on_random_graphs(rng, fmt):
    S = random_digraph(rng, n=300, degree=2.0, fmt=fmt, low=-1.0, high=1.0)
    expected = scipy_csgraph.minimum_spanning_tree(sp.csr_array(S))
    assert_same_sparse(csgraph.minimum_spanning_tree(S, backend="cpu"), expected)
    assert_same_sparse(csgraph.minimum_spanning_tree(sp.csr_matrix(S), backend="cpu"),
                       scipy_csgraph.minimum_spanning_tree(sp.csr_matrix(S)))
    dense = sp.csr_array(S).toarray()
    ours = csgraph.minimum_spanning_tree(dense, backend="cpu")
    assert np.isclose(ours.sum(), scipy_csgraph.minimum_spanning_tree(dense).sum(), rtol=1e-12)


def test_mst_keeps_zero_weight_edges_out_of_the_output_as_scipy():
    # the zero edge 0-1 is in the tree (the tree then needs only 0-2), but not stored
    Z = sp.csr_array((np.array([0.0, 1.0, 2.0]), np.array([1, 2, 2]), np.array([0, 2, 3, 3])), shape=(3, 3))
    ours = csgraph.minimum_spanning_tree(Z, backend="cpu")
    assert ours.nnz == 1 and ours[0, 2] == 1.0
    assert_same_sparse(ours, scipy_csgraph.minimum_spanning_tree(Z))


def test_mst_refuses_nan_weights():
    S = sp.csr_array((np.array([np.nan]), np.array([1]), np.array([0, 1, 1])), shape=(2, 2))
    with pytest.raises(ValueError, match="NaN"):
        csgraph.minimum_spanning_tree(S, backend="cpu")


@pytest.mark.parametrize("name", real_params())
def test_rcm_equals_scipy_on_real_graphs(name):
    S = real_graph(name)
    for symmetric_mode in (False, True):
        ours = csgraph.reverse_cuthill_mckee(S, symmetric_mode, backend="cpu")
        assert np.array_equal(ours, scipy_csgraph.reverse_cuthill_mckee(S, symmetric_mode))


def test_rcm_on_random_graphs_and_other_formats(rng):
    S = random_digraph(rng, n=250, degree=2.0)
    expected = scipy_csgraph.reverse_cuthill_mckee(sp.csr_array(S))
    for graph in (S, S.tocsc(), sp.csr_matrix(S), with_int64_indices(S), sparsegpu.from_scipy(S, backend="cpu")):
        assert np.array_equal(csgraph.reverse_cuthill_mckee(graph, backend="cpu"), expected)
    assert_permutation(csgraph.reverse_cuthill_mckee(S.toarray(), backend="cpu"), 250)


@pytest.mark.parametrize("name", sorted(tiny_graphs()))
def test_tiny_graphs(name):
    S = tiny_graphs()[name]
    n = S.shape[0]
    assert csgraph.minimum_spanning_tree(S, backend="cpu").nnz == 0
    assert_permutation(csgraph.reverse_cuthill_mckee(S, backend="cpu"), n)


# --------------------------------------------------------------------------- GPU


def gpu_cases(rng, weighted):
    cases = {name: real_graph(name, weighted=weighted, seed=int(rng.integers(1 << 30)))
             for name in available()}
    cases.update(generated_graphs())
    cases["random"] = random_digraph(rng, n=3000, degree=2.0)
    cases["random_ties"] = random_digraph(rng, n=1000, degree=3.0, low=1, high=3)
    cases["random_ties"].data = np.floor(cases["random_ties"].data)
    cases["random_int64"] = with_int64_indices(random_digraph(rng, n=500))
    cases.update(tiny_graphs())
    return cases


@pytest.mark.gpu
def test_gpu_mst_has_scipys_total_weight(rng):
    for name, S in gpu_cases(rng, weighted=True).items():
        A = sparsegpu.from_scipy(S, backend="gpu")
        tree = csgraph.minimum_spanning_tree(A)
        assert isinstance(tree, sparsegpu.CSR) and tree.backend == "gpu", name
        host_tree = tree.to_scipy()
        expected = scipy_csgraph.minimum_spanning_tree(S)
        assert np.isclose(host_tree.sum(), expected.sum(), rtol=1e-12, atol=1e-12), name
        rows, cols = host_tree.nonzero()
        assert (rows < cols).all()
        n_components = scipy_csgraph.connected_components(S, directed=False)[0]
        assert host_tree.nnz <= S.shape[0] - n_components
        again = csgraph.minimum_spanning_tree(A).to_scipy()
        assert abs(again - host_tree).max() == 0 if host_tree.nnz else again.nnz == 0
        host = csgraph.minimum_spanning_tree(S, backend="gpu")
        assert isinstance(host, sp.csr_array) and np.isclose(host.sum(), expected.sum(), rtol=1e-12, atol=1e-12)


@pytest.mark.gpu
def test_gpu_rcm_is_a_permutation_no_wider_than_scipys(rng):
    import cupy

    for name, S in gpu_cases(rng, weighted=False).items():
        A = sparsegpu.from_scipy(S, backend="gpu")
        for symmetric_mode in (False, True):
            graph = S if not symmetric_mode else (abs(sp.csr_array(S)) + abs(sp.csr_array(S).T)).tocsr()
            perm = csgraph.reverse_cuthill_mckee(sparsegpu.from_scipy(graph, backend="gpu") if symmetric_mode else A,
                                                 symmetric_mode)
            assert isinstance(perm, cupy.ndarray), name
            perm = perm.get()
            assert_permutation(perm, S.shape[0])
            if S.shape[0] == 0:  # SciPy's own RCM fails on an empty graph
                continue
            expected = scipy_csgraph.reverse_cuthill_mckee(sp.csr_array(graph), symmetric_mode)
            assert bandwidth(S, perm) <= bandwidth(S, expected), name

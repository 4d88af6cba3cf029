"""connected_components: SciPy's partition on both backends, numbered by smallest vertex."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.csgraph as scipy_csgraph

import sparsegpu
from sparsegpu import csgraph
from tests.conftest import to_numpy
from tests.csgraph.graphs import (
    assert_numbered_by_smallest_vertex,
    assert_same_partition,
    available,
    generated_graphs,
    random_digraph,
    real_graph,
    real_params,
    tiny_graphs,
    with_int64_indices,
)

CASES = [(True, "weak"), (True, "strong"), (False, "weak"), (False, "strong"), (True, "STRONG")]


def check(ours, S, directed, connection) -> None:
    count, labels = ours
    expected_count, expected = scipy_csgraph.connected_components(S, directed, connection)
    labels = to_numpy(labels)
    assert count == expected_count and labels.dtype == np.int32
    assert_same_partition(labels, expected)
    assert_numbered_by_smallest_vertex(labels)
    if not directed or connection.lower() == "weak":
        assert np.array_equal(labels, expected)  # SciPy numbers weak components by smallest vertex too


@pytest.mark.parametrize("name", real_params())
def test_real_graphs_equal_scipy(name):
    S = real_graph(name)
    for directed, connection in CASES:
        check(csgraph.connected_components(S, directed, connection, backend="cpu"), S, directed, connection)


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo"])
def test_random_digraphs_equal_scipy(rng, fmt):
    for degree in (0.5, 1.0, 2.0):
        S = random_digraph(rng, n=400, degree=degree, fmt=fmt)
        for directed, connection in CASES:
            check(csgraph.connected_components(S, directed, connection, backend="cpu"), S, directed, connection)


def test_strong_labels_are_scipys_renumbered():
    # a 2-cycle {1, 2}, a 2-cycle {0, 3} reached from it, and vertex 4 alone
    S = sp.csr_array(np.array([[0, 0, 0, 1, 0], [0, 0, 1, 0, 0], [0, 1, 0, 1, 0], [1, 0, 0, 0, 0], [0, 0, 0, 0, 0]]))
    _, scipy_labels = scipy_csgraph.connected_components(S, connection="strong")
    count, labels = csgraph.connected_components(S, connection="strong", backend="cpu")
    assert count == 3 and labels.tolist() == [0, 1, 1, 0, 2]
    assert_same_partition(labels, scipy_labels)


def test_return_labels_false_and_other_inputs(rng):
    S = random_digraph(rng, n=100)
    assert csgraph.connected_components(S, return_labels=False, backend="cpu") == scipy_csgraph.connected_components(S)[0]
    expected = scipy_csgraph.connected_components(S, connection="strong")
    for graph in (with_int64_indices(S), sparsegpu.from_scipy(S, format="hyb", backend="cpu")):
        check(csgraph.connected_components(graph, connection="strong"), S, True, "strong")
    dense = S.toarray()  # explicit zeros are no edges here
    check(csgraph.connected_components(dense, connection="strong", backend="cpu"), dense, True, "strong")
    assert (scipy_csgraph.connected_components(dense, connection="strong")[0]
            == csgraph.connected_components(dense, connection="strong", return_labels=False, backend="cpu"))
    assert expected[0] == csgraph.connected_components(S, connection="strong", return_labels=False, backend="cpu")


@pytest.mark.parametrize("name", sorted(tiny_graphs()))
def test_tiny_graphs(name):
    S = tiny_graphs()[name]
    for directed, connection in CASES:
        check(csgraph.connected_components(S, directed, connection, backend="cpu"), S, directed, connection)


@pytest.mark.gpu
def test_gpu_components_have_scipys_partition(rng):
    import cupy

    cases = {name: real_graph(name) for name in available()}
    cases.update(generated_graphs())
    cases["random_sparse"] = random_digraph(rng, n=5000, degree=0.8)
    cases["random"] = random_digraph(rng, n=5000, degree=1.5)
    cases["random_int64"] = with_int64_indices(random_digraph(rng, n=500))
    cases.update(tiny_graphs())
    for name, S in cases.items():
        A = sparsegpu.from_scipy(S, backend="gpu")
        for directed, connection in CASES:
            ours = csgraph.connected_components(A, directed, connection)
            assert isinstance(ours[1], cupy.ndarray), name
            check(ours, S, directed, connection)
            first = ours[1].get()
            assert np.array_equal(csgraph.connected_components(A, directed, connection)[1].get(), first)
        host = csgraph.connected_components(S, connection="strong", backend="gpu")
        assert isinstance(host[1], np.ndarray)
        check(host, S, True, "strong")

"""The canonical graph: SciPy's edge rules (checked against SciPy itself), undirected and
transposed versions, every input kind, and bad input refused before SciPy runs."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.csgraph as scipy_csgraph

import sparsegpu
from sparsegpu import csgraph
from sparsegpu.csgraph import _graph
from sparsegpu.csgraph._graph import as_graph, symmetrise_min
from tests.conftest import GPU
from tests.csgraph.graphs import random_digraph, with_int64_indices

ALL_FORMATS = ("csr", "csc", "coo", "bsr", "lil", "dok", "dia")


def dense_of(graph: _graph.Graph) -> np.ndarray:
    return graph.to_scipy().toarray()


# --------------------------------------------------------------------------- SciPy's edge rules


def test_scipy_reads_a_stored_zero_as_an_edge_and_so_do_we():
    S = sp.csr_array((np.array([0.0, 1.0]), np.array([1, 2]), np.array([0, 2, 2, 2])), shape=(3, 3))
    assert scipy_csgraph.shortest_path(S, indices=0)[1] == 0.0  # reached at distance 0: an edge
    assert scipy_csgraph.breadth_first_order(S, 0)[1][1] == 0
    graph = as_graph(S, "cpu")
    assert graph.nnz == 2 and graph.weights.tolist() == [0.0, 1.0]
    assert csgraph.shortest_path(S, indices=0, backend="cpu").tolist() == [0.0, 0.0, 1.0]
    assert csgraph.connected_components(S, backend="cpu")[0] == 1


def test_dense_zero_inf_nan_are_no_edge_as_in_scipy():
    D = np.array([[0, np.inf, 2.0], [np.nan, 0, 0], [0, -1.0, 0]])
    graph = as_graph(D, "cpu")
    assert graph.indices.tolist() == [2, 1] and graph.weights.tolist() == [2.0, -1.0]
    assert scipy_csgraph.breadth_first_order(D, 0)[0].tolist() == [0, 2, 1]
    assert csgraph.breadth_first_order(D, 0, backend="cpu")[0].tolist() == [0, 2, 1]


def test_masked_entries_are_no_edge_unmasked_zeros_are():
    D = np.ma.masked_array(np.array([[0.0, 0.0], [3.0, 0.0]]), mask=[[True, False], [False, True]])
    graph = as_graph(D, "cpu")
    assert graph.indices.tolist() == [1, 0] and graph.weights.tolist() == [0.0, 3.0]
    assert np.array_equal(csgraph.dijkstra(D, backend="cpu"), scipy_csgraph.dijkstra(D))


def test_undirected_takes_the_smaller_weight_as_scipy():
    S = sp.csr_array(np.array([[0, 5.0, 0], [2.0, 0, 7.0], [0, 0, 1.0]]))
    assert scipy_csgraph.shortest_path(S, directed=False)[0, 1] == 2.0
    U = dense_of(as_graph(S, "cpu").undirected())
    assert U.tolist() == [[0, 2, 0], [2, 0, 7], [0, 7, 1]]
    assert np.array_equal(csgraph.shortest_path(S, directed=False, backend="cpu"),
                          scipy_csgraph.shortest_path(S, directed=False))


def test_self_loops_do_not_change_distances_or_orders():
    S = sp.csr_array(np.array([[3.0, 1.0], [0.0, 4.0]]))
    assert csgraph.dijkstra(S, indices=0, backend="cpu").tolist() == [0.0, 1.0]
    order, preds = csgraph.breadth_first_order(S, 0, backend="cpu")
    assert order.tolist() == [0, 1] and preds.tolist() == [-9999, 0]


def test_duplicates_are_summed_as_scipy_sums_a_coo():
    S = sp.coo_array((np.array([3.0, 1.0]), (np.array([0, 0]), np.array([1, 1]))), shape=(2, 2))
    assert scipy_csgraph.dijkstra(S, indices=0)[1] == 4.0
    assert csgraph.dijkstra(S, indices=0, backend="cpu")[1] == 4.0


def test_unweighted_counts_stored_zero_edges():
    S = sp.csr_array((np.array([0.0]), np.array([1]), np.array([0, 1, 1])), shape=(2, 2))
    expected = scipy_csgraph.shortest_path(S, unweighted=True, indices=0)
    assert expected.tolist() == [0.0, 1.0]
    assert csgraph.shortest_path(S, unweighted=True, indices=0, backend="cpu").tolist() == [0.0, 1.0]


@pytest.mark.parametrize("fmt", ALL_FORMATS)
def test_every_scipy_format_gives_the_same_graph(rng, fmt):
    S = random_digraph(rng, n=60, fmt="csr")
    converted = S.asformat(fmt)
    graph = as_graph(converted, "cpu")
    expected = sp.csr_array(converted)  # what SciPy reads: DIA, LIL and DOK do not keep explicit zeros
    expected.sum_duplicates()
    if fmt in ("csr", "csc", "coo"):
        assert expected.nnz == S.nnz
    assert graph.indptr.tolist() == expected.indptr.tolist()
    assert graph.indices.tolist() == expected.indices.tolist()
    assert np.array_equal(graph.weights, expected.data)
    assert graph.weights.dtype == np.float64 and graph.indices.dtype == np.int32


def test_matrix_and_array_inputs_keep_their_kind(rng):
    S = random_digraph(rng, n=40, fmt="csr")
    assert isinstance(csgraph.minimum_spanning_tree(sp.csr_matrix(S), backend="cpu"), sp.csr_matrix)
    assert isinstance(csgraph.minimum_spanning_tree(S, backend="cpu"), sp.csr_array)
    assert type(csgraph.breadth_first_tree(sp.csr_matrix(S), 0, backend="cpu")) is type(
        scipy_csgraph.breadth_first_tree(sp.csr_matrix(S), 0))


def test_int64_indices_and_integer_weights(rng):
    S = random_digraph(rng, n=80, fmt="csr")
    wide = with_int64_indices(S)
    assert np.array_equal(csgraph.dijkstra(wide, indices=[0, 5], backend="cpu"), scipy_csgraph.dijkstra(S, indices=[0, 5]))
    integers = sp.csr_array(np.array([[0, 2], [3, 0]], dtype=np.int64))
    assert csgraph.dijkstra(integers, backend="cpu").tolist() == [[0.0, 2.0], [3.0, 0.0]]


def test_sparsegpu_input_is_made_canonical():
    A = sparsegpu.CSR((np.array([1.0, 2.0, 0.0, 5.0]), np.array([2, 0, 2, 1]), np.array([0, 3, 4, 4])), (3, 3),
                      backend="cpu")
    graph = as_graph(A)
    assert graph.indptr.tolist() == [0, 2, 3, 3]
    assert graph.indices.tolist() == [0, 2, 1] and graph.weights.tolist() == [2.0, 1.0, 5.0]
    for fmt in ("coo", "csc", "ell", "sell"):
        assert np.array_equal(csgraph.dijkstra(A.asformat(fmt), indices=0), scipy_csgraph.dijkstra(sp.coo_array(A.to_scipy()), indices=0))


def test_a_matrix_keeps_its_graph_and_a_canonical_csr_is_not_copied(rng):
    S = sp.csr_array(random_digraph(rng, n=80, explicit_zeros=False))
    A = sparsegpu.from_scipy(S, backend="cpu")
    graph = as_graph(A)
    assert as_graph(A) is graph and graph.indices is A.indices and graph.indptr is A.indptr
    assert graph.transpose() is as_graph(A).transpose()
    single = sparsegpu.from_scipy(S, dtype=np.float32, backend="cpu")
    assert as_graph(single).weights.dtype == np.float64


def test_symmetrise_min_matches_scipy(rng):
    S = sp.csr_array(random_digraph(rng, n=120, explicit_zeros=False))
    indptr, indices, weights = symmetrise_min(S.indptr, S.indices, S.data, 120, np)
    U = sp.csr_array((weights, indices, indptr), shape=S.shape)
    both = S.minimum(S.T)
    one_way = (S + S.T) - (S.multiply(S.T != 0) + S.T.multiply(S != 0))
    assert abs(U - (both + one_way)).max() == 0
    assert U.has_sorted_indices and ((U != U.T).nnz == 0)


def test_transpose_and_undirected_are_cached(rng):
    graph = as_graph(random_digraph(rng, n=50), "cpu")
    assert graph.transpose() is graph.transpose()
    assert graph.undirected() is graph.undirected() is graph.undirected().undirected()
    assert np.array_equal(dense_of(graph.transpose()), dense_of(graph).T)


@pytest.mark.parametrize("n", [0, 1])
def test_empty_and_single_vertex_graphs(n):
    S = sp.csr_array((n, n))
    assert csgraph.connected_components(S, backend="cpu")[0] == n
    assert csgraph.dijkstra(S, backend="cpu").shape == (n, n)
    assert csgraph.minimum_spanning_tree(S, backend="cpu").shape == (n, n)
    assert csgraph.reverse_cuthill_mckee(S, backend="cpu").size == n
    graph = as_graph(S, "cpu")
    assert graph.undirected().indptr.tolist() == [0] * (n + 1)


# --------------------------------------------------------------------------- bad input

GOOD = sp.csr_array(np.array([[0, 1.0, 0], [0, 0, 2.0], [1.0, 0, 0]]))

CALLS = {
    "breadth_first_order": lambda g, **k: csgraph.breadth_first_order(g, 0, **k),
    "breadth_first_tree": lambda g, **k: csgraph.breadth_first_tree(g, 0, **k),
    "depth_first_order": lambda g, **k: csgraph.depth_first_order(g, 0, **k),
    "depth_first_tree": lambda g, **k: csgraph.depth_first_tree(g, 0, **k),
    "shortest_path": lambda g, **k: csgraph.shortest_path(g, **k),
    "dijkstra": lambda g, **k: csgraph.dijkstra(g, **k),
    "bellman_ford": lambda g, **k: csgraph.bellman_ford(g, **k),
    "connected_components": lambda g, **k: csgraph.connected_components(g, **k),
    "minimum_spanning_tree": lambda g, **k: csgraph.minimum_spanning_tree(g, **k),
    "reverse_cuthill_mckee": lambda g, **k: csgraph.reverse_cuthill_mckee(g, **k),
}


@pytest.fixture
def scipy_forbidden(monkeypatch):
    """Every SciPy csgraph routine replaced by one that fails the test: bad input must be
    refused before any of them runs."""
    def forbidden(*args, **kwargs):
        raise AssertionError("a SciPy routine ran on bad input")

    for name in ("breadth_first_order", "breadth_first_tree", "depth_first_order", "depth_first_tree",
                 "shortest_path", "dijkstra", "bellman_ford", "connected_components", "minimum_spanning_tree",
                 "reverse_cuthill_mckee", "laplacian"):
        monkeypatch.setattr(scipy_csgraph, name, forbidden)


def corrupted_indptr() -> sp.csr_array:
    S = GOOD.copy()
    S.indptr[1] = 5  # not monotone, past the end
    return S


def corrupted_indices() -> sp.csr_array:
    S = GOOD.copy()
    S.indices[0] = 7
    return S


BAD_GRAPHS = [
    ("rectangular", lambda: sp.csr_array((3, 4)), ValueError, "square"),
    ("rectangular dense", lambda: np.ones((2, 3)), ValueError, "square"),
    ("1-D", lambda: np.ones(3), ValueError, "2-D"),
    ("3-D", lambda: np.ones((2, 2, 2)), ValueError, "2-D"),
    ("complex sparse", lambda: sp.csr_array(np.array([[0, 1j], [0, 0]])), TypeError, "complex"),
    ("complex dense", lambda: np.array([[0, 1j], [0, 0]]), TypeError, "complex"),
    ("strings", lambda: np.array([["a", "b"], ["c", "d"]]), TypeError, "numbers"),
    ("None", lambda: None, TypeError, "graph must"),
    ("a string", lambda: "graph", TypeError, "graph must"),
    ("corrupted indptr", corrupted_indptr, ValueError, "indptr"),
    ("corrupted indices", corrupted_indices, ValueError, "indices"),
    ("complex sparsegpu", lambda: sparsegpu.from_scipy(sp.csr_array(np.array([[0, 1j], [0, 0]])), backend="cpu"),
     TypeError, "complex"),
    ("rectangular sparsegpu", lambda: sparsegpu.from_scipy(sp.csr_array((2, 3)), backend="cpu"), ValueError, "square"),
]


@pytest.mark.parametrize("function", sorted(CALLS))
@pytest.mark.parametrize("case", BAD_GRAPHS, ids=[c[0] for c in BAD_GRAPHS])
def test_bad_graphs_are_refused_before_scipy(scipy_forbidden, function, case):
    _, make, error, words = case
    with pytest.raises(error, match=words):
        CALLS[function](make(), backend="cpu")


NAN_EDGE = sp.csr_array((np.array([np.nan]), np.array([1]), np.array([0, 1, 1])), shape=(2, 2))

BAD_ARGUMENTS = [
    ("i_start out of range", lambda: csgraph.breadth_first_order(GOOD, 3), ValueError, "i_start"),
    ("i_start negative", lambda: csgraph.depth_first_order(GOOD, -1), ValueError, "i_start"),
    ("i_start float", lambda: csgraph.breadth_first_tree(GOOD, 1.0), TypeError, "i_start"),
    ("i_start bool", lambda: csgraph.breadth_first_order(GOOD, True), TypeError, "i_start"),
    ("i_start on n=0", lambda: csgraph.breadth_first_order(sp.csr_array((0, 0)), 0), ValueError, "i_start"),
    ("directed not bool", lambda: csgraph.breadth_first_order(GOOD, 0, directed="yes"), TypeError, "directed"),
    ("return_predecessors", lambda: csgraph.dijkstra(GOOD, return_predecessors=None), TypeError, "return_predecessors"),
    ("indices out of range", lambda: csgraph.dijkstra(GOOD, indices=3), ValueError, "indices"),
    ("indices below -n", lambda: csgraph.dijkstra(GOOD, indices=[-4]), ValueError, "indices"),
    ("indices float", lambda: csgraph.dijkstra(GOOD, indices=0.5), TypeError, "indices"),
    ("indices bool", lambda: csgraph.shortest_path(GOOD, indices=True), TypeError, "indices"),
    ("indices strings", lambda: csgraph.bellman_ford(GOOD, indices=["a"]), TypeError, "indices"),
    ("limit negative", lambda: csgraph.dijkstra(GOOD, limit=-1), ValueError, "limit"),
    ("limit nan", lambda: csgraph.dijkstra(GOOD, limit=np.nan), ValueError, "limit"),
    ("limit string", lambda: csgraph.dijkstra(GOOD, limit="far"), TypeError, "limit"),
    ("limit complex", lambda: csgraph.dijkstra(GOOD, limit=1j), TypeError, "limit"),
    ("min_only", lambda: csgraph.dijkstra(GOOD, min_only=1), TypeError, "min_only"),
    ("unknown method", lambda: csgraph.shortest_path(GOOD, method="X"), ValueError, "method"),
    ("method lower case", lambda: csgraph.shortest_path(GOOD, method="d"), ValueError, "method"),
    ("method not str", lambda: csgraph.shortest_path(GOOD, method=None), TypeError, "method"),
    ("unknown connection", lambda: csgraph.connected_components(GOOD, connection="medium"), ValueError, "connection"),
    ("connection not str", lambda: csgraph.connected_components(GOOD, connection=1), TypeError, "connection"),
    ("nan weights dijkstra", lambda: csgraph.dijkstra(NAN_EDGE), ValueError, "NaN"),
    ("nan weights bellman_ford", lambda: csgraph.bellman_ford(NAN_EDGE), ValueError, "NaN"),
    ("nan weights shortest_path", lambda: csgraph.shortest_path(NAN_EDGE, method="FW"), ValueError, "NaN"),
    ("negative dijkstra", lambda: csgraph.dijkstra(np.array([[0, -1.0], [0, 0]])), ValueError, "negative"),
    ("negative method D", lambda: csgraph.shortest_path(np.array([[0, -1.0], [0, 0]]), method="D"), ValueError,
     "negative"),
    ("symmetric_mode", lambda: csgraph.reverse_cuthill_mckee(GOOD, symmetric_mode="no"), TypeError, "symmetric_mode"),
    ("overwrite", lambda: csgraph.minimum_spanning_tree(GOOD, overwrite=None), TypeError, "overwrite"),
    ("laplacian form", lambda: csgraph.laplacian(GOOD, form="matrix"), ValueError, "form"),
    ("laplacian normed", lambda: csgraph.laplacian(GOOD, normed="yes"), TypeError, "normed"),
    ("laplacian rectangular", lambda: csgraph.laplacian(np.ones((2, 3))), ValueError, "square"),
    ("laplacian corrupted", lambda: csgraph.laplacian(corrupted_indptr()), ValueError, "indptr"),
    ("laplacian dtype", lambda: csgraph.laplacian(GOOD, dtype="nonsense"), TypeError, "dtype"),
    ("backend unknown", lambda: csgraph.dijkstra(GOOD, backend="tpu"), ValueError, "backend"),
    ("backend for a CPU matrix", lambda: csgraph.dijkstra(sparsegpu.from_scipy(GOOD, backend="cpu"), backend="gpu"),
     ValueError, "backend"),
]


@pytest.mark.parametrize("case", BAD_ARGUMENTS, ids=[c[0] for c in BAD_ARGUMENTS])
def test_bad_arguments_are_refused_before_scipy(scipy_forbidden, case):
    _, call, error, words = case
    with pytest.raises(error, match=words):
        call()


@pytest.mark.skipif(GPU, reason="checks the refusal without a GPU")
def test_gpu_backend_without_a_gpu_is_refused():
    with pytest.raises(sparsegpu.BackendError):
        csgraph.dijkstra(GOOD, backend="gpu")


def test_huge_distance_matrix_is_refused_before_allocating(monkeypatch):
    monkeypatch.setattr(_graph._validate, "available_bytes", lambda backend: 1 << 20)
    S = sp.eye(20000, format="csr")
    with pytest.raises(ValueError, match="distance matrix"):
        csgraph.dijkstra(S, backend="cpu")


def test_a_symmetric_structure_is_not_taken_for_symmetric_weights(rng):
    """Strong components learn that the structure is symmetric; PageRank must still read the
    weights of A^T, which differ here."""
    S = sp.csr_array(sp.random_array((60, 60), density=0.1, rng=rng))
    S = sp.csr_array(S + S.T)  # symmetric structure
    S.data = rng.uniform(0.5, 2.0, S.nnz)  # asymmetric weights
    A = sparsegpu.from_scipy(S, backend="cpu")
    expected = csgraph.pagerank(S, backend="cpu")
    graph = as_graph(A)
    assert graph.is_structurally_symmetric() and not graph.known_symmetric()
    np.testing.assert_array_equal(csgraph.pagerank(A), expected)
    assert graph.undirected().known_symmetric()

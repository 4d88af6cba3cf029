"""core_number: NetworkX's core numbers (Graph and DiGraph readings), exact and reproducible."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import sparsegpu
from sparsegpu import datasets
from sparsegpu.csgraph.cores import core_number
from tests.conftest import to_numpy
from tests.csgraph.graphs import (
    generated_graphs,
    random_digraph,
    real_graph,
    real_params,
    with_int64_indices,
)

nx = pytest.importorskip("networkx")

#: Real graphs NetworkX decomposes in seconds.
CORE_GRAPHS = ("ego-Facebook", "bio-dmela", "as-caida", "cit-HepPh")


def loop_free(S: sp.sparray) -> sp.csr_array:
    C = sp.csr_array(S, dtype=np.float64, copy=True)
    C.setdiag(0)
    C.eliminate_zeros()
    return C


def networkx_cores(S: sp.sparray, directed: bool) -> np.ndarray:
    """NetworkX's core numbers of the graph on vertices 0..n-1 with S's stored entries as edges."""
    coo = sp.coo_array(S)
    G = nx.DiGraph() if directed else nx.Graph()
    G.add_nodes_from(range(S.shape[0]))
    G.add_edges_from(zip(coo.row.tolist(), coo.col.tolist()))
    cores = nx.core_number(G)
    return np.array([cores[v] for v in range(S.shape[0])], dtype=np.int64)


def check(S: sp.sparray, directed: bool, **kwargs) -> np.ndarray:
    got = to_numpy(core_number(S, directed=directed, backend="cpu", **kwargs))
    assert got.dtype == np.int64 and got.shape == (S.shape[0],)
    assert np.array_equal(got, networkx_cores(S, directed))
    return got


@pytest.mark.parametrize("name", real_params(CORE_GRAPHS))
def test_real_graphs_equal_networkx(name):
    S = loop_free(real_graph(name))
    if name == "cit-HepPh":  # citations: a part of them, read as a DiGraph (in + out degree) too
        S = sp.csr_array(S[:10000, :10000])
        check(S, directed=True)
    check(S, directed=False)


@pytest.mark.parametrize("name", ["kron10", "grid", "road"])
def test_generated_graphs_equal_networkx(name):
    S = loop_free(generated_graphs()[name])
    for directed in (False, True):
        check(S, directed)


def test_kronecker_scale_14_equals_networkx():
    S = loop_free(datasets.kronecker(14, 16, seed=11))
    got = check(S, directed=False)
    assert got.max() > 20  # a deep decomposition, many peeling levels


def test_random_digraphs_equal_networkx(rng):
    for degree in (0.5, 2.0, 8.0):
        S = loop_free(random_digraph(rng, n=300, degree=degree, self_loops=False))
        for directed in (False, True):
            check(S, directed)


def test_reciprocal_edges_count_twice_in_a_digraph():
    # 0 <-> 1 and 1 -> 2: in + out degrees are 2, 3, 1; the DiGraph's 2-core is {0, 1}
    S = sp.csr_array(np.array([[0, 1, 0], [1, 0, 1], [0, 0, 0]], dtype=float))
    assert core_number(S, directed=True, backend="cpu").tolist() == [2, 2, 1]
    assert core_number(S, backend="cpu").tolist() == [1, 1, 1]


def test_explicit_zeros_are_edges_and_weights_are_ignored(rng):
    S = loop_free(random_digraph(rng, n=200, degree=3.0, self_loops=False, explicit_zeros=False))
    expected = core_number(S, backend="cpu")
    W = S.copy()
    W.data = rng.uniform(-5, 5, W.nnz)
    W.data[rng.integers(0, W.nnz, 20)] = 0.0  # stored zeros stay edges
    assert np.array_equal(core_number(W, backend="cpu"), expected)


def test_known_small_graphs():
    # NetworkX's docstring graph: havel_hakimi_graph([0, 1, 2, 2, 2, 2, 3])
    H = nx.havel_hakimi_graph([0, 1, 2, 2, 2, 2, 3])
    S = nx.to_scipy_sparse_array(H, nodelist=range(7))
    expected = nx.core_number(H)
    assert core_number(S, backend="cpu").tolist() == [expected[v] for v in range(7)]
    clique = sp.csr_array(np.ones((6, 6)) - np.eye(6))
    assert core_number(clique, backend="cpu").tolist() == [5] * 6


def test_isolated_vertices_and_tiny_graphs():
    assert core_number(sp.csr_array((0, 0)), backend="cpu").shape == (0,)
    assert core_number(sp.csr_array((1, 1)), backend="cpu").tolist() == [0]
    assert core_number(sp.csr_array((3, 3)), backend="cpu").tolist() == [0, 0, 0]
    S = sp.csr_array(np.array([[0, 1, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]], dtype=float))
    assert core_number(S, backend="cpu").tolist() == [1, 1, 0, 0]


def test_inputs_dense_int64_and_sparsegpu(rng):
    S = loop_free(random_digraph(rng, n=150, degree=4.0, self_loops=False))
    expected = networkx_cores(S, False)
    assert np.array_equal(core_number(S.toarray() != 0, backend="cpu"), expected)
    assert np.array_equal(core_number(with_int64_indices(S), backend="cpu"), expected)
    assert np.array_equal(core_number(sparsegpu.CSR.from_scipy(S, backend="cpu")), expected)
    assert np.array_equal(core_number(sp.csr_matrix(S), backend="cpu"), expected)


def test_self_loops_raise_value_error_like_networkx():
    S = sp.csr_array(np.array([[1.0, 1.0], [1.0, 0.0]]))
    with pytest.raises(ValueError, match="self loop"):
        core_number(S, backend="cpu")
    with pytest.raises(nx.NetworkXNotImplemented):
        nx.core_number(nx.from_scipy_sparse_array(S))
    with pytest.raises(ValueError, match="self loop"):
        core_number(sp.eye_array(3, format="csr"), directed=True, backend="cpu")


def test_bad_inputs():
    with pytest.raises(ValueError, match="square"):
        core_number(sp.csr_array((2, 3)), backend="cpu")
    with pytest.raises(TypeError, match="complex"):
        core_number(sp.csr_array(np.array([[0, 1j], [1j, 0]])), backend="cpu")
    with pytest.raises(TypeError, match="directed"):
        core_number(sp.csr_array((2, 2)), directed=1, backend="cpu")
    with pytest.raises(TypeError, match="A must be"):
        core_number("graph", backend="cpu")


def test_reruns_are_bit_identical():
    S = loop_free(datasets.kronecker(12, 16, seed=5))
    first, second = core_number(S, backend="cpu"), core_number(S, backend="cpu")
    assert np.array_equal(first, second)


@pytest.mark.gpu
@pytest.mark.parametrize("directed", [False, True])
def test_gpu_equals_cpu(directed):
    S = loop_free(datasets.kronecker(12, 16, seed=7))
    expected = core_number(S, directed=directed, backend="cpu")
    A = sparsegpu.CSR.from_scipy(S, backend="gpu")
    got = core_number(A, directed=directed)
    assert type(got).__module__.startswith("cupy")
    assert np.array_equal(to_numpy(got), expected)
    assert np.array_equal(to_numpy(core_number(S, directed=directed, backend="gpu")), expected)

"""PageRank, Katz and eigenvector centrality against NetworkX (the oracle), on real, generated,
random and tiny graphs; the stopping rule, check_every invariance, bitwise reruns, bad input."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as sparse_linalg

import sparsegpu
from sparsegpu import datasets
from sparsegpu.csgraph.centrality import (
    PowerIterationFailedConvergence,
    eigenvector_centrality,
    katz_centrality,
    pagerank,
)
from tests.conftest import to_numpy
from tests.csgraph.graphs import (
    random_digraph,
    real_graph,
    real_params,
    tiny_graphs,
    with_int64_indices,
)

nx = pytest.importorskip("networkx")

#: Real graphs for PageRank (NetworkX's is SciPy's, seconds each); Katz and eigenvector
#: centrality run NetworkX's pure-Python loops, so they take the two smallest.
PAGERANK_GRAPHS = ("ego-Facebook", "as-caida", "email-Enron", "cit-HepPh", "bio-dmela")
SLOW_ORACLE_GRAPHS = ("ego-Facebook", "bio-dmela")


# --------------------------------------------------------------------------- helpers


def nx_graph(S: sp.sparray, directed: bool):
    """S as NetworkX reads it: each stored entry an edge with attribute "weight"."""
    C = sp.csr_array(S, copy=True)
    C.sum_duplicates()
    G = nx.from_scipy_sparse_array(C, create_using=nx.DiGraph if directed else nx.Graph)
    if directed:
        assert G.number_of_edges() == C.nnz  # explicit zeros are edges for both
    return G


def as_array(result: dict, n: int) -> np.ndarray:
    return np.array([result[i] for i in range(n)], dtype=np.float64)


def assert_agrees(ours, expected: np.ndarray, tol: float) -> None:
    """Within what the stopping test allows: two iterates one step apart differ by less than
    N * tol in l1, so an answer stopped one step apart from NetworkX's still passes."""
    ours = to_numpy(ours)
    assert ours.shape == expected.shape and ours.dtype == np.float64
    assert np.isfinite(ours).all()
    assert np.abs(ours - expected).sum() <= max(expected.size, 1) * tol


def dangling_graph(rng: np.random.Generator, n: int = 300) -> sp.csr_array:
    """A random weighted digraph (self loops, duplicates summed, explicit zeros, isolated vertices)
    with extra sinks: rows emptied so some vertices have no out-edge."""
    S = sp.csr_array(random_digraph(rng, n, 4.0))
    rows = np.repeat(np.arange(n), np.diff(S.indptr))
    sinks = rng.choice(n, n // 10, replace=False)
    keep = ~np.isin(rows, sinks)
    S = sp.csr_array((S.data[keep], (rows[keep], S.indices[keep])), shape=(n, n))
    assert (np.diff(S.indptr) == 0).sum() >= n // 10
    return S


@functools.cache
def _real(name: str) -> tuple[sp.csr_array, bool]:
    S = real_graph(name)
    return S, bool((S != S.T).nnz == 0)


@functools.cache
def _real_nx(name: str):
    S, symmetric = _real(name)
    return nx_graph(S, not symmetric)


def largest_eigenvalue(S: sp.sparray) -> float:
    return float(abs(sparse_linalg.eigs(sp.csr_array(S, dtype=np.float64), k=1, which="LM",
                                        return_eigenvectors=False)[0]))


def katz_alpha(S: sp.sparray, fraction: float) -> float:
    """``fraction`` / lambda_max, the larger of the weighted and the unit-weight graph's (Katz
    converges below 1 / lambda_max either way)."""
    pattern = sp.csr_array(S, dtype=np.float64, copy=True)
    pattern.data = np.abs(pattern.data)
    largest = largest_eigenvalue(pattern) if pattern.nnz else 0.0
    pattern.data[:] = 1.0
    return fraction / max(largest, largest_eigenvalue(pattern) if pattern.nnz else 0.0, 1.0)


# --------------------------------------------------------------------------- NetworkX agreement


@pytest.mark.parametrize("name", real_params(PAGERANK_GRAPHS))
def test_pagerank_real_graphs_match_networkx(name):
    S, symmetric = _real(name)
    expected = as_array(nx.pagerank(_real_nx(name)), S.shape[0])
    ours = pagerank(S, directed=not symmetric, backend="cpu")
    assert_agrees(ours, expected, 1e-6)
    assert abs(ours.sum() - 1) < 1e-6 * S.shape[0]
    if symmetric:  # an undirected graph read as a DiGraph has each edge both ways: the same ranks
        assert np.array_equal(pagerank(S, backend="cpu"), ours)


@pytest.mark.parametrize("name", real_params(SLOW_ORACLE_GRAPHS))
def test_katz_and_eigenvector_real_graphs_match_networkx(name):
    S, symmetric = _real(name)
    G, n = _real_nx(name), S.shape[0]
    alpha = 0.5 / largest_eigenvalue(S)
    expected = as_array(nx.katz_centrality(G, alpha=alpha), n)
    assert_agrees(katz_centrality(S, alpha, directed=not symmetric, backend="cpu"), expected, 1e-6)
    expected = as_array(nx.eigenvector_centrality(G, max_iter=500), n)
    ours = eigenvector_centrality(S, max_iter=500, directed=not symmetric, backend="cpu")
    assert_agrees(ours, expected, 1e-6)
    assert abs(np.linalg.norm(ours) - 1) < 1e-12


@pytest.mark.parametrize("scale", [10, 12, 14])
def test_pagerank_kronecker_matches_networkx(scale):
    S = datasets.kronecker(scale, 8, seed=scale, weighted=True)
    G = nx_graph(S, True)
    for weight, nx_weight in ((True, "weight"), (False, None)):
        expected = as_array(nx.pagerank(G, alpha=0.9, weight=nx_weight), S.shape[0])
        assert_agrees(pagerank(S, alpha=0.9, weight=weight, backend="cpu"), expected, 1e-6)


@pytest.mark.parametrize("scale", [10, 11])
def test_katz_and_eigenvector_kronecker_match_networkx(scale):
    S = datasets.kronecker(scale, 8, seed=scale, weighted=True)
    G, n = nx_graph(S, True), S.shape[0]
    alpha = katz_alpha(S, 0.8)
    expected = as_array(nx.katz_centrality(G, alpha=alpha, weight="weight"), n)
    assert_agrees(katz_centrality(S, alpha, weight=True, backend="cpu"), expected, 1e-6)
    expected = as_array(nx.eigenvector_centrality(G, max_iter=1000, tol=1e-8), n)
    assert_agrees(eigenvector_centrality(S, max_iter=1000, tol=1e-8, backend="cpu"), expected, 1e-8)


@pytest.mark.parametrize("weight", [True, False])
def test_pagerank_dangling_vertices_match_networkx(rng, weight):
    S = dangling_graph(rng)
    n, G = S.shape[0], nx_graph(S, True)
    nx_weight = "weight" if weight else None
    expected = as_array(nx.pagerank(G, weight=nx_weight), n)
    assert_agrees(pagerank(S, weight=weight, backend="cpu"), expected, 1e-6)
    # a dangling distribution given as an array is NetworkX's dict, vertex by vertex
    d = rng.uniform(0, 1, n) * (rng.uniform(0, 1, n) < 0.3)
    expected = as_array(nx.pagerank(G, weight=nx_weight, dangling=dict(enumerate(d))), n)
    assert_agrees(pagerank(S, weight=weight, dangling=d, backend="cpu"), expected, 1e-6)


def test_pagerank_personalization_and_nstart_match_networkx(rng):
    S = dangling_graph(rng, 400)
    n, G = S.shape[0], nx_graph(S, True)
    p = rng.uniform(0, 1, n)
    p[rng.choice(n, n // 2, replace=False)] = 0  # half the vertices get no teleport
    x0 = rng.uniform(0, 2, n) * (rng.uniform(0, 1, n) < 0.5)
    x0[0] = 1.0
    expected = as_array(nx.pagerank(G, alpha=0.7, personalization=dict(enumerate(p)),
                                    nstart=dict(enumerate(x0)), tol=1e-9), n)
    ours = pagerank(S, alpha=0.7, personalization=p, nstart=x0, tol=1e-9, backend="cpu")
    assert_agrees(ours, expected, 1e-9)
    # integer personalisation is scaled the same way; without dangling the teleport serves
    expected = as_array(nx.pagerank(G, personalization=dict(enumerate((p > 0).astype(int)))), n)
    assert_agrees(pagerank(S, personalization=(p > 0).astype(np.int64), backend="cpu"), expected, 1e-6)


def test_pagerank_undirected_reading_matches_networkx_graph(rng):
    S = dangling_graph(rng, 250)
    S.data = np.abs(S.data) + 0.5  # no zero weights, so the undirected reading keeps every edge
    U = sp.csr_array(S + S.T)  # symmetric weights: read the same by both (NetworkX keeps the last of two)
    expected = as_array(nx.pagerank(nx_graph(U, False)), U.shape[0])
    assert_agrees(pagerank(U, directed=False, backend="cpu"), expected, 1e-6)
    # directed=False reads an asymmetric pattern both ways: a sink in S is no sink undirected
    both = pagerank(S, directed=False, weight=False, backend="cpu")
    pattern = sp.csr_array((S + S.T) != 0, dtype=np.float64)
    expected = as_array(nx.pagerank(nx_graph(pattern, False), weight=None), S.shape[0])
    assert_agrees(both, expected, 1e-6)


def test_weighted_and_unweighted_differ_as_networkx(rng):
    S = dangling_graph(rng)
    G, n = nx_graph(S, True), S.shape[0]
    weighted = pagerank(S, weight=True, backend="cpu")
    unit = pagerank(S, weight=None, backend="cpu")
    assert np.array_equal(unit, pagerank(S, weight=False, backend="cpu"))
    assert np.abs(weighted - unit).sum() > 1e-3
    unit_pattern = sp.csr_array(S, copy=True)
    unit_pattern.data[:] = 1.0
    assert np.array_equal(unit, pagerank(unit_pattern, backend="cpu"))
    alpha = katz_alpha(S, 0.5)
    for weight, nx_weight in ((True, "weight"), (False, None)):
        expected = as_array(nx.katz_centrality(G, alpha=alpha, weight=nx_weight), n)
        assert_agrees(katz_centrality(S, alpha, weight=weight, backend="cpu"), expected, 1e-6)


def test_katz_beta_nstart_and_normalized_match_networkx(rng):
    S = dangling_graph(rng, 200)
    G, n = nx_graph(S, True), S.shape[0]
    alpha = katz_alpha(S, 0.6)
    beta = rng.uniform(-1, 2, n)
    x0 = rng.uniform(-1, 1, n)
    expected = as_array(nx.katz_centrality(G, alpha=alpha, beta=dict(enumerate(beta)), nstart=dict(enumerate(x0)),
                                           normalized=False, weight="weight", tol=1e-10), n)
    ours = katz_centrality(S, alpha, beta, nstart=x0, normalized=False, weight=True, tol=1e-10, backend="cpu")
    assert_agrees(ours, expected, 1e-10)
    expected = as_array(nx.katz_centrality(G, alpha=alpha, beta=2.5), n)
    assert_agrees(katz_centrality(S, alpha, np.float32(2.5), backend="cpu"), expected, 1e-6)


def test_eigenvector_nstart_and_weights_match_networkx(rng):
    n = 150
    S = sp.csr_array(random_digraph(rng, n, 5.0, explicit_zeros=False, isolated=0))
    S = sp.csr_array(S + S.T)  # connected with high probability; undirected
    G = nx_graph(S, False)
    x0 = rng.uniform(0, 1, n)
    for weight, nx_weight in ((True, "weight"), (False, None)):
        expected = as_array(nx.eigenvector_centrality(G, nstart=dict(enumerate(x0)), weight=nx_weight,
                                                      max_iter=1000, tol=1e-9), n)
        ours = eigenvector_centrality(S, nstart=x0, weight=weight, max_iter=1000, tol=1e-9, directed=False,
                                      backend="cpu")
        assert_agrees(ours, expected, 1e-9)
        assert (ours > 0).all()


@pytest.mark.parametrize("name", list(tiny_graphs()))
def test_tiny_graphs_match_networkx(name):
    S = tiny_graphs()[name]
    n = S.shape[0]
    if n == 0:
        assert pagerank(S, backend="cpu").shape == (0,)
        assert katz_centrality(S, backend="cpu").shape == (0,)
        with pytest.raises(ValueError, match="null graph"):
            eigenvector_centrality(S, backend="cpu")
        return
    G = nx_graph(S, True)
    assert_agrees(pagerank(S, backend="cpu"), as_array(nx.pagerank(G), n), 1e-6)
    assert_agrees(katz_centrality(S, 0.1, backend="cpu"), as_array(nx.katz_centrality(G, 0.1), n), 1e-6)
    assert_agrees(eigenvector_centrality(S, backend="cpu"), as_array(nx.eigenvector_centrality(G), n), 1e-6)


def test_zero_weight_edges_are_edges_of_weight_zero():
    """A vertex whose only out-edge weighs 0 is dangling with weight=True, not with False."""
    S = sp.csr_array((np.array([0.0, 1.0, 2.0]), np.array([1, 0, 1]), np.array([0, 1, 2, 3])), shape=(3, 3))
    G = nx_graph(S, True)
    for weight, nx_weight in ((True, "weight"), (False, None)):
        expected = as_array(nx.pagerank(G, weight=nx_weight), 3)
        assert_agrees(pagerank(S, weight=weight, backend="cpu"), expected, 1e-6)
    assert np.abs(pagerank(S, backend="cpu") - pagerank(S, weight=False, backend="cpu")).sum() > 0.1


def test_two_isolated_vertices_share_rank():
    assert pagerank(np.zeros((2, 2)), backend="cpu").tolist() == [0.5, 0.5]
    assert pagerank(np.zeros((2, 2)), personalization=[0, 3], backend="cpu").tolist() == [0.0, 1.0]


# --------------------------------------------------------------------------- stopping and non-convergence


def test_stops_at_the_first_passing_iteration_whatever_check_every(rng):
    """Find the first max_iter that succeeds: one fewer must raise, and every check_every must
    return the same bits (the iterate NetworkX's loop returns)."""
    S = dangling_graph(rng, 120)
    first = next(m for m in range(1, 200) if _converges(lambda m=m: pagerank(S, max_iter=m, backend="cpu")))
    reference = pagerank(S, max_iter=first, check_every=1, backend="cpu")
    for check_every in (1, 2, 3, 5, 8, first, first + 7, 1000):
        assert np.array_equal(pagerank(S, max_iter=first, check_every=check_every, backend="cpu"), reference)
        assert np.array_equal(pagerank(S, max_iter=first + 40, check_every=check_every, backend="cpu"), reference)
        if first > 1:
            with pytest.raises(PowerIterationFailedConvergence) as info:
                pagerank(S, max_iter=first - 1, check_every=check_every, backend="cpu")
            assert info.value.num_iterations == first - 1


def _converges(call) -> bool:
    try:
        call()
    except PowerIterationFailedConvergence:
        return False
    return True


@pytest.mark.parametrize("check_every", [1, 4, 7, 64])
def test_check_every_invariance_katz_and_eigenvector(rng, check_every):
    S = dangling_graph(rng, 200)
    alpha = katz_alpha(S, 0.5)
    assert np.array_equal(katz_centrality(S, alpha, weight=True, check_every=check_every, backend="cpu"),
                          katz_centrality(S, alpha, weight=True, check_every=1, backend="cpu"))
    U = sp.csr_array(S + S.T)
    assert np.array_equal(eigenvector_centrality(U, max_iter=500, check_every=check_every, backend="cpu"),
                          eigenvector_centrality(U, max_iter=500, check_every=1, backend="cpu"))


def test_non_convergence_raises_as_networkx(rng):
    S = dangling_graph(rng)
    G = nx_graph(S, True)
    with pytest.raises(nx.PowerIterationFailedConvergence) as nx_info:
        nx.pagerank(G, max_iter=3, tol=1e-15)
    with pytest.raises(PowerIterationFailedConvergence) as info:
        pagerank(S, max_iter=3, tol=1e-15, backend="cpu")
    # NetworkX's exception keeps its message as the last argument
    assert str(info.value) == nx_info.value.args[-1] and info.value.num_iterations == 3
    assert isinstance(info.value, ArithmeticError)
    too_large = 2.0 / max(largest_eigenvalue(S + S.T), 1)  # Katz diverges past 1 / lambda_max
    with pytest.raises(PowerIterationFailedConvergence) as info:
        katz_centrality(S + S.T, too_large, max_iter=60, backend="cpu")
    assert info.value.num_iterations == 60
    with pytest.raises(PowerIterationFailedConvergence, match="within 2 iterations"):
        eigenvector_centrality(S, max_iter=2, tol=1e-15, backend="cpu")


# --------------------------------------------------------------------------- inputs and reproducibility


def test_reruns_are_bitwise_identical_and_inputs_agree(rng):
    S = dangling_graph(rng)
    first = pagerank(S, backend="cpu")
    assert np.array_equal(first, pagerank(S, backend="cpu"))
    assert np.array_equal(first, pagerank(with_int64_indices(S), backend="cpu"))
    assert np.array_equal(first, pagerank(sp.coo_matrix(S), backend="cpu"))
    A = sparsegpu.from_scipy(S, backend="cpu")
    assert np.array_equal(first, pagerank(A))
    assert np.array_equal(first, pagerank(A))  # the cached transition matrix gives the same bits
    graph = A._cache["csgraph"]
    assert ("centrality_transition", True) in graph._cache
    dense = S.toarray()
    positive = sp.csr_array(S, copy=True)
    positive.eliminate_zeros()  # dense input cannot hold a zero-weight edge
    assert np.array_equal(pagerank(dense, backend="cpu"), pagerank(positive, backend="cpu"))


def test_input_vectors_are_not_modified(rng):
    S = dangling_graph(rng, 100)
    p, x0, d = rng.uniform(0, 1, 100), rng.uniform(0, 1, 100), rng.uniform(0, 1, 100)
    copies = [a.copy() for a in (p, x0, d)]
    pagerank(S, personalization=p, nstart=x0, dangling=d, backend="cpu")
    katz_centrality(S, 0.01, beta=p, nstart=x0, backend="cpu")
    eigenvector_centrality(S + S.T, nstart=x0, max_iter=1000, backend="cpu")
    assert all(np.array_equal(a, b) for a, b in zip((p, x0, d), copies))


BAD_PAGERANK = [
    ({"alpha": 0}, ValueError, "alpha"), ({"alpha": 1}, ValueError, "alpha"), ({"alpha": np.nan}, ValueError, "alpha"),
    ({"alpha": "0.85"}, TypeError, "alpha"), ({"alpha": True}, TypeError, "alpha"),
    ({"max_iter": 0}, ValueError, "max_iter"), ({"max_iter": 10.0}, TypeError, "max_iter"),
    ({"tol": 0}, ValueError, "tol"), ({"tol": -1e-6}, ValueError, "tol"), ({"tol": None}, TypeError, "tol"),
    ({"check_every": 0}, ValueError, "check_every"),
    ({"personalization": np.ones(4)}, ValueError, "personalization"),
    ({"personalization": -np.ones(5)}, ValueError, "personalization"),
    ({"personalization": np.zeros(5)}, ValueError, "personalization"),
    ({"personalization": {0: 1.0}}, TypeError, "personalization"),
    ({"personalization": ["a"] * 5}, TypeError, "personalization"),
    ({"nstart": np.zeros(5)}, ValueError, "nstart"), ({"nstart": [1, 1, np.nan, 1, 1]}, ValueError, "nstart"),
    ({"dangling": np.zeros(5)}, ValueError, "dangling"), ({"dangling": np.ones((5, 1))}, ValueError, "dangling"),
    ({"weight": "weight"}, TypeError, "weight"), ({"directed": None}, TypeError, "directed"),
    ({"backend": 3}, TypeError, "backend"),
]


@pytest.mark.parametrize("kwargs, error, word", BAD_PAGERANK)
def test_pagerank_bad_arguments(kwargs, error, word):
    S = sp.csr_array(np.array([[0, 1, 0, 0, 1], [1, 0, 1, 0, 0], [0, 0, 0, 1, 0], [1, 0, 0, 0, 0], [0, 0, 1, 0, 0]],
                              dtype=float))
    with pytest.raises(error, match=word):
        pagerank(S, **kwargs)


def test_bad_graphs_and_weights():
    with pytest.raises(ValueError, match="square"):
        pagerank(sp.csr_array((3, 4)), backend="cpu")
    with pytest.raises(TypeError, match="complex"):
        katz_centrality(sp.csr_array(np.eye(3) * 1j), backend="cpu")
    with pytest.raises(TypeError):
        eigenvector_centrality("graph", backend="cpu")
    negative = sp.csr_array(np.array([[0, -1.0], [1.0, 0]]))
    with pytest.raises(ValueError, match="negative"):
        pagerank(negative, backend="cpu")
    assert pagerank(negative, weight=False, backend="cpu").tolist() == [0.5, 0.5]
    nan = sp.csr_array((np.array([np.nan, 1.0]), np.array([1, 0]), np.array([0, 1, 2])), shape=(2, 2))
    for function in (pagerank, katz_centrality, eigenvector_centrality):
        with pytest.raises(ValueError, match="NaN"):
            function(nan, weight=True, backend="cpu")


BAD_KATZ = [
    ({"alpha": np.inf}, ValueError, "alpha"), ({"alpha": 1j}, TypeError, "alpha"),
    ({"beta": np.ones(3)}, ValueError, "beta"), ({"beta": {0: 1.0}}, TypeError, "beta"),
    ({"beta": np.nan}, ValueError, "beta"), ({"beta": "1"}, TypeError, "beta"),
    ({"nstart": np.ones(4)}, ValueError, "nstart"), ({"normalized": 1}, TypeError, "normalized"),
    ({"max_iter": -1}, ValueError, "max_iter"), ({"check_every": 2.0}, TypeError, "check_every"),
]


@pytest.mark.parametrize("kwargs, error, word", BAD_KATZ)
def test_katz_bad_arguments(kwargs, error, word):
    with pytest.raises(error, match=word):
        katz_centrality(sp.csr_array(np.ones((5, 5))), **kwargs, backend="cpu")


@pytest.mark.parametrize("nstart, word", [(np.zeros(3), "all zero"), ([1.0, -1.0, 0.0], "sum to 0"),
                                          (np.ones(2), "nstart"), ([np.inf, 1, 1], "nstart")])
def test_eigenvector_bad_nstart(nstart, word):
    with pytest.raises(ValueError, match=word):
        eigenvector_centrality(sp.csr_array(np.ones((3, 3))), nstart=nstart, backend="cpu")


# --------------------------------------------------------------------------- GPU


@pytest.mark.gpu
@pytest.mark.parametrize("name", real_params(("ego-Facebook", "cit-HepPh", "email-Enron")))
def test_gpu_matches_cpu_and_reruns_bitwise(name):
    import cupy

    S, symmetric = _real(name)
    n = S.shape[0]
    A = sparsegpu.from_scipy(S, backend="gpu")
    alpha = 0.5 / largest_eigenvalue(S)
    runs = {
        "pagerank": lambda **kw: pagerank(A, directed=not symmetric, **kw),
        "katz": lambda **kw: katz_centrality(A, alpha, directed=not symmetric, **kw),
        "eigenvector": lambda **kw: eigenvector_centrality(A, max_iter=1000, directed=not symmetric, **kw),
    }
    cpu = {
        "pagerank": pagerank(S, directed=not symmetric, backend="cpu"),
        "katz": katz_centrality(S, alpha, directed=not symmetric, backend="cpu"),
        "eigenvector": eigenvector_centrality(S, max_iter=1000, directed=not symmetric, backend="cpu"),
    }
    for key, run in runs.items():
        first = run()
        assert isinstance(first, cupy.ndarray) and first.shape == (n,)
        assert_agrees(first, cpu[key], 2e-6)
        for check_every in (1, 3, 8, 50):
            assert cupy.array_equal(run(check_every=check_every), first), (key, check_every)


@pytest.mark.gpu
def test_gpu_personalization_dangling_and_host_input(rng):
    S = dangling_graph(rng, 3000)
    n = S.shape[0]
    p, d = rng.uniform(0, 1, n) * (rng.uniform(0, 1, n) < 0.4), rng.uniform(0, 1, n)
    expected = pagerank(S, personalization=p, dangling=d, backend="cpu")
    on_gpu = pagerank(S, personalization=p, dangling=d, backend="gpu")  # host input runs on the GPU
    assert isinstance(on_gpu, np.ndarray)
    assert_agrees(on_gpu, expected, 2e-6)
    import cupy

    A = sparsegpu.from_scipy(S, backend="gpu")
    device = pagerank(A, personalization=cupy.asarray(p), dangling=d)
    assert cupy.array_equal(device, pagerank(A, personalization=p, dangling=d))
    assert_agrees(device, expected, 2e-6)
    with pytest.raises(PowerIterationFailedConvergence) as info:
        pagerank(A, max_iter=5, tol=1e-15)
    assert info.value.num_iterations == 5


@pytest.mark.gpu
@pytest.mark.parametrize("scale", [12, 14])
def test_gpu_kronecker_matches_networkx(scale):
    S = datasets.kronecker(scale, 16, seed=scale, weighted=True)
    expected = as_array(nx.pagerank(nx_graph(S, True)), S.shape[0])
    assert_agrees(pagerank(sparsegpu.from_scipy(S, backend="gpu")), expected, 2e-6)


@pytest.mark.gpu
@pytest.mark.parametrize("n", [1, 1000, 300_001])
def test_gpu_fused_pagerank_step_equals_reference(n, rng):
    import cupy

    from sparsegpu.csgraph._device_centrality import PagerankStep
    from sparsegpu.reference.graph_centrality import pagerank_update

    y, x = rng.random(n), rng.random(n)
    weights, teleport = rng.random(n), rng.random(n)
    dangling = rng.random(n) < 0.2
    start = rng.random(n)
    step = PagerankStep(cupy.asarray(dangling), cupy.asarray(weights), cupy.asarray(teleport), 0.85,
                        cupy.asarray(start))
    carried = float(start[dangling].sum())
    results = []
    for _ in range(2):  # the second step reads the dangling mass the first one wrote
        got_y, error = cupy.asarray(y), cupy.full(1, np.nan)
        step.update(got_y, cupy.asarray(x), error)
        want_y = y.copy()
        want_error, want_carried = pagerank_update(want_y, x, weights, teleport, dangling, 0.85, carried)
        np.testing.assert_allclose(got_y.get(), want_y, rtol=1e-14, atol=0)
        assert float(error[0]) == pytest.approx(want_error, rel=1e-12)
        carried = want_carried
        results.append((got_y.get(), float(error[0])))
    assert float(step.carried[step.steps % 2]) == pytest.approx(carried, rel=1e-12, abs=1e-300)
    again = PagerankStep(cupy.asarray(dangling), cupy.asarray(weights), cupy.asarray(teleport), 0.85,
                         cupy.asarray(start))
    got_y, error = cupy.asarray(y), cupy.full(1, np.nan)
    again.update(got_y, cupy.asarray(x), error)
    assert np.array_equal(got_y.get(), results[0][0]) and float(error[0]) == results[0][1]

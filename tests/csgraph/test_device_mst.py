"""Minimum spanning forest: the NumPy reference against SciPy and an independent Kruskal, and the
GPU kernels (kernels/graph_mst.cu) against both, edge for edge."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components, minimum_spanning_tree

from sparsegpu import datasets
from sparsegpu.reference import graph_mst as reference
from tests.conftest import GPU, REAL_MATRICES, requires_matrices

GRAPH_MATRICES = [name for name in ("as-caida", "ego-Facebook", "email-Enron", "cit-HepPh", "bio-dmela",
                                    "tech-WHOIS", "luxembourg_osm", "ct2010", "bcspwr10") if name in REAL_MATRICES]


# --------------------------------------------------------------------------- graphs


def symmetric_weighted(pattern, rng: np.random.Generator, *, integer: bool = False, low: float = 0.01,
                       index=np.int32) -> sp.csr_array:
    """The undirected graph of ``pattern`` (A + A^T, self loops kept) with fresh weights, the same
    both ways: uniform in [low, 1) (distinct almost surely), or integers 1..3 (many ties)."""
    A = sp.csr_array(pattern, dtype=np.float64)
    A = sp.csr_array(abs(A) + abs(A.T))
    upper = sp.triu(A, 0).tocoo()
    weights = rng.integers(1, 4, upper.nnz).astype(np.float64) if integer else rng.uniform(low, 1.0, upper.nnz)
    upper = sp.coo_array((weights, (upper.row, upper.col)), shape=A.shape)
    S = sp.csr_array(upper + sp.triu(upper, 1).T)
    S.sum_duplicates()
    S.sort_indices()
    S.indptr, S.indices = S.indptr.astype(index), S.indices.astype(index)
    return S


def random_graph(rng: np.random.Generator, n: int, m: int, **kwargs) -> sp.csr_array:
    rows, cols = rng.integers(0, n, m), rng.integers(0, n, m)
    return symmetric_weighted(sp.coo_array((np.ones(m), (rows, cols)), shape=(n, n)), rng, **kwargs)


def disconnected_graph(rng: np.random.Generator, **kwargs) -> sp.csr_array:
    """Pieces of different shapes, isolated vertices between them, self loops."""
    pieces = [random_graph(rng, 40, 120, **kwargs), sp.csr_array((5, 5)), random_graph(rng, 7, 4, **kwargs),
              symmetric_weighted(datasets.grid_graph(6, 9, seed=int(rng.integers(1 << 30))), rng, **kwargs),
              sp.csr_array((1, 1)), symmetric_weighted(sp.eye(3), rng, **kwargs)]
    return symmetric_weighted(sp.block_diag(pieces, format="csr"), rng, **kwargs)


# --------------------------------------------------------------------------- checks


def edge_set(rows, cols) -> set[tuple[int, int]]:
    return set(zip(np.asarray(rows).tolist(), np.asarray(cols).tolist()))


def kruskal(S: sp.csr_array) -> set[tuple[int, int]]:
    """The forest under the (weight, min vertex, max vertex) order, independently of Boruvka."""
    upper = sp.triu(S, 1).tocoo()
    order = np.lexsort((upper.col, upper.row, upper.data))
    parent = list(range(S.shape[0]))

    def find(v: int) -> int:
        while parent[v] != v:
            parent[v] = parent[parent[v]]
            v = parent[v]
        return v

    chosen = set()
    for e in order.tolist():
        u, v = find(int(upper.row[e])), find(int(upper.col[e]))
        if u != v:
            parent[max(u, v)] = min(u, v)
            chosen.add((int(upper.row[e]), int(upper.col[e])))
    return chosen


def scipy_forest(S: sp.csr_array) -> tuple[set[tuple[int, int]], float]:
    T = sp.coo_array(minimum_spanning_tree(S))
    return edge_set(np.minimum(T.row, T.col), np.maximum(T.row, T.col)), float(T.data.sum())


def check_forest(S: sp.csr_array, rows, cols, w, *, distinct: bool) -> None:
    """Shape of the output, a spanning forest of S's weights, SciPy's total (and, with distinct
    weights, SciPy's edges), and the forest of the tie order."""
    rows, cols, w = np.asarray(rows), np.asarray(cols), np.asarray(w)
    assert rows.dtype == cols.dtype and w.dtype == np.float64
    assert rows.shape == cols.shape == w.shape
    assert (rows < cols).all()
    assert (np.lexsort((cols, rows)) == np.arange(rows.size)).all(), "edges not sorted by (row, col)"
    np.testing.assert_array_equal(w, S[rows, cols])
    n_components = connected_components(S, directed=False)[0] if S.shape[0] else 0
    assert rows.size == S.shape[0] - n_components
    ours = edge_set(rows, cols)
    assert len(ours) == rows.size
    assert ours == kruskal(S)
    scipy_edges, scipy_total = scipy_forest(S)
    assert w.sum() == pytest.approx(scipy_total, rel=1e-12, abs=1e-12)
    if distinct:
        assert ours == scipy_edges


def reference_forest(S: sp.csr_array):
    return reference.minimum_spanning_forest(S.indptr, S.indices, S.data)


# --------------------------------------------------------------------------- reference vs SciPy


@requires_matrices
@pytest.mark.parametrize("name", GRAPH_MATRICES)
def test_reference_real_graphs(name, rng):
    S = symmetric_weighted(datasets.load_matrix(name), rng)
    check_forest(S, *reference_forest(S), distinct=True)


@pytest.mark.parametrize("build", [
    lambda seed: datasets.kronecker(10, 8, seed=seed, weighted=True),
    lambda seed: datasets.grid_graph(30, 40, seed=seed),
    lambda seed: datasets.road_like(40, seed=seed),
], ids=["kron", "grid", "road_like"])
def test_reference_generated_graphs(build, rng):
    S = build(int(rng.integers(1 << 30)))
    check_forest(S, *reference_forest(S), distinct=True)


@pytest.mark.parametrize("index", [np.int32, np.int64])
def test_reference_ties_and_negative_weights(index, rng):
    ties = random_graph(rng, 300, 1500, integer=True, index=index)
    check_forest(ties, *reference_forest(ties), distinct=False)
    negative = random_graph(rng, 300, 900, low=-1.0, index=index)
    negative.data[negative.data == 0] = 0.5
    assert (negative.data < 0).any()
    check_forest(negative, *reference_forest(negative), distinct=True)


def test_reference_disconnected(rng):
    for integer in (False, True):
        S = disconnected_graph(rng, integer=integer)
        assert connected_components(S, directed=False)[0] > 6
        check_forest(S, *reference_forest(S), distinct=not integer)


@pytest.mark.parametrize("n", [0, 1, 4])
def test_reference_no_edges(n):
    rows, cols, w = reference.minimum_spanning_forest(np.zeros(n + 1, np.int32), np.zeros(0, np.int32), np.zeros(0))
    assert rows.size == cols.size == w.size == 0
    loops = sp.csr_array(sp.eye(n) * 2.0)
    assert reference_forest(loops)[0].size == 0


def test_reference_mutual_pairs_and_chains():
    # A path with increasing weights links every vertex to its left neighbour in one round (a
    # chain of n - 1 links, one mutual pair at the light end); equal weights test the tie order.
    n = 50
    for weights in (np.arange(1.0, n), np.ones(n - 1), np.arange(n - 1, 0.0, -1)):
        upper = sp.coo_array((weights, (np.arange(n - 1), np.arange(1, n))), shape=(n, n))
        S = sp.csr_array(upper + upper.T)
        rows, cols, _ = reference_forest(S)
        assert edge_set(rows, cols) == {(i, i + 1) for i in range(n - 1)}
    # A triangle of equal weights keeps its two lexicographically smallest edges.
    S = sp.csr_array(np.ones((3, 3)) - np.eye(3))
    assert edge_set(*reference_forest(S)[:2]) == {(0, 1), (0, 2)}


# --------------------------------------------------------------------------- GPU kernels

if GPU:
    import cupy

    from sparsegpu.csgraph import _device_mst as device


def poison_memory_pool() -> None:
    """Fill the pool's free blocks with 0xFF, so anything the kernels leave unwritten shows."""
    cupy.get_default_memory_pool().free_all_blocks()
    blocks = [cupy.full(1 << 22, -1, dtype=np.int64) for _ in range(8)]
    del blocks


def gpu_forest(S: sp.csr_array):
    poison_memory_pool()
    rows, cols, w = device.minimum_spanning_forest(cupy.asarray(S.indptr), cupy.asarray(S.indices),
                                                   cupy.asarray(S.data))
    return rows.get(), cols.get(), w.get()


def check_gpu(S: sp.csr_array, *, distinct: bool, twice: bool = True) -> None:
    rows, cols, w = gpu_forest(S)
    expected = reference_forest(S)
    index = np.result_type(S.indptr.dtype, S.indices.dtype)
    assert rows.dtype == cols.dtype == index
    for got, want in zip((rows, cols, w), expected):
        np.testing.assert_array_equal(got, want)
    check_forest(S, rows, cols, w, distinct=distinct)
    if twice:
        again = gpu_forest(S)
        for first, second in zip((rows, cols, w), again):
            assert first.tobytes() == second.tobytes()


@pytest.mark.gpu
@requires_matrices
@pytest.mark.parametrize("name", GRAPH_MATRICES)
def test_gpu_real_graphs(name, rng):
    check_gpu(symmetric_weighted(datasets.load_matrix(name), rng), distinct=True)


@pytest.mark.gpu
@pytest.mark.parametrize("build", [
    lambda seed: datasets.kronecker(14, 16, seed=seed, weighted=True),
    lambda seed: datasets.grid_graph(200, 300, seed=seed),
    lambda seed: datasets.road_like(300, seed=seed),
], ids=["kron", "grid", "road_like"])
def test_gpu_generated_graphs(build, rng):
    check_gpu(build(int(rng.integers(1 << 30))), distinct=True)


@pytest.mark.gpu
@pytest.mark.parametrize("index", [np.int32, np.int64])
def test_gpu_ties_negative_and_disconnected(index, rng):
    check_gpu(random_graph(rng, 3000, 20000, integer=True, index=index), distinct=False)
    check_gpu(random_graph(rng, 2000, 6000, low=-1.0, index=index), distinct=True)
    check_gpu(disconnected_graph(rng, integer=True, index=index), distinct=False)
    grid_ties = symmetric_weighted(datasets.grid_graph(150, 150, weighted=False), rng, integer=True, index=index)
    check_gpu(grid_ties, distinct=False)


@pytest.mark.gpu
@pytest.mark.parametrize("compact_below", [0.0, 1.01], ids=["never-compact", "always-compact"])
def test_gpu_compaction_policy(compact_below, monkeypatch, rng):
    # Dead edges left in the list (skipped) and dropped every round give the same forest.
    monkeypatch.setattr(device, "COMPACT_BELOW", compact_below)
    check_gpu(datasets.kronecker(12, 8, seed=int(rng.integers(1 << 30)), weighted=True), distinct=True)
    check_gpu(random_graph(rng, 4000, 12000, integer=True, index=np.int64), distinct=False, twice=False)


@pytest.mark.gpu
def test_gpu_mutual_pairs_and_chains():
    n = 5000  # one round links a chain of n - 1 components
    for weights in (np.arange(1.0, n), np.ones(n - 1), np.arange(n - 1, 0.0, -1)):
        upper = sp.coo_array((weights, (np.arange(n - 1), np.arange(1, n))), shape=(n, n))
        check_gpu(sp.csr_array(upper + upper.T), distinct=False, twice=False)


@pytest.mark.gpu
@pytest.mark.parametrize("n", [0, 1, 5])
@pytest.mark.parametrize("index", [np.int32, np.int64])
def test_gpu_no_edges(n, index):
    empty = sp.csr_array((n, n))
    loops = sp.csr_array(sp.eye(n) * 3.0)
    for S in (empty, loops):
        S.indptr, S.indices = S.indptr.astype(index), S.indices.astype(index)
        rows, cols, w = gpu_forest(S)
        assert rows.size == cols.size == w.size == 0
        assert rows.dtype == np.dtype(index) and w.dtype == np.float64

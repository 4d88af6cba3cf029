"""Triangles and Jaccard similarity (sparsegpu.csgraph.common_neighbours) against NetworkX, the NumPy
reference of kernels/graph_triangles.cu against brute-force set intersections, and (marked
``gpu``) the kernel against its reference and the GPU API against NetworkX, twice, bit for bit.

NetworkX's graph is the ``networkx.Graph`` of A's structure: every stored entry an edge (self
loops included), read both ways.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.sparse as sp

from sparsegpu import datasets
from sparsegpu.csgraph import common_neighbours as module
from sparsegpu.csgraph.common_neighbours import jaccard, triangle_count, triangles
from sparsegpu.reference import graph_triangles as reference
from tests.conftest import to_numpy
from tests.csgraph.graphs import (
    random_digraph,
    real_graph,
    real_params,
    with_int64_indices,
)

nx = pytest.importorskip("networkx")

METHODS = ["intersection", "product"]
#: Real graphs NetworkX counts in about a second each.
REAL = ("ego-Facebook", "as-caida", "email-Enron", "bio-dmela", "tech-WHOIS")


# ------------------------------------------------------------------------------- oracles


def nx_graph(A) -> nx.Graph:
    coo = sp.coo_array(A)
    G = nx.Graph()
    G.add_nodes_from(range(A.shape[0]))
    G.add_edges_from(zip(coo.row.tolist(), coo.col.tolist()))
    return G


def nx_triangles(A) -> np.ndarray:
    counts = nx.triangles(nx_graph(A))
    return np.array([counts[v] for v in range(A.shape[0])], dtype=np.int64)


def nx_jaccard(A, pairs, G=None) -> np.ndarray:
    G = nx_graph(A) if G is None else G
    ebunch = [(int(u), int(v)) for u, v in pairs]
    return np.array([p for _, _, p in nx.jaccard_coefficient(G, ebunch)], dtype=np.float64)


def nx_edges(A) -> tuple[np.ndarray, np.ndarray]:
    """The edges u < v of A's undirected graph, by row then column."""
    coo = sp.coo_array(A)
    keys = np.unique(np.minimum(coo.row, coo.col).astype(np.int64) * max(A.shape[0], 1) + np.maximum(coo.row, coo.col))
    rows, cols = keys // max(A.shape[0], 1), keys % max(A.shape[0], 1)
    keep = rows != cols
    return rows[keep], cols[keep]


def check_triangles(A, **options) -> np.ndarray:
    """triangles (both methods) equal NetworkX's; triangle_count is their sum over 3."""
    want = nx_triangles(A)
    for method in METHODS:
        got = triangles(A, method=method, backend="cpu", **options)
        assert got.dtype == np.int64 and got.shape == want.shape
        np.testing.assert_array_equal(got, want, err_msg=method)
        assert triangle_count(A, method=method, backend="cpu") == int(want.sum()) // 3
    assert int(want.sum()) % 3 == 0
    return want


def check_jaccard_edges(A) -> None:
    """jaccard(A) gives every edge u < v once, in order, with NetworkX's values, bit for bit."""
    rows, cols, values = jaccard(A, backend="cpu")
    want_rows, want_cols = nx_edges(A)
    np.testing.assert_array_equal(rows, want_rows)
    np.testing.assert_array_equal(cols, want_cols)
    assert rows.dtype == cols.dtype == np.int64 and values.dtype == np.float64
    np.testing.assert_array_equal(values, nx_jaccard(A, zip(rows, cols)))


def random_pairs(rng, A, k) -> np.ndarray:
    """k pairs: random ones, edges (both orders) and a vertex with itself."""
    n = A.shape[0]
    coo = sp.coo_array(A)
    picks = rng.integers(0, max(coo.nnz, 1), k // 3) if coo.nnz else np.zeros(0, dtype=np.int64)
    edges = np.stack([coo.row[picks], coo.col[picks]], axis=1) if coo.nnz else np.zeros((0, 2), dtype=np.int64)
    same = np.repeat(rng.integers(0, n, k // 6)[:, None], 2, axis=1)
    anything = rng.integers(0, n, (k - len(edges) - len(same), 2))
    return np.concatenate([edges[: k // 6], edges[k // 6:, ::-1], same, anything]).astype(np.int64)


def undirected_kron(scale, rng) -> sp.csr_array:
    return datasets.kronecker(scale, 8, seed=int(rng.integers(1 << 30)))


# ---------------------------------------------------------------------------- real graphs


@pytest.mark.parametrize("name", real_params(REAL))
def test_triangles_on_real_graphs(name):
    check_triangles(real_graph(name))


@pytest.mark.parametrize("name", real_params(REAL))
def test_jaccard_on_real_graphs(rng, name):
    A = real_graph(name)
    G = nx_graph(A)
    pairs = random_pairs(rng, A, 3000)
    np.testing.assert_array_equal(jaccard(A, pairs, backend="cpu"), nx_jaccard(A, pairs, G))
    rows, cols, values = jaccard(A, backend="cpu")
    want_rows, want_cols = nx_edges(A)
    np.testing.assert_array_equal(rows, want_rows)
    np.testing.assert_array_equal(cols, want_cols)
    sample = rng.choice(rows.size, min(rows.size, 3000), replace=False)
    np.testing.assert_array_equal(values[sample], nx_jaccard(A, zip(rows[sample], cols[sample]), G))
    np.testing.assert_array_equal(values[sample], jaccard(A, np.stack([rows[sample], cols[sample]], 1),
                                                         backend="cpu"))
    for method in ("intersection", "product"):  # each way of counting gives the same bits
        for got, want in zip(jaccard(A, method=method, backend="cpu"), (rows, cols, values)):
            np.testing.assert_array_equal(got, want)


# ------------------------------------------------------------------------ generated graphs


@pytest.mark.parametrize("scale", [10, 11, 12, 13, 14])
def test_triangles_on_kronecker_graphs(rng, scale):
    A = undirected_kron(scale, rng)
    want = check_triangles(A)
    assert want.sum() > 0
    if scale <= 11:
        check_jaccard_edges(A)


def test_grids_have_no_triangles(rng):
    for shape in [(1, 1), (1, 7), (20, 30), (41, 3)]:
        A = datasets.grid_graph(*shape, seed=int(rng.integers(1 << 30)))
        for method in METHODS:
            assert not triangles(A, method=method, backend="cpu").any()
            assert triangle_count(A, method=method, backend="cpu") == 0
        rows, cols, values = jaccard(A, backend="cpu")
        assert rows.size == A.nnz // 2 and (rows < cols).all() and not values.any()  # grid neighbours share no neighbour


@pytest.mark.parametrize("n", [1, 2, 3, 4, 9, 30])
def test_complete_graphs(n):
    A = sp.csr_array(np.ones((n, n)) - np.eye(n))
    for method in METHODS:
        assert triangles(A, method=method, backend="cpu").tolist() == [(n - 1) * (n - 2) // 2] * n
        assert triangle_count(A, method=method, backend="cpu") == n * (n - 1) * (n - 2) // 6
    rows, cols, values = jaccard(A, backend="cpu")
    assert list(zip(rows.tolist(), cols.tolist())) == list(itertools.combinations(range(n), 2))
    np.testing.assert_array_equal(values, np.full(n * (n - 1) // 2, (n - 2) / n))
    check_jaccard_edges(A)


# ------------------------------------------------------------------------- input shapes


def test_directed_input_is_symmetrised(rng):
    for _ in range(3):
        S = random_digraph(rng, n=int(rng.integers(50, 400)), degree=float(rng.uniform(1, 8)))
        check_triangles(S)
        check_jaccard_edges(S)
        pairs = random_pairs(rng, S, 500)
        np.testing.assert_array_equal(jaccard(S, pairs, backend="cpu"), nx_jaccard(S, pairs))
        # One direction of every edge gives the same graph.
        P = sp.csr_array(S, copy=True)
        P.data[:] = 1.0  # SciPy's sum would drop a pair of explicit zeros
        upper = sp.triu(P + P.T, format="csr")
        np.testing.assert_array_equal(triangles(upper, backend="cpu"), triangles(S, backend="cpu"))


def test_explicit_zeros_are_edges_and_dense_zeros_are_not(rng):
    A = sp.csr_array((np.zeros(3), ([0, 1, 0], [1, 2, 2])), shape=(4, 4))  # a triangle of zero weights
    assert triangles(A, backend="cpu").tolist() == [1, 1, 1, 0]
    dense = np.array([[0, 2.0, np.inf], [0, 0, 3], [np.nan, 0, 0]])  # inf, NaN: no edge
    assert triangles(dense, backend="cpu").tolist() == [0, 0, 0]
    dense[0, 2] = -1.5  # weights are ignored
    assert triangle_count(dense, backend="cpu") == 1


def test_self_loops(rng):
    """Triangles ignore self loops; Jaccard counts a loop in the vertex's own neighbour set, as
    NetworkX does (the common neighbours never include the pair's vertices)."""
    S = sp.csr_array(random_digraph(rng, n=300, degree=4, self_loops=True))
    S = sp.csr_array(S + sp.diags_array(rng.random(300) < 0.3, dtype=np.float64), copy=True)
    loops = S.diagonal() != 0
    assert loops.any()
    loop_free = S - sp.diags_array(S.diagonal())
    loop_free.eliminate_zeros()
    np.testing.assert_array_equal(check_triangles(S), nx_triangles(loop_free))
    coo = sp.coo_array(S)
    adjacent_loops = np.flatnonzero(loops[coo.row] & (coo.row != coo.col))
    pairs = np.concatenate([random_pairs(rng, S, 600), np.stack([coo.row, coo.col], 1)[adjacent_loops],
                            np.repeat(np.flatnonzero(loops)[:, None], 2, axis=1)])
    np.testing.assert_array_equal(jaccard(S, pairs, backend="cpu"), nx_jaccard(S, pairs))
    check_jaccard_edges(S)
    # A lone vertex with a loop: N(0) = {0}, no common neighbour but itself.
    assert jaccard(np.array([[1.0]]), [[0, 0]], backend="cpu").tolist() == [0.0]
    assert nx_jaccard(np.array([[1.0]]), [(0, 0)]).tolist() == [0.0]


def test_duplicates_count_once(rng):
    S = random_digraph(rng, n=200, degree=5, duplicates=False, fmt="coo")
    doubled = sp.coo_array((np.concatenate([S.data, S.data]), (np.concatenate([S.row, S.col]),
                                                               np.concatenate([S.col, S.row]))), shape=S.shape)
    assert doubled.nnz == 2 * S.nnz  # not summed yet: every edge stored twice or more
    np.testing.assert_array_equal(check_triangles(doubled), triangles(S, backend="cpu"))
    values = jaccard(doubled, backend="cpu")[2]
    np.testing.assert_array_equal(values, jaccard(S, backend="cpu")[2])


def test_isolated_vertices_and_tiny_graphs():
    for n in [0, 1, 2, 5]:
        A = sp.csr_array((n, n))
        for method in METHODS:
            got = triangles(A, method=method, backend="cpu")
            assert got.dtype == np.int64 and got.tolist() == [0] * n
            assert triangle_count(A, method=method, backend="cpu") == 0
        rows, cols, values = jaccard(A, backend="cpu")
        assert rows.size == cols.size == values.size == 0 and values.dtype == np.float64
        assert jaccard(A, np.zeros((0, 2), dtype=np.int64), backend="cpu").shape == (0,)
        if n:
            assert jaccard(A, [[0, n - 1]], backend="cpu").tolist() == [0.0]  # empty union: 0, as NetworkX
    # A triangle and a square apart from isolated vertices.
    rows, cols = [2, 3, 2, 6, 7, 8, 9], [3, 5, 5, 7, 8, 9, 6]
    A = sp.csr_array((np.ones(7), (rows, cols)), shape=(12, 12))
    assert triangles(A, backend="cpu").tolist() == [0, 0, 1, 1, 0, 1] + [0] * 6
    check_triangles(A)
    check_jaccard_edges(A)


def test_int64_indices(rng):
    S = undirected_kron(10, rng)
    wide = with_int64_indices(S)
    assert wide.indices.dtype == np.int64
    for method in METHODS:
        np.testing.assert_array_equal(triangles(wide, method=method, backend="cpu"), nx_triangles(S))
    pairs = random_pairs(rng, S, 400)
    np.testing.assert_array_equal(jaccard(wide, pairs, backend="cpu"), jaccard(S, pairs, backend="cpu"))
    np.testing.assert_array_equal(jaccard(wide, pairs.astype(np.int32), backend="cpu"), nx_jaccard(S, pairs))


def test_nodes_argument(rng):
    A = undirected_kron(9, rng)
    every = triangles(A, backend="cpu")
    nodes = rng.integers(0, A.shape[0], 50)
    np.testing.assert_array_equal(triangles(A, nodes, backend="cpu"), every[nodes])
    np.testing.assert_array_equal(triangles(A, nodes.tolist(), backend="cpu"), every[nodes])
    v = int(np.argmax(every))
    got = triangles(A, np.int32(v), backend="cpu")
    assert isinstance(got, int) and got == every[v] == nx.triangles(nx_graph(A), v)
    assert triangles(A, [], backend="cpu").shape == (0,)


def test_sparsegpu_cpu_matrix_and_deterministic(rng):
    import sparsegpu

    A = undirected_kron(11, rng)
    M = sparsegpu.from_scipy(A, backend="cpu")
    first = triangles(M, method="intersection")
    np.testing.assert_array_equal(first, triangles(A, method="product", backend="cpu"))
    assert first.tobytes() == triangles(M, method="intersection").tobytes()
    one, two = jaccard(M), jaccard(M)
    for a, b in zip(one, two):
        assert a.tobytes() == b.tobytes()


def test_choose_method():
    assert module.choose_method("cpu", 0) == module.choose_method("gpu", 0) == "product"
    assert module.choose_method("cpu", module.CPU_PRODUCT_MAX_WEDGES + 1) == "intersection"
    assert module.choose_method("gpu", module.GPU_PRODUCT_MAX_WEDGES + 1) == "intersection"
    # The GPU's masked product indexes with the graph's own index type: no edge-count limit.
    assert module.choose_method("gpu", 0, 2**31) == module.choose_method("cpu", 0, 2**31) == "product"


def test_degree_orientation_bounds_out_degree(rng):
    A = undirected_kron(12, rng)
    indptr, indices, rows = module.degree_oriented(A.indptr, A.indices, np)
    assert indices.size == A.nnz // 2
    degree = np.diff(A.indptr)
    key_low, key_high = degree[rows] * A.shape[0] + rows, degree[indices] * A.shape[0] + indices
    assert (key_low < key_high).all()
    assert np.diff(indptr).max() <= np.sqrt(A.nnz) + 1  # out-degree below sqrt(2 * edges)


# ---------------------------------------------------------------------------- bad input


def test_bad_pairs():
    A = sp.csr_array(np.ones((4, 4)))
    for pairs, error, words in [
        (np.zeros((3, 3), dtype=np.int64), ValueError, "(k, 2)"),
        (np.zeros(4, dtype=np.int64), ValueError, "(k, 2)"),
        (np.zeros((2, 2, 2), dtype=np.int64), ValueError, "(k, 2)"),
        (np.zeros((2, 1), dtype=np.int64), ValueError, "(k, 2)"),
        ([[0, 4]], ValueError, "pairs holds 4"),
        ([[-1, 0]], ValueError, "pairs holds -1"),
        (np.array([[0.0, 1.0]]), TypeError, "pairs"),
        (np.array([[True, False]]), TypeError, "pairs"),
        ("01", TypeError, "pairs"),
        ([[0, "a"]], TypeError, "pairs"),
        (1.5, TypeError, "pairs"),
    ]:
        with pytest.raises(error, match=words.replace("(", r"\(").replace(")", r"\)")):
            jaccard(A, pairs, backend="cpu")


def test_bad_graphs_nodes_and_methods():
    square = sp.csr_array(np.ones((3, 3)))
    for function in (triangles, triangle_count, jaccard):
        with pytest.raises(ValueError, match="square"):
            function(sp.csr_array(np.ones((3, 4))), backend="cpu")
        with pytest.raises(TypeError, match="complex"):
            function(sp.csr_array(np.ones((3, 3), dtype=complex)), backend="cpu")
        with pytest.raises(TypeError):
            function("graph", backend="cpu")
    for function in (triangles, triangle_count):
        with pytest.raises(ValueError, match="method"):
            function(square, method="masked", backend="cpu")
        with pytest.raises(TypeError, match="method"):
            function(square, method=1, backend="cpu")
    with pytest.raises(ValueError, match="nodes holds 3"):
        triangles(square, 3, backend="cpu")
    with pytest.raises(ValueError, match="nodes holds -1"):
        triangles(square, [0, -1], backend="cpu")
    with pytest.raises(TypeError, match="nodes"):
        triangles(square, 1.0, backend="cpu")
    with pytest.raises(TypeError, match="nodes"):
        triangles(square, [0.5], backend="cpu")


# ----------------------------------------------------------------------- NumPy reference


def brute_common(A, first, second):
    """Common out-neighbours of each pair, with the triangles at each corner and per entry."""
    rows_of = [set(A.indices[A.indptr[v]:A.indptr[v + 1]].tolist()) for v in range(A.shape[0])]
    counts = np.array([len(rows_of[u] & rows_of[v]) for u, v in zip(first, second)], dtype=np.int64)
    corners = np.zeros(A.shape[0], dtype=np.int64)
    entries = np.zeros(A.nnz, dtype=np.int64)
    position = {(u, int(w)): A.indptr[u] + k for u in range(A.shape[0])
                for k, w in enumerate(A.indices[A.indptr[u]:A.indptr[u + 1]])}
    for u, v, c in zip(first, second, counts):
        corners[u] += c
        corners[v] += c
        for w in rows_of[u] & rows_of[v]:
            corners[w] += 1
            entries[position[u, w]] += 1
            entries[position[v, w]] += 1
    return counts, corners, entries


@pytest.mark.parametrize("chunk", [1, 7, reference.CHUNK])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_reference_equals_brute_force(rng, monkeypatch, chunk, dtype):
    monkeypatch.setattr(reference, "CHUNK", chunk)
    n = int(rng.integers(2, 120))
    S = sp.csr_array(random_digraph(rng, n=n, degree=float(rng.uniform(0.5, 12)), isolated=min(3, n - 1)))
    hub = sp.csr_array((np.ones(n), (np.zeros(n, dtype=np.int64), np.arange(n))), shape=(n, n))
    A = sp.csr_array(S + hub)
    A.sum_duplicates()
    A.sort_indices()
    indptr, indices = A.indptr.astype(dtype), A.indices.astype(dtype)
    pairs = rng.integers(0, n, (int(rng.integers(0, 300)), 2))
    first, second = pairs[:, 0].astype(dtype), pairs[:, 1].astype(dtype)
    counts, corners, entries = reference.common_neighbours(indptr, indices, first, second, corners=True, edges=True)
    want = brute_common(A, pairs[:, 0], pairs[:, 1])
    for got, expected in zip((counts, corners, entries), want):
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, expected)
    plain = reference.common_neighbours(indptr, indices, first, second)
    np.testing.assert_array_equal(plain[0], counts)
    assert plain[1] is None and plain[2] is None


def test_reference_finds_each_triangle_once_on_the_oriented_graph(rng):
    A = undirected_kron(10, rng)
    indptr, indices, rows = module.degree_oriented(A.indptr, A.indices, np)
    counts, corners, entries = reference.common_neighbours(indptr, indices, rows, indices, corners=True, edges=True)
    np.testing.assert_array_equal(corners, nx_triangles(A))
    support = (A @ A).multiply(A)  # common neighbours of every edge, both ways
    want = np.asarray(support[rows, indices]).ravel()
    np.testing.assert_array_equal(counts + entries, want)


# ------------------------------------------------------------------------------------- GPU


def poison(nbytes):
    """Fill a pool block of ``nbytes`` with 0xA5 bytes and free it, so the next output of that
    size most likely lands on it and unwritten counts show."""
    import cupy

    if nbytes:
        block = cupy.empty(nbytes, dtype=np.uint8)
        block.fill(0xA5)
        del block


def kernel_inputs(rng, A):
    """(indptr, indices, first, second) twice: the degree-oriented pattern with its edges as the
    pairs (triangles), and A's pattern with random pairs (Jaccard)."""
    indptr, indices, rows = module.degree_oriented(A.indptr, A.indices, np)
    yield indptr, indices, rows, indices
    n = A.shape[0]
    pairs = rng.integers(0, n, (2, 500)) if n else np.zeros((2, 0), dtype=np.int64)
    yield A.indptr, A.indices, pairs[0], pairs[1]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_gpu_kernel_equals_reference(rng, dtype):
    import cupy

    from sparsegpu.csgraph import _device_triangles as device

    hub = sp.csr_array((np.ones(3000), (np.zeros(3000, dtype=np.int64), np.arange(1, 3001))), shape=(3001, 3001))
    graphs = [undirected_kron(12, rng), datasets.grid_graph(30, 40), sp.csr_array((0, 0)), sp.csr_array((3, 3)),
              sp.csr_array(np.ones((200, 200)) - np.eye(200)), sp.csr_array(hub + hub.T)]
    for A in graphs:
        for arrays in kernel_inputs(rng, sp.csr_array(A)):
            want = reference.common_neighbours(*arrays, corners=True, edges=True)
            device_arrays = [cupy.asarray(a.astype(dtype)) for a in arrays]
            runs = []
            for _ in range(2):
                poison(8 * max(arrays[2].size, arrays[1].size, A.shape[0]))
                runs.append([to_numpy(a) for a in device.common_neighbours(*device_arrays, corners=True, edges=True)])
            for got, again, expected in zip(runs[0], runs[1], want):
                assert got.dtype == np.int64
                np.testing.assert_array_equal(got, expected)
                assert got.tobytes() == again.tobytes()
            counts, corners, edges = device.common_neighbours(*device_arrays)
            np.testing.assert_array_equal(to_numpy(counts), want[0])
            assert corners is None and edges is None


@pytest.mark.gpu
@pytest.mark.parametrize("name", real_params(REAL))
def test_gpu_api_on_real_graphs(rng, name):
    import sparsegpu

    A = real_graph(name)
    M = sparsegpu.from_scipy(A, backend="gpu")
    want = nx_triangles(A)
    for method in METHODS:
        got = triangles(M, method=method)
        assert type(got).__module__.startswith("cupy")
        np.testing.assert_array_equal(to_numpy(got), want)
        assert to_numpy(triangles(M, method=method)).tobytes() == to_numpy(got).tobytes()
        assert triangle_count(M, method=method) == int(want.sum()) // 3
    pairs = random_pairs(rng, A, 2000)
    np.testing.assert_array_equal(to_numpy(jaccard(M, pairs)), jaccard(A, pairs, backend="cpu"))
    for got, expected in zip(jaccard(M), jaccard(A, backend="cpu")):
        np.testing.assert_array_equal(to_numpy(got), expected)


@pytest.mark.gpu
def test_gpu_api_on_generated_and_tiny_graphs(rng):
    import cupy

    import sparsegpu

    graphs = [undirected_kron(14, rng), datasets.grid_graph(50, 60), random_digraph(rng, n=500, degree=6),
              sp.csr_array((1, 1)), sp.csr_array(np.ones((1, 1))), with_int64_indices(undirected_kron(10, rng))]
    for A in graphs:
        M = sparsegpu.from_scipy(sp.csr_array(A), backend="gpu")
        want = triangles(A, backend="cpu")
        for method in METHODS:
            np.testing.assert_array_equal(to_numpy(triangles(M, method=method)), want)
        pairs = random_pairs(rng, A, 300)
        got = jaccard(M, cupy.asarray(pairs))
        np.testing.assert_array_equal(to_numpy(got), nx_jaccard(A, pairs))
        want_edges = jaccard(A, backend="cpu")
        for method in METHODS:
            for got, want in zip(jaccard(M, method=method), want_edges):
                np.testing.assert_array_equal(to_numpy(got), want)

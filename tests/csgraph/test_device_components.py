"""Connected components: the NumPy references against SciPy on the CPU, and (marked ``gpu``) the
kernels of sparsegpu.csgraph._device_components against their references and SciPy.

Weak components must equal SciPy's labels exactly (both number components by their smallest
vertex); strong ones must give SciPy's partition, numbered by smallest vertex. GPU outputs land on
poisoned memory, and every GPU result is computed twice and compared bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.csgraph as csgraph

from sparsegpu import datasets
from sparsegpu.reference import graph_components as reference
from tests.conftest import REAL_MATRICES, requires_matrices, to_numpy

INDEX_DTYPES = [np.int32, np.int64]
# Square real matrices small enough for the level-synchronous references.
REAL_GRAPHS = [name for name in REAL_MATRICES
               if datasets.manifest()[name].get("rows") == datasets.manifest()[name].get("cols")
               and int(datasets.manifest()[name].get("nnz_expanded", 0) or 0) <= 3_000_000]


# ------------------------------------------------------------------------------- graph builders


def pattern(rows, cols, n, dtype=np.int32) -> sp.csr_array:
    """The canonical CSR pattern of the edges (rows[k], cols[k]) on n vertices (values 1)."""
    A = sp.csr_array((np.ones(len(rows)), (np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64))),
                     shape=(n, n))
    A.sum_duplicates()
    A.sort_indices()
    A.data[:] = 1.0
    return with_index(A, dtype)


def with_index(A: sp.csr_array, dtype) -> sp.csr_array:
    """A's pattern (every stored entry an edge, value 1) with ``dtype`` indices, canonical."""
    A = sp.csr_array(A)
    A.sum_duplicates()
    A.sort_indices()
    B = sp.csr_array((np.ones(A.nnz), A.indices.astype(dtype), A.indptr.astype(dtype)), shape=A.shape)
    B.has_canonical_format = True
    return B


def random_directed(rng, n, mean_degree, dtype=np.int32, self_loops=0.0) -> sp.csr_array:
    """Uniformly random directed edges, self loops dropped except a share ``self_loops`` of vertices."""
    m = int(rng.poisson(mean_degree * n)) if n else 0
    rows, cols = rng.integers(0, max(n, 1), m), rng.integers(0, max(n, 1), m)
    keep = rows != cols
    loops = np.flatnonzero(rng.random(n) < self_loops)
    return pattern(np.concatenate([rows[keep], loops]), np.concatenate([cols[keep], loops]), n, dtype)


def powerlaw_directed(rng, n, mean_degree, dtype=np.int32) -> sp.csr_array:
    """Directed edges whose ends are drawn with Zipf-like weights (hubs both ways), vertices shuffled."""
    weight = 1.0 / np.arange(1, n + 1) ** 0.8
    weight /= weight.sum()
    m = int(mean_degree * n)
    rows, cols = rng.choice(n, m, p=weight), rng.choice(n, m, p=weight)
    perm = rng.permutation(n)
    keep = rows != cols
    return pattern(perm[rows[keep]], perm[cols[keep]], n, dtype)


def shuffled_cycle(rng, n, dtype=np.int32) -> sp.csr_array:
    order = rng.permutation(n)
    return pattern(order, np.roll(order, -1), n, dtype)


def random_dag(rng, n, mean_degree, dtype=np.int32) -> sp.csr_array:
    """Edges from a lower to a higher rank of a random order: acyclic, n SCCs."""
    rank = rng.permutation(n)
    m = int(mean_degree * n)
    a, b = rng.integers(0, n, m), rng.integers(0, n, m)
    keep = a != b
    low, high = np.minimum(a[keep], b[keep]), np.maximum(a[keep], b[keep])
    return pattern(rank[low], rank[high], n, dtype)


def cycles_in_chain(rng, pieces, size, dtype=np.int32) -> sp.csr_array:
    """``pieces`` cycles of ``size`` vertices, each with an edge into the next: a chain of SCCs
    whose vertex numbers are shuffled (so later SCCs may hold smaller vertices)."""
    n = pieces * size
    base = np.arange(n).reshape(pieces, size)
    rows = [base.ravel(), base[:-1, 0]]
    cols = [np.roll(base, -1, axis=1).ravel(), base[1:, size // 2]]
    perm = rng.permutation(n)
    return pattern(perm[np.concatenate(rows)], perm[np.concatenate(cols)], n, dtype)


def transpose(A: sp.csr_array) -> sp.csr_array:
    return with_index(A.T.tocsr(), A.indices.dtype)


def by_smallest_vertex(labels) -> np.ndarray:
    """Labels renumbered 0, 1, ... in the order of each component's smallest vertex."""
    labels = np.asarray(labels)
    _, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
    rank = np.empty(first.size, dtype=np.int64)
    rank[np.argsort(first)] = np.arange(first.size)
    return rank[inverse.ravel()].astype(np.int32)


def scipy_weak(A):
    count, labels = csgraph.connected_components(A, directed=True, connection="weak")
    return count, labels.astype(np.int32)


def scipy_strong(A):
    count, labels = csgraph.connected_components(A, directed=True, connection="strong")
    return count, by_smallest_vertex(labels)


def small_graphs(rng, dtype):
    """Named graphs with the shapes that matter: empty, one vertex, self loops, isolated vertices,
    cycles, acyclic graphs, chains of SCCs, random and power-law directed graphs, hubs."""
    star_out = pattern(np.zeros(3000, dtype=np.int64), np.arange(1, 3001), 3001, dtype)  # a row past CC_HUB
    return {
        "n0": pattern([], [], 0, dtype),
        "n1": pattern([], [], 1, dtype),
        "n1_self_loop": pattern([0], [0], 1, dtype),
        "isolated": pattern([3, 5], [5, 3], 9, dtype),
        "self_loops": random_directed(rng, 500, 1.2, dtype, self_loops=0.3),
        "cycle": shuffled_cycle(rng, 2000, dtype),
        "dag": random_dag(rng, 1500, 3.0, dtype),
        "chain_of_cycles": cycles_in_chain(rng, 40, 7, dtype),
        "random_sparse": random_directed(rng, 3000, 1.0, dtype),
        "random_dense": random_directed(rng, 2000, 4.0, dtype),
        "powerlaw": powerlaw_directed(rng, 4000, 6.0, dtype),
        "star_out": star_out,
        "star_both": with_index(star_out + star_out.T, dtype),
        "kronecker": with_index(datasets.kronecker(11, 8, seed=int(rng.integers(1 << 30))), dtype),
        "road_like": with_index(datasets.road_like(40, seed=int(rng.integers(1 << 30)), keep=0.55), dtype),
    }


# ============================================================================ CPU: references


@pytest.mark.parametrize("dtype", INDEX_DTYPES)
def test_reference_weak_equals_scipy(rng, dtype):
    for name, A in small_graphs(rng, dtype).items():
        count, labels = reference.weak_components(A.indptr, A.indices)
        want_count, want = scipy_weak(A)
        assert count == want_count, name
        assert labels.dtype == np.int32
        np.testing.assert_array_equal(labels, want, err_msg=name)


@pytest.mark.parametrize("dtype", INDEX_DTYPES)
def test_reference_strong_equals_scipy_partition(rng, dtype):
    for name, A in small_graphs(rng, dtype).items():
        T = transpose(A)
        count, labels = reference.strong_components(A.indptr, A.indices, T.indptr, T.indices)
        want_count, want = scipy_strong(A)
        assert count == want_count, name
        assert labels.dtype == np.int32
        np.testing.assert_array_equal(labels, want, err_msg=name)


def test_reference_counts_of_known_shapes(rng):
    graphs = small_graphs(rng, np.int32)
    for name, count in [("n0", 0), ("n1", 1), ("n1_self_loop", 1), ("cycle", 1), ("dag", 1500),
                        ("chain_of_cycles", 40)]:
        A = graphs[name]
        T = transpose(A)
        assert reference.strong_components(A.indptr, A.indices, T.indptr, T.indices)[0] == count, name
    assert reference.weak_components(graphs["isolated"].indptr, graphs["isolated"].indices)[0] == 8


def test_number_by_smallest_vertex():
    count, labels = reference.number_by_smallest(np.array([0, 1, 0, 3, 1, 3]))
    assert count == 3 and labels.tolist() == [0, 1, 0, 2, 1, 2]


@requires_matrices
@pytest.mark.parametrize("name", REAL_GRAPHS)
def test_reference_on_real_graphs(name):
    A = with_index(datasets.load_matrix(name), np.int32)
    count, labels = reference.weak_components(A.indptr, A.indices)
    want_count, want = scipy_weak(A)
    assert count == want_count
    np.testing.assert_array_equal(labels, want)
    if A.shape[0] <= 40_000:  # the strong reference is level-synchronous: long roads take long
        T = transpose(A)
        count, labels = reference.strong_components(A.indptr, A.indices, T.indptr, T.indices)
        want_count, want = scipy_strong(A)
        assert count == want_count
        np.testing.assert_array_equal(labels, want)


# ============================================================================== GPU: kernels


def poison(nbytes):
    """Fill a pool block of ``nbytes`` with 0xA5 bytes and free it, so the next output of that
    size most likely lands on it and unwritten labels show."""
    import cupy

    if nbytes:
        block = cupy.empty(nbytes, dtype=np.uint8)
        block.fill(0xA5)
        del block


def device_csr(A):
    import cupy

    return cupy.asarray(A.indptr), cupy.asarray(A.indices)


def run_twice(function, *arrays, **options):
    """The kernel's (count, labels) on poisoned memory, checked to be bitwise the same on a second run."""
    n = arrays[0].size - 1
    results = []
    for _ in range(2):
        poison(4 * max(n, 0))
        count, labels = function(*arrays, **options)
        results.append((count, to_numpy(labels)))
    (count, labels), (count2, labels2) = results
    assert count == count2 and labels.dtype == np.int32 and labels.tobytes() == labels2.tobytes()
    return count, labels


def check_weak(A, symmetric_options=(False,)):
    from sparsegpu.csgraph import _device_components as device

    want_count, want = scipy_weak(A)
    ref_count, ref = reference.weak_components(A.indptr, A.indices)
    assert ref_count == want_count
    np.testing.assert_array_equal(ref, want)
    for symmetric in symmetric_options:
        count, labels = run_twice(device.weak_components, *device_csr(A), symmetric=symmetric)
        assert count == want_count, f"symmetric={symmetric}"
        np.testing.assert_array_equal(labels, want, err_msg=f"symmetric={symmetric}")


def check_strong(A):
    from sparsegpu.csgraph import _device_components as device

    T = transpose(A)
    want_count, want = scipy_strong(A)
    count, labels = run_twice(device.strong_components, *device_csr(A), *device_csr(T))
    assert count == want_count
    np.testing.assert_array_equal(labels, want)
    return count, labels


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", INDEX_DTYPES)
def test_gpu_weak_on_small_graphs(rng, dtype):
    for name, A in small_graphs(rng, dtype).items():
        symmetric = (A != A.T).nnz == 0
        try:
            check_weak(A, (False, True) if symmetric else (False,))
        except AssertionError as error:
            raise AssertionError(f"{name}: {error}") from None


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", INDEX_DTYPES)
def test_gpu_strong_on_small_graphs(rng, dtype):
    for name, A in small_graphs(rng, dtype).items():
        try:
            count, labels = check_strong(A)
        except AssertionError as error:
            raise AssertionError(f"{name}: {error}") from None
        T = transpose(A)
        ref_count, ref = reference.strong_components(A.indptr, A.indices, T.indptr, T.indices)
        assert count == ref_count, name
        np.testing.assert_array_equal(labels, ref, err_msg=name)


@pytest.mark.gpu
@requires_matrices
@pytest.mark.parametrize("name", REAL_GRAPHS)
def test_gpu_components_on_real_graphs(name):
    A = with_index(datasets.load_matrix(name), np.int32)
    check_weak(A, (False, True) if (A != A.T).nnz == 0 else (False,))
    check_strong(A)
    check_strong(with_index(A, np.int64))


@pytest.mark.gpu
def test_gpu_components_on_large_generated_graphs(rng):
    kron = datasets.kronecker(16, 16, seed=int(rng.integers(1 << 30)))
    check_weak(kron, (False, True))
    road = datasets.road_like(300, seed=int(rng.integers(1 << 30)), keep=0.6)
    check_weak(road, (False, True))
    grid = datasets.grid_graph(200, 300, seed=1, weighted=False)
    check_weak(grid, (False, True))
    for A in (random_directed(rng, 200_000, 1.5), random_directed(rng, 100_000, 3.0),
              powerlaw_directed(rng, 200_000, 5.0), cycles_in_chain(rng, 500, 20),
              random_dag(rng, 100_000, 4.0), shuffled_cycle(rng, 20_000)):
        check_weak(A)
        check_strong(A)
    check_strong(with_index(random_directed(rng, 50_000, 2.0), np.int64))

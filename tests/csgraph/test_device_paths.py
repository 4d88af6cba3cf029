"""Shortest paths: the NumPy reference (sparsegpu.reference.graph_paths) against SciPy on the CPU,
and the GPU kernels (sparsegpu.csgraph._device_paths) against both (skipped without a GPU).

Distances are the greatest fixed point of d[v] = min(d[v], d[u] + w) under float rounding, the
same bits for every correct order of relaxations, so non-negative cases compare bit for bit with
SciPy's Dijkstra; Bellman-Ford compares within 1e-12 relative, as the contract asks.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.csgraph import NegativeCycleError, bellman_ford, dijkstra

from sparsegpu import datasets
from sparsegpu.reference import graph_paths as reference
from tests.conftest import REAL_MATRICES, requires_gpu, requires_matrices, to_numpy

NONE = -9999
SMALL_REAL = [name for name in ("bcspwr10", "as-caida", "email-Enron", "bio-dmela", "ego-Facebook", "ct2010")
              if name in REAL_MATRICES]


def canonical(matrix, index_dtype=np.int32) -> sp.csr_array:
    csr = sp.csr_array(matrix, dtype=np.float64)
    csr.sum_duplicates()
    csr.sort_indices()
    csr.indptr = csr.indptr.astype(index_dtype)
    csr.indices = csr.indices.astype(index_dtype)
    return csr


def random_directed(rng, n, density, *, zeros=0.0, self_loops=True) -> sp.csr_array:
    """A random directed graph with weights in (0, 1]; a share ``zeros`` of them stored zeros
    (zero-weight edges for SciPy)."""
    m = max(1, int(density * n * n))
    rows, cols = rng.integers(0, n, m), rng.integers(0, n, m)
    if not self_loops:
        keep = rows != cols
        rows, cols = rows[keep], cols[keep]
    weights = 1.0 - rng.random(rows.size)
    weights[rng.random(rows.size) < zeros] = 0.0
    pairs, first = np.unique(rows * n + cols, return_index=True)  # one weight per edge
    csr = sp.csr_array((weights[first], (pairs // n, pairs % n)), shape=(n, n))
    return canonical(csr)


def with_random_weights(rng, matrix) -> sp.csr_array:
    csr = canonical(matrix)
    csr.data = 1.0 - rng.random(csr.nnz)
    return csr


def generated_graphs(rng) -> dict[str, sp.csr_array]:
    return {
        "kron": canonical(datasets.kronecker(10, 8, seed=int(rng.integers(1000)), weighted=True)),
        "grid": canonical(datasets.grid_graph(30, 40, seed=int(rng.integers(1000)))),
        "road": canonical(datasets.road_like(60, seed=int(rng.integers(1000)))),
        "directed": random_directed(rng, 500, 0.01),
        "zero_weights": random_directed(rng, 300, 0.01, zeros=0.4),
        "isolated": canonical(sp.block_diag([random_directed(rng, 100, 0.05), sp.csr_array((50, 50))])),
        "int64": canonical(datasets.grid_graph(20, 20, seed=int(rng.integers(1000))), np.int64),
    }


def arrays(csr):
    return csr.indptr, csr.indices, csr.data


def assert_valid_tree(csr, dist, preds, sources, source_of=None):
    """preds is a shortest-path forest rooted at ``sources``: every reached non-source vertex
    hangs from an in-neighbour with d[p] + w == d[v] exactly, chains end at a source (no cycle),
    and unreached vertices and sources have none."""
    dist, preds, sources = np.asarray(dist), np.asarray(preds).astype(np.int64), np.unique(sources)
    n = len(dist)
    reached = np.isfinite(dist)
    is_source = np.zeros(n, bool)
    is_source[sources] = True
    assert np.all(preds[~reached | is_source] == NONE)
    children = np.flatnonzero(reached & ~is_source)
    parents = preds[children]
    assert np.all(parents >= 0) and np.all(parents < n)
    keys = np.repeat(np.arange(n, dtype=np.int64), np.diff(csr.indptr)) * n + csr.indices  # sorted
    wanted = parents * n + children
    at = np.minimum(np.searchsorted(keys, wanted), max(len(keys) - 1, 0))
    assert len(keys) or not len(wanted)
    assert np.all(keys[at] == wanted), "a predecessor is not an in-neighbour"
    assert np.array_equal(dist[parents] + csr.data[at], dist[children]), "a tree edge is not tight"
    root = np.where(preds >= 0, preds, np.arange(n))
    for _ in range(int(np.ceil(np.log2(max(n, 2)))) + 1):
        root = root[root]
    assert np.all(is_source[root[reached]]), "the predecessors have a cycle"
    if source_of is not None:
        source_of = np.asarray(source_of).astype(np.int64)
        assert np.array_equal(source_of[reached], root[reached])
        assert np.all(source_of[~reached] == NONE)


# ----------------------------------------------------------------------------- reference vs SciPy


@pytest.mark.parametrize("name", ["kron", "grid", "road", "directed", "zero_weights", "isolated", "int64"])
def test_reference_delta_stepping_matches_dijkstra(rng, name):
    csr = generated_graphs(rng)[name]
    source = int(rng.integers(csr.shape[0]))
    dist, preds, source_of = reference.delta_stepping(*arrays(csr), np.array([source]), nearest_source=True)
    want = dijkstra(csr, directed=True, indices=source)
    assert np.array_equal(dist, want)
    assert preds.dtype == csr.indices.dtype
    assert_valid_tree(csr, dist, preds, [source], source_of)


@pytest.mark.parametrize("name", ["kron", "road", "zero_weights"])
def test_reference_several_sources_and_limit(rng, name):
    csr = generated_graphs(rng)[name]
    sources = rng.choice(csr.shape[0], size=4, replace=False)
    sources = np.concatenate([sources, sources[:1]])  # a repeated source changes nothing
    dist, preds, source_of = reference.delta_stepping(*arrays(csr), sources, nearest_source=True)
    want, _, want_sources = dijkstra(csr, indices=sources, min_only=True, return_predecessors=True)
    assert np.array_equal(dist, want)
    assert_valid_tree(csr, dist, preds, sources, source_of)
    reached = np.isfinite(dist)
    per_source = dijkstra(csr, indices=source_of[reached])  # (one row per reached vertex)
    assert np.array_equal(per_source[np.arange(reached.sum()), np.flatnonzero(reached)], dist[reached])
    assert np.array_equal(source_of == NONE, want_sources == NONE)
    limit = float(np.median(dist[reached])) if reached.any() else 1.0
    limited, limited_preds, _ = reference.delta_stepping(*arrays(csr), sources, limit=limit)
    assert np.array_equal(limited, dijkstra(csr, indices=sources, min_only=True, limit=limit))
    assert_valid_tree(csr, limited, limited_preds, sources)


def zero_ring(rng, n, step) -> sp.csr_array:
    """A random directed graph plus the zero-weight ring i -> i + step (mod n)."""
    coo = sp.coo_array(random_directed(rng, n, 0.02, zeros=0.3))
    rows = np.concatenate([coo.row, np.arange(n)])
    cols = np.concatenate([coo.col, (np.arange(n) + step) % n])
    weights = np.concatenate([coo.data, np.zeros(n)])
    pairs, last = np.unique((rows * n + cols)[::-1], return_index=True)  # the ring's zeros win
    csr = canonical(sp.csr_array((np.ones(pairs.size), (pairs // n, pairs % n)), shape=(n, n)))
    csr.data = weights[::-1][last]  # (set after construction: stored zeros stay)
    return csr


def test_reference_zero_weight_cycles_give_an_acyclic_tree(rng):
    n = 200
    csr = zero_ring(rng, n, 1)
    for source in rng.choice(n, 3, replace=False):
        dist, preds, _ = reference.delta_stepping(*arrays(csr), np.array([source]))
        assert np.array_equal(dist, dijkstra(csr, indices=source))
        assert np.all(dist == 0.0)
        assert_valid_tree(csr, dist, preds, [source])


def potential_shifted(rng, csr) -> sp.csr_array:
    """Weights w + p[u] - p[v] with w > 0: many negative edges, no negative cycle."""
    shifted = csr.copy()
    potential = rng.uniform(0, 3, csr.shape[0])
    tails = np.repeat(np.arange(csr.shape[0]), np.diff(csr.indptr))
    shifted.data = csr.data + 0.1 + potential[tails] - potential[csr.indices]
    shifted.data[shifted.data == 0] = 0.5
    return shifted


@pytest.mark.parametrize("name", ["directed", "kron", "road", "int64"])
def test_reference_bellman_ford_matches_scipy(rng, name):
    csr = potential_shifted(rng, generated_graphs(rng)[name])
    assert (csr.data < 0).any()
    source = int(rng.integers(csr.shape[0]))
    dist, preds = reference.bellman_ford(*arrays(csr), source)
    want = bellman_ford(csr, directed=True, indices=source)
    np.testing.assert_allclose(dist, want, rtol=1e-12, atol=0)
    assert np.array_equal(np.isinf(dist), np.isinf(want))
    assert_valid_tree(csr, dist, preds, [source])


def negative_cycle_graph(rng, reachable: bool) -> tuple[sp.csr_array, int]:
    """A random graph plus the cycle 40 -> 41 -> 42 -> 40 of weight -0.5, reachable from the
    returned source or (no edge into 40..42 from elsewhere) not."""
    n = 60
    coo = sp.coo_array(random_directed(rng, n, 0.05, self_loops=False))
    keep = reachable | (coo.col < 40) | (coo.col > 42) | ((coo.row >= 40) & (coo.row <= 42))
    rows = np.concatenate([coo.row[keep], [40, 41, 42, 0]])
    cols = np.concatenate([coo.col[keep], [41, 42, 40, 40 if reachable else 1]])
    weights = np.concatenate([coo.data[keep], [1.0, -2.0, 0.5, 1.0]])
    pairs, last = np.unique((rows * n + cols)[::-1], return_index=True)  # the cycle's weights win
    csr = sp.csr_array((weights[::-1][last], (pairs // n, pairs % n)), shape=(n, n))
    return canonical(csr), 0


def test_reference_bellman_ford_negative_cycles(rng):
    csr, source = negative_cycle_graph(rng, reachable=True)
    with pytest.raises(NegativeCycleError):
        bellman_ford(csr, directed=True, indices=source)
    with pytest.raises(NegativeCycleError, match="Negative cycle detected on node"):
        reference.bellman_ford(*arrays(csr), source)
    csr, source = negative_cycle_graph(rng, reachable=False)
    dist, preds = reference.bellman_ford(*arrays(csr), source)
    np.testing.assert_allclose(dist, bellman_ford(csr, directed=True, indices=source), rtol=1e-12)
    assert np.isinf(dist[40:43]).all()
    assert_valid_tree(csr, dist, preds, [source])
    loop = canonical(sp.csr_array(np.array([[-1.0]])))
    with pytest.raises(NegativeCycleError):
        reference.bellman_ford(*arrays(loop), 0)


def test_reference_tiny_graphs():
    empty = canonical(sp.csr_array((0, 0)))
    dist, preds, source_of = reference.delta_stepping(*arrays(empty), np.array([], np.int64), nearest_source=True)
    assert dist.shape == preds.shape == source_of.shape == (0,)
    one = canonical(sp.csr_array(np.array([[2.5]])))  # a self loop
    dist, preds, source_of = reference.delta_stepping(*arrays(one), np.array([0]), nearest_source=True)
    assert dist.tolist() == [0.0] and preds.tolist() == [NONE] and source_of.tolist() == [0]
    dist, preds = reference.bellman_ford(*arrays(one), 0)
    assert dist.tolist() == [0.0] and preds.tolist() == [NONE]
    lonely = canonical(sp.csr_array((3, 3)))
    dist, preds, _ = reference.delta_stepping(*arrays(lonely), np.array([1]))
    assert dist.tolist() == [np.inf, 0.0, np.inf] and preds.tolist() == [NONE] * 3


@requires_matrices
@pytest.mark.parametrize("name", SMALL_REAL[:3])
def test_reference_real_graphs(rng, name):
    csr = with_random_weights(rng, datasets.load_matrix(name))
    source = int(rng.integers(csr.shape[0]))
    dist, preds, _ = reference.delta_stepping(*arrays(csr), np.array([source]))
    assert np.array_equal(dist, dijkstra(csr, indices=source))
    assert_valid_tree(csr, dist, preds, [source])


def test_choose_delta_rule():
    assert reference.choose_delta(10, 0, 0.0) == 1.0
    assert reference.choose_delta(100, 400, 200.0) == pytest.approx(reference.DELTA_WARPS * 0.5 / 4)


# ----------------------------------------------------------------------------- GPU


def device_arrays(csr):
    import cupy

    return cupy.asarray(csr.indptr), cupy.asarray(csr.indices), cupy.asarray(csr.data)


def poison_pool(nbytes: int) -> None:
    """Fill a pool block with 0xA5 bytes and free it: outputs of that size likely land on it."""
    import cupy

    block = cupy.empty(max(nbytes, 1), dtype=np.uint8)
    block.fill(0xA5)
    del block


def gpu_delta_stepping(csr, sources, **options):
    from sparsegpu.csgraph import _device_paths

    poison_pool(8 * csr.shape[0])
    dist, preds, source_of = _device_paths.delta_stepping(*device_arrays(csr), np.asarray(sources), **options)
    return to_numpy(dist), None if preds is None else to_numpy(preds), None if source_of is None else to_numpy(source_of)


def gpu_bellman_ford(csr, source, **options):
    from sparsegpu.csgraph import _device_paths

    poison_pool(8 * csr.shape[0])
    dist, preds = _device_paths.bellman_ford(*device_arrays(csr), source, **options)
    return to_numpy(dist), None if preds is None else to_numpy(preds)


@requires_gpu
@pytest.mark.parametrize("name", ["kron", "grid", "road", "directed", "zero_weights", "isolated", "int64"])
def test_gpu_delta_stepping_matches_reference_and_scipy(rng, name):
    csr = generated_graphs(rng)[name]
    sources = rng.choice(csr.shape[0], size=int(rng.integers(1, 4)), replace=False)
    dist, preds, source_of = gpu_delta_stepping(csr, sources, nearest_source=True)
    want_dist, want_preds, want_sources = reference.delta_stepping(*arrays(csr), sources, nearest_source=True)
    assert dist.tobytes() == want_dist.tobytes()
    assert np.array_equal(dist, dijkstra(csr, indices=sources, min_only=True))
    assert preds.dtype == csr.indices.dtype and np.array_equal(preds, want_preds)
    assert np.array_equal(source_of, want_sources)
    assert_valid_tree(csr, dist, preds, sources, source_of)
    again = gpu_delta_stepping(csr, sources, nearest_source=True)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(again, (dist, preds, source_of)))
    only, none_preds, none_sources = gpu_delta_stepping(csr, sources, predecessors=False)
    assert only.tobytes() == dist.tobytes() and none_preds is None and none_sources is None


@requires_gpu
@pytest.mark.parametrize("name", ["kron", "road", "zero_weights"])
def test_gpu_delta_stepping_limit(rng, name):
    csr = generated_graphs(rng)[name]
    sources = rng.choice(csr.shape[0], size=2, replace=False)
    full = dijkstra(csr, indices=sources, min_only=True)
    finite = full[np.isfinite(full)]
    limit = float(np.quantile(finite, 0.4)) if finite.size else 1.0
    dist, preds, _ = gpu_delta_stepping(csr, sources, limit=limit)
    assert np.array_equal(dist, dijkstra(csr, indices=sources, min_only=True, limit=limit))
    assert_valid_tree(csr, dist, preds, sources)


@requires_gpu
@requires_matrices
@pytest.mark.parametrize("name", SMALL_REAL + [n for n in ("luxembourg_osm",) if n in REAL_MATRICES])
def test_gpu_delta_stepping_real_graphs(rng, name):
    csr = with_random_weights(rng, datasets.load_matrix(name))
    source = int(rng.integers(csr.shape[0]))
    dist, preds, _ = gpu_delta_stepping(csr, [source])
    assert np.array_equal(dist, dijkstra(csr, indices=source))
    assert_valid_tree(csr, dist, preds, [source])
    if csr.shape[0] <= 100_000:
        assert np.array_equal(preds, reference.delta_stepping(*arrays(csr), np.array([source]))[1])


@requires_gpu
def test_gpu_zero_weight_cycles_and_tiny_graphs(rng):
    csr = zero_ring(rng, 300, 7)
    dist, preds, _ = gpu_delta_stepping(csr, [3])
    assert np.array_equal(dist, dijkstra(csr, indices=3))
    assert_valid_tree(csr, dist, preds, [3])
    assert np.array_equal(preds, reference.delta_stepping(*arrays(csr), np.array([3]))[1])
    one = canonical(sp.csr_array(np.array([[2.5]])))
    dist, preds, source_of = gpu_delta_stepping(one, [0], nearest_source=True)
    assert dist.tolist() == [0.0] and preds.tolist() == [NONE] and source_of.tolist() == [0]
    assert gpu_bellman_ford(one, 0)[0].tolist() == [0.0]
    empty = canonical(sp.csr_array((0, 0)), np.int64)
    dist, preds, _ = gpu_delta_stepping(empty, np.array([], np.int64))
    assert dist.shape == preds.shape == (0,) and preds.dtype == np.int64
    lonely = canonical(sp.csr_array((4, 4)), np.int64)
    dist, preds, source_of = gpu_delta_stepping(lonely, [2], nearest_source=True)
    assert dist.tolist() == [np.inf, np.inf, 0.0, np.inf] and preds.tolist() == [NONE] * 4
    assert source_of.tolist() == [NONE, NONE, 2, NONE]


@requires_gpu
@pytest.mark.parametrize("name", ["directed", "kron", "road", "int64"])
def test_gpu_bellman_ford_matches_scipy(rng, name):
    csr = potential_shifted(rng, generated_graphs(rng)[name])
    source = int(rng.integers(csr.shape[0]))
    dist, preds = gpu_bellman_ford(csr, source)
    want = bellman_ford(csr, directed=True, indices=source)
    np.testing.assert_allclose(dist, want, rtol=1e-12, atol=0)
    assert np.array_equal(np.isinf(dist), np.isinf(want))
    ref_dist, ref_preds = reference.bellman_ford(*arrays(csr), source)
    assert dist.tobytes() == ref_dist.tobytes() and np.array_equal(preds, ref_preds)
    assert_valid_tree(csr, dist, preds, [source])
    assert gpu_bellman_ford(csr, source)[0].tobytes() == dist.tobytes()
    assert gpu_bellman_ford(csr, source, predecessors=False)[1] is None


@requires_gpu
def test_gpu_bellman_ford_negative_cycles(rng):
    csr, source = negative_cycle_graph(rng, reachable=True)
    with pytest.raises(NegativeCycleError, match="Negative cycle detected on node"):
        gpu_bellman_ford(csr, source)
    csr, source = negative_cycle_graph(rng, reachable=False)
    dist, preds = gpu_bellman_ford(csr, source)
    np.testing.assert_allclose(dist, bellman_ford(csr, directed=True, indices=source), rtol=1e-12)
    assert_valid_tree(csr, dist, preds, [source])
    with pytest.raises(NegativeCycleError):
        gpu_bellman_ford(canonical(sp.csr_array(np.array([[-1.0]]))), 0)

"""Graphs for the csgraph tests, and the checks the acceptance rules name (any csgraph test may
import this module).

Real graphs come from ``$SPARSEGPU_MATRICES`` (skipped when absent); generated ones from
:mod:`sparsegpu.datasets`; random directed graphs carry isolated vertices, self loops,
duplicate entries and explicit zeros, the cases where SciPy's edge rules show.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.csgraph as scipy_csgraph

from sparsegpu import datasets

NO_PREDECESSOR = -9999

#: Graphs of the matrix collection (undirected unless noted): social, web, citation (directed),
#: biological, road and planar graphs, a power network.
REAL_GRAPHS = ("as-caida", "ego-Facebook", "email-Enron", "cit-HepPh", "bio-dmela", "tech-WHOIS",
               "luxembourg_osm", "ct2010", "bcspwr10")
#: The larger one, for the GPU tests only.
LARGE_REAL_GRAPHS = ("ego-Twitter",)


def available(names: tuple[str, ...] = REAL_GRAPHS) -> list[str]:
    """The names among ``names`` present in the matrix collection."""
    present = set(datasets.real_matrix_names())
    return [name for name in names if name in present]


def real_params(names: tuple[str, ...] = REAL_GRAPHS) -> list:
    """pytest parameters for the real graphs, one skipped placeholder when none is present."""
    found = available(names)
    if not found:
        return [pytest.param("missing", marks=pytest.mark.skip(reason="real matrices not found (set SPARSEGPU_MATRICES)"))]
    return found


@functools.cache
def _load(name: str) -> sp.csr_array:
    return datasets.load_matrix(name)


def real_graph(name: str, weighted: bool = False, seed: int = 0) -> sp.csr_array:
    """A real graph as a float64 csr_array (a fresh copy): its pattern with unit weights, or
    with ``weighted`` random weights in [0.1, 1), equal both ways where the pattern is
    symmetric (each stored entry weighted independently otherwise)."""
    S = _load(name).astype(np.float64)
    S.data[:] = 1.0
    if weighted:
        S = random_weights(S, np.random.default_rng(seed))
    return S


def random_weights(S: sp.csr_array, rng: np.random.Generator, low: float = 0.1, high: float = 1.0) -> sp.csr_array:
    """``S``'s pattern with weights uniform in [low, high), symmetric where S's pattern is."""
    S = sp.csr_array(S, dtype=np.float64, copy=True)
    S.data = rng.uniform(low, high, S.nnz)
    if _pattern_symmetric(S):
        upper = sp.triu(S, k=0, format="csr")
        S = (upper + sp.triu(S, k=1, format="csr").T).tocsr()
    return S


def _pattern_symmetric(S: sp.csr_array) -> bool:
    P = S.copy()
    P.data[:] = 1
    return (P != P.T).nnz == 0


def generated_graphs() -> dict[str, sp.csr_array]:
    """Small generated graphs: a Kronecker graph, a weighted grid, a road-like graph."""
    return {
        "kron10": datasets.kronecker(10, 8, seed=3, weighted=True),
        "grid": datasets.grid_graph(25, 30, seed=4),
        "road": datasets.road_like(30, seed=5),
    }


def random_digraph(rng: np.random.Generator, n: int = 200, degree: float = 3.0, *, self_loops: bool = True,
                   duplicates: bool = True, explicit_zeros: bool = True, isolated: int = 5,
                   low: float = 0.1, high: float = 1.0, fmt: str = "coo") -> sp.sparray:
    """A random directed graph of ``n`` vertices: ``isolated`` vertices with no edge at all,
    self loops, duplicate entries (summed), explicit zeros (edges of weight 0) and weights in
    [low, high), in scipy format ``fmt``."""
    m = int(degree * n)
    rows, cols = rng.integers(0, n, m), rng.integers(0, n, m)
    if self_loops:
        loops = rng.integers(0, n, max(1, n // 20))
        rows, cols = np.concatenate([rows, loops]), np.concatenate([cols, loops])
    if duplicates and rows.size:
        pick = rng.integers(0, rows.size, max(1, rows.size // 10))
        rows, cols = np.concatenate([rows, rows[pick]]), np.concatenate([cols, cols[pick]])
    values = rng.uniform(low, high, rows.size)
    if isolated and n > isolated:
        lonely = rng.choice(n, isolated, replace=False)
        keep = ~(np.isin(rows, lonely) | np.isin(cols, lonely))
        rows, cols, values = rows[keep], cols[keep], values[keep]
    S = sp.coo_array((values, (rows, cols)), shape=(n, n))
    S.sum_duplicates()
    if explicit_zeros and S.nnz:
        S.data[rng.integers(0, S.nnz, max(1, S.nnz // 20))] = 0.0
    return S.asformat(fmt)


def with_int64_indices(S: sp.sparray) -> sp.csr_array:
    """``S`` as a csr_array whose index arrays are int64."""
    C = sp.csr_array(S, copy=True)
    C.indices, C.indptr = C.indices.astype(np.int64), C.indptr.astype(np.int64)
    return C


def tiny_graphs() -> dict[str, sp.csr_array]:
    """n = 0, n = 1 with and without a self loop, two isolated vertices."""
    return {
        "n0": sp.csr_array((0, 0)),
        "n1": sp.csr_array((1, 1)),
        "n1_loop": sp.csr_array(np.array([[2.0]])),
        "n2_empty": sp.csr_array((2, 2)),
    }


# --------------------------------------------------------------------------- acceptance checks


def oriented(S: sp.sparray, directed: bool) -> sp.csr_array:
    """The graph the algorithms read: every stored entry an edge, both ways when undirected."""
    C = sp.csr_array(S, dtype=np.float64, copy=True)
    C.data[:] = 1.0
    if not directed:
        C = (C + C.T).tocsr()
        C.data[:] = 1.0
    return C


def bfs_levels(S: sp.sparray, source: int, directed: bool) -> np.ndarray:
    """Hop counts from ``source`` (-1 unreached), from SciPy."""
    hops = scipy_csgraph.shortest_path(oriented(S, directed), method="D", unweighted=True, indices=source)
    return np.where(np.isfinite(hops), hops, -1).astype(np.int64)


def assert_bfs_tree(S: sp.sparray, source: int, order: np.ndarray, preds: np.ndarray, directed: bool) -> None:
    """``order`` holds exactly the reached vertices by non-decreasing level, ``preds`` a valid BFS
    tree: each reached vertex but the source has a parent one level up with an edge to it."""
    levels = bfs_levels(S, source, directed)
    reached = np.flatnonzero(levels >= 0)
    assert sorted(order.tolist()) == reached.tolist()
    assert order[0] == source
    assert (np.diff(levels[order]) >= 0).all(), "order is not level by level"
    assert preds[source] == NO_PREDECESSOR
    assert (preds[levels < 0] == NO_PREDECESSOR).all()
    children = reached[reached != source]
    parents = preds[children]
    assert (parents >= 0).all()
    assert (levels[parents] == levels[children] - 1).all()
    assert has_edges(oriented(S, directed), parents, children).all(), "a parent without an edge to its child"


def has_edges(S: sp.sparray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Whether each (rows[k], cols[k]) is stored in ``S``."""
    coo = sp.coo_array(S)
    n = max(S.shape[0], 1)
    stored = coo.row.astype(np.int64) * n + coo.col
    return np.isin(np.asarray(rows, dtype=np.int64) * n + np.asarray(cols, dtype=np.int64), stored)


def assert_same_partition(labels: np.ndarray, expected: np.ndarray) -> None:
    """The same components, whatever their numbering."""
    labels, expected = np.asarray(labels), np.asarray(expected)
    assert labels.shape == expected.shape
    pairs = np.unique(np.stack([labels, expected]), axis=1) if labels.size else np.empty((2, 0))
    assert pairs.shape[1] == np.unique(labels).size == np.unique(expected).size


def assert_numbered_by_smallest_vertex(labels: np.ndarray) -> None:
    """Component k's smallest vertex comes before component k+1's."""
    if labels.size:
        _, first = np.unique(labels, return_index=True)
        assert np.unique(labels).tolist() == list(range(first.size))
        assert (np.diff(first) > 0).all()


def assert_shortest_path_tree(S: sp.sparray, source: int, dist: np.ndarray, preds: np.ndarray,
                              directed: bool) -> None:
    """Each vertex with a parent is reached over a stored edge whose weight closes the distance,
    and following parents leads to the source (no cycle). Vectorised: real road graphs have
    hundreds of thousands of vertices a thousand hops deep."""
    preds = np.asarray(preds).astype(np.int64)
    n = preds.size
    children = np.flatnonzero(preds != NO_PREDECESSOR)
    parents = preds[children]
    weights = _edge_weights(S, parents, children, directed)
    assert not np.isnan(weights).any(), "a parent without an edge to its child"
    assert np.allclose(dist[parents] + weights, dist[children], rtol=1e-12, atol=1e-12)
    # Pointer jumping: after ceil(log2 n) + 1 doublings every vertex points at the root of its
    # chain, which must be the source; a cycle never reaches one.
    up = np.where(preds == NO_PREDECESSOR, np.arange(n), preds)
    for _ in range(int(np.ceil(np.log2(max(n, 2)))) + 1):
        up = up[up]
    assert (up[children] == source).all(), "the predecessors do not lead to the source"


def _edge_weights(S: sp.sparray, rows: np.ndarray, cols: np.ndarray, directed: bool) -> np.ndarray:
    """The weight of each edge rows[k] -> cols[k] (duplicates summed; with ``directed=False`` the
    smaller of the two directions), NaN where none is stored."""
    C = sp.csr_array(S, copy=True)
    C.sum_duplicates()
    n = max(C.shape[0], 1)
    keys = np.repeat(np.arange(C.shape[0], dtype=np.int64), np.diff(C.indptr)) * n + C.indices

    def lookup(r: np.ndarray, c: np.ndarray) -> np.ndarray:
        wanted = r.astype(np.int64) * n + c.astype(np.int64)
        if keys.size == 0:
            return np.full(wanted.size, np.nan)
        at = np.minimum(np.searchsorted(keys, wanted), keys.size - 1)
        return np.where(keys[at] == wanted, C.data[at], np.nan)

    forward = lookup(rows, cols)
    if directed:
        return forward
    return np.fmin(forward, lookup(cols, rows))


def bandwidth(S: sp.sparray, perm: np.ndarray) -> int:
    """The bandwidth of S's symmetrised structure after permuting rows and columns by ``perm``."""
    C = sp.csr_array(S)
    P = (abs(C) + abs(C.T)).tocoo()
    position = np.empty(perm.size, dtype=np.int64)
    position[perm] = np.arange(perm.size)
    return int(np.abs(position[P.row] - position[P.col]).max()) if P.nnz else 0


def assert_permutation(perm: np.ndarray, n: int) -> None:
    assert perm.shape == (n,)
    assert np.array_equal(np.sort(perm), np.arange(n))

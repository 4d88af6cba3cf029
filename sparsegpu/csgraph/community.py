"""Modularity and Louvain communities, with NetworkX's semantics
(:func:`networkx.community.modularity`, :func:`networkx.community.louvain_communities`).

Vertex i of the adjacency ``A`` is NetworkX node i. ``directed=False`` (the default) reads ``A``
as a ``networkx.Graph``: each stored edge both ways, the smaller weight where both directions
are stored (csgraph's rule; a symmetric ``A`` is read as it is); ``directed=True`` reads it as a
``networkx.DiGraph``. Self loops count as NetworkX counts them (twice in an undirected degree).

Both functions work on one "level matrix" G: for a directed graph G = A; for an undirected one
G = A with its diagonal doubled, so that a row sum of G is NetworkX's degree. Then, with
T = sum(G), out/in the row/column sums and S_out(c), S_in(c) their sums over community c,

    Q = sum_c [ G(c, c) / T - resolution * S_out(c) * S_in(c) / T**2 ],

which is NetworkX's modularity in both cases. Every sum runs in a fixed order (stable sorts
and :func:`sparsegpu.primitives.segmented_reduce`, no float atomics), so results are bitwise
reproducible on a backend.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable
from typing import Any

import numpy as np

from sparsegpu import _validate, convert, primitives
from sparsegpu._backend import is_device_array, to_host
from sparsegpu.csgraph._graph import Graph, as_graph
from sparsegpu.csgraph.components import number_by_smallest_vertex

__all__ = ["louvain_communities", "modularity"]

#: Local-moving rounds per level at most (a safeguard: rounds stop long before on real graphs).
MAX_ROUNDS = 1000
#: Local-moving rounds in a row without a better modularity that end a level.
PATIENCE = 4
#: A round that raises a level's best modularity by less than this fraction of it ends the
#: level: the last rounds of a level move a few vertices each for gains NetworkX's threshold
#: would count but the next level makes up (on Kronecker graphs this cuts level 0 by a fifth).
MIN_ROUND_GAIN = 3e-4
#: The level number whose ranks seed the final moves on the input graph.
POLISH_SALT = 1 << 20


# --------------------------------------------------------------------------- arguments


def _check_weight(weight: Any) -> bool:
    if weight is None:
        return False
    if not isinstance(weight, (bool, np.bool_)):
        raise TypeError(f"weight must be True, False or None, got {type(weight).__name__} {weight!r}")
    return bool(weight)


def _labels_from(communities: Any, n: int, xp: Any) -> Any:
    """``communities`` (an iterable of collections of vertices, or a length-n integer label
    array) as compact int64 labels on ``xp``; ValueError unless it partitions range(n)."""
    if isinstance(communities, np.ndarray) or is_device_array(communities):
        if communities.ndim != 1 or communities.shape[0] != n or communities.dtype.kind not in "iu":
            raise ValueError(f"communities as an array must be 1-D integer labels of length {n}, "
                             f"got dtype {communities.dtype} and shape {tuple(communities.shape)}")
        labels = to_host(communities).astype(np.int64)
        return xp.asarray(np.unique(labels, return_inverse=True)[1].reshape(-1).astype(np.int64))
    if isinstance(communities, (str, bytes, numbers.Number)) or not isinstance(communities, Iterable):
        raise TypeError(f"communities must be an iterable of sets of vertices, got {type(communities).__name__}")
    members, sizes = [], []
    for community in communities:
        if isinstance(community, (str, bytes)) or not isinstance(community, Iterable):
            raise TypeError(f"communities must hold collections of vertices, got {type(community).__name__}")
        block = [_validate.check_int("a vertex in communities", v) for v in community]
        members.extend(block)
        sizes.append(len(block))
    vertices = np.asarray(members, dtype=np.int64)
    if vertices.size and (vertices.min() < 0 or vertices.max() >= n):
        bad = int(vertices[(vertices < 0) | (vertices >= n)][0])
        raise ValueError(f"communities holds vertex {bad}, out of range for a graph of {n} vertices")
    if vertices.size != n or np.unique(vertices).size != n:
        raise ValueError(f"communities is not a partition of the {n} vertices (each vertex exactly once)")
    labels = np.empty(n, dtype=np.int64)
    labels[vertices] = np.repeat(np.arange(len(sizes), dtype=np.int64), sizes)
    return xp.asarray(np.unique(labels, return_inverse=True)[1].reshape(-1).astype(np.int64))


# --------------------------------------------------------------------------- the level matrix


class _Level:
    """The level matrix G as COO arrays sorted by (row, col) without duplicates, its vertex
    count, row and column sums, and the neighbour lists the local moves read (G + G^T without
    the diagonal, sorted by row)."""

    def __init__(self, rows: Any, cols: Any, weights: Any, n: int, symmetric: bool, xp: Any) -> None:
        self.rows, self.cols, self.weights, self.n, self.symmetric, self.xp = rows, cols, weights, n, symmetric, xp
        self.out_sums = _segment_sums(weights, rows, n, xp)
        if symmetric:  # the column sums are the row sums (but for rounding on coarse levels)
            self.in_sums = self.out_sums
        else:
            order = _stable_argsort(cols, xp)
            self.in_sums = _segment_sums(weights[order], cols[order], n, xp)
        self.total = _total(weights, xp)
        off = rows != cols
        if symmetric:  # G + G^T is 2 G
            self.nb_rows, self.nb_cols, self.nb_weights = rows[off], cols[off], 2 * weights[off]
        else:
            self.nb_rows, self.nb_cols, self.nb_weights = _merged(
                xp.concatenate([rows[off], cols[off]]), xp.concatenate([cols[off], rows[off]]),
                xp.concatenate([weights[off], weights[off]]), n, xp)
        self.nb_offsets = convert.compress(self.nb_rows, n, np.int64, xp)


def _stable_argsort(keys: Any, xp: Any) -> Any:
    # CuPy's argsort is always stable (thrust's stable sort); NumPy's must be asked.
    return np.argsort(keys, kind="stable") if xp is np else xp.argsort(keys)


def _segment_sums(values: Any, sorted_segment: Any, n: int, xp: Any) -> Any:
    """Per-segment sums of ``values`` grouped by ``sorted_segment`` (non-decreasing, in [0, n)),
    in a fixed order."""
    offsets = convert.compress(sorted_segment, n, np.int64, xp)
    if values.size == 0:
        return xp.zeros(n, dtype=np.float64)
    return primitives.segmented_reduce(values, offsets, "sum")


def _total(values: Any, xp: Any) -> float:
    if values.size == 0:
        return 0.0
    return float(primitives.reduce(values, "sum"))


def _runs(sorted_keys: Any, xp: Any) -> tuple[Any, Any]:
    """Where each run of equal keys starts, and the run offsets (starts plus the end)."""
    head = xp.ones(sorted_keys.size, dtype=bool)
    head[1:] = sorted_keys[1:] != sorted_keys[:-1]
    starts = xp.flatnonzero(head)
    offsets = xp.concatenate([starts, xp.asarray([sorted_keys.size], dtype=starts.dtype)])
    return starts, offsets


def _merged(rows: Any, cols: Any, weights: Any, n: int, xp: Any) -> tuple[Any, Any, Any]:
    """COO entries sorted by (row, col), duplicates summed in their given order."""
    if rows.size == 0:
        return rows, cols, weights
    keys = rows.astype(np.int64) * max(n, 1) + cols.astype(np.int64)
    order = _stable_argsort(keys, xp)
    keys = keys[order]
    starts, offsets = _runs(keys, xp)
    sums = primitives.segmented_reduce(weights[order], offsets, "sum")
    keys = keys[starts]
    return keys // max(n, 1), keys % max(n, 1), sums


def _level_matrix(graph: Graph, directed: bool, weighted: bool) -> _Level:
    """The level matrix of the input graph (see the module docstring)."""
    graph = graph.oriented(directed)
    xp = graph.xp
    rows = convert.expand_pointers(graph.indptr, xp).astype(np.int64)
    cols = graph.indices.astype(np.int64)
    weights = graph.weights if weighted else xp.ones(graph.nnz, dtype=np.float64)
    if not directed:
        weights = xp.where(rows == cols, 2 * weights, weights)
    return _Level(rows, cols, weights, graph.n, not directed, xp)


def _modularity(level: _Level, labels: Any, resolution: float) -> float:
    """Q of the partition ``labels`` (compact ids) of the level's vertices."""
    xp = level.xp
    T = level.total
    inside = level.weights[labels[level.rows] == labels[level.cols]]
    count = int(labels.max()) + 1 if labels.size else 0
    order = _stable_argsort(labels, xp)
    s_out = _segment_sums(level.out_sums[order], labels[order], count, xp)
    s_in = s_out if level.symmetric else _segment_sums(level.in_sums[order], labels[order], count, xp)
    return _total(inside, xp) / T - resolution * _total(s_out * s_in, xp) / T**2


# --------------------------------------------------------------------------- modularity


def modularity(A: Any, communities: Any, weight: bool | None = True, resolution: float = 1, *,
               directed: bool = False, backend: str | None = None) -> float:
    """The modularity of a partition of a graph's vertices, as :func:`networkx.community.modularity`.

    Parameters
    ----------
    A : scipy sparse matrix or array, 2-D array_like, or sparsegpu matrix
        The N x N adjacency (csgraph's edge rules: every stored entry is an edge, an explicit 0
        too; dense 0, inf and NaN mean "no edge").
    communities : iterable of collections of int, or 1-D integer array
        A partition of range(N): each vertex in exactly one community. A NumPy / CuPy array of
        length N is read as each vertex's community label.
    weight : bool or None, optional
        True uses the stored weights; False or None counts every edge as 1 (NetworkX's
        ``weight=None``). Default True.
    resolution : float, optional
        NetworkX's resolution gamma (default 1).
    directed : bool, optional
        False reads ``A`` as a ``networkx.Graph`` (edges both ways; the smaller weight where
        both directions are stored), True as a ``networkx.DiGraph`` (default False).
    backend : {"cpu", "gpu"}, optional
        Where scipy / NumPy input runs (default :func:`sparsegpu.backend`).

    Returns
    -------
    float
        Q = sum over communities c of L_c / m - resolution * (k_c / 2m)^2 (undirected;
        k_out_c * k_in_c / m^2 directed), NetworkX's formula, self loops counted as it counts
        them.

    Raises
    ------
    TypeError
        ``A`` not a graph; ``communities`` not an iterable of collections of integers;
        ``weight`` not a bool or None; ``resolution`` not a real number.
    ValueError
        ``communities`` not a partition of the vertices; ``A`` without edge weight (m = 0,
        where NetworkX divides by zero) or with NaN or infinite weights; ``resolution`` not
        finite.

    Examples
    --------
    >>> import numpy as np
    >>> from sparsegpu.csgraph.community import modularity
    >>> A = np.zeros((6, 6))
    >>> for u, v in [(0, 1), (1, 2), (0, 2), (3, 4), (4, 5), (3, 5), (2, 3)]:
    ...     A[u, v] = A[v, u] = 1
    >>> round(modularity(A, [{0, 1, 2}, {3, 4, 5}], backend="cpu"), 6)
    0.357143
    """
    weighted = _check_weight(weight)
    resolution = _validate.check_real_finite("resolution", resolution)
    directed = _validate.check_bool("directed", directed)
    graph = as_graph(A, backend, name="A")
    labels = _labels_from(communities, graph.n, graph.xp)
    if weighted and graph.nnz and not bool(graph.xp.isfinite(graph.weights).all()):
        raise ValueError("A holds NaN or infinite weights")
    level = _level_matrix(graph, directed, weighted)
    if level.total == 0:
        raise ValueError("modularity is undefined for a graph whose edge weights sum to 0 (A has no edge weight)")
    return float(_modularity(level, labels, resolution))


# --------------------------------------------------------------------------- Louvain


def _random_words(n: int, seed: int, *salts: int, xp: Any) -> Any:
    """n pseudo-random uint64 words from ``seed`` and ``salts``: splitmix64 of a counter, in
    ``xp``'s wrapping uint64 arithmetic, so NumPy and CuPy draw the same words."""
    start = seed * 0x9E3779B97F4A7C15
    for salt in salts:
        start = (start ^ (salt + 1)) * 0xD1B54A32D192ED03 % 2**64
    x = xp.arange(n, dtype=np.uint64) + np.uint64(start % 2**64)
    for shift, factor in ((30, 0xBF58476D1CE4E5B9), (27, 0x94D049BB133111EB)):
        x = (x ^ (x >> np.uint64(shift))) * np.uint64(factor)
    return x ^ (x >> np.uint64(31))


def _random_ranks(n: int, seed: int, depth: int, xp: Any) -> Any:
    """A pseudo-random permutation of range(n) for level ``depth``."""
    ranks = xp.empty(n, dtype=np.int64)
    ranks[_stable_argsort(_random_words(n, seed, depth, xp=xp), xp)] = xp.arange(n, dtype=np.int64)
    return ranks


def _community_sums(values: Any, comm: Any, xp: Any) -> Any:
    """Per-community sums of per-vertex ``values`` (community ids in [0, n)), fixed order."""
    order = _stable_argsort(comm, xp)
    return _segment_sums(values[order], comm[order], comm.size, xp)


def _best_moves(level: _Level, comm: Any, resolution: float) -> tuple[Any, Any]:
    """Each vertex's best neighbouring community by NetworkX's modularity gain (scaled by T),
    ties to the smallest community id, and that gain (-inf for a vertex without neighbours)."""
    xp, n, T = level.xp, level.n, level.total
    keys = level.nb_rows * n + comm[level.nb_cols]
    order = _stable_argsort(keys, xp)
    keys = keys[order]
    starts, offsets = _runs(keys, xp)
    k_c = primitives.segmented_reduce(level.nb_weights[order], offsets, "sum")
    row, cand = keys[starts] // n, keys[starts] % n
    s_out = _community_sums(level.out_sums, comm, xp)
    s_in = s_out if level.symmetric else _community_sums(level.in_sums, comm, xp)
    d_out, d_in = level.out_sums, level.in_sums
    own = comm[row]
    k_own = xp.zeros(n, dtype=np.float64)
    is_own = cand == own
    k_own[row[is_own]] = k_c[is_own]  # one group per (vertex, community): no write conflicts
    stay = k_own - resolution * (d_out * (s_in[comm] - d_in) + d_in * (s_out[comm] - d_out)) / T
    score = k_c - resolution * (d_out[row] * s_in[cand] + d_in[row] * s_out[cand]) / T
    gain = xp.where(is_own, -np.inf, score - stay[row])
    row_offsets = convert.compress(row, n, np.int64, xp)
    best_gain = primitives.segmented_reduce(gain, row_offsets, "max")
    ties = ~is_own & (gain == best_gain[row])
    best = primitives.segmented_reduce(xp.where(ties, cand, n), row_offsets, "min")
    return best, best_gain


def _move(level: _Level, comm: Any, ranks: Any, resolution: float) -> tuple[Any, bool]:
    """One synchronous round of local moves, and whether any vertex had a positive gain. Every
    vertex with a positive gain moves to its best community unless a neighbour of higher rank
    that also moves would break its gain: one moving into the vertex's community, or one
    leaving the community the vertex joins (a swap; two such neighbours alone would trade
    places forever). Vertices that join the same community, or leave one for different
    communities, move together: their gains are NetworkX's but for the community totals the
    other movers change, and blocking them (an independent set per round) keeps hubs still for
    hundreds of rounds."""
    xp = level.xp
    best, best_gain = _best_moves(level, comm, resolution)
    positive = best_gain > 0
    i, j = level.nb_rows, level.nb_cols
    swap = (best[j] == comm[i]) | (comm[j] == best[i])
    conflict = positive[j] & (ranks[j] > ranks[i]) & swap
    blocked = primitives.segmented_reduce(conflict.astype(np.int32), level.nb_offsets, "max") > 0
    return xp.where(positive & ~blocked, best, comm), bool(positive.any())


def _local_moving(level: _Level, ranks: Any, resolution: float, start: Any = None) -> tuple[Any, bool]:
    """Rounds of :func:`_move` from the partition ``start`` (default ``ranks``, a permutation:
    every vertex alone) until no vertex has a positive gain, a round raises the best modularity
    by less than :data:`MIN_ROUND_GAIN` of it, or :data:`PATIENCE` rounds in a row bring no
    better modularity; the best partition seen, and whether it beats the initial one."""
    comm = initial = best = ranks if start is None else start
    best_q = _modularity(level, comm, resolution)
    if level.nb_rows.size == 0:
        return best, False
    stalled = 0
    for _ in range(MAX_ROUNDS):
        comm, any_gain = _move(level, comm, ranks, resolution)
        if not any_gain:
            break
        q = _modularity(level, comm, resolution)
        stalled += 1
        if q > best_q:
            small = q - best_q < MIN_ROUND_GAIN * abs(best_q)
            best, best_q, stalled = comm, q, 0
            if small:
                break
        if stalled >= PATIENCE:
            break
    return best, best is not initial  # a partition replaces the initial one only by beating it


def _compact(comm: Any, xp: Any) -> Any:
    """Community ids renumbered 0..k-1 in the order of the old ids."""
    present = xp.zeros(comm.size, dtype=np.int64)
    present[comm] = 1
    return (xp.cumsum(present) - 1)[comm]


def _coarsen(level: _Level, comm: Any, count: int) -> _Level:
    """The community graph: G summed over blocks of communities (``comm`` compact)."""
    rows, cols, weights = _merged(comm[level.rows], comm[level.cols], level.weights, count, level.xp)
    return _Level(rows, cols, weights, count, level.symmetric, level.xp)


def _louvain_labels(level: _Level, resolution: float, threshold: float, max_level: int | None,
                    seed: int) -> Any:
    """Each vertex's community: the levels (:func:`_level_labels`), then single vertices moved
    on the input graph from that partition (:func:`_local_moving` from it) while that raises
    the modularity: a vertex whose community was merged whole at a coarser level may fit a
    neighbouring one better (on email-Enron this lifts the modularity by 0.4-0.9 %)."""
    labels = _level_labels(level, resolution, threshold, max_level, seed)
    if level.total <= 0 or level.nb_rows.size == 0:
        return labels
    ranks = _random_ranks(level.n, seed, POLISH_SALT, level.xp)
    polished, _ = _local_moving(level, ranks, resolution, start=labels)
    return polished


def _level_labels(level: _Level, resolution: float, threshold: float, max_level: int | None,
                  seed: int) -> Any:
    """Each vertex's community (ids by smallest vertex not yet imposed): NetworkX's levels and
    stopping rules over synchronous local moves."""
    xp = level.xp
    labels = xp.arange(level.n, dtype=np.int64)
    if level.total <= 0 or level.nb_rows.size == 0:
        return labels
    q = _modularity(level, labels, resolution)
    depth = 0
    while True:
        ranks = _random_ranks(level.n, seed, depth, xp)
        comm, moved = _local_moving(level, ranks, resolution)
        if depth > 0 and not moved:
            return labels  # NetworkX stops without a new level when no vertex moves
        comm = _compact(comm, xp)
        labels = comm[labels]
        depth += 1
        if max_level is not None and depth >= max_level:
            return labels
        new_q = _modularity(level, comm, resolution)
        if new_q - q <= threshold:
            return labels
        q = new_q
        level = _coarsen(level, comm, int(comm.max()) + 1)


def _as_sets(labels: np.ndarray) -> list[set[int]]:
    """The partition as a list of sets, ordered by smallest vertex."""
    if labels.size == 0:
        return []
    ordered = number_by_smallest_vertex(labels)
    order = np.argsort(ordered, kind="stable")
    cuts = np.flatnonzero(np.diff(ordered[order])) + 1
    return [set(block.tolist()) for block in np.split(order, cuts)]


def louvain_communities(A: Any, weight: bool | None = True, resolution: float = 1, threshold: float = 1e-07,
                        max_level: int | None = None, seed: int | None = None, *, directed: bool = False,
                        backend: str | None = None) -> list[set[int]]:
    """Communities by the Louvain method, as :func:`networkx.community.louvain_communities`.

    Levels as NetworkX's: every vertex starts alone; local moves raise the modularity; the
    communities become the vertices of the next level (edge weights summed, self loops
    included); the levels stop when one gains at most ``threshold`` in modularity, when no
    vertex moves, or after ``max_level`` levels.

    The local moves are parallel, in synchronous rounds. Every vertex computes NetworkX's gain
    for each neighbouring community (its weight to the community summed by a stable sort and a
    segmented sum, then the community totals) and picks the best, ties to the smallest
    community id. Every vertex with a positive gain moves at once, unless an outranking
    neighbour that also moves would break its gain (the ranks: a random permutation per level):
    one moving into the vertex's community, or one leaving the community the vertex joins. So
    no two neighbours ever trade places; vertices that join the same community, or leave one
    for different communities, move together (each mover's gain is NetworkX's but for the
    community totals other movers change), and hubs move as soon as they gain. A level ends
    when no vertex has a positive gain, when a round raises the level's best modularity by less
    than 0.03 % of it, or after 4 rounds in a row without a better modularity, keeping the best
    partition seen (``threshold`` acts between levels only, as in NetworkX). After the last
    level, single vertices move once more on the input graph, from the final partition, while
    that raises the modularity (NetworkX stops at the levels). The ranks come from ``seed``
    through a counter-based generator, and every sum runs in a fixed order: the same seed gives
    the same communities bit for bit on a backend (the GPU's sums may round differently from
    NumPy's, so the two backends can part ways at near ties).

    NetworkX moves vertices one at a time in a random order, so the communities differ from
    NetworkX's; their modularity is as high (a few percent either way on the karate club, Les
    Miserables, ego-Facebook, Kronecker and grid graphs, where NetworkX's own runs spread as
    much from seed to seed).

    Parameters
    ----------
    A : scipy sparse matrix or array, 2-D array_like, or sparsegpu matrix
        The N x N adjacency (csgraph's edge rules); weights must be finite and >= 0.
    weight : bool or None, optional
        True uses the stored weights; False or None counts every edge as 1 (default True).
    resolution : float, optional
        Resolution gamma >= 0: below 1 favours larger communities, above 1 smaller (default 1).
    threshold : float, optional
        A level whose modularity gain is at most this (>= 0) is the last (default 1e-07).
    max_level : int or None, optional
        At most this many levels (>= 1), or no limit (default None).
    seed : int or None, optional
        The seed of the ranks: the same seed gives the same communities, bit for bit,
        on a backend. None means 0 (deterministic, where NetworkX draws a fresh random order).
    directed : bool, optional
        False reads ``A`` as a ``networkx.Graph``, True as a ``networkx.DiGraph`` (NetworkX's
        directed Louvain gain); default False.
    backend : {"cpu", "gpu"}, optional
        Where scipy / NumPy input runs (default :func:`sparsegpu.backend`).

    Returns
    -------
    list of set of int
        The communities, a partition of range(N), ordered by their smallest vertex. A graph
        without edge weight gives N singletons, as NetworkX gives an edgeless graph.

    Raises
    ------
    TypeError
        ``A`` not a graph; ``weight``, ``directed`` not bools; ``resolution``, ``threshold``
        not real numbers; ``max_level``, ``seed`` not integers or None.
    ValueError
        Negative, NaN or infinite weights; ``resolution`` or ``threshold`` negative or not
        finite; ``max_level`` < 1.

    Examples
    --------
    >>> import numpy as np
    >>> from sparsegpu.csgraph.community import louvain_communities
    >>> A = np.zeros((6, 6))
    >>> for u, v in [(0, 1), (1, 2), (0, 2), (3, 4), (4, 5), (3, 5), (2, 3)]:
    ...     A[u, v] = A[v, u] = 1
    >>> louvain_communities(A, seed=1, backend="cpu")
    [{0, 1, 2}, {3, 4, 5}]
    """
    weighted = _check_weight(weight)
    resolution = _validate.check_real_finite("resolution", resolution, minimum=0.0)
    threshold = _validate.check_real_finite("threshold", threshold, minimum=0.0)
    if max_level is not None:
        max_level = _validate.check_int("max_level", max_level, minimum=1)
    seed = 0 if seed is None else _validate.check_int("seed", seed)
    directed = _validate.check_bool("directed", directed)
    graph = as_graph(A, backend, name="A")
    if weighted:
        _check_weights(graph)
    level = _level_matrix(graph, directed, weighted)
    return _as_sets(to_host(_louvain_labels(level, resolution, threshold, max_level, seed)))


def _check_weights(graph: Graph) -> None:
    weights = graph.weights
    if graph.nnz and not bool(graph.xp.isfinite(weights).all()):
        raise ValueError("A holds NaN or infinite weights")
    if graph.nnz and bool((weights < 0).any()):
        raise ValueError("A holds negative weights; Louvain needs weights >= 0")

"""Minimum spanning forest, Boruvka's algorithm in NumPy: the reference of kernels/graph_mst.cu.

Same shape as the kernels: the undirected edges (upper triangle, each once) in (row, col)
order; each round every component takes its lightest crossing edge under (weight, row, col),
found as the smallest weight at it, then the smallest list position of that weight; it links
to the component across that edge (of a mutual pair, the smaller component stays the root),
the links are shortcut to their roots, and only the edges still crossing are kept, relabelled,
in the same order. The forest is unique for that order, so kernel and reference agree edge for
edge.
"""

from __future__ import annotations

import numpy as np


def upper_edges(indptr: np.ndarray, indices: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, ...]:
    """(src, dst, w) of the stored entries with row < col, in CSR order (sorted by (row, col)).

    >>> src, dst, w = upper_edges(np.array([0, 2, 3, 4]), np.array([1, 2, 0, 0]), np.array([5.0, 6.0, 5.0, 6.0]))
    >>> src.tolist(), dst.tolist(), w.tolist()
    ([0, 0], [1, 2], [5.0, 6.0])
    """
    index = np.result_type(indptr.dtype, indices.dtype)
    rows = np.repeat(np.arange(indptr.size - 1, dtype=index), np.diff(indptr))
    cols = np.asarray(indices, dtype=index)
    keep = cols > rows
    return rows[keep], cols[keep], np.asarray(weights, dtype=np.float64)[keep]


def boruvka_rounds(n: int, src: np.ndarray, dst: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Boolean flags over the edges (src, dst, w), sorted by (src, dst) with src < dst: True for
    the forest's.

    >>> boruvka_rounds(3, np.array([0, 0, 1]), np.array([1, 2, 2]), np.array([1.0, 1.0, 1.0])).tolist()
    [True, True, False]
    """
    eu, ev, ek, ew = src.astype(np.int64), dst.astype(np.int64), np.arange(src.size), w
    forest = np.zeros(src.size, dtype=bool)
    none = src.size
    while eu.size:
        best = _lightest_edges(n, eu, ev, ew, none)
        components = np.flatnonzero(best != none)
        p = best[components]
        other = np.where(eu[p] == components, ev[p], eu[p])
        hooks = (best[other] != p) | (components > other)
        link = np.arange(n, dtype=np.int64)
        link[components[hooks]] = other[hooks]
        forest[ek[p[hooks]]] = True
        while True:
            jumped = link[link]
            if np.array_equal(jumped, link):
                break
            link = jumped
        eu, ev = link[eu], link[ev]
        crossing = eu != ev
        eu, ev, ek, ew = eu[crossing], ev[crossing], ek[crossing], ew[crossing]
    return forest


def _lightest_edges(n: int, eu: np.ndarray, ev: np.ndarray, ew: np.ndarray, none: int) -> np.ndarray:
    """Per component, the list position of its lightest edge (the smallest weight, then the
    smallest position); ``none`` where it has no edge."""
    best_weight = np.full(n, np.inf)
    np.minimum.at(best_weight, eu, ew)
    np.minimum.at(best_weight, ev, ew)
    best = np.full(n, none, dtype=np.int64)
    positions = np.arange(eu.size)
    for ends in (eu, ev):
        lightest = ew == best_weight[ends]
        np.minimum.at(best, ends[lightest], positions[lightest])
    return best


def minimum_spanning_forest(indptr: np.ndarray, indices: np.ndarray, weights: np.ndarray
                            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows, cols, weights) of the minimum spanning forest of a symmetric CSR graph.

    The graph stores both directions of every edge with equal weights (self loops are ignored;
    a stored entry is an edge whatever its value, so drop stored zeros first if they mean "no
    edge"). Ties are broken by (weight, min vertex, max vertex), which makes the forest unique.
    Each edge comes once with row < col, sorted by (row, col); rows and cols in the wider of
    the pointer and index dtypes.

    >>> import scipy.sparse as sp
    >>> A = sp.csr_array(np.array([[0, 2, 1], [2, 0, 1], [1, 1, 0]], dtype=float))
    >>> rows, cols, w = minimum_spanning_forest(A.indptr, A.indices, A.data)
    >>> rows.tolist(), cols.tolist(), w.tolist()
    ([0, 1], [2, 2], [1.0, 1.0])
    """
    src, dst, w = upper_edges(np.asarray(indptr), np.asarray(indices), np.asarray(weights))
    n = max(int(np.asarray(indptr).size) - 1, 0)
    forest = boruvka_rounds(n, src, dst, w)
    return src[forest], dst[forest], w[forest]

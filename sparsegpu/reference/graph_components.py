"""NumPy references of kernels/graph_components.cu: connected components over a CSR pattern.

Same arguments and results as :mod:`sparsegpu.csgraph._device_components`: ``(count, labels)``
with labels int32, components numbered 0, 1, ... in the order of their smallest vertex. The
algorithms have the kernels' shape, level-synchronous: weak components by hooking labels to
smaller ones along edges and pointer jumping to a fixed point; strong components by trimming,
the pivot's forward-backward reach, and rounds of colouring.

>>> import numpy as np
>>> indptr, indices = np.array([0, 1, 1, 2, 2]), np.array([2, 0])
>>> count, labels = weak_components(indptr, indices)
>>> count, labels.tolist()
(3, [0, 1, 0, 2])
>>> strong_components(indptr, indices, indptr, indices)[0]  # the edges 0 -> 2 -> 0: their own transpose
3
"""

from __future__ import annotations

import numpy as np

_INT32_MAX = np.iinfo(np.int32).max


def edge_rows(indptr: np.ndarray) -> np.ndarray:
    """The row (source vertex) of every stored entry, int64."""
    n = indptr.size - 1
    return np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr.astype(np.int64)))


def number_by_smallest(rep: np.ndarray) -> tuple[int, np.ndarray]:
    """(count, labels) from ``rep[v]`` = the smallest vertex of v's component."""
    roots = rep == np.arange(rep.size)
    first = np.cumsum(roots) - roots
    return int(roots.sum()), first[rep].astype(np.int32)


def weak_components(indptr: np.ndarray, indices: np.ndarray) -> tuple[int, np.ndarray]:
    """Weak components (edges read as undirected): every label hooked to the smaller label
    across each edge, then labels jump to their label's label, until nothing changes. Labels
    only decrease and stay inside the component, so the fixed point is each component's
    smallest vertex.

    Parameters
    ----------
    indptr, indices : numpy.ndarray
        A CSR pattern, n = ``len(indptr) - 1`` vertices.

    Returns
    -------
    n_components : int
    labels : numpy.ndarray
        int32, numbered by smallest vertex.

    Examples
    --------
    >>> weak_components(np.array([0, 1, 1]), np.array([1]))
    (1, array([0, 0], dtype=int32))
    """
    n = indptr.size - 1
    rows, cols = edge_rows(indptr), indices.astype(np.int64)
    label = np.arange(max(n, 0), dtype=np.int64)
    while True:
        before = label.copy()
        low_row, low_col = label[rows], label[cols]
        np.minimum.at(label, low_col, low_row)
        np.minimum.at(label, low_row, low_col)
        while True:
            jumped = label[label]
            if np.array_equal(jumped, label):
                break
            label = jumped
        if np.array_equal(label, before):
            return number_by_smallest(label)


def _propagate(rows: np.ndarray, cols: np.ndarray, rep: np.ndarray, group: np.ndarray, lab: np.ndarray) -> None:
    """lab[w] = min(lab[w], lab[v]) along edges v -> w between unassigned vertices of equal
    group, level by level to the fixed point (in place)."""
    keep = (rep[rows] < 0) & (rep[cols] < 0) & (group[rows] == group[cols])
    rows, cols = rows[keep], cols[keep]
    while True:
        before = lab.copy()
        np.minimum.at(lab, cols, before[rows])
        if np.array_equal(lab, before):
            return


def _trim(rows: np.ndarray, cols: np.ndarray, rep: np.ndarray) -> None:
    """Assign, to itself, every unassigned vertex with no unassigned in- or out-neighbour other
    than itself, until none is left (in place)."""
    n = rep.size
    while True:
        live = (rep[rows] < 0) & (rep[cols] < 0) & (rows != cols)
        has_out = np.bincount(rows[live], minlength=n) > 0
        has_in = np.bincount(cols[live], minlength=n) > 0
        trimmed = (rep < 0) & ~(has_out & has_in)
        if not trimmed.any():
            return
        rep[trimmed] = np.flatnonzero(trimmed)


def _pivot_component(rows: np.ndarray, cols: np.ndarray, rep: np.ndarray, degree_product: np.ndarray) -> None:
    """Assign the SCC of the pivot (largest in- times out-degree among unassigned vertices, then
    the smallest): what it reaches forward, then what reaches it within that."""
    unassigned = np.flatnonzero(rep < 0)
    if unassigned.size == 0:
        return
    pivot = unassigned[np.argmax(degree_product[unassigned])]
    forward = np.ones(rep.size, dtype=np.int64)
    forward[pivot] = 0
    _propagate(rows, cols, rep, np.zeros(rep.size, dtype=np.int64), forward)
    backward = np.ones(rep.size, dtype=np.int64)
    backward[pivot] = 0
    _propagate(cols, rows, rep, forward, backward)
    inside = backward == 0
    rep[inside] = np.flatnonzero(inside)[0]


def _colour_round(rows: np.ndarray, cols: np.ndarray, rep: np.ndarray) -> None:
    """Colour with the smallest unassigned vertex reaching each vertex; assign each root's SCC
    (the vertices of its colour that reach it)."""
    n = rep.size
    vertices = np.arange(n, dtype=np.int64)
    unassigned = rep < 0
    colour = np.where(unassigned, vertices, _INT32_MAX)
    _propagate(rows, cols, rep, np.zeros(n, dtype=np.int64), colour)
    roots = unassigned & (colour == vertices)
    lab = np.where(roots, 0, 1)
    _propagate(cols, rows, rep, colour, lab)
    inside = unassigned & (lab == 0)
    rep[inside] = colour[inside]


def strong_components(indptr: np.ndarray, indices: np.ndarray, in_indptr: np.ndarray,
                      in_indices: np.ndarray) -> tuple[int, np.ndarray]:
    """Strong components: trimming, the pivot's SCC, then rounds of colouring and trimming.

    Parameters
    ----------
    indptr, indices : numpy.ndarray
        The out-edges as a CSR pattern, n = ``len(indptr) - 1`` vertices.
    in_indptr, in_indices : numpy.ndarray
        The in-edges (the transpose's CSR); they give the in-degrees of the pivot's choice.

    Returns
    -------
    n_components : int
    labels : numpy.ndarray
        int32, numbered by smallest vertex.

    Examples
    --------
    >>> cycle = np.array([0, 1, 2, 3]), np.array([1, 2, 0])
    >>> strong_components(*cycle, np.array([0, 1, 2, 3]), np.array([2, 0, 1]))
    (1, array([0, 0, 0], dtype=int32))
    """
    n = indptr.size - 1
    rows, cols = edge_rows(indptr), indices.astype(np.int64)
    rep = np.full(max(n, 0), -1, dtype=np.int64)
    degree_product = np.diff(indptr.astype(np.int64)) * np.diff(in_indptr.astype(np.int64))
    _trim(rows, cols, rep)
    _pivot_component(rows, cols, rep, degree_product)
    while True:
        _trim(rows, cols, rep)
        if not (rep < 0).any():
            return number_by_smallest(rep)
        _colour_round(rows, cols, rep)

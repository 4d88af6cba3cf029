"""NumPy reference of kernels/graph_triangles.cu: common neighbours of vertex pairs over a CSR.

Same arguments and results as :func:`sparsegpu.csgraph._device_triangles.common_neighbours`.
For every pair (u, v) the shorter of the two sorted neighbour lists is searched, entry by
entry, in the longer one (the kernel's binary search); each entry found is a common neighbour
w. Over the degree-oriented graph (every edge once, from the lower to the higher (degree,
vertex)) with its edges as the pairs, each triangle is found exactly once, and:

- ``corners``: every pair with c common neighbours adds c to u and to v, and 1 to each w: the
  triangles at each vertex;
- ``edges``: each w found adds 1 to the entries (u, w) and (v, w) of the CSR: with the pairs'
  own counts, the triangles through each edge.

>>> import numpy as np
>>> indptr, indices = np.array([0, 2, 3, 3]), np.array([1, 2, 2])  # 0 -> 1, 0 -> 2, 1 -> 2
>>> rows = np.array([0, 0, 1])
>>> counts, corners, edges = common_neighbours(indptr, indices, rows, indices, corners=True, edges=True)
>>> counts.tolist(), corners.tolist(), (counts + edges).tolist()
([1, 0, 0], [1, 1, 1], [1, 1, 1])
"""

from __future__ import annotations

import numpy as np

#: Entries of the shorter lists searched at once (bounds the temporaries at a few hundred MiB).
CHUNK = 1 << 23


def common_neighbours(indptr: np.ndarray, indices: np.ndarray, first: np.ndarray, second: np.ndarray, *,
                      corners: bool = False, edges: bool = False
                      ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """How many out-neighbours each pair (first[k], second[k]) has in common.

    Parameters
    ----------
    indptr, indices : numpy.ndarray
        A CSR pattern with sorted rows and no duplicates, n = ``len(indptr) - 1`` vertices.
    first, second : numpy.ndarray
        The pairs' vertices, integers in [0, n), of equal length k.
    corners : bool, optional
        Also count, per vertex, the pairs' common neighbours at their three corners (see the
        module docstring).
    edges : bool, optional
        Also count, per CSR entry (x, w), the common neighbours w found for pairs holding x.

    Returns
    -------
    counts : numpy.ndarray
        int64, length k: ``|out(first[k]) & out(second[k])|``.
    corner_counts : numpy.ndarray or None
        int64, length n (None unless ``corners``).
    edge_counts : numpy.ndarray or None
        int64, one per CSR entry (None unless ``edges``).

    Examples
    --------
    >>> counts, _, _ = common_neighbours(np.array([0, 2, 4, 4]), np.array([1, 2, 1, 2]), np.array([0, 1]),
    ...                               np.array([1, 2]))
    >>> counts.tolist()
    [2, 0]
    """
    n = indptr.size - 1
    starts, lengths = indptr[:-1].astype(np.int64), np.diff(indptr.astype(np.int64))
    first, second = np.asarray(first, dtype=np.int64), np.asarray(second, dtype=np.int64)
    swap = lengths[first] > lengths[second]
    short, long = np.where(swap, second, first), np.where(swap, first, second)
    work = lengths[short]
    ends = np.cumsum(work)
    width = max(n, 1)
    keys = np.repeat(np.arange(n, dtype=np.int64) * width, lengths) + indices.astype(np.int64)
    counts = np.zeros(first.size, dtype=np.int64)
    found = np.zeros(n, dtype=np.int64) if corners else None
    through = np.zeros(indices.size, dtype=np.int64) if edges else None
    begin = 0
    while begin < first.size:
        done = int(ends[begin - 1]) if begin else 0
        stop = max(begin + 1, int(np.searchsorted(ends, done + CHUNK, side="right")))
        pair = np.repeat(np.arange(begin, stop), work[begin:stop])
        position = starts[short[pair]] + np.arange(pair.size) - (ends[pair] - work[pair] - done)
        w = indices[position].astype(np.int64)
        wanted = long[pair] * width + w
        at = np.minimum(np.searchsorted(keys, wanted), max(keys.size - 1, 0))
        hit = keys[at] == wanted if keys.size else np.zeros(wanted.size, dtype=bool)
        counts[begin:stop] = np.bincount(pair[hit] - begin, minlength=stop - begin)
        if corners:
            found += np.bincount(w[hit], minlength=n)
        if edges:
            through += np.bincount(position[hit], minlength=indices.size)
            through += np.bincount(at[hit], minlength=indices.size)
        begin = stop
    if corners:
        found += np.bincount(first, weights=counts, minlength=n).astype(np.int64)
        found += np.bincount(second, weights=counts, minlength=n).astype(np.int64)
    return counts, found, through

"""Common neighbours of vertex pairs on the GPU (kernels/graph_triangles.cu; NumPy reference:
reference.graph_triangles, same arguments and results).

Pairs whose shorter neighbour list has at most :data:`WARP_WORK` entries take a thread each,
the others a warp each. Counts are integers summed with integer atomics: exact and deterministic.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sparsegpu._kernels import INDEX_DTYPES, KernelFile, blocks_for

TRI_BLOCK = 256  # kernels/graph_triangles.cu TRI_BLOCK
#: Pairs whose shorter list is longer than this take a warp each (a placeholder: to be measured).
WARP_WORK = 32

# Index-only kernels: the value type is a placeholder (int32), the index type is I.
TRIANGLE_KERNELS = KernelFile("graph_triangles.cu", ["tri_common_thread<{I}>", "tri_common_warp<{I}>"],
                              (np.int32,), INDEX_DTYPES)


def common_neighbours(indptr: Any, indices: Any, first: Any, second: Any, *,
                      corners: bool = False, edges: bool = False) -> tuple[Any, Any, Any]:
    """How many out-neighbours each pair (first[k], second[k]) has in common.

    Parameters
    ----------
    indptr, indices : cupy.ndarray
        A CSR pattern with sorted rows and no duplicates (int32 or int64), n = ``len(indptr) - 1``.
    first, second : cupy.ndarray
        The pairs' vertices in [0, n), of equal length k.
    corners : bool, optional
        Also count per vertex: each pair adds its count to both its vertices and 1 to each
        common neighbour (triangles per vertex over the degree-oriented graph's edges).
    edges : bool, optional
        Also count per CSR entry (x, w) the common neighbours w found for pairs holding x
        (with ``counts``, the triangles through each edge of the degree-oriented graph).

    Returns
    -------
    counts : cupy.ndarray
        int64, length k.
    corner_counts : cupy.ndarray or None
        int64, length n (None unless ``corners``).
    edge_counts : cupy.ndarray or None
        int64, one per CSR entry (None unless ``edges``).
    """
    import cupy

    same = indptr.dtype == indices.dtype and indices.dtype in INDEX_DTYPES
    dtype = indices.dtype if same else np.dtype(np.int64)
    indptr, indices, first, second = (cupy.ascontiguousarray(a, dtype=dtype) for a in (indptr, indices, first, second))
    n, k = indptr.size - 1, first.size
    counts = cupy.empty(k, dtype=np.int64)
    found = cupy.zeros(max(n, 0), dtype=np.uint64) if corners else None
    through = cupy.zeros(indices.size, dtype=np.uint64) if edges else None
    null = np.uint64(0)  # a null pointer: that output is not wanted
    outputs = (counts, null if found is None else found, null if through is None else through)
    if k:
        lengths = cupy.diff(indptr)
        long_pairs = cupy.flatnonzero(cupy.minimum(lengths[first], lengths[second]) > WARP_WORK)
        thread = TRIANGLE_KERNELS.function("tri_common_thread<{I}>", np.int32, dtype)
        thread((blocks_for(k, TRI_BLOCK),), (TRI_BLOCK,),
               (indptr, indices, first, second, np.int64(k), np.int64(WARP_WORK), *outputs))
        if long_pairs.size:
            warp = TRIANGLE_KERNELS.function("tri_common_warp<{I}>", np.int32, dtype)
            warp((blocks_for(long_pairs.size * 32, TRI_BLOCK),), (TRI_BLOCK,),
                 (indptr, indices, first, second, long_pairs.astype(np.int64), np.int64(long_pairs.size), *outputs))
    return counts, *(None if a is None else a.astype(np.int64) for a in (found, through))

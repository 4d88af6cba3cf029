"""Minimum spanning forest on the GPU, Boruvka's algorithm (kernels/graph_mst.cu; NumPy reference:
reference.graph_mst).

The undirected edges (the upper triangle, each once) are sorted once by (weight, row, col); the
rounds then work on the list of edges still crossing between components, kept in that order, so
the lightest edge out of a component is its smallest position in the list: an exact integer
minimum, the same whatever the timing. A round is five kernels and an inclusive scan; the host
reads one number per round (how many edges still cross), and Boruvka needs at most
log2(n) rounds since every round at least halves the components that still have edges out.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sparsegpu._kernels import INDEX_DTYPES, KernelFile, blocks_for
from sparsegpu.primitives import expand_pointers, inclusive_scan

MST_BLOCK = 256  # kernels/graph_mst.cu MST_BLOCK
# Grid-stride kernels: past this many blocks a thread takes several items.
MAX_BLOCKS = 1 << 16

MST_KERNELS = KernelFile(
    "graph_mst.cu",
    [
        "mark_upper<{I}>",
        "select_edges<{I}>",
        "lightest_edges<{I}>",
        "hook_components<{I}>",
        "shortcut_links<{I}>",
        "mark_crossing<{I}>",
        "compact_crossing<{I}>",
    ],
    value_dtypes=(np.float64,),
    index_dtypes=INDEX_DTYPES,
)


def _launch(name: str, index_dtype: np.dtype, items: int, *args: Any) -> None:
    kernel = MST_KERNELS.function(f"{name}<{{I}}>", np.float64, index_dtype)
    kernel((min(blocks_for(items, MST_BLOCK), MAX_BLOCKS),), (MST_BLOCK,), args)


def _count(positions: Any) -> int:
    """How many flags were set: the last entry of their inclusive scan (one device read)."""
    return int(positions[-1]) if positions.size else 0


def _upper_edges(indptr: Any, indices: Any, weights: Any, index: np.dtype) -> tuple[Any, Any, Any]:
    """(src, dst, w) of the entries with row < col, in CSR order, i.e. sorted by (row, col)."""
    import cupy

    nnz = int(indices.size)
    rows = expand_pointers(indptr, cupy).astype(index, copy=False)
    cols = indices.astype(index, copy=False)
    weights = cupy.ascontiguousarray(weights, dtype=np.float64)
    flags = cupy.empty(nnz, dtype=index)
    _launch("mark_upper", index, nnz, rows, cols, np.int64(nnz), flags)
    positions = inclusive_scan(flags)
    m = _count(positions)
    src, dst, w = cupy.empty(m, index), cupy.empty(m, index), cupy.empty(m, np.float64)
    _launch("select_edges", index, nnz, flags, positions, rows, cols, weights, np.int64(nnz), src, dst, w)
    return src, dst, w


def _boruvka(n: int, src: Any, dst: Any, w: Any, index: np.dtype) -> Any:
    """uint8 flags over the upper-triangle edges: 1 for the forest's."""
    import cupy

    m = int(src.size)
    forest = cupy.zeros(m, dtype=np.uint8)
    # cupy's argsort is stable, and src, dst come sorted by (row, col): rank order is
    # (weight, row, col), row = min endpoint, col = max endpoint.
    rank_order = cupy.argsort(w)
    eu, ev, ek = src[rank_order], dst[rank_order], rank_order.astype(index)
    del rank_order
    # Two sets of full-length buffers, read from one and compacted into the other each round;
    # kernels take the live length, so no views are needed.
    buffers = [(eu, ev, ek), tuple(cupy.empty(m, index) for _ in range(3))]
    none = np.iinfo(index).max
    best = cupy.empty(n, dtype=index)
    link = cupy.empty(n, dtype=index)
    flags = cupy.empty(m, dtype=index)
    alive, current = m, 0
    while alive:
        (eu, ev, ek), out = buffers[current], buffers[1 - current]
        count = np.int64(alive)
        best.fill(none)
        _launch("lightest_edges", index, alive, eu, ev, count, best)
        _launch("hook_components", index, n, best, eu, ev, ek, np.int64(n), index.type(none), link, forest)
        _launch("shortcut_links", index, n, np.int64(n), link)
        _launch("mark_crossing", index, alive, eu, ev, link, count, flags)
        positions = inclusive_scan(flags[:alive])
        _launch("compact_crossing", index, alive, flags, positions, eu, ev, ek, link, count, *out)
        alive, current = _count(positions), 1 - current
    return forest


def minimum_spanning_forest(indptr: Any, indices: Any, weights: Any) -> tuple[Any, Any, Any]:
    """(rows, cols, weights) of the forest's edges, each once, row < col.

    Input: a symmetric canonical CSR on the GPU (both directions stored with equal weights,
    sorted indices, no duplicates; self loops ignored), float64 weights of any sign, int32 or
    int64 indices. Ties are broken by (weight, min vertex, max vertex), so the forest is unique
    and deterministic. The edges come sorted by (row, col), rows and cols in the wider of the
    pointer and index dtypes, weights float64.
    """
    import cupy

    index = np.result_type(indptr.dtype, indices.dtype)
    if index not in INDEX_DTYPES:
        index = np.dtype(np.int64)
    n = int(indptr.size) - 1
    if n <= 0 or int(indices.size) == 0:
        return cupy.empty(0, index), cupy.empty(0, index), cupy.empty(0, np.float64)
    src, dst, w = _upper_edges(indptr, indices, weights, index)
    if src.size == 0:
        return src, dst, w
    forest = _boruvka(n, src, dst, w, index)
    chosen = forest.astype(index)
    positions = inclusive_scan(chosen)
    k = _count(positions)
    rows, cols, out_w = cupy.empty(k, index), cupy.empty(k, index), cupy.empty(k, np.float64)
    _launch("select_edges", index, src.size, chosen, positions, src, dst, w, np.int64(src.size), rows, cols, out_w)
    return rows, cols, out_w

"""Minimum spanning forest on the GPU, Boruvka's algorithm (kernels/graph_mst.cu; NumPy reference:
reference.graph_mst).

The undirected edges (the upper triangle, each once, in (row, col) order) stay in that order
through the rounds, so a component's lightest edge under (weight, row, col) is the smallest
weight at it, then the smallest list position of that weight: two exact integer minima, the
same whatever the timing, and no sort. A round is six kernels; the host reads one number per
round (how many edges still cross between components), and Boruvka needs at most log2(n)
rounds since every round at least halves the components that still have edges out. Dead edges
(inside one component) are dropped by a compaction only once they are a sizeable share of the
list: on power-law graphs the first rounds kill few edges, and skipping a dead edge costs less
than moving a live one.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sparsegpu._kernels import INDEX_DTYPES, KernelFile, blocks_for
from sparsegpu.primitives import expand_pointers, inclusive_scan

MST_BLOCK = 256  # kernels/graph_mst.cu MST_BLOCK
# Grid-stride kernels: past this many blocks a thread takes several items.
MAX_BLOCKS = 1 << 16

# Compact the alive list when the crossing edges fall below this share of it.
COMPACT_BELOW = 0.75

MST_KERNELS = KernelFile(
    "graph_mst.cu",
    [
        "mark_upper<{I}>",
        "select_edges<{I}>",
        "lightest_weights<{I}>",
        "lightest_edges<{I}>",
        "hook_components<{I}>",
        "shortcut_links<{I}>",
        "relabel_alive<{I}>",
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
    """uint8 flags over the upper-triangle edges (src, dst, w): 1 for the forest's."""
    import cupy

    m = int(src.size)
    forest = cupy.zeros(m, dtype=np.uint8)
    # Two sets of full-length buffers (endpoints' components, upper-triangle position, weight):
    # the rounds relabel one in place and compact it into the other; kernels take the length.
    buffers = [
        [src.copy(), dst.copy(), cupy.arange(m, dtype=index), w.copy()],
        [cupy.empty(m, index), cupy.empty(m, index), cupy.empty(m, index), cupy.empty(m, np.float64)],
    ]
    none = np.iinfo(index).max
    best_weight = cupy.empty(n, dtype=np.uint64)
    best = cupy.empty(n, dtype=index)
    link = cupy.empty(n, dtype=index)
    flags = cupy.empty(m, dtype=index)
    crossing = cupy.empty(1, dtype=np.uint64)
    alive, current = m, 0
    while True:
        eu, ev, ek, ew = buffers[current]
        count = np.int64(alive)
        best_weight.fill(np.uint64(np.iinfo(np.uint64).max))
        best.fill(none)
        crossing.fill(0)
        _launch("lightest_weights", index, alive, eu, ev, ew, count, best_weight)
        _launch("lightest_edges", index, alive, eu, ev, ew, count, best_weight, best)
        _launch("hook_components", index, n, best, eu, ev, ek, np.int64(n), index.type(none), link, forest)
        _launch("shortcut_links", index, n, np.int64(n), link)
        _launch("relabel_alive", index, alive, eu, ev, link, count, flags, crossing)
        still_crossing = int(crossing[0])
        if still_crossing == 0:
            return forest
        if still_crossing < COMPACT_BELOW * alive:
            positions = inclusive_scan(flags[:alive])
            current = 1 - current
            _launch("compact_crossing", index, alive, flags, positions, eu, ev, ek, ew, count, *buffers[current])
            alive = still_crossing


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

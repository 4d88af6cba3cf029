"""Reverse Cuthill-McKee ordering on the GPU (kernels/graph_rcm.cu; NumPy reference: reference.graph_rcm).

The same steps as the reference (see its docstring for the rule and why it never loses to
SciPy's bandwidth): degrees on the device; SciPy's start-vertex order from ``np.argsort`` of
the degrees on the host (the same call as SciPy's, so ties fall the same way); components by
hooking on the device; the levels of every component at once from the device BFS; then the
levels placed in turn, runs of small levels by one block in one launch, large ones by a parent
key kernel and a device sort; two start vertices per component, the narrower ordering kept. The
levels from SciPy's starts serve their ordering and the peripheral search, whose last levels
serve the second ordering: two breadth-first searches fewer than computing each afresh.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sparsegpu._kernels import INDEX_DTYPES, KernelFile, blocks_for
from sparsegpu.csgraph._device_bfs import bfs_order, multi_source_bfs

RCM_BLOCK = 256  # kernels/graph_rcm.cu RCM_BLOCK
CM_SMALL = 1024  # kernels/graph_rcm.cu CM_SMALL
RCM_NONE = np.iinfo(np.int64).max
PERIPHERAL_ROUNDS = 3  # as sparsegpu.reference.graph_rcm.PERIPHERAL_ROUNDS

RCM_KERNELS = KernelFile(
    "graph_rcm.cu",
    ["rcm_degrees<{I}>", "rcm_hook<{I}>", "rcm_compress<{I}>", "rcm_scatter_min<{I}>", "rcm_scatter_max<{I}>",
     "cm_parent_keys<{I}>", "cm_small_levels<{I}>", "rcm_component_bandwidth<{I}>"],
    (np.int32,), INDEX_DTYPES)


def _kernel(name: str, index: Any) -> Any:
    return RCM_KERNELS.function(name + "<{I}>", np.int32, index)


def _rows_launch(name: str, index: Any, n: int, args: tuple) -> None:
    _kernel(name, index)((blocks_for(n, RCM_BLOCK),), (RCM_BLOCK,), args)


def reverse_cuthill_mckee(indptr: Any, indices: Any) -> Any:
    """The RCM permutation of a structurally symmetric graph (int32)."""
    import cupy

    n = indptr.size - 1
    if n <= 0:
        return cupy.empty(0, dtype=np.int32)
    index = indptr.dtype
    degree = cupy.empty(n, dtype=index)
    _rows_launch("rcm_degrees", index, n, (indptr, indices, np.int64(n), degree))
    inds_host = np.argsort(degree.get())  # SciPy's call on the same values and dtype
    inds = cupy.asarray(inds_host)
    rank = cupy.empty(n, dtype=np.int64)
    rank[inds] = cupy.arange(n, dtype=np.int64)
    labels = component_labels(indptr, indices)
    starts, roots = _scipy_starts(labels, inds, rank)
    component_position = cupy.empty(n, dtype=np.int64)
    component_position[roots] = cupy.arange(roots.size, dtype=np.int64)
    base = component_position[labels] * n
    key_scipy, levels = cuthill_mckee_keys(indptr, indices, degree, starts)
    key_scipy += base
    peripheral, peripheral_levels = _pseudo_peripheral_starts(indptr, indices, degree, labels, starts, roots, levels)
    key = key_scipy
    if bool((peripheral != starts).any()):
        key_peripheral = cuthill_mckee_keys(indptr, indices, degree, peripheral, peripheral_levels)[0] + base
        narrower = (_component_bandwidths(indptr, indices, labels, key_peripheral)
                    < _component_bandwidths(indptr, indices, labels, key_scipy))
        key = cupy.where(narrower[labels], key_peripheral, key_scipy)
    return cupy.argsort(key)[::-1].astype(np.int32)


def component_labels(indptr: Any, indices: Any) -> Any:
    """Each vertex's component named by its smallest vertex (index dtype): hook and compress
    until no edge joins two trees."""
    import cupy

    n = indptr.size - 1
    index = indptr.dtype
    parent = cupy.arange(n, dtype=index)
    changed = cupy.zeros(1, dtype=np.int32)
    while True:
        changed.fill(0)
        _rows_launch("rcm_hook", index, n, (indptr, indices, np.int64(n), parent, changed))
        _rows_launch("rcm_compress", index, n, (np.int64(n), parent))
        if not int(changed.get()[0]):
            return parent


def _scatter(kind: str, labels: Any, values: Any, fill: int) -> Any:
    import cupy

    n = labels.size
    target = cupy.full(n, fill, dtype=np.int64)
    _rows_launch(kind, labels.dtype, n, (labels, values.astype(np.int64, copy=False), np.int64(n), target))
    return target


def _scipy_starts(labels: Any, inds: Any, rank: Any) -> tuple[Any, Any]:
    """(start of each component in SciPy's order, the components' labels in that order)."""
    import cupy

    n = labels.size
    first = _scatter("rcm_scatter_min", labels, rank, RCM_NONE)
    roots = cupy.flatnonzero(labels == cupy.arange(n, dtype=labels.dtype))
    by_rank = cupy.argsort(first[roots])
    return inds[first[roots][by_rank]].astype(labels.dtype), roots[by_rank]


def cuthill_mckee_keys(indptr: Any, indices: Any, degree: Any, starts: Any, levels: Any = None) -> tuple[Any, Any]:
    """(key, levels) as reference.graph_rcm.cuthill_mckee_keys, on the device; ``levels``, the
    breadth-first levels from ``starts`` when the caller has them already."""
    import cupy

    n = indptr.size - 1
    index = indptr.dtype
    if levels is None:
        levels, _ = multi_source_bfs(indptr, indices, starts, predecessors=False)
    order = bfs_order(levels)
    sizes = cupy.bincount(levels[levels >= 0]).get()
    offsets_host = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    offsets = cupy.asarray(offsets_host)
    key = cupy.empty(n, dtype=np.int64)
    key[starts] = cupy.arange(starts.size, dtype=np.int64)
    level, n_levels = 1, sizes.size
    while level < n_levels:
        if sizes[level] <= CM_SMALL:
            run_end = level
            while run_end < n_levels and sizes[run_end] <= CM_SMALL:
                run_end += 1
            _kernel("cm_small_levels", index)((1,), (CM_SMALL,), (indptr, indices, levels, degree, order, offsets,
                                                                  np.int32(level), np.int32(run_end), key))
            level = run_end
            continue
        begin, end = int(offsets_host[level]), int(offsets_host[level + 1])
        members = order[begin:end]
        parent = cupy.empty(end - begin, dtype=np.int64)
        _rows_launch("cm_parent_keys", index, end - begin, (indptr, indices, levels, key, members,
                                                           np.int64(end - begin), np.int32(level), parent))
        # (parent key, degree) in one word: parent keys < 2^31 positions of the previous level,
        # degrees < 2^31; a stable sort keeps the vertex order of `members` on ties.
        packed = (parent << 32) | degree[members].astype(np.int64)
        placed = cupy.argsort(packed)  # stable: CuPy sorts stably
        key[members[placed]] = begin + cupy.arange(end - begin, dtype=np.int64)
        level += 1
    return key, levels


def _pseudo_peripheral_starts(indptr: Any, indices: Any, degree: Any, labels: Any, starts: Any, roots: Any,
                              levels: Any) -> tuple[Any, Any]:
    """As reference.graph_rcm.pseudo_peripheral_starts, on the device, from the levels of
    ``starts``; also returns the levels of the starts found (each component's own BFS), which
    the second ordering reuses."""
    import cupy

    n = labels.size
    starts = starts.copy()
    ecc = _scatter("rcm_scatter_max", labels, levels, 0)
    vertex = cupy.arange(n, dtype=np.int64)
    for _ in range(PERIPHERAL_ROUNDS):
        last = levels == ecc[labels]
        value = cupy.where(last, degree.astype(np.int64) * n + vertex, RCM_NONE)
        candidates = (_scatter("rcm_scatter_min", labels, value, RCM_NONE)[roots] % n).astype(labels.dtype)
        new_levels, _ = multi_source_bfs(indptr, indices, candidates, predecessors=False)
        new_ecc = _scatter("rcm_scatter_max", labels, new_levels, 0)
        better = new_ecc[roots] > ecc[roots]
        if not bool(better.any()):
            break
        starts[better] = candidates[better]
        moved = cupy.zeros(n, dtype=bool)
        moved[roots[better]] = True
        levels = cupy.where(moved[labels], new_levels, levels)
        ecc = cupy.where(moved, new_ecc, ecc)
    return starts, levels


def _component_bandwidths(indptr: Any, indices: Any, labels: Any, key: Any) -> Any:
    import cupy

    n = labels.size
    position = cupy.empty(n, dtype=np.int64)
    position[cupy.argsort(key)] = cupy.arange(n, dtype=np.int64)
    width = cupy.zeros(n, dtype=np.int64)
    _rows_launch("rcm_component_bandwidth", labels.dtype, n, (indptr, indices, labels, position, np.int64(n), width))
    return width

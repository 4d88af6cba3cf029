"""Connected components on the GPU (kernels/graph_components.cu; NumPy reference:
reference.graph_components).

Both functions number components by their smallest vertex (0 for vertex 0's), which is
SciPy's numbering of weak components. The partition and the numbering do not depend on timing:
weak components come from a union-find whose roots are the smallest vertices of their trees,
strong ones from fixed points of min-propagations.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sparsegpu._kernels import INDEX_DTYPES, KernelFile, blocks_for, device_properties
from sparsegpu.primitives import exclusive_scan, reduce

CC_BLOCK = 256  # kernels/graph_components.cu CC_BLOCK
CC_SAMPLES = 512  # kernels/graph_components.cu CC_SAMPLES
CC_HUB = 1024  # kernels/graph_components.cu CC_HUB: rows longer than this take a block each
CC_NEIGHBOUR_ROUNDS = 2  # kernels/graph_components.cu CC_NEIGHBOUR_ROUNDS
HUB_BLOCKS_PER_SM = 4
#: Sweeps launched between two host checks of a propagation or of trimming: the first batch,
#: doubled after every batch that still changed something, up to the last.
SWEEP_BATCHES = (4, 64)
_INT32_MAX = np.iinfo(np.int32).max

# Index-only kernels: the value type is a placeholder (int32), the index type is I.
COMPONENT_KERNELS = KernelFile(
    "graph_components.cu",
    ["cc_link_neighbour<{I}>", "cc_link_rest<{I}, true>", "cc_link_rest<{I}, false>", "cc_link_hubs<{I}>",
     "scc_trim<{I}>", "scc_propagate<{I}>", "scc_pivot_keys<{I}>",
     "cc_compress", "cc_sample_giant", "cc_number", "cc_flag_roots"],
    (np.int32,),
    INDEX_DTYPES,
)


def _kernel(expression: str, index_dtype: Any) -> Any:
    return COMPONENT_KERNELS.function(expression, np.int32, index_dtype)


def _csr(indptr: Any, indices: Any) -> tuple[Any, Any]:
    """The pointer and index arrays in one index dtype (int64 when they differ), contiguous."""
    import cupy

    dtype = indices.dtype if indptr.dtype == indices.dtype and indices.dtype in INDEX_DTYPES else np.dtype(np.int64)
    return (cupy.ascontiguousarray(indptr, dtype=dtype), cupy.ascontiguousarray(indices, dtype=dtype))


def _number(rep: Any, flags: Any) -> tuple[int, Any]:
    """(count, labels): ``rep[v]`` is the smallest vertex of v's component and ``flags[v]`` is
    1 where ``rep[v] == v``; components numbered in the order of their smallest vertex."""
    import cupy

    n = rep.size
    first = exclusive_scan(flags)
    labels = cupy.empty(n, dtype=np.int32)
    count = cupy.empty(1, dtype=np.int32)
    _kernel("cc_number", np.int32)((blocks_for(n, CC_BLOCK),), (CC_BLOCK,), (np.int64(n), rep, first, labels, count))
    return int(count.get()[0]), labels


def weak_components(indptr: Any, indices: Any, *, symmetric: bool = False) -> tuple[int, Any]:
    """Weakly connected components of the CSR graph (edges read as undirected).

    Parameters
    ----------
    indptr, indices : cupy.ndarray
        A canonical CSR pattern (int32 or int64), n = ``len(indptr) - 1`` vertices.
    symmetric : bool, optional
        True when the pattern is known to be symmetric: the rows of the largest component are
        then never read (Afforest's skip). False (default) reads every row, right for any pattern.

    Returns
    -------
    n_components : int
    labels : cupy.ndarray
        int32, components numbered 0, 1, ... in the order of their smallest vertex.
    """
    import cupy

    indptr, indices = _csr(indptr, indices)
    n = indptr.size - 1
    if n <= 0:
        return 0, cupy.empty(0, dtype=np.int32)
    index, blocks, n64 = indices.dtype, (blocks_for(n, CC_BLOCK),), np.int64(n)
    parent = cupy.arange(n, dtype=np.int32)
    no_flags = np.uint64(0)  # a null pointer: cc_compress writes no flags
    for r in range(CC_NEIGHBOUR_ROUNDS):
        _kernel("cc_link_neighbour<{I}>", index)(blocks, (CC_BLOCK,), (indptr, indices, n64, np.int32(r), parent))
        _kernel("cc_compress", index)(blocks, (CC_BLOCK,), (n64, parent, no_flags))
    giant = cupy.empty(1, dtype=np.int32)
    _kernel("cc_sample_giant", index)((1,), (CC_SAMPLES,), (n64, parent, giant))
    hubs = cupy.empty(max(1, min(n, indices.size // (CC_HUB + 1) + 1)), dtype=np.int32)  # rows of > CC_HUB edges
    hub_count = cupy.zeros(1, dtype=np.int32)
    rest = "cc_link_rest<{I}, true>" if symmetric else "cc_link_rest<{I}, false>"
    _kernel(rest, index)(blocks, (CC_BLOCK,), (indptr, indices, n64, parent, giant, hubs, hub_count))
    hub_blocks = HUB_BLOCKS_PER_SM * device_properties()["multiprocessors"]
    _kernel("cc_link_hubs<{I}>", index)((hub_blocks,), (CC_BLOCK,), (indptr, indices, parent, hubs, hub_count))
    flags = cupy.empty(n, dtype=np.int32)
    _kernel("cc_compress", index)(blocks, (CC_BLOCK,), (n64, parent, flags))
    return _number(parent, flags)


class _Sweeps:
    """Sweeps of one kernel launched in batches, the host checking only each batch's last
    flags: a sweep's flags are two ints, the first 1 when the sweep changed something (a sweep
    that changed nothing means the fixed point), the second for the kernel to use."""

    def __init__(self) -> None:
        import cupy

        self.flags = cupy.zeros((SWEEP_BATCHES[1], 2), dtype=np.int32)
        self.slots = [self.flags[k] for k in range(SWEEP_BATCHES[1])]

    def run(self, sweep: Any) -> np.ndarray:
        """Call ``sweep(flags_slot)`` until one sweep reports no change; that sweep's flags."""
        batch = SWEEP_BATCHES[0]
        while True:
            self.flags[:batch].fill(0)
            for k in range(batch):
                sweep(self.slots[k])
            last = self.flags[batch - 1].get()
            if not last[0]:
                return last
            batch = min(2 * batch, SWEEP_BATCHES[1])


class _StrongState:
    """The arrays of one strong-components run: out- and in-edges, and ``rep`` (-1 while a
    vertex is unassigned, else the smallest vertex of its SCC)."""

    def __init__(self, out_ptr: Any, out_idx: Any, in_ptr: Any, in_idx: Any) -> None:
        import cupy

        self.out_ptr, self.out_idx = _csr(out_ptr, out_idx)
        self.in_ptr, self.in_idx = _csr(in_ptr, in_idx)
        if self.in_idx.dtype != self.out_idx.dtype:
            self.out_ptr, self.out_idx, self.in_ptr, self.in_idx = (
                a.astype(np.int64) for a in (self.out_ptr, self.out_idx, self.in_ptr, self.in_idx))
        self.n = self.out_ptr.size - 1
        self.index = self.out_idx.dtype
        self.grid = (blocks_for(self.n, CC_BLOCK),)
        self.rep = cupy.full(self.n, -1, dtype=np.int32)
        self.vertices = cupy.arange(self.n, dtype=np.int32)
        self.sweeps = _Sweeps()

    def trim(self) -> bool:
        """Assign every vertex left without an unassigned in- or out-neighbour, to a fixed
        point; whether unassigned vertices remain."""
        kernel = _kernel("scc_trim<{I}>", self.index)
        args = (self.out_ptr, self.out_idx, self.in_ptr, self.in_idx, np.int64(self.n), self.rep)
        return bool(self.sweeps.run(lambda flags: kernel(self.grid, (CC_BLOCK,), (*args, flags)))[1])

    def propagate(self, forward: bool, group: Any, lab: Any, dirty: Any) -> None:
        """Min-propagate ``lab`` from the ``dirty`` vertices along out-edges (``forward``) or
        in-edges, between unassigned vertices of equal ``group``, to the fixed point."""
        import cupy

        ptr, idx = (self.out_ptr, self.out_idx) if forward else (self.in_ptr, self.in_idx)
        kernel = _kernel("scc_propagate<{I}>", self.index)
        buffers = [dirty, cupy.zeros(self.n, dtype=np.uint8)]

        def sweep(flags: Any) -> None:
            kernel(self.grid, (CC_BLOCK,), (ptr, idx, np.int64(self.n), self.rep, group, lab, buffers[0],
                                            buffers[1], flags))
            buffers.reverse()

        self.sweeps.run(sweep)

    def pivot_component(self) -> None:
        """Assign the SCC of the pivot (largest in- times out-degree among unassigned vertices,
        then the smallest): forward reach, then backward reach within it."""
        import cupy

        keys = cupy.empty(self.n, dtype=np.int64)
        _kernel("scc_pivot_keys<{I}>", self.index)(
            self.grid, (CC_BLOCK,), (self.out_ptr, self.in_ptr, np.int64(self.n), self.rep, keys))
        best = int(reduce(keys, "max").get())
        if best < 0:
            return
        pivot = _INT32_MAX - (best & _INT32_MAX)
        reached_forward = self._reach(True, pivot, cupy.zeros(self.n, dtype=np.int32))
        reached_both = self._reach(False, pivot, reached_forward)
        inside = reached_both == 0
        cupy.copyto(self.rep, cupy.argmax(inside).astype(np.int32), where=inside)  # the SCC's smallest vertex

    def _reach(self, forward: bool, pivot: int, group: Any) -> Any:
        """0 where the pivot reaches (forward) or is reached from (backward) within its group, else 1."""
        import cupy

        lab = cupy.ones(self.n, dtype=np.int32)
        lab[pivot] = 0
        dirty = cupy.zeros(self.n, dtype=np.uint8)
        dirty[pivot] = 1
        self.propagate(forward, group, lab, dirty)
        return lab

    def colour_round(self) -> None:
        """Colour each unassigned vertex with the smallest unassigned vertex that reaches it;
        every vertex whose colour is itself (a root) is the smallest of its SCC, which is the
        vertices of its colour that reach it: assign those."""
        import cupy

        unassigned = self.rep < 0
        colour = cupy.where(unassigned, self.vertices, np.int32(_INT32_MAX))
        self.propagate(True, cupy.zeros(self.n, dtype=np.int32), colour, unassigned.astype(np.uint8))
        roots = unassigned & (colour == self.vertices)
        lab = (~roots).astype(np.int32)
        self.propagate(False, colour, lab, roots.astype(np.uint8))
        inside = unassigned & (lab == 0)
        cupy.copyto(self.rep, colour, where=inside)


def strong_components(indptr: Any, indices: Any, in_indptr: Any, in_indices: Any) -> tuple[int, Any]:
    """Strongly connected components: trimming, the pivot's SCC by forward-backward reach, then
    rounds of colouring (each round assigns the SCC of every colour's root) and trimming.

    Parameters
    ----------
    indptr, indices : cupy.ndarray
        The out-edges: a canonical CSR pattern (int32 or int64), n = ``len(indptr) - 1``.
    in_indptr, in_indices : cupy.ndarray
        The in-edges: the transpose's CSR.

    Returns
    -------
    n_components : int
    labels : cupy.ndarray
        int32, SCCs numbered 0, 1, ... in the order of their smallest vertex.

    Notes
    -----
    Every loop runs on the device in sweeps; the host reads one flag per batch of sweeps
    (:data:`SWEEP_BATCHES`). A sweep carries a label at least one edge further, so a long path
    (a road network, a long cycle) costs sweeps in proportion to its length.
    """
    import cupy

    state = _StrongState(indptr, indices, in_indptr, in_indices)
    if state.n <= 0:
        return 0, cupy.empty(0, dtype=np.int32)
    if state.trim():
        state.pivot_component()
    while state.trim():
        state.colour_round()
    flags = cupy.empty(state.n, dtype=np.int32)
    _kernel("cc_flag_roots", state.index)(state.grid, (CC_BLOCK,), (np.int64(state.n), state.rep, flags))
    return _number(state.rep, flags)

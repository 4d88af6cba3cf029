"""The rank's product ``y_local = A_rows @ x``, bitwise equal to the single-process product.

Rule: a row's sum must be the same sum in the same order as in the single-process kernel. A
local block and a halo block multiplied separately would split each boundary row's sum in two
and change its rounding. Instead every row is summed whole, by the ordinary single-process
kernel, over a vector that holds the x entries the row needs, with the row's entries in their
original (global) order: rows with halo entries read ``[gathered x | halo x]`` (or
``[my x | halo x]``), rows without read this rank's x as it is.

Overlap splits rows, never sums. The rows are cut into runs of consecutive rows: *early* runs,
rows with no halo entry, multiplied while the halo is in flight, straight from x into their
slice of y; and *late* runs, every other row, multiplied once the halo has arrived. A run is a
view of a CSR's arrays (a row pointer slice, absolute offsets), so each run is one kernel
writing its slice of y: no temporary, no scatter. Only long interior runs (a sixteenth of the
rank's entries or more, four at most) are worth a launch of their own; the other interior rows
run with the late ones. On the GPU the row kernel's threads per row are fixed to what the whole
matrix would get (its mean row length), so each row's reduction tree is the single-process one.

The late rows read a vector built by the exchange: when they need few of this rank's x entries
(at most half), those are packed by the exchange's gather next to the halo (``gathered``) and
the late rows' columns renumbered into ``[gathered | halo]``; else the late rows read
``[my x | halo x]``, with my x copied in (``lead``) on the caller's stream while the halo travels.
A rank without halo entries reads x itself throughout.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from sparsegpu.distributed._launch import PackedRuns
from sparsegpu.formats import CSR
from sparsegpu.formats._compressed import gather_spmv, make_gather_plan, threads_per_row

#: Interior runs get their own launch only when they hold this share of the rank's entries.
EARLY_SHARE = 1 / 16
#: Launches of interior runs at most (the late runs are at most one more).
EARLY_RUNS = 4


def _rows_of(S: sp.csr_array, rows: np.ndarray, n_cols: int) -> sp.csr_array:
    """Rows ``rows`` of ``S`` with each row's entries in their stored order."""
    lengths = np.diff(S.indptr)[rows]
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    starts = S.indptr[rows].astype(np.int64)
    take = np.repeat(starts - indptr[:-1], lengths) + np.arange(indptr[-1], dtype=np.int64)
    return sp.csr_array((S.data[take], S.indices[take], indptr), shape=(rows.size, n_cols))


def _device_csr(S: sp.csr_array, backend: str, tpr: int) -> CSR:
    """A sparsegpu CSR holding exactly ``S``'s entries in their order (unsorted indices kept)."""
    index_dtype = np.int32 if max(S.shape[1], S.nnz) < np.iinfo(np.int32).max else np.int64
    A = CSR((S.data, S.indices.astype(index_dtype), S.indptr.astype(index_dtype)), S.shape,
            backend=backend, index_dtype=index_dtype)
    A.threads_per_row = tpr
    return A


def _runs(flags: np.ndarray) -> list[tuple[int, int]]:
    """The maximal runs [start, stop) of True in ``flags``."""
    edges = np.diff(np.concatenate([[0], flags.astype(np.int8), [0]]))
    return list(zip(np.flatnonzero(edges == 1).tolist(), np.flatnonzero(edges == -1).tolist()))


def early_runs(touches_halo: np.ndarray, indptr: np.ndarray) -> list[tuple[int, int]]:
    """The interior runs worth a launch of their own while the halo travels: at most
    :data:`EARLY_RUNS`, the largest by entries, each with :data:`EARLY_SHARE` of the entries."""
    total = int(indptr[-1]) if indptr.size else 0
    runs = [(a, b) for a, b in _runs(~touches_halo) if int(indptr[b] - indptr[a]) >= max(1, total * EARLY_SHARE)]
    runs.sort(key=lambda run: -int(indptr[run[1]] - indptr[run[0]]))  # most entries first
    return sorted(runs[:EARLY_RUNS])


def complement_runs(runs: list[tuple[int, int]], n: int) -> list[tuple[int, int]]:
    """The runs covering [0, n) outside the sorted, disjoint ``runs``."""
    out, at = [], 0
    for a, b in runs:
        if a > at:
            out.append((at, a))
        at = b
    if at < n:
        out.append((at, n))
    return out


class RowRuns:
    """Runs of consecutive rows of one CSR, each multiplied straight into its slice of y.

    ``runs`` are (first row of y, last row + 1, first row of the CSR): a run's rows are
    consecutive in y and in the CSR (which may hold only some of y's rows). ``n_cols``: the
    length of the x they read (the CSR's width, or less when the runs' columns stay below).
    On the GPU a run is one launch with its arguments packed here (:mod:`._launch`); runs with
    rows split into chunks go through :func:`gather_spmv`. On the CPU, SciPy's compiled
    product over a view of the run's entries, as the CPU backend's."""

    def __init__(self, A: CSR, runs: list[tuple[int, int, int]], tpr: int, n_cols: int) -> None:
        self.backend = A.backend
        self.arrays = (A.indptr, A.indices, A.data)  # kept alive: the packed launches point into them
        self.runs = [(int(first), int(stop), int(at)) for first, stop, at in runs]
        self.packed = PackedRuns()
        self.chunked: list[tuple[int, int, tuple]] = []  # GPU runs with split rows
        self.views: list[tuple[int, int, sp.csr_array]] = []  # CPU
        for first, stop, at in self.runs:
            indptr = A.indptr[at:at + stop - first + 1]
            if self.backend == "gpu":
                self._add_gpu_run(A, first, stop, at, indptr, tpr)
            else:
                lo, hi = int(indptr[0]), int(indptr[-1])
                view = sp.csr_array((A.data[lo:hi], A.indices[lo:hi], indptr - indptr[0]),
                                    shape=(stop - first, n_cols), copy=False)
                self.views.append((first, stop, view))

    def _add_gpu_run(self, A: CSR, first: int, stop: int, at: int, indptr: Any, tpr: int) -> None:
        plan = make_gather_plan(indptr, A.dtype, tpr)
        if plan.n_long:
            one, zero = A.dtype.type(1), A.dtype.type(0)
            self.chunked.append((first, stop, (plan, indptr, A.indices, A.data, one, zero)))
            return
        self.packed.add(plan, A.indptr, A.indices, A.data, at, first)

    def multiply(self, x: Any, y: Any) -> None:
        """``y[first:stop] = rows @ x`` for every run (the GPU's on the current stream)."""
        if self.backend == "gpu":
            import cupy

            self.launch(x, x.data.ptr, y, y.data.ptr, cupy.cuda.get_current_stream().ptr)
            return
        for first, stop, view in self.views:
            y[first:stop] = view @ x

    def launch(self, x: Any, x_pointer: int, y: Any, y_pointer: int, stream: int) -> None:
        """The GPU's runs on ``stream`` (the current stream), x and y given with their addresses."""
        self.packed(x_pointer, y_pointer, stream)
        for first, stop, (plan, indptr, indices, data, one, zero) in self.chunked:
            gather_spmv(plan, indptr, indices, data, x, y[first:stop], one, zero)


class ExtendedProduct:
    """This rank's rows as a CSR over ``[my x | halo x]`` (:attr:`matrix`), and the runs that
    multiply them around the halo exchange (see the module's docstring)."""

    def __init__(self, rows: sp.csr_array, n_own: int, n_halo: int, backend: str, global_mean: float,
                 split: bool) -> None:
        self.n_own, self.n_halo, self.backend = n_own, n_halo, backend
        self.shape = (rows.shape[0], n_own + n_halo)
        self.dtype = rows.dtype
        tpr = threads_per_row(global_mean)
        self.matrix = _device_csr(rows, backend, tpr)
        n = rows.shape[0]
        touches_halo = np.zeros(n, dtype=bool)
        touches_halo[np.repeat(np.arange(n), np.diff(rows.indptr))[rows.indices >= n_own]] = True
        early = early_runs(touches_halo, rows.indptr) if split else []
        late = complement_runs(early, n)
        self.early = RowRuns(self.matrix, [(a, b, a) for a, b in early], tpr, n_own)
        self.split = bool(early)
        late_rows = np.concatenate([np.arange(a, b) for a, b in late]) if late else np.zeros(0, np.int64)
        late_matrix, self.gathered, self.lead = self._late_matrix(rows, late_rows, n_own, n_halo, tpr)
        positions = np.cumsum([0] + [b - a for a, b in late])
        self.late = RowRuns(late_matrix, [(a, b, int(at)) for (a, b), at in zip(late, positions)], tpr,
                            late_matrix.shape[1])
        if backend == "gpu":
            import cupy

            self._current_stream = cupy.cuda.get_current_stream  # (looked up once)

    def _late_matrix(self, rows: sp.csr_array, late_rows: np.ndarray, n_own: int, n_halo: int,
                     tpr: int) -> tuple[CSR, np.ndarray | None, int]:
        """The late rows' CSR, the own entries the exchange gathers for them (or None) and the
        slots of my x before the halo (0 or ``n_own``)."""
        subset = rows if late_rows.size == rows.shape[0] else _rows_of(rows, late_rows, n_own + n_halo)
        if n_halo == 0:  # no halo: the late rows read x itself
            return (self.matrix if subset is rows else _device_csr(subset, self.backend, tpr)), None, 0
        own = subset.indices < n_own
        needed = np.unique(subset.indices[own])
        if needed.size > n_own // 2:  # most of x: read it whole, copied in while the halo travels
            late = self.matrix if subset is rows else _device_csr(subset, self.backend, tpr)
            return late, None, n_own
        columns = np.where(own, np.searchsorted(needed, subset.indices), subset.indices - n_own + needed.size)
        compact = sp.csr_array((subset.data, columns, subset.indptr), shape=(subset.shape[0], needed.size + n_halo))
        return _device_csr(compact, self.backend, tpr), needed, 0

    def multiply(self, x_local: Any, exchanger: Any, y: Any) -> Any:
        """``y_local`` for this rank's rows, written into ``y`` (collective: every rank
        exchanges its halo). Queues work on the current stream and never waits on the host."""
        if self.backend == "gpu":
            return self._multiply_gpu(x_local, exchanger, y)
        exchanger.ready()
        if not exchanger.asynchronous:
            exchanger.start(x_local)
        self.early.multiply(x_local, y)
        if exchanger.asynchronous:
            exchanger.start(x_local)
        if self.lead:
            exchanger.lead[...] = x_local
        exchanger.finish()
        self.late.multiply(exchanger.vector if self.n_halo else x_local, y)
        exchanger.release()
        return y

    def _multiply_gpu(self, x_local: Any, exchanger: Any, y: Any) -> Any:
        """The GPU's order: the early runs first, so they run while the halo travels. The
        current stream and the addresses are looked up once and handed down."""
        stream = self._current_stream().ptr
        x_pointer, y_pointer = x_local.data.ptr, y.data.ptr
        exchanger.ready(stream)
        if not exchanger.asynchronous:
            exchanger.start(x_local, stream)
        self.early.launch(x_local, x_pointer, y, y_pointer, stream)
        if exchanger.asynchronous:
            exchanger.start(x_local, stream)
        if self.lead:
            exchanger.copy_lead(x_pointer, stream)
        exchanger.finish(stream)
        if self.n_halo:
            self.late.launch(exchanger.vector, exchanger.vector_pointer, y, y_pointer, stream)
        else:
            self.late.launch(x_local, x_pointer, y, y_pointer, stream)
        exchanger.release(stream)
        return y

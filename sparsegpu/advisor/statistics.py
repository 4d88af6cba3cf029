"""The advisor's statistics on the device: launch plans, the per-device workspace, the packed
launches, the pinned record the host polls, and :func:`matrix_stats`.

The statistics are meant to cost at most one CSR SpMV call, host work included (measured on an
H200 against a CSR SpMV call timed the same way, see docs/performance.md). On the GPU they read
indptr once and indices once (kernels/matrix_stats_*.cu): the row-length histogram (lengths
below 4096 binned in shared memory, longer rows listed), the longest row, SELL's slice widths,
and where the entries sit relative to the diagonal, merged into one buffer with integer
atomics; then one block summarises the row lengths exactly as the host would (:mod:`.summary` is its
reference), writes the record straight into pinned host memory, and zeroes the buffer for the
next call.

- Up to DIRECT_MAX_ENTRIES entries: one launch of ``csr_stats_direct``. A block takes a run of
  rows for the row statistics and a stretch of the merge path of rows and entries for the
  structure, so a long row or a run of empty rows loads no block more than another; the last
  block to finish summarises (the smallest matrices, up to SINGLE_BLOCK_ITEMS rows plus
  entries, run on one block that summarises its own shared bins).
- Larger matrices: ``csr_stats`` (tiles of rows whose pointers a block holds in shared memory,
  entries past a work item handed to a queue in chunks that any block takes), then
  ``stats_summary``.

Launches are packed once per matrix shape (:class:`PackedLaunch`); the kernel zeroes the
buffer, writes the record and then the call's epoch, and the host polls the epoch instead of
synchronising (x86-64 hosts; :meth:`_Workspace.await_record`). The head comes back to the host
only for what the summary leaves to it (more than 1024 rows past the bins, costs past float64's
exact integers). The CPU backend fills the same buffer with the NumPy reference
(sparsegpu/reference/stats.py) and summarises it on the host, so both backends give identical
statistics.
"""

from __future__ import annotations

import ctypes
import functools
import math
import platform
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from sparsegpu._kernels import KernelFile, PackedLaunch, device_properties
from sparsegpu.advisor.summary import (QUANTILE_FRACTIONS, SUMMARY_WORDS, MatrixStats, record_of_buffer,
                                       stats_of_record)
from sparsegpu.formats import sell
from sparsegpu.formats._base import SparseMatrix, as_scipy_sparse
from sparsegpu.formats._compressed import long_row_limit, threads_per_row
from sparsegpu.formats.csr import CSR
from sparsegpu.reference import stats as reference_stats
from sparsegpu.reference.stats import OUT_BINS, OUT_OVERFLOW, OUT_OVERFLOW_ROWS, overflow_capacity

#: Blocks per multiprocessor the launcher keeps resident, by index item size (csr_stats's launch
#: bounds cap its registers at 40 a thread for int32 and 48 for int64, and its shared memory, 33
#: and 41 KB, allows as many), so one wave of blocks takes every tile and chunk through the
#: ticket, and merging each block's 4096 shared bins stays small next to its share of the rows.
STATS_BLOCKS_PER_SM = {4: 6, 8: 5}
STATS_BLOCK = 256  # kernels/matrix_stats_common.cuh STATS_BLOCK
STATS_WINDOW = 2016  # kernels/matrix_stats_common.cuh STATS_WINDOW: rows a tile holds at most
STATS_ITEM_BYTES = 65536  # kernels/matrix_stats_tiled.cu STATS_ITEM<I> * sizeof(I): columns per work item
#: Words of work counters before the statistics buffer (kernels/matrix_stats_common.cuh COUNTER_*).
STATS_COUNTERS = 48
#: Matrices of at most this many entries take the direct pass (kernels/matrix_stats_direct.cu
#: csr_stats_direct: one launch, no tickets, the summary in its last block) instead of csr_stats and
#: stats_summary.
DIRECT_MAX_ENTRIES = 8_000_000
#: csr_stats_direct counts rows and entries in 32 bits (fewer registers and instructions): it takes
#: no matrix of more rows plus entries than this, whatever DIRECT_MAX_ENTRIES (so that a grid's
#: blocks past the last row or entry, a round past the last entry, stay in range).
DIRECT_ITEM_LIMIT = 2**30
#: 16-byte vectors of columns a thread of csr_stats_direct takes in the smaller grids
#: (:func:`direct_launch`): fewer make more blocks, each with a shorter walk, but more atomics
#: merging into the head.
DIRECT_THREAD_VECTORS = 2
#: csr_stats_direct's instantiations (kernels/matrix_stats_direct.cu MIN_BLOCKS, VECTORS): the blocks an
#: SM holds (a thread's registers capped at 128, 80 and 64), and the 16-byte vectors of columns a
#: thread loads in one round, at most (as many as fit those registers without spills at three
#: blocks an SM; at four, six spill less than seven and still hold 2-D Poisson of 800 x 800 in one
#: round). :func:`direct_launch` picks the fewest blocks an SM whose round holds a block's entries.
DIRECT_VECTORS = {2: 7, 3: 7, 4: 6}
DIRECT_BLOCKS_PER_SM = tuple(DIRECT_VECTORS)
DIRECT_EXPRESSIONS = {blocks: f"csr_stats_direct<{{I}}, {blocks}, {vectors}>"
                      for blocks, vectors in DIRECT_VECTORS.items()}
#: Matrices of at most this many rows plus entries (and at most STATS_WINDOW rows) take
#: csr_stats_direct on one block, which summarises its own shared bins when its rows are short
#: (no merge into the buffer, no ticket, no summary loads): a few more rounds of loads on one
#: block cost less than those round trips.
SINGLE_BLOCK_ITEMS = 4096
QUEUE_WORDS = 4  # kernels/matrix_stats_tiled.cu QUEUE_WORDS: words per chunk slot
#: The statistics' kernels: csr_stats and stats_summary in one file, csr_stats_direct's
#: instantiations in another (both include the summary, kernels/matrix_stats_summary.cuh).
TILED_KERNELS = KernelFile("matrix_stats_tiled.cu", ["csr_stats<{I}>", "stats_summary<{I}>"], value_dtypes=[np.float64])
DIRECT_KERNELS = KernelFile("matrix_stats_direct.cu", DIRECT_EXPRESSIONS.values(), value_dtypes=[np.float64])
_KERNEL_FILES = {expression: kernels for kernels in (TILED_KERNELS, DIRECT_KERNELS)
                 for expression in kernels.expressions}


def stats_kernel(expression: str, index_dtype: Any) -> Any:
    """The compiled statistics kernel ``expression`` (``"csr_stats<{I}>"``, ``"stats_summary<{I}>"``
    or one of :data:`DIRECT_EXPRESSIONS`) for ``index_dtype``."""
    return _KERNEL_FILES[expression].function(expression, np.float64, index_dtype)


def as_csr(A: Any, backend: str | None) -> CSR:
    """A sparsegpu CSR of A: a sparsegpu matrix is converted on its backend; a scipy matrix
    is uploaded once. TypeError for a dense array or a non-sparse object, ValueError for NaN
    indices."""
    if isinstance(A, SparseMatrix):
        return A.to_csr()
    if isinstance(A, np.ndarray) or hasattr(A, "__cuda_array_interface__"):
        raise TypeError(f"advise needs a sparse matrix, got a dense {A.ndim}-D array; "
                        "convert it with scipy.sparse.csr_array first")
    S = as_scipy_sparse(A)
    for name in ("indices", "indptr", "row", "col"):
        index = getattr(S, name, None)
        if index is not None and index.dtype.kind == "f":
            if np.isnan(index).any():
                raise ValueError(f"the matrix's {name} array holds NaN")
            raise TypeError(f"the matrix's {name} array holds floats ({index.dtype}), not integers")
    return CSR.from_scipy(S, backend=backend)


def stats_tile_rows(n_rows: int, nnz: int, index_itemsize: int, blocks: int) -> int:
    """Rows per tile of ``csr_stats``: a multiple of 32 (whole SELL slices) up to the shared
    window, such that a tile holds about 3/4 of a work item's entries on average (so few tiles
    hand chunks to the queue, and none holds so few entries that its pointers dominate), but no
    more rows than spread the matrix over the ``blocks`` resident blocks (a smaller matrix is
    latency-bound: every block should take a tile).

    >>> stats_tile_rows(9_000_000, 45_000_000, 4, 792), stats_tile_rows(1000, 1_000_000, 4, 792)
    (2016, 32)
    >>> stats_tile_rows(90_000, 450_000, 4, 792)  # 114 rows a block
    128
    """
    item = STATS_ITEM_BYTES // index_itemsize
    rows = int(0.75 * item * n_rows / nnz) if nnz else STATS_WINDOW
    spread = -(-n_rows // blocks)
    rows = min(rows, -(-spread // 32) * 32)
    return min(STATS_WINDOW, max(32, rows // 32 * 32))


def _statistics_launch(m: int, nnz: int, index_itemsize: int, slots: int,
                       resident: int) -> tuple[tuple[int], tuple[np.generic, ...]]:
    """``csr_stats``'s grid, and its scalar arguments between the CSR arrays and the call's epoch
    (rows, entries, rows per tile, overflow capacity, queue slots), for ``slots`` chunk slots and
    ``resident`` blocks resident on the device."""
    tile_rows = stats_tile_rows(m, nnz, index_itemsize, resident)
    return ((min(-(-m // tile_rows) + slots, resident),),
            (np.int64(m), np.int64(nnz), np.int32(tile_rows), np.int64(overflow_capacity(nnz)), np.int64(slots)))


def direct_launch(m: int, nnz: int, index_itemsize: int, multiprocessors: int) -> tuple[int, int, int]:
    """``csr_stats_direct``'s grid, rows per block for the row statistics (a multiple of 32, at
    most STATS_WINDOW), and items per block along the merge path of the rows' ends and the
    entries (``m + nnz`` items) for the structure statistics, for a matrix of ``m > 0`` rows and
    ``nnz`` entries on a device of ``multiprocessors`` SMs; one block up to SINGLE_BLOCK_ITEMS
    items and STATS_WINDOW rows.
    A small matrix spreads over the SMs, a block for each DIRECT_THREAD_VECTORS 16-byte vectors
    of columns a thread. Past two such blocks an SM, every SM takes the same number of blocks
    (a grid that fills them unevenly waits for the fullest): the fewest of DIRECT_BLOCKS_PER_SM
    whose instantiation's round (DIRECT_VECTORS vectors a thread) holds a block's share of the
    entries, else the fullest (then a block takes several rounds). Where the pass is issue-bound,
    fewer and fuller blocks cost less per block's work, up to one round a block (measured on an
    H200, see docs/performance.md).
    At least enough blocks for the rows (then a block takes more).

    >>> direct_launch(400, 1920, 4, 132), direct_launch(1024, 4992, 4, 132), direct_launch(90_000, 448_800, 4, 132)
    ((1, 416, 2320), (3, 352, 2006), (264, 352, 2041))
    >>> [direct_launch(n * n, 5 * n * n - 4 * n, 4, 132)[0] for n in (500, 600, 650, 700, 800, 1000)]
    [264, 264, 396, 396, 528, 528]
    >>> direct_launch(3_000_000, 3_000_000, 8, 132)  # the rows need more blocks
    (1489, 2016, 4030)
    """
    items = m + nnz
    if items <= SINGLE_BLOCK_ITEMS and m <= STATS_WINDOW:
        return 1, -(-m // 32) * 32, items
    vector = 16 // index_itemsize  # entries of a 16-byte vector
    grid = -(-items // (STATS_BLOCK * DIRECT_THREAD_VECTORS * vector))
    if grid > 2 * multiprocessors:
        def round_holds(blocks: int) -> bool:  # (+1 vector: a thread's run may start mid-vector)
            block_vectors = -(-nnz // (blocks * multiprocessors * vector)) + 1
            return block_vectors <= DIRECT_VECTORS[blocks] * STATS_BLOCK
        blocks = next((b for b in DIRECT_BLOCKS_PER_SM if round_holds(b)), DIRECT_BLOCKS_PER_SM[-1])
        grid = blocks * multiprocessors
    grid = max(grid, -(-m // STATS_WINDOW), 1)
    rows = -(-m // grid)
    return grid, -(-rows // 32) * 32, -(-items // grid)


def direct_expression(grid: int, multiprocessors: int) -> str:
    """The instantiation of ``csr_stats_direct`` for a grid on a device of ``multiprocessors``
    SMs: the one whose launch bounds hold the grid in one wave (the most registers a thread), or
    the fullest (DIRECT_BLOCKS_PER_SM).

    >>> [direct_expression(grid, 132) for grid in (264, 396, 1489)]
    ['csr_stats_direct<{I}, 2, 7>', 'csr_stats_direct<{I}, 3, 7>', 'csr_stats_direct<{I}, 4, 6>']
    """
    blocks = next((b for b in DIRECT_BLOCKS_PER_SM if grid <= b * multiprocessors), DIRECT_BLOCKS_PER_SM[-1])
    return DIRECT_EXPRESSIONS[blocks]


def _summary_arguments(m: int, nnz: int, value_bytes: int) -> tuple[np.generic, ...]:
    """``stats_summary``'s arguments after the record's pointer, for a matrix of ``m > 0`` rows
    and ``nnz`` entries: the row length past which CSR's rows are long, the rows SELL may stage
    (:data:`sell.HOT_BYTES` of values), the value bytes, and the row counts at which the
    QUANTILES' lengths are reached (the shortest length whose cumulative rows reach q * m)."""
    return (np.int64(long_row_limit(threads_per_row(nnz / m))), np.int64(sell.HOT_BYTES // value_bytes),
            np.int32(value_bytes), *(np.int64(math.ceil(q * m)) for q in QUANTILE_FRACTIONS))


def _resident_blocks(index_itemsize: int, device: int | None = None) -> int:
    """Blocks of ``csr_stats`` (STATS_BLOCKS_PER_SM) resident on the device at once."""
    return STATS_BLOCKS_PER_SM[index_itemsize] * device_properties(device)["multiprocessors"]


def _statistics_arguments(csr: Any, buffer: Any, queue: Any, epoch: int) -> tuple[tuple[int], tuple[Any, ...]]:
    """``csr_stats``'s grid and arguments for a GPU CSR with at least one row. ``buffer``
    (uint64): the kernel's :data:`STATS_COUNTERS` work counters, then the statistics buffer
    (layout in sparsegpu/reference/stats.py), with words 0 .. STATS_COUNTERS + OUT_OVERFLOW zero
    and room for :func:`overflow_capacity` longer rows after them. ``queue`` (uint64,
    QUEUE_WORDS words per chunk slot, never written by the host but zeroed when allocated): its
    chunk queue, whose slots count as published when they hold ``epoch``, which must exceed
    every earlier call's epoch on this queue. (The workspace packs the same once per matrix
    shape and keeps it between calls.)"""
    itemsize = csr.index_dtype.itemsize
    grid, scalars = _statistics_launch(csr.shape[0], csr.nnz, itemsize, queue.size // QUEUE_WORDS,
                                       _resident_blocks(itemsize))
    pointer = buffer.data.ptr
    return grid, (csr.indptr, csr.indices, *scalars, np.uint64(epoch), np.uint64(pointer),
                  np.uint64(pointer + 8 * STATS_COUNTERS), np.uint64(queue.data.ptr))


def _statistics_kernel(csr: Any, buffer: Any, queue: Any, epoch: int) -> None:
    """Launch ``csr_stats`` afresh (see :func:`_statistics_arguments`)."""
    grid, arguments = _statistics_arguments(csr, buffer, queue, epoch)
    stats_kernel("csr_stats<{I}>", csr.index_dtype)(grid, (STATS_BLOCK,), arguments)


#: The kernels' parameter types (kernels/matrix_stats_tiled.cu, matrix_stats_direct.cu), for their packed launches.
CSR_STATS_PARAMETERS = ([ctypes.c_uint64] * 2 + [ctypes.c_int64] * 2 + [ctypes.c_int32] + [ctypes.c_int64] * 2
                        + [ctypes.c_uint64] * 4)  # indptr, indices, n_rows ... queue_capacity, epoch ... queue
STATS_SUMMARY_PARAMETERS = ([ctypes.c_uint64] * 2 + [ctypes.c_int64] * 3 + [ctypes.c_uint64] * 2
                            + [ctypes.c_int64] * 2 + [ctypes.c_int32] + [ctypes.c_int64] * 3)  # counters ... target99
DIRECT_PARAMETERS = ([ctypes.c_uint64] * 2 + [ctypes.c_int64] * 2 + [ctypes.c_int32] + [ctypes.c_int64] * 2
                     + [ctypes.c_uint64] * 4 + STATS_SUMMARY_PARAMETERS[7:])  # indptr ... record, limit ... target99


def _direct_arguments(csr: Any, buffer: Any, epoch: int,
                      record: int) -> tuple[str, tuple[int], tuple[Any, ...]]:
    """``csr_stats_direct``'s instantiation (:func:`direct_expression`), grid and arguments for a
    GPU CSR with at least one row, on ``buffer`` as for :func:`_statistics_arguments`,
    summarising into the pinned host memory at ``record`` (0: the buffer is left for the host)."""
    m, nnz, itemsize = csr.shape[0], csr.nnz, csr.index_dtype.itemsize
    multiprocessors = device_properties()["multiprocessors"]
    grid, block_rows, block_items = direct_launch(m, nnz, itemsize, multiprocessors)
    pointer = buffer.data.ptr
    arguments = (csr.indptr, csr.indices, np.int64(m), np.int64(nnz), np.int32(block_rows), np.int64(block_items),
                 np.int64(overflow_capacity(nnz)), np.uint64(pointer), np.uint64(pointer + 8 * STATS_COUNTERS),
                 np.uint64(epoch), np.uint64(record), *_summary_arguments(m, nnz, csr.dtype.itemsize))
    return direct_expression(grid, multiprocessors), (grid,), arguments


def queue_capacity(nnz: int, index_itemsize: int) -> int:
    """Chunk slots ``csr_stats`` may need: a tile hands on its entries past the first work item
    in chunks of a work item, so all tiles together hand on fewer than nnz / item chunks."""
    return nnz // (STATS_ITEM_BYTES // index_itemsize) + 1


@dataclass
class _Plan:
    """A matrix shape's launches: ``first`` (csr_stats_direct, or csr_stats), ``summary``
    (stats_summary after csr_stats; None for the direct pass, which summarises in its last block),
    the first's grid, and the overflow list's room."""

    first: PackedLaunch
    summary: PackedLaunch | None
    grid: int
    capacity: int


class _Workspace:
    """One thread's statistics workspace on one device, kept between calls (allocating and
    zeroing fresh memory, and copying into pageable memory, cost more than the kernel on small
    matrices): the kernels' counters and buffer, zero between calls (``stats_summary`` zeroes
    what ``csr_stats`` counted into, or the host does after reading a head it left); the chunk
    queue; the pinned host record ``stats_summary`` writes into (device code reaches pinned
    memory at its host address); the pinned host copy of the buffer's head, for the calls
    that read it; and the epoch of the last call. A call returns once its kernel has published the
    record (:meth:`await_record`), after which the kernel writes nothing, so the thread's next
    call may reuse them on any stream.

    The launches' host work is kept too: per index type the two kernels' launches with their
    arguments packed in C storage (:class:`PackedLaunch`; a CuPy launch of a dozen arguments costs
    more than the kernels on small matrices) and the resident blocks; the buffer's and queue's
    pointers and the queue's slots (renewed when they grow); and the last matrix's plan (the
    packed arguments, the grid and the overflow capacity, from its rows, entries, index and value
    sizes, and the slots), which a call for another matrix replaces. A call then sets the CSR's
    arrays and its epoch, and launches."""

    def __init__(self, device: int) -> None:
        import cupy

        self.device = device
        self.buffer = cupy.empty(0, dtype=np.uint64)
        self.queue = cupy.empty(0, dtype=np.uint64)
        words = OUT_OVERFLOW + HEAD_OVERFLOW_ROWS
        self.head = np.frombuffer(cupy.cuda.alloc_pinned_memory(words * 8), np.int64, words)
        self.head_pointer = self.head.ctypes.data
        self.head_words = self.head[:OUT_OVERFLOW]
        self.record = np.frombuffer(cupy.cuda.alloc_pinned_memory(RECORD_WORDS * 8), np.int64, RECORD_WORDS)
        self.record[:] = 0
        self.record_pointer = self.record.ctypes.data
        self.epoch = 0
        self.zero = True  # whether the counters and head are zero (False only if a call broke off)
        self.launches: dict[np.dtype, tuple[PackedLaunch, PackedLaunch, dict[str, PackedLaunch]]] = {}
        self.plan_key: tuple[int, int, np.dtype, int, bool, int] | None = None
        self.current_stream = cupy.cuda.get_current_stream  # (looked up once: a call is a few microseconds)
        self._renew_pointers()

    def fit(self, words: int, queue_words: int) -> None:
        """Grow (by doubling) to at least ``words`` buffer words and ``queue_words`` queue words."""
        import cupy

        if self.buffer.size >= words and self.queue.size >= queue_words:
            return
        if self.buffer.size < words:
            self.buffer = cupy.zeros(max(words, 2 * self.buffer.size), dtype=np.uint64)
        if self.queue.size < queue_words:
            # Zeroed once: the host never writes it again, and a slot holds an older epoch
            # until a chunk is published in it.
            self.queue = cupy.zeros(max(queue_words, 2 * self.queue.size), dtype=np.uint64)
        self._renew_pointers()

    def _renew_pointers(self) -> None:
        self.pointer = self.buffer.data.ptr
        self.slots = self.queue.size // QUEUE_WORDS
        self.plan_key = None  # its pointers and slots may have changed

    def plan(self, m: int, nnz: int, index_dtype: np.dtype, value_bytes: int) -> _Plan:
        """The launches for a matrix of ``m > 0`` rows, ``nnz`` entries and these index and value
        types, their arguments set but for the CSR's arrays, the epoch and (direct pass) the
        record; the buffer and queue grown to fit it."""
        direct = nnz <= DIRECT_MAX_ENTRIES and m + nnz <= DIRECT_ITEM_LIMIT
        # (The rules' limits are in the key, so that a call after they change plans afresh.)
        key = (m, nnz, index_dtype, value_bytes, direct, SINGLE_BLOCK_ITEMS)
        if key != self.plan_key:
            capacity, itemsize = overflow_capacity(nnz), index_dtype.itemsize
            # (The direct pass has no chunk queue.)
            self.fit(STATS_COUNTERS + OUT_OVERFLOW + capacity,
                     0 if direct else QUEUE_WORDS * queue_capacity(nnz, itemsize))
            if index_dtype not in self.launches:
                function = functools.partial(stats_kernel, index_dtype=index_dtype)
                self.launches[index_dtype] = (
                    PackedLaunch(function("csr_stats<{I}>"), CSR_STATS_PARAMETERS),
                    PackedLaunch(function("stats_summary<{I}>"), STATS_SUMMARY_PARAMETERS),
                    {expression: PackedLaunch(function(expression), DIRECT_PARAMETERS)
                     for expression in DIRECT_EXPRESSIONS.values()})
            stats, summary, direct_instantiations = self.launches[index_dtype]
            counters, out = self.pointer, self.pointer + 8 * STATS_COUNTERS
            summary_arguments = _summary_arguments(m, nnz, value_bytes)
            if direct:
                multiprocessors = device_properties(self.device)["multiprocessors"]
                grid, block_rows, block_items = direct_launch(m, nnz, itemsize, multiprocessors)
                direct_stats = direct_instantiations[direct_expression(grid, multiprocessors)]
                direct_stats.set(2, m, nnz, block_rows, block_items, capacity, counters, out)
                direct_stats.set(11, *summary_arguments)
                plan = _Plan(direct_stats, None, grid, capacity)
            else:
                (grid,), scalars = _statistics_launch(m, nnz, itemsize, self.slots,
                                                      _resident_blocks(itemsize, self.device))
                stats.set(2, *scalars)
                stats.set(8, counters, out, self.queue.data.ptr)
                summary.set(0, counters, out, m, nnz, capacity)
                summary.set(6, self.record_pointer, *summary_arguments)
                plan = _Plan(stats, summary, grid, capacity)
            self.plan_key, self.last_plan = key, plan
        return self.last_plan

    def launch(self, csr: Any, summarise: bool) -> tuple[int, int]:
        """Launch the statistics of ``csr`` (at least one row) in the current stream: the direct
        pass, or ``csr_stats`` then ``stats_summary``; summarised into the record if
        ``summarise``, else the head is left for the caller. Returns the overflow capacity and
        the stream."""
        plan = self.plan(csr.shape[0], csr.nnz, csr.index_dtype, csr.dtype.itemsize)
        if not self.zero:
            self.clear()
        self.epoch += 1
        self.zero = False
        stream = self.current_stream().ptr
        first = plan.first
        if plan.summary is None:
            # (Each set alone: PackedLaunch.set's generality costs about a microsecond a call.)
            arguments = first.arguments
            arguments[0].value = csr.indptr.data.ptr
            arguments[1].value = csr.indices.data.ptr
            arguments[9].value = self.epoch
            arguments[10].value = self.record_pointer if summarise else 0
            first(plan.grid, STATS_BLOCK, stream)
        else:
            first.set(0, csr.indptr.data.ptr, csr.indices.data.ptr)
            first.set(7, self.epoch)
            first(plan.grid, STATS_BLOCK, stream)
            if summarise:
                plan.summary.set(5, self.epoch)
                plan.summary(1, STATS_BLOCK, stream)
        return plan.capacity, stream

    def await_record(self, stream: int) -> np.ndarray:
        """The record of the launch just made on ``stream`` once its kernel has published it (its
        epoch shows, written after the other words are visible: ``publish_record`` in
        kernels/matrix_stats_summary.cuh). Polled for up to RECORD_POLL_NS, which returns sooner than a
        synchronisation (the record shows before the kernel has ended, and the synchronisation's
        own call costs more than the poll), then waited for on the stream, which also raises a
        failed kernel's error. RuntimeError if the kernel ended without writing it."""
        record, epoch = self.record, self.epoch
        if POLL_RECORD:
            read, deadline = record.item, 0
            while True:
                for _ in range(64):
                    if read(RECORD_EPOCH) == epoch:
                        return record
                now = time.perf_counter_ns()
                if not deadline:
                    deadline = now + RECORD_POLL_NS
                elif now > deadline:
                    break
        import cupy

        cupy.cuda.runtime.streamSynchronize(stream)
        if record.item(RECORD_EPOCH) != epoch:
            raise RuntimeError("the statistics kernel finished without writing its record")
        return record

    def clear(self) -> None:
        """Zero the counters and the head, and wait for it (a later call may come on another
        stream)."""
        import cupy

        stream = cupy.cuda.get_current_stream()
        cupy.cuda.runtime.memsetAsync(self.pointer, 0, (STATS_COUNTERS + OUT_OVERFLOW) * 8, stream.ptr)
        stream.synchronize()
        self.zero = True

    def read_head(self, capacity: int, stream: int) -> tuple[np.ndarray, np.ndarray]:
        """After a launch on ``stream`` that left the head: the head and the longer rows'
        lengths, as in :func:`_read_statistics`; the counters and head zeroed again."""
        import cupy

        runtime = cupy.cuda.runtime
        copied = min(HEAD_OVERFLOW_ROWS, capacity, self.head.size - OUT_OVERFLOW)
        runtime.memcpyAsync(self.head_pointer, self.pointer + 8 * STATS_COUNTERS, (OUT_OVERFLOW + copied) * 8,
                            runtime.memcpyDeviceToHost, stream)
        runtime.streamSynchronize(stream)
        longer = min(self.head.item(OUT_OVERFLOW_ROWS), capacity)
        if longer <= copied:
            head, longer = self.head_words, self.head[OUT_OVERFLOW:OUT_OVERFLOW + longer]
        else:
            first = STATS_COUNTERS + OUT_OVERFLOW
            head, longer = self.head_words, self.buffer[first:first + longer].get().view(np.int64)
        self.clear()
        return head, longer


class _Workspaces(threading.local):
    """Per thread: a :class:`_Workspace` per device, and the runtime's current device (its
    function, looked up on the thread's first call)."""

    def __init__(self) -> None:
        self.by_device: dict[int, _Workspace] = {}
        self.current_device: Callable[[], int] | None = None


_WORKSPACES = _Workspaces()


def _workspace() -> _Workspace:
    """This thread's workspace on the current device."""
    spaces = _WORKSPACES
    if spaces.current_device is None:
        import cupy

        spaces.current_device = cupy.cuda.runtime.getDevice
    device = spaces.current_device()
    space = spaces.by_device.get(device)
    if space is None:
        space = spaces.by_device[device] = _Workspace(device)
    return space


#: Overflow-list entries copied back with the head: matrices with at most this many rows past the
#: bins (R-MAT scale 21 has 232) need no second copy and synchronisation.
HEAD_OVERFLOW_ROWS = 1024
#: The record ``stats_summary`` writes into host memory (kernels/matrix_stats_common.cuh
#: RECORD_*): the call's epoch (written last: the host polls for it), the status, the head's
#: first OUT_BINS words, then the SUMMARY_WORDS words of the summary (summary.py ``_summary_words``).
RECORD_EPOCH, RECORD_STATUS, RECORD_HEAD, RECORD_SUMMARY = 0, 1, 2, 2 + OUT_BINS
RECORD_WORDS = RECORD_SUMMARY + SUMMARY_WORDS
#: The record's status: summarised (the buffer zeroed again), or the head left for the host.
STATUS_SUMMARISED, STATUS_HEAD_KEPT = 1, 2
#: How long a call polls its pinned record before it synchronises the stream instead (which
#: releases the GIL): the direct pass publishes within it up to its DIRECT_MAX_ENTRIES, and a
#: longer call loses little by synchronising.
RECORD_POLL_NS = 100_000
#: Polling needs the host to read the record's words in the order the device made them visible,
#: as x86-64 does for plain loads; other hosts synchronise the stream.
POLL_RECORD = platform.machine().lower() in ("x86_64", "amd64")


def _read_statistics(csr: Any) -> tuple[np.ndarray, np.ndarray]:
    """(the statistics buffer's head, words 0 .. OUT_OVERFLOW, and the longer rows' lengths) on
    the host as int64. On the GPU both are views of this thread's pinned workspace, valid until
    its next call: one launch that leaves the head, one copy back of the head and the first
    HEAD_OVERFLOW_ROWS overflow entries (a second copy only when more rows are past the bins),
    then the head zeroed again. (:func:`matrix_stats` reads only the kernel's summary.)"""
    m = csr.shape[0]
    if csr.backend == "cpu" or not m:
        capacity = overflow_capacity(csr.nnz)
        out = np.zeros(OUT_OVERFLOW + capacity, dtype=np.uint64)
        reference_stats.csr_stats(csr.indptr, csr.indices, m, capacity, out)
        out = out.view(np.int64)
        return out[:OUT_OVERFLOW], out[OUT_OVERFLOW:OUT_OVERFLOW + min(int(out[OUT_OVERFLOW_ROWS]), capacity)]
    space = _workspace()
    return space.read_head(*space.launch(csr, summarise=False))


def _statistics_record(csr: Any) -> list:
    """The record's words from RECORD_HEAD on: the head's first OUT_BINS words and the summary
    (summary.py ``_summary_words``). On the GPU, ``csr_stats_direct`` (or ``csr_stats`` then
    ``stats_summary``) summarises into pinned host memory, which the host polls (or, for what the
    kernel leaves to the host, the head is read back and summarised here)."""
    m = csr.shape[0]
    value_bytes, index_bytes = csr.dtype.itemsize, csr.index_dtype.itemsize
    if csr.backend == "cpu" or not m:
        head, longer = _read_statistics(csr)
        return record_of_buffer(head, longer, m, csr.nnz, value_bytes, index_bytes)
    space = _workspace()
    capacity, stream = space.launch(csr, summarise=True)
    record = space.await_record(stream)
    if record.item(RECORD_STATUS) == STATUS_SUMMARISED:
        space.zero = True
        return record[RECORD_HEAD:].tolist()
    head, longer = space.read_head(capacity, stream)
    return record_of_buffer(head, longer, m, csr.nnz, value_bytes, index_bytes)


def _statistics_buffer(csr: Any) -> np.ndarray:
    """The statistics buffer of kernels/matrix_stats_*.cu (layout in sparsegpu/reference/stats.py)
    on the host as int64 (a copy of its own), up to the end of its filled overflow list."""
    head, longer = _read_statistics(csr)
    return np.concatenate([head, longer])


def matrix_stats(A: Any, *, backend: str | None = None) -> MatrixStats:
    """Row-length and structure statistics of a sparse matrix: what :func:`sparsegpu.advise`
    reads off it.

    The statistics are computed where the matrix lives: on the GPU in one pass over indptr and
    indices, summarised on the device; on the CPU by the NumPy reference. Both backends give
    identical statistics.

    Parameters
    ----------
    A : scipy.sparse matrix or array, or sparsegpu.SparseMatrix
        The matrix. A sparsegpu matrix is read as CSR on its own backend.
    backend : {"cpu", "gpu"}, optional
        Where a SciPy matrix is uploaded to (default: the active backend). A sparsegpu matrix
        stays on its own backend.

    Returns
    -------
    MatrixStats
        The row lengths (mean, spread, quantiles, empty rows), each format's padding, and where
        the entries sit relative to the diagonal.

    Raises
    ------
    TypeError
        If ``A`` is a dense array or not a sparse matrix, or its index arrays hold floats.
    ValueError
        If its index arrays hold NaN.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from sparsegpu import matrix_stats
    >>> s = matrix_stats(sp.csr_array(sp.eye_array(40)), backend="cpu")
    >>> s.row_max, s.bandwidth, s.sell_fill, s.diagonal_fraction
    (1, 0, 0.6, 1.0)
    """
    csr = as_csr(A, backend)
    return stats_of_record(_statistics_record(csr), csr.shape, csr.nnz, csr.dtype.itemsize,
                            csr.index_dtype.itemsize)


"""The format advisor: row-length statistics -> per-format estimates -> a choice -> reasons.

``advise(S)`` reads a matrix once on its backend, estimates each format's SpMV time with a
small model, and says which format to use, with what parameters and why.

The statistics (:func:`matrix_stats`) are meant to cost at most one CSR SpMV, host work
included. On the GPU they read indptr once and indices once (kernels/matrix_stats.cu): the
row-length histogram (lengths below 4096 binned in shared memory, longer rows listed), the
longest row, SELL's slice widths, and where the entries sit relative to the diagonal, merged
into one buffer with integer atomics; then one block summarises the row lengths (quantiles, HYB's
width, the squares' sum, ...) exactly as the host would (:func:`_summary_words`, its twin), writes
the record straight into pinned host memory, and zeroes the buffer for the next call. Up to
DIRECT_MAX_ENTRIES entries that is one launch, ``csr_stats_direct``: a block takes a run of rows
for the row statistics and a stretch of the merge path of rows and entries for the structure
(so a long row or a run of empty rows loads no block more than another; each thread a run of
consecutive column vectors, every entry's row found from marks the rows leave at their first
entries, without a search), and the last block to finish summarises (the smallest, up to SINGLE_BLOCK_ITEMS rows plus
entries, on one block that summarises its own shared bins). When every row is shorter than 128
entries one warp summarises, with shuffles and one round trip of loads. Larger matrices take
``csr_stats`` (tiles of rows whose pointers a block holds in shared memory, entries past a work
item handed to a queue in chunks that any block takes), then ``stats_summary``. Launches are
packed once per matrix shape (:class:`PackedLaunch`); the kernel zeroes the buffer, writes the
record and then the call's epoch, and the host polls the epoch instead of synchronising (x86-64
hosts; :meth:`_Workspace.await_record`). Nothing is set before, copied back after or summed on
the host (the head comes back only for what the summary leaves to the host: more than 1024 rows
past the bins, costs past float64's exact integers). The CPU backend fills the same buffer with
the NumPy twin (sparsegpu/reference/stats.py) and summarises it on the host, so both backends
give identical statistics. Measured on an H200 (asv_benchmarks/RESULTS.md, fourteenth session),
end to end against one CSR SpMV call timed the same way: 0.77 to 0.92 on 2-D Poisson matrices
from 400 to 250,000 rows and 0.78 to 0.92 at 490,000, the hardest size (both calls take 15-27 us
of launch latency and, past a few hundred thousand rows, instruction issue), at most 0.92 on the
32 real matrices, 0.53 to 0.83 on R-MAT graphs of scale 8 to 20, and at most 0.83 past 490,000
rows.

The model, per format f, for ``A @ x`` timed back to back (the host issues the next call while
the device runs this one, so the slower of the two sets the pace):

    time_f   = max(host_f, device_f)
    host_f   = call_f + (launches_f - 1) * t_launch + allocations_f * t_alloc
    device_f = launches_f * t_kernel
               + max(bytes_f / (e_f * efficiency_f * copy_bandwidth) + gathers / gather_bandwidth,
                     (chain_f + unit_round_loads * unit_rounds_f) * t_load)
    gathers  = nnz * SECTOR_BYTES * d / (d + GATHER_WINDOW_BYTES),  d = mean |i - j| * value bytes

- ``call_f``: the host's fixed cost of one product in format f (the Python call and its first
  launch); ``launches_f`` and ``allocations_f``: the kernel launches and device arrays of one
  product (CSR adds two launches and an array when it has rows past the sub-warp limit; COO
  scales y, then reduces in a tree of launches with two fresh carry arrays per level; HYB's
  overflow is such a tree after its ELL launch). Most real matrices fit in L2 and take 14-30 us
  in any format: there these counts decide, unless a serial chain is longer.
- ``bytes_f``: what format f's kernel streams, padding included (stored values and indices,
  pointers or permutations, x once, y once); ``gathers``: the L2 sectors of x moved by gathers
  that miss L1, the same for every format (near the diagonal a block's x stays in L1), less, for
  SELL with staged columns, the share those serve (``longest_rows_fraction``).
- ``chain_f``: the longest chain of dependent loads one thread runs: a round of 4 slots loads
  indices, then the x they name (JDS first reads the diagonals' bounds). A thread walks a whole
  row in ELL, JDS and SELL's direct mode, up to 64 sub-warp steps in CSR (then chunks), a tile
  per tree level in COO.
- SELL: :func:`sell_layout` predicts what its conversion builds, through sell.py's own rules
  (choose_sigma, choose_split): sigma, the slots, ``split``, the longest row's parts, the units
  and the mode. In ``"units"`` mode (slices wider than ``split`` or hot columns) groups of 32
  threads take the units in one persistent launch: the chain is the units per group times the
  slice bounds, ``unit_rounds_f`` rounds over a lane's at most ``split`` slots (4 slots a round,
  8 with staged columns; the loads per round fitted: ``unit_round_loads``) and a part's partial
  and ticket, then the longest row's partials
  added SELL_PARTS_IN_FLIGHT at a time; ``e_f`` = SELL_UNITS_EFFICIENCY for its bookkeeping
  (1 for every other format and mode).
- Fitted on a GPU by ``scripts/calibrate_advisor.py fit`` (least squares on log time, soft L1
  against bursts of host load) from measured SpMV times over the real and generated matrices:
  ``call_f`` and ``efficiency_f`` per format (keys ``call_us``, ``efficiency``), ``t_launch``
  (``launch_us``), ``t_alloc`` (``alloc_us``), ``t_kernel`` (``kernel_us``),
  ``gather_bandwidth`` (``gather_GBps``), ``t_load`` (``load_ns``) and ``unit_round_loads``;
  ``copy_bandwidth`` (``copy_GBps``) is measured with them. The fit and its source are kept in
  ``sparsegpu/advisor_calibration.json``.

Conversion costs (in CSR SpMV times) come from the same calibration, so ``n_spmv`` can weigh
whether converting pays off. ``autotune=True`` measures every candidate on the device.
"""

from __future__ import annotations

import bisect
import ctypes
import functools
import itertools
import json
import math
import operator
import platform
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sparsegpu._kernels import KernelFile, PackedLaunch, device_properties
from sparsegpu.formats import sell
from sparsegpu.formats._base import SparseMatrix, as_scipy_sparse
from sparsegpu.formats._compressed import (LONG_BLOCK, LONG_CHUNK, THREADS_PER_ROW, long_row_limit,
                                          threads_per_row)
from sparsegpu.formats.coo import TILE as COO_TILE
from sparsegpu.formats.ell import DEFAULT_MAX_FILL
from sparsegpu.formats.sell import DEFAULT_C
from sparsegpu.reference import stats as stats_twins
from sparsegpu.reference.stats import (OUT_BINS, OUT_OVERFLOW, OUT_OVERFLOW_ROWS, ROW_STATS_BINS, SELL_SLICE,
                                       overflow_capacity)

#: Blocks per multiprocessor the launcher keeps resident, by index item size (csr_stats's launch
#: bounds cap its registers at 40 a thread for int32 and 48 for int64, and its shared memory, 33
#: and 41 KB, allows as many), so one wave of blocks takes every tile and chunk through the
#: ticket, and merging each block's 4096 shared bins stays small next to its share of the rows.
STATS_BLOCKS_PER_SM = {4: 6, 8: 5}
STATS_BLOCK = 256  # kernels/matrix_stats.cu STATS_BLOCK
STATS_WINDOW = 2016  # kernels/matrix_stats.cu STATS_WINDOW: rows a tile holds at most
STATS_ITEM_BYTES = 65536  # kernels/matrix_stats.cu STATS_ITEM<I> * sizeof(I): columns per work item
STATS_COUNTERS = 48  # words of work counters before the statistics buffer (kernels/matrix_stats.cu COUNTER_*)
#: Matrices of at most this many entries take the direct pass (kernels/matrix_stats.cu
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
#: csr_stats_direct's instantiations (kernels/matrix_stats.cu MIN_BLOCKS, VECTORS): the blocks an
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
QUEUE_WORDS = 4  # kernels/matrix_stats.cu QUEUE_WORDS: words per chunk slot
STATS_KERNELS = KernelFile("matrix_stats.cu", ["csr_stats<{I}>", "stats_summary<{I}>", *DIRECT_EXPRESSIONS.values()],
                           value_dtypes=[np.float64])
CALIBRATION_FILE = Path(__file__).with_name("advisor_calibration.json")
#: Formats the advisor may recommend for ``A @ x``. CSC is left out: its deterministic
#: ``A @ x`` gathers over a CSR copy, so it is never faster than CSR for that product.
CANDIDATES = ("csr", "coo", "ell", "hyb", "jds", "sell")
#: CSR is kept unless another format is predicted faster by more than this: it needs no
#: conversion, and smaller predicted differences are within the model's error.
CSR_MARGIN = 1.05


@dataclass(slots=True)
class MatrixStats:
    """What the advisor reads off a matrix. Row lengths count stored entries per row."""

    rows: int
    cols: int
    nnz: int
    density: float
    row_mean: float
    row_std: float
    row_min: int
    row_max: int
    row_quantiles: dict[str, int]
    row_cv: float
    empty_rows: int
    ell_fill: float  # padding slots per stored entry if stored as ELL
    hyb_width: int
    hyb_ell_fraction: float  # share of entries in HYB's ELL part at that width
    sell_fill: float  # padding per entry for SELL with C rows per slice, before the sigma sort
    csr_long_rows: int  # rows past the CSR sub-warp limit (split across blocks)
    bandwidth: int  # largest |i - j|
    mean_distance: float  # mean |i - j| over entries
    lower_fraction: float  # entries with j < i
    upper_fraction: float  # entries with j > i
    diagonal_fraction: float
    value_bytes: int
    index_bytes: int
    #: Share of the entries in the longest rows that SELL's staged columns would hold as many of
    #: (sell.HOT_BYTES / value_bytes rows), when some row reaches sell.HOT_MIN_GATHERS entries
    #: (else 0): the share of the gathers those columns would serve, exact for symmetric structure.
    longest_rows_fraction: float = 0.0

    @property
    def triangular(self) -> str | None:
        if self.nnz and self.upper_fraction == 0:
            return "lower"
        if self.nnz and self.lower_fraction == 0:
            return "upper"
        return None


@dataclass
class Estimate:
    """The model's view of one format on this matrix."""

    bytes: int
    launches: int
    serial_steps: int  # dependent loads on the longest chain of one thread
    time_us: float
    params: dict[str, Any] = field(default_factory=dict)
    refused: str | None = None  # why the format would refuse the matrix
    host_us: float = 0.0  # the host's share: the call, its launches and allocations
    device_us: float = 0.0  # the device's share: kernel starts, then streaming or the serial chain


@dataclass
class Advice:
    """``advise``'s answer: ``format`` and ``params`` to pass to ``asformat``/``from_scipy``,
    the ``stats`` behind them, per-format ``estimates``, the predicted ``ranking``, and a
    ``reason`` in plain sentences; with ``n_spmv``, ``payoff`` per format; with
    ``autotune``, ``measured`` GB/s per format and ``measured_best``."""

    format: str
    params: dict[str, Any]
    stats: MatrixStats
    estimates: dict[str, Estimate]
    ranking: list[str]
    reason: str
    payoff: dict[str, float] | None = None
    measured: dict[str, float] | None = None
    measured_best: str | None = None

    def __repr__(self) -> str:
        s = self.stats
        lines = [
            f"Advice: {self.format}" + (f" {self.params}" if self.params else ""),
            f"  matrix {s.rows}x{s.cols}, {s.nnz} entries; rows {s.row_min}..{s.row_max}, "
            f"mean {s.row_mean:.1f}, cv {s.row_cv:.2f}, {s.empty_rows} empty",
            "  predicted: " + ", ".join(
                f"{f} {self.estimates[f].time_us:.1f}us" for f in self.ranking),
        ]
        refused = [f"{f} ({e.refused})" for f, e in self.estimates.items() if e.refused]
        if refused:
            lines.append("  refused: " + "; ".join(refused))
        if self.measured:
            lines.append("  measured GB/s: " + ", ".join(f"{f} {g:.0f}" for f, g in self.measured.items())
                         + f" -> best {self.measured_best}")
        lines.append("  " + self.reason)
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["stats"]["triangular"] = self.stats.triangular
        return out


@functools.cache
def calibration() -> dict[str, Any]:
    """The model's fitted constants (see the module docstring)."""
    return json.loads(CALIBRATION_FILE.read_text())["model"]


# --------------------------------------------------------------------------- statistics


def _as_csr(A: Any, backend: str | None) -> Any:
    """A sparsegpu CSR of A: a sparsegpu matrix is converted on its backend; a scipy matrix
    is uploaded once."""
    if isinstance(A, SparseMatrix):
        return A.to_csr()
    from sparsegpu.formats.csr import CSR

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
    fewer and fuller blocks cost less per block's work, up to one round a block: on an H200
    (asv_benchmarks/RESULTS.md, fourteenth session) 2-D Poisson of 360,000 rows took 12.9 us on
    264 blocks against 14.4 on 528, of 490,000 rows 14.6 on 396 (one round) against 15.2 on 528
    and 17.9 on 264 (two rounds), of 640,000 rows 17.8 on 528 against 19.0-20.0 on 396 (two rounds).
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
            np.int32(value_bytes), *(np.int64(math.ceil(q * m)) for q in _QUANTILE_FRACTIONS))


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
    STATS_KERNELS.function("csr_stats<{I}>", np.float64, csr.index_dtype)(grid, (STATS_BLOCK,), arguments)


#: The kernels' parameter types (kernels/matrix_stats.cu), for their packed launches.
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
                function = functools.partial(STATS_KERNELS.function, value_dtype=np.float64, index_dtype=index_dtype)
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
        kernels/matrix_stats.cu). Polled for up to RECORD_POLL_NS, which returns sooner than a
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
#: The record ``stats_summary`` writes into host memory (kernels/matrix_stats.cu RECORD_*):
#: the call's epoch (written last: the host polls for it), the status, the head's first OUT_BINS
#: words, then the SUMMARY_WORDS words of :func:`_summary_words`.
RECORD_EPOCH, RECORD_STATUS, RECORD_HEAD, RECORD_SUMMARY, SUMMARY_WORDS = 0, 1, 2, 2 + OUT_BINS, 10
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
        stats_twins.csr_stats(csr.indptr, csr.indices, m, capacity, out)
        out = out.view(np.int64)
        return out[:OUT_OVERFLOW], out[OUT_OVERFLOW:OUT_OVERFLOW + min(int(out[OUT_OVERFLOW_ROWS]), capacity)]
    space = _workspace()
    return space.read_head(*space.launch(csr, summarise=False))


def _statistics_record(csr: Any) -> list:
    """The record's words from RECORD_HEAD on: the head's first OUT_BINS words and the summary
    (:func:`_summary_words`). On the GPU, ``csr_stats_direct`` (or ``csr_stats`` then
    ``stats_summary``) summarises into pinned host memory, which the host polls (or, for what the
    kernel leaves to the host, the head is read back and summarised here)."""
    m = csr.shape[0]
    value_bytes, index_bytes = csr.dtype.itemsize, csr.index_dtype.itemsize
    if csr.backend == "cpu" or not m:
        head, longer = _read_statistics(csr)
        return _record_of_buffer(head, longer, m, csr.nnz, value_bytes, index_bytes)
    space = _workspace()
    capacity, stream = space.launch(csr, summarise=True)
    record = space.await_record(stream)
    if record.item(RECORD_STATUS) == STATUS_SUMMARISED:
        space.zero = True
        return record[RECORD_HEAD:].tolist()
    head, longer = space.read_head(capacity, stream)
    return _record_of_buffer(head, longer, m, csr.nnz, value_bytes, index_bytes)


def _statistics_buffer(csr: Any) -> np.ndarray:
    """The statistics buffer of kernels/matrix_stats.cu (layout in sparsegpu/reference/stats.py)
    on the host as int64 (a copy of its own), up to the end of its filled overflow list."""
    head, longer = _read_statistics(csr)
    return np.concatenate([head, longer])


def _length_histogram(head: np.ndarray, longer: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(row lengths ascending, rows of each) as int64 arrays, from a statistics buffer's head and
    the overflow list as far as the buffer holds it. Only the bins up to the longest row are read.
    The lengths in the bins are distinct; the overflow rows follow one by one, sorted (a length
    may repeat there, which the summaries allow: it saves a unique)."""
    overflow_rows, longest = head[OUT_OVERFLOW_ROWS:OUT_BINS].tolist()
    if overflow_rows > longer.size:
        raise RuntimeError(f"{overflow_rows} rows of {ROW_STATS_BINS} entries or more cannot fit in "
                           f"{longer.size} entries: the matrix's indptr is not monotone")
    bins = head[OUT_BINS:OUT_BINS + (longest + 1 if 0 <= longest < ROW_STATS_BINS else ROW_STATS_BINS)]
    # A bool array's nonzero is several times faster than an int64 array's.
    lengths = bins.astype(bool).nonzero()[0]
    counts = bins.take(lengths)
    if longer.size:
        lengths = np.concatenate((lengths, np.sort(longer)))
        counts = np.concatenate((counts, np.ones(longer.size, counts.dtype)))
    return lengths, counts


def hyb_width_from_lengths(lengths: np.ndarray, counts: np.ndarray, value_dtype: Any, index_dtype: Any) -> int:
    """:func:`sparsegpu.formats.hyb.width_for_counts` of the dense histogram with ``counts[t]``
    rows of length ``lengths[t]`` (ascending, distinct), evaluated at the distinct lengths only,
    so the work does not grow with the longest row. HYB's cost is linear in the width between
    consecutive distinct lengths, so its first minimum over all widths lies at one of them; below
    the shortest length every row overflows and a wider ELL part only saves, so 0 never wins
    unless it is a length.

    >>> hyb_width_from_lengths(np.array([2, 4]), np.array([7, 1]), np.float64, np.int32)
    2
    """
    return _summary_of_many(lengths, counts, int(counts.sum()), np.dtype(value_dtype).itemsize,
                            np.dtype(index_dtype).itemsize, 0)[5]


#: Row-count fractions of the reported length quantiles (MatrixStats.row_quantiles).
QUANTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99}
_QUANTILE_FRACTIONS = tuple(QUANTILES.values())
#: The host summary's bins are read whole into Python when the longest row is shorter than
#: DENSE_BINS and none is past the bins, and summed there when at most FEW_LENGTHS of them hold
#: rows (most matrices): a NumPy call costs about half a microsecond whatever its size, a Python
#: step over an empty bin a few tens of nanoseconds, over a length about a quarter microsecond.
DENSE_BINS = 64
FEW_LENGTHS = 16
#: Lengths at most that :func:`_summary_of_bins` evaluates HYB's cost at, in Python.
HYB_WINDOW = 64
#: Rows up to this long never count as CSR's long rows (its sub-warp limit at one thread a row),
#: so the limit, a few Python calls, is only looked up for matrices with longer rows.
SHORTEST_LONG_ROW_LIMIT = long_row_limit(THREADS_PER_ROW[0])
_DENSE_SQUARES = [k * k for k in range(DENSE_BINS)]
_BIN_LENGTHS = np.arange(ROW_STATS_BINS, dtype=np.int64)
_BIN_SQUARES = (_BIN_LENGTHS * _BIN_LENGTHS).astype(np.float64)  # for a BLAS dot, exact below 2^53

# The host summary of the row lengths (m rows in all), in three equal ways: (shortest length,
# longest, empty rows, sum of squared lengths, the QUANTILES' lengths, HYB's width, entries in
# HYB's ELL part at that width, rows longer than `limit`). _summary_of_dense sums a short dense
# histogram in Python; _summary_of_bins takes the statistics buffer's bins (the dense histogram
# of the lengths below ROW_STATS_BINS) as they are and the longer rows' lengths apart, and
# declines (None) what it cannot settle from the bins; _summary_of_many takes every length,
# ascending, with its rows (_length_histogram). The q-quantile is the shortest length whose
# cumulative row count reaches q * m. The sum of squares is exact, then rounded once.
#
# HYB's width is the first minimum over the lengths w of its cost (R rows, E entries; `over`
# rows longer than w, holding `after` entries; v, i the value and index bytes)
#     cost(w) = R * w * (v + i) + (after - w * over) * (v + 2 i) + over * 2 v,
# evaluated with the same float64 operations, in the same order, as
# sparsegpu.formats.hyb.width_for_counts. A repeated length's first copy costs more than its
# last (by 2 v), where the minimum falls. The entries in the ELL part at that width are those of
# the rows up to it, plus w for every longer row.


def _cheapest_of_few(lengths: Iterable[int], counts: list[int], rows_to: int, entries_to: int, rows: int,
                     entries: int, value_bytes: int, index_bytes: int) -> tuple[int, int, int]:
    """HYB's first cheapest width among ``lengths`` (ascending, with ``counts`` rows of each: a
    length of none is skipped), past ``rows_to`` shorter rows holding ``entries_to`` entries, of
    ``rows`` rows and ``entries`` entries in all; with the rows and the entries up to it."""
    total, per_slot, per_overflow, per_over_row = float(rows), value_bytes + index_bytes, \
        value_bytes + 2 * index_bytes, 2 * value_bytes
    best = math.inf
    for length, count in zip(lengths, counts):
        if count:
            rows_to, entries_to = rows_to + count, entries_to + count * length
            over, w = float(rows - rows_to), float(length)
            cost = (total * w * per_slot + (float(entries - entries_to) - w * over) * per_overflow
                    + over * per_over_row)
            if cost < best:
                best, cheapest = cost, (length, rows_to, entries_to)
    return cheapest


def _summary_of_dense(bins: list[int], m: int, entries: int, value_bytes: int, index_bytes: int,
                      limit: int) -> tuple[int, int, int, float, list[int], int, float, int]:
    """The summary of a short dense histogram in Python integers: ``bins[k]`` rows of length k,
    up to the longest row, ``entries`` entries in all."""
    rows_upto = list(itertools.accumulate(bins))
    rows = rows_upto[-1]
    squares = sum(map(operator.mul, bins, _DENSE_SQUARES))
    quantiles = [bisect.bisect_left(rows_upto, q * m) for q in _QUANTILE_FRACTIONS]  # position k: length k
    width, rows_to, entries_to = _cheapest_of_few(range(len(bins)), bins, 0, 0, rows, entries, value_bytes,
                                                  index_bytes)
    return (bisect.bisect_left(rows_upto, 1), len(bins) - 1, bins[0], float(squares), quantiles, width,
            float(entries_to + width * (rows - rows_to)), rows - rows_upto[min(limit, len(bins) - 1)])


def _summary_of_many(lengths: np.ndarray, counts: np.ndarray, m: int, value_bytes: int, index_bytes: int,
                     limit: int) -> tuple[int, int, int, float, list[int], int, float, int]:
    """The summary of every length, ascending (a length may repeat), with its rows: NumPy arrays."""
    rows_upto = counts.cumsum()
    products = counts * lengths
    entries_upto = products.cumsum()
    rows, entries, longest = int(rows_upto[-1]), int(entries_upto[-1]), int(lengths[-1])
    # Exact in int64 below 2^63 (any matrix a device holds), the float64 sum past it.
    squares = float(products @ (lengths if entries * longest < 2**63 else lengths.astype(np.float64)))
    quantiles = lengths[rows_upto.searchsorted(np.array(_QUANTILE_FRACTIONS) * m)].tolist()
    widths = lengths.astype(np.float64)
    over = (rows - rows_upto).astype(np.float64)
    cost = (float(rows) * widths * (value_bytes + index_bytes)
            + ((entries - entries_upto).astype(np.float64) - widths * over) * (value_bytes + 2 * index_bytes)
            + over * (2 * value_bytes))
    t = int(cost.argmin())
    width = int(lengths[t])
    up_to_limit = int(lengths.searchsorted(limit, "right"))
    return (int(lengths[0]), longest, int(counts[0]) if lengths[0] == 0 else 0, squares, quantiles, width,
            float(entries_upto[t] + width * (rows - rows_upto[t])),
            rows - (int(rows_upto[up_to_limit - 1]) if up_to_limit else 0))


# _summary_of_bins evaluates HYB's cost only at the lengths that can hold its minimum, where every
# cost is exact (integers below 2^53, which R * (longest * (2 v + 3 i) + 2 v) bounds). With r_w
# the rows of length w or shorter, the exact cost falls from a length w to the next, w', by
#     2 v * (rows of length w') - (w' - w) * gain_w,  gain_w = (v + 2 i) * r_w - i * R,
# and gain grows with w. So the cost falls strictly while gain_w <= 0: the minimum lies at or past
# `first`, the shortest length with gain > 0. From any length p with gain_p > 0 on, the cost falls
# by at most 2 v * (R - r_p) in all and grows by at least gain_p per unit of width, so lengths past
# p + 2 v * (R - r_p) // gain_p (`reach`) cost more than p. With p the shortest length where
# gain_p >= i * R, reach is at most p + 2 v / i: the candidates are the lengths from about the
# i / (v + 2 i) quantile of the rows to a few past the 2 i / (v + 2 i) quantile (p50 at fp64 and
# int32), and the rows past the bins are never among them when reach is shorter than
# ROW_STATS_BINS.


def _summary_of_bins(bins: np.ndarray, longer: np.ndarray, longest: int, m: int, entries: int, value_bytes: int,
                     index_bytes: int, limit: int) -> tuple[int, int, int, float, list[int], int, float, int] | None:
    """The summary from the buffer's bins (``bins[k]`` rows of length k, up to the longest row or
    ROW_STATS_BINS) and the longer rows' lengths ``longer`` (unsorted), of ``entries`` entries
    in all, the longest row ``longest`` long; None where a quantile, HYB's width or ``limit``
    lies past the bins, where the costs are not exact, or where more than HYB_WINDOW lengths may
    hold HYB's width (see the comment above)."""
    rows_upto = np.add.accumulate(bins)  # rows of length k or shorter: position k
    rows = rows_upto.item(-1) + longer.size
    per_overflow = value_bytes + 2 * index_bytes
    if (rows * (longest * (2 * value_bytes + 3 * index_bytes) + 2 * value_bytes) > 2**53  # inexact costs
            or rows * (bins.size - 1) ** 2 >= 2**53  # an inexact float64 sum of the bins' squares
            or longer.size and (limit >= ROW_STATS_BINS or longer.size * longest * longest >= 2**63)):
        return None
    # Searched in integers: rows_upto >= 1, >= q * m; gain > 0; gain >= i * R; all the bins' rows.
    positions = rows_upto.searchsorted([1, *[math.ceil(q * m) for q in _QUANTILE_FRACTIONS],
                                        index_bytes * rows // per_overflow + 1,
                                        -(-2 * index_bytes * rows // per_overflow), rows - longer.size]).tolist()
    if max(positions) >= bins.size:
        return None
    shortest, *quantiles, first, pivot, last = positions
    pivot_rows = rows_upto.item(pivot)
    reach = pivot + 2 * value_bytes * (rows - pivot_rows) // (per_overflow * pivot_rows - index_bytes * rows)
    if longer.size and reach >= ROW_STATS_BINS or min(reach, bins.size - 1) - first >= HYB_WINDOW:
        return None
    stop = min(reach, bins.size - 1) + 1
    width, rows_to, entries_to = _cheapest_of_few(
        range(first, stop), bins[first:stop].tolist(), rows_upto.item(first - 1) if first else 0,
        int(bins[:first].dot(_BIN_LENGTHS[:first])) if first else 0, rows, entries, value_bytes, index_bytes)
    squares = int(_BIN_SQUARES[:last + 1].dot(bins[:last + 1])) + (int(longer.dot(longer)) if longer.size else 0)
    return (shortest, longest, bins.item(0), float(squares), quantiles, width,
            float(entries_to + width * (rows - rows_to)), rows - rows_upto.item(min(limit, bins.size - 1)))


def _entries_in_longest_rows(bins: np.ndarray, longer: np.ndarray, rows: int) -> int:
    """Entries in the ``rows`` longest rows, from the statistics buffer's bins (``bins[k]`` rows
    of length k) and the longer rows' lengths (unsorted).

    >>> bins = np.array([5, 0, 3, 1])  # five empty rows, three of 2 entries, one of 3
    >>> _entries_in_longest_rows(bins, np.array([9, 7]), 4), _entries_in_longest_rows(bins, np.array([9, 5, 7]), 2)
    (21, 16)
    """
    if longer.size >= rows:
        return int(np.partition(longer, longer.size - rows)[longer.size - rows:].sum())
    rows -= longer.size
    at_most = np.add.accumulate(bins)  # rows of length k or shorter: position k
    # The shortest length t taken: rows of length t or longer are at least `rows`, longer ones fewer.
    t = int(at_most.searchsorted(at_most.item(-1) - rows, "right"))
    longer_rows = at_most.item(-1) - at_most.item(t)  # rows in the bins longer than t
    return int(longer.sum()) + int(bins[t + 1:] @ _BIN_LENGTHS[t + 1:bins.size]) + (rows - longer_rows) * t


def matrix_stats(A: Any, *, backend: str | None = None) -> MatrixStats:
    """Row-length and structure statistics of a scipy or sparsegpu matrix, computed on the
    matrix's backend (a scipy matrix goes to the active backend); the same on both backends.

    >>> import scipy.sparse as sp
    >>> s = matrix_stats(sp.csr_array(sp.eye_array(40)), backend="cpu")
    >>> s.row_max, s.bandwidth, s.sell_fill, s.diagonal_fraction
    (1, 0, 0.6, 1.0)
    """
    csr = _as_csr(A, backend)
    return _stats_of_record(_statistics_record(csr), csr.shape, csr.nnz, csr.dtype.itemsize,
                            csr.index_dtype.itemsize)


def _summary_words(head: np.ndarray, longer: np.ndarray, m: int, nnz: int, value_bytes: int,
                   index_bytes: int) -> list:
    """The summary of the row lengths from a statistics buffer's head and overflow list, on the
    host (the twin of ``summarise`` in kernels/matrix_stats.cu): the shortest length, the empty
    rows, the sum of squared lengths, the QUANTILES' lengths, HYB's width, the entries in HYB's
    ELL part at that width, the rows longer than CSR's long-row limit, and the entries in the
    ``sell.HOT_BYTES // value_bytes`` longest rows (0 when SELL would stage no columns:
    :func:`_stats_of_record` ignores it then)."""
    overflow_rows, longest = head[OUT_OVERFLOW_ROWS:OUT_BINS].tolist()
    if not m:
        return [0] * SUMMARY_WORDS
    limit = long_row_limit(threads_per_row(nnz / m)) if longest > SHORTEST_LONG_ROW_LIMIT else longest
    # The lengths: the bins up to the longest row, then the longer rows' (at most
    # nnz / ROW_STATS_BINS): few values whatever the matrix's size. Summed in Python when
    # they are few and short, else from the bins as they are, else merged into one histogram.
    # The entries in all are nnz: a CSR's row lengths sum to it.
    summary = None
    if not overflow_rows and 0 <= longest < DENSE_BINS:
        bins = head[OUT_BINS:OUT_BINS + longest + 1].tolist()
        if len(bins) - bins.count(0) <= FEW_LENGTHS:
            summary = _summary_of_dense(bins, m, nnz, value_bytes, index_bytes, limit)
    if summary is None and 0 <= longest and overflow_rows <= longer.size:
        summary = _summary_of_bins(head[OUT_BINS:OUT_BINS + min(longest + 1, ROW_STATS_BINS)], longer, longest, m,
                                   nnz, value_bytes, index_bytes, limit)
    if summary is None:
        summary = _summary_of_many(*_length_histogram(head, longer), m, value_bytes, index_bytes, limit)
    row_min, row_max, empty, squares, quantiles, width, in_ell, long_rows = summary
    hot_entries = 0
    if nnz and row_max >= sell.HOT_MIN_GATHERS:
        bins = head[OUT_BINS:OUT_BINS + min(row_max + 1, ROW_STATS_BINS)]
        hot_entries = _entries_in_longest_rows(bins, longer, sell.HOT_BYTES // value_bytes)
    return [row_min, empty, squares, *quantiles, width, in_ell, long_rows, hot_entries]


def _record_of_buffer(head: np.ndarray, longer: np.ndarray, m: int, nnz: int, value_bytes: int,
                      index_bytes: int) -> list:
    """The record's words from RECORD_HEAD on, from a statistics buffer's head and overflow list."""
    return head[:OUT_BINS].tolist() + _summary_words(head, longer, m, nnz, value_bytes, index_bytes)


def _summarise(head: np.ndarray, longer: np.ndarray, shape: tuple[int, int], nnz: int, value_bytes: int,
               index_bytes: int) -> MatrixStats:
    """:class:`MatrixStats` from a statistics buffer's head and overflow list (host work only)."""
    return _stats_of_record(_record_of_buffer(head, longer, shape[0], nnz, value_bytes, index_bytes), shape, nnz,
                            value_bytes, index_bytes)


def _stats_of_record(words: list, shape: tuple[int, int], nnz: int, value_bytes: int,
                     index_bytes: int) -> MatrixStats:
    """:class:`MatrixStats` from the record's words from RECORD_HEAD on (the head's first
    OUT_BINS words, then :func:`_summary_words`'s); the squares and HYB's ELL entries are
    rounded to float64 once, whichever side summed them. (Every call of :func:`matrix_stats`
    pays for this: one flat unpacking, and the fields positionally, in their order.)"""
    m, n = shape
    (below, on, above, distance, band, slice_widths, _, longest,
     row_min, empty, squares, p50, p90, p99, width, in_ell, long_rows, hot_entries) = words
    quantiles = {"p50": p50, "p90": p90, "p99": p99}  # QUANTILES' keys
    if not nnz:  # (also every matrix without rows)
        return MatrixStats(m, n, 0, 0.0, 0.0, 0.0, row_min, longest if m else 0, quantiles, 0.0, empty, 0.0, width,
                           1.0, 0.0, long_rows, band, 0.0, 0.0, 0.0, 0.0, value_bytes, index_bytes, 0.0)
    mean = nnz / m
    var = float(squares) / m - mean * mean
    std = math.sqrt(var) if var > 0.0 else 0.0
    return MatrixStats(m, n, nnz, nnz / (m * n), mean, std, row_min, longest, quantiles, std / mean, empty,
                       (m * longest - nnz) / nnz, width, float(in_ell) / nnz, (slice_widths * SELL_SLICE - nnz) / nnz,
                       long_rows, band, distance / nnz, below / nnz, above / nnz, on / nnz, value_bytes, index_bytes,
                       hot_entries / nnz if longest >= sell.HOT_MIN_GATHERS else 0.0)


# --------------------------------------------------------------------------- the model

#: Loads a thread keeps in flight per round of its loop: kernels/spmv_ell.cu PADDED_UNROLL (ELL,
#: SELL), spmv_jds.cu JDS_UNROLL, and spmv_csr.cu's four entries per step.
ROUND_SLOTS = 4
#: kernels/spmv_sell.cu HOT_UNROLL: slots a lane of SELL's unit loop loads per round when
#: columns are staged (ROUND_SLOTS otherwise).
SELL_HOT_ROUND_SLOTS = 8
#: kernels/spmv_sell.cu PARTS_IN_FLIGHT: partial sums the last part of a row loads at once.
SELL_PARTS_IN_FLIGHT = 8
#: SELL's unit loop streams at this share of its direct kernel's rate: its bookkeeping cost
#: regular matrices 15-20% of their bandwidth (sparsegpu/formats/sell.py).
SELL_UNITS_EFFICIENCY = 0.85
#: A gather of x that misses the SM's L1 moves one L2 sector of this many bytes.
SECTOR_BYTES = 32
#: Share of gathers that miss L1: d / (d + GATHER_WINDOW_BYTES), d = the mean |i - j| in bytes of
#: x; a block's neighbourhood of x stays in L1 (256 KiB per SM on the H100/H200) when entries
#: sit near the diagonal (stencils, meshes, bands), and every gather moves a sector when they are
#: spread over x (random and power-law graphs).
GATHER_WINDOW_BYTES = 256 * 1024


@dataclass
class SellLayout:
    """What SELL's conversion would build from this matrix with C = DEFAULT_C, predicted from the
    statistics by its own rules (sparsegpu/formats/sell.py)."""

    sigma: int
    slots: int  # stored slots, padding included
    split: int
    parts_of_longest: int  # parts of the longest row's slice (1: not split)
    units: int  # slices and parts the unit loop takes
    hot: bool  # whether columns of x would be staged in shared memory
    mode: str  # "direct" or "units" (SELL.mode)


def sell_layout(stats: MatrixStats) -> SellLayout:
    """SELL's layout from the statistics, through sell.py's rules (choose_sigma, choose_split).

    Sorted by length, a slice of C rows pads about C / 2 times its first length minus its last,
    and these telescope: a window of rows sorted together pads about C / 2 times its longest
    row minus its shortest. So windows of 256 rows pad about C / 2 (p99 - shortest) each (a
    window's longest of 256 rows is about the 99th percentile), plus C - 1 times the longest row
    past p99 in its window; choose_sigma is asked with that (at most the unsorted slots,
    ``sell_fill``). Sorted globally, the slots are bounded by C - 1 times the longest row minus
    the shortest. The longest row's slice is the widest for any sigma, so it is split when that
    row is longer than ``split``. Hot columns need columns gathered HOT_MIN_GATHERS times that
    take HOT_MIN_SHARE of the gathers, which the row statistics do not give: rows stand for
    columns (exact for symmetric structure), a row that long for such a column and the longest
    rows' share of the entries (``longest_rows_fraction``) for the staged columns' share.

    >>> import scipy.sparse as sp
    >>> layout = sell_layout(matrix_stats(sp.csr_array(sp.eye_array(40)), backend="cpu"))
    >>> layout.sigma, layout.slots, layout.split, layout.mode
    (256, 64, 32, 'direct')
    """
    C, m, nnz = DEFAULT_C, stats.rows, stats.nnz
    slices = -(-m // C)
    unsorted = round(nnz * (1 + stats.sell_fill))
    p99 = stats.row_quantiles["p99"]
    windows = -(-m // sell.DEFAULT_SIGMA)
    # The last slice's lanes past the rows are padded to its width, about the shortest row.
    past_rows = (slices * C - m) * stats.row_min
    in_windows = nnz + windows * C // 2 * (p99 - stats.row_min) + (C - 1) * (stats.row_max - p99) + past_rows
    slots = min(unsorted, in_windows)
    sigma = sell.choose_sigma(m, nnz, slots)
    if sigma != sell.DEFAULT_SIGMA:
        slots = min(unsorted, nnz + (C - 1) * (stats.row_max - stats.row_min) + past_rows)
    split = sell.choose_split(slots, C)
    is_split = 0 < split < stats.row_max
    parts = -(-stats.row_max // split) if is_split else 1
    hot = stats.row_max >= sell.HOT_MIN_GATHERS and stats.longest_rows_fraction >= sell.HOT_MIN_SHARE
    units = slices + (-(-slots // (C * split)) if is_split else 0)
    return SellLayout(sigma=sigma, slots=slots, split=split, parts_of_longest=parts, units=units, hot=hot,
                      mode="units" if is_split or hot else "direct")


def _coo_launches(entries: int) -> int:
    """Launches of the COO segmented-reduction tree over ``entries`` (each tile of COO_TILE
    entries leaves two carries for the next launch, in two fresh arrays)."""
    launches = 0
    while entries:
        launches += 1
        tiles = -(-entries // COO_TILE)
        entries = 0 if tiles == 1 else 2 * tiles
    return launches


@dataclass
class _Shape:
    """One format's counts on one matrix, before the calibrated constants."""

    bytes: int  # streamed: stored slots, pointers, permutations, x once, y once
    launches: int
    allocations: int  # device arrays allocated per product (the COO tree's carries, CSR's chunk partials)
    chain: int  # the longest chain of dependent loads one thread runs, besides SELL's unit rounds
    unit_rounds: int = 0  # SELL's units mode: rounds of lane slots on that chain (their loads are fitted)
    efficiency: float = 1.0  # structural share of the format's fitted streaming efficiency
    params: dict[str, Any] = field(default_factory=dict)
    staged: float = 0.0  # share of the gathers of x served from shared memory (SELL's hot columns)


def _shapes(stats: MatrixStats) -> dict[str, _Shape]:
    """Each candidate's counts (see the module docstring). A chain counts dependent loads: a
    round of ROUND_SLOTS slots loads the indices, then the x they name (JDS first reads the
    diagonals' bounds, which say which slots the row has)."""
    s = stats
    v, i = s.value_bytes, s.index_bytes
    m, n, nnz = s.rows, s.cols, s.nnz
    vectors = n * v + m * v
    overflow = round(nnz * (1 - s.hyb_ell_fraction))
    coo_tree, hyb_tree = _coo_launches(nnz), _coo_launches(overflow)
    tile_chain = 2 * (COO_TILE // 32)  # a warp walks its tile 32 entries at a time: rows and columns, then x
    # CSR: a sub-warp of `tpr` lanes per row up to `limit` entries (indptr, then rounds); longer
    # rows go to chunks of LONG_CHUNK entries, LONG_CHUNK / LONG_BLOCK a thread, and a warp per
    # row adds its chunks' partials: two more launches, run after each other, and the partials'
    # array.
    tpr = threads_per_row(s.row_mean)
    limit = long_row_limit(tpr)
    long = bool(s.csr_long_rows)
    csr_chain = 1 + 2 * -(-min(s.row_max, limit) // (ROUND_SLOTS * tpr))
    if long:  # a chunk's slot, row and bounds, its loads, the block's sum; then the partials a lane adds
        csr_chain += 3 + 2 * (LONG_CHUNK // LONG_BLOCK) + 2 + -(-s.row_max // LONG_CHUNK) // 32
    layout = sell_layout(s)
    slices = -(-m // DEFAULT_C)
    sell_bytes = layout.slots * (v + i) + (slices + 1) * 8 + m * i + vectors
    sell_rounds = 0
    if layout.mode == "direct":  # slice_ptr, the rounds, perm
        sell_chain, sell_efficiency = 2 + 2 * -(-s.row_max // ROUND_SLOTS), 1.0
    else:
        # Units round after round over the resident groups (one block of SELL_HOT_BLOCK threads
        # per SM with hot columns, SELL_BLOCKS_PER_SM blocks of SELL_BLOCK otherwise), each at
        # most `split` slots a lane after its slice's bounds (and, for a part, the part list);
        # a part writes its partial and takes a ticket; the longest row's last part then adds
        # its partials, SELL_PARTS_IN_FLIGHT at a time.
        threads_per_sm = sell.SELL_HOT_BLOCK if layout.hot else sell.SELL_BLOCK * sell.SELL_BLOCKS_PER_SM
        groups = sell.SPLIT_GROUPS * threads_per_sm // (sell.SELL_BLOCK * sell.SELL_BLOCKS_PER_SM)
        lane = min(layout.split, s.row_max)
        is_split = layout.parts_of_longest > 1
        units_per_group = -(-layout.units // groups)
        sell_rounds = units_per_group * -(-lane // (SELL_HOT_ROUND_SLOTS if layout.hot else ROUND_SLOTS))
        sell_chain = (units_per_group * (2 + 2 * is_split) + 1
                      + (-(-layout.parts_of_longest // SELL_PARTS_IN_FLIGHT) if is_split else 0))
        sell_efficiency = SELL_UNITS_EFFICIENCY
        if is_split:  # each part's lanes write a partial and a ticket, read back once
            sell_bytes += 2 * (layout.units - slices) * DEFAULT_C * (v + 4)
    return {
        "csr": _Shape(nnz * (v + i) + (m + 1) * i + vectors, 1 + 2 * long, int(long), csr_chain),
        # COO: y scaled first (one launch), then the tree.
        "coo": _Shape(nnz * (v + 2 * i) + vectors + m * v, 1 + coo_tree, 2 * max(coo_tree - 1, 0),
                      coo_tree * tile_chain),
        "ell": _Shape(m * s.row_max * (v + i) + vectors, 1, 0, 2 * -(-s.row_max // ROUND_SLOTS)),
        "hyb": _Shape(m * s.hyb_width * (v + i) + overflow * (v + 2 * i) + vectors, 1 + hyb_tree,
                      2 * max(hyb_tree - 1, 0), 2 * -(-s.hyb_width // ROUND_SLOTS) + hyb_tree * tile_chain,
                      params={"width": s.hyb_width}),
        "jds": _Shape(nnz * (v + i) + (s.row_max + 1) * 8 + m * i + vectors, 1, 0,
                      1 + 3 * -(-s.row_max // ROUND_SLOTS)),
        "sell": _Shape(sell_bytes, 1, 0, sell_chain, sell_rounds, sell_efficiency, params={"C": DEFAULT_C},
                       staged=s.longest_rows_fraction if layout.hot else 0.0),
    }


def estimates(stats: MatrixStats, model: dict[str, Any] | None = None) -> dict[str, Estimate]:
    """The model's estimate for every candidate format (see the module docstring).

    >>> import scipy.sparse as sp
    >>> est = estimates(matrix_stats(sp.csr_array(sp.eye_array(40)), backend="cpu"))
    >>> sorted(est) == sorted(CANDIDATES), all(e.time_us >= e.host_us > 0 for e in est.values())
    (True, True)
    """
    model = model or calibration()
    bandwidth = model["copy_GBps"] * 1e3  # bytes per microsecond
    v = stats.value_bytes
    far = stats.mean_distance * v / (stats.mean_distance * v + GATHER_WINDOW_BYTES)
    gathers_us = stats.nnz * far * SECTOR_BYTES / (model["gather_GBps"] * 1e3)
    out = {}
    for name, shape in _shapes(stats).items():
        streaming = (shape.bytes / (shape.efficiency * model["efficiency"][name] * bandwidth)
                     + gathers_us * (1 - shape.staged))
        host = (model["call_us"][name] + (shape.launches - 1) * model["launch_us"]
                + shape.allocations * model["alloc_us"])
        chain = shape.chain + model["unit_round_loads"] * shape.unit_rounds
        device = shape.launches * model["kernel_us"] + max(streaming, chain * model["load_ns"] / 1e3)
        refused = None
        if name == "ell" and stats.ell_fill > DEFAULT_MAX_FILL:
            refused = f"padding {stats.ell_fill:.1f} per entry exceeds ELL's limit {DEFAULT_MAX_FILL}"
        out[name] = Estimate(bytes=int(shape.bytes), launches=shape.launches, serial_steps=round(chain),
                             time_us=max(host, device), params=shape.params, refused=refused, host_us=host,
                             device_us=device)
    return out


def rank(est: dict[str, Estimate], allowed: list[str]) -> list[str]:
    """``allowed`` formats by predicted time, with CSR first when within :data:`CSR_MARGIN`
    of the fastest."""
    ranking = sorted(allowed, key=lambda f: est[f].time_us)
    if "csr" in ranking and est["csr"].time_us <= CSR_MARGIN * est[ranking[0]].time_us:
        ranking.remove("csr")
        ranking.insert(0, "csr")
    return ranking


def _sell_reason(s: MatrixStats) -> str:
    layout = sell_layout(s)
    order = "sorted by length globally" if layout.sigma != sell.DEFAULT_SIGMA else \
        f"sorted by length in windows of {layout.sigma}"
    fill = layout.slots / s.nnz - 1 if s.nnz else 0.0
    if layout.mode == "direct":
        return (f"Slices of {DEFAULT_C} rows {order} pad about {fill:.2f} slots per entry (ELL would pad "
                f"{s.ell_fill:.2f}); a thread per row, with coalesced loads, in one launch.")
    why = (f"Rows hold up to {s.row_max} entries (mean {s.row_mean:.1f}, cv {s.row_cv:.2f}): SELL's slices of "
           f"{DEFAULT_C} rows {order} pad about {fill:.2f} slots per entry, ")
    if layout.parts_of_longest > 1:
        why += (f"slices wider than {layout.split} slots are cut into parts (the longest row's into "
                f"{layout.parts_of_longest}) that groups of {DEFAULT_C} threads sum at once and add in a fixed "
                "order, ")
    if layout.hot:
        why += f"columns of x gathered at least {sell.HOT_MIN_GATHERS} times are read from shared memory, "
    why += "all in one launch"
    if s.csr_long_rows:
        rows = f"{s.csr_long_rows} row" + "s" * (s.csr_long_rows != 1)
        why += f"; CSR would need two more launches for its {rows} past its sub-warp limit"
    return why + "."


def _reason(choice: str, stats: MatrixStats, est: dict[str, Estimate], ranking: list[str]) -> str:
    s = stats
    why = {
        "csr": (f"Rows hold {s.row_mean:.1f} entries on average (cv {s.row_cv:.2f}); CSR reads each entry once with no "
                f"padding and gives each row {threads_per_row(s.row_mean)} thread(s)"
                + (f", splitting its {s.csr_long_rows} long rows across blocks." if s.csr_long_rows else ".")),
        "coo": (f"The matrix is very sparse ({s.row_mean:.2f} entries per row, {s.empty_rows} empty rows): COO's "
                "segmented reduction costs nothing per row, where row-based formats pay for every row."),
        "ell": (f"Rows are uniform ({s.row_min} to {s.row_max} entries, cv {s.row_cv:.2f}): ELL pads only "
                f"{s.ell_fill:.2f} slots per entry and every load of a warp is coalesced."),
        "hyb": (f"Row lengths are skewed (mean {s.row_mean:.1f}, max {s.row_max}, cv {s.row_cv:.2f}): HYB with width "
                f"{s.hyb_width} keeps {s.hyb_ell_fraction:.0%} of the entries in coalesced ELL slots and sends the "
                "overflow of the long rows to a COO part."),
        "jds": ("Rows sorted by length give jagged diagonals with no padding"
                + (f"; the matrix is {s.triangular} triangular, where JDS's sorted rows balance the work."
                   if s.triangular else ".")),
        "sell": _sell_reason(s),
    }[choice]
    runner = next((f for f in ranking if f != choice), None)
    if runner is not None:
        gap = est[runner].time_us / est[choice].time_us - 1
        if gap >= 0:
            why += f" Next best: {runner.upper()}, predicted {gap:.0%} slower."
        elif choice == "csr" and est["csr"].time_us <= CSR_MARGIN * est[runner].time_us:
            why += (f" {runner.upper()} is predicted {-gap:.0%} faster, within the model's error "
                    f"({CSR_MARGIN - 1:.0%}), so CSR is kept: it needs no conversion.")
        else:  # ranked by total time with conversions (n_spmv)
            why += f" {runner.upper()} is predicted {-gap:.0%} faster per product."
    return why


def advise(A: Any, *, n_spmv: int | None = None, autotune: bool = False, backend: str | None = None) -> Advice:
    """Which format suits ``A`` for ``A @ x``, with what parameters, and why.

    ``A``: any scipy sparse matrix/array or sparsegpu matrix. ``n_spmv``: the number of
    products the caller expects; the choice then counts conversion cost from CSR, and
    ``payoff`` gives each format's total predicted time in microseconds. ``autotune``: also
    measure every candidate on the GPU (``measured`` GB/s, ``measured_best``).

    >>> import scipy.sparse as sp, sparsegpu
    >>> S = sp.diags_array([1.0, -2.0, 1.0], offsets=[-1, 0, 1], shape=(1000, 1000))
    >>> advice = sparsegpu.advise(S, backend="cpu")
    >>> advice.format in ("csr", "ell", "sell", "jds", "hyb", "coo"), advice.stats.row_max
    (True, 3)
    """
    if n_spmv is not None and (not isinstance(n_spmv, (int, np.integer)) or n_spmv < 1):
        raise ValueError(f"n_spmv must be a positive integer, got {n_spmv!r}")
    csr = _as_csr(A, backend)
    stats = matrix_stats(csr)
    est = estimates(stats)
    allowed = [f for f in CANDIDATES if f in SparseMatrix.formats and est[f].refused is None]
    payoff = None
    if n_spmv is not None:
        conversion = calibration()["conversion_in_csr_spmv"]
        payoff = {f: conversion[f] * est["csr"].time_us + n_spmv * est[f].time_us for f in allowed}
        ranking = sorted(allowed, key=payoff.__getitem__)
    else:
        ranking = rank(est, allowed)
    choice = ranking[0]
    reason = _reason(choice, stats, est, ranking)
    if payoff is not None and choice == "csr" and min(allowed, key=lambda f: est[f].time_us) != "csr":
        fastest = min(allowed, key=lambda f: est[f].time_us)
        reason += (f" {fastest.upper()} would be faster per product, but converting to it does not pay off "
                   f"within {n_spmv} products.")
    advice = Advice(format=choice, params=dict(est[choice].params), stats=stats, estimates=est,
                    ranking=ranking, reason=reason, payoff=payoff)
    if autotune:
        advice.measured, advice.measured_best = _autotune(csr, allowed, est)
    return advice


#: Autotune times the candidates in this many interleaved rounds and keeps each one's fastest
#: round: a product of a few microseconds is paced by the host, whose speed drifts (the first
#: format timed after a conversion ran up to twice as slow), and rounds spread that over all.
AUTOTUNE_ROUNDS = 3


def _autotune(csr: Any, formats: list[str], est: dict[str, Estimate]) -> tuple[dict[str, float], str]:
    """Measured GB/s of each format's ``A @ x`` (bytes counted on stored entries only). Every
    candidate is converted first and held while they are timed in turn."""
    if csr.backend != "gpu":
        raise ValueError("autotune measures on the GPU; this matrix is on the CPU backend")
    import cupy

    from sparsegpu.bench.bytes_model import effective_gbps, spmv_bytes_of
    from sparsegpu.bench.timing import measure

    x = cupy.random.default_rng(0).standard_normal(csr.shape[1]).astype(csr.dtype)
    want = csr @ x
    scale = float(cupy.abs(want).max()) or 1.0
    y = cupy.empty(csr.shape[0], csr.dtype)
    candidates = {}
    for name in formats:
        A = candidates[name] = csr.asformat(name, **est[name].params)
        A.spmv(x, y)
        if float(cupy.abs(y - want).max()) > 1e-6 * scale * max(csr.shape[1], 1):
            raise RuntimeError(f"{name} gave a wrong product during autotune")
    seconds = {name: math.inf for name in formats}
    for _ in range(AUTOTUNE_ROUNDS):
        for name, A in candidates.items():
            seconds[name] = min(seconds[name], measure(lambda _, A=A: A.spmv(x, y), "gpu").seconds)
    nbytes = spmv_bytes_of(csr)
    measured = {name: effective_gbps(nbytes, t) for name, t in seconds.items()}
    return measured, max(measured, key=measured.__getitem__)

"""The format advisor: row-length statistics -> per-format estimates -> a choice -> reasons.

``advise(S)`` reads a matrix once on its backend, estimates each format's SpMV time with a
small model, and says which format to use, with what parameters and why.

The statistics (:func:`matrix_stats`) are meant to cost at most one CSR SpMV, host work
included. On the GPU two kernels of kernels/matrix_stats.cu fill one buffer, kept between calls
with its head zeroed by one driver memset: ``csr_row_stats`` reads indptr once for the row-length
histogram (lengths below 4096 binned in shared memory, longer rows listed), SELL's slice widths,
and the row where each tile of entries starts; ``csr_structure`` reads indices once, each block
finding its tile's rows in a shared-memory copy of their pointers, for where the entries sit
relative to the diagonal. The head (32 KiB) comes back in one copy into pinned memory, the only
synchronisation (the overflow list only when some row is that long), and every field is computed
on the host from the histogram's distinct lengths, so the host work does not grow with the
matrix or its longest row. The CPU backend fills the same buffer with the NumPy twins
(sparsegpu/reference/stats.py), so both backends give identical statistics.

The model, per format f:

    time_f = call_f + (launches_f - 1) * t_launch
             + max(bytes_f / (efficiency_f * copy_bandwidth), serial_steps_f * t_step)

- ``bytes_f``: what format f's kernel reads and writes, padding included (stored values and
  indices, pointers or permutations, x once, y once);
- ``launches_f``: kernel launches per product (COO and HYB's overflow reduce in a tree of
  launches; CSR adds two when it has rows past the sub-warp limit);
- ``serial_steps_f``: the longest chain of loop steps one thread runs (a row's length for ELL,
  JDS and SELL, which give a row one thread; bounded for CSR and COO, which split long rows);
- ``call_f``: the fixed cost of one product in format f (the Python call, its first launch,
  any workspace it allocates);
- ``t_launch``, ``t_step``, ``copy_bandwidth``, ``call_f`` and ``efficiency_f`` are
  calibrated on a GPU by ``scripts/calibrate_advisor.py`` from measured SpMV times over the
  real and generated matrices; the fit and its measurements are kept in
  ``sparsegpu/advisor_calibration.json``.

Conversion costs (in CSR SpMV times) come from the same calibration, so ``n_spmv`` can weigh
whether converting pays off. ``autotune=True`` measures every candidate on the device.
"""

from __future__ import annotations

import functools
import json
import math
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sparsegpu._kernels import KernelFile, device_properties
from sparsegpu.formats._base import SparseMatrix, as_scipy_sparse
from sparsegpu.formats._compressed import LONG_CHUNK, long_row_limit, threads_per_row
from sparsegpu.formats.coo import TILE as COO_TILE
from sparsegpu.formats.ell import DEFAULT_MAX_FILL
from sparsegpu.formats.sell import DEFAULT_C, DEFAULT_SIGMA
from sparsegpu.reference import stats as stats_twins
from sparsegpu.reference.stats import (OUT_BINS, OUT_OVERFLOW, OUT_OVERFLOW_ROWS, OUT_SLICE_WIDTHS,
                                       ROW_STATS_BINS, SELL_SLICE, overflow_capacity, stats_tile)

#: Blocks per multiprocessor the launcher gives each kernel: as many as are resident at once
#: (csr_structure: 48 registers a thread, 5 blocks of 256; csr_row_stats: 40 registers, 6), so
#: one wave streams the whole matrix, and merging each row block's 4096 shared bins stays small
#: next to its share of the rows.
STATS_BLOCKS_PER_SM = 5
ROW_STATS_BLOCKS_PER_SM = 6
ROW_STATS_BLOCK = 256  # kernels/matrix_stats.cu ROW_STATS_BLOCK
STATS_KERNELS = KernelFile("matrix_stats.cu", ["csr_structure<{I}>", "csr_row_stats<{I}>"],
                           value_dtypes=[np.float64])
CALIBRATION_FILE = Path(__file__).with_name("advisor_calibration.json")
#: Formats the advisor may recommend for ``A @ x``. CSC is left out: its deterministic
#: ``A @ x`` gathers over a CSR copy, so it is never faster than CSR for that product.
CANDIDATES = ("csr", "coo", "ell", "hyb", "jds", "sell")
#: CSR is kept unless another format is predicted faster by more than this: it needs no
#: conversion, and smaller predicted differences are within the model's error.
CSR_MARGIN = 1.05


@dataclass
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
    serial_steps: int
    time_us: float
    params: dict[str, Any] = field(default_factory=dict)
    refused: str | None = None  # why the format would refuse the matrix


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
    from sparsegpu.formats.csr import CSR

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


def _statistics_kernels(csr: Any, out: Any, tile_rows: Any) -> None:
    """Launch both statistics kernels of a GPU CSR into ``out`` (uint64, words 0 .. OUT_OVERFLOW
    zero, room for :func:`overflow_capacity` longer rows after them) with ``tile_rows`` (int64,
    one per tile of :func:`stats_tile` entries) as their scratch. Launches nothing for an empty
    matrix."""
    m, nnz = csr.shape[0], csr.nnz
    multiprocessors = device_properties()["multiprocessors"]
    if m:
        rows = STATS_KERNELS.function("csr_row_stats<{I}>", np.float64, csr.index_dtype)
        blocks = min(-(-m // ROW_STATS_BLOCK), ROW_STATS_BLOCKS_PER_SM * multiprocessors)
        rows((blocks,), (ROW_STATS_BLOCK,),
             (csr.indptr, np.int64(m), np.int64(overflow_capacity(nnz)), out, tile_rows))
    if nnz:
        structure = STATS_KERNELS.function("csr_structure<{I}>", np.float64, csr.index_dtype)
        blocks = min(-(-nnz // stats_tile(csr.index_dtype.itemsize)), STATS_BLOCKS_PER_SM * multiprocessors)
        structure((blocks,), (stats_twins.STATS_BLOCK,), (csr.indptr, csr.indices, np.int64(m), tile_rows, out))


class _Workspaces(threading.local):
    """Per thread and device: the statistics buffer and tile rows on the device, and pinned
    host memory for the buffer's head, kept between calls (allocating and zeroing a fresh
    buffer, and copying into pageable memory, cost more than the kernels on small matrices).
    Each call finishes with its copy back, so a thread's next call may reuse them."""

    def __init__(self) -> None:
        self.by_device: dict[int, tuple[Any, Any, np.ndarray]] = {}


_WORKSPACES = _Workspaces()


def _workspace(words: int, tiles: int) -> tuple[Any, Any, np.ndarray]:
    """(device buffer of at least ``words`` uint64, device tile rows of at least ``tiles``
    int64, pinned host head of OUT_OVERFLOW int64) for the current device, grown by doubling."""
    import cupy

    device = cupy.cuda.runtime.getDevice()
    space = _WORKSPACES.by_device.get(device)
    if space is None or space[0].size < words or space[1].size < tiles:
        old_words, old_tiles = (space[0].size, space[1].size) if space else (0, 0)
        out = cupy.empty(max(words, 2 * old_words), dtype=np.uint64)
        tile_rows = cupy.empty(max(tiles, 2 * old_tiles, 1), dtype=np.int64)
        head = space[2] if space else np.frombuffer(cupy.cuda.alloc_pinned_memory(OUT_OVERFLOW * 8), np.int64,
                                                    OUT_OVERFLOW)
        space = _WORKSPACES.by_device[device] = (out, tile_rows, head)
    return space


def _read_statistics(csr: Any) -> tuple[np.ndarray, np.ndarray]:
    """(the statistics buffer's head, words 0 .. OUT_OVERFLOW, and the longer rows' lengths) on
    the host as int64. On the GPU the head is a view of this thread's pinned workspace, valid
    until its next call: one memset, two launches, one copy back (two when some row is past the
    bins)."""
    m, nnz = csr.shape[0], csr.nnz
    capacity = overflow_capacity(nnz)
    if csr.backend == "cpu" or not m:
        out = np.zeros(OUT_OVERFLOW + capacity, dtype=np.uint64)
        if m:
            tile_rows = np.empty(-(-nnz // stats_tile(csr.index_dtype.itemsize)), dtype=np.int64)
            stats_twins.csr_row_stats(csr.indptr, m, capacity, out, tile_rows)
            out[:OUT_SLICE_WIDTHS] = stats_twins.csr_structure(csr.indptr, csr.indices)
        out = out.view(np.int64)
        return out[:OUT_OVERFLOW], out[OUT_OVERFLOW:OUT_OVERFLOW + min(int(out[OUT_OVERFLOW_ROWS]), capacity)]
    import cupy

    runtime = cupy.cuda.runtime
    out, tile_rows, head = _workspace(OUT_OVERFLOW + capacity, -(-nnz // stats_tile(csr.index_dtype.itemsize)))
    stream = cupy.cuda.get_current_stream()
    # Only the head is counted into; the overflow list is written before it is read, tile_rows
    # entirely by csr_row_stats.
    runtime.memsetAsync(out.data.ptr, 0, OUT_OVERFLOW * 8, stream.ptr)
    _statistics_kernels(csr, out, tile_rows)
    runtime.memcpyAsync(head.ctypes.data, out.data.ptr, OUT_OVERFLOW * 8, runtime.memcpyDeviceToHost, stream.ptr)
    stream.synchronize()
    longer = min(int(head[OUT_OVERFLOW_ROWS]), capacity)
    if not longer:
        return head, head[:0]
    return head, out[OUT_OVERFLOW:OUT_OVERFLOW + longer].get().view(np.int64)


def _statistics_buffer(csr: Any) -> np.ndarray:
    """The statistics buffer of kernels/matrix_stats.cu (layout in sparsegpu/reference/stats.py)
    on the host as int64 (a copy of its own), up to the end of its filled overflow list."""
    head, longer = _read_statistics(csr)
    return np.concatenate([head, longer])


def _length_histogram(head: np.ndarray, longer: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct row lengths ascending, rows of each) from a statistics buffer's head and the
    overflow list as far as the buffer holds it."""
    if int(head[OUT_OVERFLOW_ROWS]) > longer.size:
        raise RuntimeError(f"{int(head[OUT_OVERFLOW_ROWS])} rows of {ROW_STATS_BINS} entries or more cannot fit in "
                           f"{longer.size} entries: the matrix's indptr is not monotone")
    bins = head[OUT_BINS:OUT_OVERFLOW]
    lengths = bins.nonzero()[0]
    counts = bins[lengths]
    if longer.size:
        long_lengths, long_counts = np.unique(longer, return_counts=True)
        lengths, counts = np.concatenate([lengths, long_lengths]), np.concatenate([counts, long_counts])
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
    value_bytes, index_bytes = np.dtype(value_dtype).itemsize, np.dtype(index_dtype).itemsize
    rows = float(counts.sum())
    # Rows longer than each candidate width K and their entries past slot K, from suffix sums
    # of exact integers (float64 as in width_for_counts, exact below 2^53).
    # (ndarray methods, not the np.* wrappers: this runs per call on a few values.)
    entries = counts * lengths
    rows_over = (counts[::-1].cumsum()[::-1] - counts).astype(np.float64)
    entries_after = (entries[::-1].cumsum()[::-1] - entries).astype(np.float64)
    widths = lengths.astype(np.float64)
    overflow = entries_after - widths * rows_over
    cost = (rows * widths * (value_bytes + index_bytes)
            + overflow * (value_bytes + 2 * index_bytes)
            + rows_over * 2 * value_bytes)
    return int(lengths[cost.argmin()])


def matrix_stats(A: Any, *, backend: str | None = None) -> MatrixStats:
    """Row-length and structure statistics of a scipy or sparsegpu matrix, computed on the
    matrix's backend (a scipy matrix goes to the active backend); the same on both backends.

    >>> import scipy.sparse as sp
    >>> s = matrix_stats(sp.csr_array(sp.eye_array(40)), backend="cpu")
    >>> s.row_max, s.bandwidth, s.sell_fill, s.diagonal_fraction
    (1, 0, 0.6, 1.0)
    """
    csr = _as_csr(A, backend)
    m, n = csr.shape
    nnz = csr.nnz
    head, longer = _read_statistics(csr)
    below, on, above, distance, band, slice_widths = head[:OUT_OVERFLOW_ROWS].tolist()
    mean = nnz / m if m else 0.0
    if m:
        # A handful of NumPy calls on the distinct lengths (few, whatever the matrix's size).
        lengths, counts = _length_histogram(head, longer)
        weights = counts.astype(np.float64)
        var = max(float(np.dot(weights, lengths.astype(np.float64) ** 2)) / m - mean * mean, 0.0)
        row_min, row_max = int(lengths[0]), int(lengths[-1])
        # The q-quantile is the shortest length whose cumulative row count reaches q * m.
        p50, p90, p99 = lengths[counts.cumsum().searchsorted([0.5 * m, 0.9 * m, 0.99 * m])].tolist()
        quantiles = {"p50": p50, "p90": p90, "p99": p99}
        width = hyb_width_from_lengths(lengths, counts, csr.dtype, csr.index_dtype)
        in_ell = float(np.dot(np.minimum(lengths, width), counts))  # exact integers, as HYB counts them
        empty = int(counts[0]) if row_min == 0 else 0
        long_rows = int(counts[lengths > long_row_limit(threads_per_row(mean))].sum())
    else:
        var, row_min, row_max, width, in_ell, empty, long_rows = 0.0, 0, 0, 0, 0.0, 0, 0
        quantiles = {"p50": 0, "p90": 0, "p99": 0}
    return MatrixStats(
        rows=m, cols=n, nnz=nnz,
        density=nnz / (m * n) if m and n else 0.0,
        row_mean=mean, row_std=math.sqrt(var),
        row_min=row_min, row_max=row_max,
        row_quantiles=quantiles,
        row_cv=math.sqrt(var) / mean if mean else 0.0,
        empty_rows=empty,
        ell_fill=(m * row_max - nnz) / nnz if nnz else 0.0,
        hyb_width=width,
        hyb_ell_fraction=in_ell / nnz if nnz else 1.0,
        sell_fill=(slice_widths * SELL_SLICE - nnz) / nnz if nnz else 0.0,
        csr_long_rows=long_rows,
        bandwidth=band,
        mean_distance=distance / nnz if nnz else 0.0,
        lower_fraction=below / nnz if nnz else 0.0,
        upper_fraction=above / nnz if nnz else 0.0,
        diagonal_fraction=on / nnz if nnz else 0.0,
        value_bytes=csr.dtype.itemsize,
        index_bytes=csr.index_dtype.itemsize,
    )


# --------------------------------------------------------------------------- the model


def _coo_launches(entries: int) -> int:
    """Launches of the COO segmented-reduction tree over ``entries`` (each tile of COO_TILE
    entries leaves two carries for the next launch)."""
    launches = 0
    while entries:
        launches += 1
        tiles = -(-entries // COO_TILE)
        entries = 0 if tiles == 1 else 2 * tiles
    return launches


def estimates(stats: MatrixStats, model: dict[str, Any] | None = None) -> dict[str, Estimate]:
    """The model's estimate for every candidate format (see the module docstring)."""
    model = model or calibration()
    v, i = stats.value_bytes, stats.index_bytes
    m, n, nnz = stats.rows, stats.cols, stats.nnz
    vectors = n * v + m * v
    slices = -(-m // DEFAULT_C)
    tpr = threads_per_row(stats.row_mean)
    limit = long_row_limit(tpr)
    overflow = round(nnz * (1 - stats.hyb_ell_fraction))
    shapes: dict[str, tuple[int, int, int, dict[str, Any]]] = {
        # format: (bytes, launches, serial steps, params)
        # CSR's row kernel takes four entries per step; long rows go to chunks of
        # LONG_CHUNK / 256 entries per thread in two more launches.
        "csr": (nnz * (v + i) + (m + 1) * i + vectors, 1 + 2 * bool(stats.csr_long_rows),
                max(-(-min(stats.row_max, limit) // (4 * tpr)), LONG_CHUNK // 256 if stats.csr_long_rows else 0), {}),
        "coo": (nnz * (v + 2 * i) + vectors + m * v, 1 + _coo_launches(nnz), COO_TILE // 32, {}),
        "ell": (m * stats.row_max * (v + i) + vectors, 1, stats.row_max, {}),
        "hyb": (m * stats.hyb_width * (v + i) + overflow * (v + 2 * i) + vectors,
                1 + _coo_launches(overflow), max(stats.hyb_width, COO_TILE // 32 if overflow else 0),
                {"width": stats.hyb_width}),
        "jds": (nnz * (v + i) + (stats.row_max + 1) * i + m * i + vectors, 1, stats.row_max, {}),
        "sell": (round(nnz * (1 + stats.sell_fill)) * (v + i) + (slices + 1) * i + m * i + vectors, 1,
                 stats.row_max, {"C": DEFAULT_C, "sigma": DEFAULT_SIGMA}),
    }
    out = {}
    bandwidth = model["copy_GBps"] * 1e3  # bytes per microsecond
    for name, (nbytes, launches, steps, params) in shapes.items():
        streaming = nbytes / (model["efficiency"][name] * bandwidth)
        time_us = (model["call_us"][name] + (launches - 1) * model["launch_us"]
                   + max(streaming, steps * model["step_ns"] / 1e3))
        refused = None
        if name == "ell" and stats.ell_fill > DEFAULT_MAX_FILL:
            refused = f"padding {stats.ell_fill:.1f} per entry exceeds ELL's limit {DEFAULT_MAX_FILL}"
        out[name] = Estimate(bytes=int(nbytes), launches=launches, serial_steps=int(steps),
                             time_us=time_us, params=params, refused=refused)
    return out


def rank(est: dict[str, Estimate], allowed: list[str]) -> list[str]:
    """``allowed`` formats by predicted time, with CSR first when within :data:`CSR_MARGIN`
    of the fastest."""
    ranking = sorted(allowed, key=lambda f: est[f].time_us)
    if "csr" in ranking and est["csr"].time_us <= CSR_MARGIN * est[ranking[0]].time_us:
        ranking.remove("csr")
        ranking.insert(0, "csr")
    return ranking


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
        "sell": (f"Slices of {DEFAULT_C} rows sorted within windows of {DEFAULT_SIGMA} pad only "
                 f"{s.sell_fill:.2f} slots per entry (ELL would pad {s.ell_fill:.2f}), with coalesced loads."),
    }[choice]
    runner = next((f for f in ranking if f != choice), None)
    if runner is not None:
        gap = est[runner].time_us / est[choice].time_us - 1
        why += f" Next best: {runner.upper()}, predicted {gap:.0%} slower."
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


def _autotune(csr: Any, formats: list[str], est: dict[str, Estimate]) -> tuple[dict[str, float], str]:
    """Measured GB/s of each format's ``A @ x`` (bytes counted on stored entries only)."""
    if csr.backend != "gpu":
        raise ValueError("autotune measures on the GPU; this matrix is on the CPU backend")
    import cupy

    from sparsegpu.bench.bytes_model import effective_gbps, spmv_bytes_of
    from sparsegpu.bench.timing import measure

    x = cupy.random.default_rng(0).standard_normal(csr.shape[1]).astype(csr.dtype)
    want = csr @ x
    nbytes = spmv_bytes_of(csr)
    measured = {}
    for name in formats:
        A = csr.asformat(name, **est[name].params)
        y = cupy.empty(csr.shape[0], csr.dtype)
        A.spmv(x, y)
        scale = float(cupy.abs(want).max()) or 1.0
        if float(cupy.abs(y - want).max()) > 1e-6 * scale * max(csr.shape[1], 1):
            raise RuntimeError(f"{name} gave a wrong product during autotune")
        measured[name] = effective_gbps(nbytes, measure(lambda _: A.spmv(x, y), "gpu").seconds)
    return measured, max(measured, key=measured.__getitem__)

"""The advisor's cost model: per-format SpMV time estimated from :class:`MatrixStats`.

For ``A @ x`` timed back to back (the host issues the next call while the device runs this
one, so the slower of the two sets the pace), per format f:

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
  and ticket, then the longest row's partials added SELL_PARTS_IN_FLIGHT at a time; ``e_f`` =
  SELL_UNITS_EFFICIENCY for its bookkeeping (1 for every other format and mode).

The constants are fitted on a GPU by ``scripts/calibrate_advisor.py fit`` (least squares on log
time, soft L1 against bursts of host load) from measured SpMV times over the real and generated
matrices: ``call_f`` and ``efficiency_f`` per format (keys ``call_us``, ``efficiency``),
``t_launch`` (``launch_us``), ``t_alloc`` (``alloc_us``), ``t_kernel`` (``kernel_us``),
``gather_bandwidth`` (``gather_GBps``), ``t_load`` (``load_ns``) and ``unit_round_loads``;
``copy_bandwidth`` (``copy_GBps``) is measured with them, per GPU. One fit serves every GPU: it
is made over the measurements of several GPUs at once, each with its own copy rate, and
``calibration.json`` beside this module keeps it with each measured GPU's copy rate
(``copy_GBps_by_device``); on a GPU it does not name, the copy rate is timed at first use. The
file also keeps the fit's source and the conversion costs (in CSR SpMV times) that let
``advise(n_spmv=...)`` weigh whether converting pays off.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparsegpu._backend import gpu_available
from sparsegpu.advisor.summary import MatrixStats
from sparsegpu.formats import sell
from sparsegpu.formats._compressed import LONG_BLOCK, LONG_CHUNK, long_row_limit, threads_per_row
from sparsegpu.formats.coo import TILE as COO_TILE
from sparsegpu.formats.ell import DEFAULT_MAX_FILL
from sparsegpu.formats.sell import DEFAULT_C

#: The fitted constants and their source (written by ``scripts/calibrate_advisor.py fit``).
CALIBRATION_FILE = Path(__file__).with_name("calibration.json")
#: Formats the advisor may recommend for ``A @ x``. CSC is left out: its deterministic
#: ``A @ x`` gathers over a CSR copy, so it is never faster than CSR for that product.
CANDIDATES = ("csr", "coo", "ell", "hyb", "jds", "sell")
#: CSR is kept unless another format is predicted faster by more than this: it needs no
#: conversion, and smaller predicted differences are within the model's error.
CSR_MARGIN = 1.05


@dataclass
class Estimate:
    """The model's view of one format on one matrix (:func:`estimates`, ``Advice.estimates``).

    Attributes
    ----------
    bytes : int
        What the format's ``A @ x`` streams, padding included.
    launches : int
        Kernel launches of one product.
    serial_steps : int
        Dependent loads on the longest chain of one thread.
    time_us : float
        Predicted GPU time of one product in microseconds: the larger of ``host_us`` and
        ``device_us``.
    params : dict
        The format's parameters the estimate assumes.
    refused : str or None
        Why the format would refuse the matrix (ELL's padding limit), else None.
    host_us, device_us : float
        The host's share (the call, its launches and allocations) and the device's (kernel
        starts, then streaming or the serial chain).

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from sparsegpu.advisor import estimates, matrix_stats
    >>> est = estimates(matrix_stats(sp.csr_array(sp.eye_array(40)), backend="cpu"))["csr"]
    >>> est.launches, est.time_us == max(est.host_us, est.device_us)
    (1, True)
    """

    bytes: int
    launches: int
    serial_steps: int  # dependent loads on the longest chain of one thread
    time_us: float
    params: dict[str, Any] = field(default_factory=dict)
    refused: str | None = None  # why the format would refuse the matrix
    host_us: float = 0.0  # the host's share: the call, its launches and allocations
    device_us: float = 0.0  # the device's share: kernel starts, then streaming or the serial chain


@functools.cache
def calibration() -> dict[str, Any]:
    """The model's fitted constants (see the module docstring), with the copy rate of this
    machine's GPU (:func:`device_copy_gbps`): one fit serves every GPU, scaled by its bandwidth."""
    stored = json.loads(CALIBRATION_FILE.read_text())
    model = dict(stored["model"])
    model["copy_GBps"] = device_copy_gbps(stored.get("copy_GBps_by_device", {}), model["copy_GBps"])
    return model


#: Bytes each way of the copy :func:`device_copy_gbps` times on a GPU it has no figure for:
#: above any current L2 cache, small beside any GPU's memory.
COPY_PROBE_BYTES = 1 << 27


def device_copy_gbps(known: dict[str, float], default: float) -> float:
    """The device-to-device copy rate (GB/s, bytes read plus written) of the current GPU: the
    calibration's measured figure for a GPU it names, else timed once (a copy of
    COPY_PROBE_BYTES, median of five); ``default`` where no GPU is present."""
    if not gpu_available():
        return default
    import cupy

    device = cupy.cuda.runtime.getDevice()
    name = cupy.cuda.runtime.getDeviceProperties(device)["name"].decode()
    if name in known:
        return float(known[name])
    source = cupy.zeros(COPY_PROBE_BYTES // 8)
    target = cupy.empty_like(source)
    start, stop, times = cupy.cuda.Event(), cupy.cuda.Event(), []
    target[...] = source  # warm-up
    for _ in range(5):
        start.record()
        target[...] = source
        stop.record()
        stop.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, stop) / 1e3)
    return 2 * COPY_PROBE_BYTES / sorted(times)[2] / 1e9


def spmv_bytes(stats: MatrixStats) -> int:
    """Least bytes ``y = A @ x`` moves: each stored entry's value and column index once, the row
    pointers, x once and y once (whatever the format's padding).

    >>> from sparsegpu.advisor import matrix_stats
    >>> import scipy.sparse as sp
    >>> spmv_bytes(matrix_stats(sp.csr_array(sp.eye_array(3)), backend="cpu"))  # 3*12 + 4*4 + 3*8 + 3*8
    100
    """
    v, i = stats.value_bytes, stats.index_bytes
    return stats.nnz * (v + i) + (stats.rows + 1) * i + stats.cols * v + stats.rows * v


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
    >>> from sparsegpu.advisor import matrix_stats
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
    >>> from sparsegpu.advisor import matrix_stats
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


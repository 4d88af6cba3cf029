"""SELL-C-sigma: slices of C rows, each an ELL block of its own width, after sorting rows by
length inside windows of sigma rows. ``A @ x`` runs kernels/spmv_sell.cu (NumPy reference:
reference.regular.sell_spmv).

Format parameters, each chosen at conversion by a documented rule unless given:

``C`` (default 32): rows per slice; a slice is one warp, whose loads at each slot are 32
consecutive entries.

``sigma`` (default: :func:`choose_sigma`): rows are sorted by length inside windows of sigma
rows. 256 (:data:`DEFAULT_SIGMA`, the kernel's block of 8 slices) when that pads at most
:data:`SIGMA_FILL_LIMIT` slots per entry: a block still writes only its own 256 rows of y and
keeps the original order's locality in x (stencils, meshes). Otherwise (power-law graphs, whose
row lengths vary inside any window: R-MAT scale 21 pads 2.9 slots per entry at sigma = 256, 0.05
sorted globally) the rows are sorted globally, sigma = n_rows, like JDS: idle lanes cost more
there than the lost locality, which such matrices hardly have. sigma = 1 does not sort.

``split`` (default: :func:`choose_split`): a slice wider than ``split`` slots is summed in parts
of ``split`` slots, each by its own group of C threads, the lanes' partial sums added in part
order (no float atomics, bitwise reproducible); so a hub row of 60,000 entries does not sit
on one thread while the whole product waits. The rule gives the product about
:data:`SPLIT_GROUPS` units' worth of work per group: long parts on large matrices (R-MAT scale
21: 130 slots; parts near 128 slots beat parts of 64, measured on an H200), short ones on
small matrices whose few slices would otherwise each be one long serial chain. 0 never splits.

``hot`` (default: :func:`staged_columns`' rule): the number of columns of x staged in each
block's shared memory, the most gathered ones (by default only when together they take at least
:data:`HOT_MIN_SHARE` of the gathers); their entries are stored as column ``-2 - j``
(j the staged position in ``hot_cols``), and the kernel reads them from shared memory instead
of moving a 32-byte L2 sector per 8-byte value. Such products run one block of
:data:`SELL_HOT_BLOCK` threads per multiprocessor, so the staged columns are held once per SM,
not once per block of 256. 0 stages none.

The kernel's mode (:attr:`SELL.mode`) follows from the layout. ``"direct"`` when nothing is
split and no column is staged (regular matrices: stencils, meshes, anything without long rows):
the plain SELL kernel, one thread per row over a grid covering the rows, and the conversion's
one-pass slot copy shared with ELL and JDS. ``"units"`` otherwise: groups of C threads take the
parts and slices in a persistent loop, and the slots are copied over those same units (a hub row
by its parts' threads). The unit loop's bookkeeping costs regular matrices 15-20% of their
bandwidth (measured on an H200), hence two modes.
"""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import numpy as np

from sparsegpu import convert, primitives
from sparsegpu._backend import array_module, backend_of
from sparsegpu._kernels import (
    KernelFile,
    allow_dynamic_shared,
    blocks_for,
    device_properties,
)
from sparsegpu.formats import _semiring
from sparsegpu.formats._compressed import NULL_POINTER
from sparsegpu.formats._fast_product import ALPHA, BETA, Launch, X, Y
from sparsegpu.formats.ell import (
    RegularMatrix,
    csr_from_positions,
    fill_slots,
    int_at_least,
    reject_params,
)
from sparsegpu.formats.jds import sorted_by_length
from sparsegpu.reference import regular as reference

SELL_BLOCK = 256  # kernels/spmv_sell.cu SELL_BLOCK
SELL_HOT_BLOCK = 1024  # kernels/spmv_sell.cu SELL_HOT_BLOCK: the block of products with hot columns
SELL_BLOCKS_PER_SM = 8  # kernels/spmv_sell.cu SELL_BLOCKS_PER_SM
#: Slice heights the kernel is compiled for (powers of two dividing the block).
SELL_CHUNKS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
DEFAULT_C = 32
#: The sort window of matrices whose rows pad little in it (see the module docstring).
DEFAULT_SIGMA = 256
#: Padding slots per stored entry above which the rows are sorted globally instead.
SIGMA_FILL_LIMIT = 0.25
#: ``split`` = max(SPLIT_MIN, ceil(slots per lane / SPLIT_GROUPS)): a large GPU runs about
#: 8,000 groups of 32 threads at once, so a part is at most the work each would get if the
#: product were spread evenly; no shorter than SPLIT_MIN slots: a part adds a partial sum
#: written and read back and a ticket, two L2 round trips, which a lane's 32 slots (eight
#: rounds of four loads) repay, and regular rows up to 32 long (27-point stencils) stay whole.
SPLIT_MIN = 32
SPLIT_GROUPS = 8192
#: Shared memory for the hot columns by default: 192 KiB (24,576 float64 values) in the one
#: block of SELL_HOT_BLOCK threads per multiprocessor (228 KiB), or the device's per-block limit
#: less 1 KiB where that is smaller.
HOT_BYTES = 192 * 1024
#: A column is staged only if the product gathers it at least this often: each resident block
#: (one per multiprocessor, about 130 on a large GPU) loads it once, so fewer gathers would not
#: repay it.
HOT_MIN_GATHERS = 256
#: ... and only if the staged columns (together) take at least this share of the sampled
#: gathers. Staging puts a matrix in the unit loop, which costs a regular one 15-20% of its
#: bandwidth; and a sample of 1 entry in 90 (a 27-point stencil of 90M entries) counts a few
#: columns gathered 27 times as often as one gathered 256 times would be (71 of 3.4M columns seen
#: 4 times in the sample), a noise the share rule ignores: those 71 take 0.03% of the gathers,
#: R-MAT's staged columns 56%.
HOT_MIN_SHARE = 0.1
#: From this many hot columns a product first gathers them into one contiguous array (a launch
#: of its own, sell_stage_hot), which every block then copies with coalesced loads; below it,
#: each block gathers them from x itself (one launch, what small matrices want).
HOT_STAGE_FIRST = 4096
#: The column counts come from HOT_SAMPLE stored entries spread over the matrix (all of them
#: when it has fewer; see :func:`sample_positions`).
HOT_SAMPLE = 1 << 20
#: Bins of the histogram of column counts that sets the staging threshold.
HOT_COUNT_BINS = 1 << 14
#: The kernel's MODE (kernels/spmv_sell.cu): the plain kernel, the unit loop, the unit loop with
#: hot columns staged in shared memory.
SELL_DIRECT, SELL_UNITS, SELL_UNITS_HOT = 0, 1, 2
#: Run layouts without parts or hot columns through the unit loop too (False: they run
#: SELL_DIRECT). For benchmarks and tests that compare the two modes on one layout.
SELL_FORCE_UNITS = False
_NEVER_SPLIT = np.int64(np.iinfo(np.int64).max)
SELL_PAD = -1  # kernels/spmv_sell.cu SELL_PAD: a padding slot's column

SELL_KERNELS = KernelFile(
    "spmv_sell.cu",
    [f"sell_spmv<{{V}}, {{I}}, {c}, {mode}>" for c in SELL_CHUNKS
     for mode in (SELL_DIRECT, SELL_UNITS, SELL_UNITS_HOT)]
    + ["sell_stage_hot<{V}, {I}>", "sell_window_slots<{I}>", "sell_slice_widths<{I}>", "sell_part_counts<{I}>",
       "sell_split_units<{I}>", "sell_select_hot<{I}>", "sell_fill_slots<{V}, {I}>"],
)
#: SELL's semiring kernel (direct layouts; {S}: the semiring), one kernel file per semiring.
SEMIRING_SELL = tuple(f"sell_semiring_direct<{{V}}, {{I}}, {c}, {{S}}>" for c in SELL_CHUNKS)
_semiring.register_predefined("spmv_sell.cu", SEMIRING_SELL)
#: Construction kernels with their reference.
_CONSTRUCTION_REFERENCES = {
    "sell_window_slots<{I}>": reference.sell_window_slots,
    "sell_slice_widths<{I}>": reference.sell_slice_widths,
    "sell_part_counts<{I}>": reference.sell_part_counts,
    "sell_split_units<{I}>": reference.sell_split_units,
    "sell_select_hot<{I}>": reference.sell_select_hot,
    "sell_fill_slots<{V}, {I}>": reference.sell_fill_slots,
}


def _launch(csr: Any, expression: str, threads: int, *arguments: Any) -> None:
    """Construction kernel ``expression`` over ``threads`` threads on the GPU, its NumPy reference on the CPU."""
    if csr.backend == "cpu":
        _CONSTRUCTION_REFERENCES[expression](*(int(a) if isinstance(a, np.integer) else a for a in arguments))
        return
    kernel = SELL_KERNELS.function(expression, csr.dtype, csr.index_dtype)
    kernel((blocks_for(threads, SELL_BLOCK),), (SELL_BLOCK,), arguments)


def sorted_slices(csr: Any, C: int, sigma: int, longest: int | None = None) -> tuple[Any, Any]:
    """(perm, slice_ptr) of the rows sorted by length inside windows of ``sigma`` rows and cut
    into slices of ``C``: slice widths from the sorted lengths (a thread per slice), scanned.
    ``longest``: the longest row's length when known (:func:`sorted_by_length`)."""
    xp = csr._xp
    m = csr.shape[0]
    perm = sorted_by_length(csr, sigma, longest)
    n_slices = -(-m // C)
    widths = xp.empty(n_slices + 1, dtype=np.int64)
    window = min(sigma, max(m, 1))  # the sort's windows (sigma past the rows: one window)
    _launch(csr, "sell_slice_widths<{I}>", n_slices + 1, csr.indptr, perm, np.int64(m), np.int64(C),
            np.int64(window), np.int64(n_slices), widths)
    return perm, primitives.exclusive_scan(widths)


def slice_sizes(slice_ptr: Any) -> tuple[int, int]:
    """(slots of the layout, slots of its widest slice), in one host read.

    >>> slice_sizes(np.array([0, 64, 96, 96, 224]))
    (224, 128)
    """
    xp = array_module(backend_of(slice_ptr))
    if slice_ptr.size < 2:
        return int(slice_ptr[-1]), 0
    both = xp.stack((slice_ptr[-1], primitives.reduce(convert.row_lengths(slice_ptr), "max")))
    n_slots, widest = both.tolist()
    return int(n_slots), int(widest)


def window_slots(csr: Any, C: int) -> tuple[int, int]:
    """(the slots of the layout at sigma = :data:`DEFAULT_SIGMA`, the longest row's length),
    without building that layout: one launch (``sell_window_slots``, a block per window ranks its
    rows) and one host read. ``C`` divides DEFAULT_SIGMA (every compiled C does)."""
    out = csr._xp.zeros(2, dtype=np.uint64)
    _launch(csr, "sell_window_slots<{I}>", csr.shape[0], csr.indptr, np.int64(csr.shape[0]), np.int64(C), out)
    slots, longest = out.tolist()
    return int(slots), int(longest)


def default_sigma(csr: Any, C: int) -> tuple[int, int | None, int | None]:
    """(sigma by :func:`choose_sigma`, the layout's slots at that sigma, the longest row's
    length), the last two None where not worked out on the way (matrices of at most
    DEFAULT_SIGMA rows, which take it; the slots of a global sort)."""
    m = csr.shape[0]
    if m <= DEFAULT_SIGMA:
        return DEFAULT_SIGMA, None, None
    slots, longest = window_slots(csr, C)
    sigma = choose_sigma(m, csr.nnz, slots)
    return sigma, slots if sigma == DEFAULT_SIGMA else None, longest


def choose_sigma(n_rows: int, nnz: int, slots_at_default: int) -> int:
    """sigma from the slots SELL takes at :data:`DEFAULT_SIGMA`: that window unless it pads more
    than :data:`SIGMA_FILL_LIMIT` slots per entry, then all rows (a global sort).

    >>> choose_sigma(10_000, 50_000, 52_000), choose_sigma(10_000, 50_000, 90_000)
    (256, 10000)
    """
    if nnz and slots_at_default > (1 + SIGMA_FILL_LIMIT) * nnz and n_rows > DEFAULT_SIGMA:
        return n_rows
    return DEFAULT_SIGMA


def choose_split(n_slots: int, C: int) -> int:
    """``split`` from the slots per lane: max(SPLIT_MIN, ceil(n_slots / C / SPLIT_GROUPS)).

    >>> choose_split(32 * 1000 * 5, 32), choose_split(32 * 65536 * 16, 32)
    (32, 128)
    """
    lane_slots = -(-n_slots // C)
    return max(SPLIT_MIN, -(-lane_slots // SPLIT_GROUPS))


def split_units(csr: Any, slice_ptr: Any, C: int, split: int, widest_slots: int) -> tuple[Any, Any]:
    """(split_slice, split_part): the parts of every slice wider than ``split`` slots, in slice
    order, in the CSR's index dtype (empty when nothing is split or ``split`` is 0).
    ``widest_slots`` (:func:`slice_sizes`) settles the common case, no slice that wide, with no
    launch."""
    xp, index_dtype = csr._xp, csr.index_dtype
    n_slices = slice_ptr.size - 1
    if split == 0 or n_slices == 0 or widest_slots <= split * C:
        return xp.empty(0, dtype=index_dtype), xp.empty(0, dtype=index_dtype)
    parts = xp.empty(n_slices + 1, dtype=index_dtype)
    _launch(csr, "sell_part_counts<{I}>", n_slices + 1, slice_ptr, np.int64(n_slices), np.int64(C), np.int64(split),
            parts)
    unit_first = primitives.exclusive_scan(parts)
    n_split = int(unit_first[-1])
    split_slice = xp.empty(n_split, dtype=index_dtype)
    split_part = xp.empty(n_split, dtype=index_dtype)
    if n_split:
        _launch(csr, "sell_split_units<{I}>", n_slices, slice_ptr, unit_first, np.int64(n_slices), np.int64(C),
                np.int64(split), split_slice, split_part)
    return split_slice, split_part


def hot_bytes(backend: str) -> int:
    """Shared memory the default rule stages columns in: :data:`HOT_BYTES`, less on a device
    whose blocks may not have that much (its opt-in limit less the 1 KiB the runtime keeps)."""
    if backend == "cpu":
        return HOT_BYTES
    return min(HOT_BYTES, device_properties()["max_shared_per_block_optin"] - 1024)


def sample_positions(nnz: int, count: int, xp: Any) -> Any:
    """``count`` distinct positions among ``nnz`` stored entries, spread evenly and out of step
    with any row length: ``k * step mod nnz`` for k < count, ``step`` the integer nearest
    ``nnz`` times the golden ratio's fraction that is coprime with ``nnz``. (Every k-th entry
    would, with k equal to a uniform matrix's row length, sample each row's first and smallest
    column.)

    >>> sample_positions(10, 4, np).tolist()
    [0, 7, 4, 1]
    """
    step = max(1, round(nnz * 0.6180339887498949))
    while math.gcd(step, nnz) != 1:
        step += 1
    return xp.arange(0, count * step, step, dtype=np.int64) % nnz


def staged_columns(csr: Any, hot: int | None) -> tuple[Any, Any]:
    """(hot_cols, hot_slot): the columns to stage in shared memory, ascending, and
    ``hot_slot[c]``, the staged position of column c or -1 (what the slot fill encodes columns
    with; both empty when none is staged), in the CSR's index dtype.

    Column counts come from min(nnz, HOT_SAMPLE) stored entries (:func:`sample_positions`;
    one histogram on the CSR's backend). ``hot=None``: the columns gathered at least HOT_MIN_GATHERS times (by
    that estimate), at most :func:`hot_bytes` of values, the most gathered first, if they take at
    least HOT_MIN_SHARE of the gathers (else none); ``hot=h``: the (at
    most h) most gathered columns. Ties at the threshold are left out whole (then the lowest
    columns if still over), so the choice is the same on every backend.

    >>> import numpy as np, scipy.sparse as sp
    >>> from sparsegpu.formats import CSR
    >>> S = sp.csr_array(np.array([[1.0, 1, 0, 0], [1, 1, 0, 1], [1, 0, 1, 0]]))
    >>> A = CSR.from_scipy(S, backend="cpu")  # columns gathered 3, 2, 1 and 1 times
    >>> [staged_columns(A, hot)[0].tolist() for hot in (1, 2, 3)]
    [[0], [0, 1], [0, 1]]
    >>> staged_columns(A, 2)[1].tolist()
    [0, 1, -1, -1]
    """
    xp, index_dtype = csr._xp, csr.index_dtype
    n, nnz = csr.shape[1], csr.nnz
    capacity = hot_bytes(csr.backend) // np.dtype(csr.dtype).itemsize if hot is None else hot
    none = xp.empty(0, dtype=index_dtype), xp.empty(0, dtype=index_dtype)
    if capacity == 0 or nnz == 0:
        return none
    if nnz <= HOT_SAMPLE:
        sampled, samples = csr.indices, nnz
    else:
        sampled, samples = csr.indices[sample_positions(nnz, HOT_SAMPLE, xp)], HOT_SAMPLE
    counts = primitives.histogram(sampled, n, range=(0, n))
    least = -(-HOT_MIN_GATHERS * samples // nnz) if hot is None else 1  # HOT_MIN_GATHERS, scaled to the sample
    top = HOT_COUNT_BINS - 1
    # per_count[t - least]: columns counted t times, least <= t <= top, and in the last bin
    # those counted more often (counts clipped to top + 1); the columns counted fewer times,
    # nearly all of them, fall outside the bins and cost no atomics. One host read.
    per_count = primitives.histogram(xp.minimum(counts, top + 1), top + 2 - least, range=(least, top + 2))
    per_count = per_count.get() if xp is not np else per_count
    at_least = np.cumsum(per_count[::-1])[::-1]  # at_least[t - least]: columns counted t times or more
    fits = np.flatnonzero(at_least[:-1] <= capacity)
    if fits.size:  # the least count whose columns fit (none when past the most gathered count)
        threshold = least + int(fits[0])
    elif per_count[-1]:  # more than `capacity` columns past the clip: the lowest of them
        threshold = top
    else:  # the most gathered columns tie beyond capacity
        return none
    n_hot = min(int(at_least[threshold - least]), capacity)
    served = int(np.arange(threshold, top + 2) @ per_count[threshold - least:])  # their sampled gathers (clipped)
    if n_hot == 0 or (hot is None and served < HOT_MIN_SHARE * samples):
        return none
    # Selected without a host read: the count is known here.
    first = primitives.exclusive_scan((counts >= threshold).astype(index_dtype))
    hot_cols, hot_slot = xp.empty(n_hot, dtype=index_dtype), xp.empty(n, dtype=index_dtype)
    _launch(csr, "sell_select_hot<{I}>", n, counts, first, np.int64(n), np.int64(threshold), np.int64(n_hot),
            hot_cols, hot_slot)
    return hot_cols, hot_slot


def decoded_columns(stored: Any, hot_cols: Any) -> Any:
    """The columns of stored (non-padding) slots: ``-2 - j`` back to ``hot_cols[j]``.

    >>> decoded_columns(np.array([4, -2, 0, -3]), np.array([7, 9])).tolist()
    [4, 7, 0, 9]
    """
    if hot_cols.size == 0:
        return stored
    hot = stored < SELL_PAD
    cols = stored.copy()
    cols[hot] = hot_cols[-2 - stored[hot]]
    return cols


@functools.cache
def _resident_blocks(expression: str, value: np.dtype, index: np.dtype, threads: int, shared: int) -> int:
    """Blocks of ``threads`` threads of this kernel resident at once on the whole device with
    ``shared`` bytes of dynamic shared memory each: 2048 threads per multiprocessor at most,
    fewer when registers or shared memory run out (then a persistent launch still fits one wave)."""
    kernel = SELL_KERNELS.function(expression, value, index)
    properties = device_properties()
    # Registers per block: allocated per warp, in units of 256.
    registers = -(-kernel.attributes["num_regs"] * 32 // 256) * 256 * (threads // 32)
    per_sm = min(SELL_BLOCKS_PER_SM * SELL_BLOCK // threads,
                 properties["max_registers_per_sm"] // max(registers, 1))
    if shared:
        # The runtime reserves 1 KiB of each multiprocessor's shared memory per block.
        per_sm = min(per_sm, properties["max_shared_per_sm"] // (shared + 1024))
    return properties["multiprocessors"] * max(per_sm, 1)


class LaunchPlan(NamedTuple):
    """One matrix's product on the GPU, worked out at its first call (:meth:`SELL._launch_plan`)."""

    kernel: Any
    blocks: int
    threads: int
    shared: int  # bytes of dynamic shared memory (the hot columns)
    arrays: tuple[Any, ...]  # the kernel's arguments before x
    scratch: tuple[Any, Any]  # (partials, tickets) after beta, null pointers without parts
    stage: Any  # sell_stage_hot, or None when the blocks gather the hot columns from x themselves
    hot_values: Any  # sell_stage_hot's output (a null pointer without it)


class SELL(RegularMatrix):
    """SELL-C-sigma matrix. Rows are sorted by length, longest first, inside windows of
    ``sigma`` rows (stable: ``perm[rank]`` is the row at ``rank``), then cut into slices of
    ``C`` consecutive ranks. Slice s is an ELL block of ``C`` rows, stored column-major in
    ``indices`` and ``data`` from ``slice_ptr[s]`` (slot k of lane l at
    ``slice_ptr[s] + k * C + l``; width ``(slice_ptr[s + 1] - slice_ptr[s]) / C``, the longest
    of its rows); padding slots hold column -1 and value 0. ``slice_ptr`` is int64.

    Slices wider than ``split`` slots are summed in parts (``split_slice[u]``, ``split_part[u]``:
    slots ``[p * split, p * split + split)`` of slice s). Columns ``hot_cols`` are staged in
    shared memory; their entries hold ``-2 - j`` for ``hot_cols[j]``. The module docstring gives
    the rules that choose ``sigma``, ``split`` and ``hot`` when not given.

    ``A @ x``: a thread per row, writing ``y[perm[rank]]``; with :attr:`mode` ``"units"``
    (parts or hot columns) a group of C threads per slice or part. Bitwise reproducible (parts
    are added in order), as is ``A.T @ x`` (over a cached CSR of A^T; atomics, not reproducible,
    with ``sparsegpu.options(deterministic=False)``). Products of one matrix with parts share its
    scratch: run them one at a time (one stream).

    Parameters
    ----------
    matrix : scipy sparse matrix or SparseMatrix
        The matrix to store (any scipy format, or any sparsegpu format on either backend).
    dtype, index_dtype, backend : optional
        As in :meth:`SparseMatrix.from_scipy`; for scipy input only.
    C : int, optional
        Rows per slice (default 32), one of 1, 2, 4, ..., 256.
    sigma : int, optional
        Sorting window in rows (default: :func:`choose_sigma`); 1 does not sort.
    split : int, optional
        Slots per part of a wide slice (default: :func:`choose_split`); 0 never splits.
    hot : int, optional
        Columns of x staged in shared memory (default: :func:`staged_columns`' rule); 0 stages
        none.

    Raises
    ------
    TypeError
        ``matrix`` of another type; ``dtype``, ``index_dtype`` or ``backend`` given with a
        sparsegpu matrix; an unknown format parameter; an unsupported dtype.
    ValueError
        ``C`` not one of the compiled slice heights; ``sigma`` below 1; a negative ``split``
        or ``hot``.

    See Also
    --------
    SparseMatrix.from_scipy : ``SELL.from_scipy(S, **params)`` takes the same parameters.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from sparsegpu.formats import SELL
    >>> S = sp.random(100, 80, density=0.08, random_state=6, format="csr")
    >>> A = SELL.from_scipy(S, C=8, sigma=64, backend="cpu")
    >>> x = np.arange(80.0)
    >>> bool(np.allclose(A @ x, S @ x)) and (A.to_scipy() != S).nnz == 0
    True
    >>> A.C, A.sigma, A.slice_ptr.size - 1, A.split, A.hot, A.mode
    (8, 64, 13, 32, 0, 'direct')
    >>> H = SELL.from_scipy(S, C=8, split=2, hot=5, backend="cpu")  # parts of 2 slots, 5 staged columns
    >>> bool(np.allclose(H @ x, S @ x)) and H.split_slice.size > 0 and 0 < H.hot <= 5, H.mode
    (True, 'units')
    """

    format = "sell"
    _array_names = ("slice_ptr", "indices", "data", "perm", "split_slice", "split_part", "hot_cols")
    _value_names = ("data",)
    _scalar_names = ("C", "sigma", "split", "hot")
    slice_ptr: Any
    indices: Any
    data: Any
    perm: Any
    split_slice: Any
    split_part: Any
    hot_cols: Any
    C: int
    sigma: int
    split: int
    hot: int

    @classmethod
    def _from_csr(cls, csr: Any, C: int = DEFAULT_C, sigma: int | None = None, split: int | None = None,
                  hot: int | None = None, **params: Any) -> SELL:
        reject_params(cls, params)
        C = int_at_least("C", C, 1)
        if C not in SELL_CHUNKS:
            raise ValueError(f"C must be one of {SELL_CHUNKS} (the slice heights compiled), got {C}")
        sigma = None if sigma is None else int_at_least("sigma", sigma, 1)
        split = None if split is None else int_at_least("split", split, 0)
        hot = None if hot is None else int_at_least("hot", hot, 0)
        m = csr.shape[0]
        n_slices = -(-m // C)
        # sigma's rule needs the slots at DEFAULT_SIGMA, which sell_window_slots counts without
        # building that layout; it also gives the longest row, the widest slice at any sigma.
        n_slots = longest = None
        if sigma is None:
            sigma, n_slots, longest = default_sigma(csr, C)
        perm, slice_ptr = sorted_slices(csr, C, sigma, longest)
        if longest is None:
            n_slots, widest_slots = slice_sizes(slice_ptr)  # one host read for both
        else:
            n_slots = int(slice_ptr[-1]) if n_slots is None else n_slots
            widest_slots = C * longest
        if split is None:
            split = choose_split(n_slots, C)
        split_slice, split_part = split_units(csr, slice_ptr, C, split, widest_slots)
        hot_cols, hot_slot = staged_columns(csr, hot)
        n_split = split_slice.size
        if n_split == 0 and hot_cols.size == 0:
            # Mode "direct": one thread per rank copies its row (the pass ELL and JDS share).
            indices, data = fill_slots(csr, reference.LAYOUT_SELL, n_slots, perm=perm, offsets=slice_ptr, C=C,
                                       n_ranks=n_slices * C)
        else:
            # The slots, copied over the product's units (a hub row by its parts' threads).
            xp = csr._xp
            indices = xp.empty(n_slots, dtype=csr.index_dtype)
            data = xp.empty(n_slots, dtype=csr.dtype)
            _launch(csr, "sell_fill_slots<{V}, {I}>", (n_split + n_slices) * C, csr.indptr, csr.indices, csr.data,
                    perm, hot_slot if hot_slot.size or csr.backend == "cpu" else NULL_POINTER, slice_ptr,
                    split_slice, split_part, np.int64(n_split), np.int64(split) if split else _NEVER_SPLIT,
                    np.int64(n_slices), np.int64(m), np.int64(C), indices, data)
        return cls._new(csr.shape, csr.backend, csr.nnz, slice_ptr=slice_ptr, indices=indices, data=data,
                        perm=perm, split_slice=split_slice, split_part=split_part, hot_cols=hot_cols, C=C,
                        sigma=sigma, split=split, hot=int(hot_cols.size))

    def to_csr(self) -> Any:
        xp, C = self._xp, self.C
        slots = xp.flatnonzero(self.indices != SELL_PAD)
        slices = xp.searchsorted(self.slice_ptr, slots, side="right") - 1
        within = slots - self.slice_ptr[slices]
        rows = self.perm[slices * C + within % C]
        positions = (within // C).astype(self._index_dtype)
        cols = decoded_columns(self.indices[slots], self.hot_cols)
        return csr_from_positions(rows, positions, cols, self.data[slots], self._shape, self._index_dtype,
                                  self._backend, xp)

    @property
    def mode(self) -> str:
        """The kernel's mode, from the layout: ``"direct"`` (no parts, no hot columns: a thread
        per row over a grid covering the rows) or ``"units"`` (groups of C threads over parts
        and slices in a persistent loop). See the module docstring."""
        return "units" if self.split_slice.size or self.hot else "direct"

    @property
    def fill(self) -> float:
        """Padding slots per stored entry."""
        slots = int(self.slice_ptr[-1])
        return (slots - self._nnz) / self._nnz if self._nnz else 0.0

    def _launch_plan(self, force_units: bool) -> LaunchPlan:
        """This matrix's product on the GPU, worked out once and cached: a small matrix's
        product is as short as the Python around its launch."""
        import cupy

        n_hot, n_split, C = self.hot_cols.size, self.split_slice.size, self.C
        n_slices = self.slice_ptr.size - 1
        n_rows = self._shape[0]
        if self.mode == "direct" and not force_units:
            mode, threads, shared = SELL_DIRECT, SELL_BLOCK, 0
            blocks = blocks_for(n_rows, threads)  # a thread per row
        else:
            mode = SELL_UNITS_HOT if n_hot else SELL_UNITS
            threads = SELL_HOT_BLOCK if n_hot else SELL_BLOCK
            shared = n_hot * self._dtype.itemsize
            blocks = blocks_for(n_split + n_slices, threads // C)  # C threads per unit
        expression = f"sell_spmv<{{V}}, {{I}}, {C}, {mode}>"
        kernel = allow_dynamic_shared(SELL_KERNELS.function(expression, self._dtype, self._index_dtype), shared,
                                      f"{n_hot} hot columns of {self._dtype} (rebuild with a smaller hot=)")
        if mode != SELL_DIRECT:  # one resident wave takes the units round after round
            blocks = min(blocks, _resident_blocks(expression, self._dtype, self._index_dtype, threads, shared))
        scratch = (NULL_POINTER, NULL_POINTER)
        if n_split:  # tickets start at zero; every product leaves them so
            scratch = (cupy.empty(n_split * C, self._dtype), cupy.zeros(n_split * C, np.uint32))
        stage, hot_values = None, NULL_POINTER
        if mode == SELL_UNITS_HOT and n_hot >= HOT_STAGE_FIRST:
            stage = SELL_KERNELS.function("sell_stage_hot<{V}, {I}>", self._dtype, self._index_dtype)
            hot_values = cupy.empty(n_hot, self._dtype)
        arrays = (self.slice_ptr, self.indices, self.data, self.perm, self.split_slice, self.split_part,
                  np.int64(n_split), np.int64(self.split) if self.split else _NEVER_SPLIT, self.hot_cols,
                  np.int64(n_hot), hot_values, np.int64(n_slices), np.int64(n_rows))
        return LaunchPlan(kernel, blocks, threads, shared, arrays, scratch, stage, hot_values)

    def _semiring_gpu(self, x: Any, out: Any, semiring: Any, mask: Any, complement: bool, **flags: Any) -> Any:
        if flags or self.mode != "direct":  # split slices, hot columns and sparse x run over the CSR
            return super()._semiring_gpu(x, out, semiring, mask, complement, **flags)
        kernel = _semiring.kernel(semiring, "spmv_sell.cu", SEMIRING_SELL,
                                  f"sell_semiring_direct<{{V}}, {{I}}, {self.C}, {{S}}>", self._dtype,
                                  self._index_dtype)
        m = self._shape[0]
        kernel((blocks_for(m, SELL_BLOCK),), (SELL_BLOCK,),
               (self.slice_ptr, self.indices, self.data, self.perm, np.int64(m), x, out,
                NULL_POINTER if mask is None else mask, np.int32(complement)))
        return out

    def _cached_plan(self, force_units: bool) -> LaunchPlan:
        """:meth:`_launch_plan`, worked out once per matrix and ``force_units``."""
        plan = self._cache.get(("launch", force_units))
        if plan is None:
            plan = self._cache[("launch", force_units)] = self._launch_plan(force_units)
        return plan

    def _packed_launches(self) -> tuple[list[Launch], bool]:
        if self._shape[0] == 0:
            return [], False
        plan = self._cached_plan(self._fast_key())
        launches = []
        if plan.stage is not None:
            n_hot = self.hot_cols.size
            launches.append(Launch(plan.stage, blocks_for(n_hot, SELL_BLOCK), SELL_BLOCK,
                                   (X, self.hot_cols, np.int64(n_hot), plan.hot_values)))
        launches.append(Launch(plan.kernel, plan.blocks, plan.threads, (*plan.arrays, X, Y, ALPHA, BETA, *plan.scratch),
                               shared=plan.shared))
        return launches, False

    def _fast_key(self) -> bool:
        return SELL_FORCE_UNITS  # which kernel mode a direct layout runs

    def _forward(self, x: Any, y: Any, alpha: Any, beta: Any) -> Any:
        if self._backend == "cpu":
            return reference.sell_spmv(self.slice_ptr, self.indices, self.data, self.perm, self.split_slice,
                                   self.split_part, self.split, self.hot_cols, self.C, x, y, alpha, beta)
        if y.size == 0:
            return y
        force_units = SELL_FORCE_UNITS
        plan = self._cache.get(("launch", force_units))
        if plan is None:
            plan = self._cache[("launch", force_units)] = self._launch_plan(force_units)
        if plan.stage is not None:
            n_hot = self.hot_cols.size
            plan.stage((blocks_for(n_hot, SELL_BLOCK),), (SELL_BLOCK,), (x, self.hot_cols, np.int64(n_hot), plan.hot_values))
        plan.kernel((plan.blocks,), (plan.threads,), (*plan.arrays, x, y, alpha, beta, *plan.scratch),
                    shared_mem=plan.shared)
        return y

"""The GPU phases of ``spgemm`` (kernels/spgemm.cu; the rules are the NumPy reference's,
sparsegpu/reference/spgemm.py). One call on a product of one row block synchronises with the
host three times at most: the plan's totals, the output's size with the numeric bins, and (without
a semiring) the number of entries equal to zero, one word.

1. Plan (``spgemm_plan``, one launch): each row's products, entry bound, bin and working-memory
   cost, and the totals (rows per bin, cost, wide rows' products) in a small stats array; it
   zeroes the counts. Rows are listed by bin (``spgemm_list_rows``) in the same queue. One read
   of the stats decides the blocking (one block when the summed cost fits the budget; else the
   costs are read) and which bins launch.
2. Symbolic: the hash kernels (bounds up to 2048) and the wide-row kernel (past them) write each
   row's count into one array of all rows and a spare zero.
3. Pointers: one exclusive scan of the counts. The numeric bins (``spgemm_count_bins``, rows
   rebinned by their exact count), the rows whose bin moved and the output size come back in
   one read; rows are listed again only when some moved (else the plan's lists serve). The
   output is allocated once, and a product that cannot fit raises MemoryError before it is
   allocated. Every block writes its rows in place.
4. Numeric: the same kernels fill each row at its pointer, and (without a semiring) write each
   row's entries that are not zero over its count and add the others to one stats word.
5. Without a semiring, entries equal to zero are dropped: when that word (read back) is not
   zero, a scan of the counts and a compaction (``spgemm_drop_zeros``); else nothing.

Wide rows: one block per row marks its columns in a bitmap of n_cols bits (the columns come out
sorted by a scan of its words, the values are folded straight into the output at each column's
rank), so no product is ever stored. The bitmap and its per-word ranks take n_cols / 4 bytes:
in shared memory up to ``WIDE_SHARED_BYTES``, else each block's slice of a global scratch whose
blocks are capped at ``WIDE_GRID`` (each then takes rows in turn); that slice is counted in each
wide row's cost, so the row blocks keep the scratch within the budget. Why a bitmap rather than
a hash table in global memory: the output comes out sorted without a sort, and the rank of a
column is two reads. Its price is a scan of n_cols / 32 words per row (twice in the numeric
phase), about the work of a wide row's products (2049 at least) while n_cols is below 100,000
or so; past that, rows barely wide pay mostly for the scan.

Rows within a bin are listed in no fixed order (atomics): each row is computed on its own, so
the result is bitwise the same run to run.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import numpy as np

from sparsegpu import _validate, primitives
from sparsegpu._backend import array_module, to_host
from sparsegpu._kernels import (
    INDEX_DTYPES,
    VALUE_DTYPES,
    KernelFile,
    allow_dynamic_shared,
    blocks_for,
)
from sparsegpu.formats import _semiring
from sparsegpu.reference import spgemm as reference
from sparsegpu.semiring import Semiring

#: Per hash bin: (largest row bound, threads per row, table slots): tables twice the bound. The
#: bin up to 1024 keeps rows of 257 to 1024 entries out of the 4096-slot table: half its shared
#: memory, so twice the blocks per SM.
HASH_BINS = ((32, 32, 64), (256, 128, 512), (1024, 256, 2048), (2048, 256, 4096))
CAPACITIES = tuple(capacity for capacity, _, _ in HASH_BINS)
WIDE_BIN = len(HASH_BINS)  # kernels/spgemm.cu SPGEMM_WIDE
N_BINS = WIDE_BIN + 1
WARP_GROUPS = 4  # kernels/spgemm.cu SPGEMM_WARP_GROUPS: rows per block of the warp bin
WIDE_THREADS = 256  # kernels/spgemm.cu SPGEMM_WIDE_THREADS
WIDE_TOUCH = 2048  # kernels/spgemm.cu SPGEMM_WIDE_TOUCH: bytes of the fold's marks per round parity
#: A wide row's bitmap and ranks live in shared memory up to this many bytes (n_cols up to
#: 393,216): two blocks of the wide kernel still fit an SM with room for others.
WIDE_SHARED_BYTES = 96 * 1024
#: Blocks of the wide kernel at most when its bitmaps live in global scratch.
WIDE_GRID = 1024
#: kernels/spgemm.cu's stats layout: rows per bin, then these counters, then one cursor per bin.
STAT_COST, STAT_WIDE_PRODUCTS, STAT_PRODUCTS, STAT_TOTAL, STAT_MOVED, STAT_ZEROS, STAT_CURSOR = range(5, 12)
STATS = STAT_CURSOR + N_BINS
#: The block kernels' fold (kernels/spgemm.cu fold_in_order): a round's warps take turns when
#: more than this many of its leaders per warp find their slot's mark byte already marked (a
#: slot spread over many warps: few columns); below, the lowest warp holding a slot folds it
#: alone. Any value gives the same bits; -1: always turns, a large value: never.
FOLD_TURNS = 1
PLAN_BLOCK = 256
#: Blocks of the grid-stride planning kernels at most (enough to fill any current GPU).
PLAN_GRID = 1024
TEMPLATES = tuple(f"spgemm_rows<{{V}}, {{I}}, {{S}}, {nt}, {table}, {phase}>"
                  for _, nt, table in HASH_BINS for phase in ("false", "true")) + (
    "spgemm_wide<{V}, {I}, {S}, false>", "spgemm_wide<{V}, {I}, {S}, true>")
_semiring.register_predefined("spgemm.cu", TEMPLATES)
#: Semiring-free kernels: planning and binning (index type only) and zero dropping.
PLAN_TEMPLATES = ("spgemm_plan<{I}>", "spgemm_count_bins<{I}>", "spgemm_list_rows<{I}>",
                  "spgemm_drop_zeros<{V}, {I}>")
PLAN_KERNELS = KernelFile("spgemm.cu", PLAN_TEMPLATES, VALUE_DTYPES, INDEX_DTYPES)
NULL_POINTER = np.uint64(0)
INT32_MAX = np.iinfo(np.int32).max
#: Fill the output with -1 / NaN before the kernels write it (tests: unwritten entries show).
POISON = False
assert len(CAPACITIES) == 4, "kernels/spgemm.cu bin_of takes four capacities"


def group_shared_bytes(value_size: int, index_size: int, threads: int, table: int) -> int:
    """Shared bytes of one row's group (kernels/spgemm.cu ``Shared::bytes``): values for the
    table and two rounds, pointers for the chunk, keys twice the table, int positions and a
    round's slots.

    >>> group_shared_bytes(8, 4, 32, 64)
    2448
    """
    raw = value_size * (table + 2 * threads) + 8 * (2 * threads + threads // 32) + index_size * 2 * table \
        + 4 * (table + 1 + threads)
    return (raw + 15) // 16 * 16


def wide_walk_bytes(value_size: int) -> int:
    """Shared bytes of the wide kernel's product walk (kernels/spgemm.cu ``Walk::bytes``): a
    round's values and ranks, the chunk's pointers, the fold's marks.

    >>> wide_walk_bytes(8)
    13376
    """
    raw = value_size * 2 * WIDE_THREADS + 8 * (2 * WIDE_THREADS + WIDE_THREADS // 32) + 4 * WIDE_THREADS \
        + 2 * WIDE_TOUCH
    return (raw + 15) // 16 * 16


def wide_bitmap_bytes(n_cols: int) -> int:
    """Bytes of one wide row's bitmap and per-word ranks (two 32-bit words per 32 columns).

    >>> wide_bitmap_bytes(100)
    32
    """
    return 8 * (-(-n_cols // 32))


def wide_scratch_bytes(n_cols: int) -> int:
    """Global scratch one wide row costs: 0 when its bitmap fits in shared memory.

    >>> wide_scratch_bytes(1000), wide_scratch_bytes(10**6)
    (0, 250000)
    """
    bitmap = wide_bitmap_bytes(n_cols)
    return 0 if bitmap <= WIDE_SHARED_BYTES else bitmap


def _grid(items: int, per_block: int) -> int:
    return min(blocks_for(items, per_block), PLAN_GRID)


class _Device:
    """One product's operands and kernels on the GPU. ``xp``: the array module (CuPy);
    ``kernels``: template -> launchable kernel (default: the compiled ones; the tests pass
    NumPy emulations to check this module's index arithmetic without a GPU)."""

    def __init__(self, a: Any, b: Any, n: int, semiring: Semiring | None, pattern: Any, complement: bool, xp: Any,
                 kernels: Any = None) -> None:
        self.cupy = xp
        self.kernels = kernels
        self.a, self.b, self.n = a, b, n
        self.dtype, self.index_dtype = a[2].dtype, a[1].dtype
        self.semiring = semiring
        self.kernel_semiring = _semiring.as_semiring("plus_times") if semiring is None else semiring
        self.mask = (NULL_POINTER, NULL_POINTER) if pattern is None else pattern
        self.complement = np.int32(complement)
        self.backend = "cpu" if xp is np else "gpu"
        self.caps = tuple(np.int64(c) for c in CAPACITIES)

    def kernel(self, template: str) -> Any:
        if self.kernels is not None:
            return self.kernels(template)
        if template in PLAN_TEMPLATES:
            return PLAN_KERNELS.function(template, self.dtype, self.index_dtype)
        return _semiring.kernel(self.kernel_semiring, "spgemm.cu", TEMPLATES, template, self.dtype, self.index_dtype)

    def plan(self, entry_bytes: int, bins: Any, costs: Any, counts: Any, stats: Any) -> None:
        """Launch ``spgemm_plan``: bins, costs and totals of every row; counts (m + 1) zeroed."""
        m = bins.size
        self.kernel("spgemm_plan<{I}>")(
            (_grid(m, PLAN_BLOCK // 32),), (PLAN_BLOCK,),
            (np.int64(m), self.a[0], self.a[1], self.b[0], self.mask[0], self.complement, np.int64(self.n), *self.caps,
             np.int64(entry_bytes), np.int64(wide_scratch_bytes(self.n)), np.int64(reference.ROW_OVERHEAD_BYTES),
             bins, costs, counts, stats))

    def count_bins(self, lo: int, hi: int, counts: Any, bins: Any, indptr: Any, stats: Any) -> None:
        """Launch ``spgemm_count_bins`` over rows lo:hi (rebinned by ``counts`` unless null)."""
        self.kernel("spgemm_count_bins<{I}>")(
            (_grid(hi - lo, PLAN_BLOCK),), (PLAN_BLOCK,),
            (np.int64(lo), np.int64(hi), counts, *self.caps, bins, indptr, stats))

    def list_rows(self, lo: int, hi: int, bins: Any, bin_rows: Any, cursors: Any, lists: Any) -> None:
        """Launch ``spgemm_list_rows``: rows lo:hi listed by bin."""
        self.kernel("spgemm_list_rows<{I}>")(
            (_grid(hi - lo, PLAN_BLOCK),), (PLAN_BLOCK,), (np.int64(lo), np.int64(hi), bins, bin_rows, cursors, lists))

    def rows(self, bin_id: int, numeric: bool, rows: Any, indptr: Any, counts: Any, out: tuple[Any, Any],
             stats: Any = NULL_POINTER) -> None:
        """Launch the kernel of ``bin_id`` over the listed rows: symbolic, the counts; numeric,
        the entries (and, unless ``counts`` is null, the kept counts and the zeros added to
        ``stats[STAT_ZEROS]``)."""
        if bin_id == WIDE_BIN:
            self._wide(numeric, rows, indptr, counts, out, stats)
            return
        _, threads, table = HASH_BINS[bin_id]
        groups = WARP_GROUPS if threads == 32 else 1
        shared = groups * group_shared_bytes(self.dtype.itemsize, self.index_dtype.itemsize, threads, table)
        phase = "true" if numeric else "false"
        kernel = self.kernel(f"spgemm_rows<{{V}}, {{I}}, {{S}}, {threads}, {table}, {phase}>")
        if self.kernels is None:
            kernel = allow_dynamic_shared(kernel, shared, "spgemm's hash kernel")
        kernel((blocks_for(rows.size, groups),), (threads * groups,),
               (np.int64(rows.size), rows, indptr, counts, *self.a, *self.b, self.mask[0], self.mask[1],
                self.complement, out[0], out[1], stats, np.int32(FOLD_TURNS)), shared_mem=shared)

    def _wide(self, numeric: bool, rows: Any, indptr: Any, counts: Any, out: tuple[Any, Any], stats: Any) -> None:
        """Launch ``spgemm_wide``: one block per row with the bitmap in shared memory, else at
        most WIDE_GRID blocks, each with its slice of a zeroed global scratch."""
        in_shared = wide_scratch_bytes(self.n) == 0
        words = wide_bitmap_bytes(self.n) // 8
        grid = rows.size if in_shared else min(rows.size, WIDE_GRID)
        shared = wide_walk_bytes(self.dtype.itemsize) + (8 * words if in_shared else 0)
        scratch = NULL_POINTER if in_shared else self.cupy.zeros(grid * 2 * words, np.uint32)
        kernel = self.kernel(f"spgemm_wide<{{V}}, {{I}}, {{S}}, {'true' if numeric else 'false'}>")
        if self.kernels is None:
            kernel = allow_dynamic_shared(kernel, shared, "spgemm's wide-row kernel")
        kernel((grid,), (WIDE_THREADS,),
               (np.int64(rows.size), rows, indptr, counts, *self.a, *self.b, self.mask[0], self.mask[1],
                self.complement, out[0], out[1], np.int64(self.n), scratch, stats, np.int32(FOLD_TURNS)),
               shared_mem=shared)

    def drop_zeros(self, indptr: Any, kept_ptr: Any, indices: Any, data: Any, out: tuple[Any, Any]) -> None:
        m = indptr.size - 1
        self.kernel("spgemm_drop_zeros<{V}, {I}>")(
            (_grid(m, PLAN_BLOCK // 32),), (PLAN_BLOCK,), (np.int64(m), indptr, kept_ptr, indices, data, out[0], out[1]))


def _bin_sizes(stats: np.ndarray) -> tuple[list[int], list[int]]:
    """(rows per bin, each bin's start in the lists) from a stats array read to the host."""
    sizes = [int(s) for s in stats[:N_BINS]]
    return sizes, np.concatenate([[0], np.cumsum(sizes)]).astype(int).tolist()


def _budget(max_bytes: int | None, backend: str) -> int:
    return max_bytes if max_bytes is not None else max(1, _validate.available_bytes(backend) // 2)


def device_spgemm(a: Any, b: Any, shape: tuple[int, int], semiring: Semiring | None, pattern: Any,
                  complement: bool, max_bytes: int | None, xp: Any = None, kernels: Any = None) -> tuple[Any, Any, Any]:
    """The GPU phases (module docstring) on CSR operands of one value and index type.
    Raises MemoryError when the product (its size known after the symbolic phase) cannot fit."""
    xp = array_module("gpu") if xp is None else xp
    m, n = shape
    if m == 0:
        return xp.zeros(1, np.int64), xp.zeros(0, a[1].dtype), xp.zeros(0, a[2].dtype)
    device = _Device(a, b, n, semiring, pattern, complement, xp, kernels)
    entry_bytes = a[1].itemsize + a[2].itemsize
    bins, costs, counts = xp.empty(m, np.int8), xp.empty(m, np.int64), xp.empty(m + 1, np.int64)
    stats, lists = xp.zeros(2 * STATS, np.uint64), xp.empty(m, np.int64)  # the plan's stats, then the numeric bins'
    device.plan(entry_bytes, bins, costs, counts, stats[:STATS])
    device.list_rows(0, m, bins, stats, stats[STAT_CURSOR:STATS], lists)
    plan = to_host(stats[:STATS])  # sync: the plan's totals
    if plan[WIDE_BIN] and n > INT32_MAX:  # the wide kernel's ranks are int
        raise ValueError(f"B has {n:,} columns; on the GPU, rows of more than {CAPACITIES[-1]} products need "
                         f"fewer than 2**31")
    available = _validate.available_bytes(device.backend)
    budget = max_bytes if max_bytes is not None else max(1, available // 2)
    blocks = [0, m] if int(plan[STAT_COST]) <= budget else reference.row_blocks(to_host(costs), budget).tolist()
    del costs
    single = len(blocks) == 2
    for lo, hi in pairwise(blocks):
        sizes, starts = _bin_sizes(plan) if single else _list_block(device, lo, hi, None, bins, None, lists)
        _launch_bins(device, False, sizes, starts, lists, NULL_POINTER, counts, (NULL_POINTER, NULL_POINTER))
    indptr = primitives.exclusive_scan(counts)
    if single:
        sizes, starts, total = _numeric_lists(device, m, counts, bins, indptr, lists, plan, stats[STATS:])
    else:
        total = int(indptr[-1])
    indices, data = _allocate(device, total, available)
    # Without a semiring the numeric kernels count kept entries over the counts, zeros in the plan's stats.
    kept, zeros = (counts, stats) if semiring is None else (NULL_POINTER, NULL_POINTER)
    for lo, hi in pairwise(blocks):
        if not single:
            sizes, starts = _list_block(device, lo, hi, counts, bins, None, lists)
        _launch_bins(device, True, sizes, starts, lists, indptr, kept, (indices, data), zeros)
    del lists, bins
    if semiring is not None:
        return indptr, indices, data
    return _drop_zeros(device, indptr, indices, data, counts, total, stats[STAT_ZEROS:STAT_ZEROS + 1])


def _launch_bins(device: _Device, numeric: bool, sizes: list[int], starts: list[int], lists: Any, indptr: Any,
                 counts: Any, out: tuple[Any, Any], stats: Any = NULL_POINTER) -> None:
    """One phase's kernel for every bin with rows."""
    for bin_id in range(N_BINS):
        if sizes[bin_id]:
            device.rows(bin_id, numeric, lists[starts[bin_id]:starts[bin_id + 1]], indptr, counts, out, stats)


def _numeric_lists(device: _Device, m: int, counts: Any, bins: Any, indptr: Any, lists: Any, plan: np.ndarray,
                   stats: Any) -> tuple[list[int], list[int], int]:
    """One block's numeric bins (rows rebinned by their exact count) and output total, in one
    read of ``stats`` (zeroed scratch of STATS). When no row of some entry changes bin, the
    plan's lists and sizes serve as they are (a row left without entries computes nothing);
    else the rows are listed again. Returns (rows per bin, starts in ``lists``, total)."""
    device.count_bins(0, m, counts, bins, indptr, stats)
    host = to_host(stats)  # sync: the numeric bins, the moved rows and the total
    if not host[STAT_MOVED]:
        return (*_bin_sizes(plan), int(host[STAT_TOTAL]))
    device.list_rows(0, m, bins, stats, stats[STAT_CURSOR:], lists)
    return (*_bin_sizes(host), int(host[STAT_TOTAL]))


def _list_block(device: _Device, lo: int, hi: int, counts: Any, bins: Any, indptr: Any, lists: Any,
                stats: Any = None) -> tuple[list[int], list[int]]:
    """Rows lo:hi binned (by ``counts`` when given, else the plan's bins) and listed; one read.
    ``stats``: zeroed scratch of STATS (default: a new one). Returns (rows per bin, starts in
    ``lists``), the block's output total appended to the sizes when ``indptr`` is given."""
    stats = device.cupy.zeros(STATS, np.uint64) if stats is None else stats
    device.count_bins(lo, hi, NULL_POINTER if counts is None else counts, bins,
                      NULL_POINTER if indptr is None else indptr, stats)
    device.list_rows(lo, hi, bins, stats, stats[STAT_CURSOR:], lists)
    host = to_host(stats)  # sync: the block's bins (and total)
    sizes, starts = _bin_sizes(host)
    return (sizes + [int(host[STAT_TOTAL])] if indptr is not None else sizes), starts


def _allocate(device: _Device, total: int, available: int) -> tuple[Any, Any]:
    """The output's indices and data, after checking that they fit (MemoryError otherwise).
    ``available``: the memory measured before the plan; within half of it the product fits
    without asking again (the phases since hold a few arrays of rows)."""
    xp = device.cupy
    nbytes = total * (device.index_dtype.itemsize + device.dtype.itemsize)
    if nbytes > available // 2:
        available = _validate.available_bytes(device.backend)
    if nbytes > available:
        raise MemoryError(f"spgemm: the product has {total:,} entries ({nbytes / 2**30:,.3g} GiB of indices and "
                          f"values), more than the {available / 2**30:,.3g} GiB of memory available")
    if POISON:
        return xp.full(total, -1, device.index_dtype), xp.full(total, np.nan, device.dtype)
    return xp.empty(total, device.index_dtype), xp.empty(total, device.dtype)


def _drop_zeros(device: _Device, indptr: Any, indices: Any, data: Any, kept: Any, total: int,
                zeros: Any) -> tuple[Any, Any, Any]:
    """The CSR without entries equal to zero (SciPy's rule for the arithmetic product); ``kept``
    holds each row's entries that are not zero (the numeric kernels' counts) and a last zero,
    ``zeros`` (one word) the entries equal to zero: none, and nothing more is launched."""
    if total == 0:
        return indptr, indices, data
    dropped = int(to_host(zeros)[0])  # sync: the entries equal to zero
    if dropped == 0:
        return indptr, indices, data
    kept_ptr = primitives.exclusive_scan(kept)
    out = device.cupy.empty(total - dropped, indices.dtype), device.cupy.empty(total - dropped, data.dtype)
    device.drop_zeros(indptr, kept_ptr, indices, data, out)
    return kept_ptr, out[0], out[1]

"""The GPU phases of ``spgemm`` (kernels/spgemm.cu; the rules are the NumPy reference's,
sparsegpu/reference/spgemm.py). One call on a product of one row block synchronises with the
host three times at most: the plan's totals, the output's size with the numeric bins, and (without
a semiring) the entries left after dropping zeros.

1. Plan (``spgemm_plan``, one launch): each row's products, entry bound, bin and working-memory
   cost, and the totals (rows per bin, cost, ESC products) in a small stats array; rows are
   listed by bin (``spgemm_list_rows``) in the same queue. One read of the stats decides the
   blocking (one block when the summed cost fits the budget; else the costs are read) and which
   bins launch; the ESC machinery runs only when some row needs it.
2. Symbolic: the hash kernels write each row's count into one array of all rows; ESC rows get
   theirs from expand-sort-compress (kept for the numeric phase when there is one block).
3. Pointers: a scan of the counts. The numeric bins (``spgemm_count_bins``) and the output size
   come back in one read; the output is allocated once, and a product that cannot fit raises
   MemoryError before it is allocated. Every block writes its rows in place.
4. Numeric: the hash kernels fill each row at its pointer; ESC rows are scattered in.
5. Without a semiring, entries equal to zero are dropped: kept entries per row
   (``spgemm_count_kept``), their scan, and a compaction (``spgemm_drop_zeros``) only when
   some entry is zero.

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

#: Per hash bin: (largest row bound, threads per row, table slots): tables twice the bound.
HASH_BINS = ((32, 32, 64), (256, 128, 512), (2048, 256, 4096))
CAPACITIES = tuple(capacity for capacity, _, _ in HASH_BINS)
ESC_BIN = len(HASH_BINS)  # kernels/spgemm.cu SPGEMM_ESC
WARP_GROUPS = 4  # kernels/spgemm.cu SPGEMM_WARP_GROUPS: rows per block of the warp bin
FLAT_BLOCK = 256  # kernels/spgemm.cu SPGEMM_FLAT_BLOCK
#: kernels/spgemm.cu's stats layout: rows per bin, then these counters, then one cursor per bin.
STAT_COST, STAT_ESC_PRODUCTS, STAT_PRODUCTS, STAT_TOTAL, STAT_CURSOR = 4, 5, 6, 7, 8
STATS = STAT_CURSOR + ESC_BIN + 1
PLAN_BLOCK = 256
#: Blocks of the grid-stride planning kernels at most (enough to fill any current GPU).
PLAN_GRID = 1024
TEMPLATES = tuple(f"spgemm_rows<{{V}}, {{I}}, {{S}}, {nt}, {table}, {phase}>"
                  for _, nt, table in HASH_BINS for phase in ("false", "true")) + (
    "spgemm_expand<{V}, {I}, {S}>", "spgemm_fold_runs<{V}, {I}, {S}>")
_semiring.register_predefined("spgemm.cu", TEMPLATES)
#: Semiring-free kernels: planning and binning (index type only) and zero dropping.
PLAN_TEMPLATES = ("spgemm_plan<{I}>", "spgemm_count_bins<{I}>", "spgemm_list_rows<{I}>",
                  "spgemm_count_kept<{V}, {I}>", "spgemm_drop_zeros<{V}, {I}>")
PLAN_KERNELS = KernelFile("spgemm.cu", PLAN_TEMPLATES, VALUE_DTYPES, INDEX_DTYPES)
NULL_POINTER = np.uint64(0)
#: Fill the output with -1 / NaN before the kernels write it (tests: unwritten entries show).
POISON = False
assert len(CAPACITIES) == 3, "kernels/spgemm.cu bin_of takes three capacities"


def group_shared_bytes(value_size: int, index_size: int, threads: int, table: int) -> int:
    """Shared bytes of one row's group (kernels/spgemm.cu ``Shared::bytes``): values for the
    table and two rounds, pointers for the chunk, keys twice the table, int positions.

    >>> group_shared_bytes(8, 4, 32, 64)
    2320
    """
    raw = value_size * (table + 2 * threads) + 8 * (2 * threads + threads // 32) + index_size * 2 * table \
        + 4 * (table + 1)
    return (raw + 15) // 16 * 16


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
        self.masked = pattern is not None
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

    def plan(self, entry_bytes: int, bins: Any, costs: Any, stats: Any) -> None:
        """Launch ``spgemm_plan``: bins, costs and totals of every row."""
        m = bins.size
        self.kernel("spgemm_plan<{I}>")(
            (_grid(m, PLAN_BLOCK // 32),), (PLAN_BLOCK,),
            (np.int64(m), self.a[0], self.a[1], self.b[0], self.mask[0], self.complement, np.int64(self.n), *self.caps,
             np.int64(entry_bytes), np.int64(reference.ESC_OVERHEAD_BYTES), np.int64(reference.ROW_OVERHEAD_BYTES),
             bins, costs, stats))

    def count_bins(self, lo: int, hi: int, counts: Any, bins: Any, indptr: Any, stats: Any) -> None:
        """Launch ``spgemm_count_bins`` over rows lo:hi (rebinned by ``counts`` unless null)."""
        self.kernel("spgemm_count_bins<{I}>")(
            (_grid(hi - lo, PLAN_BLOCK),), (PLAN_BLOCK,),
            (np.int64(lo), np.int64(hi), counts, *self.caps, bins, indptr, stats))

    def list_rows(self, lo: int, hi: int, bins: Any, bin_rows: Any, cursors: Any, lists: Any) -> None:
        """Launch ``spgemm_list_rows``: rows lo:hi listed by bin."""
        self.kernel("spgemm_list_rows<{I}>")(
            (_grid(hi - lo, PLAN_BLOCK),), (PLAN_BLOCK,), (np.int64(lo), np.int64(hi), bins, bin_rows, cursors, lists))

    def rows(self, bin_id: int, numeric: bool, rows: Any, indptr: Any, counts: Any, out: tuple[Any, Any]) -> None:
        """Launch the hash kernel of ``bin_id`` over the listed rows."""
        _, threads, table = HASH_BINS[bin_id]
        groups = WARP_GROUPS if threads == 32 else 1
        shared = groups * group_shared_bytes(self.dtype.itemsize, self.index_dtype.itemsize, threads, table)
        phase = "true" if numeric else "false"
        kernel = self.kernel(f"spgemm_rows<{{V}}, {{I}}, {{S}}, {threads}, {table}, {phase}>")
        if self.kernels is None:
            kernel = allow_dynamic_shared(kernel, shared, "spgemm's hash kernel")
        (a_indptr, a_indices, a_data), (b_indptr, b_indices, b_data) = self.a, self.b
        kernel((blocks_for(rows.size, groups),), (threads * groups,),
               (np.int64(rows.size), rows, indptr, counts, a_indptr, a_indices, a_data, b_indptr, b_indices, b_data,
                self.mask[0], self.mask[1], self.complement, out[0], out[1]), shared_mem=shared)

    def esc(self, rows: Any) -> tuple[Any, Any, Any]:
        """(entries per row, columns, values) of the listed rows by expand-sort-compress."""
        cp = self.cupy
        a_indptr, a_indices, _ = self.a
        b_indptr = self.b[0]
        lengths = (a_indptr[rows + 1] - a_indptr[rows]).astype(np.int64)
        entry_ptr = _pointers(lengths, cp)
        entry_row = primitives.expand_pointers(entry_ptr, cp)
        a_position = a_indptr[rows].astype(np.int64)[entry_row] + cp.arange(entry_row.size) - entry_ptr[entry_row]
        k = a_indices[a_position]
        product_ptr = _pointers((b_indptr[k + 1] - b_indptr[k]).astype(np.int64), cp)
        n_products = int(product_ptr[-1])
        entry_of = primitives.expand_pointers(product_ptr, cp)
        cols = cp.empty(n_products, self.index_dtype)
        values = cp.empty(n_products, self.dtype)
        keep = cp.empty(n_products, np.uint8)
        if n_products:
            self.kernel("spgemm_expand<{V}, {I}, {S}>")(
                (blocks_for(n_products, FLAT_BLOCK),), (FLAT_BLOCK,),
                (np.int64(n_products), entry_of, product_ptr, a_position, rows[entry_row], a_indices, self.a[2],
                 b_indptr, self.b[1], self.b[2], self.mask[0], self.mask[1], self.complement, cols, values, keep))
        local = entry_row[entry_of]
        if self.masked:
            kept = cp.flatnonzero(keep)
            local, cols, values = local[kept], cols[kept], values[kept]
        return self._compress(local, cols, values, rows.size)

    def _compress(self, local: Any, cols: Any, values: Any, n_rows: int) -> tuple[Any, Any, Any]:
        cp = self.cupy
        if local.size == 0:
            return cp.zeros(n_rows, dtype=np.int64), cols, values
        if n_rows <= np.iinfo(np.int64).max // max(self.n, 1):
            # One int64 key (row, column); the sort is stable, so equal keys keep product order.
            order = cp.argsort(local * np.int64(self.n) + cols.astype(np.int64), kind="stable")
        else:
            order = cp.lexsort(cp.stack([cp.arange(local.size, dtype=np.int64), cols.astype(np.int64), local]))
        local, cols, values = local[order], cols[order], values[order]
        heads = cp.ones(local.size, dtype=bool)
        heads[1:] = (local[1:] != local[:-1]) | (cols[1:] != cols[:-1])
        starts = cp.flatnonzero(heads)
        run_ptr = cp.concatenate([starts, cp.full(1, local.size, dtype=starts.dtype)]).astype(np.int64)
        folded = cp.empty(starts.size, self.dtype)
        if starts.size:
            self.kernel("spgemm_fold_runs<{V}, {I}, {S}>")(
                (blocks_for(starts.size, FLAT_BLOCK),), (FLAT_BLOCK,), (np.int64(starts.size), run_ptr, values, folded))
        per_row = cp.searchsorted(local[starts], cp.arange(n_rows + 1, dtype=np.int64))
        return cp.diff(per_row).astype(np.int64), cols[starts], folded

    def count_kept(self, indptr: Any, data: Any, kept: Any) -> None:
        m = kept.size
        self.kernel("spgemm_count_kept<{V}, {I}>")(
            (_grid(m, PLAN_BLOCK // 32),), (PLAN_BLOCK,), (np.int64(m), indptr, data, kept))

    def drop_zeros(self, indptr: Any, kept_ptr: Any, indices: Any, data: Any, out: tuple[Any, Any]) -> None:
        m = indptr.size - 1
        self.kernel("spgemm_drop_zeros<{V}, {I}>")(
            (_grid(m, PLAN_BLOCK // 32),), (PLAN_BLOCK,), (np.int64(m), indptr, kept_ptr, indices, data, out[0], out[1]))


def _pointers(lengths: Any, xp: Any) -> Any:
    """[0, cumulative lengths...] as int64."""
    out = xp.zeros(lengths.size + 1, dtype=np.int64)
    if lengths.size:
        out[1:] = primitives.inclusive_scan(lengths.astype(np.int64, copy=False))
    return out


def _bin_sizes(stats: np.ndarray) -> tuple[list[int], list[int]]:
    """(rows per bin, each bin's start in the lists) from a stats array read to the host."""
    sizes = [int(s) for s in stats[:ESC_BIN + 1]]
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
    bins, costs = xp.empty(m, np.int8), xp.empty(m, np.int64)
    stats, lists = xp.zeros(STATS, np.uint64), xp.empty(m, np.int64)
    device.plan(entry_bytes, bins, costs, stats)
    device.list_rows(0, m, bins, stats, stats[STAT_CURSOR:], lists)
    plan = to_host(stats)  # sync: the plan's totals
    budget = _budget(max_bytes, device.backend)
    blocks = [0, m] if int(plan[STAT_COST]) <= budget else reference.row_blocks(to_host(costs), budget).tolist()
    del costs
    counts = xp.zeros(m, np.int64)
    esc_results = {}
    for lo, hi in pairwise(blocks):
        sizes, starts = _bin_sizes(plan) if len(blocks) == 2 else _list_block(device, lo, hi, None, bins, None, lists)
        for bin_id in range(ESC_BIN):
            if sizes[bin_id]:
                device.rows(bin_id, False, lists[starts[bin_id]:starts[bin_id + 1]], NULL_POINTER, counts,
                            (NULL_POINTER, NULL_POINTER))
        if sizes[ESC_BIN]:
            esc_rows = lists[starts[ESC_BIN]:starts[ESC_BIN + 1]].copy()
            result = device.esc(esc_rows)
            counts[esc_rows] = result[0]
            esc_results[lo] = (esc_rows, *result) if len(blocks) == 2 else None
    indptr = _pointers(counts, xp)
    if len(blocks) == 2:
        sizes, starts = _list_block(device, 0, m, counts, bins, indptr, lists)
        total = int(sizes[-1])
    else:
        total = int(indptr[-1])
    indices, data = _allocate(device, total)
    for lo, hi in pairwise(blocks):
        if len(blocks) != 2:
            sizes, starts = _list_block(device, lo, hi, counts, bins, None, lists)
        for bin_id in range(ESC_BIN):
            if sizes[bin_id]:
                device.rows(bin_id, True, lists[starts[bin_id]:starts[bin_id + 1]], indptr, NULL_POINTER,
                            (indices, data))
        if sizes[ESC_BIN]:
            esc_rows, esc_counts, esc_cols, esc_values = esc_results.get(lo) or (
                lists[starts[ESC_BIN]:starts[ESC_BIN + 1]].copy(), *device.esc(lists[starts[ESC_BIN]:starts[ESC_BIN + 1]]))
            _place(indptr, esc_rows, esc_counts, esc_cols, esc_values, indices, data, xp)
    del esc_results, lists, bins
    return _drop_zeros(device, indptr, indices, data, counts, total) if semiring is None else (indptr, indices, data)


def _list_block(device: _Device, lo: int, hi: int, counts: Any, bins: Any, indptr: Any,
                lists: Any) -> tuple[list[int], list[int]]:
    """Rows lo:hi binned (by ``counts`` when given, else the plan's bins) and listed; one read.
    Returns (rows per bin, starts in ``lists``), the block's output total appended to the sizes
    when ``indptr`` is given."""
    xp = device.cupy
    stats = xp.zeros(STATS, np.uint64)
    device.count_bins(lo, hi, NULL_POINTER if counts is None else counts, bins,
                      NULL_POINTER if indptr is None else indptr, stats)
    device.list_rows(lo, hi, bins, stats, stats[STAT_CURSOR:], lists)
    host = to_host(stats)  # sync: the block's bins (and total)
    sizes, starts = _bin_sizes(host)
    return (sizes + [int(host[STAT_TOTAL])] if indptr is not None else sizes), starts


def _allocate(device: _Device, total: int) -> tuple[Any, Any]:
    """The output's indices and data, after checking that they fit (MemoryError otherwise)."""
    xp = device.cupy
    nbytes = total * (device.index_dtype.itemsize + device.dtype.itemsize)
    available = _validate.available_bytes(device.backend)
    if nbytes > available:
        raise MemoryError(f"spgemm: the product has {total:,} entries ({nbytes / 2**30:,.3g} GiB of indices and "
                          f"values), more than the {available / 2**30:,.3g} GiB of memory available")
    if POISON:
        return xp.full(total, -1, device.index_dtype), xp.full(total, np.nan, device.dtype)
    return xp.empty(total, device.index_dtype), xp.empty(total, device.dtype)


def _place(indptr: Any, rows: Any, counts: Any, cols: Any, values: Any, indices: Any, data: Any, xp: Any) -> None:
    """Write ESC rows' entries at their pointers."""
    if cols.size == 0:
        return
    esc_ptr = _pointers(counts, xp)
    owner = primitives.expand_pointers(esc_ptr, xp)
    slots = indptr[rows][owner] + xp.arange(cols.size, dtype=np.int64) - esc_ptr[owner]
    indices[slots] = cols
    data[slots] = values


def _drop_zeros(device: _Device, indptr: Any, indices: Any, data: Any, kept: Any, total: int) -> tuple[Any, Any, Any]:
    """The CSR without entries equal to zero (SciPy's rule for the arithmetic product); ``kept``
    is scratch of one int64 per row."""
    if total == 0:
        return indptr, indices, data
    device.count_kept(indptr, data, kept)
    kept_ptr = _pointers(kept, device.cupy)
    remaining = int(kept_ptr[-1])  # sync: the entries left
    if remaining == total:
        return indptr, indices, data
    out = device.cupy.empty(remaining, indices.dtype), device.cupy.empty(remaining, data.dtype)
    device.drop_zeros(indptr, kept_ptr, indices, data, out)
    return kept_ptr, out[0], out[1]

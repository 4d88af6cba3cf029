"""NumPy reference of the SpGEMM kernels (kernels/spgemm.cu): ``C<M> = A (+.x) B`` over CSR
arrays, following the GPU's phases so each can be checked on its own.

1. **Upper bounds** (:func:`upper_bounds`): row i of C has at most ``sum over k in A[i, :] of
   len(B[k, :])`` products, so at most that many entries.
2. **Row blocks** (:func:`row_costs`, :func:`row_blocks`): each row's working memory is
   estimated from its bound; consecutive rows are grouped so that a block's estimate stays
   within the budget (a row over the budget gets a block of its own). Blocks are computed one
   after another and concatenated: the result does not depend on the blocking.
3. **Binning** (:func:`bin_rows`): rows are binned by their bound (the symbolic phase) or
   their exact length (the numeric phase) against the hash tables' capacities (one row as a
   hash kernel computes it: :func:`hash_row`); rows past the largest table are wide rows, whose
   columns the kernel marks in a bitmap of the output's columns (:func:`wide_row`).
4. **Symbolic** (:func:`symbolic_counts`): the distinct columns of each row's products (the mask
   applied), counted; an exclusive scan of the counts gives the block's row pointers.
5. **Numeric** (:func:`numeric_fill`): each row's columns sorted ascending, and each entry the
   fold of its products *in product order* (A's row in storage order, then each B row in
   storage order) from the monoid's identity: the order the kernels add in, so the result is
   deterministic. With ``drop_zeros`` entries whose value is exactly zero are removed
   afterwards (SciPy's ``csr_matmat`` rule for the arithmetic product).

A semiring is given as plain values (``add`` a NumPy ufunc with ``reduceat``, ``mul`` a binary
function on arrays, ``identity`` a scalar), as in :mod:`sparsegpu.reference.semiring`. A mask is
``(indptr, indices)`` of a CSR pattern with sorted rows; ``complement`` keeps the entries
outside it instead.

>>> import numpy as np
>>> a = (np.array([0, 2, 3]), np.array([0, 1, 1]), np.array([1.0, 2.0, 3.0]))
>>> b = (np.array([0, 1, 2]), np.array([1, 0]), np.array([4.0, 5.0]))
>>> indptr, indices, data = csr_spgemm(a, b, np.add, np.multiply, 0.0)
>>> indptr.tolist(), indices.tolist(), data.tolist()
([0, 2, 3], [0, 1, 0], [10.0, 4.0, 15.0])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import pairwise
from typing import Any

import numpy as np

Csr = tuple[np.ndarray, np.ndarray, np.ndarray]
Pattern = tuple[np.ndarray, np.ndarray]

#: Bytes per row of a block beyond its entries: counts, pointers, bin lists.
ROW_OVERHEAD_BYTES = 48


def upper_bounds(a_indptr: Any, a_indices: Any, b_indptr: Any, xp: Any = np) -> Any:
    """The products of each row of A @ B (int64): the sum of B's row lengths over A's row.

    >>> upper_bounds(np.array([0, 2, 2]), np.array([0, 1]), np.array([0, 3, 4])).tolist()
    [4, 0]
    """
    b_lengths = (b_indptr[1:] - b_indptr[:-1]).astype(np.int64)
    per_entry = b_lengths[a_indices]
    prefix = xp.zeros(per_entry.size + 1, dtype=np.int64)
    prefix[1:] = xp.cumsum(per_entry)
    return prefix[a_indptr[1:]] - prefix[a_indptr[:-1]]


def output_bounds(bounds: Any, n_cols: int, mask_lengths: Any = None, complement: bool = False, xp: Any = np) -> Any:
    """Each row's entry bound: its products, at most ``n_cols``, at most its mask row's length
    (a mask without complement allows only its pattern)."""
    out = xp.minimum(bounds, np.int64(n_cols))
    if mask_lengths is not None and not complement:
        out = xp.minimum(out, mask_lengths.astype(np.int64))
    return out


def row_costs(entries: Any, wide: Any, entry_bytes: int, wide_bytes: int = 0) -> Any:
    """Estimated working bytes of each row (int64): its output entries (kept twice: the block's
    arrays and the zero-dropping copy), ``wide_bytes`` of scratch when it is a wide row (flagged
    by ``wide``: its bitmap when that lives in global memory), and a fixed per-row part.

    >>> row_costs(np.array([10, 3000]), np.array([False, True]), 12, 1000).tolist()
    [288, 73048]
    """
    return 2 * entries * entry_bytes + wide * np.int64(wide_bytes) + ROW_OVERHEAD_BYTES


def row_blocks(costs: np.ndarray, budget: int) -> np.ndarray:
    """Boundaries ``[0, r1, ..., m]`` of consecutive row blocks whose summed cost is at most
    ``budget``; a row costing more than the budget gets a block of its own.

    >>> row_blocks(np.array([5, 5, 5, 20, 1]), 10).tolist()
    [0, 2, 3, 4, 5]
    """
    m = costs.size
    prefix = np.cumsum(costs, dtype=np.int64)
    bounds = [0]
    while bounds[-1] < m:
        start = bounds[-1]
        base = prefix[start - 1] if start else 0
        end = int(np.searchsorted(prefix, base + budget, side="right"))
        bounds.append(max(end, start + 1))
    return np.asarray(bounds, dtype=np.int64)


def bin_rows(lengths: Any, capacities: Sequence[int], xp: Any = np) -> Any:
    """Each row's bin: the first capacity holding its length (``len(capacities)`` past all, the
    wide rows). Rows of length 0 get bin -1: nothing to compute.

    >>> bin_rows(np.array([0, 3, 32, 33, 5000]), (32, 2048)).tolist()
    [-1, 0, 0, 1, 2]
    """
    bins = xp.searchsorted(xp.asarray(capacities, dtype=np.int64), lengths.astype(np.int64), side="left")
    return xp.where(lengths > 0, bins, -1)


# --------------------------------------------------------------------------- products


def expand_products(rows: np.ndarray, a: Csr, b: Csr, mul: Callable) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every product of the listed rows, in product order: (position of its row in ``rows``,
    column, ``mul(A[i, k], B[k, j])``)."""
    a_indptr, a_indices, a_data = a
    b_indptr, b_indices, b_data = b
    starts = a_indptr[rows].astype(np.int64)
    lengths = (a_indptr[rows + 1] - a_indptr[rows]).astype(np.int64)
    entry_row = np.repeat(np.arange(rows.size, dtype=np.int64), lengths)
    entries = np.repeat(starts - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths) + np.arange(lengths.sum())
    k = a_indices[entries]
    b_starts = b_indptr[k].astype(np.int64)
    b_lengths = (b_indptr[k + 1] - b_indptr[k]).astype(np.int64)
    product_entry = np.repeat(np.arange(entries.size, dtype=np.int64), b_lengths)
    offsets = np.concatenate([[0], np.cumsum(b_lengths)[:-1]]).astype(np.int64)
    q = b_starts[product_entry] + np.arange(product_entry.size, dtype=np.int64) - offsets[product_entry]
    values = np.asarray(mul(a_data[entries[product_entry]], b_data[q]), dtype=a_data.dtype)
    values = np.broadcast_to(values, q.shape).astype(a_data.dtype, copy=False)
    return entry_row[product_entry], b_indices[q].astype(np.int64), values


def in_mask(rows: np.ndarray, cols: np.ndarray, mask: Pattern) -> np.ndarray:
    """Whether each (row, col) is in the mask's pattern (its rows sorted): a search of the
    pattern's (row, column) keys, which ascend."""
    m_indptr, m_indices = mask
    width = int(max(m_indices.max(initial=0), cols.max(initial=0))) + 1
    mask_rows = np.repeat(np.arange(m_indptr.size - 1, dtype=np.int64), np.diff(m_indptr))
    keys = mask_rows * width + m_indices.astype(np.int64)
    queries = rows.astype(np.int64) * width + cols.astype(np.int64)
    position = np.minimum(np.searchsorted(keys, queries), max(keys.size - 1, 0))
    return (keys.size > 0) & (keys[position] == queries) if keys.size else np.zeros(rows.size, dtype=bool)


def masked_products(rows: np.ndarray, a: Csr, b: Csr, mul: Callable, mask: Pattern | None,
                    complement: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`expand_products` with the products the mask excludes removed."""
    local, cols, values = expand_products(rows, a, b, mul)
    if mask is not None:
        keep = in_mask(rows[local], cols, mask) != complement
        local, cols, values = local[keep], cols[keep], values[keep]
    return local, cols, values


def fold_runs(local: np.ndarray, cols: np.ndarray, values: np.ndarray, n_rows: int, add: Any,
              identity: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(entries per row, columns, values): products sorted by (row, column), ties kept in
    product order (a stable sort), each run folded with ``add`` in that order from the identity:
    ``((identity + p0) + p1) + ...``, one product of every run at a time (``add.reduceat``
    would sum long runs pairwise, which the kernels do not).

    >>> x = np.array([1.0, 1e16, -1e16] + [1.0] * 8)
    >>> fold_runs(np.zeros(11, int), np.zeros(11, int), x, 1, np.add, 0.0)[2].tolist()
    [8.0]
    """
    order = np.lexsort((np.arange(local.size), cols, local))
    local, cols, values = local[order], cols[order], values[order]
    heads = np.ones(local.size, dtype=bool)
    heads[1:] = (local[1:] != local[:-1]) | (cols[1:] != cols[:-1])
    starts = np.flatnonzero(heads)
    lengths = np.diff(np.append(starts, local.size))
    folded = np.full(starts.size, identity, dtype=values.dtype)
    longest_first = np.argsort(-lengths, kind="stable")
    negated = -lengths[longest_first]  # ascending
    for j in range(int(-negated[0]) if negated.size else 0):
        runs = longest_first[:int(np.searchsorted(negated, -j, side="left"))]  # the runs longer than j
        folded[runs] = add(folded[runs], values[starts[runs] + j])
    counts = np.bincount(local[starts], minlength=n_rows).astype(np.int64)
    return counts, cols[starts], folded


def symbolic_counts(rows: np.ndarray, a: Csr, b: Csr, mask: Pattern | None, complement: bool) -> np.ndarray:
    """The symbolic phase: the number of distinct columns among each listed row's products."""
    pattern_only = (b[0], b[1], np.zeros(b[1].size))
    local, cols, _ = masked_products(rows, a, pattern_only, np.multiply, mask, complement)
    order = np.lexsort((cols, local))
    local, cols = local[order], cols[order]
    heads = np.ones(local.size, dtype=bool)
    heads[1:] = (local[1:] != local[:-1]) | (cols[1:] != cols[:-1])
    return np.bincount(local[heads], minlength=rows.size).astype(np.int64)


def numeric_fill(rows: np.ndarray, offsets: np.ndarray, a: Csr, b: Csr, add: Any, mul: Callable, identity: Any,
                 mask: Pattern | None, complement: bool, out_indices: np.ndarray, out_data: np.ndarray) -> np.ndarray:
    """The numeric phase: write each listed row's sorted columns and folded values at its offset
    in ``out_indices`` / ``out_data``. Returns the entries written per row."""
    local, cols, values = masked_products(rows, a, b, mul, mask, complement)
    counts, cols, folded = fold_runs(local, cols, values, rows.size, add, identity)
    slots = np.repeat(offsets - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts) + np.arange(cols.size)
    out_indices[slots] = cols
    out_data[slots] = folded
    return counts


# --------------------------------------------------------------------------- one hash row


def chunk_products(b_lengths: np.ndarray, threads: int) -> tuple[np.ndarray, np.ndarray]:
    """The kernels' walk over a row's products: A's row in chunks of ``threads`` entries; in a
    chunk, product t belongs to the first entry whose inclusive scan of B row lengths exceeds t
    (a binary search), at offset t minus the scan before it. Returns (entry, offset in its B row)
    per product, in visiting order.

    >>> [a.tolist() for a in chunk_products(np.array([2, 0, 1, 3]), 2)]
    [[0, 0, 2, 3, 3, 3], [0, 1, 0, 0, 1, 2]]
    """
    entries, offsets = [], []
    for base in range(0, b_lengths.size, threads):
        lengths = np.zeros(threads, dtype=np.int64)
        chunk = b_lengths[base:base + threads]
        lengths[:chunk.size] = chunk
        ends = np.cumsum(lengths)
        for t in range(int(ends[-1])):
            lo, hi = 0, threads - 1
            while lo < hi:
                mid = (lo + hi) // 2
                lo, hi = (lo, mid) if ends[mid] > t else (mid + 1, hi)
            entries.append(base + lo)
            offsets.append(t - (int(ends[lo - 1]) if lo > 0 else 0))
    return np.asarray(entries, dtype=np.int64), np.asarray(offsets, dtype=np.int64)


def round_spans(lanes: dict[int, dict[int, list[int]]], touch: int) -> int:
    """A round's spans as ``fold_in_order`` counts them: leaders (one per slot and warp holding
    it) that find the slot's mark byte (``slot % touch``) already marked, i.e. leaders minus the
    distinct bytes marked, whatever order the marks land in.

    >>> round_spans({3: {0: [0], 1: [40]}, 7: {1: [33]}}, 4)
    2
    """
    leaders = sum(len(held) for held in lanes.values())
    return leaders - len({s % touch for s in lanes})


def takes_turns(lanes: dict[int, dict[int, list[int]]], threads: int, touch: int, turns: int) -> bool:
    """Whether ``fold_in_order`` folds a round (``lanes``: slot -> warp -> lanes) in warp turns:
    several warps, and more than ``turns`` spans per warp (:func:`round_spans`).

    >>> takes_turns({3: {0: [0], 1: [40], 2: [64], 3: [96]}}, 128, 2048, 0)
    True
    """
    return threads > 32 and round_spans(lanes, touch) > turns * (threads // 32)


def fold_order(slots: np.ndarray, threads: int, touch: int, exact: bool, turns: int = 1) -> list[int]:
    """The order in which a group of ``threads`` folds products whose slots (sorted positions,
    -1: not folded) are ``slots`` in visiting order, as the kernels' ``fold_in_order`` does.
    Rounds of ``threads`` products; in each warp the lanes of one slot are peers, led by the
    lowest. One warp: each leader folds its peers in lane order. Several: each leader marks its
    warp in byte ``slot % touch``. A round of more than ``turns`` spans per warp
    (:func:`round_spans`: a slot's lanes spread over many warps) folds in warp turns: warp by
    warp, each leader its peers. Otherwise the leader of the lowest warp holding the slot
    (``exact``, slots below ``touch``: the lowest marked; else the lowest whose lanes hold the
    slot) folds its peers, then the slot's lanes of every later marked warp. Slots are
    independent, so the returned list of product indices is one valid serialisation of the
    group's folds; each slot's products come in product order either way.

    >>> fold_order(np.array([5, 7, 5] * 22), 64, 4, False)[:4]
    [0, 2, 3, 5]
    >>> fold_order(np.array([5, 7, 5] * 22), 64, 4, False, turns=0)[:4]
    [0, 2, 3, 5]
    """
    order: list[int] = []
    listed = [int(s) for s in slots]
    for base in range(0, len(listed), threads):
        lanes: dict[int, dict[int, list[int]]] = {}  # slot -> warp -> its lanes' products, in lane order
        for t in range(base, min(base + threads, len(listed))):
            if listed[t] >= 0:
                lanes.setdefault(listed[t], {}).setdefault((t - base) // 32, []).append(t)
        if takes_turns(lanes, threads, touch, turns):
            order.extend(_warp_turns(lanes, threads))
        else:
            order.extend(_lowest_warp_folds(lanes, threads, touch, exact))
    return order


def _warp_turns(lanes: dict[int, dict[int, list[int]]], threads: int) -> list[int]:
    """One round in warp turns: warp 0's leaders fold their peers, then warp 1's, and so on."""
    return [t for w in range(threads // 32) for held in lanes.values() for t in held.get(w, [])]


def _lowest_warp_folds(lanes: dict[int, dict[int, list[int]]], threads: int, touch: int, exact: bool) -> list[int]:
    """One round folded by each slot's lowest warp (:func:`fold_order`)."""
    order: list[int] = []
    marks: dict[int, int] = {}
    for s, held in lanes.items():
        for w in held:
            marks[s % touch] = marks.get(s % touch, 0) | 1 << w
    for s, held in lanes.items():
        for w in held:  # the leader of each warp holding s
            marked = marks[s % touch] if threads > 32 else 1 << w
            below = [v for v in range(w) if marked >> v & 1]
            if below if exact else any(v in held for v in below):
                continue
            for v in range(w, threads // 32):
                if marked >> v & 1:
                    order.extend(held.get(v, []))
    return order


def _fold(slots: np.ndarray, products: np.ndarray, values: np.ndarray, add: Any, threads: int, touch: int,
          exact: bool, turns: int = 1) -> None:
    """values[slot] folded with each product in :func:`fold_order`, in place."""
    for t in fold_order(slots, threads, touch, exact, turns):
        s = int(slots[t])
        values[s] = add(np.asarray([values[s]]), np.asarray([products[t]], dtype=values.dtype))[0]


def _walked_products(row: int, a: Csr, b: Csr, mask: Pattern | None, complement: bool,
                     threads: int) -> tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A row's products in the order a group of ``threads`` walks them (:func:`chunk_products`):
    (A's first entry of the row, each product's A entry within the row, its position in B, its
    column, whether the mask keeps it)."""
    lo, hi = int(a[0][row]), int(a[0][row + 1])
    k = a[1][lo:hi]
    entries, offsets = chunk_products((b[0][k + 1] - b[0][k]).astype(np.int64), threads)
    q = b[0][k[entries]].astype(np.int64) + offsets if entries.size else entries
    cols = b[1][q].astype(np.int64)
    keep = np.ones(cols.size, dtype=bool) if mask is None else in_mask(np.full(cols.size, row), cols, mask) != complement
    return lo, entries, q, cols, keep


def hash_row(row: int, a: Csr, b: Csr, add: Any, mul: Callable, identity: Any, mask: Pattern | None,
             complement: bool, threads: int, table: int, turns: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """One row as a hash kernel group computes it: products walked by :func:`chunk_products`,
    columns inserted in a ``table``-slot linear-probing table (the kernels' hash), keys sorted,
    each entry folded from the identity in :func:`fold_order` (a mark byte per entry; ``turns``
    its rule). Returns (columns, values)."""
    a_data, b_data = a[2], b[2]
    lo, entries, q, cols, keep = _walked_products(row, a, b, mask, complement, threads)
    slots = np.full(table, -1, dtype=np.int64)
    for col in cols[keep]:
        slot = (int(col) * 2654435761) & (table - 1)
        while slots[slot] not in (-1, col):
            slot = (slot + 1) & (table - 1)
        slots[slot] = col
    keys = np.sort(slots[slots >= 0])
    values = np.full(keys.size, identity, dtype=a_data.dtype)
    position = {int(key): s for s, key in enumerate(keys)}
    products = np.asarray(mul(a_data[lo + entries], b_data[q]), dtype=a_data.dtype) if q.size else q
    slots = np.array([position[int(col)] if allowed else -1 for col, allowed in zip(cols, keep)], dtype=np.int64)
    _fold(slots, np.broadcast_to(products, cols.shape), values, add, threads, table // 2, True, turns)
    return keys, values


def warp_row(row: int, a: Csr, b: Csr, add: Any, mul: Callable, identity: Any, mask: Pattern | None,
             complement: bool) -> tuple[np.ndarray, np.ndarray] | None:
    """One row of at most 32 A entries and 32 products as the warp kernel computes it without a
    table: lane t holds product t; the lanes of one column (the mask applied) are peers, the
    lowest of them (the leader) folds their products in lane order from the identity, and its
    sorted position is the number of leaders of smaller columns. Returns (columns, values), or
    None for a larger row (the kernel then uses its hash table, :func:`hash_row`).

    >>> a = (np.array([0, 2]), np.array([0, 1]), np.array([1.0, 2.0]))
    >>> b = (np.array([0, 2, 3]), np.array([7, 3, 7]), np.array([1.0, 1.0, 1.0]))
    >>> [x.tolist() for x in warp_row(0, a, b, np.add, np.multiply, 0.0, None, False)]
    [[3, 7], [1.0, 3.0]]
    """
    a_indptr, a_indices, a_data = a
    b_indptr, b_indices, b_data = b
    lo, hi = int(a_indptr[row]), int(a_indptr[row + 1])
    k = a_indices[lo:hi]
    lengths = (b_indptr[k + 1] - b_indptr[k]).astype(np.int64)
    if hi - lo > 32 or lengths.sum() > 32:
        return None
    entries, offsets = chunk_products(lengths, 32)
    q = b_indptr[k[entries]].astype(np.int64) + offsets if entries.size else entries
    cols = b_indices[q].astype(np.int64)
    valid = np.ones(cols.size, dtype=bool) if mask is None else in_mask(np.full(cols.size, row), cols, mask) != complement
    keys = np.where(valid, cols, -1)
    products = np.broadcast_to(np.asarray(mul(a_data[lo + entries], b_data[q]), dtype=a_data.dtype), cols.shape)
    leaders = [t for t in range(cols.size) if valid[t] and not np.any(keys[:t] == keys[t])]
    columns = np.zeros(len(leaders), dtype=np.int64)
    values = np.full(len(leaders), identity, dtype=a_data.dtype)
    for t in leaders:
        rank = sum(int(cols[u] < cols[t]) for u in leaders)
        columns[rank] = cols[t]
        for peer in np.flatnonzero(keys == keys[t]):  # lane order
            values[rank] = add(np.asarray([values[rank]]), np.asarray([products[peer]]))[0]
    return columns, values


def wide_row(row: int, a: Csr, b: Csr, add: Any, mul: Callable, identity: Any, mask: Pattern | None,
             complement: bool, n_cols: int, threads: int, touch: int = 2048,
             turns: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """One row as the wide kernel computes it: products walked by :func:`chunk_products`, their
    columns marked in a bitmap of ``n_cols`` bits (32-bit words), each word's rank prefix from a
    scan of the words' set bits, the columns read off the bitmap in order, and each value folded
    from the identity at rank(column) = prefix[word] + the set bits below it in its word, in
    :func:`fold_order` (ranks share mark bytes modulo ``touch``; ``turns`` its rule). Returns
    (columns, values).

    >>> a = (np.array([0, 2]), np.array([0, 1]), np.array([1.0, 2.0]))
    >>> b = (np.array([0, 2, 3]), np.array([40, 3, 40]), np.array([1.0, 1.0, 1.0]))
    >>> [x.tolist() for x in wide_row(0, a, b, np.add, np.multiply, 0.0, None, False, 64, 32)]
    [[3, 40], [1.0, 3.0]]
    """
    a_data, b_data = a[2], b[2]
    lo, entries, q, cols, keep = _walked_products(row, a, b, mask, complement, threads)
    words = np.zeros(-(-n_cols // 32), dtype=np.uint32)
    np.bitwise_or.at(words, cols[keep] >> 5, (np.uint32(1) << (cols[keep] & 31).astype(np.uint32)))
    set_bits = np.unpackbits(words.view(np.uint8), bitorder="little").reshape(-1, 32)
    prefix = np.concatenate([[0], np.cumsum(set_bits.sum(axis=1))[:-1]]).astype(np.int64)
    columns = np.flatnonzero(set_bits.ravel())
    below = np.cumsum(set_bits, axis=1) - set_bits  # set bits below each bit of its word
    values = np.full(columns.size, identity, dtype=a_data.dtype)
    products = np.asarray(mul(a_data[lo + entries], b_data[q]), dtype=a_data.dtype) if q.size else q
    slots = np.where(keep, prefix[cols >> 5] + below[cols >> 5, cols & 31], -1) if cols.size else cols
    _fold(slots, np.broadcast_to(products, cols.shape), values, add, threads, touch, False, turns)
    return columns, values


# --------------------------------------------------------------------------- driver


def drop_zeros(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray) -> Csr:
    """The CSR without its entries whose value is exactly zero."""
    keep = data != 0
    kept = np.concatenate([[0], np.cumsum(keep, dtype=np.int64)])
    return kept[indptr], indices[keep], data[keep]


def csr_spgemm(a: Csr, b: Csr, add: Any, mul: Callable, identity: Any, *, n_cols: int | None = None,
               mask: Pattern | None = None, complement: bool = False, drop_zero_values: bool = False,
               capacities: Sequence[int] = (32, 256, 1024, 2048), budget: int = 1 << 62,
               entry_bytes: int = 12, wide_bytes: int = 0) -> Csr:
    """``C<M> = A (+.x) B`` in the kernels' phases (module docstring). ``a`` and ``b`` are
    (indptr, indices, data); ``n_cols`` B's column count (default: its largest index + 1).
    Returns C's (indptr, indices, data) with int64 pointers and indices, rows sorted."""
    a_indptr, b_indptr = a[0], b[0]
    m = a_indptr.size - 1
    n_cols = int(b[1].max()) + 1 if n_cols is None and b[1].size else (n_cols or 0)
    products = upper_bounds(a_indptr, a[1], b_indptr)
    mask_lengths = None if mask is None else np.diff(mask[0])
    bounds = output_bounds(products, n_cols, mask_lengths, complement)
    wide = bin_rows(bounds, capacities) == len(capacities)
    blocks = row_blocks(row_costs(bounds, wide, entry_bytes, wide_bytes), budget)
    pieces = [_block(int(lo), int(hi), a, b, add, mul, identity, bounds, capacities, mask, complement)
              for lo, hi in pairwise(blocks)]
    indptr, indices, data = concatenate_blocks(pieces, m, a[2].dtype)
    return drop_zeros(indptr, indices, data) if drop_zero_values else (indptr, indices, data)


def _block(lo: int, hi: int, a: Csr, b: Csr, add: Any, mul: Callable, identity: Any, bounds: np.ndarray,
           capacities: Sequence[int], mask: Pattern | None, complement: bool) -> Csr:
    """Rows lo:hi: symbolic counts per bin, their scan, the numeric fill per bin."""
    counts = np.zeros(hi - lo, dtype=np.int64)
    bins = bin_rows(bounds[lo:hi], capacities)
    for bin_id in range(len(capacities) + 1):
        local = np.flatnonzero(bins == bin_id)
        if local.size:
            counts[local] = symbolic_counts(local + lo, a, b, mask, complement)
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    indices = np.full(int(indptr[-1]), -1, dtype=np.int64)
    data = np.full(int(indptr[-1]), np.nan, dtype=a[2].dtype)
    numeric_bins = bin_rows(counts, capacities)
    for bin_id in range(len(capacities) + 1):
        local = np.flatnonzero(numeric_bins == bin_id)
        if local.size:
            written = numeric_fill(local + lo, indptr[local], a, b, add, mul, identity, mask, complement, indices, data)
            assert np.array_equal(written, counts[local]), "numeric phase disagrees with the symbolic count"
    return indptr, indices, data


def concatenate_blocks(pieces: list[Csr], m: int, dtype: np.dtype) -> Csr:
    """One CSR of ``m`` rows from the row blocks' (indptr, indices, data), in order."""
    if not pieces:
        return np.zeros(m + 1, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=dtype)
    totals = np.cumsum([0] + [int(p[0][-1]) for p in pieces])
    indptr = np.concatenate([[0]] + [p[0][1:] + t for p, t in zip(pieces, totals)]).astype(np.int64)
    return indptr, np.concatenate([p[1] for p in pieces]), np.concatenate([p[2] for p in pieces])

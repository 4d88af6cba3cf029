"""Reference SpMV for the padded and permuted layouts (ELL, HYB, JDS, SELL-C-sigma):
y = alpha * A x + beta * y, written into y, over exactly the arrays the kernels read.

As in the kernels, padding slots (column -1) are skipped and, when ``beta`` is zero, ``y`` is
not read (it may hold garbage). Sums accumulate in float64 (complex128) through
:func:`sparsegpu.reference.spmv.segment_sum`, so CPU and GPU agree to rounding, not bitwise.
"""

from __future__ import annotations

import numpy as np

from sparsegpu.reference.spmv import combine, scaled, segment_sum


def _padded_sums(indices, data, rows_of_slots, x, n_rows):
    """Row sums of ``data * x[indices]`` over the non-padding slots, ``rows_of_slots`` giving
    each slot's row."""
    stored = indices >= 0
    return segment_sum(rows_of_slots[stored], data[stored] * x[indices[stored]], n_rows)


def ell_spmv(indices, data, width, x, y, alpha=1, beta=0):
    """ELL reference of kernels/spmv_ell.cu: slot k of row r at ``k * n_rows + r``."""
    n_rows = y.size
    rows = np.tile(np.arange(n_rows, dtype=np.int64), int(width))
    return combine(y, _padded_sums(indices, data, rows, x, n_rows), alpha, beta)


def hyb_spmv(ell_indices, ell_data, width, coo_row, coo_col, coo_data, x, y, alpha=1, beta=0):
    """HYB reference of kernels/spmv_ell.cu then kernels/spmv_coo.cu: the ELL part writes
    ``alpha * A_ell x + beta * y``, the COO part adds ``alpha * A_coo x``."""
    ell_spmv(ell_indices, ell_data, width, x, y, alpha, beta)
    y += scaled(alpha, segment_sum(coo_row, coo_data * x[coo_col], y.size), y.dtype.type)
    return y


def jds_spmv(jd_ptr, indices, data, perm, x, y, alpha=1, beta=0):
    """JDS reference of kernels/spmv_jds.cu: entry i of jagged diagonal d belongs to row ``perm[i]``."""
    diagonal = np.repeat(np.arange(jd_ptr.size - 1, dtype=np.int64), np.diff(jd_ptr))
    rank = np.arange(indices.size, dtype=np.int64) - jd_ptr[diagonal]
    return combine(y, segment_sum(perm[rank], data * x[indices], y.size), alpha, beta)


def sell_spmv(slice_ptr, indices, data, perm, split_slice, split_part, split, hot_cols, C, x, y, alpha=1, beta=0):
    """SELL-C-sigma reference of kernels/spmv_sell.cu: slot k of lane l of slice s at
    ``slice_ptr[s] + k * C + l`` holds an entry of row ``perm[s * C + l]``; column ``-2 - j``
    stands for ``hot_cols[j]`` (staged in shared memory by the kernel). A slice wider than
    ``split`` slots (``split`` > 0) is summed by its parts only: part ``split_part[u]`` of slice
    ``split_slice[u]`` (parts of a slice listed consecutively, from 0) covers its slots
    ``[p * split, p * split + split)``; each lane's part sums are then added in part order, as
    the kernel's last ticket holder does. A slot no part covers raises ValueError."""
    n_rows, n_slices = y.size, slice_ptr.size - 1
    slots = np.arange(indices.size, dtype=np.int64)
    slice_of_slot = np.repeat(np.arange(n_slices, dtype=np.int64), np.diff(slice_ptr))
    within = slots - slice_ptr[slice_of_slot]
    rank = slice_of_slot * C + within % C
    stored = indices != -1
    cols = indices.astype(np.int64)
    hot = cols < -1
    cols[hot] = hot_cols[-2 - cols[hot]]
    products = np.zeros(indices.size, dtype=np.result_type(data.dtype, x.dtype, np.float64))
    products[stored] = data[stored] * x[cols[stored]]
    # Padding rows of the last slice (rank >= n_rows) hold only padding slots.
    rows = perm[np.minimum(rank, max(n_rows - 1, 0))].astype(np.int64) if n_rows else rank
    widths = np.diff(slice_ptr) // max(C, 1)
    in_parts = (widths > split)[slice_of_slot] if split > 0 else np.zeros(indices.size, dtype=bool)
    whole = stored & ~in_parts
    sums = segment_sum(rows[whole], products[whole], n_rows)
    if in_parts.any():
        first_unit = np.full(n_slices, -1, dtype=np.int64)
        starts = np.asarray(split_part) == 0
        first_unit[np.asarray(split_slice)[starts]] = np.flatnonzero(starts)
        part = within // C // split
        unit = first_unit[slice_of_slot] + part
        covered = in_parts & (first_unit[slice_of_slot] >= 0)
        covered[covered] &= unit[covered] < split_part.size
        listed = unit[covered]
        covered[covered] &= (split_slice[listed] == slice_of_slot[covered]) & (split_part[listed] == part[covered])
        if not np.array_equal(covered, in_parts):
            raise ValueError("the part list does not cover every slot of the split slices")
        # Each lane's part sums (one per unit and lane), then added per row in unit (= part) order.
        keys = unit[in_parts] * C + within[in_parts] % C
        partial_sums = segment_sum(keys, products[in_parts], split_part.size * C)
        lane_rank = np.asarray(split_slice, dtype=np.int64).repeat(C) * C + np.tile(np.arange(C), split_part.size)
        real = lane_rank < n_rows
        sums = sums + segment_sum(perm[lane_rank[real]].astype(np.int64), partial_sums[real], n_rows)
    return combine(y, sums, alpha, beta)


#: Layout codes of kernels/spmv_ell.cu ``csr_to_slots``.
LAYOUT_ELL, LAYOUT_SELL, LAYOUT_JDS = 0, 1, 2


def csr_to_slots(indptr, indices, data, perm, offsets, C, width, n_rows, n_ranks, layout, out_indices, out_data):
    """Reference of kernels/spmv_ell.cu ``csr_to_slots``: copy the CSR's entries into the ELL
    (``rank + k * n_rows``, entries past ``width`` left out), SELL (``offsets[rank // C] +
    k * C + rank % C``) or JDS (``offsets[k] + rank``) slots of their rows' ranks, every other
    slot padding (column -1, value 0). ``perm[rank]`` is the row at ``rank`` (unused for ELL);
    ``n_ranks`` is unused here (the kernel's thread count)."""
    out_indices[...] = -1
    out_data[...] = 0
    rows = np.repeat(np.arange(n_rows, dtype=np.int64), np.diff(indptr))
    k = np.arange(indices.size, dtype=np.int64) - indptr[rows]
    if layout == LAYOUT_ELL:
        keep = k < width
        rank = rows[keep]
        destination = rank + k[keep] * n_rows
    else:
        keep = slice(None)
        ranks = np.empty(n_rows, dtype=np.int64)
        ranks[perm] = np.arange(n_rows)
        rank = ranks[rows]
        if layout == LAYOUT_SELL:
            destination = offsets[rank // C] + k * C + rank % C
        else:
            destination = offsets[k] + rank
    out_indices[destination] = indices[keep]
    out_data[destination] = data[keep]


#: kernels/spmv_jds.cu: rows per block of the ranking kernels (and per radix tile).
RANK_BLOCK = 256


def rank_small_windows(indptr, n_rows, window, perm):
    """Reference of kernels/spmv_jds.cu ``rank_small_windows``: ``perm[rank]`` = the row at ``rank``
    when rows are sorted by length, longest first, stably, inside consecutive windows of
    ``window`` rows (at most :data:`RANK_BLOCK`)."""
    rows = np.arange(n_rows, dtype=np.int64)
    lengths = np.diff(indptr).astype(np.int64)
    perm[:] = np.lexsort((rows, -lengths, rows // window))


def _radix_counters(indptr, perm_in, first_pass, n_rows, window, tiles_per_window, longest, shift, bins):
    """(row at each position, the (window, digit, tile) counter each position counts in)."""
    position = np.arange(n_rows, dtype=np.int64)
    rows = position if first_pass else perm_in.astype(np.int64)
    digit = ((longest - np.diff(indptr).astype(np.int64)[rows]) >> shift) & (bins - 1)
    tile = (position % window) // RANK_BLOCK
    return rows, ((position // window) * bins + digit) * tiles_per_window + tile


def radix_pass(indptr, perm_in, first_pass, n_rows, window, tiles_per_window, longest, shift, bins, counts,
               perm_out, scatter):
    """Reference of kernels/spmv_jds.cu ``radix_pass<I, scatter>``: one LSD pass of the stable sort by
    ``longest - length`` inside windows. Counting (``scatter`` False): ``counts[(w * bins +
    digit) * tiles_per_window + tile]`` = rows of that digit in that tile of RANK_BLOCK positions
    of window w. Scattering: ``counts`` holds the exclusive scan of those counts; each row goes to
    its counter's first position plus the rows before it with the same counter."""
    rows, counter = _radix_counters(indptr, perm_in, first_pass, n_rows, window, tiles_per_window, longest, shift,
                                    bins)
    if not scatter:
        counts[:] = np.bincount(counter, minlength=counts.size)
        return
    order = np.argsort(counter, kind="stable")
    grouped = counter[order]
    before = np.arange(n_rows, dtype=np.int64) - np.searchsorted(grouped, grouped, side="left")
    perm_out[counts[grouped] + before] = rows[order]


def jds_diagonal_lengths(indptr, perm, n_rows, rows_longer):
    """Reference of kernels/spmv_jds.cu ``jds_diagonal_lengths``: ``rows_longer[d]`` = rows longer
    than d for d below the longest length (``rows_longer.size - 1``), then a 0."""
    ranked = np.diff(indptr).astype(np.int64)[perm[:n_rows]]
    longest = rows_longer.size - 1
    rows_longer[:longest] = np.searchsorted(-ranked, -np.arange(longest, dtype=np.int64), side="left")
    rows_longer[longest] = 0


def sell_stage_hot(x, hot_cols, n_hot, hot_values):
    """kernels/spmv_sell.cu sell_stage_hot: ``hot_values[j] = x[hot_cols[j]]`` for j < n_hot."""
    hot_values[:n_hot] = x[hot_cols[:n_hot]]


#: kernels/spmv_sell.cu SELL_BLOCK: the rows sell_window_slots ranks together.
SELL_WINDOW = 256


def sell_window_slots(indptr, n_rows, C, out):
    """Reference of kernels/spmv_sell.cu ``sell_window_slots``: ``out[0]`` += the slots of the rows
    sorted by length (longest first) inside windows of SELL_WINDOW rows and cut into slices of
    ``C`` (each slice as wide as its first row), ``out[1]`` = max(out[1], the longest row)."""
    lengths = np.diff(indptr[:n_rows + 1]).astype(np.int64)
    windows = -(-n_rows // SELL_WINDOW)
    padded = np.full(windows * SELL_WINDOW, -1, dtype=np.int64)
    padded[:n_rows] = lengths
    firsts = -np.sort(-padded.reshape(windows, SELL_WINDOW), axis=1)[:, ::C]
    out[0] += np.uint64(C * int(firsts[firsts > 0].sum()))
    out[1] = max(int(out[1]), int(lengths.max(initial=0)))


def sell_slice_widths(indptr, perm, n_rows, C, sigma, n_slices, widths):
    """Reference of kernels/spmv_sell.cu ``sell_slice_widths``: ``widths[s]`` = C times the longest
    row of slice s (ranks ``s * C`` to ``s * C + C``), then a 0 (``sigma`` is the kernel's
    shortcut: rows are sorted inside windows of sigma ranks)."""
    padded = np.zeros(n_slices * C, dtype=np.int64)
    padded[:n_rows] = np.diff(indptr).astype(np.int64)[perm[:n_rows]]
    widths[:n_slices] = padded.reshape(n_slices, C).max(axis=1, initial=0) * C
    widths[n_slices] = 0


def sell_part_counts(slice_ptr, n_slices, C, split, parts):
    """Reference of kernels/spmv_sell.cu ``sell_part_counts``: ``parts[s]`` = ceil(width / split) for
    a slice wider than ``split`` slots, else 0; ``parts[n_slices]`` = 0."""
    widths = np.diff(slice_ptr[:n_slices + 1]) // C
    parts[:n_slices] = np.where(widths > split, -(-widths // split), 0)
    parts[n_slices] = 0


def sell_split_units(slice_ptr, unit_first, n_slices, C, split, split_slice, split_part):
    """Reference of kernels/spmv_sell.cu ``sell_split_units``: slice s wider than ``split`` slots has
    ceil(width / split) parts, listed from ``unit_first[s]`` as (s, 0), (s, 1), ..."""
    widths = np.diff(slice_ptr[:n_slices + 1]) // C
    for s in np.flatnonzero(widths > split):
        parts = -(-int(widths[s]) // split)
        first = int(unit_first[s])
        split_slice[first:first + parts] = s
        split_part[first:first + parts] = np.arange(parts)


def sell_select_hot(counts, first, n_cols, threshold, n_hot, hot_cols, hot_slot):
    """Reference of kernels/spmv_sell.cu ``sell_select_hot``: the first ``n_hot`` columns with
    ``counts >= threshold`` (``first``: the exclusive scan of that test) into ``hot_cols``, their
    positions into ``hot_slot``, -1 for every other column."""
    staged = (counts[:n_cols] >= threshold) & (first[:n_cols] < n_hot)
    hot_slot[:n_cols] = np.where(staged, first[:n_cols], -1)
    hot_cols[first[:n_cols][staged]] = np.flatnonzero(staged)


def sell_fill_slots(indptr, indices, data, perm, hot_slot, slice_ptr, split_slice, split_part, n_split, split,
                    n_slices, n_rows, C, out_indices, out_data):
    """Reference of kernels/spmv_sell.cu ``sell_fill_slots``: entry k of the row at ``rank`` goes to
    slot ``slice_ptr[rank // C] + k * C + rank % C``, column c as ``-2 - hot_slot[c]`` where
    ``hot_slot`` (when not empty) is >= 0; every other slot is padding (column -1, value 0).
    The part list (``split_slice``, ``split_part``, ``n_split``, ``split``) and ``n_slices``
    only share the work out among the kernel's threads."""
    out_indices[...] = -1
    out_data[...] = 0
    rows = np.repeat(np.arange(n_rows, dtype=np.int64), np.diff(indptr))
    k = np.arange(indices.size, dtype=np.int64) - indptr[rows]
    ranks = np.empty(n_rows, dtype=np.int64)
    ranks[perm] = np.arange(n_rows)
    rank = ranks[rows]
    cols = indices
    if hot_slot.size:
        staged = hot_slot[indices]
        cols = np.where(staged >= 0, -2 - staged, indices).astype(indices.dtype)
    destination = slice_ptr[rank // C] + k * C + rank % C
    out_indices[destination] = cols
    out_data[destination] = data

"""Entry-wise array operations behind SciPy's sparse arithmetic, on whichever backend holds the
arrays (NumPy or CuPy, passed as ``xp``).

They work on compressed arrays ``(indptr, indices, data)`` along a major axis (rows of a CSR,
columns of a CSC: every rule here is symmetric in the two axes). The same code runs on both
backends, so the CPU test suite exercises what the GPU runs; the CPU backend calls SciPy's
compiled routines instead where they are faster (:func:`scipy_binop`).

Determinism: entries are ordered by sorts on unique keys (or stable sorts), duplicates are
summed in stored order by :func:`sparsegpu.primitives.segmented_reduce` (fixed order, no
atomics), so every result is bitwise the same run to run.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np
import scipy.sparse as sp

from sparsegpu import _validate, convert, primitives

#: SciPy's binary operators on two sparse operands, by name: all three drop the entries whose
#: result is exactly zero (scipy/sparse/sparsetools/csr.h ``csr_binop_csr``).
BINARY_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "add": operator.add,
    "subtract": operator.sub,
    "multiply": operator.mul,
}
_INT64_MAX = np.iinfo(np.int64).max


def product(left: Any, right: Any) -> Any:
    """``left * right`` rounded as NumPy and SciPy round it, on either backend.

    A complex product is ``(ar*br - ai*bi) + (ar*bi + ai*br)j``; CuPy's complex kernels fuse
    each half into one FMA, which changes the last bit (and turns SciPy's exact zero imaginary
    part of ``z * conj(z)`` into a residual). Each partial product is therefore rounded by its
    own array operation, as the CPU does.
    """
    if isinstance(left, np.ndarray) or np.result_type(left.dtype, right.dtype).kind != "c":
        return left * right
    ar, ai, br, bi = left.real, left.imag, right.real, right.imag
    out = left * right  # the result's dtype and shape; both halves are overwritten
    out.real = ar * br - ai * bi
    out.imag = ar * bi + ai * br
    return out


def _apply(op: str, left: Any, right: Any) -> Any:
    return product(left, right) if op == "multiply" else BINARY_OPS[op](left, right)


def result_index_dtype(shape: tuple[int, int], nnz: int, *index_dtypes: Any) -> np.dtype:
    """int64 when an operand has int64 indices or the result needs them, else int32."""
    wide = any(np.dtype(d) == np.int64 for d in index_dtypes)
    return np.dtype(np.int64) if wide else _validate.index_dtype(shape, nnz)


def stable_argsort(keys: Any, xp: ModuleType) -> Any:
    """Indices sorting ``keys``, equal keys in their stored order (CuPy sorts stably)."""
    return np.argsort(keys, kind="stable") if xp is np else xp.argsort(keys)


def entry_order(majors: Any, minors: Any, n_minor: int, xp: ModuleType) -> tuple[Any, Any]:
    """(order, sorted keys): a stable sort of entries by (major, minor), and each sorted entry's
    key (one int64 per entry when ``major * n_minor`` fits, else the sort by the pair)."""
    width = max(n_minor, 1)
    n_major = int(majors.max()) + 1 if majors.size else 0
    if n_major * width <= _INT64_MAX:
        keys = majors.astype(np.int64) * width + minors.astype(np.int64)
        order = stable_argsort(keys, xp)
        return order, keys[order]
    order = xp.lexsort(xp.stack([minors, majors]))  # lexsort is stable
    sorted_majors, sorted_minors = majors[order], minors[order]
    return order, xp.stack([sorted_majors, sorted_minors])


def _starts(sorted_keys: Any, xp: ModuleType) -> Any:
    """Where a new key begins in a sorted key array (a 1-D key or a 2 x n stack of pairs)."""
    size = sorted_keys.shape[-1]
    starts = xp.ones(size, dtype=bool)
    if size > 1:
        differ = sorted_keys[..., 1:] != sorted_keys[..., :-1]
        starts[1:] = differ if differ.ndim == 1 else differ.any(axis=0)
    return starts


def segment_sums(values: Any, offsets: Any) -> Any:
    """Sum of each segment ``values[offsets[i]:offsets[i+1]]`` in stored order (complex values
    as two real reductions: complex addition is part by part)."""
    if values.dtype.kind != "c":
        return primitives.segmented_reduce(values, offsets, "sum")
    real = primitives.segmented_reduce(values.real.copy(), offsets, "sum")
    imag = primitives.segmented_reduce(values.imag.copy(), offsets, "sum")
    out = real.astype(values.dtype)
    out.imag = imag  # the setter: NumPy and CuPy both write the imaginary parts in place
    return out


def is_canonical(indptr: Any, indices: Any, xp: ModuleType) -> bool:
    """Whether each major line's indices strictly increase (sorted, no duplicates)."""
    if indices.size < 2:
        return True
    increasing = indices[1:] > indices[:-1]
    starts = indptr[1:-1]
    starts = starts[(starts > 0) & (starts < indices.size)].astype(np.int64)
    increasing[starts - 1] = True  # a pair across a line boundary may go down
    return bool(increasing.all())


def canonical(indptr: Any, indices: Any, data: Any, n_minor: int, xp: ModuleType) -> tuple[Any, Any, Any]:
    """The same matrix with sorted indices and duplicates summed (in stored order): the arrays
    themselves when already canonical."""
    if is_canonical(indptr, indices, xp):
        return indptr, indices, data
    majors = convert.expand_pointers(indptr, xp)
    order, keys = entry_order(majors, indices, n_minor, xp)
    starts = _starts(keys, xp)
    first = xp.flatnonzero(starts)
    offsets = xp.concatenate([first, xp.asarray([indices.size])]).astype(np.int64)
    summed = segment_sums(data[order], offsets)
    new_indptr = convert.compress(majors[order][first], indptr.size - 1, indptr.dtype, xp)
    return new_indptr, indices[order][first], summed


def merge(a: tuple[Any, Any, Any], b: tuple[Any, Any, Any], op: str, shape: tuple[int, int],
          dtype: np.dtype, index_dtype: np.dtype, xp: ModuleType) -> tuple[Any, Any, Any]:
    """``op(A, B)`` entry by entry over the union of two canonical patterns, with SciPy's rule:
    an entry of one operand only meets 0 (``a + 0``, ``0 - b``, ``a * 0``), and results
    exactly zero are dropped.

    ``a`` and ``b`` are canonical compressed arrays of the same orientation and ``shape``
    (major, minor); the result is canonical, in ``dtype`` and ``index_dtype``. Each operand's
    keys (``major * n_minor + minor``) increase, so a binary search of every key in the other
    operand gives its slot in the union (a merge, no sort); a key in both takes one slot.
    Where the key would overflow int64, a stable sort of the pairs does the merge instead.
    """
    width = max(shape[1], 1)
    if shape[0] * width > _INT64_MAX:
        return merge_by_sort(a, b, op, shape, dtype, index_dtype, xp)
    (a_keys, a_values), (b_keys, b_values) = ((_keys(indptr, indices, width, xp), data.astype(dtype))
                                              for indptr, indices, data in (a, b))
    b_below_a = xp.searchsorted(b_keys, a_keys, side="left")  # B's keys smaller than each A key
    a_below_b = xp.searchsorted(a_keys, b_keys, side="left")
    partner = xp.minimum(b_below_a, max(b_keys.size - 1, 0))
    matched = (b_below_a < b_keys.size) & (b_keys[partner] == a_keys) if b_keys.size else b_below_a < 0
    matched_before = xp.zeros(a_keys.size + 1, dtype=np.int64)  # matched A keys before each place
    if a_keys.size:
        matched_before[1:] = xp.cumsum(matched.astype(np.int64))
    n_union = a_keys.size + b_keys.size - int(matched_before[-1])
    a_slot = xp.arange(a_keys.size, dtype=np.int64) + b_below_a - matched_before[:-1]
    b_slot = xp.arange(b_keys.size, dtype=np.int64) + a_below_b - matched_before[a_below_b]
    keys = xp.empty(n_union, dtype=np.int64)
    keys[a_slot] = a_keys
    keys[b_slot] = b_keys  # a shared key: the same value again
    left, right = xp.zeros(n_union, dtype=dtype), xp.zeros(n_union, dtype=dtype)
    left[a_slot] = a_values
    right[b_slot] = b_values
    result = _apply(op, left, right).astype(dtype, copy=False)
    kept = xp.flatnonzero(result != 0)
    keys = keys[kept]
    new_indptr = convert.compress(keys // width, shape[0], index_dtype, xp)
    return new_indptr, (keys % width).astype(index_dtype), result[kept]


def _keys(indptr: Any, indices: Any, width: int, xp: ModuleType) -> Any:
    """``major * width + minor`` of every entry, int64."""
    return convert.expand_pointers(indptr, xp).astype(np.int64) * width + indices.astype(np.int64)


def merge_by_sort(a: tuple[Any, Any, Any], b: tuple[Any, Any, Any], op: str, shape: tuple[int, int],
                  dtype: np.dtype, index_dtype: np.dtype, xp: ModuleType) -> tuple[Any, Any, Any]:
    """:func:`merge` by a stable sort of both operands' (major, minor) pairs, A's entry first
    where a pair is in both: for shapes whose packed key would overflow int64."""
    a_indptr, a_indices, a_data = a
    b_indptr, b_indices, b_data = b
    n_a = a_indices.size
    majors = xp.concatenate([convert.expand_pointers(a_indptr, xp).astype(np.int64),
                             convert.expand_pointers(b_indptr, xp).astype(np.int64)])
    minors = xp.concatenate([a_indices.astype(np.int64), b_indices.astype(np.int64)])
    values = xp.concatenate([a_data.astype(dtype), b_data.astype(dtype)])
    order, keys = entry_order(majors, minors, shape[1], xp)
    first = xp.flatnonzero(_starts(keys, xp))
    following = xp.concatenate([first[1:], xp.asarray([order.size], dtype=first.dtype)])
    both = (following - first) == 2
    leading = order[first]
    from_a = leading < n_a
    zero = xp.zeros((), dtype=dtype)
    left = xp.where(from_a, values[leading], zero)
    second = order[xp.minimum(first + 1, order.size - 1)] if order.size else leading
    right = xp.where(both, values[second], xp.where(from_a, zero, values[leading]))
    result = _apply(op, left, right).astype(dtype, copy=False)
    keep = xp.flatnonzero(result != 0)
    kept = leading[keep]
    new_indptr = convert.compress(majors[kept], shape[0], index_dtype, xp)
    return new_indptr, minors[kept].astype(index_dtype), result[keep]


def scipy_binop(a: tuple[Any, Any, Any], b: tuple[Any, Any, Any], op: str, shape: tuple[int, int],
                dtype: np.dtype, index_dtype: np.dtype) -> tuple[Any, Any, Any]:
    """:func:`merge` by SciPy's compiled csr_binop_csr (host arrays; any order or duplicates):
    the CPU backend's path. The result is canonical and owns its arrays."""
    left, right = (sp.csr_array((data.astype(dtype, copy=False), indices, indptr), shape=shape, copy=False)
                   for indptr, indices, data in (a, b))
    out = left.multiply(right) if op == "multiply" else BINARY_OPS[op](left, right)
    out = sp.csr_array(out)
    out.sum_duplicates()
    return (out.indptr.astype(index_dtype, copy=False), out.indices.astype(index_dtype, copy=False),
            out.data.astype(dtype, copy=False))


def scale(data: Any, factor: Any, dtype: np.dtype) -> Any:
    """``data * factor`` in ``dtype`` (a new array), as NumPy computes ``data * factor``."""
    return product(data.astype(dtype), dtype.type(factor))


def drop_zeros(indptr: Any, indices: Any, data: Any, xp: ModuleType) -> tuple[Any, Any, Any]:
    """The compressed arrays without their entries equal to zero (new arrays)."""
    keep = xp.flatnonzero(data != 0)
    majors = convert.expand_pointers(indptr, xp)[keep]
    return convert.compress(majors, indptr.size - 1, indptr.dtype, xp), indices[keep], data[keep]


def to_dense(indptr: Any, indices: Any, data: Any, shape: tuple[int, int], dtype: np.dtype,
             xp: ModuleType) -> Any:
    """The dense (major, minor) array of canonical compressed arrays, in ``dtype``."""
    out = xp.zeros(shape, dtype=dtype)
    majors = convert.expand_pointers(indptr, xp)
    out[majors, indices] = data
    return out


def multiply_dense(majors: Any, minors: Any, data: Any, dense: Any, dtype: np.dtype, xp: ModuleType) -> Any:
    """``data[j] * dense[majors[j], minors[j]]`` in ``dtype`` (``dense`` already of the
    matrix's (major, minor) shape, a broadcast view allowed)."""
    return product(data.astype(dtype), dense[majors, minors].astype(dtype, copy=False))


def select_lines(indptr: Any, indices: Any, data: Any, lines: Any, xp: ModuleType) -> tuple[Any, Any, Any]:
    """The compressed arrays of the major lines ``lines`` (in that order, repeats allowed):
    new arrays, one gather; int64 indices where repeats take the entries past int32."""
    lines = lines.astype(np.int64)
    begins = indptr[lines].astype(np.int64)
    lengths = indptr[lines + 1].astype(np.int64) - begins
    total = int(lengths.sum()) if lines.size else 0
    _validate.ensure_fits(total * (indices.itemsize + data.itemsize + 24), "the selected rows",
                          "cpu" if xp is np else "gpu")
    index_dtype = np.result_type(indptr.dtype, _validate.index_dtype((0, 0), total))
    new_indptr = xp.zeros(lines.size + 1, dtype=index_dtype)
    if lines.size:
        new_indptr[1:] = xp.cumsum(lengths).astype(index_dtype)
    owner = convert.expand_pointers(new_indptr, xp).astype(np.int64)
    source = begins[owner] + xp.arange(owner.size, dtype=np.int64) - new_indptr[owner].astype(np.int64)
    return new_indptr, indices[source].astype(index_dtype, copy=False), data[source]


def slice_lines(indptr: Any, indices: Any, data: Any, start: int, stop: int) -> tuple[Any, Any, Any]:
    """The compressed arrays of major lines ``start:stop`` (step 1): copies of contiguous parts."""
    first, last = int(indptr[start]), int(indptr[stop])
    return indptr[start:stop + 1] - indptr[start], indices[first:last].copy(), data[first:last].copy()


def diagonal(indptr: Any, indices: Any, data: Any, shape: tuple[int, int], k: int, xp: ModuleType) -> Any:
    """Entries ``(i, i + k)`` of canonical CSR arrays as a dense 1-D array (zeros where none)."""
    m, n = shape
    length = max(0, min(m + min(k, 0), n - max(k, 0)))
    out = xp.zeros(length, dtype=data.dtype)
    if length == 0 or indices.size == 0:
        return out
    rows = convert.expand_pointers(indptr, xp).astype(np.int64)
    on = xp.flatnonzero(indices.astype(np.int64) - rows == k)
    out[rows[on] - max(0, -k)] = data[on]
    return out


def kron_arrays(a: tuple[Any, Any, Any], b: tuple[Any, Any, Any], b_shape: tuple[int, int],
                index_dtype: np.dtype, xp: ModuleType) -> tuple[Any, Any, Any]:
    """CSR arrays of kron(A, B) from CSR arrays of A and B: row ``ia * mb + ib`` holds, for each
    entry of A's row ia in order, B's row ib shifted by ``ja * nb``: sorted rows when A's and
    B's are, no sort needed."""
    a_indptr, a_indices, a_data = a
    b_indptr, b_indices, b_data = b
    mb, nb = b_shape
    a_lengths = (a_indptr[1:] - a_indptr[:-1]).astype(np.int64)
    b_lengths = (b_indptr[1:] - b_indptr[:-1]).astype(np.int64)
    lengths = (a_lengths[:, None] * b_lengths[None, :]).ravel()
    indptr = xp.zeros(lengths.size + 1, dtype=index_dtype)
    if lengths.size:
        indptr[1:] = xp.cumsum(lengths).astype(index_dtype)
    row = convert.expand_pointers(indptr, xp).astype(np.int64)
    within = xp.arange(row.size, dtype=np.int64) - indptr[row].astype(np.int64)
    ia, ib = row // max(mb, 1), row % max(mb, 1)
    b_length = b_lengths[ib] if row.size else within
    a_entry = a_indptr[ia].astype(np.int64) + within // xp.maximum(b_length, 1)
    b_entry = b_indptr[ib].astype(np.int64) + within % xp.maximum(b_length, 1)
    columns = a_indices[a_entry].astype(np.int64) * nb + b_indices[b_entry].astype(np.int64)
    dtype = np.result_type(a_data.dtype, b_data.dtype)
    values = a_data[a_entry].astype(dtype) * b_data[b_entry].astype(dtype)
    return indptr, columns.astype(index_dtype), values


def hstack_arrays(blocks: list[tuple[Any, Any, Any]], widths: list[int], m: int, dtype: np.dtype,
                  index_dtype: np.dtype, xp: ModuleType) -> tuple[Any, Any, Any]:
    """CSR arrays of the blocks (CSR arrays, ``m`` rows each) side by side: each row holds its
    blocks' rows in block order, columns shifted by the widths before."""
    lengths = [(p[1:] - p[:-1]).astype(np.int64) for p, _, _ in blocks]
    total = sum(lengths) if lengths else xp.zeros(m, np.int64)
    indptr = xp.zeros(m + 1, dtype=index_dtype)
    if m:
        indptr[1:] = xp.cumsum(total).astype(index_dtype)
    nnz = int(indptr[-1]) if m else 0
    indices = xp.empty(nnz, dtype=index_dtype)
    data = xp.empty(nnz, dtype=dtype)
    before = xp.zeros(m, np.int64)  # entries of earlier blocks in each row
    offset = 0
    for (b_indptr, b_indices, b_data), length, width in zip(blocks, lengths, widths):
        rows = convert.expand_pointers(b_indptr, xp).astype(np.int64)
        within = xp.arange(rows.size, dtype=np.int64) - b_indptr[rows].astype(np.int64)
        destination = indptr[rows].astype(np.int64) + before[rows] + within
        indices[destination] = (b_indices.astype(np.int64) + offset).astype(index_dtype)
        data[destination] = b_data.astype(dtype)
        before += length
        offset += width
    return indptr, indices, data


def vstack_arrays(blocks: list[tuple[Any, Any, Any]], dtype: np.dtype, index_dtype: np.dtype,
                  xp: ModuleType) -> tuple[Any, Any, Any]:
    """CSR arrays of the blocks (CSR arrays) one above the other: concatenations."""
    pointers, shift = [xp.zeros(1, dtype=index_dtype)], 0
    for b_indptr, b_indices, _ in blocks:
        pointers.append((b_indptr[1:].astype(np.int64) + shift).astype(index_dtype))
        shift += int(b_indices.size)
    indices = xp.concatenate([xp.zeros(0, index_dtype)] + [b.astype(index_dtype) for _, b, _ in blocks])
    data = xp.concatenate([xp.zeros(0, dtype)] + [d.astype(dtype) for _, _, d in blocks])
    return xp.concatenate(pointers), indices, data

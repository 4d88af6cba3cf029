"""NumPy references of the semiring SpMV kernels (kernels/spmv_csr.cu, spmv_ell.cu,
spmv_sell.cu over a semiring S), over the same layouts and with the kernels' fold order within
a row: each row's terms folded left to right in entry (slot) order from the identity.

A semiring is given as three plain values so this module needs nothing above it: ``add`` a
binary function (a NumPy ufunc such as ``np.minimum``), ``mul`` a binary function, ``identity``
the add's identity as a scalar of the value dtype (sparsegpu.semiring's objects provide all
three: ``s.add.ufunc``, ``s.mul.apply``, ``s.identity(dtype)``).

``mask`` (length n_rows, nonzero = compute) with ``complement`` flips it; rows it excludes are not
computed and ``y`` keeps them. ``present`` (length n_cols, nonzero = present) skips the terms of
absent columns; ``hit`` (uint8, length n_rows) receives 1 where a present term met an allowed
row, else 0.

>>> import numpy as np
>>> indptr, indices, data = np.array([0, 2, 2]), np.array([0, 1]), np.array([1.0, 5.0])
>>> y = np.full(2, -1.0)
>>> csr_semiring_spmv(indptr, indices, data, np.array([3.0, 1.0]), y, np.minimum, np.add, np.inf).tolist()
[4.0, inf]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


def _allowed(mask: np.ndarray | None, complement: bool, row: int) -> bool:
    return mask is None or (bool(mask[row] != 0) != bool(complement))


def _fold(terms: list[tuple[Any, Any]], x: np.ndarray, add: Callable, mul: Callable, identity: Any,
          present: np.ndarray | None) -> tuple[Any, bool]:
    """(fold of mul(value, x[col]) over (col, value) in order, whether any term counted)."""
    acc, found = identity, False
    dtype = np.asarray(identity).dtype
    for col, value in terms:
        if present is not None and present[col] == 0:
            continue
        term = np.asarray(mul(np.asarray(value, dtype), np.asarray(x[col], dtype)), dtype)
        acc = np.asarray(add(np.asarray(acc, dtype), term), dtype)
        found = True
    return acc, found


def _rows(n_rows: int, row_terms: Callable[[int], list], x: np.ndarray, y: np.ndarray, add: Callable,
          mul: Callable, identity: Any, mask: Any, complement: bool, present: Any, hit: Any) -> np.ndarray:
    identity = y.dtype.type(identity)
    for row in range(n_rows):
        allowed = _allowed(mask, complement, row)
        found = False
        if allowed:
            y[row], found = _fold(row_terms(row), x, add, mul, identity, present)
        if hit is not None:
            hit[row] = 1 if allowed and found else 0
    return y


def csr_semiring_spmv(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, x: np.ndarray, y: np.ndarray,
                      add: Callable, mul: Callable, identity: Any, mask: np.ndarray | None = None,
                      complement: bool = False, present: np.ndarray | None = None,
                      hit: np.ndarray | None = None) -> np.ndarray:
    """y[row] = fold over the row's entries j in order of mul(data[j], x[indices[j]]), for rows
    the mask allows (the reference of csr_semiring_rows and the long-row kernels). Returns y."""

    def terms(row: int) -> list:
        return list(zip(indices[indptr[row]:indptr[row + 1]], data[indptr[row]:indptr[row + 1]]))

    return _rows(len(indptr) - 1, terms, x, y, add, mul, identity, mask, complement, present, hit)


def ell_semiring_spmv(indices: np.ndarray, data: np.ndarray, width: int, n_rows: int, x: np.ndarray, y: np.ndarray,
                      add: Callable, mul: Callable, identity: Any, mask: np.ndarray | None = None,
                      complement: bool = False) -> np.ndarray:
    """The ELL layout's (slot k of row r at k * n_rows + r, padding column -1, trailing)
    reference of ell_semiring_spmv. Returns y."""

    def terms(row: int) -> list:
        out = []
        for k in range(width):
            col = indices[k * n_rows + row]
            if col < 0:
                break
            out.append((col, data[k * n_rows + row]))
        return out

    return _rows(n_rows, terms, x, y, add, mul, identity, mask, complement, None, None)


def sell_semiring_spmv(slice_ptr: np.ndarray, indices: np.ndarray, data: np.ndarray, perm: np.ndarray, C: int,
                       n_rows: int, x: np.ndarray, y: np.ndarray, add: Callable, mul: Callable, identity: Any,
                       mask: np.ndarray | None = None, complement: bool = False) -> np.ndarray:
    """The SELL-C-sigma layout's (no split slices, no hot columns) reference of
    sell_semiring_direct: permuted row ``rank`` (original row perm[rank]) is lane rank % C of
    slice rank // C, slot k at slice_ptr[slice] + k * C + lane. Returns y."""
    rank_of = np.empty(n_rows, dtype=np.int64)
    rank_of[np.asarray(perm[:n_rows], dtype=np.int64)] = np.arange(n_rows)

    def terms(row: int) -> list:
        rank = int(rank_of[row])
        begin, end = int(slice_ptr[rank // C]), int(slice_ptr[rank // C + 1])
        out = []
        for k in range((end - begin) // C):
            slot = begin + k * C + rank % C
            if indices[slot] < 0:
                break
            out.append((indices[slot], data[slot]))
        return out

    return _rows(n_rows, terms, x, y, add, mul, identity, mask, complement, None, None)

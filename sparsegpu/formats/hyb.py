"""HYB: an ELL part of width K for the first K entries of every row, a COO part (sorted by
row) for the rest. ``A @ x`` runs kernels/spmv_ell.cu then kernels/spmv_coo.cu (NumPy reference:
reference.regular.hyb_spmv).

Choosing K (:func:`hyb_width`)
------------------------------
K minimises the estimated bytes one product moves, read off the row-length histogram::

    bytes(K) = m * K * (v + i)                 ELL slots, padding included
             + overflow(K) * (v + 2 i)         COO entries: value, column, row
             + rows_over(K) * 2 v              y read and written again for rows with overflow

with ``v`` and ``i`` the value and index sizes, ``overflow(K)`` the entries beyond slot K and
``rows_over(K)`` the rows longer than K (the gathers of x cost the same in either part and
cancel). Widening by one slot pays ``m (v + i)`` and saves ``(v + 2 i)`` per row longer than K,
so, leaving out the y term, K is the smallest width at which the fraction of rows longer than
K drops below ``(v + i) / (v + 2 i)`` (3/4 for float64 with int32 indices): a percentile rule.

How it relates to the known rules: CUSP (``compute_optimal_entries_per_row``) takes the
largest K such that at least ``max(4096, m / 3)`` rows have K or more entries, i.e. the same
percentile form with the threshold fraction set to 1/3 from a measured ELL-vs-COO speed ratio
of 3 and a floor of 4096 rows below which an ELL column is not worth a pass; it gives wider ELL
parts than the bytes rule. Ginkgo's hybrid strategies pick K as a quantile of the row lengths
too (``imbalance_limit``: a fixed percentile, 0.8 by default; ``minimal_storage_limit``: the
percentile at the ELL/COO storage ratio per entry, which is the bytes rule above without the y
term). Callers who measured otherwise pass ``width=K``.

One pass over each part
-----------------------
The ELL kernel writes ``y = alpha * A_ell x + beta * y`` (never reading y when beta is 0); the
COO part then adds ``alpha * A_coo x`` row by row with the deterministic segmented reduction of
:func:`sparsegpu.formats.coo.reduce_sorted_by_key` (bitwise reproducible), or, with
``sparsegpu.options(deterministic=False)``, one atomic add per entry. Not fused into one
kernel: a row's overflow can be very long (a power-law hub), so it cannot stay with the row's
ELL thread, and splitting it across threads that write y needs atomics or a second pass.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

from sparsegpu import convert, primitives
from sparsegpu._backend import deterministic
from sparsegpu._kernels import blocks_for
from sparsegpu.formats._fast_product import Launch
from sparsegpu.formats.coo import (
    ATOMIC_BLOCK,
    COO_KERNELS,
    atomic_launch,
    reduce_launches,
    reduce_sorted_by_key,
)
from sparsegpu.formats.ell import (
    RegularMatrix,
    csr_from_positions,
    ell_forward,
    ell_launches,
    fill_slots,
    int_at_least,
    reject_params,
    slots_fit,
)
from sparsegpu.reference import regular as reference


def hyb_width(lengths: Any, value_dtype: Any, index_dtype: Any, xp: ModuleType) -> int:
    """The ELL width K that minimises the bytes model in this module's docstring for rows of
    ``lengths`` (the smallest such K on ties), computed on the lengths' backend.

    >>> import numpy as np
    >>> hyb_width(np.array([5, 5, 5, 5]), np.float64, np.int32, np)
    5
    >>> hyb_width(np.array([2, 2, 2, 2, 2, 2, 2, 900]), np.float64, np.int32, np)
    2
    """
    counts = length_counts(lengths, xp)
    return width_for_counts(counts, value_dtype, index_dtype) if counts.size else 0


def length_counts(lengths: Any, xp: ModuleType) -> np.ndarray:
    """The row-length histogram on the host: ``counts[k]`` rows hold k entries, ``longest + 1``
    bins (none for no rows); one reduction and one histogram on the lengths' backend.

    >>> length_counts(np.array([2, 0, 2, 3]), np).tolist()
    [1, 0, 2, 1]
    """
    if lengths.size == 0:
        return np.zeros(0, dtype=np.int64)
    longest = int(lengths.max())
    counts = primitives.histogram(lengths, longest + 1, range=(0, longest + 1))
    return counts.get() if xp is not np else counts


def width_for_counts(counts: np.ndarray, value_dtype: Any, index_dtype: Any) -> int:
    """:func:`hyb_width` from the row-length histogram on the host (``counts[k]`` rows hold k
    entries; it has ``longest + 1`` bins, so it is small).

    >>> width_for_counts(np.array([0, 0, 7, 0, 1]), np.float64, np.int32)
    2
    """
    value_bytes, index_bytes = np.dtype(value_dtype).itemsize, np.dtype(index_dtype).itemsize
    rows = float(counts.sum())
    rows_over = rows - np.cumsum(counts, dtype=np.float64)  # rows longer than K, K = 0 .. longest
    overflow = np.cumsum(rows_over[::-1])[::-1]  # entries past slot K
    widths = np.arange(counts.size, dtype=np.float64)
    cost = (rows * widths * (value_bytes + index_bytes)
            + overflow * (value_bytes + 2 * index_bytes)
            + rows_over * 2 * value_bytes)
    return int(np.argmin(cost))


def overflow_entries(csr: Any, width: int) -> tuple[Any, Any, Any]:
    """(row, column, value) of the entries past slot ``width`` of their rows, sorted by row then
    column, on the CSR's backend: the overflow's row pointers by one scan, its row indices by
    :func:`sparsegpu.convert.expand_pointers` (a memset, a mark per row and a max-scan), and
    each entry's source position as its row's offset plus its own number, so the gathers read
    the CSR arrays in order. With ``width`` 0 this is CSR -> COO."""
    xp, index_dtype = csr._xp, csr.index_dtype
    overflow = xp.maximum(xp.diff(csr.indptr) - width, 0)
    over_ptr = xp.zeros(overflow.size + 1, dtype=index_dtype)
    if overflow.size:
        over_ptr[1:] = primitives.inclusive_scan(overflow)
    rows = convert.expand_pointers(over_ptr, xp)
    # Entry j of the overflow comes from position indptr[r] + width + (j - over_ptr[r]) of row r.
    shift = csr.indptr[:-1] + width - over_ptr[:-1]
    sources = shift[rows] + xp.arange(rows.size, dtype=index_dtype)
    return rows, csr.indices[sources], csr.data[sources]


class HYB(RegularMatrix):
    """Hybrid ELL + COO matrix: the first ``width`` entries of each row in an ELL part
    (``ell_indices``, ``ell_data``, column-major, padding column -1), the rest in a COO part
    (``coo_row``, ``coo_col``, ``coo_data``) sorted by row, then column.

    ``width`` defaults to :func:`hyb_width` (the bytes-minimising rule in the module docstring;
    it relates to CUSP's and Ginkgo's rules) or is given (``width=K``, 0 gives a pure COO part).
    ``A @ x``: the ELL kernel, then a deterministic segmented reduction of the COO part into y;
    bitwise reproducible, as is ``A.T @ x`` (over a cached CSR of A^T). With
    ``sparsegpu.options(deterministic=False)`` both use atomic adds (not reproducible).

    Parameters
    ----------
    matrix : scipy sparse matrix or SparseMatrix
        The matrix to store (any scipy format, or any sparsegpu format on either backend).
    dtype, index_dtype, backend : optional
        As in :meth:`SparseMatrix.from_scipy`; for scipy input only.
    width : int, optional
        The ELL part's width K (default: :func:`hyb_width`); 0 gives a pure COO part.

    Raises
    ------
    TypeError
        ``matrix`` of another type; ``dtype``, ``index_dtype`` or ``backend`` given with a
        sparsegpu matrix; an unknown format parameter; an unsupported dtype.
    ValueError
        A negative ``width``; a matrix that cannot fit in memory.

    See Also
    --------
    SparseMatrix.from_scipy : ``HYB.from_scipy(S, **params)`` takes the same parameters.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from sparsegpu.formats import HYB
    >>> S = sp.random(60, 60, density=0.05, random_state=4, format="lil")
    >>> S[7, :] = 1.0  # one long row: it overflows into the COO part
    >>> A = HYB.from_scipy(S, backend="cpu")
    >>> A.width < 60 and A.coo_data.size >= 60 - A.width
    True
    >>> x = np.arange(60.0)
    >>> bool(np.allclose(A @ x, S @ x)) and (A.to_scipy() != S).nnz == 0
    True
    """

    format = "hyb"
    _array_names = ("ell_indices", "ell_data", "coo_row", "coo_col", "coo_data")
    _value_names = ("ell_data", "coo_data")
    _scalar_names = ("width",)
    _index_name = "ell_indices"
    ell_indices: Any
    ell_data: Any
    coo_row: Any
    coo_col: Any
    coo_data: Any
    width: int

    @classmethod
    def _from_csr(cls, csr: Any, width: int | None = None, **params: Any) -> HYB:
        reject_params(cls, params)
        xp = csr._xp
        m, _ = csr.shape
        longest = None  # unknown for a given width
        if width is None:
            counts = length_counts(convert.row_lengths(csr.indptr), xp)
            width = width_for_counts(counts, csr.dtype, csr.index_dtype) if counts.size else 0
            longest = counts.size - 1
        width = int_at_least("width", width, 0)
        slots_fit(csr, width * m, f"HYB's ELL part of {m} rows x {width} slots")
        ell_indices, ell_data = fill_slots(csr, reference.LAYOUT_ELL, width * m, width=width)
        if longest is not None and longest <= width:
            # No row overflows (the usual case for regular matrices): an empty COO part, without
            # the gather and its host reads.
            coo_row, coo_col = (xp.empty(0, dtype=csr.index_dtype) for _ in range(2))
            coo_data = xp.empty(0, dtype=csr.dtype)
        else:
            coo_row, coo_col, coo_data = overflow_entries(csr, width)
        return cls._new(csr.shape, csr.backend, csr.nnz, width=width, ell_indices=ell_indices, ell_data=ell_data,
                        coo_row=coo_row, coo_col=coo_col, coo_data=coo_data)

    def to_csr(self) -> Any:
        xp, m, index_dtype = self._xp, self._shape[0], self._index_dtype
        slots = xp.flatnonzero(self.ell_indices >= 0)
        # A row's COO entries follow its ELL slots: position = width + rank inside its COO run.
        coo_first = convert.compress(self.coo_row, m, index_dtype, xp)
        coo_positions = xp.arange(self.coo_row.size, dtype=index_dtype) - coo_first[self.coo_row] + self.width
        rows = xp.concatenate([(slots % max(m, 1)).astype(index_dtype), self.coo_row])
        positions = xp.concatenate([(slots // max(m, 1)).astype(index_dtype), coo_positions])
        cols = xp.concatenate([self.ell_indices[slots], self.coo_col])
        values = xp.concatenate([self.ell_data[slots], self.coo_data])
        return csr_from_positions(rows, positions, cols, values, self._shape, index_dtype, self._backend, xp)

    def _forward(self, x: Any, y: Any, alpha: Any, beta: Any) -> Any:
        if self._backend == "cpu":
            return reference.hyb_spmv(self.ell_indices, self.ell_data, self.width, self.coo_row, self.coo_col,
                                  self.coo_data, x, y, alpha, beta)
        ell_forward(self.ell_indices, self.ell_data, self.width, x, y, alpha, beta)
        n_overflow = self.coo_data.size
        if n_overflow == 0:
            return y
        if deterministic():
            return reduce_sorted_by_key(self.coo_row, self.coo_col, self.coo_data, x, y, alpha)
        kernel = COO_KERNELS.function("coo_spmv_atomic<{V}, {I}>", self._dtype, self._index_dtype)
        kernel(
            (blocks_for(n_overflow, ATOMIC_BLOCK),), (ATOMIC_BLOCK,),
            (self.coo_row, self.coo_col, self.coo_data, x, np.int64(n_overflow), y, alpha),
        )
        return y

    def _packed_launches(self) -> tuple[list[Launch], bool]:
        launches = ell_launches(self.ell_indices, self.ell_data, self.width, self._shape[0])
        if self.coo_data.size == 0:
            return launches, False
        if deterministic():
            return launches + reduce_launches(self.coo_row, self.coo_col, self.coo_data), False
        return launches + [atomic_launch(self.coo_row, self.coo_col, self.coo_data, self._dtype,
                                         self._index_dtype)], False

"""The rank's product ``y_local = A_rows @ x`` as ONE single-process product over an extended
vector, so that it is bitwise equal to the single-process product.

Rule: a row's sum must be the same sum in the same order as in the single-process kernel. A
local block and a halo block multiplied separately would split each boundary row's sum in two
and change its rounding. Instead x's needed entries are gathered into ``[my x | halo x]`` and
one CSR, whose column indices point into that vector and whose entries keep each row's
original (global) order, runs the ordinary single-process kernel.

Overlap splits rows, never sums: rows with no halo entry (interior rows) need only this rank's
x and can run while the halo is in flight; the boundary rows run once it has arrived. On the
GPU the row kernel's threads per row are fixed to what the whole matrix would get (its mean
row length), so each row's reduction tree is the single-process one.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from sparsegpu._backend import to_backend
from sparsegpu.formats import CSR
from sparsegpu.formats._compressed import threads_per_row


def _rows_of(S: sp.csr_array, rows: np.ndarray, n_cols: int) -> sp.csr_array:
    """Rows ``rows`` of ``S`` with each row's entries in their stored order."""
    lengths = np.diff(S.indptr)[rows]
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    starts = S.indptr[rows].astype(np.int64)
    take = np.repeat(starts - indptr[:-1], lengths) + np.arange(indptr[-1], dtype=np.int64)
    return sp.csr_array((S.data[take], S.indices[take], indptr), shape=(rows.size, n_cols))


def _device_csr(S: sp.csr_array, backend: str, tpr: int) -> CSR:
    """A sparsegpu CSR holding exactly ``S``'s entries in their order (unsorted indices kept)."""
    index_dtype = np.int32 if max(S.shape[1], S.nnz) < np.iinfo(np.int32).max else np.int64
    A = CSR((S.data, S.indices.astype(index_dtype), S.indptr.astype(index_dtype)), S.shape,
            backend=backend, index_dtype=index_dtype)
    A.threads_per_row = tpr
    return A


class ExtendedProduct:
    """This rank's rows as a CSR over ``[my x | halo x]`` (and, split, its interior and
    boundary rows), on the rank's backend."""

    def __init__(self, rows: sp.csr_array, n_own: int, n_halo: int, backend: str, global_mean: float,
                 split: bool) -> None:
        self.n_own, self.n_halo, self.backend = n_own, n_halo, backend
        self.shape = (rows.shape[0], n_own + n_halo)
        self.dtype = rows.dtype
        tpr = threads_per_row(global_mean)
        self.matrix = _device_csr(rows, backend, tpr)
        self.split = split
        if split:
            touches_halo = np.zeros(rows.shape[0], dtype=bool)
            row_of_entry = np.repeat(np.arange(rows.shape[0]), np.diff(rows.indptr))
            touches_halo[row_of_entry[rows.indices >= n_own]] = True
            interior, boundary = np.flatnonzero(~touches_halo), np.flatnonzero(touches_halo)
            self.interior = _device_csr(_rows_of(rows, interior, n_own), backend, tpr)
            self.boundary = _device_csr(_rows_of(rows, boundary, n_own + n_halo), backend, tpr)
            self.interior_rows = to_backend(interior, backend)
            self.boundary_rows = to_backend(boundary, backend)
        self._buffers: dict[Any, Any] = {}

    def extended_vector(self, x_local: Any) -> Any:
        """A buffer for ``[my x | halo x]``, allocated once per array library, with my x in place."""
        xp = self.matrix._xp
        ext = self._buffers.get("ext")
        if ext is None:
            ext = self._buffers["ext"] = xp.empty(self.shape[1], dtype=self.dtype)
        ext[:self.n_own] = x_local
        return ext

    def multiply(self, x_local: Any, exchanger: Any) -> Any:
        """``y_local`` for this rank's rows (collective: every rank exchanges its halo)."""
        ext = self.extended_vector(x_local)
        exchanger.start(ext[:self.n_own], ext[self.n_own:])
        if not self.split:
            exchanger.finish()
            return self.matrix @ ext
        y = self.matrix._xp.empty(self.shape[0], dtype=self.dtype)
        y[self.interior_rows] = self.interior @ ext[:self.n_own]  # while the halo travels
        exchanger.finish()
        y[self.boundary_rows] = self.boundary @ ext
        return y

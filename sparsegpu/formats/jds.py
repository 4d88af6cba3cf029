"""JDS: jagged diagonals of the rows sorted by length. ``A @ x`` runs kernels/spmv_jds.cu
(twin: reference.regular.jds_spmv)."""

from __future__ import annotations

from typing import Any

import numpy as np

from sparsegpu import convert
from sparsegpu._kernels import KernelFile, blocks_for
from sparsegpu.formats.ell import RegularMatrix, csr_from_positions, fill_slots, reject_params
from sparsegpu.reference import regular as twins

JDS_BLOCK = 256  # kernels/spmv_jds.cu JDS_BLOCK
JDS_KERNELS = KernelFile("spmv_jds.cu", ["jds_spmv<{V}, {I}>"])


def sorted_by_length(lengths: Any, window: int, xp: Any) -> Any:
    """The permutation that sorts rows by length, longest first, inside consecutive windows of
    ``window`` rows, keeping the original order among equal lengths (stable): ``perm[rank]``
    is the row at ``rank``. Sorts a unique int64 key, so any sort gives the same result."""
    m = lengths.size
    if m == 0 or window == 1:
        return xp.arange(m, dtype=lengths.dtype)
    longest = int(lengths.max())
    rows = xp.arange(m, dtype=np.int64)
    shortness = longest - lengths.astype(np.int64)
    key = ((rows // window) * (longest + 1) + shortness) * window + rows % window
    return xp.argsort(key).astype(lengths.dtype)


class JDS(RegularMatrix):
    """Jagged diagonal matrix: rows sorted by length, longest first, by a stable permutation
    (``perm[i]`` is the row at rank i); jagged diagonal d holds entry d of every row longer than
    d, in rank order, at ``jd_ptr[d]:jd_ptr[d + 1]`` (int64) of ``indices`` and ``data``. No
    padding.

    ``A @ x`` gives each rank one thread, which walks the diagonals (a warp reads consecutive
    entries of each) until one is too short for it, then writes ``y[perm[i]]``. Bitwise
    reproducible, as is ``A.T @ x`` (over a cached CSR of A^T; atomics, not reproducible, with
    ``sparsegpu.options(deterministic=False)``).

    >>> import numpy as np, scipy.sparse as sp
    >>> from sparsegpu.formats import JDS
    >>> S = sp.tril(sp.random(40, 40, density=0.2, random_state=5), format="csr")
    >>> A = JDS.from_scipy(S)
    >>> x = np.arange(40.0)
    >>> bool(np.allclose(A @ x, S @ x)) and (A.to_scipy() != S).nnz == 0
    True
    """

    format = "jds"
    _array_names = ("jd_ptr", "indices", "data", "perm")
    _value_names = ("data",)
    jd_ptr: Any
    indices: Any
    data: Any
    perm: Any

    @classmethod
    def _from_csr(cls, csr: Any, **params: Any) -> JDS:
        reject_params(cls, params)
        xp = csr._xp
        m, _ = csr.shape
        lengths = xp.diff(csr.indptr)
        perm = sorted_by_length(lengths, max(m, 1), xp)
        # Diagonal d holds one entry of each row longer than d: with the lengths sorted, a
        # binary search per diagonal counts them (no histogram, whose atomics contend when
        # most rows have the same length).
        negated = -lengths[perm]
        longest = int(-negated[0]) if m else 0
        rows_longer = xp.searchsorted(negated, -xp.arange(longest, dtype=negated.dtype), side="left")
        jd_ptr = xp.zeros(longest + 1, dtype=np.int64)
        xp.cumsum(rows_longer, out=jd_ptr[1:])
        indices, data = fill_slots(csr, twins.LAYOUT_JDS, csr.nnz, perm=perm, offsets=jd_ptr)
        return cls._new(csr.shape, csr.backend, csr.nnz, jd_ptr=jd_ptr, indices=indices, data=data, perm=perm)

    def to_csr(self) -> Any:
        xp = self._xp
        diagonals = convert.expand_pointers(self.jd_ptr, xp)
        ranks = xp.arange(self._nnz, dtype=np.int64) - self.jd_ptr[diagonals]
        return csr_from_positions(self.perm[ranks], diagonals, self.indices, self.data, self._shape,
                                  self._index_dtype, self._backend, xp)

    def _forward(self, x: Any, y: Any, alpha: Any, beta: Any) -> Any:
        if self._backend == "cpu":
            return twins.jds_spmv(self.jd_ptr, self.indices, self.data, self.perm, x, y, alpha, beta)
        if y.size == 0:
            return y
        kernel = JDS_KERNELS.function("jds_spmv<{V}, {I}>", self._dtype, self._index_dtype)
        kernel(
            (blocks_for(y.size, JDS_BLOCK),), (JDS_BLOCK,),
            (self.jd_ptr, self.indices, self.data, self.perm, np.int64(y.size), np.int64(self.jd_ptr.size - 1),
             x, y, alpha, beta),
        )
        return y

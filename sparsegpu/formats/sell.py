"""SELL-C-sigma: slices of C rows, each an ELL block of its own width, after sorting rows by
length inside windows of sigma rows. ``A @ x`` runs kernels/spmv_sell.cu (twin:
reference.regular.sell_spmv).

Defaults: C = 32, one warp per slice, so a warp's loads at each slot are 32 consecutive
entries. sigma = 256 = the kernel's block (8 slices): sorting inside a window cuts the padding
of each slice to the spread of lengths among neighbouring rows, while a block still writes only
its own 256 rows of y (in a few cache lines) and keeps the original order's locality in x at
the scale of a block. A larger sigma pads less on very irregular matrices at the price of that
locality (sigma = n_rows sorts globally, like JDS); sigma = 1 does not sort (sliced ELL).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sparsegpu import primitives
from sparsegpu._kernels import KernelFile, blocks_for
from sparsegpu.formats.ell import (
    RegularMatrix,
    csr_from_positions,
    fill_slots,
    int_at_least,
    reject_params,
)
from sparsegpu.formats.jds import sorted_by_length
from sparsegpu.reference import regular as twins

SELL_BLOCK = 256  # kernels/spmv_sell.cu SELL_BLOCK
#: Slice heights the kernel is compiled for (powers of two dividing the block).
SELL_CHUNKS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
DEFAULT_C = 32
DEFAULT_SIGMA = 256

SELL_KERNELS = KernelFile("spmv_sell.cu",
                          [f"sell_spmv<{{V}}, {{I}}, {c}>" for c in SELL_CHUNKS] + ["sell_slice_widths<{I}>"])


class SELL(RegularMatrix):
    """SELL-C-sigma matrix. Rows are sorted by length, longest first, inside windows of
    ``sigma`` rows (stable: ``perm[rank]`` is the row at ``rank``), then cut into slices of
    ``C`` consecutive ranks. Slice s is an ELL block of ``C`` rows, stored column-major in
    ``indices`` and ``data`` from ``slice_ptr[s]`` (slot k of lane l at
    ``slice_ptr[s] + k * C + l``; width ``(slice_ptr[s + 1] - slice_ptr[s]) / C``, the longest
    of its rows); padding slots hold column -1 and value 0. ``slice_ptr`` is int64.

    ``A @ x``: one thread per row, writing ``y[perm[rank]]``; bitwise reproducible, as is
    ``A.T @ x`` (over a cached CSR of A^T; atomics, not reproducible, with
    ``sparsegpu.options(deterministic=False)``). Format parameters ``C`` (one of 1, 2, 4, ...,
    256; default 32) and ``sigma`` (at least 1; default 256; best a multiple of C): see the
    module docstring.

    >>> import numpy as np, scipy.sparse as sp
    >>> from sparsegpu.formats import SELL
    >>> S = sp.random(100, 80, density=0.08, random_state=6, format="csr")
    >>> A = SELL.from_scipy(S, C=8, sigma=64)
    >>> x = np.arange(80.0)
    >>> bool(np.allclose(A @ x, S @ x)) and (A.to_scipy() != S).nnz == 0
    True
    >>> A.C, A.sigma, A.slice_ptr.size - 1
    (8, 64, 13)
    """

    format = "sell"
    _array_names = ("slice_ptr", "indices", "data", "perm")
    _value_names = ("data",)
    _scalar_names = ("C", "sigma")
    slice_ptr: Any
    indices: Any
    data: Any
    perm: Any
    C: int
    sigma: int

    @classmethod
    def _from_csr(cls, csr: Any, C: int = DEFAULT_C, sigma: int = DEFAULT_SIGMA, **params: Any) -> SELL:
        reject_params(cls, params)
        C = int_at_least("C", C, 1)
        if C not in SELL_CHUNKS:
            raise ValueError(f"C must be one of {SELL_CHUNKS} (the slice heights compiled), got {C}")
        sigma = int_at_least("sigma", sigma, 1)
        xp = csr._xp
        m, _ = csr.shape
        perm = sorted_by_length(csr, sigma)
        n_slices = -(-m // C)
        # Slice widths from the sorted lengths (one thread per slice), scanned into slice_ptr;
        # the one host read is the slot count, to allocate the slots.
        widths = xp.empty(n_slices + 1, dtype=np.int64)
        window = min(sigma, max(m, 1))  # the sort's windows (sigma past the rows: one window)
        arguments = (csr.indptr, perm, np.int64(m), np.int64(C), np.int64(window), np.int64(n_slices), widths)
        if csr.backend == "cpu":
            twins.sell_slice_widths(*(int(a) if isinstance(a, np.integer) else a for a in arguments))
        else:
            kernel = SELL_KERNELS.function("sell_slice_widths<{I}>", csr.dtype, csr.index_dtype)
            kernel((blocks_for(n_slices + 1, SELL_BLOCK),), (SELL_BLOCK,), arguments)
        slice_ptr = primitives.exclusive_scan(widths)
        indices, data = fill_slots(csr, twins.LAYOUT_SELL, int(slice_ptr[-1]), perm=perm, offsets=slice_ptr, C=C,
                                   n_ranks=n_slices * C)
        return cls._new(csr.shape, csr.backend, csr.nnz, slice_ptr=slice_ptr, indices=indices, data=data,
                        perm=perm, C=C, sigma=sigma)

    def to_csr(self) -> Any:
        xp, C = self._xp, self.C
        slots = xp.flatnonzero(self.indices >= 0)
        slices = xp.searchsorted(self.slice_ptr, slots, side="right") - 1
        within = slots - self.slice_ptr[slices]
        rows = self.perm[slices * C + within % C]
        positions = (within // C).astype(self._index_dtype)
        return csr_from_positions(rows, positions, self.indices[slots], self.data[slots], self._shape,
                                  self._index_dtype, self._backend, xp)

    @property
    def fill(self) -> float:
        """Padding slots per stored entry."""
        slots = int(self.slice_ptr[-1])
        return (slots - self._nnz) / self._nnz if self._nnz else 0.0

    def _forward(self, x: Any, y: Any, alpha: Any, beta: Any) -> Any:
        if self._backend == "cpu":
            return twins.sell_spmv(self.slice_ptr, self.indices, self.data, self.perm, self.C, x, y, alpha, beta)
        if y.size == 0:
            return y
        kernel = SELL_KERNELS.function(f"sell_spmv<{{V}}, {{I}}, {self.C}>", self._dtype, self._index_dtype)
        kernel(
            (blocks_for(y.size, SELL_BLOCK),), (SELL_BLOCK,),
            (self.slice_ptr, self.indices, self.data, self.perm, np.int64(y.size), x, y, alpha, beta),
        )
        return y

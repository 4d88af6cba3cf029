"""JDS: jagged diagonals of the rows sorted by length. ``A @ x`` runs kernels/spmv_jds.cu
(NumPy reference: reference.regular.jds_spmv).

Also home of :func:`sorted_by_length`, the stable sort of rows by length inside windows that
JDS (one window) and SELL-C-sigma (windows of sigma rows) share: a counting sort on the device
(kernels/spmv_jds.cu), never a general sort of a wide key.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sparsegpu import convert, primitives
from sparsegpu._kernels import KernelFile, blocks_for
from sparsegpu.formats._fast_product import ALPHA, BETA, Launch, X, Y
from sparsegpu.formats.ell import (
    RegularMatrix,
    csr_from_positions,
    fill_slots,
    reject_params,
)
from sparsegpu.reference import regular as reference

JDS_BLOCK = 256  # kernels/spmv_jds.cu JDS_BLOCK
RANK_BLOCK = reference.RANK_BLOCK  # kernels/spmv_jds.cu RANK_BLOCK
DIGIT_BITS = 8  # kernels/spmv_jds.cu DIGIT_BITS
#: The product loads the once-read arrays evict-first and stores y evict-last (kernels/spmv_jds.cu
#: explains why); False gives the plain loads and stores, for comparison.
JDS_CACHE_HINTS = True
#: Construction kernels of kernels/spmv_jds.cu with their NumPy references (and the reference's extra argument:
#: the kernel's SCATTER template flag).
CONSTRUCTION_KERNELS = {
    "rank_small_windows<{I}>": (reference.rank_small_windows, ()),
    "radix_pass<{I}, false>": (reference.radix_pass, (False,)),
    "radix_pass<{I}, true>": (reference.radix_pass, (True,)),
    "jds_diagonal_lengths<{I}>": (reference.jds_diagonal_lengths, ()),
}
JDS_KERNELS = KernelFile(
    "spmv_jds.cu", [f"jds_spmv<{{V}}, {{I}}, {hints}>" for hints in ("true", "false")] + list(CONSTRUCTION_KERNELS))


def _launch(csr: Any, expression: str, threads: int, *arguments: Any) -> None:
    """Construction kernel ``expression`` over ``threads`` threads in blocks of RANK_BLOCK on
    the GPU, its NumPy reference on the CPU."""
    if csr.backend == "cpu":
        reference_kernel, extra = CONSTRUCTION_KERNELS[expression]
        reference_kernel(*(int(a) if isinstance(a, np.integer) else a for a in arguments), *extra)
        return
    kernel = JDS_KERNELS.function(expression, csr.dtype, csr.index_dtype)
    kernel((blocks_for(threads, RANK_BLOCK),), (RANK_BLOCK,), arguments)


def sorted_by_length(csr: Any, window: int, longest: int | None = None) -> Any:
    """The permutation that sorts ``csr``'s rows by length, longest first, inside consecutive
    windows of ``window`` rows, keeping the original order among equal lengths (stable):
    ``perm[rank]`` is the row at ``rank``, in the CSR's index dtype, on its backend.
    ``longest``: the longest row's length when the caller knows it (saves a reduction).

    Windows of at most RANK_BLOCK (256) rows: one launch sorts whole windows per block in shared
    memory. Larger windows: a stable LSD radix sort of ``longest - length``, 8 bits a pass (one
    pass when rows are shorter than 256), each pass a count per tile of 256 rows, an exclusive
    scan (:func:`sparsegpu.primitives.exclusive_scan`) and a scatter; ``longest`` costs one
    reduction and a host read when not given.

    >>> import numpy as np, scipy.sparse as sp
    >>> from sparsegpu.formats import CSR
    >>> S = sp.csr_array(np.array([[1, 0, 0], [1, 1, 1], [0, 0, 0], [1, 1, 0.0]]))
    >>> sorted_by_length(CSR.from_scipy(S, backend="cpu"), 4).tolist()
    [1, 3, 0, 2]
    >>> sorted_by_length(CSR.from_scipy(S, backend="cpu"), 2).tolist()
    [1, 0, 3, 2]
    """
    xp, m, index_dtype = csr._xp, csr.shape[0], csr.index_dtype
    window = min(int(window), m)
    if window <= 1:
        return xp.arange(m, dtype=index_dtype)
    if window <= RANK_BLOCK:
        perm = xp.empty(m, dtype=index_dtype)
        per_block = (RANK_BLOCK // window) * window
        _launch(csr, "rank_small_windows<{I}>", blocks_for(m, per_block) * RANK_BLOCK, csr.indptr, np.int64(m),
                np.int64(window), perm)
        return perm
    if longest is None:
        longest = int(primitives.reduce(convert.row_lengths(csr.indptr), "max"))
    if longest == 0:
        return xp.arange(m, dtype=index_dtype)
    bits = longest.bit_length()
    digit_bits = min(DIGIT_BITS, bits)
    bins = 1 << digit_bits
    tiles_per_window = -(-window // RANK_BLOCK)
    n_windows = -(-m // window)
    counts = xp.empty(n_windows * bins * tiles_per_window, dtype=index_dtype)
    threads = n_windows * tiles_per_window * RANK_BLOCK
    perm = xp.empty(0, dtype=index_dtype)  # the first pass reads the rows in their order
    for shift in range(0, bits, digit_bits):
        out = xp.empty(m, dtype=index_dtype)
        common = (csr.indptr, perm, np.int64(shift == 0), np.int64(m), np.int64(window),
                  np.int64(tiles_per_window), np.int64(longest), np.int64(shift), np.int64(bins))
        _launch(csr, "radix_pass<{I}, false>", threads, *common, counts, out)
        _launch(csr, "radix_pass<{I}, true>", threads, *common, primitives.exclusive_scan(counts), out)
        perm = out
    return perm


class JDS(RegularMatrix):
    """Jagged diagonal matrix: rows sorted by length, longest first, by a stable permutation
    (``perm[i]`` is the row at rank i); jagged diagonal d holds entry d of every row longer than
    d, in rank order, at ``jd_ptr[d]:jd_ptr[d + 1]`` (int64) of ``indices`` and ``data``. No
    padding.

    ``A @ x`` gives each rank one thread, which walks the diagonals (a warp reads consecutive
    entries of each) until one is too short for it, then writes ``y[perm[i]]``; the arrays read
    once are marked evict-first in L2 and y evict-last (:data:`JDS_CACHE_HINTS`), as y's writes
    are scattered. Bitwise reproducible, as is ``A.T @ x`` (over a cached CSR of A^T; atomics,
    not reproducible, with ``sparsegpu.options(deterministic=False)``).

    Built on the device with one reduction (the longest row, read by the host), the counting
    sort of :func:`sorted_by_length` (one pass for rows shorter than 256), one pass counting the
    rows longer than each diagonal, a scan for ``jd_ptr`` and the one-pass copy of the entries.

    Parameters
    ----------
    matrix : scipy sparse matrix or SparseMatrix
        The matrix to store (any scipy format, or any sparsegpu format on either backend).
    dtype, index_dtype, backend : optional
        As in :meth:`SparseMatrix.from_scipy`; for scipy input only.

    Raises
    ------
    TypeError
        ``matrix`` of another type; ``dtype``, ``index_dtype`` or ``backend`` given with a
        sparsegpu matrix; an unknown format parameter; an unsupported dtype.
    ValueError
        A matrix that cannot fit in memory.

    See Also
    --------
    SparseMatrix.from_scipy : ``JDS.from_scipy(S)`` builds one from scipy.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from sparsegpu.formats import JDS
    >>> S = sp.tril(sp.random(40, 40, density=0.2, random_state=5), format="csr")
    >>> A = JDS.from_scipy(S, backend="cpu")
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
        longest = int(primitives.reduce(convert.row_lengths(csr.indptr), "max")) if m else 0
        perm = sorted_by_length(csr, m, longest)
        # Diagonal d holds one entry of each row longer than d: counted from the sorted lengths
        # in one pass (a rank writes the diagonals it is the last row of), then scanned.
        rows_longer = xp.zeros(longest + 1, dtype=np.int64)
        if m:
            _launch(csr, "jds_diagonal_lengths<{I}>", m, csr.indptr, perm, np.int64(m), rows_longer)
        jd_ptr = primitives.exclusive_scan(rows_longer)
        indices, data = fill_slots(csr, reference.LAYOUT_JDS, csr.nnz, perm=perm, offsets=jd_ptr)
        return cls._new(csr.shape, csr.backend, csr.nnz, jd_ptr=jd_ptr, indices=indices, data=data, perm=perm)

    def to_csr(self) -> Any:
        xp = self._xp
        diagonals = convert.expand_pointers(self.jd_ptr, xp)
        ranks = xp.arange(self._nnz, dtype=np.int64) - self.jd_ptr[diagonals]
        return csr_from_positions(self.perm[ranks], diagonals, self.indices, self.data, self._shape,
                                  self._index_dtype, self._backend, xp)

    def _forward(self, x: Any, y: Any, alpha: Any, beta: Any) -> Any:
        if self._backend == "cpu":
            return reference.jds_spmv(self.jd_ptr, self.indices, self.data, self.perm, x, y, alpha, beta)
        if y.size == 0:
            return y
        hints = "true" if JDS_CACHE_HINTS else "false"
        kernel = JDS_KERNELS.function(f"jds_spmv<{{V}}, {{I}}, {hints}>", self._dtype, self._index_dtype)
        kernel(
            (blocks_for(y.size, JDS_BLOCK),), (JDS_BLOCK,),
            (self.jd_ptr, self.indices, self.data, self.perm, np.int64(y.size), np.int64(self.jd_ptr.size - 1),
             x, y, alpha, beta),
        )
        return y

    def _packed_launches(self) -> tuple[list[Launch], bool]:
        m = self._shape[0]
        if m == 0:
            return [], False
        kernel = JDS_KERNELS.function(f"jds_spmv<{{V}}, {{I}}, {self._fast_key()}>", self._dtype, self._index_dtype)
        return [Launch(kernel, blocks_for(m, JDS_BLOCK), JDS_BLOCK,
                       (self.jd_ptr, self.indices, self.data, self.perm, np.int64(m), np.int64(self.jd_ptr.size - 1),
                        X, Y, ALPHA, BETA))], False

    def _fast_key(self) -> str:
        return "true" if JDS_CACHE_HINTS else "false"  # the kernel's CACHE_HINTS (JDS_CACHE_HINTS)

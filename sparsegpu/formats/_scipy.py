"""SciPy at both ends of a matrix: input made safe to store (type checks, canonical copies that
share nothing with the caller's arrays, byte counts checked against memory before anything is
allocated), and the CPU backend's products through SciPy's compiled kernels."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from sparsegpu import _validate
from sparsegpu._backend import is_device_array
from sparsegpu.reference.spmv import combine


def as_scipy_sparse(S: Any) -> sp.sparray | sp.spmatrix:
    """``S`` if it is a 2-D scipy sparse matrix or array; otherwise a TypeError naming it. Its
    stored arrays are not checked here (:func:`sparsegpu._validate.check_scipy` does that)."""
    if not sp.issparse(S):
        raise TypeError(
            f"expected a scipy.sparse matrix or array, got {type(S).__module__}.{type(S).__name__}"
        )
    if S.ndim != 2:
        raise ValueError(f"expected a 2-D sparse matrix, got {S.ndim}-D")
    return S


def compressed_bytes(n_major: int, nnz: int, value_dtype: Any, index_dtype: Any) -> int:
    """Bytes of a CSR or CSC with ``n_major`` rows (columns) and ``nnz`` stored entries."""
    index_bytes = np.dtype(index_dtype).itemsize
    return (n_major + 1) * index_bytes + nnz * (np.dtype(value_dtype).itemsize + index_bytes)


def canonical_scipy(S: Any, layout: str, dtype: Any = None, index_dtype: Any = None,
                    casting: str = "same_kind", *, checked: bool = False, own: bool = True) -> sp.sparray:
    """``S`` as a scipy ``csr_array`` or ``csc_array`` in canonical form: duplicates summed,
    indices sorted, values and indices in the dtypes sparsegpu stores, in arrays of its own.

    ``S``'s arrays are checked first (:func:`sparsegpu._validate.check_scipy`), so no SciPy routine sees a
    corrupted matrix, and the result's size is checked against the host's memory. Explicit zeros
    are kept (they are stored entries and count in ``nnz``); call ``S.eliminate_zeros()`` first
    to drop them. The caller's matrix is never modified and never shared. ``checked``: ``S`` is
    what :func:`sparsegpu._validate.check_scipy` returned for it (its checks are not repeated).
    ``own=False``: the result may share the caller's arrays, for a caller that copies them at
    once (an upload to the GPU), so the host pays for no copy of its own."""
    if not checked:
        S = _validate.check_scipy(S)
    value_dt = _validate.stored_dtype(S.dtype, dtype, casting)
    index_dt = _validate.index_dtype(S.shape, S.nnz, index_dtype)
    n_major = S.shape[0] if layout == "csr" else S.shape[1]
    _validate.ensure_fits(compressed_bytes(n_major, S.nnz, value_dt, np.int64), f"a {S.shape} {layout.upper()}", "cpu")
    compressed = (sp.csr_array if layout == "csr" else sp.csc_array)(S)
    # SciPy caches canonical-format flags, which go stale when arrays change after construction.
    compressed.has_canonical_format = _validate.is_canonical(compressed.indptr, compressed.indices)
    if not compressed.has_canonical_format:
        # The conversion may share the caller's arrays, and sum_duplicates works in place.
        compressed = compressed.copy()
        compressed.sum_duplicates()
    originals = [a for a in (getattr(S, name, None) for name in ("data", "indices", "indptr", "row", "col"))
                 if isinstance(a, np.ndarray)]
    if not own:
        originals = []
    compressed.data = _owned(_validate.cast_values(compressed.data, value_dt), originals)
    compressed.indices = _owned(compressed.indices.astype(index_dt, copy=False), originals)
    compressed.indptr = _owned(compressed.indptr.astype(index_dt, copy=False), originals)
    return compressed


def host_copy(a: Any) -> np.ndarray:
    """A NumPy array of ``a``'s contents that shares nothing with it."""
    return a.get() if is_device_array(a) else np.array(a, copy=True)


def _owned(a: np.ndarray, originals: list[np.ndarray]) -> np.ndarray:
    """``a``, copied when it shares memory with any of the caller's ``originals``."""
    return a.copy() if any(np.may_share_memory(a, o) for o in originals) else a


try:  # SciPy's compiled kernels behind ``S @ x``, which accumulate into a given array
    from scipy.sparse._sparsetools import csc_matvec, csr_matvec

    _MATVEC = {"csr": csr_matvec, "csc": csc_matvec}
except ImportError:  # a SciPy without them: the public product and a copy
    _MATVEC = {}


def scipy_product(matrix: Any, x: np.ndarray, y: np.ndarray | None, alpha: Any, beta: Any, transpose: bool) -> np.ndarray:
    """The CPU backend's ``alpha * A @ x + beta * y`` (``A.T`` with ``transpose``) for a
    ``matrix`` on the CPU: SciPy's compiled CSR (CSC for ``A.T``) product over a view of the
    matrix built once and kept in its cache, so the CPU backend runs at SciPy's speed whatever
    the format. The format's NumPy reference runs only when asked
    (:meth:`SparseMatrix.reference_spmv <sparsegpu.formats.SparseMatrix.reference_spmv>`)."""
    key = "scipy_t" if transpose else "scipy"
    view = matrix._cache.get(key)
    if view is None:
        if matrix.format != "csr" and "host_csr" not in matrix._cache:  # shared by both views
            matrix._cache["host_csr"] = matrix.to_csr()
        csr = matrix if matrix.format == "csr" else matrix._cache["host_csr"]
        plain = sp.csr_array((csr.data, csr.indices, csr.indptr), shape=matrix._shape, copy=False)
        view = matrix._cache[key] = plain.T if transpose else plain
    if y is None:
        product = view @ x
        return product if alpha == 1 else np.multiply(product, alpha, out=product)
    if beta == 0 and _MATVEC and y.flags.c_contiguous:
        # Straight into y, as SciPy's own product fills the array it allocates: no temporary,
        # no copy (a product on a matrix of 10^5 entries costs tens of microseconds less).
        y.fill(0)
        _MATVEC[view.format](*view.shape, view.indptr, view.indices, view.data, np.ascontiguousarray(x), y)
        if alpha != 1:
            y *= alpha
        return y
    return combine(y, view @ x, alpha, beta)

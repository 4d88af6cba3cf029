"""Reference SpMV for the COO, CSR and CSC layouts: y = alpha * A x + beta * y, written into y.

Each takes the format's arrays exactly as the kernel does. When ``beta`` is zero, ``y`` is not
read (it may hold garbage), as in the kernels.
"""

from __future__ import annotations

import numpy as np


def segment_sum(keys: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """``out[k] = sum(values[keys == k])`` for k in range(n), in ``values``' dtype.

    Sums accumulate in float64 (complex128 for complex values) and are rounded once at the end.
    """
    if np.iscomplexobj(values):
        real = np.bincount(keys, weights=values.real, minlength=n)
        imag = np.bincount(keys, weights=values.imag, minlength=n)
        return (real + 1j * imag).astype(values.dtype, copy=False)
    return np.bincount(keys, weights=values, minlength=n).astype(values.dtype, copy=False)


def _expand(indptr: np.ndarray) -> np.ndarray:
    """The major index of every stored entry of a compressed layout."""
    return np.repeat(np.arange(indptr.size - 1, dtype=indptr.dtype), np.diff(indptr))


def scaled(alpha, values: np.ndarray, dtype) -> np.ndarray:
    """``dtype(alpha) * values``, and ``values`` themselves when alpha is one (as the kernels'
    ``sg::scaled``): a complex one times an infinite or NaN part would make the other part NaN."""
    return values if alpha == 1 else dtype(alpha) * values


def combine(y: np.ndarray, sums: np.ndarray, alpha, beta) -> np.ndarray:
    dtype = y.dtype.type
    if beta == 0:
        y[...] = scaled(alpha, sums, dtype)
    else:
        y[...] = scaled(alpha, sums, dtype) + dtype(beta) * y
    return y


def coo_spmv(rows, cols, data, x, y, alpha=1, beta=0):
    """COO reference of kernels/spmv_coo.cu (``coo_reduce_tiles``, ``coo_spmv_atomic``)."""
    return combine(y, segment_sum(rows, data * x[cols], y.size), alpha, beta)


def csr_spmv(indptr, indices, data, x, y, alpha=1, beta=0):
    """CSR reference of kernels/spmv_csr.cu: rows gather ``data * x[indices]``, summed in entry
    order (``np.add.reduceat`` over the row starts; empty rows give 0)."""
    if y.size == 0:
        return y
    # A trailing zero keeps every row start a valid index for reduceat, empty rows at the end too.
    products = np.concatenate([data * x[indices], np.zeros(1, y.dtype)])
    sums = np.add.reduceat(products, indptr[:-1])
    sums[indptr[1:] == indptr[:-1]] = 0  # reduceat yields the element itself for an empty segment
    return combine(y, sums, alpha, beta)


def csc_spmv(indptr, indices, data, x, y, alpha=1, beta=0):
    """CSC reference of kernels/spmv_csc.cu: column j scatters ``data * x[j]`` to rows ``indices``."""
    return combine(y, segment_sum(indices, data * x[_expand(indptr)], y.size), alpha, beta)


def dot_into(w, y, out):
    """Reference of the dot product in the epilogue of the SpMV kernels (``dot`` argument of
    kernels/spmv_csr.cu ``csr_spmv_rows`` and kernels/spmv_ell.cu ``ell_spmv``, and of
    kernels/krylov.cu op DOT): ``out[0] = sum_i w_i * y_i`` accumulated in float64."""
    out[0] = np.dot(w.astype(np.float64, copy=False), y.astype(np.float64, copy=False))
    return out

"""Reference SpMM over the CSR, ELL and SELL-C-sigma layouts: Y = alpha * A X + beta * Y for a
dense X of k columns, written into Y, over exactly the arrays kernels/spmm.cu reads.

X and Y are 2-D NumPy arrays of any order (the kernels read and write them through their
strides; so does NumPy here). When ``beta`` is zero, ``Y`` is not read (it may hold NaN), as in
the kernels. Row sums accumulate in float64 (complex128) by
:func:`sparsegpu.reference.spmv.segment_sum` column by column, so CPU and GPU agree to
rounding, not bitwise.
"""

from __future__ import annotations

import numpy as np

from sparsegpu.reference.spmv import scaled, segment_sum


def combine_block(Y: np.ndarray, sums: np.ndarray, alpha, beta) -> np.ndarray:
    """Y = alpha * sums + beta * Y in place (Y not read when beta is zero); returns Y."""
    dtype = Y.dtype.type
    if beta == 0:
        Y[...] = scaled(alpha, sums, dtype)
    else:
        Y[...] = scaled(alpha, sums, dtype) + dtype(beta) * Y
    return Y


def row_sums(rows: np.ndarray, cols: np.ndarray, values: np.ndarray, X: np.ndarray, n_rows: int,
             dtype: np.dtype) -> np.ndarray:
    """``out[r, :] = sum over j with rows[j] == r of values[j] * X[cols[j], :]``: one
    segmented sum per column of X (no n_entries x k temporary)."""
    out = np.zeros((n_rows, X.shape[1]), dtype=dtype)
    for column in range(X.shape[1]):
        out[:, column] = segment_sum(rows, values * X[cols, column], n_rows)
    return out


def csr_spmm(indptr, indices, data, X, Y, alpha=1, beta=0):
    """CSR reference of kernels/spmm.cu ``csr_spmm_rows`` and ``csr_spmm_cols``: row i adds
    ``data[j] * X[indices[j], :]`` over its entries ``indptr[i]:indptr[i+1]``."""
    n_rows = Y.shape[0]
    rows = np.repeat(np.arange(n_rows, dtype=np.int64), np.diff(indptr))
    return combine_block(Y, row_sums(rows, indices, data, X, n_rows, Y.dtype), alpha, beta)


def ell_spmm(indices, data, width, X, Y, alpha=1, beta=0):
    """ELL reference of kernels/spmm.cu ``ell_spmm_rows`` and ``ell_spmm_cols``: slot k of row
    r at ``k * n_rows + r``, padding slots (column -1) skipped."""
    n_rows = Y.shape[0]
    rows = np.tile(np.arange(n_rows, dtype=np.int64), int(width))
    stored = indices >= 0
    sums = row_sums(rows[stored], indices[stored], data[stored], X, n_rows, Y.dtype)
    return combine_block(Y, sums, alpha, beta)


def sell_spmm(slice_ptr, indices, data, perm, C, X, Y, alpha=1, beta=0):
    """SELL-C-sigma reference of kernels/spmm.cu ``sell_spmm_rows`` and ``sell_spmm_cols``:
    slot k of lane l of slice s at ``slice_ptr[s] + k * C + l`` holds an entry of row
    ``perm[s * C + l]``; padding slots (column -1) skipped. Layouts with split slices or hot
    columns (columns below -1) are not read by these kernels (the host runs their CSR)."""
    n_rows, n_slices = Y.shape[0], slice_ptr.size - 1
    if np.any(indices < -1):
        raise ValueError("sell_spmm reads layouts without hot columns (no column below -1)")
    slots = np.arange(indices.size, dtype=np.int64)
    slice_of_slot = np.repeat(np.arange(n_slices, dtype=np.int64), np.diff(slice_ptr))
    rank = slice_of_slot * C + (slots - slice_ptr[slice_of_slot]) % C
    stored = indices >= 0
    rows = perm[rank[stored]].astype(np.int64)
    sums = row_sums(rows, indices[stored], data[stored], X, n_rows, Y.dtype)
    return combine_block(Y, sums, alpha, beta)


def dense_transpose(src, s_r, s_c, dst, d_r, d_c, rows, cols, alpha=1, beta=0):
    """Reference of kernels/spmm.cu ``dense_transpose`` over flat arrays: dst(r, c) = alpha *
    src(r, c) + beta * dst(r, c) for r < rows, c < cols, src(r, c) at ``src[r * s_r + c * s_c]``
    and dst(r, c) at ``dst[r * d_r + c * d_c]`` (element strides); dst not read when beta is
    zero. Returns dst."""
    r = np.arange(rows, dtype=np.int64)[:, None]
    c = np.arange(cols, dtype=np.int64)[None, :]
    at = r * d_r + c * d_c
    values = src[r * s_r + c * s_c]
    dtype = dst.dtype.type
    dst[at] = scaled(alpha, values, dtype) if beta == 0 else scaled(alpha, values, dtype) + dtype(beta) * dst[at]
    return dst

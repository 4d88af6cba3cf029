"""Sparse times dense: ``A @ X`` and ``A.spmm(X, Y, alpha, beta)`` for a 2-D X of k columns.

Y = alpha * op(A) X + beta * Y, op(A) being A or A^T (``A.T @ X``). The result's dtype is
NumPy's promotion of the matrix's and X's (``np.result_type``, as SciPy's); a matrix whose
dtype is narrower runs over a copy of its values in the result's dtype, made once and cached.

GPU backend (kernels/spmm.cu, references in :mod:`sparsegpu.reference.spmm`): X and Y are read
and written through their strides, never copied. The kernel family follows X's layout:

- row-major X (column stride 1, C order): ``*_rows`` kernels, a group of G lanes per row, each
  lane a few chunks of VEC consecutive columns (VEC: one 16-byte vector load when X and Y allow
  it), so each entry of A is read once for up to G * VEC * TILES columns. G is the smallest
  power of two with G * VEC >= k, at most 32; past 32 lanes each lane takes up to 4 chunks
  (TILES), and wider X loops over panels of that width.
- column-major X (row stride 1, F order, and any k = 1): ``*_cols`` kernels, rows covered as
  SpMV covers them (CSR: a sub-warp per row sized from the mean row length), k in tiles of up
  to 8 columns along the grid's second dimension, so each entry of A is read once per tile.
  On a matrix whose columns are scattered (graphs; the rule, decided per matrix, is in
  :mod:`sparsegpu.formats._spmm_device`) and k >= 4, X is instead copied into a row-major
  scratch (n x k values) for the ``*_rows`` kernels, and a Y that is not row-major gets one too
  (m x k values), copied back: internal, from CuPy's pool for the call, never returned.

CSR, ELL and SELL-C-sigma (direct layouts) have kernels of their own; every other format
(COO, CSC, HYB, JDS, SELL with split slices or hot columns) and ``A.T @ X`` run through a CSR
built once and cached on the matrix (for ``A.T``, A^T's CSR). Each output element is summed in
a fixed order: bitwise reproducible run to run (in entry order, except ``csr_spmm_cols`` with
several lanes per row, which adds lane-strided partial sums; a staged product equals the
row-major one bit for bit).

CPU backend: SciPy's compiled ``csr_matvecs`` (C order) or one ``csr_matvec`` per column (F
order) over the matrix's CSR, writing into Y where its layout allows; ``csc_matvecs`` for A^T.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from sparsegpu import _validate
from sparsegpu._backend import is_device_array
from sparsegpu._kernels import VALUE_DTYPES
from sparsegpu.formats._spmm_device import csr_in, device_spmm
from sparsegpu.reference.spmm import combine_block

# --------------------------------------------------------------------------- checks


def check_dense(X: Any, n: int, shape: tuple[int, int], matrix_dtype: np.dtype) -> tuple[Any, np.dtype]:
    """``X`` as a 2-D array of the product's dtype (NumPy's promotion of ``matrix_dtype`` and
    X's; X is cast, so copied, only when its dtype differs), and that dtype. ``shape``: the
    operator's, for messages."""
    if not hasattr(X, "dtype") or not hasattr(X, "ndim"):
        X = np.asarray(X)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D (n x k) for a product with a {shape[0]}x{shape[1]} operator, "
                         f"got shape {tuple(X.shape)}; use spmv for a 1-D x")
    if X.shape[0] != n:
        raise ValueError(f"dimension mismatch: the operator is {shape[0]}x{shape[1]} but X is "
                         f"{X.shape[0]}x{X.shape[1]} (X needs {n} rows)")
    if X.dtype.kind not in "biufc":
        raise TypeError(f"X has dtype {X.dtype}, which is not numeric")
    dtype = np.result_type(matrix_dtype, X.dtype)
    if dtype not in VALUE_DTYPES:
        raise TypeError(f"a product of a {matrix_dtype} matrix and X of dtype {X.dtype} would be {dtype}; "
                        f"sparsegpu computes in {', '.join(str(d) for d in VALUE_DTYPES)}")
    if X.itemsize and any(s % X.itemsize for s in X.strides):
        X = X.copy()  # strides of whole elements only (a view into a record array)
    return (X if X.dtype == dtype else X.astype(dtype)), dtype


def check_dense_out(Y: Any, shape: tuple[int, int], dtype: np.dtype, X: Any) -> None:
    """``Y``, written in place, is a writeable 2-D array of ``shape``, exactly ``dtype``, of X's
    library, sharing no memory with X."""
    if not hasattr(Y, "dtype") or not hasattr(Y, "ndim"):
        raise TypeError(f"Y must be a NumPy or CuPy array, got {type(Y).__name__}")
    if Y.ndim != 2 or tuple(Y.shape) != shape:
        raise ValueError(f"Y must be {shape[0]}x{shape[1]}, got shape {tuple(Y.shape)}")
    if Y.dtype != dtype:
        raise TypeError(f"Y has dtype {Y.dtype}; it is written in place, so it must be {dtype}")
    _validate.check_same_library("Y", Y, X)
    if isinstance(Y, np.ndarray) and not Y.flags.writeable:
        raise ValueError("Y is read-only; pass a writeable array (it is written in place)")
    if Y.itemsize and any(s % Y.itemsize for s in Y.strides):
        raise ValueError(f"Y's strides {Y.strides} are not whole elements of {Y.itemsize} bytes")
    if _validate.overlaps(Y, X):
        raise ValueError("Y must not overlap X: the product reads X while it writes Y")


def order_of(X: Any) -> str:
    """"F" for a column-major X (F-contiguous and not C-contiguous, or a strided view whose row
    stride is the smaller), else "C": the order of the result ``A @ X`` allocates."""
    if X.flags.c_contiguous:
        return "C"
    if X.flags.f_contiguous:
        return "F"
    return "F" if abs(X.strides[0]) < abs(X.strides[1]) else "C"


# --------------------------------------------------------------------------- entry point


def spmm(matrix: Any, X: Any, Y: Any, alpha: Any, beta: Any, transpose: bool) -> Any:
    """``alpha * op(A) @ X + beta * Y`` for ``matrix`` (A), op(A) = A.T with ``transpose``:
    checks, then the backend's product. Y written in place when given, else allocated in X's
    order. NumPy X with a GPU matrix: uploaded, and the result comes back as NumPy. On the GPU a
    column-major X on a scattered matrix may be staged through a row-major scratch of n x k
    values, plus m x k when Y is not row-major (CuPy's pool, freed after the call; skipped when
    free memory is short)."""
    m, n = matrix.shape[::-1] if transpose else matrix.shape
    X, dtype = check_dense(X, n, (m, n), matrix.dtype)
    k = X.shape[1]
    if Y is not None:
        check_dense_out(Y, (m, k), dtype, X)
    alpha = _validate.check_scalar("alpha", alpha, dtype)
    beta = _validate.check_scalar("beta", beta, dtype)
    if Y is None and beta != 0:
        raise ValueError("beta is nonzero but no Y was given to scale and add")
    on_device = is_device_array(X)
    result_bytes = m * k * dtype.itemsize
    if matrix.backend == "cpu":
        if on_device:
            raise TypeError("this matrix lives on the CPU backend but X is a CuPy array; move the matrix "
                            "with .asbackend('gpu') or pass a NumPy X")
        if not writes_in_place(Y, beta):  # a new array for the result, or for A X before Y takes it
            _validate.ensure_fits(result_bytes, f"the {m}x{k} product", "cpu")
        return host_spmm(csr_in(matrix, dtype), X, Y, alpha, beta, transpose, (m, k))
    if Y is None or not on_device:  # a new device array for the result
        _validate.ensure_fits(result_bytes, f"the {m}x{k} product", "gpu")
    import cupy

    if on_device:
        out = cupy.empty((m, k), dtype, order=order_of(X)) if Y is None else Y
        return device_spmm(matrix, dtype, X, out, alpha, beta, transpose)
    # NumPy in, NumPy out: upload, compute, download (into Y when given).
    order = order_of(X) if Y is None else order_of(Y)
    device_y = cupy.asarray(Y, order=order) if Y is not None and beta != 0 else cupy.empty((m, k), dtype, order=order)
    result = device_spmm(matrix, dtype, cupy.asarray(X), device_y, alpha, beta, transpose)
    if Y is None:
        return result.get(order=order)
    if Y.flags.c_contiguous or Y.flags.f_contiguous:
        result.get(out=Y)
    else:
        Y[...] = result.get()
    return Y


# --------------------------------------------------------------------------- CPU backend

try:  # SciPy's compiled kernels behind ``S @ X``, which accumulate into a given array
    from scipy.sparse._sparsetools import csc_matvec, csc_matvecs, csr_matvec, csr_matvecs

    _SCIPY_ROUTINES: dict[tuple[bool, bool], Any] = {
        (False, True): csr_matvecs, (True, True): csc_matvecs,
        (False, False): csr_matvec, (True, False): csc_matvec,
    }
except ImportError:  # a SciPy without them: its public product
    _SCIPY_ROUTINES = {}


def writes_in_place(Y: np.ndarray | None, beta: Any) -> bool:
    """Whether the CPU product adds A X straight into ``Y``: a C- or F-contiguous Y not read
    (``beta`` zero)."""
    return Y is not None and beta == 0 and (Y.flags.c_contiguous or Y.flags.f_contiguous)


def host_spmm(csr: Any, X: np.ndarray, Y: np.ndarray | None, alpha: Any, beta: Any, transpose: bool,
              shape: tuple[int, int]) -> np.ndarray:
    """The CPU backend's product over ``csr`` (host arrays): SciPy's compiled routines add
    op(A) X into a zeroed Y when Y is contiguous and ``beta`` is zero, else into a new array."""
    if writes_in_place(Y, beta):
        Y.fill(0)
        out = Y
    else:
        out = np.zeros(shape, X.dtype, order=order_of(X) if Y is None else ("F" if Y.flags.f_contiguous else "C"))
    if out.size and csr.nnz:
        _accumulate(csr, X, out, transpose)
    if Y is None or out is Y:
        if alpha != 1:
            out *= alpha
        return out
    return combine_block(Y, out, alpha, beta)


def _accumulate(csr: Any, X: np.ndarray, out: np.ndarray, transpose: bool) -> None:
    """out += op(A) X (``out`` C- or F-contiguous, of X's dtype)."""
    arrays = (csr.indptr, csr.indices, csr.data)
    rows, cols = csr.shape  # of A; csc_matvec(s) read A's CSR as A^T's CSC
    dims = (cols, rows) if transpose else (rows, cols)
    if not _SCIPY_ROUTINES:
        A = sp.csr_array(arrays[::-1], shape=csr.shape)
        out += (A.T if transpose else A) @ X
    elif out.flags.c_contiguous:
        _SCIPY_ROUTINES[transpose, True](*dims, X.shape[1], *arrays, np.ascontiguousarray(X).reshape(-1),
                                         out.reshape(-1))
    else:  # F order: one product per column, straight into Y's column
        routine = _SCIPY_ROUTINES[transpose, False]
        for column in range(X.shape[1]):
            routine(*dims, *arrays, np.ascontiguousarray(X[:, column]), out[:, column])

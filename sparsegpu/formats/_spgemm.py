"""Sparse times sparse: ``spgemm(A, B)`` = ``A @ B`` as a CSR, and its masked, semiring form
``C<M> = A (+.x) B`` (GraphBLAS).

Semantics. Without a semiring the product is SciPy's ``A @ B``: entries whose sum is exactly
zero are dropped (SciPy's ``csr_matmat`` rule), so the pattern is SciPy's. With a semiring
(plus_times included) C has an entry wherever at least one product exists, whatever its value,
as in GraphBLAS. A mask keeps only the entries in its pattern (``complement``: outside it); it
is applied while computing, never by forming the unmasked product. Every result has sorted
indices and no duplicates, and each entry is the fold of its products in product order (A's row
in storage order, then each B row in storage order), from the monoid's identity: bitwise the
same run to run.

GPU algorithm (kernels/spgemm.cu, driven by sparsegpu/formats/_spgemm_device.py; NumPy reference:
sparsegpu/reference/spgemm.py, same phases):

1. Upper bounds: each row's products (the sum of B's row lengths over A's row: a gather and an
   inclusive scan).
2. Row blocks: each row's working memory is estimated from its bound (output entries, and the
   bitmap of a wide row when it lives in global memory); consecutive rows are grouped so that a
   block stays within ``max_bytes`` (default: half the free device memory). Blocks run one
   after another, each writing its rows in place in the output, allocated once; the result does
   not depend on the blocking.
3. Symbolic phase: rows binned by their bound; a warp (bound <= 32), a 128-thread block
   (<= 256) or a 256-thread block (<= 2048) counts a row's distinct columns in a shared-memory
   hash table twice the bound's bin; a wider row gets a 256-thread block that marks its columns
   in a bitmap of the output's columns (in shared memory up to 393,216 columns), so no product
   is ever stored.
4. An exclusive scan of the counts gives the block's pointers; the numeric phase, rows binned by
   their exact length, fills each row: keys in the hash, sorted in shared memory (or read off
   the bitmap in order), values folded in product order (no float atomics).
5. Without a semiring, entries equal to zero are dropped: the numeric kernels count each row's
   other entries, a scan of those counts places them.

CPU backend: SciPy's ``A @ B`` (then sorted indices) for the arithmetic product; the NumPy
reference for semirings and masks.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import numpy as np
import scipy.sparse as sp

from sparsegpu import _validate, primitives
from sparsegpu._backend import array_module
from sparsegpu.formats import _base, _semiring
from sparsegpu.formats._spgemm_device import CAPACITIES, _budget, device_spgemm
from sparsegpu.reference import spgemm as reference
from sparsegpu.semiring import Semiring

INT32_MAX = np.iinfo(np.int32).max


# --------------------------------------------------------------------------- arguments


def _csr_class() -> Any:
    """The CSR class (looked up in the format registry: this module is imported by the base
    class's module, before the formats exist)."""
    return _base.SparseMatrix.formats["csr"]


def _operand(name: str, X: Any) -> Any:
    """``X`` as a SparseMatrix, a TransposedOperator of one, or a scipy sparse array/matrix."""
    if isinstance(X, (_base.SparseMatrix, _base.TransposedOperator)):
        return X
    if sp.issparse(X):
        if X.ndim != 2:
            raise ValueError(f"{name} must be a 2-D sparse matrix, got a {X.ndim}-D sparse array of shape {X.shape}")
        return X
    raise TypeError(f"{name} must be a sparsegpu matrix (or its .T) or a scipy sparse matrix, got {type(X).__name__}")


def _backend_of(X: Any) -> str | None:
    if isinstance(X, _base.TransposedOperator):
        return X.T.backend
    return X.backend if isinstance(X, _base.SparseMatrix) else None


def _common_backend(A: Any, B: Any) -> str:
    a, b = _backend_of(A), _backend_of(B)
    if a is not None and b is not None and a != b:
        raise TypeError(f"A lives on the {a} backend and B on the {b} backend; move one with .asbackend()")
    if a is None and b is None:
        raise TypeError("spgemm needs at least one sparsegpu matrix; for two scipy matrices use scipy's A @ B")
    return a or b  # type: ignore[return-value]


def _csr_arrays(X: Any, backend: str) -> tuple[Any, Any, Any, tuple[int, int]]:
    """(indptr, indices, data, shape) of X's CSR on ``backend`` (A.T: A's other orientation)."""
    if sp.issparse(X):
        X = _csr_class().from_scipy(X, backend=backend)
    if isinstance(X, _base.TransposedOperator):
        base = X.T
        m, n = base.shape
        if base.format == "csc":
            return base.indptr, base.indices, base.data, (n, m)
        data, indices, indptr = base.to_csr()._swapped_arrays()
        return indptr, indices, data, (n, m)
    csr = X.to_csr()
    return csr.indptr, csr.indices, csr.data, csr.shape


def _check_mask(mask: Any, shape: tuple[int, int], backend: str) -> None:
    """TypeError / ValueError for a mask of the wrong kind, shape or backend."""
    if mask is None:
        return
    if not (isinstance(mask, (_base.SparseMatrix, _base.TransposedOperator)) or sp.issparse(mask)):
        raise TypeError(f"mask must be a sparsegpu or scipy sparse matrix (its pattern is used), got "
                        f"{type(mask).__name__}")
    if tuple(mask.shape) != shape:
        raise ValueError(f"mask has shape {tuple(mask.shape)}, but the product has shape {shape}")
    owner = _backend_of(mask)
    if owner is not None and owner != backend:
        raise TypeError(f"mask lives on the {owner} backend and the operands on the {backend} backend")


def _mask_pattern(mask: Any, backend: str, index_dtype: np.dtype) -> tuple[Any, Any] | None:
    """The (checked) mask's pattern as (indptr, indices) with sorted rows, on ``backend``."""
    if mask is None:
        return None
    indptr, indices, _, _ = _csr_arrays(mask, backend)
    xp = array_module(backend)
    indptr, indices = indptr.astype(index_dtype, copy=False), indices.astype(index_dtype, copy=False)
    if indices.size > 1:
        rows = primitives.expand_pointers(indptr, xp)
        if bool((((rows[1:] == rows[:-1]) & (indices[1:] < indices[:-1]))).any()):
            indices = indices[xp.lexsort(xp.stack([indices.astype(np.int64), rows.astype(np.int64)]))]
    return indptr, indices


def _check_semiring(semiring: Any, dtype: np.dtype) -> Semiring | None:
    return None if semiring is None else _semiring.check_semiring(semiring, dtype)


# --------------------------------------------------------------------------- public entry


def spgemm(A: Any, B: Any, *, semiring: Any = None, mask: Any = None, complement: bool = False,
           max_bytes: int | None = None) -> Any:
    """The sparse product ``A @ B`` as a CSR, optionally masked or over a semiring.

    Parameters
    ----------
    A, B : SparseMatrix, its ``.T``, or scipy sparse
        Any sparsegpu format (converted to CSR); at least one a sparsegpu matrix. A scipy
        operand goes to the other's backend.
    semiring : Semiring or str, optional
        None (default): the arithmetic product with SciPy's pattern (entries that sum to exactly
        zero dropped). A semiring (``"plus_times"``, ``"min_plus"``, ``"plus_pair"``, ...): an
        entry wherever a product exists, zeros kept (GraphBLAS).
    mask : SparseMatrix or scipy sparse, optional
        Of the product's shape; only its pattern counts: C keeps the entries in it.
    complement : bool, optional
        Keep the entries outside the mask's pattern instead.
    max_bytes : int, optional
        Working memory to stay within (default: half the free device or host memory); the
        product then runs in row blocks, with the same result.

    Returns
    -------
    CSR
        On the operands' backend, sorted indices, dtype ``np.result_type(A.dtype, B.dtype)``,
        int64 indices when an operand has them or the result needs them, else int32.

    Raises
    ------
    TypeError
        An operand or the mask of another kind; operands on different backends; a semiring
        other than plus_times with complex values.
    ValueError
        ``A.shape[1] != B.shape[0]``; a mask of another shape; ``complement`` without a mask;
        ``max_bytes`` not positive.
    MemoryError
        On the GPU, the product's indices and values (sized by the symbolic phase) do not fit
        in the device memory left; raised before they are allocated.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp, sparsegpu
    >>> from sparsegpu.formats._spgemm import spgemm
    >>> S = sp.csr_array(np.array([[1.0, 2.0], [0.0, 3.0]]))
    >>> A = sparsegpu.from_scipy(S, backend="cpu")
    >>> spgemm(A, A).to_scipy().toarray().tolist()
    [[1.0, 8.0], [0.0, 9.0]]
    >>> spgemm(A, A, semiring="min_plus").to_scipy().toarray().tolist()
    [[2.0, 3.0], [0.0, 6.0]]
    >>> spgemm(A, A, mask=sp.eye(2, format="csr")).to_scipy().toarray().tolist()
    [[1.0, 0.0], [0.0, 9.0]]
    """
    A, B = _operand("A", A), _operand("B", B)
    backend = _common_backend(A, B)
    if A.shape[1] != B.shape[0]:
        raise ValueError(f"matmul: A has shape {tuple(A.shape)} and B has shape {tuple(B.shape)}; "
                         f"A's columns ({A.shape[1]}) must equal B's rows ({B.shape[0]})")
    complement = _validate.check_bool("complement", complement)
    if complement and mask is None:
        raise ValueError("complement=True needs a mask to complement")
    if max_bytes is not None:
        max_bytes = _validate.check_int("max_bytes", max_bytes, minimum=1)
    dtype = np.result_type(_validate.value_dtype(A.dtype), _validate.value_dtype(B.dtype))
    semiring_obj = _check_semiring(semiring, dtype)
    shape = (int(A.shape[0]), int(B.shape[1]))
    _check_mask(mask, shape, backend)
    a_indptr, a_indices, a_data, _ = _csr_arrays(A, backend)
    b_indptr, b_indices, b_data, _ = _csr_arrays(B, backend)
    wide = np.dtype(np.int64) in (a_indices.dtype, b_indices.dtype)
    index_dtype = np.dtype(np.int64 if wide else np.int32)
    pattern = _mask_pattern(mask, backend, index_dtype)
    a = (a_indptr.astype(index_dtype, copy=False), a_indices.astype(index_dtype, copy=False),
         a_data.astype(dtype, copy=False))
    b = (b_indptr.astype(index_dtype, copy=False), b_indices.astype(index_dtype, copy=False),
         b_data.astype(dtype, copy=False))
    if backend == "cpu":
        indptr, indices, data = _host_spgemm(a, b, shape, semiring_obj, pattern, complement, max_bytes)
    else:
        indptr, indices, data = device_spgemm(a, b, shape, semiring_obj, pattern, complement, max_bytes)
    out_index = np.dtype(np.int64) if wide or indices.size > INT32_MAX or max(shape) > INT32_MAX else np.dtype(np.int32)
    return _csr_class()._make(data, indices.astype(out_index, copy=False), indptr.astype(out_index, copy=False), shape, backend)


def _semiring_parts(semiring: Semiring | None, dtype: np.dtype) -> tuple[Any, Any, Any]:
    if semiring is None:
        return np.add, np.multiply, dtype.type(0)
    return semiring.add.ufunc, semiring.mul.apply, semiring.identity(dtype)


def _host_spgemm(a: Any, b: Any, shape: tuple[int, int], semiring: Semiring | None, pattern: Any,
                 complement: bool, max_bytes: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """SciPy's product for the arithmetic case (in row blocks within the budget), the NumPy
    reference otherwise."""
    n = shape[1]
    entry_bytes = a[1].itemsize + a[2].itemsize
    budget = _budget(max_bytes, "cpu")
    if semiring is None and pattern is None:
        products = reference.upper_bounds(a[0], a[1], b[0])
        costs = reference.row_costs(reference.output_bounds(products, n), 0, entry_bytes)
        blocks = reference.row_blocks(costs, budget)
        pieces = [_scipy_rows(a, b, lo, hi, n) for lo, hi in pairwise(blocks.tolist())]
        return pieces[0] if len(pieces) == 1 else reference.concatenate_blocks(pieces, shape[0], a[2].dtype)
    add, mul, identity = _semiring_parts(semiring, a[2].dtype)
    return reference.csr_spgemm(a, b, add, mul, identity, n_cols=n, mask=pattern, complement=complement,
                                drop_zero_values=semiring is None, capacities=CAPACITIES, budget=budget,
                                entry_bytes=entry_bytes)


def _scipy_rows(a: Any, b: Any, lo: int, hi: int, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows lo:hi of SciPy's A @ B, indices sorted."""
    k = b[0].size - 1
    start, stop = int(a[0][lo]), int(a[0][hi])
    rows = sp.csr_array((a[2][start:stop], a[1][start:stop], a[0][lo:hi + 1] - start), shape=(hi - lo, k))
    C = sp.csr_array(rows @ sp.csr_array((b[2], b[1], b[0]), shape=(k, n)))
    C.sort_indices()
    return C.indptr, C.indices, C.data.astype(a[2].dtype, copy=False)

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

GPU algorithm (kernels/spgemm.cu; NumPy reference: sparsegpu/reference/spgemm.py, same phases):

1. Upper bounds: each row's products (the sum of B's row lengths over A's row: a gather and an
   inclusive scan).
2. Row blocks: each row's working memory is estimated from its bound (output entries, and its
   products where it goes through ESC); consecutive rows are grouped so that a block stays
   within ``max_bytes`` (default: half the free device memory). Blocks run one after another
   and are concatenated; the result does not depend on the blocking.
3. Symbolic phase: rows binned by their bound; a warp (bound <= 32), a 128-thread block
   (<= 256) or a 256-thread block (<= 2048) counts a row's distinct columns in a shared-memory
   hash table twice the bound's bin; rows past that go to expand-sort-compress (ESC): their
   products in global memory, stably sorted by (row, column), each run folded in product order.
4. An exclusive scan of the counts gives the block's pointers; the numeric phase, rows binned by
   their exact length, fills each row: keys in the hash, sorted in shared memory, values folded
   in product order (no float atomics).
5. Without a semiring, entries equal to zero are dropped (a scan of the kept flags).

CPU backend: SciPy's ``A @ B`` (then sorted indices) for the arithmetic product; the NumPy
reference for semirings and masks.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import numpy as np
import scipy.sparse as sp

from sparsegpu import _validate, primitives
from sparsegpu._backend import array_module, to_host
from sparsegpu._kernels import allow_dynamic_shared, blocks_for
from sparsegpu.formats import _base, _semiring
from sparsegpu.reference import spgemm as reference
from sparsegpu.semiring import Semiring

#: Per hash bin: (largest row bound, threads per row, table slots): tables twice the bound.
HASH_BINS = ((32, 32, 64), (256, 128, 512), (2048, 256, 4096))
CAPACITIES = tuple(capacity for capacity, _, _ in HASH_BINS)
WARP_GROUPS = 4  # kernels/spgemm.cu SPGEMM_WARP_GROUPS: rows per block of the warp bin
FLAT_BLOCK = 256  # kernels/spgemm.cu SPGEMM_FLAT_BLOCK
TEMPLATES = tuple(f"spgemm_rows<{{V}}, {{I}}, {{S}}, {nt}, {table}, {phase}>"
                  for _, nt, table in HASH_BINS for phase in ("false", "true")) + (
    "spgemm_expand<{V}, {I}, {S}>", "spgemm_fold_runs<{V}, {I}, {S}>")
_semiring.register_predefined("spgemm.cu", TEMPLATES)
NULL_POINTER = np.uint64(0)
#: Fill each block's output with -1 / NaN before the kernels write it (tests: unwritten entries show).
POISON = False
INT32_MAX = np.iinfo(np.int32).max


def group_shared_bytes(value_size: int, index_size: int, threads: int, table: int) -> int:
    """Shared bytes of one row's group (kernels/spgemm.cu ``Shared::bytes``): values for the
    table and two rounds, pointers for the chunk, keys twice the table, int positions.

    >>> group_shared_bytes(8, 4, 32, 64)
    2320
    """
    raw = value_size * (table + 2 * threads) + 8 * (2 * threads + threads // 32) + index_size * 2 * table \
        + 4 * (table + 1)
    return (raw + 15) // 16 * 16


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
        indptr, indices, data = _device_spgemm(a, b, shape, semiring_obj, pattern, complement, max_bytes)
    out_index = np.dtype(np.int64) if wide or indices.size > INT32_MAX or max(shape) > INT32_MAX else np.dtype(np.int32)
    return _csr_class()._make(data, indices.astype(out_index, copy=False), indptr.astype(out_index, copy=False), shape, backend)


def _budget(max_bytes: int | None, backend: str) -> int:
    return max_bytes if max_bytes is not None else max(1, _validate.available_bytes(backend) // 2)


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
        costs = reference.row_costs(products, reference.output_bounds(products, n), 0, entry_bytes)
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


# --------------------------------------------------------------------------- GPU


class _Device:
    """One product's operands and kernels on the GPU. ``xp``: the array module (CuPy);
    ``kernels``: template -> launchable kernel (default: the compiled ones; the tests pass
    NumPy emulations to check this module's index arithmetic without a GPU)."""

    def __init__(self, a: Any, b: Any, n: int, semiring: Semiring | None, pattern: Any, complement: bool, xp: Any,
                 kernels: Any = None) -> None:
        self.cupy = xp
        self.kernels = kernels
        self.a, self.b, self.n = a, b, n
        self.dtype, self.index_dtype = a[2].dtype, a[1].dtype
        self.semiring = semiring
        self.kernel_semiring = _semiring.as_semiring("plus_times") if semiring is None else semiring
        self.masked = pattern is not None
        self.mask = (NULL_POINTER, NULL_POINTER) if pattern is None else pattern
        self.complement = np.int32(complement)

    def kernel(self, template: str) -> Any:
        if self.kernels is not None:
            return self.kernels(template)
        return _semiring.kernel(self.kernel_semiring, "spgemm.cu", TEMPLATES, template, self.dtype, self.index_dtype)

    def rows(self, bin_id: int, numeric: bool, rows: Any, offsets: Any, counts: Any, out: tuple[Any, Any]) -> None:
        """Launch the hash kernel of ``bin_id`` over the listed rows."""
        _, threads, table = HASH_BINS[bin_id]
        groups = WARP_GROUPS if threads == 32 else 1
        shared = groups * group_shared_bytes(self.dtype.itemsize, self.index_dtype.itemsize, threads, table)
        phase = "true" if numeric else "false"
        kernel = self.kernel(f"spgemm_rows<{{V}}, {{I}}, {{S}}, {threads}, {table}, {phase}>")
        if self.kernels is None:
            kernel = allow_dynamic_shared(kernel, shared, "spgemm's hash kernel")
        (a_indptr, a_indices, a_data), (b_indptr, b_indices, b_data) = self.a, self.b
        kernel((blocks_for(rows.size, groups),), (threads * groups,),
               (np.int64(rows.size), rows, offsets, counts, a_indptr, a_indices, a_data, b_indptr, b_indices, b_data,
                self.mask[0], self.mask[1], self.complement, out[0], out[1]), shared_mem=shared)

    def esc(self, rows: Any) -> tuple[Any, Any, Any]:
        """(entries per row, columns, values) of the listed rows by expand-sort-compress."""
        cp = self.cupy
        a_indptr, a_indices, _ = self.a
        b_indptr = self.b[0]
        lengths = (a_indptr[rows + 1] - a_indptr[rows]).astype(np.int64)
        entry_ptr = _pointers(lengths, cp)
        entry_row = primitives.expand_pointers(entry_ptr, cp)
        a_position = a_indptr[rows].astype(np.int64)[entry_row] + cp.arange(entry_row.size) - entry_ptr[entry_row]
        k = a_indices[a_position]
        product_ptr = _pointers((b_indptr[k + 1] - b_indptr[k]).astype(np.int64), cp)
        n_products = int(product_ptr[-1])
        entry_of = primitives.expand_pointers(product_ptr, cp)
        cols = cp.empty(n_products, self.index_dtype)
        values = cp.empty(n_products, self.dtype)
        keep = cp.empty(n_products, np.uint8)
        if n_products:
            self.kernel("spgemm_expand<{V}, {I}, {S}>")(
                (blocks_for(n_products, FLAT_BLOCK),), (FLAT_BLOCK,),
                (np.int64(n_products), entry_of, product_ptr, a_position, rows[entry_row], a_indices, self.a[2],
                 b_indptr, self.b[1], self.b[2], self.mask[0], self.mask[1], self.complement, cols, values, keep))
        local = entry_row[entry_of]
        if self.masked:
            kept = cp.flatnonzero(keep)
            local, cols, values = local[kept], cols[kept], values[kept]
        return self._compress(local, cols, values, rows.size)

    def _compress(self, local: Any, cols: Any, values: Any, n_rows: int) -> tuple[Any, Any, Any]:
        cp = self.cupy
        if local.size == 0:
            return cp.zeros(n_rows, dtype=np.int64), cols, values
        if n_rows <= np.iinfo(np.int64).max // max(self.n, 1):
            # One int64 key (row, column); the sort is stable, so equal keys keep product order.
            order = cp.argsort(local * np.int64(self.n) + cols.astype(np.int64), kind="stable")
        else:
            order = cp.lexsort(cp.stack([cp.arange(local.size, dtype=np.int64), cols.astype(np.int64), local]))
        local, cols, values = local[order], cols[order], values[order]
        heads = cp.ones(local.size, dtype=bool)
        heads[1:] = (local[1:] != local[:-1]) | (cols[1:] != cols[:-1])
        starts = cp.flatnonzero(heads)
        run_ptr = cp.concatenate([starts, cp.full(1, local.size, dtype=starts.dtype)]).astype(np.int64)
        folded = cp.empty(starts.size, self.dtype)
        if starts.size:
            self.kernel("spgemm_fold_runs<{V}, {I}, {S}>")(
                (blocks_for(starts.size, FLAT_BLOCK),), (FLAT_BLOCK,), (np.int64(starts.size), run_ptr, values, folded))
        per_row = cp.searchsorted(local[starts], cp.arange(n_rows + 1, dtype=np.int64))
        return cp.diff(per_row).astype(np.int64), cols[starts], folded


def _pointers(lengths: Any, xp: Any) -> Any:
    """[0, cumulative lengths...] as int64."""
    out = xp.zeros(lengths.size + 1, dtype=np.int64)
    if lengths.size:
        out[1:] = primitives.inclusive_scan(lengths.astype(np.int64, copy=False))
    return out


def _device_upper_bounds(a: Any, b_indptr: Any, xp: Any) -> Any:
    """Each row's products: B's row lengths gathered over A's entries, scanned, differenced."""
    a_indptr, a_indices, _ = a
    per_entry = (b_indptr[1:] - b_indptr[:-1]).astype(np.int64)[a_indices]
    prefix = _pointers(per_entry, xp)
    return prefix[a_indptr[1:]] - prefix[a_indptr[:-1]]


def _device_spgemm(a: Any, b: Any, shape: tuple[int, int], semiring: Semiring | None, pattern: Any,
                   complement: bool, max_bytes: int | None, xp: Any = None, kernels: Any = None) -> tuple[Any, Any, Any]:
    """The GPU phases (module docstring) on CSR operands of one value and index type."""
    xp = array_module("gpu") if xp is None else xp
    m, n = shape
    device = _Device(a, b, n, semiring, pattern, complement, xp, kernels)
    products = _device_upper_bounds(a, b[0], xp)
    mask_lengths = None if pattern is None else pattern[0][1:] - pattern[0][:-1]
    bounds = reference.output_bounds(products, n, mask_lengths, complement, xp)
    esc = reference.bin_rows(bounds, CAPACITIES, xp) == len(CAPACITIES)
    entry_bytes = a[1].itemsize + a[2].itemsize
    costs = reference.row_costs(products, bounds, esc, entry_bytes)
    blocks = reference.row_blocks(to_host(costs), _budget(max_bytes, "gpu"))
    pieces = [_device_block(device, lo, hi, bounds, drop=semiring is None) for lo, hi in pairwise(blocks.tolist())]
    return _concatenate(pieces, m, a[1].dtype, a[2].dtype, xp)


def _device_block(device: _Device, lo: int, hi: int, bounds: Any, drop: bool) -> tuple[Any, Any, Any]:
    """Rows lo:hi: symbolic counts (hash bins, ESC), pointers, numeric fill, zeros dropped."""
    cp = device.cupy
    counts = cp.zeros(hi - lo, dtype=np.int64)
    bins = reference.bin_rows(bounds[lo:hi], CAPACITIES, cp)
    for bin_id in range(len(HASH_BINS)):
        local = cp.flatnonzero(bins == bin_id)
        if local.size:
            bin_counts = cp.empty(local.size, dtype=np.int64)
            device.rows(bin_id, False, local + lo, NULL_POINTER, bin_counts, (NULL_POINTER, NULL_POINTER))
            counts[local] = bin_counts
    esc_local = cp.flatnonzero(bins == len(HASH_BINS))
    if esc_local.size:
        esc_counts, esc_cols, esc_values = device.esc(esc_local + lo)
        counts[esc_local] = esc_counts
    indptr = _pointers(counts, cp)
    total = int(indptr[-1])
    _validate.ensure_fits(total * (device.index_dtype.itemsize + device.dtype.itemsize),
                          f"rows {lo}:{hi} of the product ({total} entries)", "gpu")
    indices = cp.full(total, -1, device.index_dtype) if POISON else cp.empty(total, device.index_dtype)
    data = cp.full(total, np.nan, device.dtype) if POISON else cp.empty(total, device.dtype)
    numeric_bins = reference.bin_rows(counts, CAPACITIES, cp)
    if esc_local.size:
        numeric_bins[esc_local] = -1
    for bin_id in range(len(HASH_BINS)):
        local = cp.flatnonzero(numeric_bins == bin_id)
        if local.size:
            device.rows(bin_id, True, local + lo, indptr[local], NULL_POINTER, (indices, data))
    if esc_local.size and esc_cols.size:
        esc_ptr = _pointers(esc_counts, cp)
        owner = primitives.expand_pointers(esc_ptr, cp)
        slots = indptr[esc_local][owner] + cp.arange(esc_cols.size, dtype=np.int64) - esc_ptr[owner]
        indices[slots] = esc_cols
        data[slots] = esc_values
    return _drop_zeros(indptr, indices, data, cp) if drop else (indptr, indices, data)


def _drop_zeros(indptr: Any, indices: Any, data: Any, xp: Any) -> tuple[Any, Any, Any]:
    """The CSR without entries equal to zero (SciPy's rule for the arithmetic product)."""
    keep = data != 0
    if bool(keep.all()):
        return indptr, indices, data
    kept = _pointers(keep.astype(np.int64), xp)
    return kept[indptr], indices[keep], data[keep]


def _concatenate(pieces: list[tuple[Any, Any, Any]], m: int, index_dtype: np.dtype, dtype: np.dtype,
                 xp: Any) -> tuple[Any, Any, Any]:
    if len(pieces) == 1:
        return pieces[0]
    if not pieces:
        return xp.zeros(m + 1, np.int64), xp.zeros(0, index_dtype), xp.zeros(0, dtype)
    totals = np.cumsum([0] + [int(p[0][-1]) for p in pieces])
    indptr = xp.concatenate([xp.zeros(1, np.int64)] + [p[0][1:] + int(t) for p, t in zip(pieces, totals)])
    return indptr, xp.concatenate([p[1] for p in pieces]), xp.concatenate([p[2] for p in pieces])

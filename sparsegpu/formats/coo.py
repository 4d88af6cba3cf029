"""COO: coordinate lists sorted by row. ``A @ x`` runs kernels/spmv_coo.cu (NumPy reference:
reference.coo_spmv)."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from sparsegpu import _validate, convert, reference
from sparsegpu._backend import (
    Backend,
    array_module,
    backend_of,
    deterministic,
    resolve_backend,
)
from sparsegpu._kernels import KernelFile, blocks_for
from sparsegpu.formats._base import SparseMatrix, host_copy, to_backend
from sparsegpu.formats._compressed import scale_in_place
from sparsegpu.formats._fast_product import ALPHA, Launch, Scratch, X, Y
from sparsegpu.formats.csr import CSR

TILE = 512  # kernels/spmv_coo.cu TILE
TILE_BLOCK = 256  # kernels/spmv_coo.cu TILE_BLOCK
ATOMIC_BLOCK = 256

COO_KERNELS = KernelFile(
    "spmv_coo.cu",
    ["coo_reduce_tiles<{V}, {I}, true>", "coo_reduce_tiles<{V}, {I}, false>", "coo_spmv_atomic<{V}, {I}>"],
)


def reduce_sorted_by_key(keys: Any, cols: Any, vals: Any, x: Any, y: Any, alpha: Any) -> Any:
    """``y[k] += alpha * sum(vals[j] * x[cols[j]] for keys[j] == k)`` on the GPU, for sorted
    keys; with ``x`` None, the products are just ``vals[j]``. Bitwise reproducible: a tree of
    launches of ``coo_reduce_tiles``, each reducing the previous one's carries."""
    import cupy

    gather = x is not None
    n = keys.size
    while n:
        n_tiles = -(-n // TILE)
        last = n_tiles == 1
        carry_keys = keys if last else cupy.empty(2 * n_tiles, keys.dtype)
        carry_vals = vals if last else cupy.empty(2 * n_tiles, vals.dtype)
        kernel = COO_KERNELS.function(f"coo_reduce_tiles<{{V}}, {{I}}, {'true' if gather else 'false'}>", vals.dtype, keys.dtype)
        kernel(
            (blocks_for(n_tiles * 32, TILE_BLOCK),), (TILE_BLOCK,),
            (keys, cols if gather else keys, vals, x if gather else vals, np.int64(n), y, alpha,
             carry_keys, carry_vals, np.int64(n_tiles)),
        )
        if last:
            break
        keys, vals, gather, n = carry_keys, carry_vals, False, 2 * n_tiles
    return y


def reduce_launches(keys: Any, cols: Any, vals: Any) -> list[Launch]:
    """The launches of :func:`reduce_sorted_by_key` with an x (the product's tree) as
    packed-launch records: the same kernels, grids and arguments, x, y and alpha as markers and
    each level's carries as scratch."""
    value_dtype, index_dtype = vals.dtype, keys.dtype
    launches, gather, n = [], True, keys.size
    while n:
        n_tiles = -(-n // TILE)
        last = n_tiles == 1
        carry_keys = keys if last else Scratch(2 * n_tiles, index_dtype)
        carry_vals = vals if last else Scratch(2 * n_tiles, value_dtype)
        kernel = COO_KERNELS.function(f"coo_reduce_tiles<{{V}}, {{I}}, {'true' if gather else 'false'}>", value_dtype,
                                      index_dtype)
        launches.append(Launch(kernel, blocks_for(n_tiles * 32, TILE_BLOCK), TILE_BLOCK,
                               (keys, cols if gather else keys, vals, X if gather else vals, np.int64(n), Y, ALPHA,
                                carry_keys, carry_vals, np.int64(n_tiles))))
        if last:
            break
        keys, vals, gather, n = carry_keys, carry_vals, False, 2 * n_tiles
    return launches


def atomic_launch(rows: Any, cols: Any, data: Any, value_dtype: Any, index_dtype: Any) -> Launch:
    """The atomic product's launch (``coo_spmv_atomic``, after y = beta * y) as a packed-launch record."""
    kernel = COO_KERNELS.function("coo_spmv_atomic<{V}, {I}>", value_dtype, index_dtype)
    return Launch(kernel, blocks_for(data.size, ATOMIC_BLOCK), ATOMIC_BLOCK,
                  (rows, cols, data, X, np.int64(data.size), Y, ALPHA))


def canonical_coo(rows: Any, cols: Any, data: Any, shape: tuple[int, int], xp: Any) -> tuple[Any, Any, Any]:
    """Entries sorted by (row, column), duplicates summed (deterministically), explicit zeros
    kept; on whichever backend holds the arrays."""
    if rows.size == 0:
        return rows, cols, data
    width = max(shape[1], 1)
    if shape[0] * width <= np.iinfo(np.int64).max:
        order = xp.argsort(rows.astype(np.int64) * width + cols.astype(np.int64))
    else:  # the packed key would overflow int64: sort by the pair
        order = xp.lexsort(xp.stack([cols, rows]))
    rows, cols, data = rows[order], cols[order], data[order]
    starts = xp.ones(rows.size, dtype=bool)
    starts[1:] = (rows[1:] != rows[:-1]) | (cols[1:] != cols[:-1])
    first = xp.flatnonzero(starts)
    if first.size == rows.size:
        return rows, cols, data
    if xp is np:
        summed = np.add.reduceat(data, first)
    else:
        group = (xp.cumsum(starts) - 1).astype(rows.dtype)
        summed = xp.zeros(first.size, dtype=data.dtype)
        reduce_sorted_by_key(group, None, data, None, summed, data.dtype.type(1))
    return rows[first], cols[first], summed


class COO(SparseMatrix):
    """Coordinate matrix: ``row``, ``col`` and ``data``, kept sorted by row.

    ``A @ x`` is a segmented reduction over rows (one warp per tile of 512 entries, carries
    reduced by further launches of the same kernel): bitwise reproducible. With
    ``sparsegpu.options(deterministic=False)`` it uses one atomic add per entry instead (not
    reproducible). ``A.T @ x`` reduces over a column-sorted copy built on first use (or atomics).

    Parameters
    ----------
    arg1 : (data, (row, col))
        The entries, as scipy takes them, in any order. They are sorted by (row, column) and
        duplicates summed (deterministically) on the arrays' backend, into arrays of the
        matrix's own; explicit zeros are kept.
    shape : (int, int)
        The matrix's shape.
    dtype : dtype, optional
        float32, float64, complex64 or complex128 (default: the data's, with integers and
        booleans stored as float64).
    index_dtype : {int32, int64}, optional
        Default: int32 when every index fits.
    backend : {"gpu", "cpu"}, optional
        Where NumPy input goes (default: :func:`sparsegpu.backend`); CuPy input stays on the GPU.
    check : bool, optional
        Validate lengths and index ranges in one pass (default True); pass False only for
        arrays known to be valid.
    casting : str, optional
        NumPy's casting rule from the data's dtype to ``dtype`` (default "same_kind"; complex
        to real needs "unsafe").

    Raises
    ------
    TypeError
        ``arg1`` is not ``(data, (row, col))``; an unsupported dtype or cast; ``check`` not a
        bool.
    ValueError
        A bad ``shape``; arrays of different lengths, not 1-D, or with indices out of range.

    See Also
    --------
    SparseMatrix.from_scipy : the usual way to build one, ``COO.from_scipy(S)``.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp, sparsegpu
    >>> S = sp.random(30, 20, density=0.2, random_state=3, format="coo")
    >>> A = sparsegpu.COO.from_scipy(S, backend="cpu")
    >>> bool(np.allclose(A @ np.ones(20), S @ np.ones(20)))
    True
    >>> B = sparsegpu.COO((np.array([1.0, 2.0, 3.0]), (np.array([1, 0, 1]), np.array([0, 1, 0]))), (2, 2),
    ...                   backend="cpu")
    >>> B.nnz, B.to_scipy().toarray().tolist()
    (2, [[0.0, 2.0], [4.0, 0.0]])
    """

    format = "coo"

    def __init__(
        self,
        arg1: tuple[Any, tuple[Any, Any]],
        shape: Any,
        *,
        dtype: Any = None,
        index_dtype: Any = None,
        backend: str | None = None,
        check: bool = True,
        casting: str = "same_kind",
    ) -> None:
        """Build from ``(data, (row, col))`` and a shape, as scipy does. Entries are sorted by
        (row, column) and duplicates summed on the arrays' backend, into arrays of the matrix's
        own. ``check`` validates lengths and index ranges (pass False only for arrays known to be
        valid); ``dtype``, ``index_dtype`` and ``casting`` as in ``from_scipy``."""
        try:
            data, (row, col) = arg1
        except (TypeError, ValueError):
            raise TypeError(f"COO expects (data, (row, col)), got {type(arg1).__name__}") from None
        m, n = _validate.shape2d(shape)
        check = _validate.check_bool("check", check)
        target: Backend = "gpu" if hasattr(data, "dtype") and backend_of(data) == "gpu" else resolve_backend(backend)
        data, row, col = (to_backend(a, target) for a in (data, row, col))
        if check:
            _validate.check_index_array("row", row)
            _validate.check_index_array("col", col, row.size)
            if data.ndim != 1 or data.size != row.size:
                raise ValueError(f"data has shape {tuple(data.shape)}; expected ({row.size},) like row and col")
            _validate.check_indices_in_range("row", row, m, "rows")
            _validate.check_indices_in_range("col", col, n, "columns")
        value_dt = _validate.stored_dtype(data.dtype, dtype, casting)
        index_dt = _validate.index_dtype((m, n), row.size, index_dtype)
        xp = array_module(target)
        row, col, data = canonical_coo(row.astype(index_dt), col.astype(index_dt), _validate.cast_values(data, value_dt), (m, n), xp)
        self._set(row, col, data, (m, n), target)

    def _set(self, row: Any, col: Any, data: Any, shape: tuple[int, int], backend: Backend) -> None:
        self._init_base(shape, data.dtype, row.dtype, backend)
        self.row, self.col, self.data = row, col, data

    @classmethod
    def _make(cls, row: Any, col: Any, data: Any, shape: tuple[int, int], backend: Backend) -> COO:
        obj = cls.__new__(cls)
        obj._set(row, col, data, shape, backend)
        return obj

    @classmethod
    def _from_csr(cls, csr: Any, **params: Any) -> COO:
        if params:
            raise TypeError(f"COO takes no format parameters, got {sorted(params)}")
        rows = convert.expand_pointers(csr.indptr, csr._xp)
        return cls._make(rows, csr.indices, csr.data, csr.shape, csr.backend)

    def to_csr(self) -> Any:
        indptr = convert.compress(self.row, self._shape[0], self._index_dtype, self._xp)
        return CSR._make(self.data, self.col, indptr, self._shape, self._backend)

    def to_scipy(self) -> sp.sparray:
        return sp.coo_array((host_copy(self.data), (host_copy(self.row), host_copy(self.col))), shape=self._shape)

    @property
    def nnz(self) -> int:
        return int(self.data.size)

    def _arrays(self) -> dict[str, Any]:
        return {"row": self.row, "col": self.col, "data": self.data}

    def _map_values(self, fn: Any) -> COO:
        return self._make(self.row, self.col, fn(self.data), self._shape, self._backend)

    def _by_column(self) -> tuple[Any, Any, Any]:
        """(col, row, data) sorted by column: A^T in this format, built once and cached."""
        if "by_column" not in self._cache:
            indptr, rows, data = convert.swap_major(
                convert.compress(self.row, self._shape[0], self._index_dtype, self._xp),
                self.col, self.data, self._shape[1], self._xp,
            )
            self._cache["by_column"] = (convert.expand_pointers(indptr, self._xp), rows, data)
        return self._cache["by_column"]

    def _spmv(self, x: Any, y: Any, alpha: Any, beta: Any, transpose: bool) -> Any:
        keys, others = (self.col, self.row) if transpose else (self.row, self.col)
        if self._backend == "cpu":
            return reference.coo_spmv(keys, others, self.data, x, y, alpha, beta)
        scale_in_place(y, beta)
        if self.nnz == 0:
            return y
        if deterministic():
            keys, others, data = self._by_column() if transpose else (self.row, self.col, self.data)
            return reduce_sorted_by_key(keys, others, data, x, y, alpha)
        kernel = COO_KERNELS.function("coo_spmv_atomic<{V}, {I}>", self._dtype, self._index_dtype)
        kernel((blocks_for(self.nnz, ATOMIC_BLOCK),), (ATOMIC_BLOCK,), (keys, others, self.data, x, np.int64(self.nnz), y, alpha))
        return y

    def _packed_launches(self) -> tuple[list[Launch], bool]:
        if self.nnz == 0:
            return [], True
        if deterministic():
            return reduce_launches(self.row, self.col, self.data), True
        return [atomic_launch(self.row, self.col, self.data, self._dtype, self._index_dtype)], True

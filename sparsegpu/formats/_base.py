"""The interface every sparsegpu matrix shares, and the transposed-operator view.

A format subclass supplies: ``_arrays()`` (its stored arrays by name), ``nnz``,
``_from_csr(csr, **params)`` (build from a CSR on the same backend), ``to_csr()``,
``_map_values(fn)`` (same structure, new values) and ``_spmv(x, y, alpha, beta, transpose)``
(compute into an allocated ``y`` on the matrix's backend); optionally ``_spmv_dot`` (the
product with a dot product in its epilogue; the default runs ``_spmv`` then a dot pass). Everything user-facing (checks,
host/device movement of x and y, ``@``, ``T``, conversions) lives here once.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp

from sparsegpu import _validate
from sparsegpu.primitives import vector_dot
from sparsegpu._backend import Backend, array_module, is_device_array, resolve_backend, to_backend, to_host  # noqa: F401


def as_scipy_sparse(S: Any) -> sp.sparray | sp.spmatrix:
    """``S`` if it is a 2-D scipy sparse matrix or array; otherwise a TypeError naming it."""
    if not sp.issparse(S):
        raise TypeError(
            f"expected a scipy.sparse matrix or array, got {type(S).__module__}.{type(S).__name__}"
        )
    if S.ndim != 2:
        raise ValueError(f"expected a 2-D sparse matrix, got {S.ndim}-D")
    return S


def canonical_scipy(S: Any, layout: str, dtype: Any = None, index_dtype: Any = None) -> sp.sparray:
    """``S`` as a scipy ``csr_array`` or ``csc_array`` in canonical form: duplicates summed,
    indices sorted, values and indices in the dtypes sparsegpu stores. Explicit zeros are kept
    (they are stored entries and count in ``nnz``); call ``S.eliminate_zeros()`` first to drop
    them. The caller's matrix is never modified."""
    S = as_scipy_sparse(S)
    value_dt = _validate.value_dtype(S.dtype if dtype is None else dtype)
    compressed = (sp.csr_array if layout == "csr" else sp.csc_array)(S)
    if not compressed.has_canonical_format:
        # The conversion may share the caller's arrays (also through index-dtype views), and
        # sum_duplicates works in place: copy first, so the caller's matrix never changes.
        compressed = compressed.copy()
        compressed.sum_duplicates()
    index_dt = _validate.index_dtype(compressed.shape, compressed.nnz, index_dtype)
    compressed.data = compressed.data.astype(value_dt, copy=False)
    compressed.indices = compressed.indices.astype(index_dt, copy=False)
    compressed.indptr = compressed.indptr.astype(index_dt, copy=False)
    return compressed


class SparseMatrix:
    """Base of every sparsegpu matrix format (see the module docstring for the contract)."""

    format: ClassVar[str] = ""
    formats: ClassVar[dict[str, type[SparseMatrix]]] = {}
    #: Whether ``spmv`` gives bitwise-identical results run to run (with the default options).
    deterministic: ClassVar[bool] = True

    _shape: tuple[int, int]
    _dtype: np.dtype
    _index_dtype: np.dtype
    _backend: Backend

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.format:
            SparseMatrix.formats[cls.format] = cls

    def _init_base(self, shape: tuple[int, int], dtype: Any, index_dtype: Any, backend: Backend) -> None:
        self._shape = shape
        self._dtype = np.dtype(dtype)
        self._index_dtype = np.dtype(index_dtype)
        self._backend = backend
        self._cache: dict[str, Any] = {}

    # ------------------------------------------------------------------ properties
    @property
    def shape(self) -> tuple[int, int]:
        return self._shape

    @property
    def dtype(self) -> np.dtype:
        return self._dtype

    @property
    def index_dtype(self) -> np.dtype:
        return self._index_dtype

    @property
    def ndim(self) -> int:
        return 2

    @property
    def backend(self) -> Backend:
        """``"gpu"`` when the arrays are CuPy arrays on the device, ``"cpu"`` for NumPy."""
        return self._backend

    @property
    def nnz(self) -> int:
        """Stored entries (explicit zeros included; padding excluded)."""
        raise NotImplementedError

    @property
    def nbytes(self) -> int:
        """Bytes of the format's stored arrays (caches such as a transposed copy excluded)."""
        return sum(int(a.nbytes) for a in self._arrays().values())

    @property
    def _xp(self) -> Any:
        return array_module(self._backend)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_scipy(
        cls,
        S: Any,
        *,
        dtype: Any = None,
        index_dtype: Any = None,
        backend: str | None = None,
        **params: Any,
    ) -> SparseMatrix:
        """Build from any scipy sparse matrix or array (any scipy format).

        ``dtype``: value type (default: S's, with integers and booleans stored as float64).
        ``index_dtype``: int32 or int64 (default: int32 when everything fits). ``backend``:
        ``"gpu"`` or ``"cpu"`` (default: :func:`sparsegpu.backend`). Duplicates are summed and
        indices sorted; explicit zeros are kept as stored entries.

        The matrix goes to the backend as a CSR (:meth:`CSR.from_scipy
        <sparsegpu.CSR.from_scipy>`: on the GPU, large matrices stream through
        :func:`sparsegpu.transfer.upload_csr`), and the format is built from it there.
        """
        from sparsegpu.formats.csr import CSR

        csr = CSR.from_scipy(S, dtype=dtype, index_dtype=index_dtype, backend=backend)
        return cls._from_csr(csr, **params)  # CSR and CSC override from_scipy

    @classmethod
    def _from_csr(cls, csr: Any, **params: Any) -> SparseMatrix:
        raise NotImplementedError

    def to_csr(self) -> Any:
        raise NotImplementedError

    def to_scipy(self) -> sp.sparray:
        """A scipy sparse array with the same entries (copied to the host)."""
        return self.to_csr().to_scipy()

    def asformat(self, format: str, **params: Any) -> SparseMatrix:
        """This matrix in another sparsegpu format (``"coo"``, ``"csr"``, ``"csc"``, ...),
        converted on the matrix's backend."""
        key = format.lower()
        if key not in SparseMatrix.formats:
            raise ValueError(f"unknown format {format!r}; known: {', '.join(sorted(SparseMatrix.formats))}")
        if key == self.format and not params:
            return self
        return SparseMatrix.formats[key]._from_csr(self.to_csr(), **params)

    def astype(self, dtype: Any) -> SparseMatrix:
        """A copy with values cast to ``dtype`` (float32, float64, complex64 or complex128)."""
        target = _validate.value_dtype(dtype)
        if np.dtype(dtype) != target:
            raise TypeError(f"cannot store values as {np.dtype(dtype)}; use one of float32, float64, complex64, complex128")
        return self._map_values(lambda values: values.astype(target))

    def _map_values(self, fn: Any) -> SparseMatrix:
        raise NotImplementedError

    def _arrays(self) -> dict[str, Any]:
        raise NotImplementedError

    # ------------------------------------------------------------------ products
    @property
    def T(self) -> TransposedOperator:
        """The transposed operator: ``A.T @ x`` computes A^T x without forming A^T explicitly
        (in deterministic mode some formats build and cache a transposed copy on first use)."""
        return TransposedOperator(self)

    def spmv(self, x: Any, y: Any = None, alpha: Any = 1, beta: Any = 0) -> Any:
        """``alpha * A @ x + beta * y``.

        ``x``: 1-D, length ``shape[1]``, a NumPy or CuPy array (a NumPy ``x`` with a GPU
        matrix is uploaded and the result comes back as NumPy). ``y``: written in place and
        returned when given (exact dtype, same array library as ``x``); required when
        ``beta != 0``; never read when ``beta == 0``.
        """
        return self._product(x, y, alpha, beta, transpose=False)

    def spmv_dot(self, x: Any, y: Any, dot: Any, w: Any = None, alpha: Any = 1, beta: Any = 0) -> Any:
        """``y = alpha * A @ x + beta * y`` and ``dot[0] = sum_i w[i] * y[i]`` (``w`` defaults to
        ``x``: CG's ``p . A p``), the dot product fused into the product's epilogue where the
        format has one (CSR without split rows, ELL), else a second deterministic pass.

        ``x``, ``y``, ``w``: real (float32 or float64) vectors on the matrix's backend (NumPy or
        CuPy, nothing is moved); ``y`` is written in place, bitwise as :meth:`spmv` writes it,
        and must not overlap ``x`` or ``w``.
        ``dot``: a float64 array of shape (1,) on the same backend (a view into a larger array
        works), written in place with the sum accumulated in float64 and reduced in a fixed
        order (bitwise reproducible run to run). Returns ``y``.

        On the GPU nothing is read back to the host and nothing is allocated after a matrix's
        first call (scratch space is cached on the matrix), so calls can be captured in a CUDA
        graph. One matrix must not run ``spmv_dot`` on two streams at once (shared scratch).

        >>> import numpy as np, scipy.sparse as sp, sparsegpu
        >>> S = sp.random(30, 30, density=0.2, random_state=2, format="csr")
        >>> A = sparsegpu.from_scipy(S, backend="cpu")
        >>> x, y, dot = np.arange(30.0), np.empty(30), np.empty(1)
        >>> _ = A.spmv_dot(x, y, dot)
        >>> bool(np.allclose(y, S @ x)), bool(np.isclose(dot[0], x @ (S @ x)))
        (True, True)
        """
        m, n = self._shape
        if self._dtype.kind != "f":
            raise TypeError(f"spmv_dot needs a real matrix (float32 or float64), this one is {self._dtype}")
        x = _validate.check_vector(x, n, self._dtype)
        _validate.check_out(y, m, self._dtype, x)
        if w is None:
            if m != n:
                raise ValueError(f"spmv_dot without w dots y with x, which needs a square matrix, not {m}x{n}")
            w = x
        else:
            w = _validate.check_vector(w, m, self._dtype, name="w")
            _validate.check_out(w, m, self._dtype, x)
            if w is y or (is_device_array(w) and w.size and w.data.ptr == y.data.ptr) or (
                    isinstance(w, np.ndarray) and np.may_share_memory(w, y)):
                raise ValueError("w must not be y: the kernel reads w while it writes y")
        if not hasattr(dot, "dtype") or dot.dtype != np.float64 or tuple(dot.shape) != (1,):
            raise TypeError(f"dot must be a float64 array of shape (1,), got {getattr(dot, 'dtype', type(dot).__name__)} "
                            f"of shape {getattr(dot, 'shape', None)}")
        if is_device_array(dot) != is_device_array(x) or is_device_array(x) != (self._backend == "gpu"):
            raise TypeError(
                f"spmv_dot moves nothing between host and device: x, y, w and dot must all be "
                f"{'CuPy' if self._backend == 'gpu' else 'NumPy'} arrays for this matrix on {self._backend}"
            )
        alpha = _validate.check_scalar("alpha", alpha, self._dtype)
        beta = _validate.check_scalar("beta", beta, self._dtype)
        return self._spmv_dot(x, y, alpha, beta, w, dot)

    def _spmv_dot(self, x: Any, y: Any, alpha: Any, beta: Any, w: Any, dot: Any) -> Any:
        """The product, then the dot product in a second pass (formats without a fused
        epilogue; every format's CPU twin)."""
        self._spmv(x, y, alpha, beta, False)
        vector_dot(w, y, dot, self._cache)
        return y

    def __matmul__(self, x: Any) -> Any:
        if sp.issparse(x) or isinstance(x, SparseMatrix):
            return NotImplemented
        return self._product(x, None, 1, 0, transpose=False)

    def _product(self, x: Any, y: Any, alpha: Any, beta: Any, transpose: bool) -> Any:
        m, n = self._shape[::-1] if transpose else self._shape
        dtype = self._dtype
        x = _validate.check_vector(x, n, dtype)
        if y is not None:
            _validate.check_out(y, m, dtype, x)
        alpha = _validate.check_scalar("alpha", alpha, dtype)
        beta = _validate.check_scalar("beta", beta, dtype)
        if y is None and beta != 0:
            raise ValueError("beta is nonzero but no y was given to scale and add")
        x_on_device = is_device_array(x)
        if self._backend == "cpu":
            if x_on_device:
                raise TypeError(
                    "this matrix lives on the CPU backend but x is a CuPy array; move the matrix "
                    "with .asbackend('gpu') or pass a NumPy x"
                )
            out = np.empty(m, dtype) if y is None else y
            return self._spmv(x, out, alpha, beta, transpose)
        if x_on_device:
            import cupy

            out = cupy.empty(m, dtype) if y is None else y
            return self._spmv(x, out, alpha, beta, transpose)
        # NumPy in, NumPy out: upload, compute, download (into y when given).
        import cupy

        device_y = cupy.asarray(y) if y is not None and beta != 0 else cupy.empty(m, dtype)
        result = self._spmv(cupy.asarray(x), device_y, alpha, beta, transpose)
        if y is None:
            return result.get()
        result.get(out=y)
        return y

    def _spmv(self, x: Any, y: Any, alpha: Any, beta: Any, transpose: bool) -> Any:
        raise NotImplementedError

    # ------------------------------------------------------------------ movement
    def asbackend(self, backend: str) -> SparseMatrix:
        """The same matrix with its arrays on ``backend`` (``"cpu"`` or ``"gpu"``)."""
        target = resolve_backend(backend)
        if target == self._backend:
            return self
        csr = self.to_csr()
        from sparsegpu.formats.csr import CSR

        moved = CSR._make(*(to_backend(a, target) for a in (csr.data, csr.indices, csr.indptr)), csr.shape, target)
        return moved.asformat(self.format) if self.format != "csr" else moved

    def __repr__(self) -> str:
        m, n = self._shape
        return (
            f"<{type(self).__name__} {m}x{n}, {self._dtype}, {self._index_dtype} indices, "
            f"{self.nnz} stored, on {self._backend}>"
        )


class TransposedOperator:
    """``A.T``: the operator x -> A^T x over A's own storage.

    >>> import numpy as np, scipy.sparse as sp, sparsegpu
    >>> A = sparsegpu.from_scipy(sp.random(4, 3, density=0.5, random_state=0), backend="cpu")
    >>> np.allclose(A.T @ np.ones(4), A.to_scipy().T @ np.ones(4))
    True
    """

    def __init__(self, base: SparseMatrix) -> None:
        self._base = base

    @property
    def shape(self) -> tuple[int, int]:
        m, n = self._base.shape
        return n, m

    @property
    def dtype(self) -> np.dtype:
        return self._base.dtype

    @property
    def nnz(self) -> int:
        return self._base.nnz

    @property
    def T(self) -> SparseMatrix:
        return self._base

    def spmv(self, x: Any, y: Any = None, alpha: Any = 1, beta: Any = 0) -> Any:
        """``alpha * A^T @ x + beta * y``; arguments as for :meth:`SparseMatrix.spmv`."""
        return self._base._product(x, y, alpha, beta, transpose=True)

    def __matmul__(self, x: Any) -> Any:
        if sp.issparse(x) or isinstance(x, SparseMatrix):
            return NotImplemented
        return self._base._product(x, None, 1, 0, transpose=True)

    def to_scipy(self) -> sp.sparray:
        return self._base.to_scipy().T

    def __repr__(self) -> str:
        return f"<transpose of {self._base!r}>"

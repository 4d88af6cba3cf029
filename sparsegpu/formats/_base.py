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
from sparsegpu._backend import (  # noqa: F401
    Backend,
    array_module,
    is_device_array,
    resolve_backend,
    to_backend,
    to_host,
)
from sparsegpu.primitives import vector_dot
from sparsegpu.reference.spmv import _combine as combine


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
                    casting: str = "same_kind") -> sp.sparray:
    """``S`` as a scipy ``csr_array`` or ``csc_array`` in canonical form: duplicates summed,
    indices sorted, values and indices in the dtypes sparsegpu stores, in arrays of its own.

    ``S``'s arrays are checked first (:func:`as_scipy_sparse`), so no SciPy routine sees a
    corrupted matrix, and the result's size is checked against the host's memory. Explicit zeros
    are kept (they are stored entries and count in ``nnz``); call ``S.eliminate_zeros()`` first
    to drop them. The caller's matrix is never modified and never shared."""
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


def format_key(format: Any) -> str:
    """``format`` as a registered format's key (case-insensitive); TypeError or ValueError."""
    if not isinstance(format, str):
        raise TypeError(f"format must be a string such as 'csr', got {type(format).__name__} {format!r}")
    key = format.lower()
    if key not in SparseMatrix.formats:
        raise ValueError(f"unknown format {format!r}; known: {', '.join(sorted(SparseMatrix.formats))}")
    return key


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
        casting: str = "same_kind",
        **params: Any,
    ) -> SparseMatrix:
        """Build from any scipy sparse matrix or array (any scipy format).

        Parameters
        ----------
        S : scipy sparse matrix or array
            Checked before any SciPy routine reads it (see the README's "Errors").
        dtype : dtype, optional
            float32, float64, complex64 or complex128 (default: S's, with integers and booleans
            stored as float64).
        index_dtype : dtype, optional
            int32 or int64 (default: int32 when every index fits).
        backend : {"gpu", "cpu"}, optional
            Default: :func:`sparsegpu.backend`.
        casting : str, optional
            NumPy's casting rule from S's values to ``dtype``; complex to real needs "unsafe".
        **params
            The format's parameters.

        Returns
        -------
        SparseMatrix
            Duplicates summed, indices sorted, explicit zeros kept as stored entries; no memory
            shared with ``S``.

        Raises
        ------
        TypeError
            ``S`` is not a scipy sparse matrix; an unsupported or unsafe dtype.
        ValueError
            ``S``'s arrays do not describe a matrix (indices out of range, pointers not
            monotone, ...); the matrix cannot fit in memory.

        Examples
        --------
        >>> import scipy.sparse as sp, sparsegpu
        >>> A = sparsegpu.CSR.from_scipy(sp.eye(3, format="coo"), backend="cpu")
        >>> A.shape, A.nnz
        ((3, 3), 3)
        """
        csr = SparseMatrix.formats["csr"].from_scipy(S, dtype=dtype, index_dtype=index_dtype, backend=backend,
                                                    casting=casting)
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
        key = format_key(format)
        if key == self.format and not params:
            return self
        return SparseMatrix.formats[key]._from_csr(self.to_csr(), **params)

    def astype(self, dtype: Any, casting: str = "same_kind") -> SparseMatrix:
        """A copy with values cast to ``dtype`` (float32, float64, complex64 or complex128)
        under NumPy's ``casting`` rule (complex to real needs ``casting="unsafe"``)."""
        target = _validate.requested_value_dtype(dtype)
        _validate.check_cast("values", self._dtype, target, casting)
        return self._map_values(lambda values: _validate.cast_values(values, target).copy())

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
            _validate.check_same_library("w", w, x)
            if _validate.overlaps(w, y):
                raise ValueError("w must not overlap y: the kernel reads w while it writes y")
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
        if self._backend == "cpu":
            self._host_product(x, y, alpha, beta, False)
            vector_dot(w, y, dot, self._cache)
            return y
        return self._spmv_dot(x, y, alpha, beta, w, dot)

    def _spmv_dot(self, x: Any, y: Any, alpha: Any, beta: Any, w: Any, dot: Any) -> Any:
        """The product, then the dot product in a second pass (formats without a fused
        epilogue)."""
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
            return self._host_product(x, y, alpha, beta, transpose)
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

    def _host_product(self, x: np.ndarray, y: np.ndarray | None, alpha: Any, beta: Any, transpose: bool) -> np.ndarray:
        """The CPU backend's product: SciPy's compiled CSR (CSC for ``A.T``) product over a view of
        this matrix built once and cached, so the CPU backend runs at SciPy's speed whatever the
        format. The format's NumPy reference runs only when asked (:meth:`reference_spmv`)."""
        key = "scipy_t" if transpose else "scipy"
        view = self._cache.get(key)
        if view is None:
            csr = self if self.format == "csr" else self._cache.setdefault("host_csr", self.to_csr())
            plain = sp.csr_array((csr.data, csr.indices, csr.indptr), shape=self._shape, copy=False)
            view = self._cache[key] = plain.T if transpose else plain
        product = view @ x
        if y is None:
            return product if alpha == 1 else np.multiply(product, alpha, out=product)
        return combine(y, product, alpha, beta)

    def reference_spmv(self, x: Any, y: Any = None, alpha: Any = 1, beta: Any = 0, transpose: bool = False) -> Any:
        """``alpha * A @ x + beta * y`` (``A.T`` with ``transpose``) by the format's NumPy
        reference kernel, over this matrix's arrays (a GPU matrix's layout is rebuilt on the host
        with the same parameters once, and cached): the oracle the GPU kernels are tested
        against. NumPy in, NumPy out.

        >>> import numpy as np, scipy.sparse as sp, sparsegpu
        >>> A = sparsegpu.from_scipy(sp.eye(3), format="ell", backend="cpu")
        >>> A.reference_spmv(np.arange(3.0)).tolist()
        [0.0, 1.0, 2.0]
        """
        m, n = self._shape[::-1] if transpose else self._shape
        x = to_host(_validate.check_vector(x, n, self._dtype))
        if y is not None:
            _validate.check_out(y, m, self._dtype, x)
        alpha = _validate.check_scalar("alpha", alpha, self._dtype)
        beta = _validate.check_scalar("beta", beta, self._dtype)
        if y is None and beta != 0:
            raise ValueError("beta is nonzero but no y was given to scale and add")
        host = self if self._backend == "cpu" else self._cache.setdefault("reference", self.asbackend("cpu"))
        return host._spmv(x, np.empty(m, self._dtype) if y is None else y, alpha, beta, transpose)

    def _spmv(self, x: Any, y: Any, alpha: Any, beta: Any, transpose: bool) -> Any:
        raise NotImplementedError

    # ------------------------------------------------------------------ movement
    def asbackend(self, backend: str) -> SparseMatrix:
        """The same matrix with its arrays on ``backend`` (``"cpu"`` or ``"gpu"``)."""
        target = resolve_backend(backend)
        if target == self._backend:
            return self
        csr = self.to_csr()
        moved = SparseMatrix.formats["csr"]._make(*(to_backend(a, target) for a in (csr.data, csr.indices, csr.indptr)), csr.shape, target)
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

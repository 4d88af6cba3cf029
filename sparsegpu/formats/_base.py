"""The interface every sparsegpu matrix shares, and the transposed-operator view.

A format subclass supplies: ``_arrays()`` (its stored arrays by name), ``nnz``,
``_from_csr(csr, **params)`` (build from a CSR on the same backend), ``to_csr()``,
``_map_values(fn)`` (same structure, new values) and ``_spmv(x, y, alpha, beta, transpose)``
(compute into an allocated ``y`` on the matrix's backend); optionally ``_spmv_dot`` (the
product with a dot product in its epilogue; the default runs ``_spmv`` then a dot pass).
Everything user-facing (checks, host/device movement of x and y, ``@``, ``T``, conversions)
lives here once.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp

from sparsegpu import _validate
from sparsegpu._backend import (
    Backend,
    array_module,
    deterministic,
    is_device_array,
    resolve_backend,
    to_backend,
    to_host,
)
from sparsegpu.formats import _spgemm, _spmm
from sparsegpu.formats._arithmetic import ArithmeticMixin
from sparsegpu.formats._fast_product import FAST, fast_product
from sparsegpu.formats._scipy import (  # noqa: F401  (re-exported for the layers above)
    as_scipy_sparse,
    canonical_scipy,
    compressed_bytes,
    host_copy,
    scipy_product,
)
from sparsegpu.formats._vector_products import VectorProductsMixin


def format_key(format: Any) -> str:
    """``format`` as a registered format's key (case-insensitive); TypeError or ValueError."""
    if not isinstance(format, str):
        raise TypeError(f"format must be a string such as 'csr', got {type(format).__name__} {format!r}")
    key = format.lower()
    if key not in SparseMatrix.formats:
        raise ValueError(f"unknown format {format!r}; known: {', '.join(sorted(SparseMatrix.formats))}")
    return key


class SparseMatrix(VectorProductsMixin, ArithmeticMixin):
    """Base of every sparsegpu matrix format: what users call on any of them.

    ``A @ x`` is ``A.spmv(x)``; ``A.T @ x`` the transposed product (:attr:`T`). NumPy ``x``
    gives NumPy results, CuPy ``x`` CuPy results; a GPU matrix uploads a NumPy ``x`` and
    downloads the result. Subclasses (CSR, CSC, COO, ELL, HYB, JDS, SELL) follow the contract in
    the module docstring.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp, sparsegpu
    >>> A = sparsegpu.from_scipy(sp.eye(3, format="csr") * 2.0, backend="cpu")
    >>> isinstance(A, sparsegpu.SparseMatrix), (A @ np.ones(3)).tolist()
    (True, [2.0, 2.0, 2.0])
    """

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
        """Stored entries: explicit zeros included, padding excluded (``int``)."""
        raise NotImplementedError

    @property
    def nbytes(self) -> int:
        """Bytes of the format's stored arrays, padding included and caches (such as a
        transposed copy) excluded (``int``)."""
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
        """The same entries as a scipy sparse array, copied to the host.

        Returns
        -------
        scipy.sparse.sparray
            CSR (CSC for a CSC matrix, COO for a COO matrix), sharing no memory with ``self``.

        Examples
        --------
        >>> import scipy.sparse as sp, sparsegpu
        >>> S = sp.random(5, 4, density=0.5, random_state=0, format="csr")
        >>> (sparsegpu.from_scipy(S, format="sell", backend="cpu").to_scipy() != S).nnz
        0
        """
        return self.to_csr().to_scipy()

    def asformat(self, format: str, **params: Any) -> SparseMatrix:
        """This matrix in another sparsegpu format, converted on the matrix's backend.

        Parameters
        ----------
        format : str
            ``"csr"``, ``"csc"``, ``"coo"``, ``"ell"``, ``"hyb"``, ``"jds"`` or ``"sell"``
            (case-insensitive).
        **params
            The target format's parameters (for example ``C`` and ``sigma`` for SELL).

        Returns
        -------
        SparseMatrix
            ``self`` when it is already in that format and no parameters are given.

        Raises
        ------
        TypeError
            ``format`` is not a string; an unknown format parameter.
        ValueError
            An unknown format; a format parameter the target refuses (for example ELL's
            ``max_fill``).

        Examples
        --------
        >>> import scipy.sparse as sp, sparsegpu
        >>> A = sparsegpu.from_scipy(sp.eye(3), backend="cpu")
        >>> A.asformat("ell").format, A.asformat("csr") is A
        ('ell', True)
        """
        key = format_key(format)
        if key == self.format and not params:
            return self
        return SparseMatrix.formats[key]._from_csr(self.to_csr(), **params)

    def astype(self, dtype: Any, casting: str = "same_kind") -> SparseMatrix:
        """A copy with its values cast to ``dtype``.

        Parameters
        ----------
        dtype : dtype
            float32, float64, complex64 or complex128.
        casting : str, optional
            NumPy's casting rule (default "same_kind"; complex to real needs "unsafe").

        Returns
        -------
        SparseMatrix
            Same format, structure and backend, new values.

        Raises
        ------
        TypeError
            An unsupported ``dtype``, or a cast the rule forbids.
        ValueError
            An unknown ``casting``.

        Examples
        --------
        >>> import numpy as np, scipy.sparse as sp, sparsegpu
        >>> sparsegpu.from_scipy(sp.eye(2), backend="cpu").astype(np.float32).dtype
        dtype('float32')
        """
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
        """The transposed operator (:class:`TransposedOperator`): ``A.T @ x`` computes A^T x
        without forming A^T as a matrix (in deterministic mode some formats build and cache a
        transposed copy on first use)."""
        return TransposedOperator(self)


    def __matmul__(self, x: Any) -> Any:
        if self._backend == "gpu":
            fast = self._cache.get((FAST, self._fast_key()))
            if fast is not None:
                out = fast(x, None, 1, 0)
                if out is not None:
                    return out
        if sp.issparse(x) or isinstance(x, (SparseMatrix, TransposedOperator)):
            return _spgemm.spgemm(self, x)  # sparse times sparse: a CSR, SciPy's pattern
        _check_operand_ndim(x)
        if np.ndim(x) == 2:  # a block of vectors: sparse times dense (spmv stays 1-D)
            return _spmm.spmm(self, x, None, 1, 0, transpose=False)
        return self._product(x, None, 1, 0, transpose=False)

    def __rmatmul__(self, x: Any) -> Any:
        if sp.issparse(x):  # scipy @ sparsegpu: the scipy operand moves to this matrix's backend
            return _spgemm.spgemm(x, self)
        return NotImplemented

    def spmm(self, X: Any, Y: Any = None, alpha: Any = 1, beta: Any = 0) -> Any:
        """``alpha * A @ X + beta * Y`` for a dense 2-D ``X`` (n x k): sparse times dense.

        Each entry of A is read once for many columns of X (details: the module
        ``sparsegpu.formats._spmm``); bitwise reproducible run to run. ``A @ X`` is
        ``A.spmm(X)``; ``A.T @ X`` and ``A.T.spmm(X, Y, alpha, beta)`` the transposed product.
        On the GPU, a column-major ``X`` on a matrix whose columns scatter (a power-law graph)
        is first copied into a row-major scratch of n x k values (plus m x k for a ``Y``
        without unit column stride), which the faster row-major kernels then read.

        Parameters
        ----------
        X : ndarray
            2-D, ``shape[1]`` rows, C or F order (or any strided view), NumPy or CuPy (a NumPy
            ``X`` with a GPU matrix is uploaded and the result comes back as NumPy). Read where
            it lies; cast (so copied) only when its dtype is not the product's.
        Y : ndarray, optional
            Written in place and returned when given (its order is kept): ``shape[0]`` x k,
            exactly the product's dtype, the same array library as ``X``, not overlapping
            ``X``. Required when ``beta != 0``; never read when ``beta == 0``.
        alpha, beta : scalar, optional
            Default 1 and 0; complex only for a complex product.

        Returns
        -------
        ndarray
            ``Y``, or a new array in ``X``'s order. Its dtype is NumPy's promotion of the
            matrix's and ``X``'s (``np.result_type``), as SciPy's.

        Raises
        ------
        ValueError
            ``X`` not 2-D or of the wrong row count (the message names both shapes); ``Y`` of
            the wrong shape, read-only or overlapping ``X``; ``beta`` nonzero without ``Y``.
        TypeError
            A non-numeric ``X``; a promotion outside float32, float64, complex64 and
            complex128; ``Y`` of another dtype or array library; a CuPy ``X`` with a CPU
            matrix; a complex ``alpha`` or ``beta`` for a real product.

        Examples
        --------
        >>> import numpy as np, scipy.sparse as sp, sparsegpu
        >>> A = sparsegpu.from_scipy(sp.csr_array(np.array([[1.0, 0, 2], [0, 3, 0]])), backend="cpu")
        >>> X = np.arange(6.0).reshape(3, 2)
        >>> A.spmm(X).tolist()
        [[8.0, 11.0], [6.0, 9.0]]
        >>> Y = np.ones((2, 2))
        >>> A.spmm(X, Y, alpha=2.0, beta=1.0) is Y, Y.tolist()
        (True, [[17.0, 23.0], [13.0, 19.0]])
        >>> (A.T @ np.ones((2, 1))).ravel().tolist()
        [1.0, 3.0, 2.0]
        >>> A.T.spmm(np.ones((2, 1)), np.ones((3, 1)), beta=-1.0).ravel().tolist()
        [0.0, 2.0, 1.0]
        """
        return _spmm.spmm(self, X, Y, alpha, beta, transpose=False)

    def _product(self, x: Any, y: Any, alpha: Any, beta: Any, transpose: bool) -> Any:
        if not transpose and self._backend == "gpu":
            # The fast path (sparsegpu.formats._fast_product): a CuPy x and y of signatures
            # accepted before, plain alpha and beta; None sends the call through the checks below.
            fast = self._cache.get((FAST, self._fast_key()))
            if fast is not None:
                out = fast(x, y, alpha, beta)
                if out is not None:
                    return out
        m, n = self._shape[::-1] if transpose else self._shape
        dtype = self._dtype
        given_x = x
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

            # The kernels read x and write y as contiguous vectors: a strided view is copied in
            # (x) or computed apart and copied back (y).
            x = cupy.ascontiguousarray(x)
            if y is not None and not y.flags.c_contiguous:
                y[...] = self._spmv(x, cupy.ascontiguousarray(y), alpha, beta, transpose)
                return y
            out = cupy.empty(m, dtype) if y is None else y
            result = self._spmv(x, out, alpha, beta, transpose)
            if not transpose:  # the checks passed: later calls like this one may skip them
                fast = fast_product(self, self._fast_key())
                if fast is not None:
                    fast.accept(given_x, x, y)
            return result
        # NumPy in, NumPy out: upload, compute, download (into y when given).
        import cupy

        device_y = cupy.asarray(y) if y is not None and beta != 0 else cupy.empty(m, dtype)
        result = self._spmv(cupy.asarray(x), device_y, alpha, beta, transpose)
        if y is None:
            return result.get()
        y[...] = result.get()
        return y

    def _host_product(self, x: np.ndarray, y: np.ndarray | None, alpha: Any, beta: Any, transpose: bool) -> np.ndarray:
        """The CPU backend's product (:func:`sparsegpu.formats._scipy.scipy_product`)."""
        return scipy_product(self, x, y, alpha, beta, transpose)

    def reference_spmv(self, x: Any, y: Any = None, alpha: Any = 1, beta: Any = 0, transpose: bool = False) -> Any:
        """``alpha * A @ x + beta * y`` by the format's NumPy reference kernel.

        The reference runs over this matrix's own layout (a GPU matrix's layout is rebuilt on
        the host with the same parameters once, and cached): the oracle the GPU kernels are
        tested against. Products on the CPU backend use SciPy's compiled kernels instead.

        Parameters
        ----------
        x : ndarray
            1-D, length ``shape[1]`` (``shape[0]`` with ``transpose``); a CuPy ``x`` is
            downloaded.
        y : numpy.ndarray, optional
            Written in place and returned when given; required when ``beta != 0``.
        alpha, beta : scalar, optional
            Default 1 and 0.
        transpose : bool, optional
            Compute with ``A.T`` instead of ``A``.

        Returns
        -------
        numpy.ndarray
            ``y``, or a new array of the matrix's dtype.

        Raises
        ------
        ValueError, TypeError
            As for :meth:`spmv`.

        Examples
        --------
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
        if self._backend == "cpu":
            host = self
        else:
            if "reference" not in self._cache:  # built once: a host copy of the same layout
                self._cache["reference"] = self.asbackend("cpu")
            host = self._cache["reference"]
        return host._spmv(x, np.empty(m, self._dtype) if y is None else y, alpha, beta, transpose)

    def _spmv(self, x: Any, y: Any, alpha: Any, beta: Any, transpose: bool) -> Any:
        raise NotImplementedError

    def _packed_launches(self) -> tuple[list[Any], bool] | None:
        """The GPU launches of ``_spmv``'s product (not transposed), as
        :class:`sparsegpu.formats._fast_product.Launch` records, and whether y is scaled by beta
        before them; None: this format has no fast path. Called once the general path has run
        a product (so its launch plans are cached)."""
        return None

    def _fast_key(self) -> Any:
        """What selects the launches of the product besides the matrix (a fast product is
        kept per value): the deterministic option by default."""
        return deterministic()

    # ------------------------------------------------------------------ movement
    def asbackend(self, backend: str) -> SparseMatrix:
        """The same matrix with its arrays on ``backend``.

        Parameters
        ----------
        backend : {"cpu", "gpu"}
            The target backend.

        Returns
        -------
        SparseMatrix
            ``self`` when already there, else the same format and layout parameters.

        Raises
        ------
        ValueError
            ``backend`` is neither "cpu" nor "gpu".
        BackendError
            ``"gpu"`` requested where no GPU is usable.

        Examples
        --------
        >>> import scipy.sparse as sp, sparsegpu
        >>> A = sparsegpu.from_scipy(sp.eye(3), backend="cpu")
        >>> A.asbackend("cpu") is A
        True
        """
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


def _check_operand_ndim(x: Any) -> None:
    """``A @ x`` takes a vector or a block of vectors."""
    if np.ndim(x) not in (1, 2):
        raise ValueError(f"x must be 1-D (a vector) or 2-D (a block of vectors), got shape {np.shape(x)}")


class TransposedOperator:
    """``A.T``: the operator x -> A^T x over A's own storage.

    It supports ``@``, :meth:`spmv` and :meth:`spmm` (with ``y``/``Y``, ``alpha`` and ``beta``), ``shape``, ``dtype``,
    ``nnz``, :meth:`to_scipy`, and ``.T`` (back to ``A``). Products follow the rules of
    :meth:`SparseMatrix.spmv`.

    Parameters
    ----------
    base : SparseMatrix
        The matrix A.

    Examples
    --------
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

    def spmm(self, X: Any, Y: Any = None, alpha: Any = 1, beta: Any = 0) -> Any:
        """``alpha * A^T @ X + beta * Y``; arguments as for :meth:`SparseMatrix.spmm`."""
        return _spmm.spmm(self._base, X, Y, alpha, beta, transpose=True)

    def __matmul__(self, x: Any) -> Any:
        if sp.issparse(x) or isinstance(x, (SparseMatrix, TransposedOperator)):
            return _spgemm.spgemm(self, x)
        _check_operand_ndim(x)
        if np.ndim(x) == 2:  # A.T @ X: sparse times dense over A^T's CSR
            return _spmm.spmm(self._base, x, None, 1, 0, transpose=True)
        return self._base._product(x, None, 1, 0, transpose=True)

    def to_scipy(self) -> sp.sparray:
        return self._base.to_scipy().T

    def __repr__(self) -> str:
        return f"<transpose of {self._base!r}>"

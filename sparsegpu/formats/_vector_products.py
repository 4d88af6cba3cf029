"""The vector products every format shares: ``spmv`` (over a semiring, masked), ``spmspv``
(a sparse vector, push or pull) and ``spmv_dot`` (a product fused with a dot product). A mixin
of :class:`sparsegpu.formats.SparseMatrix`; each format supplies ``_spmv``, ``_semiring_csr``
and ``_spmv_dot``."""

from __future__ import annotations

from typing import Any

import numpy as np

from sparsegpu import _validate
from sparsegpu._backend import is_device_array
from sparsegpu.formats import _semiring
from sparsegpu.primitives import vector_dot


class VectorProductsMixin:
    """``spmv``, ``spmspv`` and ``spmv_dot`` of :class:`sparsegpu.formats.SparseMatrix`."""

    def spmv(self, x: Any, y: Any = None, alpha: Any = 1, beta: Any = 0, *, semiring: Any = None,
             mask: Any = None, complement: bool = False) -> Any:
        """``alpha * A @ x + beta * y``, or the product over a semiring, optionally masked.

        With ``semiring`` (other than plus_times) or a ``mask``: ``out[i]`` = add-reduce over
        stored j of ``mul(A[i, j], x[j])`` (:mod:`sparsegpu.semiring`; an empty row gives the
        monoid's identity), computed only for the rows the mask allows; the others keep ``y``'s
        value when ``y`` is given, else get the identity. ``semiring=None`` or plus_times
        without a mask is the ordinary product, unchanged. Details: the module
        ``sparsegpu.formats._semiring`` (COO, CSC, HYB, JDS and SELL with split slices or hot
        columns run semiring products over their CSR, built once and cached).

        Parameters
        ----------
        x : ndarray
            1-D, length ``shape[1]``, NumPy or CuPy (a NumPy ``x`` with a GPU matrix is uploaded
            and the result comes back as NumPy).
        y : ndarray, optional
            Written in place and returned when given: the matrix's dtype exactly, length
            ``shape[0]``, the same array library as ``x``, not overlapping ``x``. Required when
            ``beta != 0``; never read when ``beta == 0``.
        alpha, beta : scalar, optional
            Default 1 and 0; complex only for a complex matrix; other values only with
            plus_times.
        semiring : Semiring or str, optional
            A :class:`sparsegpu.semiring.Semiring` or a predefined one's name (``"min_plus"``).
            Complex matrices support only plus_times.
        mask : ndarray, optional
            1-D, length ``shape[0]``, booleans or numbers: nonzero rows are computed.
        complement : bool, optional
            Compute the rows where ``mask`` is zero instead.

        Returns
        -------
        ndarray
            ``y``, or a new array of the matrix's dtype.

        Raises
        ------
        ValueError
            Wrong shapes; ``y`` read-only or overlapping ``x``; ``beta`` nonzero without ``y``;
            ``alpha``/``beta`` other than 1/0 with a semiring other than plus_times; an unknown
            semiring name; ``complement`` without ``mask``.
        TypeError
            Arrays of a dtype that does not fit or of different libraries; a CuPy ``x`` with a
            CPU matrix; a non-numeric ``alpha`` or ``beta``; a semiring other than plus_times
            for a complex matrix; a ``mask`` that is not numeric; ``complement`` not a bool.

        Examples
        --------
        >>> import numpy as np, scipy.sparse as sp, sparsegpu
        >>> A = sparsegpu.from_scipy(sp.eye(3, format="csr"), backend="cpu")
        >>> y = np.ones(3)
        >>> A.spmv(np.arange(3.0), y, alpha=2.0, beta=1.0).tolist()
        [1.0, 3.0, 5.0]
        >>> A.spmv(np.arange(3.0), semiring="max_plus", mask=np.array([1, 0, 1])).tolist()
        [1.0, -inf, 3.0]
        """
        if semiring is None and mask is None and complement is False:
            return self._product(x, y, alpha, beta, transpose=False)
        return _semiring.semiring_spmv(self, x, y, alpha, beta, semiring, mask, complement)

    def spmspv(self, v: Any, *, semiring: Any = "plus_times", mask: Any = None, complement: bool = False,
               direction: str = "auto") -> Any:
        """The product with a sparse vector over a semiring: a frontier step of a graph traversal.

        ``out[i]`` = add-reduce over stored j with ``j`` in ``v`` of ``mul(A[i, j], v[j])``; the
        result stores the rows (the mask allows) that some entry of ``v`` reaches. Bitwise
        reproducible. Runs over the matrix's CSR and A^T's CSR, both built once and cached.

        Parameters
        ----------
        v : SparseVector
            Length ``shape[1]``, NumPy or CuPy (a NumPy ``v`` with a GPU matrix is uploaded and
            the result comes back as NumPy).
        semiring : Semiring or str, optional
            Default plus_times; ``"any_pair"`` for reachability, ``"min_plus"`` for relaxation.
        mask, complement : optional
            As for :meth:`spmv`: rows the mask excludes are left out of the result.
        direction : {"auto", "push", "pull"}, optional
            Push expands ``v``'s columns over A^T; pull computes the allowed rows over ``v``
            given densely. "auto" pushes while ``v``'s out-edges are at most 1/14 of the edges
            a pull would scan (Beamer's rule).

        Returns
        -------
        SparseVector
            Length ``shape[0]``, sorted indices; the same whatever the direction (up to the
            rounding of plus, which folds in a fixed order per direction).

        Raises
        ------
        TypeError
            ``v`` not a SparseVector, of a dtype that does not fit, or CuPy with a CPU matrix; a
            semiring other than plus_times for a complex matrix; a non-numeric mask.
        ValueError
            ``v``'s length; an unknown semiring or direction; a mask of the wrong length.

        Examples
        --------
        >>> import numpy as np, scipy.sparse as sp, sparsegpu
        >>> from sparsegpu.formats.vector import SparseVector
        >>> A = sparsegpu.from_scipy(sp.csr_array(np.array([[0, 1.0, 0], [0, 0, 1.0], [1.0, 0, 0]])), backend="cpu")
        >>> out = A.spmspv(SparseVector(3, np.array([1]), np.array([1.0])), semiring="any_pair")
        >>> out.indices.tolist(), out.values.tolist()
        ([0], [1.0])
        """
        return _semiring.spmspv(self, v, semiring, mask, complement, direction)

    def _semiring_csr(self) -> Any:
        """The CSR semiring products run over (built once and cached)."""
        if "semiring_csr" not in self._cache:
            self._cache["semiring_csr"] = self.to_csr()
        return self._cache["semiring_csr"]

    def _semiring_gpu(self, x: Any, out: Any, semiring: Any, mask: Any, complement: bool, **flags: Any) -> Any:
        """out[i] = the semiring fold of row i, for rows the mask allows (GPU arrays; others
        untouched). Formats with kernels of their own override it; the rest use their CSR."""
        return self._semiring_csr()._semiring_gpu(x, out, semiring, mask, complement, **flags)

    def spmv_dot(self, x: Any, y: Any, dot: Any, w: Any = None, alpha: Any = 1, beta: Any = 0) -> Any:
        """``y = alpha * A @ x + beta * y`` and ``dot[0] = sum_i w[i] * y[i]`` in one call.

        The dot product is fused into the product's epilogue where the format has one (CSR
        without split rows, ELL), else it is a second deterministic pass.

        Parameters
        ----------
        x : ndarray
            Real (float32 or float64) vector of length ``shape[1]`` on the matrix's backend
            (NumPy or CuPy; nothing is moved).
        y : ndarray
            Length ``shape[0]``, same backend and dtype; written in place, bitwise as
            :meth:`spmv` writes it. Must not overlap ``x`` or ``w``.
        dot : ndarray
            float64 of shape (1,) on the same backend (a view into a larger array works),
            written in place: the sum accumulated in float64 and reduced in a fixed order
            (bitwise reproducible run to run).
        w : ndarray, optional
            Length ``shape[0]`` (default ``x``, for a square matrix: CG's ``p . A p``).
        alpha, beta : scalar, optional
            Default 1 and 0.

        Returns
        -------
        ndarray
            ``y``.

        Raises
        ------
        TypeError
            A complex matrix; ``dot`` not float64 of shape (1,); arrays of different backends
            or not on the matrix's; a dtype that does not fit.
        ValueError
            Wrong lengths; ``w`` omitted for a non-square matrix; ``y`` overlapping ``x`` or
            ``w``.

        Notes
        -----
        On the GPU nothing is read back to the host and nothing is allocated after a matrix's
        first call (scratch space is cached on the matrix), so calls can be captured in a CUDA
        graph. One matrix must not run ``spmv_dot`` on two streams at once (shared scratch).

        Examples
        --------
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

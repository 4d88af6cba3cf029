"""SciPy's sparse arithmetic on sparsegpu matrices: ``A + B``, ``A - B``, ``A * B`` (entry-wise,
as SciPy's sparse arrays), ``c * A``, ``A / c``, ``-A``, ``abs(A)`` and :meth:`multiply`.

:class:`ArithmeticMixin` is a base of :class:`sparsegpu.SparseMatrix`. The semantics are
``scipy.sparse``'s ``*_array`` classes':

- sparse with sparse (same shape): the union (``+``, ``-``) or intersection (``*``) of the
  patterns, entries whose result is exactly zero dropped (cancellation included), indices
  sorted; CSR for CSR, CSC for CSC, CSR for the other formats. The CPU backend runs SciPy's
  compiled routine; the GPU backend merges the two sorted patterns by binary searches and
  combines pairs (:func:`sparsegpu.formats._elementwise.merge`), bitwise reproducibly.
- sparse with dense: ``+`` and ``-`` give a dense array (NumPy in, NumPy out; CuPy in, CuPy
  out); :meth:`multiply` gives a COO matrix, broadcasting a dense row or column as SciPy does.
- sparse with scalar: ``*`` and ``/`` scale the stored values (explicit zeros stay, the format
  stays); ``/`` computes ``A * (1 / c)`` in float64 for a real matrix, as SciPy; adding a
  nonzero scalar raises NotImplementedError, as SciPy.

Mixed value dtypes promote as NumPy does (``np.result_type``); index dtypes as the wider
operand's (int64 where the result needs it). Two sparse operands must live on one backend.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
import scipy.sparse as sp

from sparsegpu import _validate, convert
from sparsegpu._backend import backend_of, is_device_array, to_backend
from sparsegpu.formats import _elementwise as ew
from sparsegpu.formats._structure import StructureMixin


def as_scalar(value: Any) -> Any:
    """``value`` as a NumPy scalar when it is a number (Python, NumPy, or a 0-d NumPy or CuPy
    array), a Python number kept as it is (NumPy's weak scalars); else None."""
    if isinstance(value, (numbers.Number, np.number, np.bool_)) and not isinstance(value, np.ndarray):
        return value
    if (isinstance(value, np.ndarray) or is_device_array(value)) and value.ndim == 0 and value.dtype.kind in "biufc":
        host = value.get() if is_device_array(value) else value
        return host[()]
    return None


def scalar_dtype(dtype: np.dtype, scalar: Any) -> np.dtype:
    """The dtype of ``values * scalar`` for ``values`` of ``dtype`` (NumPy's promotion),
    checked to be one sparsegpu stores."""
    result = np.result_type(dtype, scalar)
    if result not in _validate.VALUE_DTYPES:
        raise TypeError(f"a {dtype} matrix times {scalar!r} would be {result}; sparsegpu stores "
                        "float32, float64, complex64 or complex128")
    return result


class ArithmeticMixin(StructureMixin):
    """Operators and :meth:`multiply` (see the module docstring)."""

    # NumPy and CuPy arrays defer to these operators instead of treating the matrix as an object.
    __array_ufunc__ = None
    __array_priority__ = 10.1

    # ------------------------------------------------------------------ operands
    def _sparse_operand(self, other: Any) -> Any:
        """``other`` (a sparsegpu or scipy sparse matrix) on this matrix's backend, same shape
        (checked before a scipy operand is converted)."""
        if tuple(other.shape) != self._shape:
            raise ValueError(f"inconsistent shapes: {self._shape} and {tuple(other.shape)}")
        if sp.issparse(other):
            return self.formats["csr"].from_scipy(other, backend=self._backend)
        if other.backend != self._backend:
            raise TypeError(f"the operands live on different backends ({self._backend} and {other.backend}); "
                            f"move one with .asbackend('{self._backend}')")
        return other

    def _dense_operand(self, other: Any) -> Any:
        """``other`` as a NumPy or CuPy array of at most 2 dimensions, or None if it is not one."""
        if isinstance(other, (list, tuple)):
            other = np.asarray(other)
            if other.dtype == object:
                return None
        if not (isinstance(other, np.ndarray) or is_device_array(other)):
            return None
        if other.ndim > 2:
            raise ValueError(f"a dense operand of a matrix has at most 2 dimensions, got shape {other.shape}")
        if other.dtype.kind not in "biufc":
            raise TypeError(f"the dense operand has dtype {other.dtype}, not a number")
        if is_device_array(other) and self._backend == "cpu":
            raise TypeError("the dense operand is a CuPy array but this matrix lives on the CPU backend; move "
                            "the matrix with .asbackend('gpu') or pass a NumPy array")
        return np.asarray(other) if isinstance(other, np.matrix) else other

    def _broadcast_shape(self, other: Any) -> tuple[int, int]:
        try:
            shape = np.broadcast_shapes(self._shape, tuple(other.shape))
        except ValueError:
            raise ValueError(f"inconsistent shapes: {self._shape} and {tuple(other.shape)}") from None
        return shape  # type: ignore[return-value]

    # ------------------------------------------------------------------ sparse with sparse
    def _binary_sparse(self, other: Any, op: str, reflected: bool = False) -> Any:
        other = self._sparse_operand(other)
        axis = 1 if self.format == "csc" else 0
        shape = self._shape if axis == 0 else self._shape[::-1]
        dtype = np.result_type(self._dtype, other.dtype)
        index_dtype = ew.result_index_dtype(self._shape, self.nnz + other.nnz, self._index_dtype, other.index_dtype)
        left, right = self._lines(axis), other._lines(axis)
        if reflected:
            left, right = right, left
        if self._backend == "cpu":
            arrays = ew.scipy_binop(left, right, op, shape, dtype, index_dtype)
        else:
            entries = self.nnz + other.nnz
            _validate.ensure_fits(entries * (40 + 2 * dtype.itemsize), f"{op} of two sparse matrices", "gpu")
            n_minor = shape[1]
            left = ew.canonical(*left, n_minor, self._xp)
            right = ew.canonical(*right, n_minor, self._xp)
            arrays = ew.merge(left, right, op, shape, dtype, index_dtype, self._xp)
        return self._compressed(arrays, axis)

    # ------------------------------------------------------------------ operators
    def __add__(self, other: Any) -> Any:
        return self._add_or_subtract(other, "add", reflected=False)

    def __radd__(self, other: Any) -> Any:
        return self._add_or_subtract(other, "add", reflected=True)

    def __sub__(self, other: Any) -> Any:
        return self._add_or_subtract(other, "subtract", reflected=False)

    def __rsub__(self, other: Any) -> Any:
        return self._add_or_subtract(other, "subtract", reflected=True)

    def _add_or_subtract(self, other: Any, op: str, reflected: bool) -> Any:
        """``self op other`` (``other op self`` when reflected), with SciPy's rules."""
        scalar = as_scalar(other)
        if scalar is not None:
            if scalar == 0:
                return -self if op == "subtract" and reflected else self.copy()
            raise NotImplementedError(f"{'adding' if op == 'add' else 'subtracting'} a nonzero scalar "
                                      f"{'to' if op == 'add' else 'and'} a sparse matrix is not supported "
                                      "(every entry would become nonzero); use A.toarray()")
        if sp.issparse(other) or isinstance(other, StructureMixin):
            return self._binary_sparse(other, op, reflected)
        dense = self._dense_operand(other)
        if dense is None:
            return NotImplemented
        if self._broadcast_shape(dense) != self._shape:
            raise ValueError(f"inconsistent shapes: {self._shape} and {tuple(dense.shape)}")
        return self._combine_dense(dense, op, reflected)

    def _combine_dense(self, dense: Any, op: str, reflected: bool) -> Any:
        """``self op dense`` as a dense array of ``dense``'s library (SciPy's order of operations:
        a copy of ``dense`` plus the entries for ``+``, the dense matrix minus ``dense`` for ``-``)."""
        dtype = np.result_type(self._dtype, dense.dtype)
        matrix = self if backend_of(dense) == self._backend else self.asbackend(backend_of(dense))
        xp = matrix._xp
        full = xp.broadcast_to(dense, self._shape)
        if op == "add":
            _validate.ensure_fits(full.size * dtype.itemsize, f"a dense {self._shape} sum", matrix.backend)
            out = xp.empty(self._shape, dtype=dtype)  # C order: a copy of a broadcast view may keep its 0 strides
            out[...] = full
            indptr, indices, data = matrix._canonical_lines(0)
            rows = matrix._row_of_entries(indptr)
            out[rows, indices] += data.astype(dtype, copy=False)
            return out
        mine = matrix._dense(dtype)
        return full - mine if reflected else mine - full

    def _row_of_entries(self, indptr: Any) -> Any:
        """The major index of every entry of compressed arrays with pointers ``indptr``."""
        return convert.expand_pointers(indptr, self._xp)

    def __neg__(self) -> Any:
        return self._with_values(lambda values: -values)

    def __abs__(self) -> Any:
        return self._canonical()._with_values(lambda values: abs(values))

    def __mul__(self, other: Any) -> Any:
        return self._multiply(other)

    def __rmul__(self, other: Any) -> Any:
        return self._multiply(other)

    def __truediv__(self, other: Any) -> Any:
        """``A / c`` as SciPy: ``A * (1 / c)``, in float64 for a real matrix; ``A / D`` for
        dense ``D`` is ``A.multiply(1 / D)``."""
        scalar = as_scalar(other)
        if scalar is not None:
            reciprocal = 1 / scalar  # a Python zero raises ZeroDivisionError, as in SciPy
            matrix = self.astype(np.float64) if np.can_cast(self._dtype, np.float64) else self
            return matrix._scaled(reciprocal)
        dense = self._dense_operand(other)
        if dense is None:
            return NotImplemented
        xp = np if isinstance(dense, np.ndarray) else self._xp
        return self.multiply(xp.divide(1, dense))

    def _scaled(self, scalar: Any) -> Any:
        """Values times ``scalar``, same format and structure (explicit zeros kept)."""
        dtype = scalar_dtype(self._dtype, scalar)
        return self._with_values(lambda values: ew.scale(values, scalar, dtype))

    def multiply(self, other: Any) -> Any:
        """The entry-wise product with a scalar, a sparse matrix or a dense array, as SciPy.

        Parameters
        ----------
        other : scalar, SparseMatrix, scipy sparse matrix or ndarray
            A scalar scales the values (the format stays). A sparse matrix of the same shape
            gives the product on the common pattern (zeros dropped; CSR, or CSC for a CSC
            matrix); a sparse row or column vector broadcasts. A dense array (NumPy or CuPy)
            of the same shape, or a row or column that broadcasts to it, gives a COO matrix
            with this matrix's pattern (a sparse row or column broadcasts against a dense
            matrix too).

        Returns
        -------
        SparseMatrix or ndarray
            On this matrix's backend (a 1x1 matrix times a dense array gives a dense array,
            as SciPy).

        Raises
        ------
        ValueError
            Shapes that do not broadcast (both named).
        TypeError
            ``other`` of another kind (such as ``A.T``, an operator); operands on different
            backends; a result dtype sparsegpu does not store.

        Examples
        --------
        >>> import numpy as np, scipy.sparse as sp, sparsegpu
        >>> A = sparsegpu.from_scipy(sp.csr_array(np.array([[1.0, 2.0], [0.0, 3.0]])), backend="cpu")
        >>> A.multiply(A).to_scipy().toarray().tolist()
        [[1.0, 4.0], [0.0, 9.0]]
        >>> A.multiply(np.array([10.0, 100.0])).to_scipy().toarray().tolist()
        [[10.0, 200.0], [0.0, 300.0]]
        >>> (2 * A).data.tolist(), (A / 2).dtype
        ([2.0, 4.0, 6.0], dtype('float64'))
        """
        result = self._multiply(other)
        if result is NotImplemented:
            raise TypeError(f"other must be a scalar, a sparse matrix or a dense array, got {type(other).__name__}"
                            + ("; A.T is an operator: use A.transpose() for a matrix"
                               if hasattr(other, "spmv") else ""))
        return result

    def _multiply(self, other: Any) -> Any:
        """:meth:`multiply`, NotImplemented for an operand of another kind (so that Python
        tries the other operand's ``*``)."""
        scalar = as_scalar(other)
        if scalar is not None:
            return self._scaled(scalar)
        if sp.issparse(other) or isinstance(other, StructureMixin):
            if other.ndim != 2:
                raise ValueError(f"other must be a 2-D sparse matrix, got a {other.ndim}-D sparse array "
                                 f"of shape {tuple(other.shape)}")
            if tuple(other.shape) == self._shape:
                return self._binary_sparse(other, "multiply")
            return self._multiply_sparse_vector(other)
        dense = self._dense_operand(other)
        if dense is None:
            return NotImplemented
        if dense.size == 1 and dense.ndim <= 2:
            self._broadcast_shape(dense)
            return self._scaled(as_scalar(dense.reshape(())))
        return self._multiply_dense(dense)

    def _multiply_dense(self, dense: Any) -> Any:
        """Entry-wise product with a broadcastable dense array: a COO matrix."""
        shape = self._broadcast_shape(dense)
        dtype = np.result_type(self._dtype, dense.dtype)
        if self._shape == (1, 1):  # SciPy: the single value times the dense array, dense (its library)
            value = to_backend(self.sum(), backend_of(dense))
            return (np if isinstance(dense, np.ndarray) else self._xp).multiply(value, dense).reshape(shape)
        dense = to_backend(dense, self._backend)
        xp = self._xp
        indptr, cols, data = self._canonical_lines(0)
        rows = self._row_of_entries(indptr)
        (m, n), (big_m, big_n) = self._shape, shape
        nnz = data.size
        if m == 1 and big_m > 1:  # a row times a matrix: the row repeated on every row
            _validate.ensure_fits(nnz * big_m * 24, "a broadcast product", self._backend)
            rows = xp.repeat(xp.arange(big_m, dtype=rows.dtype), nnz)
            cols, data = xp.tile(cols, big_m), xp.tile(data, big_m)
        elif n == 1 and big_n > 1:  # a column times a matrix: each entry across the row
            _validate.ensure_fits(nnz * big_n * 24, "a broadcast product", self._backend)
            rows, data = xp.repeat(rows, big_n), xp.repeat(data, big_n)
            cols = xp.tile(xp.arange(big_n, dtype=cols.dtype), nnz)
        values = ew.multiply_dense(rows, cols, data, xp.broadcast_to(dense, shape), dtype, xp)
        index_dtype = ew.result_index_dtype(shape, values.size, self._index_dtype)
        return self.formats["coo"]._make(rows.astype(index_dtype), cols.astype(index_dtype), values, shape,
                                         self._backend)

    def _multiply_sparse_vector(self, other: Any) -> Any:
        """Entry-wise product with a sparse row (1 x n) or column (m x 1), as SciPy: a product
        with the diagonal matrix of ``other``'s dense values (every one stored, so an inf or NaN
        entry of this matrix times an implicit zero gives NaN), results that are zero dropped."""
        if sp.issparse(other):
            other = self.formats["csr"].from_scipy(other, backend=self._backend)
        elif other.backend != self._backend:
            raise TypeError(f"the operands live on different backends ({self._backend} and {other.backend})")
        (m, n), (om, on) = self._shape, other.shape
        if (om, on) == (1, 1):
            return self._scaled(as_scalar(other.toarray().reshape(())))
        by_column = om == 1 and on == n
        if not (by_column or (on == 1 and om == m)):
            raise ValueError(f"inconsistent shapes: {self._shape} and {other.shape} (a sparse operand of "
                             "another shape broadcasts only as a row or a column of this matrix)")
        other = other.to_csr()
        values = other.toarray().ravel()
        dtype = np.result_type(self._dtype, other.dtype)
        axis = 1 if self.format == "csc" else 0
        indptr, indices, data = self._canonical_lines(axis)
        majors = self._row_of_entries(indptr)
        position = indices if by_column == (axis == 0) else majors  # the column (row) of each entry
        product = data.astype(dtype) * values[position].astype(dtype)
        kept = self._xp.flatnonzero(product != 0)
        new_indptr = convert.compress(majors[kept], indptr.size - 1, indptr.dtype, self._xp)
        return self._compressed((new_indptr, indices[kept], product[kept]), axis)

"""SciPy's structural operations and reductions on sparsegpu matrices: copy, transpose,
conjugate, dense copies, diagonals, sums, extremes, row selection and dropping zeros.

:class:`StructureMixin` is a base of :class:`sparsegpu.SparseMatrix` (through
:class:`sparsegpu.formats._arithmetic.ArithmeticMixin`). It reads a matrix through its format's
contract (``_arrays``, ``_map_values``, ``to_csr``, ``_from_csr``) and the compressed arrays of
CSR and CSC, so every format gets the operations. Results live on the operand's backend and
share no memory with it. Formats: CSR, CSC and COO keep theirs where SciPy does; the padded
formats (ELL, HYB, JDS, SELL) keep theirs for value maps and give CSR otherwise.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from sparsegpu import _validate, convert
from sparsegpu._backend import is_device_array, to_backend
from sparsegpu.formats import _elementwise as ew
from sparsegpu.formats import _reductions as red

COMPRESSED = ("csr", "csc")


class StructureMixin:
    """Copies, transposes, reductions and row selection (see the module docstring)."""

    # ------------------------------------------------------------------ access helpers
    def _lines(self, axis: int) -> tuple[Any, Any, Any]:
        """(indptr, indices, data) compressed along ``axis`` (0: CSR's rows, 1: CSC's columns),
        the matrix's own arrays where it has them (not to be modified)."""
        own = {"csr": 0, "csc": 1}.get(self.format)
        if own == axis:
            return self.indptr, self.indices, self.data
        if own is not None:  # the other orientation, built once and cached
            data, indices, indptr = self._swapped_arrays()
            return indptr, indices, data
        csr = self.to_csr()
        if axis == 0:
            return csr.indptr, csr.indices, csr.data
        data, indices, indptr = csr._swapped_arrays()
        return indptr, indices, data

    def _canonical_lines(self, axis: int) -> tuple[Any, Any, Any]:
        """:meth:`_lines` with sorted indices and duplicates summed (SciPy's canonical form)."""
        indptr, indices, data = self._lines(axis)
        return ew.canonical(indptr, indices, data, self._shape[1 - axis], self._xp)

    def _compressed(self, arrays: tuple[Any, Any, Any], axis: int, shape: tuple[int, int] | None = None) -> Any:
        """A CSR (axis 0) or CSC (axis 1) wrapping ``(indptr, indices, data)`` as they are."""
        indptr, indices, data = arrays
        cls = self.formats["csr" if axis == 0 else "csc"]
        return cls._make(data, indices, indptr, self._shape if shape is None else shape, self._backend)

    def _scipy_view(self, axis: int) -> Any:
        """A scipy CSR (axis 0) or CSC (axis 1) array over the host arrays, not copied: for
        SciPy's read-only routines on the CPU backend."""
        indptr, indices, data = self._lines(axis)
        cls = sp.csr_array if axis == 0 else sp.csc_array
        return cls((data, indices, indptr), shape=self._shape, copy=False)

    def _owned(self, result: Any) -> Any:
        """``result`` with copies of any array it shares with ``self``."""
        mine = [id(a) for a in self._arrays().values()]
        for name, array in result._arrays().items():
            if id(array) in mine:
                setattr(result, name, array.copy())
        return result

    def _with_values(self, fn: Any) -> Any:
        """Same format and structure (copied), values ``fn(values)``."""
        return self._owned(self._map_values(fn))

    def _rebuilt(self, csr: Any) -> Any:
        """``csr`` in this matrix's format and layout parameters."""
        if self.format == "csr":
            return csr
        params = self._layout_params() if hasattr(self, "_layout_params") else {}
        return self.formats[self.format]._from_csr(csr, **params)

    def _canonical(self) -> Any:
        """This matrix, or a copy of it in its format with duplicates summed."""
        if self.format == "coo":
            return self  # COO sums duplicates when built
        axis = 1 if self.format == "csc" else 0
        indptr, indices, data = self._lines(axis)
        if ew.is_canonical(indptr, indices, self._xp):
            return self
        result = self._compressed(ew.canonical(indptr, indices, data, self._shape[1 - axis], self._xp), axis)
        return result if axis == 1 else self._rebuilt(result)

    # ------------------------------------------------------------------ copies
    def copy(self) -> Any:
        """A copy sharing no memory with this matrix (same format, backend and layout).

        Returns
        -------
        SparseMatrix

        Examples
        --------
        >>> import scipy.sparse as sp, sparsegpu
        >>> A = sparsegpu.from_scipy(sp.eye(3), backend="cpu")
        >>> B = A.copy()
        >>> B.data[0] = 5.0
        >>> float(A.data[0])
        1.0
        """
        return self._with_values(lambda values: values.copy())

    def transpose(self, axes: Any = None, copy: bool = False) -> Any:
        """A^T as a matrix (``A.T`` is the lazy operator): CSR gives CSC, CSC gives CSR, COO
        gives COO (sorted by row), other formats give CSR, as SciPy.

        Parameters
        ----------
        axes : None, optional
            SciPy's argument; only None (or ``(1, 0)``) is meaningful for a matrix.
        copy : bool, optional
            Ignored: the result never shares memory with this matrix.

        Returns
        -------
        SparseMatrix

        Raises
        ------
        ValueError
            ``axes`` other than None or (1, 0).

        Examples
        --------
        >>> import numpy as np, scipy.sparse as sp, sparsegpu
        >>> A = sparsegpu.from_scipy(sp.csr_array(np.array([[1.0, 2.0], [0.0, 3.0]])), backend="cpu")
        >>> At = A.transpose()
        >>> At.format, At.to_scipy().toarray().tolist()
        ('csc', [[1.0, 0.0], [2.0, 3.0]])
        """
        if axes is not None and tuple(axes) != (1, 0):
            raise ValueError(f"axes must be None or (1, 0) for a 2-D matrix, got {axes!r}")
        shape = self._shape[::-1]
        if self.format in COMPRESSED:
            axis = 0 if self.format == "csr" else 1
            return self._compressed(tuple(a.copy() for a in self._lines(axis)), 1 - axis, shape)
        indptr, indices, data = self._lines(1)  # the CSR of A^T: new arrays, gathered from A's CSR
        if self.format == "coo":
            rows = convert.expand_pointers(indptr, self._xp)
            return self.formats["coo"]._make(rows, indices, data, shape, self._backend)
        return self._compressed((indptr, indices, data), 0, shape)

    def conj(self, copy: bool = True) -> Any:
        """The complex conjugate (a copy for a real matrix); same format.

        Parameters
        ----------
        copy : bool, optional
            Ignored: the result never shares memory with this matrix.

        Returns
        -------
        SparseMatrix

        Examples
        --------
        >>> import numpy as np, scipy.sparse as sp, sparsegpu
        >>> A = sparsegpu.from_scipy(sp.csr_array(np.array([[1 + 2j, 0]])), backend="cpu")
        >>> A.conj().data.tolist()
        [(1-2j)]
        """
        if self._dtype.kind == "c":
            return self._with_values(lambda values: values.conj())
        return self.copy()

    conjugate = conj

    def toarray(self) -> Any:
        """The dense matrix on this matrix's backend (NumPy or CuPy), duplicates summed.

        Returns
        -------
        ndarray
            C order, the matrix's dtype.

        Raises
        ------
        ValueError
            The dense array cannot fit in memory.

        Examples
        --------
        >>> import scipy.sparse as sp, sparsegpu
        >>> sparsegpu.from_scipy(sp.eye(2), backend="cpu").toarray().tolist()
        [[1.0, 0.0], [0.0, 1.0]]
        """
        return self._dense(self._dtype)

    def _dense(self, dtype: Any) -> Any:
        m, n = self._shape
        _validate.ensure_fits(m * n * np.dtype(dtype).itemsize, f"a dense {m}x{n} array", self._backend)
        if self._backend == "cpu":
            return self._scipy_view(0).toarray().astype(dtype, copy=False)
        return ew.to_dense(*self._canonical_lines(0), self._shape, dtype, self._xp)

    # ------------------------------------------------------------------ reductions
    def diagonal(self, k: int = 0) -> Any:
        """The k-th diagonal ``A[i, i + k]`` as a dense 1-D array, as SciPy.

        Parameters
        ----------
        k : int, optional
            0 the main diagonal, positive above it, negative below.

        Returns
        -------
        ndarray
            On the matrix's backend, its dtype; empty when the diagonal lies outside the matrix.

        Raises
        ------
        TypeError
            ``k`` not an integer.

        Examples
        --------
        >>> import numpy as np, scipy.sparse as sp, sparsegpu
        >>> A = sparsegpu.from_scipy(sp.csr_array(np.arange(1.0, 7.0).reshape(2, 3)), backend="cpu")
        >>> A.diagonal().tolist(), A.diagonal(1).tolist(), A.diagonal(-1).tolist()
        ([1.0, 5.0], [2.0, 6.0], [4.0])
        """
        k = _validate.check_int("k", k)
        if self.format == "csc":
            return ew.diagonal(*self._canonical_lines(1), self._shape[::-1], -k, self._xp)
        return ew.diagonal(*self._canonical_lines(0), self._shape, k, self._xp)

    def sum(self, axis: Any = None, dtype: Any = None) -> Any:
        """The sum of the entries, as SciPy's sparse arrays return it.

        Parameters
        ----------
        axis : {None, 0, 1, -2, -1}, optional
            None: everything; 0: each column; 1: each row.
        dtype : dtype, optional
            Sum in this value dtype (default the matrix's).

        Returns
        -------
        scalar or ndarray
            axis None: a NumPy scalar (a 0-d CuPy array on the GPU backend); otherwise a 1-D
            array on the matrix's backend. Bitwise reproducible (fixed summation order).

        Raises
        ------
        ValueError
            An invalid ``axis``.
        TypeError
            ``axis`` not an integer; an unsupported ``dtype``.

        Examples
        --------
        >>> import numpy as np, scipy.sparse as sp, sparsegpu
        >>> A = sparsegpu.from_scipy(sp.csr_array(np.array([[1.0, 2.0], [0.0, 3.0]])), backend="cpu")
        >>> float(A.sum()), A.sum(axis=0).tolist(), A.sum(axis=1).tolist()
        (6.0, [1.0, 5.0], [3.0, 3.0])
        """
        axis = red.check_axis(axis)
        target = self._dtype if dtype is None else _validate.requested_value_dtype(dtype)
        if axis is None:
            return red.total(self._lines(0)[2].astype(target, copy=False))
        if self._backend == "cpu" and self.format in COMPRESSED:  # SciPy's pass, no transposed copy
            return self._scipy_view(0 if self.format == "csr" else 1).sum(axis=axis, dtype=target)
        indptr, _, data = self._lines(1 - axis)
        return red.line_sums(indptr, data.astype(target, copy=False))

    def max(self, axis: Any = None, *, explicit: bool = False) -> Any:
        """The largest entry, counting the implicit zeros (unless ``explicit``), as SciPy.

        Parameters
        ----------
        axis : {None, 0, 1, -2, -1}, optional
            None: over everything; 0: each column; 1: each row.
        explicit : bool, optional
            Only the stored entries count (a row without any gives 0).

        Returns
        -------
        scalar or ndarray
            axis None: a NumPy scalar (a 0-d CuPy array on the GPU backend). Otherwise a dense
            1-D array on the matrix's backend (SciPy returns a 1-D COO array). NaN propagates;
            complex values compare as NumPy compares them (real part, then imaginary).

        Raises
        ------
        ValueError
            An invalid ``axis``; a reduction over an empty axis (as SciPy).
        TypeError
            ``axis`` not an integer, ``explicit`` not a bool.

        Examples
        --------
        >>> import numpy as np, scipy.sparse as sp, sparsegpu
        >>> A = sparsegpu.from_scipy(sp.csr_array(np.array([[-1.0, -2.0], [0.0, 3.0]])), backend="cpu")
        >>> float(A.max()), A.max(axis=1).tolist(), A.max(axis=0, explicit=True).tolist()
        (3.0, [-1.0, 3.0], [-1.0, 3.0])
        """
        return self._extreme("max", axis, explicit)

    def min(self, axis: Any = None, *, explicit: bool = False) -> Any:
        """The smallest entry, counting the implicit zeros (unless ``explicit``), as SciPy.

        Parameters
        ----------
        axis : {None, 0, 1, -2, -1}, optional
            None: over everything; 0: each column; 1: each row.
        explicit : bool, optional
            Only the stored entries count (a row without any gives 0).

        Returns
        -------
        scalar or ndarray
            As for :meth:`max`.

        Raises
        ------
        ValueError
            An invalid ``axis``; a reduction over an empty axis (as SciPy).
        TypeError
            ``axis`` not an integer, ``explicit`` not a bool.

        Examples
        --------
        >>> import numpy as np, scipy.sparse as sp, sparsegpu
        >>> A = sparsegpu.from_scipy(sp.csr_array(np.array([[1.0, 2.0], [0.0, 3.0]])), backend="cpu")
        >>> float(A.min()), A.min(axis=1).tolist(), float(A.min(explicit=True))
        (0.0, [1.0, 0.0], 1.0)
        """
        return self._extreme("min", axis, explicit)

    def _extreme(self, op: str, axis: Any, explicit: bool) -> Any:
        axis = red.check_axis(axis)
        explicit = _validate.check_bool("explicit", explicit)
        red.check_nonempty(self._shape, axis, op)
        if axis is None:
            _, _, data = self._canonical_lines(0)
            return red.extreme(data, self._shape[0] * self._shape[1], op, explicit, self._xp)
        indptr, _, data = self._canonical_lines(1 - axis)
        return red.line_extremes(indptr, data, self._shape[axis], op, explicit, self._xp)

    # ------------------------------------------------------------------ rows
    def __getitem__(self, key: Any) -> Any:
        """Rows ``A[i:j]``, ``A[i:j:step]``, ``A[rows]`` (integers, negatives from the end,
        repeats allowed, or a boolean mask), each optionally followed by ``, :``, as SciPy.

        Parameters
        ----------
        key : slice, sequence of int, ndarray of int or bool, or (rows, :)
            The rows, in the order given; a NumPy or CuPy array for a GPU matrix.

        Returns
        -------
        SparseMatrix
            CSR for CSR, CSC for CSC, COO for COO; CSR for the other formats.

        Raises
        ------
        TypeError
            A single integer (use ``A[i:i+1]``), a column index, or an index of another kind.
        IndexError
            A row index out of range.

        Examples
        --------
        >>> import numpy as np, scipy.sparse as sp, sparsegpu
        >>> A = sparsegpu.from_scipy(sp.csr_array(np.arange(6.0).reshape(3, 2)), backend="cpu")
        >>> A[1:].to_scipy().toarray().tolist(), A[[-1, 0]].to_scipy().toarray().tolist()
        ([[2.0, 3.0], [4.0, 5.0]], [[4.0, 5.0], [0.0, 1.0]])
        """
        rows = self._row_key(key)
        if isinstance(rows, slice) and rows.step == 1:
            arrays = ew.slice_lines(*self._lines(0), rows.start, rows.stop)
            count = rows.stop - rows.start
        else:
            rows = self._row_array(rows)
            arrays = ew.select_lines(*self._lines(0), rows, self._xp)
            count = int(rows.size)
        result = self._compressed(arrays, 0, (count, self._shape[1]))
        return result if self.format == "csr" else result.asformat(self.format if self.format in ("csc", "coo") else "csr")

    def _row_key(self, key: Any) -> Any:
        """The row part of an index, with SciPy's forms; a normalised slice when it is one."""
        if isinstance(key, tuple):
            if len(key) != 2 or not (isinstance(key[1], slice) and key[1] == slice(None)):
                raise TypeError(f"only row indexing is supported (A[rows] or A[rows, :]), got {key!r}")
            key = key[0]
        if isinstance(key, slice):
            start, stop, step = key.indices(self._shape[0])
            if step == 1:
                return slice(start, max(start, stop), 1)
            return key
        if isinstance(key, (int, np.integer)) and not isinstance(key, (bool, np.bool_)):
            raise TypeError(f"A[{key}] would be a 1-D row, which sparsegpu does not hold; use A[{key}:{key}+1] "
                            f"or A[[{key}]] for a 1-row matrix")
        return key

    def _row_array(self, key: Any) -> Any:
        """Row indices (int64, on the matrix's backend) from a step slice, integers or a mask."""
        m, xp = self._shape[0], self._xp
        if isinstance(key, slice):
            return xp.arange(*key.indices(m), dtype=np.int64)
        if not (hasattr(key, "dtype") and hasattr(key, "ndim")):
            try:
                key = np.asarray(key)
            except (TypeError, ValueError):
                raise TypeError(f"rows must be a slice, integers or booleans, got {type(key).__name__}") from None
        if is_device_array(key) and self._backend == "cpu":
            raise TypeError("rows is a CuPy array but this matrix lives on the CPU backend; pass a NumPy array")
        key = to_backend(key, self._backend)
        if key.ndim != 1 or key.dtype.kind not in "biu":
            raise TypeError(f"rows must be a 1-D array of integers or booleans, got shape {tuple(key.shape)} "
                            f"and dtype {key.dtype}")
        if key.dtype.kind == "b":
            if key.size != m:
                raise IndexError(f"a boolean row mask must have length {m}, got {key.size}")
            return xp.flatnonzero(key).astype(np.int64)
        rows = key.astype(np.int64)
        if rows.size:
            low, high = int(rows.min()), int(rows.max())
            if low < -m or high >= m:
                raise IndexError(f"row index {low if low < -m else high} is out of range for {m} rows")
        return xp.where(rows < 0, rows + m, rows)

    def eliminate_zeros(self) -> None:
        """Remove the stored entries equal to zero, in place (as SciPy).

        The matrix keeps its format (a padded format is rebuilt with its layout parameters)
        and its cached plans are dropped.

        Returns
        -------
        None

        Examples
        --------
        >>> import numpy as np, sparsegpu
        >>> A = sparsegpu.CSR((np.array([1.0, 0.0]), np.array([0, 1]), np.array([0, 1, 2])), (2, 2), backend="cpu")
        >>> A.eliminate_zeros()
        >>> A.nnz
        1
        """
        xp = self._xp
        if self.format == "coo":
            keep = xp.flatnonzero(self.data != 0)
            self._set(self.row[keep], self.col[keep], self.data[keep], self._shape, self._backend)
            return
        axis = 1 if self.format == "csc" else 0
        indptr, indices, data = ew.drop_zeros(*self._lines(axis), xp)
        if self.format in COMPRESSED:
            self._set(data, indices, indptr, self._shape, self._backend)
            return
        rebuilt = self._rebuilt(self._compressed((indptr, indices, data), 0))
        self.__dict__.update(rebuilt.__dict__)
        self._cache = {}

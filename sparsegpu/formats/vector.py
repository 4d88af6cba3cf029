"""SparseVector: a length, sorted unique indices and their values (a frontier of a graph
traversal); NumPy or CuPy arrays. :meth:`SparseMatrix.spmspv` takes and returns them."""

from __future__ import annotations

from typing import Any

import numpy as np

from sparsegpu import _validate
from sparsegpu._backend import array_module, backend_of


class SparseVector:
    """A sparse vector of length ``n``: ``values[k]`` sits at ``indices[k]``.

    Parameters
    ----------
    n : int
        The length.
    indices : ndarray
        1-D integer array (int32 or int64 kept, other integers made int64), strictly increasing,
        in ``[0, n)``.
    values : ndarray
        1-D, as many as ``indices``; float32, float64, complex64 or complex128 (other numbers,
        booleans included, are stored as float64). Same array library (NumPy or CuPy) as
        ``indices``.
    check : bool, optional
        Validate sortedness and range (one pass; default True).

    Raises
    ------
    TypeError
        Arrays of different libraries, non-integer indices, an unsupported value dtype.
    ValueError
        A negative ``n``; lengths that differ; indices unsorted, repeated or out of range.

    Examples
    --------
    >>> import numpy as np
    >>> from sparsegpu.formats.vector import SparseVector
    >>> v = SparseVector(5, np.array([1, 3]), np.array([2.0, 4.0]))
    >>> v, v.to_dense().tolist()
    (SparseVector(n=5, nnz=2, float64, on cpu), [0.0, 2.0, 0.0, 4.0, 0.0])
    """

    def __init__(self, n: int, indices: Any, values: Any, *, check: bool = True) -> None:
        self.n = _validate.check_int("n", n, minimum=0)
        if not hasattr(indices, "dtype"):
            indices = np.asarray(indices)
        if not hasattr(values, "dtype"):
            values = np.asarray(values)
        if backend_of(indices) != backend_of(values):
            raise TypeError("indices and values must both be NumPy arrays or both CuPy arrays")
        if indices.dtype.kind not in "iu":
            raise TypeError(f"indices must be integers, got {indices.dtype}")
        if indices.ndim != 1 or values.ndim != 1 or indices.shape[0] != values.shape[0]:
            raise ValueError(f"indices and values must be 1-D of one length, got shapes {tuple(indices.shape)} "
                             f"and {tuple(values.shape)}")
        if indices.dtype not in (np.int32, np.int64):
            indices = indices.astype(np.int64)
        values = values.astype(_validate.value_dtype(values.dtype), copy=False)
        if _validate.check_bool("check", check) and indices.size:
            xp = array_module(backend_of(indices))
            if int(indices[0]) < 0 or int(indices[-1]) >= self.n or bool(xp.any(indices[1:] <= indices[:-1])):
                raise ValueError(f"indices must be strictly increasing and in [0, {self.n})")
        self.indices, self.values = indices, values

    @classmethod
    def from_dense(cls, dense: Any, *, keep: Any = None) -> SparseVector:
        """The entries of a 1-D array that are nonzero (or where ``keep`` is true).

        Parameters
        ----------
        dense : ndarray
            1-D NumPy or CuPy array.
        keep : ndarray of bool, optional
            Which positions to store (default: ``dense != 0``).

        Returns
        -------
        SparseVector
            On ``dense``'s array library.

        Examples
        --------
        >>> import numpy as np
        >>> from sparsegpu.formats.vector import SparseVector
        >>> SparseVector.from_dense(np.array([0.0, 5.0, 0.0])).indices.tolist()
        [1]
        """
        if not hasattr(dense, "dtype"):
            dense = np.asarray(dense)
        if dense.ndim != 1:
            raise ValueError(f"dense must be 1-D, got shape {tuple(dense.shape)}")
        xp = array_module(backend_of(dense))
        keep = dense != 0 if keep is None else xp.asarray(keep, dtype=bool)
        if keep.shape != dense.shape:
            raise ValueError(f"keep must have dense's shape {tuple(dense.shape)}, got {tuple(keep.shape)}")
        index_dtype = np.int32 if dense.size <= np.iinfo(np.int32).max else np.int64
        indices = xp.flatnonzero(keep).astype(index_dtype)
        return cls(dense.size, indices, dense[indices], check=False)

    def to_dense(self, fill: Any = 0) -> Any:
        """A dense array of length ``n``: the values at their indices, ``fill`` elsewhere."""
        xp = self._xp
        out = xp.full(self.n, fill, dtype=self.values.dtype)
        out[self.indices] = self.values
        return out

    @property
    def nnz(self) -> int:
        """Stored entries."""
        return int(self.indices.size)

    @property
    def dtype(self) -> np.dtype:
        return self.values.dtype

    @property
    def backend(self) -> str:
        """``"gpu"`` for CuPy arrays, ``"cpu"`` for NumPy."""
        return backend_of(self.indices)

    @property
    def _xp(self) -> Any:
        return array_module(self.backend)

    def __repr__(self) -> str:
        return f"SparseVector(n={self.n}, nnz={self.nnz}, {self.values.dtype}, on {self.backend})"
